/* The read-only views of transactions, products and events, and their copies. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- transactions ------------------------------------------------------------------------- */

SK_EXPORT uint64_t storekit_transaction_id(const storekit_transaction *t) { return t ? t->id : 0; }
SK_EXPORT const char *storekit_transaction_identifier(const storekit_transaction *t) { return t ? t->identifier : NULL; }
SK_EXPORT uint64_t storekit_transaction_original_id(const storekit_transaction *t) { return t ? t->original_id : 0; }
SK_EXPORT const char *storekit_transaction_product_id(const storekit_transaction *t) { return t ? t->product_id : NULL; }
SK_EXPORT int32_t storekit_transaction_quantity(const storekit_transaction *t) { return t ? t->quantity : 0; }

SK_EXPORT storekit_transaction_state storekit_transaction_state_of(const storekit_transaction *t) {
    return t ? (storekit_transaction_state)t->state : STOREKIT_PURCHASING;
}

SK_EXPORT const char *storekit_transaction_state_name(storekit_transaction_state state) {
    switch (state) {
    case STOREKIT_PURCHASING: return "purchasing";
    case STOREKIT_PURCHASED: return "purchased";
    case STOREKIT_FAILED: return "failed";
    case STOREKIT_RESTORED: return "restored";
    case STOREKIT_DEFERRED: return "deferred";
    }
    return "unknown";
}

SK_EXPORT int64_t storekit_transaction_date(const storekit_transaction *t) { return t ? t->date : 0; }
SK_EXPORT bool storekit_transaction_is_finished(const storekit_transaction *t) { return t && t->finished; }
SK_EXPORT int32_t storekit_transaction_error_code(const storekit_transaction *t) { return t ? t->error_code : 0; }
SK_EXPORT const char *storekit_transaction_error_message(const storekit_transaction *t) { return t ? t->error_message : NULL; }
SK_EXPORT int64_t storekit_transaction_revocation_date(const storekit_transaction *t) { return t ? t->revocation_date : 0; }
SK_EXPORT int64_t storekit_transaction_expires_date(const storekit_transaction *t) { return t ? t->expires_date : 0; }

SK_EXPORT const char *storekit_transaction_application_username(const storekit_transaction *t) {
    return t ? t->application_username : NULL;
}

SK_EXPORT const char *storekit_transaction_jws(const storekit_transaction *t) { return t ? t->jws : NULL; }

/* Copies an optional string: false when it was there and could not be copied. */
static bool copy_string(char **to, const char *from) {
    *to = sk_strdup(from);
    return !from || *to;
}

SK_EXPORT storekit_transaction *storekit_transaction_copy(const storekit_transaction *t) {
    if (!t) return NULL;
    storekit_transaction *copy = malloc(sizeof *copy);
    if (!copy) return NULL;
    *copy = *t;
    bool ok = copy_string(&copy->app, t->app) & copy_string(&copy->product_id, t->product_id)
        & copy_string(&copy->error_message, t->error_message)
        & copy_string(&copy->application_username, t->application_username) & copy_string(&copy->jws, t->jws);
    if (!ok) {
        storekit_transaction_free(copy);
        return NULL;
    }
    return copy;
}

SK_EXPORT void storekit_transaction_free(storekit_transaction *t) {
    if (!t) return;
    sk_transaction_clear(t);
    free(t);
}

/* ---- products ----------------------------------------------------------------------------- */

SK_EXPORT const char *storekit_product_id(const storekit_product *p) { return p ? p->product_id : NULL; }

SK_EXPORT storekit_product_type storekit_product_type_of(const storekit_product *p) {
    return p ? (storekit_product_type)p->kind : STOREKIT_CONSUMABLE;
}

SK_EXPORT const char *storekit_product_title(const storekit_product *p) { return p ? p->title : NULL; }
SK_EXPORT const char *storekit_product_description(const storekit_product *p) { return p ? p->description : NULL; }
SK_EXPORT int64_t storekit_product_price_cents(const storekit_product *p) { return p ? p->price_cents : 0; }
SK_EXPORT const char *storekit_product_display_price(const storekit_product *p) { return p ? p->display_price : NULL; }
SK_EXPORT const char *storekit_product_currency_code(const storekit_product *p) { return p ? p->currency_code : NULL; }
SK_EXPORT const char *storekit_product_locale(const storekit_product *p) { return p ? p->locale : NULL; }

SK_EXPORT const char *storekit_product_subscription_group_id(const storekit_product *p) {
    return p ? p->subscription_group_id : NULL;
}

SK_EXPORT const char *storekit_product_subscription_period(const storekit_product *p) {
    return p ? p->subscription_period : NULL;
}

SK_EXPORT bool storekit_product_is_family_shareable(const storekit_product *p) { return p && p->family_shareable; }

SK_EXPORT storekit_product *storekit_product_copy(const storekit_product *p) {
    if (!p) return NULL;
    storekit_product *copy = malloc(sizeof *copy);
    if (!copy) return NULL;
    *copy = *p;
    bool ok = copy_string(&copy->product_id, p->product_id) & copy_string(&copy->title, p->title)
        & copy_string(&copy->description, p->description) & copy_string(&copy->display_price, p->display_price)
        & copy_string(&copy->currency_code, p->currency_code) & copy_string(&copy->locale, p->locale)
        & copy_string(&copy->subscription_group_id, p->subscription_group_id)
        & copy_string(&copy->subscription_period, p->subscription_period);
    if (!ok) {
        storekit_product_free(copy);
        return NULL;
    }
    return copy;
}

SK_EXPORT void storekit_product_free(storekit_product *p) {
    if (!p) return;
    sk_product_clear(p);
    free(p);
}

/* ---- events ------------------------------------------------------------------------------- */

SK_EXPORT storekit_event_kind storekit_event_kind_of(const storekit_event *e) { return e ? e->kind : 0; }
SK_EXPORT uint32_t storekit_event_request_id(const storekit_event *e) { return e ? e->request_id : 0; }
SK_EXPORT int storekit_event_error(const storekit_event *e) { return e ? e->error : STOREKIT_ERROR_BAD_ARGUMENT; }
SK_EXPORT int32_t storekit_event_skerror_code(const storekit_event *e) { return e ? e->skerror : 0; }
SK_EXPORT uint64_t storekit_event_value(const storekit_event *e) { return e ? e->value : 0; }

SK_EXPORT const char *storekit_event_message(const storekit_event *e) {
    return e && e->message ? e->message : "";
}

SK_EXPORT size_t storekit_event_transaction_count(const storekit_event *e) { return e ? e->transaction_count : 0; }

SK_EXPORT const storekit_transaction *storekit_event_transaction(const storekit_event *e, size_t index) {
    return e && index < e->transaction_count ? &e->transactions[index] : NULL;
}

SK_EXPORT size_t storekit_event_product_count(const storekit_event *e) { return e ? e->product_count : 0; }

SK_EXPORT const storekit_product *storekit_event_product(const storekit_event *e, size_t index) {
    return e && index < e->product_count ? &e->products[index] : NULL;
}

SK_EXPORT size_t storekit_event_identifier_count(const storekit_event *e) { return e ? e->identifier_count : 0; }

SK_EXPORT const char *storekit_event_identifier(const storekit_event *e, size_t index) {
    return e && index < e->identifier_count ? e->identifiers[index] : NULL;
}

SK_EXPORT const uint8_t *storekit_event_data(const storekit_event *e, size_t *length) {
    if (length) *length = e && e->data ? e->data_length : 0;
    return e ? e->data : NULL;
}

/* ---- errors ------------------------------------------------------------------------------- */

SK_EXPORT const char *storekit_strerror(int error) {
    if (error < 0) error = -error; /* a request call's negative return */
    switch (error) {
    case STOREKIT_OK: return "success";
    case STOREKIT_ERROR_STOREKIT: return "refused by the store (see the SKError code)";
    case STOREKIT_ERROR_MALFORMED_REQUEST: return "the daemon could not read the request";
    case STOREKIT_ERROR_UNKNOWN_APP: return "the app id is not registered with storekitd";
    case STOREKIT_ERROR_PERMISSION_DENIED: return "permission denied";
    case STOREKIT_ERROR_TRANSACTION_NOT_FOUND: return "no such transaction in this app's queue";
    case STOREKIT_ERROR_NOT_FINISHABLE: return "the transaction is not finishable";
    case STOREKIT_ERROR_RESTORE_IN_PROGRESS: return "a restore is in progress";
    case STOREKIT_ERROR_STORAGE_FAILURE: return "the store could not record it";
    case STOREKIT_ERROR_STORAGE_FULL: return "the store's disk is full";
    case STOREKIT_ERROR_LIMIT_EXCEEDED: return "a limit of the daemon was exceeded";
    case STOREKIT_ERROR_NOT_REGISTERED: return "not registered";
    case STOREKIT_ERROR_UNSUPPORTED_VERSION: return "the daemon does not serve this protocol version";
    case STOREKIT_ERROR_SHUTTING_DOWN: return "the daemon is shutting down";
    case STOREKIT_ERROR_INVALID_ARGUMENT: return "an argument the daemon refused";
    case STOREKIT_ERROR_INTERNAL: return "the daemon could not make the reply";
    case STOREKIT_ERROR_RATE_LIMITED: return "too many requests: rate limited";
    case STOREKIT_ERROR_QUOTA_EXCEEDED: return "too many unfinished transactions in the queue";
    case STOREKIT_ERROR_STORE_UNREACHABLE: return "the store's database cannot be reached";
    case STOREKIT_ERROR_BAD_ARGUMENT: return "a bad argument";
    case STOREKIT_ERROR_NO_DAEMON: return "no storekitd answers";
    case STOREKIT_ERROR_DISCONNECTED: return "the connection to storekitd was lost";
    case STOREKIT_ERROR_PROTOCOL: return "storekitd sent something this library cannot read";
    case STOREKIT_ERROR_NO_MEMORY: return "out of memory";
    case STOREKIT_ERROR_SYSTEM: return "a system call failed";
    case STOREKIT_ERROR_TIMED_OUT: return "timed out";
    case STOREKIT_ERROR_NO_ROOT_CERTIFICATE: return "storekitd's root certificate was not found";
    case STOREKIT_ERROR_INVALID_ENCODING: return "not well-formed signed data";
    case STOREKIT_ERROR_INVALID_CHAIN: return "the certificate chain does not lead to the root";
    case STOREKIT_ERROR_INVALID_SIGNATURE: return "the signature does not verify";
    case STOREKIT_ERROR_REVOKED_CERTIFICATE: return "signed with a revoked certificate";
    }
    return "unknown error";
}
