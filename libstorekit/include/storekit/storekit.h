/*
 * libstorekit — StoreKit's payment queue for apps in C (and any language with a C FFI).
 *
 * A client of storekitd (docs/protocol.md, protocol version 2). StoreKit 1's model: an app opens
 * a connection as its app id, sets an observer, adds payments, and finishes each transaction once
 * it has delivered the content; the daemon keeps every transaction in a durable queue and sends
 * it again at each start until it is finished. The signed data (a transaction's JWS, the app
 * receipt) can be checked here against storekitd's root certificate before finishing.
 *
 * Poll-friendly: the library never blocks unless asked to (storekit_open, storekit_wait). It
 * exposes one file descriptor (storekit_fd) that stays the same for the connection's whole
 * life, reconnections included; when it is readable, call storekit_dispatch, which reads what
 * arrived and calls the observer. Put the descriptor in a GLib, Qt, SDL or game-engine loop,
 * or call storekit_wait.
 *
 * Threads: a storekit handle is used by one thread at a time (calls on one handle must not
 * overlap; the observer runs inside storekit_dispatch or storekit_wait, on the calling thread,
 * and may call back into the same handle). Different handles are independent. The functions
 * that take no handle (storekit_strerror, storekit_verify_jws_with_root, the accessors of a
 * transaction or product a thread holds) are safe from any thread.
 *
 * Errors: every call that can fail returns a storekit_error (0 = STOREKIT_OK), or for request
 * calls a request id (> 0) or a negative storekit_error; storekit_strerror names it, and
 * storekit_last_message says what happened on this handle in words.
 *
 * Every exported symbol is versioned (LIBSTOREKIT_0); the soname is libstorekit.so.0.
 */
#ifndef STOREKIT_STOREKIT_H
#define STOREKIT_STOREKIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STOREKIT_VERSION_MAJOR 0
#define STOREKIT_VERSION_MINOR 1
#define STOREKIT_VERSION_PATCH 0

/* ---- errors ------------------------------------------------------------------------------- */

/*
 * 1…18 are the daemon's own result codes (docs/protocol.md §7), returned when the daemon refused
 * a request; 100 and above happen in the library.
 */
typedef enum storekit_error {
    STOREKIT_OK = 0,
    STOREKIT_ERROR_STOREKIT = 1,             /* refused as StoreKit would: see the SKError code */
    STOREKIT_ERROR_MALFORMED_REQUEST = 2,
    STOREKIT_ERROR_UNKNOWN_APP = 3,          /* the app id is not registered with the daemon */
    STOREKIT_ERROR_PERMISSION_DENIED = 4,
    STOREKIT_ERROR_TRANSACTION_NOT_FOUND = 5,
    STOREKIT_ERROR_NOT_FINISHABLE = 6,       /* finishing a purchasing or deferred transaction */
    STOREKIT_ERROR_RESTORE_IN_PROGRESS = 7,
    STOREKIT_ERROR_STORAGE_FAILURE = 8,
    STOREKIT_ERROR_STORAGE_FULL = 9,
    STOREKIT_ERROR_LIMIT_EXCEEDED = 10,
    STOREKIT_ERROR_NOT_REGISTERED = 11,
    STOREKIT_ERROR_UNSUPPORTED_VERSION = 12,
    STOREKIT_ERROR_SHUTTING_DOWN = 13,
    STOREKIT_ERROR_INVALID_ARGUMENT = 14,
    STOREKIT_ERROR_INTERNAL = 15,
    STOREKIT_ERROR_RATE_LIMITED = 16,
    STOREKIT_ERROR_QUOTA_EXCEEDED = 17,
    STOREKIT_ERROR_STORE_UNREACHABLE = 18,

    STOREKIT_ERROR_BAD_ARGUMENT = 100,       /* a NULL handle, an empty app id, a quantity out of 1…10 … */
    STOREKIT_ERROR_NO_DAEMON = 101,          /* no storekitd socket answers (every path tried is in the message) */
    STOREKIT_ERROR_DISCONNECTED = 102,       /* the connection was lost; the library reconnects by itself */
    STOREKIT_ERROR_PROTOCOL = 103,           /* the daemon sent something this library cannot read */
    STOREKIT_ERROR_NO_MEMORY = 104,
    STOREKIT_ERROR_SYSTEM = 105,             /* a system call failed: the message has errno's words */
    STOREKIT_ERROR_TIMED_OUT = 106,
    STOREKIT_ERROR_NO_ROOT_CERTIFICATE = 107,/* storekitd's root certificate was not found */
    STOREKIT_ERROR_INVALID_ENCODING = 108,   /* signed data that is not a well-formed JWS / receipt */
    STOREKIT_ERROR_INVALID_CHAIN = 109,      /* its certificate chain does not lead to the root */
    STOREKIT_ERROR_INVALID_SIGNATURE = 110,  /* its signature does not verify */
    STOREKIT_ERROR_REVOKED_CERTIFICATE = 111,/* signed with a certificate storekitd revoked (rotate-key --revoke) */
} storekit_error;

/* A short, static, English description of an error code ("the transaction is not finishable"). */
const char *storekit_strerror(int error);

/* ---- the connection ----------------------------------------------------------------------- */

typedef struct storekit storekit;

/*
 * Connects to storekitd as `app_id` (registered in the daemon's apps.d) and says hello; blocks
 * until welcomed or refused, at most STOREKIT_CONNECT_TIMEOUT seconds (default 10) while the
 * daemon is starting. The socket is found as OpenStoreKit finds it: $STOREKITD_SOCKET; else the
 * user's own daemon ($XDG_RUNTIME_DIR/storekitd/storekitd.sock, then /tmp/storekitd-UID/…, each
 * only in a directory no other user may change); else the system daemon's
 * /run/storekitd/storekitd.sock. On failure *out is NULL; storekit_open_error_message (below)
 * says why in words.
 */
int storekit_open(const char *app_id, storekit **out);

/* Why the last storekit_open of this thread failed, in words ("" after a success). */
const char *storekit_open_error_message(void);

/* Closes the connection and frees the handle (NULL is accepted). From inside the observer it
 * takes effect when storekit_dispatch returns. */
void storekit_close(storekit *sk);

/*
 * The descriptor to poll for readability (POLLIN / G_IO_IN). It stays the same across
 * reconnections. Never read it or close it yourself.
 */
int storekit_fd(const storekit *sk);

/*
 * Reads and handles whatever has arrived, calling the observer for each event, then sends what
 * is waiting to be sent; never blocks. Returns STOREKIT_OK, or an error: STOREKIT_ERROR_PROTOCOL
 * when the daemon sent a frame this library cannot read (that connection is dropped, the
 * observer hears DISCONNECTED, and the library connects again: the handle goes on),
 * STOREKIT_ERROR_BAD_ARGUMENT for a NULL handle or a call from inside the observer.
 */
int storekit_dispatch(storekit *sk);

/*
 * Waits up to timeout_ms (-1: forever) for the descriptor, then dispatches. For apps without
 * an event loop of their own. Returns STOREKIT_OK or STOREKIT_ERROR_TIMED_OUT or an error.
 */
int storekit_wait(storekit *sk, int timeout_ms);

/* The uid the daemon sees for this connection, and the storefront (e.g. "USA", "143441"). */
uint32_t storekit_uid(const storekit *sk);
const char *storekit_storefront_country_code(const storekit *sk);
const char *storekit_storefront_id(const storekit *sk);

/* What the last failing call on this handle, or the last error event, said, in words. */
const char *storekit_last_message(const storekit *sk);

/* ---- transactions and products (read-only views) ------------------------------------------ */

typedef enum storekit_transaction_state {  /* SKPaymentTransactionState's raw values */
    STOREKIT_PURCHASING = 0,
    STOREKIT_PURCHASED = 1,
    STOREKIT_FAILED = 2,
    STOREKIT_RESTORED = 3,
    STOREKIT_DEFERRED = 4,
} storekit_transaction_state;

/*
 * A transaction as an event shows it. Valid during the observer call that hands it over; keep
 * one longer with storekit_transaction_copy and free it with storekit_transaction_free.
 * String accessors return NULL for an absent value; times are ms since the Unix epoch.
 */
typedef struct storekit_transaction storekit_transaction;

uint64_t storekit_transaction_id(const storekit_transaction *t);
/* Its decimal string, as SKPaymentTransaction.transactionIdentifier shows it. */
const char *storekit_transaction_identifier(const storekit_transaction *t);
uint64_t storekit_transaction_original_id(const storekit_transaction *t);   /* 0: none */
const char *storekit_transaction_product_id(const storekit_transaction *t);
int32_t storekit_transaction_quantity(const storekit_transaction *t);
storekit_transaction_state storekit_transaction_state_of(const storekit_transaction *t);
const char *storekit_transaction_state_name(storekit_transaction_state state); /* "purchased" */
int64_t storekit_transaction_date(const storekit_transaction *t);
bool storekit_transaction_is_finished(const storekit_transaction *t);
/* A failed transaction's SKError code (e.g. 2 = paymentCancelled) and its words; 0 / NULL else. */
int32_t storekit_transaction_error_code(const storekit_transaction *t);
const char *storekit_transaction_error_message(const storekit_transaction *t);
int64_t storekit_transaction_revocation_date(const storekit_transaction *t); /* 0: not revoked */
int64_t storekit_transaction_expires_date(const storekit_transaction *t);    /* 0: none */
const char *storekit_transaction_application_username(const storekit_transaction *t);
/* The compact JWS of a purchased or restored transaction (Apple's JWSTransaction); NULL else. */
const char *storekit_transaction_jws(const storekit_transaction *t);
storekit_transaction *storekit_transaction_copy(const storekit_transaction *t);
void storekit_transaction_free(storekit_transaction *t);

typedef enum storekit_product_type {
    STOREKIT_CONSUMABLE = 0,
    STOREKIT_NON_CONSUMABLE = 1,
    STOREKIT_AUTO_RENEWABLE = 2,
    STOREKIT_NON_RENEWING = 3,
} storekit_product_type;

/* A product of the app's catalogue (SKProduct); lifetime as a transaction's. */
typedef struct storekit_product storekit_product;

const char *storekit_product_id(const storekit_product *p);
storekit_product_type storekit_product_type_of(const storekit_product *p);
const char *storekit_product_title(const storekit_product *p);
const char *storekit_product_description(const storekit_product *p);
/* The price in the currency's minor unit × 100 (e.g. 199 = 1.99), and as the catalogue writes it. */
int64_t storekit_product_price_cents(const storekit_product *p);
const char *storekit_product_display_price(const storekit_product *p);
const char *storekit_product_currency_code(const storekit_product *p);
const char *storekit_product_locale(const storekit_product *p);
const char *storekit_product_subscription_group_id(const storekit_product *p); /* NULL: none */
const char *storekit_product_subscription_period(const storekit_product *p);   /* ISO 8601, e.g. "P1M" */
bool storekit_product_is_family_shareable(const storekit_product *p);
storekit_product *storekit_product_copy(const storekit_product *p);
void storekit_product_free(storekit_product *p);

/* ---- the observer ------------------------------------------------------------------------- */

typedef enum storekit_event_kind {
    /* paymentQueue(_:updatedTransactions:): transactions new or changed (and, after the
     * observer is set, every unfinished one: finish each once its content is delivered). */
    STOREKIT_EVENT_UPDATED = 1,
    /* paymentQueue(_:removedTransactions:): finished transactions left the queue. */
    STOREKIT_EVENT_REMOVED = 2,
    /* The answer to a request (storekit_add_payment, _finish, …): its request id, error code
     * (STOREKIT_OK or why it was refused), SKError code, value and message. */
    STOREKIT_EVENT_RESULT = 3,
    /* The answer to storekit_request_products: products and invalid identifiers. */
    STOREKIT_EVENT_PRODUCTS = 4,
    /* paymentQueueRestoreCompletedTransactionsFinished / …FailedWithError (error ≠ 0). */
    STOREKIT_EVENT_RESTORE_FINISHED = 5,
    /* paymentQueue(_:didRevokeEntitlementsForProductIdentifiers:): product ids. */
    STOREKIT_EVENT_ENTITLEMENTS_REVOKED = 6,
    /* paymentQueueDidChangeStorefront: storekit_storefront_* have the new one. */
    STOREKIT_EVENT_STOREFRONT_CHANGED = 7,
    /* paymentQueue(_:shouldAddStorePayment:for:): one product; buy it with storekit_add_payment. */
    STOREKIT_EVENT_PROMOTED_PURCHASE = 8,
    /* The app receipt arrived (storekit_request_receipt): storekit_event_data. */
    STOREKIT_EVENT_RECEIPT = 9,
    /* The connection was lost (error DISCONNECTED) and the library is reconnecting; requests
     * sent before it that had no answer get a RESULT with STOREKIT_ERROR_DISCONNECTED. */
    STOREKIT_EVENT_DISCONNECTED = 10,
    /* The connection is back (after DISCONNECTED); the observer's unfinished transactions are
     * delivered again as UPDATED. */
    STOREKIT_EVENT_RECONNECTED = 11,
} storekit_event_kind;

typedef struct storekit_event storekit_event;  /* valid during the observer call */

storekit_event_kind storekit_event_kind_of(const storekit_event *e);
/* RESULT, PRODUCTS, RECEIPT, RESTORE_FINISHED: the request id the call returned; 0 for pushes. */
uint32_t storekit_event_request_id(const storekit_event *e);
/* RESULT, RESTORE_FINISHED, DISCONNECTED: a storekit_error (STOREKIT_OK on success). */
int storekit_event_error(const storekit_event *e);
/* RESULT with STOREKIT_ERROR_STOREKIT: the SKError code (e.g. 5 = storeProductNotAvailable). */
int32_t storekit_event_skerror_code(const storekit_event *e);
/* RESULT: the daemon's value (the transaction id of an add_payment or finish; the number of
 * transactions a restore created). */
uint64_t storekit_event_value(const storekit_event *e);
/* The daemon's or the library's words ("" when none). */
const char *storekit_event_message(const storekit_event *e);
/* UPDATED, REMOVED: the transactions. */
size_t storekit_event_transaction_count(const storekit_event *e);
const storekit_transaction *storekit_event_transaction(const storekit_event *e, size_t index);
/* PRODUCTS (the known ones, in request order), PROMOTED_PURCHASE (one). */
size_t storekit_event_product_count(const storekit_event *e);
const storekit_product *storekit_event_product(const storekit_event *e, size_t index);
/* PRODUCTS: the identifiers the catalogue does not hold; ENTITLEMENTS_REVOKED: product ids. */
size_t storekit_event_identifier_count(const storekit_event *e);
const char *storekit_event_identifier(const storekit_event *e, size_t index);
/* RECEIPT: the receipt's bytes (PKCS#7 DER); NULL else. */
const uint8_t *storekit_event_data(const storekit_event *e, size_t *length);

typedef void (*storekit_observer)(storekit *sk, const storekit_event *event, void *userdata);

/*
 * SKPaymentQueue.add(_ observer:): from now on every event goes to `observer`; the daemon sends
 * every unfinished transaction at once (UPDATED). NULL removes the observer (remove(_:)).
 * Returns a request id (> 0) whose RESULT says the subscription took, or a negative error
 * (while reconnecting the observer is kept all the same, and subscribed when the connection is back).
 */
int64_t storekit_set_observer(storekit *sk, storekit_observer observer, void *userdata);

/* ---- requests: each returns a request id (> 0) answered by an event, or a negative error ---- */
/* (-STOREKIT_ERROR_DISCONNECTED while the library is reconnecting: send again after RECONNECTED.) */

/*
 * SKPaymentQueue.add(_ payment:). quantity 1…10; application_username may be NULL. The RESULT's
 * value is the new transaction's id; its states arrive as UPDATED. A refused payment is a RESULT
 * with an error (and SKError code), and no transaction.
 */
int64_t storekit_add_payment(storekit *sk, const char *product_id, int32_t quantity,
                             const char *application_username);

/* finishTransaction(_:). Finishing a purchasing or deferred one is STOREKIT_ERROR_NOT_FINISHABLE;
 * finishing twice is fine (idempotent). */
int64_t storekit_finish(storekit *sk, uint64_t transaction_id);

/* restoreCompletedTransactions(withApplicationUsername:): UPDATED with the restored ones, then
 * RESTORE_FINISHED carrying this request id (a restore's answer: its error, and as value how many
 * were restored). application_username may be NULL. */
int64_t storekit_restore(storekit *sk, const char *application_username);

/* SKProductsRequest: answered by PRODUCTS. */
int64_t storekit_request_products(storekit *sk, const char *const *product_ids, size_t count);

/* SKReceiptRefreshRequest: answered by RECEIPT (or a RESULT with an error). */
int64_t storekit_request_receipt(storekit *sk);

/* ---- signed data -------------------------------------------------------------------------- */

/*
 * Checks a compact JWS from storekitd (a transaction's storekit_transaction_jws) as Apple's
 * verifiers do, offline: ES256, an x5c chain of leaf and intermediate with Apple's marker
 * extensions leading to storekitd's root certificate at the payload's signedDate, and the
 * signature. On success, when payload_json is not NULL, *payload_json is the payload (JSON,
 * NUL-terminated; free() it). The root is found as OpenStoreKit finds it:
 * $STOREKIT_ROOT_CERTIFICATE; root-certificate.pem beside the socket this handle uses (in a
 * directory only its user or root may change); /var/lib/storekitd/root-certificate.pem.
 */
int storekit_verify_jws(storekit *sk, const char *jws, char **payload_json);

/* The same with a root certificate file of your choice (PEM or DER); no handle needed. */
int storekit_verify_jws_with_root(const char *jws, const char *root_certificate_path,
                                  char **payload_json);

/* Checks an app receipt's PKCS#7 signature against the root found as for storekit_verify_jws. */
int storekit_verify_receipt(storekit *sk, const uint8_t *receipt, size_t length);

#ifdef __cplusplus
}
#endif

#endif /* STOREKIT_STOREKIT_H */
