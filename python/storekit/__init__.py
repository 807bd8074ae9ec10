"""StoreKit's payment queue for Python: a client of storekitd over libstorekit (ctypes).

StoreKit 1's model: open a Connection as your app id, set an observer, add payments, and finish
each transaction once its content is delivered; storekitd keeps every transaction in a durable
queue and delivers it again at each start until it is finished.

    import storekit

    with storekit.Connection("com.example.game") as conn:
        transaction = conn.buy("com.example.game.coins100")       # waits for purchased
        payload = conn.verify_jws(transaction.jws)                 # checked against storekitd's root
        conn.finish_and_wait(transaction)

Event loops: poll conn.fileno() for readability and call conn.dispatch(), which calls the
observer set with conn.set_observer(); or use storekit.aio with asyncio.

The library is found as $STOREKIT_LIBRARY, else libstorekit.so.0 (ctypes.util.find_library);
the daemon's socket as $STOREKITD_SOCKET, else the user's or the system's storekitd; the root
certificate as $STOREKIT_ROOT_CERTIFICATE, else where storekitd publishes it.
"""

from ._connection import Connection, library, verify_jws
from ._errors import (DisconnectedError, ErrorCode, LibraryNotFoundError, NoDaemonError, NotFinishableError,
                      PaymentError, PermissionDeniedError, SKErrorCode, StoreKitError, TimedOutError,
                      TransactionNotFoundError, UnknownAppError, VerificationError)
from ._models import (Disconnected, EntitlementsRevoked, Event, Product, ProductsReceived, ProductType,
                      PromotedPurchase, ReceiptReceived, Reconnected, RequestResult, RestoreFinished,
                      Storefront, StorefrontChanged, Transaction, TransactionsRemoved, TransactionState,
                      TransactionsUpdated)

__version__ = "0.1.0"


def strerror(code):
    """storekit_strerror: a short English description of an ErrorCode."""
    from ._errors import describe
    return describe(code)


__all__ = [
    "Connection", "library", "verify_jws", "strerror",
    "StoreKitError", "LibraryNotFoundError", "NoDaemonError", "UnknownAppError", "PermissionDeniedError",
    "TransactionNotFoundError", "NotFinishableError", "DisconnectedError", "TimedOutError",
    "VerificationError", "PaymentError", "ErrorCode", "SKErrorCode",
    "Transaction", "TransactionState", "Product", "ProductType", "Storefront",
    "Event", "TransactionsUpdated", "TransactionsRemoved", "RequestResult", "ProductsReceived",
    "RestoreFinished", "EntitlementsRevoked", "StorefrontChanged", "PromotedPurchase", "ReceiptReceived",
    "Disconnected", "Reconnected",
]
