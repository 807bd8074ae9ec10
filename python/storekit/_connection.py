"""storekit.Connection: one libstorekit handle, its events turned into Python values, and the
blocking conveniences for scripts.

How events flow: libstorekit calls one C observer (a ctypes trampoline) inside
storekit_dispatch/storekit_wait; the trampoline only copies the event into a Python value and
queues it. When the C call has returned, the queued events go to the internal listeners (what
a blocking call or an awaited request waits for) and then to the app's observer, so that an
exception raised by the observer comes out of dispatch() instead of being lost inside a ctypes
callback.

libstorekit hands events (request answers included) only to an observer, and setting one
subscribes the connection to its queue's pushes; so the connection sets its trampoline before
its first request, or when the app sets an observer, and never removes it while open.
"""

import ctypes
import json
import time

from . import _lib
from ._errors import (ErrorCode, LibraryNotFoundError, StoreKitError, TimedOutError, VerificationError,
                      make_error)
from ._models import Transaction, event_from_view, storefront_of
from ._trackers import (ProductsTracker, PurchaseTracker, ReceiptTracker, RestoreTracker, ResultTracker)


def library():
    """The loaded libstorekit (ctypes.CDLL); raises LibraryNotFoundError."""
    try:
        return _lib.load()
    except _lib.LibraryNotFound as error:
        raise LibraryNotFoundError(str(error)) from None


def _utf8(value, name):
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    return value.encode("utf-8")


class Connection:
    """A connection to storekitd as app `app_id` (StoreKit 1's SKPaymentQueue for one app).

    Opening blocks until the daemon welcomes or refuses the app (UnknownAppError,
    NoDaemonError, …). Use it as a context manager, or call close().
    Not thread-safe: use one connection from one thread at a time.
    """

    def __init__(self, app_id):
        lib = library()
        handle = _lib.handle_p()
        code = lib.storekit_open(_utf8(app_id, "app_id"), ctypes.byref(handle))
        if code != ErrorCode.OK or not handle.value:
            raise make_error(code or ErrorCode.INTERNAL, _lib.text(lib.storekit_open_error_message()) or "")
        self._lib = lib
        self._handle = handle.value
        self.app_id = app_id
        self._trampoline = _lib.OBSERVER(self._on_event)
        self._subscribed = False
        self._observer = None
        self._pending = []
        self._listeners = []
        self._callback_error = None

    # ---- lifetime ------------------------------------------------------------------------

    def close(self):
        """Closes the connection (idempotent)."""
        handle, self._handle = self._handle, None
        if handle is not None:
            self._lib.storekit_close(handle)
        self._listeners.clear()
        self._pending.clear()

    @property
    def closed(self):
        return self._handle is None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        state = "closed" if self.closed else f"fd={self.fileno()}"
        return f"<storekit.Connection {self.app_id!r} {state}>"

    def _live(self):
        if self._handle is None:
            raise StoreKitError(ErrorCode.BAD_ARGUMENT, "the connection is closed")
        return self._handle

    # ---- properties ----------------------------------------------------------------------

    def fileno(self):
        """The descriptor to poll for readability; the same for the connection's whole life."""
        return self._lib.storekit_fd(self._live())

    @property
    def uid(self):
        """The uid the daemon sees for this connection."""
        return self._lib.storekit_uid(self._live())

    @property
    def storefront(self):
        """The storefront in force (Storefront(country_code, id)), or None before it is known."""
        return storefront_of(self._lib, self._live())

    @property
    def last_message(self):
        """What the last failing call or error event on this connection said, in words."""
        return _lib.text(self._lib.storekit_last_message(self._live())) or ""

    def _error(self, code, cls=None):
        return make_error(code, self.last_message if self._handle else "", cls=cls)

    # ---- events --------------------------------------------------------------------------

    def set_observer(self, observer):
        """Sends every event to `observer(event)` from now on (SKPaymentQueue.add(_:)).

        Setting an observer (re)subscribes: every unfinished transaction arrives at once as
        TransactionsUpdated; finish each once its content is delivered. None removes the
        observer (events are then only seen by the blocking calls and storekit.aio).
        The observer runs inside dispatch()/wait(), on the calling thread; what it raises comes
        out of that call.
        """
        if observer is not None and not callable(observer):
            raise TypeError("the observer must be callable")
        self._observer = observer
        if observer is not None:
            self._subscribe()

    def _subscribe(self):
        result = self._lib.storekit_set_observer(self._live(), self._trampoline, None)
        # While the library reconnects it keeps the observer and subscribes once it is back.
        if result < 0 and -result != ErrorCode.DISCONNECTED:
            raise self._error(-result)
        self._subscribed = True

    def _ensure_subscribed(self):
        if not self._subscribed:
            self._subscribe()

    def _on_event(self, handle, view, userdata):
        # Inside the C library: copy, queue, return; never raise through C.
        try:
            event = event_from_view(self._lib, handle, view)
        except BaseException as error:  # noqa: BLE001 — handed to dispatch's caller
            self._callback_error = error
            return
        if event is not None:
            self._pending.append(event)

    def _deliver(self):
        error, self._callback_error = self._callback_error, None
        while self._pending:
            event = self._pending.pop(0)
            for listener in list(self._listeners):
                listener(event)
            if self._observer is not None:
                self._observer(event)
        if error is not None:
            raise error

    # A frame the library could not read: that connection is dropped and made again, the handle
    # goes on, and the observer hears Disconnected with this error; not worth an exception.
    _GOES_ON = (ErrorCode.OK, ErrorCode.PROTOCOL)

    def dispatch(self):
        """Handles whatever has arrived (calling the observer) and sends what waits; never blocks."""
        code = self._lib.storekit_dispatch(self._live())
        self._deliver()
        if code not in self._GOES_ON:
            raise self._error(code)

    def wait(self, timeout=None):
        """Waits up to `timeout` seconds (None: forever) for events, then dispatches them.
        Returns False when the timeout passed with nothing to read."""
        milliseconds = -1 if timeout is None else min(max(0, int(timeout * 1000 + 0.999)), 2**31 - 1)
        code = self._lib.storekit_wait(self._live(), milliseconds)
        self._deliver()
        if code == ErrorCode.TIMED_OUT:
            return False
        if code not in self._GOES_ON:
            raise self._error(code)
        return True

    # ---- requests: each returns a request id, answered by an event ------------------------

    def _request(self, result):
        if result < 0:
            raise self._error(-result)
        return result

    def add_payment(self, product_id, quantity=1, application_username=None):
        """SKPaymentQueue.add(_ payment:): the RequestResult's value is the new transaction's id;
        its states arrive as TransactionsUpdated. Returns the request id."""
        self._ensure_subscribed()
        username = None if application_username is None else _utf8(application_username, "application_username")
        return self._request(self._lib.storekit_add_payment(
            self._live(), _utf8(product_id, "product_id"), int(quantity), username))

    def finish(self, transaction):
        """finishTransaction(_:) for a Transaction or a transaction id. Returns the request id."""
        self._ensure_subscribed()
        identifier = transaction.id if isinstance(transaction, Transaction) else int(transaction)
        return self._request(self._lib.storekit_finish(self._live(), identifier))

    def restore(self, application_username=None):
        """restoreCompletedTransactions: restored transactions arrive as TransactionsUpdated,
        then RestoreFinished. Returns the request id."""
        self._ensure_subscribed()
        username = None if application_username is None else _utf8(application_username, "application_username")
        return self._request(self._lib.storekit_restore(self._live(), username))

    def request_products(self, product_ids):
        """SKProductsRequest: answered by ProductsReceived. Returns the request id."""
        if isinstance(product_ids, str):
            product_ids = [product_ids]
        encoded = [_utf8(identifier, "product id") for identifier in product_ids]
        array = (_lib.c_char_p * max(1, len(encoded)))(*encoded)
        self._ensure_subscribed()
        return self._request(self._lib.storekit_request_products(self._live(), array, len(encoded)))

    def request_receipt(self):
        """SKReceiptRefreshRequest: answered by ReceiptReceived. Returns the request id."""
        self._ensure_subscribed()
        return self._request(self._lib.storekit_request_receipt(self._live()))

    # ---- blocking conveniences -----------------------------------------------------------

    def _run(self, tracker, timeout):
        """Dispatches until `tracker` is done; its result, or TimedOutError."""
        self._listeners.append(tracker.feed)
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            while not tracker.done:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimedOutError(ErrorCode.TIMED_OUT,
                                        f"no answer from storekitd within {timeout:g} s (request {tracker.request_id})")
                self.wait(remaining)
        finally:
            self._listeners.remove(tracker.feed)
        return tracker.result()

    def products(self, product_ids, timeout=10):
        """The products the catalogue holds: ProductsReceived (.products, .invalid_identifiers)."""
        return self._run(ProductsTracker(self.request_products(product_ids)), timeout)

    def buy(self, product_id, quantity=1, application_username=None, timeout=30):
        """Adds a payment and waits until its transaction leaves purchasing: returns it when
        purchased (or restored). Raises PaymentError when the payment is refused (no transaction)
        or its transaction failed or was deferred (`.transaction`). Finish the transaction once
        its content is delivered."""
        request = self.add_payment(product_id, quantity, application_username)
        return self._run(PurchaseTracker(request, product_id), timeout)

    def finish_and_wait(self, transaction, timeout=10):
        """finish() and wait for the daemon's answer (raises when refused, e.g.
        TransactionNotFoundError, NotFinishableError)."""
        self._run(ResultTracker(self.finish(transaction)), timeout)

    def restore_and_wait(self, application_username=None, timeout=30):
        """restore() and wait until it finished: the transactions it restored (finish each)."""
        return self._run(RestoreTracker(self.restore(application_username)), timeout)

    def receipt(self, timeout=30):
        """The app receipt (PKCS#7 DER bytes), refreshed."""
        return self._run(ReceiptTracker(self.request_receipt()), timeout)

    # ---- signed data ---------------------------------------------------------------------

    def verify_jws(self, jws, root_certificate=None):
        """Checks a transaction's JWS against storekitd's root (found as OpenStoreKit finds it,
        or the file `root_certificate`); returns the payload as parsed JSON. Raises
        VerificationError (`.kind`)."""
        if root_certificate is not None:
            return verify_jws(jws, root_certificate)
        payload = ctypes.POINTER(ctypes.c_char)()
        code = self._lib.storekit_verify_jws(self._live(), _utf8(jws, "jws"), ctypes.byref(payload))
        return _payload(code, payload, self.last_message)

    def verify_receipt(self, receipt):
        """Checks an app receipt's PKCS#7 signature against storekitd's root; raises
        VerificationError."""
        data = bytes(receipt)
        buffer = (ctypes.c_uint8 * max(1, len(data))).from_buffer_copy(data or b"\0")
        code = self._lib.storekit_verify_receipt(self._live(), buffer, len(data))
        if code != ErrorCode.OK:
            raise make_error(code, self.last_message, cls=VerificationError)


def verify_jws(jws, root_certificate):
    """Checks a compact JWS from storekitd against the root certificate file `root_certificate`
    (PEM or DER), offline, with no connection; returns the payload. Raises VerificationError."""
    lib = library()
    payload = ctypes.POINTER(ctypes.c_char)()
    code = lib.storekit_verify_jws_with_root(_utf8(jws, "jws"), str(root_certificate).encode(), ctypes.byref(payload))
    return _payload(code, payload, "")


def _payload(code, payload, message):
    try:
        if code != ErrorCode.OK:
            raise make_error(code, message, cls=VerificationError)
        if not payload:
            return {}
        return json.loads(ctypes.string_at(payload).decode("utf-8"))
    finally:
        if payload:
            _lib.free(payload)
