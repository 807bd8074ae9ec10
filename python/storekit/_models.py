"""Transactions, products and observer events as Python values.

libstorekit's views are valid only during the observer call that hands them over; everything
here is copied out of them at once, so these objects can be kept, compared and passed between
tasks freely.
"""

import ctypes
import dataclasses
import datetime
import decimal
import enum
from typing import Optional, Tuple

from . import _lib
from ._errors import ErrorCode, SKErrorCode, _code, _skerror, make_error


class TransactionState(enum.IntEnum):
    """SKPaymentTransactionState's raw values."""

    PURCHASING = 0
    PURCHASED = 1
    FAILED = 2
    RESTORED = 3
    DEFERRED = 4


class ProductType(enum.IntEnum):
    """The kind of in-app purchase."""

    CONSUMABLE = 0
    NON_CONSUMABLE = 1
    AUTO_RENEWABLE = 2
    NON_RENEWING = 3


def _date(milliseconds):
    """ms since the epoch as an aware UTC datetime; 0 (absent) as None."""
    if not milliseconds:
        return None
    return datetime.datetime.fromtimestamp(milliseconds / 1000, tz=datetime.timezone.utc)


@dataclasses.dataclass(frozen=True)
class Transaction:
    """A payment-queue transaction (SKPaymentTransaction), as the event that carried it showed it."""

    id: int
    transaction_identifier: str
    product_id: str
    quantity: int
    state: TransactionState
    date: Optional[datetime.datetime]
    finished: bool = False
    original_id: Optional[int] = None
    error_code: Optional[SKErrorCode] = None
    error_message: Optional[str] = None
    revocation_date: Optional[datetime.datetime] = None
    expires_date: Optional[datetime.datetime] = None
    application_username: Optional[str] = None
    jws: Optional[str] = dataclasses.field(default=None, repr=False)

    @classmethod
    def _from_view(cls, lib, view):
        state = lib.storekit_transaction_state_of(view)
        try:
            state = TransactionState(state)
        except ValueError:
            pass
        error_code = lib.storekit_transaction_error_code(view)
        identifier = lib.storekit_transaction_id(view)
        return cls(
            id=identifier,
            transaction_identifier=_lib.text(lib.storekit_transaction_identifier(view)) or str(identifier),
            product_id=_lib.text(lib.storekit_transaction_product_id(view)) or "",
            quantity=lib.storekit_transaction_quantity(view),
            state=state,
            date=_date(lib.storekit_transaction_date(view)),
            finished=bool(lib.storekit_transaction_is_finished(view)),
            original_id=lib.storekit_transaction_original_id(view) or None,
            error_code=_skerror(error_code) if state == TransactionState.FAILED else None,
            error_message=_lib.text(lib.storekit_transaction_error_message(view)),
            revocation_date=_date(lib.storekit_transaction_revocation_date(view)),
            expires_date=_date(lib.storekit_transaction_expires_date(view)),
            application_username=_lib.text(lib.storekit_transaction_application_username(view)),
            jws=_lib.text(lib.storekit_transaction_jws(view)),
        )


@dataclasses.dataclass(frozen=True)
class Product:
    """A product of the app's catalogue (SKProduct)."""

    product_id: str
    type: ProductType
    title: str
    description: str
    price: decimal.Decimal
    display_price: str
    currency_code: Optional[str] = None
    locale: Optional[str] = None
    subscription_group_id: Optional[str] = None
    subscription_period: Optional[str] = None
    is_family_shareable: bool = False

    @classmethod
    def _from_view(cls, lib, view):
        kind = lib.storekit_product_type_of(view)
        try:
            kind = ProductType(kind)
        except ValueError:
            pass
        return cls(
            product_id=_lib.text(lib.storekit_product_id(view)) or "",
            type=kind,
            title=_lib.text(lib.storekit_product_title(view)) or "",
            description=_lib.text(lib.storekit_product_description(view)) or "",
            price=decimal.Decimal(lib.storekit_product_price_cents(view)).scaleb(-2),
            display_price=_lib.text(lib.storekit_product_display_price(view)) or "",
            currency_code=_lib.text(lib.storekit_product_currency_code(view)),
            locale=_lib.text(lib.storekit_product_locale(view)),
            subscription_group_id=_lib.text(lib.storekit_product_subscription_group_id(view)),
            subscription_period=_lib.text(lib.storekit_product_subscription_period(view)),
            is_family_shareable=bool(lib.storekit_product_is_family_shareable(view)),
        )


@dataclasses.dataclass(frozen=True)
class Storefront:
    """The App Store storefront in force ("USA", "143441")."""

    country_code: str
    id: str


# ---- events: what the observer receives ----------------------------------------------------


class Event:
    """Base class of everything an observer receives."""


@dataclasses.dataclass(frozen=True)
class TransactionsUpdated(Event):
    """paymentQueue(_:updatedTransactions:): new or changed transactions (and, when the observer
    is set, every unfinished one: finish each once its content is delivered)."""

    transactions: Tuple[Transaction, ...]


@dataclasses.dataclass(frozen=True)
class TransactionsRemoved(Event):
    """paymentQueue(_:removedTransactions:): finished transactions left the queue."""

    transactions: Tuple[Transaction, ...]


@dataclasses.dataclass(frozen=True)
class RequestResult(Event):
    """The answer to a request: `error` is ErrorCode.OK or why it was refused; `value` the
    transaction id of an add_payment or finish, the number of transactions a restore made."""

    request_id: int
    error: ErrorCode
    skerror_code: Optional[SKErrorCode]
    value: int
    message: str

    @property
    def ok(self):
        return self.error == ErrorCode.OK

    def exception(self, cls=None):
        """The StoreKitError this result stands for, or None when it succeeded."""
        if self.ok:
            return None
        return make_error(self.error, self.message, self.skerror_code, cls)


@dataclasses.dataclass(frozen=True)
class ProductsReceived(Event):
    """The answer to request_products (SKProductsResponse): the known products in request order
    and the identifiers the catalogue does not hold."""

    request_id: int
    products: Tuple[Product, ...]
    invalid_identifiers: Tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class RestoreFinished(Event):
    """paymentQueueRestoreCompletedTransactionsFinished (error OK) or …FailedWithError; the
    request id of the restore() it ends."""

    error: ErrorCode
    message: str
    request_id: int = 0

    @property
    def ok(self):
        return self.error == ErrorCode.OK


@dataclasses.dataclass(frozen=True)
class EntitlementsRevoked(Event):
    """paymentQueue(_:didRevokeEntitlementsForProductIdentifiers:)."""

    product_ids: Tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class StorefrontChanged(Event):
    """paymentQueueDidChangeStorefront: `storefront` is the new one."""

    storefront: Optional[Storefront] = None


@dataclasses.dataclass(frozen=True)
class PromotedPurchase(Event):
    """paymentQueue(_:shouldAddStorePayment:for:): buy `product` with add_payment to accept."""

    product: Product


@dataclasses.dataclass(frozen=True)
class ReceiptReceived(Event):
    """The app receipt (PKCS#7 DER bytes) answering request_receipt."""

    request_id: int
    data: bytes = dataclasses.field(repr=False)


@dataclasses.dataclass(frozen=True)
class Disconnected(Event):
    """The connection was lost; the library is reconnecting. Requests without an answer get a
    RequestResult with ErrorCode.DISCONNECTED."""

    error: ErrorCode = ErrorCode.DISCONNECTED
    message: str = ""


@dataclasses.dataclass(frozen=True)
class Reconnected(Event):
    """The connection is back; the unfinished transactions arrive again as TransactionsUpdated."""


# storekit_event_kind values
_UPDATED, _REMOVED, _RESULT, _PRODUCTS, _RESTORE_FINISHED, _REVOKED, _STOREFRONT, _PROMOTED, \
    _RECEIPT, _DISCONNECTED, _RECONNECTED = range(1, 12)


def event_from_view(lib, handle, view):
    """The Event for a storekit_event (copied); None for a kind this module does not know."""
    kind = lib.storekit_event_kind_of(view)
    if kind in (_UPDATED, _REMOVED):
        count = lib.storekit_event_transaction_count(view)
        transactions = tuple(Transaction._from_view(lib, lib.storekit_event_transaction(view, index))
                             for index in range(count))
        return TransactionsUpdated(transactions) if kind == _UPDATED else TransactionsRemoved(transactions)
    message = _lib.text(lib.storekit_event_message(view)) or ""
    if kind == _RESULT:
        error = _code(lib.storekit_event_error(view))
        return RequestResult(
            request_id=lib.storekit_event_request_id(view),
            error=error,
            skerror_code=_skerror(lib.storekit_event_skerror_code(view)) if error == ErrorCode.STOREKIT else None,
            value=lib.storekit_event_value(view),
            message=message)
    if kind == _PRODUCTS:
        products = tuple(Product._from_view(lib, lib.storekit_event_product(view, index))
                         for index in range(lib.storekit_event_product_count(view)))
        return ProductsReceived(lib.storekit_event_request_id(view), products, _identifiers(lib, view))
    if kind == _RESTORE_FINISHED:
        return RestoreFinished(_code(lib.storekit_event_error(view)), message, lib.storekit_event_request_id(view))
    if kind == _REVOKED:
        return EntitlementsRevoked(_identifiers(lib, view))
    if kind == _STOREFRONT:
        return StorefrontChanged(storefront_of(lib, handle))
    if kind == _PROMOTED:
        if lib.storekit_event_product_count(view) < 1:
            return None
        return PromotedPurchase(Product._from_view(lib, lib.storekit_event_product(view, 0)))
    if kind == _RECEIPT:
        length = _lib.c_size_t(0)
        pointer = lib.storekit_event_data(view, ctypes.byref(length))
        data = ctypes.string_at(pointer, length.value) if pointer else b""
        return ReceiptReceived(lib.storekit_event_request_id(view), data)
    if kind == _DISCONNECTED:
        return Disconnected(_code(lib.storekit_event_error(view)) or ErrorCode.DISCONNECTED, message)
    if kind == _RECONNECTED:
        return Reconnected()
    return None


def _identifiers(lib, view):
    return tuple(_lib.text(lib.storekit_event_identifier(view, index)) or ""
                 for index in range(lib.storekit_event_identifier_count(view)))


def storefront_of(lib, handle):
    code = _lib.text(lib.storekit_storefront_country_code(handle))
    identifier = _lib.text(lib.storekit_storefront_id(handle))
    if code is None and identifier is None:
        return None
    return Storefront(code or "", identifier or "")
