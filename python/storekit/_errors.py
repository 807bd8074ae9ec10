"""Errors: one exception class per kind of failure a program handles differently, each carrying
libstorekit's code (`ErrorCode`), the SKError code when StoreKit refused, and the words."""

import enum


class ErrorCode(enum.IntEnum):
    """libstorekit's storekit_error: 1…18 are storekitd's result codes, 100 and above the library's."""

    OK = 0
    STOREKIT = 1
    MALFORMED_REQUEST = 2
    UNKNOWN_APP = 3
    PERMISSION_DENIED = 4
    TRANSACTION_NOT_FOUND = 5
    NOT_FINISHABLE = 6
    RESTORE_IN_PROGRESS = 7
    STORAGE_FAILURE = 8
    STORAGE_FULL = 9
    LIMIT_EXCEEDED = 10
    NOT_REGISTERED = 11
    UNSUPPORTED_VERSION = 12
    SHUTTING_DOWN = 13
    INVALID_ARGUMENT = 14
    INTERNAL = 15
    RATE_LIMITED = 16
    QUOTA_EXCEEDED = 17
    STORE_UNREACHABLE = 18
    BAD_ARGUMENT = 100
    NO_DAEMON = 101
    DISCONNECTED = 102
    PROTOCOL = 103
    NO_MEMORY = 104
    SYSTEM = 105
    TIMED_OUT = 106
    NO_ROOT_CERTIFICATE = 107
    INVALID_ENCODING = 108
    INVALID_CHAIN = 109
    INVALID_SIGNATURE = 110
    REVOKED_CERTIFICATE = 111


class SKErrorCode(enum.IntEnum):
    """StoreKit's SKError.Code raw values (docs/protocol.md §7)."""

    UNKNOWN = 0
    CLIENT_INVALID = 1
    PAYMENT_CANCELLED = 2
    PAYMENT_INVALID = 3
    PAYMENT_NOT_ALLOWED = 4
    STORE_PRODUCT_NOT_AVAILABLE = 5
    CLOUD_SERVICE_PERMISSION_DENIED = 6
    CLOUD_SERVICE_NETWORK_CONNECTION_FAILED = 7
    CLOUD_SERVICE_REVOKED = 8
    PRIVACY_ACKNOWLEDGEMENT_REQUIRED = 9
    UNAUTHORIZED_REQUEST_DATA = 10
    INVALID_OFFER_IDENTIFIER = 11
    INVALID_SIGNATURE = 12
    MISSING_OFFER_PARAMS = 13
    INVALID_OFFER_PRICE = 14
    OVERLAY_CANCELLED = 15
    OVERLAY_INVALID_CONFIGURATION = 16
    OVERLAY_TIMEOUT = 17
    INELIGIBLE_FOR_OFFER = 18
    UNSUPPORTED_PLATFORM = 19
    OVERLAY_PRESENTED_IN_BACKGROUND_SCENE = 20


def _code(value):
    try:
        return ErrorCode(value)
    except ValueError:
        return value


def _skerror(value):
    if value is None:
        return None
    try:
        return SKErrorCode(value)
    except ValueError:
        return value


class StoreKitError(Exception):
    """A failure reported by libstorekit or storekitd.

    `code` is the storekit_error (an ErrorCode), `skerror_code` the SKError code when StoreKit
    refused (code STOREKIT) and else None, `message` the words: storekit_strerror's, then the
    library's or the daemon's own when it said more.
    """

    def __init__(self, code, message="", skerror_code=None, description=None):
        self.code = _code(code)
        self.skerror_code = _skerror(skerror_code)
        self.description = description or ""
        self.message = message
        super().__init__(message)

    def __str__(self):
        return self.message


class LibraryNotFoundError(StoreKitError, OSError):
    """libstorekit.so.0 could not be loaded (the message says where it was looked for)."""

    def __init__(self, message):
        StoreKitError.__init__(self, ErrorCode.SYSTEM, message)


class NoDaemonError(StoreKitError):
    """No storekitd socket answered."""


class UnknownAppError(StoreKitError):
    """The app id is not registered with the daemon (apps.d)."""


class PermissionDeniedError(StoreKitError):
    """The daemon refused this process (Executable= of the app's registration, wrong socket)."""


class TransactionNotFoundError(StoreKitError):
    """No such transaction in this (uid, app) queue."""


class NotFinishableError(StoreKitError):
    """Finishing a transaction that is purchasing or deferred."""


class DisconnectedError(StoreKitError):
    """The connection was lost before the answer came (the library reconnects by itself)."""


class TimedOutError(StoreKitError, TimeoutError):
    """A blocking call's timeout passed first."""


class VerificationError(StoreKitError):
    """Signed data (a JWS, a receipt) did not verify; `kind` says how."""

    class Kind(enum.StrEnum):
        NO_ROOT_CERTIFICATE = "no-root-certificate"
        ENCODING = "encoding"
        CHAIN = "chain"
        SIGNATURE = "signature"
        REVOKED = "revoked"
        OTHER = "other"

    _KINDS = {
        ErrorCode.NO_ROOT_CERTIFICATE: Kind.NO_ROOT_CERTIFICATE,
        ErrorCode.INVALID_ENCODING: Kind.ENCODING,
        ErrorCode.INVALID_CHAIN: Kind.CHAIN,
        ErrorCode.INVALID_SIGNATURE: Kind.SIGNATURE,
        ErrorCode.REVOKED_CERTIFICATE: Kind.REVOKED,
    }

    @property
    def kind(self):
        """Why it failed: no-root-certificate, encoding, chain, signature, revoked (or other)."""
        return self._KINDS.get(self.code, VerificationError.Kind.OTHER)


class PaymentError(StoreKitError):
    """A purchase did not end purchased.

    Refused at once (`transaction` None: e.g. an unknown product, skerror_code 5), or its
    transaction failed (`transaction.error_code`) or was deferred for Ask to Buy
    (`transaction.state` DEFERRED; it is decided later and arrives as an update).
    """

    def __init__(self, code, message="", skerror_code=None, transaction=None, description=None):
        super().__init__(code, message, skerror_code, description)
        self.transaction = transaction


_CLASSES = {
    ErrorCode.UNKNOWN_APP: UnknownAppError,
    ErrorCode.PERMISSION_DENIED: PermissionDeniedError,
    ErrorCode.TRANSACTION_NOT_FOUND: TransactionNotFoundError,
    ErrorCode.NOT_FINISHABLE: NotFinishableError,
    ErrorCode.NO_DAEMON: NoDaemonError,
    ErrorCode.DISCONNECTED: DisconnectedError,
    ErrorCode.TIMED_OUT: TimedOutError,
    ErrorCode.NO_ROOT_CERTIFICATE: VerificationError,
    ErrorCode.INVALID_ENCODING: VerificationError,
    ErrorCode.INVALID_CHAIN: VerificationError,
    ErrorCode.INVALID_SIGNATURE: VerificationError,
    ErrorCode.REVOKED_CERTIFICATE: VerificationError,
}


def describe(code):
    """storekit_strerror(code), or a fallback when the library is not loaded."""
    from . import _lib
    try:
        return _lib.text(_lib.load().storekit_strerror(int(code))) or f"error {int(code)}"
    except _lib.LibraryNotFound:
        return f"error {int(code)}"


def make_error(code, detail="", skerror_code=None, cls=None):
    """The exception for `code`: its class by code (or `cls`), its message strerror + detail."""
    description = describe(code)
    message = description
    if detail and detail != description:
        message = f"{description}: {detail}"
    if skerror_code is not None and _code(code) == ErrorCode.STOREKIT:
        name = _skerror(skerror_code)
        label = f"SKError {int(skerror_code)}" + (f" ({name.name.lower()})" if isinstance(name, SKErrorCode) else "")
        message = f"{message} [{label}]"
    if cls is None:
        cls = _CLASSES.get(_code(code), StoreKitError)
    return cls(code, message, skerror_code if _code(code) == ErrorCode.STOREKIT else None, description=description)
