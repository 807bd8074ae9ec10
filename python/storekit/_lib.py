"""The ctypes bindings of libstorekit (<storekit/storekit.h>): loading the library and the
signature of every call. Nothing here knows Python's objects; storekit/__init__.py does.

The library is loaded on first use, not at import, so that `import storekit` works (and its
documentation can be read) on a machine without libstorekit0; the first Connection then says
which library is missing and where it was looked for.
"""

import ctypes
import ctypes.util
import os
import threading

SONAME = "libstorekit.so.0"

c_char_p = ctypes.c_char_p
c_int = ctypes.c_int
c_int32 = ctypes.c_int32
c_int64 = ctypes.c_int64
c_uint32 = ctypes.c_uint32
c_uint64 = ctypes.c_uint64
c_size_t = ctypes.c_size_t
c_bool = ctypes.c_bool
c_void_p = ctypes.c_void_p

# Opaque handles: plain pointers, never dereferenced here.
handle_p = c_void_p        # storekit *
transaction_p = c_void_p   # storekit_transaction *
product_p = c_void_p       # storekit_product *
event_p = c_void_p         # storekit_event *

# typedef void (*storekit_observer)(storekit *sk, const storekit_event *event, void *userdata);
OBSERVER = ctypes.CFUNCTYPE(None, handle_p, event_p, c_void_p)

# name: (restype, argtypes)
_SIGNATURES = {
    "storekit_strerror": (c_char_p, [c_int]),
    "storekit_open": (c_int, [c_char_p, ctypes.POINTER(handle_p)]),
    "storekit_open_error_message": (c_char_p, []),
    "storekit_close": (None, [handle_p]),
    "storekit_fd": (c_int, [handle_p]),
    "storekit_dispatch": (c_int, [handle_p]),
    "storekit_wait": (c_int, [handle_p, c_int]),
    "storekit_uid": (c_uint32, [handle_p]),
    "storekit_storefront_country_code": (c_char_p, [handle_p]),
    "storekit_storefront_id": (c_char_p, [handle_p]),
    "storekit_last_message": (c_char_p, [handle_p]),

    "storekit_transaction_id": (c_uint64, [transaction_p]),
    "storekit_transaction_identifier": (c_char_p, [transaction_p]),
    "storekit_transaction_original_id": (c_uint64, [transaction_p]),
    "storekit_transaction_product_id": (c_char_p, [transaction_p]),
    "storekit_transaction_quantity": (c_int32, [transaction_p]),
    "storekit_transaction_state_of": (c_int, [transaction_p]),
    "storekit_transaction_state_name": (c_char_p, [c_int]),
    "storekit_transaction_date": (c_int64, [transaction_p]),
    "storekit_transaction_is_finished": (c_bool, [transaction_p]),
    "storekit_transaction_error_code": (c_int32, [transaction_p]),
    "storekit_transaction_error_message": (c_char_p, [transaction_p]),
    "storekit_transaction_revocation_date": (c_int64, [transaction_p]),
    "storekit_transaction_expires_date": (c_int64, [transaction_p]),
    "storekit_transaction_application_username": (c_char_p, [transaction_p]),
    "storekit_transaction_jws": (c_char_p, [transaction_p]),

    "storekit_product_id": (c_char_p, [product_p]),
    "storekit_product_type_of": (c_int, [product_p]),
    "storekit_product_title": (c_char_p, [product_p]),
    "storekit_product_description": (c_char_p, [product_p]),
    "storekit_product_price_cents": (c_int64, [product_p]),
    "storekit_product_display_price": (c_char_p, [product_p]),
    "storekit_product_currency_code": (c_char_p, [product_p]),
    "storekit_product_locale": (c_char_p, [product_p]),
    "storekit_product_subscription_group_id": (c_char_p, [product_p]),
    "storekit_product_subscription_period": (c_char_p, [product_p]),
    "storekit_product_is_family_shareable": (c_bool, [product_p]),

    "storekit_event_kind_of": (c_int, [event_p]),
    "storekit_event_request_id": (c_uint32, [event_p]),
    "storekit_event_error": (c_int, [event_p]),
    "storekit_event_skerror_code": (c_int32, [event_p]),
    "storekit_event_value": (c_uint64, [event_p]),
    "storekit_event_message": (c_char_p, [event_p]),
    "storekit_event_transaction_count": (c_size_t, [event_p]),
    "storekit_event_transaction": (transaction_p, [event_p, c_size_t]),
    "storekit_event_product_count": (c_size_t, [event_p]),
    "storekit_event_product": (product_p, [event_p, c_size_t]),
    "storekit_event_identifier_count": (c_size_t, [event_p]),
    "storekit_event_identifier": (c_char_p, [event_p, c_size_t]),
    "storekit_event_data": (ctypes.POINTER(ctypes.c_uint8), [event_p, ctypes.POINTER(c_size_t)]),

    "storekit_set_observer": (c_int64, [handle_p, OBSERVER, c_void_p]),
    "storekit_add_payment": (c_int64, [handle_p, c_char_p, c_int32, c_char_p]),
    "storekit_finish": (c_int64, [handle_p, c_uint64]),
    "storekit_restore": (c_int64, [handle_p, c_char_p]),
    "storekit_request_products": (c_int64, [handle_p, ctypes.POINTER(c_char_p), c_size_t]),
    "storekit_request_receipt": (c_int64, [handle_p]),

    # char **payload_json: a pointer malloc'ed by the library, read then free()d here.
    "storekit_verify_jws": (c_int, [handle_p, c_char_p, ctypes.POINTER(ctypes.POINTER(ctypes.c_char))]),
    "storekit_verify_jws_with_root": (c_int, [c_char_p, c_char_p, ctypes.POINTER(ctypes.POINTER(ctypes.c_char))]),
    "storekit_verify_receipt": (c_int, [handle_p, ctypes.POINTER(ctypes.c_uint8), c_size_t]),
}


class LibraryNotFound(OSError):
    """libstorekit could not be loaded; the message says every place tried."""


_lock = threading.Lock()
_loaded = None
_libc = None


def _candidates():
    """Where to look, in order, as (description, name or path) pairs."""
    explicit = os.environ.get("STOREKIT_LIBRARY")
    if explicit:
        # A library asked for by path is the only one tried: falling back to another would hide
        # the mistake.
        return [("$STOREKIT_LIBRARY", explicit)]
    found = [("the soname", SONAME)]
    name = ctypes.util.find_library("storekit")
    if name and name != SONAME:
        found.append(("ctypes.util.find_library('storekit')", name))
    return found


def load():
    """The loaded library with every signature set; raises LibraryNotFound."""
    global _loaded, _libc
    with _lock:
        if _loaded is not None:
            return _loaded
        tried = []
        for description, name in _candidates():
            try:
                library = ctypes.CDLL(name)
            except OSError as error:
                tried.append(f"{description} {name}: {error}")
                continue
            missing = [symbol for symbol in _SIGNATURES if not hasattr(library, symbol)]
            if missing:
                tried.append(f"{description} {name}: not libstorekit 0 (no {', '.join(missing[:3])})")
                continue
            for symbol, (restype, argtypes) in _SIGNATURES.items():
                function = getattr(library, symbol)
                function.restype = restype
                function.argtypes = argtypes
            _libc = ctypes.CDLL(None)
            _libc.free.restype = None
            _libc.free.argtypes = [c_void_p]
            _loaded = library
            return library
        if not os.environ.get("STOREKIT_LIBRARY"):
            tried.append("ctypes.util.find_library('storekit'): nothing found")
        raise LibraryNotFound(
            "libstorekit (the C library, " + SONAME + ") cannot be loaded; tried " + "; ".join(tried)
            + ". Install the libstorekit0 package, or set STOREKIT_LIBRARY to the library's path.")


def free(pointer):
    """free(3) for memory libstorekit handed over (storekit_verify_jws's payload)."""
    _libc.free(ctypes.cast(pointer, c_void_p))


def text(value):
    """A C string returned by the library (bytes or None) as str or None."""
    return None if value is None else value.decode("utf-8", "replace")
