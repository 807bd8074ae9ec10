/*
 * The protocol's messages (docs/protocol.md §3, §5, §6): encoding what the library sends and
 * decoding what the daemon sends. Every read goes through `reader`, which checks the bytes
 * left before it touches one: a frame that is short, long, or holds an impossible value is
 * refused with its reason, never read past.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- encoding ----------------------------------------------------------------------------- */

/* Each message goes out as one frame: a u32 length (patched in at the end), then the body. */
static size_t frame_begin(sk_buffer *out) {
    size_t at = out->length;
    sk_buffer_u32(out, 0);
    return at;
}

static void frame_end(sk_buffer *out, size_t at) {
    if (out->failed) return;
    uint32_t length = (uint32_t)(out->length - at - 4);
    for (int i = 0; i < 4; i++) out->bytes[at + i] = (uint8_t)(length >> (8 * i));
}

static void request_header(sk_buffer *out, uint8_t type, uint32_t request_id) {
    sk_buffer_u8(out, type);
    sk_buffer_u32(out, request_id);
}

void sk_encode_hello(sk_buffer *out, const char *app) {
    size_t frame = frame_begin(out);
    sk_buffer_u8(out, SK_MSG_HELLO);
    sk_buffer_u16(out, SK_PROTOCOL_VERSION);
    sk_buffer_string(out, app);
    frame_end(out, frame);
}

void sk_encode_request(sk_buffer *out, uint8_t type, uint32_t request_id) {
    size_t frame = frame_begin(out);
    request_header(out, type, request_id);
    frame_end(out, frame);
}

static void encode_optional_string(sk_buffer *out, const char *text) {
    if (!text) {
        sk_buffer_u8(out, 0);
        return;
    }
    sk_buffer_u8(out, 1);
    sk_buffer_string(out, text);
}

void sk_encode_add_payment(sk_buffer *out, uint32_t request_id, const char *key, const char *product_id,
                           int32_t quantity, const char *application_username) {
    size_t frame = frame_begin(out);
    request_header(out, SK_MSG_ADD_PAYMENT, request_id);
    sk_buffer_string(out, key);
    sk_buffer_string(out, product_id);
    sk_buffer_u32(out, (uint32_t)quantity);
    encode_optional_string(out, application_username);
    sk_buffer_u8(out, 0); /* has_request_data */
    sk_buffer_u8(out, 0); /* simulates_ask_to_buy */
    frame_end(out, frame);
}

void sk_encode_finish(sk_buffer *out, uint32_t request_id, uint64_t transaction_id) {
    size_t frame = frame_begin(out);
    request_header(out, SK_MSG_FINISH, request_id);
    sk_buffer_u64(out, transaction_id);
    frame_end(out, frame);
}

void sk_encode_restore(sk_buffer *out, uint32_t request_id, const char *application_username) {
    size_t frame = frame_begin(out);
    request_header(out, SK_MSG_RESTORE, request_id);
    encode_optional_string(out, application_username);
    frame_end(out, frame);
}

void sk_encode_products(sk_buffer *out, uint32_t request_id, const char *const *ids, size_t count) {
    size_t frame = frame_begin(out);
    request_header(out, SK_MSG_PRODUCTS, request_id);
    sk_buffer_u32(out, (uint32_t)count);
    for (size_t i = 0; i < count; i++) sk_buffer_string(out, ids[i]);
    frame_end(out, frame);
}

/* ---- decoding ----------------------------------------------------------------------------- */

typedef struct reader {
    const uint8_t *bytes;
    size_t left;
    char *why;
    size_t why_size;
    bool failed;
} reader;

static bool fail(reader *r, const char *reason) {
    if (!r->failed) sk_format(r->why, r->why_size, "%s", reason);
    r->failed = true;
    return false;
}

static bool take(reader *r, size_t count, const uint8_t **out) {
    if (r->failed) return false;
    if (count > r->left) return fail(r, "truncated");
    *out = r->bytes;
    r->bytes += count;
    r->left -= count;
    return true;
}

static bool read_u8(reader *r, uint8_t *value) {
    const uint8_t *p;
    if (!take(r, 1, &p)) return false;
    *value = p[0];
    return true;
}

static bool read_u16(reader *r, uint16_t *value) {
    const uint8_t *p;
    if (!take(r, 2, &p)) return false;
    *value = (uint16_t)(p[0] | p[1] << 8);
    return true;
}

static bool read_u32(reader *r, uint32_t *value) {
    const uint8_t *p;
    if (!take(r, 4, &p)) return false;
    *value = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return true;
}

static bool read_u64(reader *r, uint64_t *value) {
    const uint8_t *p;
    if (!take(r, 8, &p)) return false;
    uint64_t result = 0;
    for (int i = 7; i >= 0; i--) result = result << 8 | p[i];
    *value = result;
    return true;
}

static bool read_i32(reader *r, int32_t *value) {
    uint32_t raw;
    if (!read_u32(r, &raw)) return false;
    memcpy(value, &raw, sizeof raw);
    return true;
}

static bool read_i64(reader *r, int64_t *value) {
    uint64_t raw;
    if (!read_u64(r, &raw)) return false;
    memcpy(value, &raw, sizeof raw);
    return true;
}

static bool read_bool(reader *r, bool *value) {
    uint8_t raw;
    if (!read_u8(r, &raw)) return false;
    if (raw > 1) return fail(r, "a bool that is neither 0 nor 1");
    *value = raw == 1;
    return true;
}

/* A presence byte: *present; false on a bad byte. */
static bool read_presence(reader *r, bool *present) {
    uint8_t raw;
    if (!read_u8(r, &raw)) return false;
    if (raw > 1) return fail(r, "a presence byte that is neither 0 nor 1");
    *present = raw == 1;
    return true;
}

/* A string as a NUL-terminated copy (out may be NULL: checked and skipped). */
static bool read_string(reader *r, char **out) {
    uint32_t length;
    const uint8_t *p;
    if (!read_u32(r, &length) || !take(r, length, &p)) return false;
    if (!sk_utf8_valid(p, length)) return fail(r, "a string that is not UTF-8 (or holds a NUL)");
    if (!out) return true;
    char *copy = malloc((size_t)length + 1);
    if (!copy) return fail(r, "out of memory");
    memcpy(copy, p, length);
    copy[length] = 0;
    *out = copy;
    return true;
}

static bool read_optional_string(reader *r, char **out) {
    bool present;
    if (!read_presence(r, &present)) return false;
    return present ? read_string(r, out) : true;
}

/* A list count, checked against the bytes left (protocol.md §3) before anything is allocated. */
static bool read_count(reader *r, size_t minimum_element, uint32_t *count) {
    if (!read_u32(r, count)) return false;
    if ((uint64_t)*count * minimum_element > r->left) return fail(r, "truncated (a list longer than the frame)");
    return true;
}

static bool read_transaction(reader *r, storekit_transaction *t) {
    bool present, finished;
    uint8_t state;
    if (!read_u64(r, &t->id)) return false;
    sk_format(t->identifier, sizeof t->identifier, "%llu", (unsigned long long)t->id);
    if (!read_presence(r, &present) || (present && !read_u64(r, &t->original_id))) return false;
    if (!read_u32(r, &t->uid) || !read_string(r, &t->app) || !read_string(r, &t->product_id)
        || !read_i32(r, &t->quantity) || !read_u8(r, &state))
        return false;
    if (state > STOREKIT_DEFERRED) return fail(r, "an unknown transaction state");
    t->state = state;
    if (!read_u64(r, &t->sequence) || !read_i64(r, &t->date) || !read_bool(r, &finished)) return false;
    t->finished = finished;
    if (!read_presence(r, &present) || (present && !read_i32(r, &t->error_code))) return false;
    if (!read_optional_string(r, &t->error_message)) return false;
    if (!read_presence(r, &present) || (present && !read_i64(r, &t->revocation_date))) return false;
    if (!read_presence(r, &present) || (present && !read_i32(r, &t->revocation_reason))) return false;
    if (!read_optional_string(r, &t->application_username)) return false;
    if (!read_presence(r, &present) || (present && !read_i64(r, &t->expires_date))) return false;
    return read_optional_string(r, &t->jws);
}

static bool read_transactions(reader *r, sk_message *m) {
    uint32_t count;
    if (!read_count(r, 50, &count)) return false;
    if (count == 0) return true;
    m->transactions = calloc(count, sizeof *m->transactions);
    if (!m->transactions) return fail(r, "out of memory");
    for (uint32_t i = 0; i < count; i++) {
        m->transaction_count = i + 1;
        if (!read_transaction(r, &m->transactions[i])) return false;
    }
    return true;
}

static bool read_offer(reader *r) {
    uint8_t mode;
    int32_t periods;
    int64_t price;
    if (!read_optional_string(r, NULL) || !read_u8(r, &mode)) return false;
    if (mode > 2) return fail(r, "an unknown offer payment mode");
    return read_string(r, NULL) && read_i32(r, &periods) && read_i64(r, &price) && read_string(r, NULL);
}

static bool read_product(reader *r, storekit_product *p) {
    bool present, shareable;
    int32_t level;
    uint32_t offers;
    if (!read_string(r, &p->product_id) || !read_u8(r, &p->kind)) return false;
    if (p->kind > STOREKIT_NON_RENEWING) return fail(r, "an unknown product kind");
    if (!read_string(r, &p->title) || !read_string(r, &p->description) || !read_i64(r, &p->price_cents)
        || !read_string(r, &p->display_price) || !read_string(r, &p->currency_code) || !read_string(r, &p->locale)
        || !read_optional_string(r, &p->subscription_group_id) || !read_optional_string(r, &p->subscription_period)
        || !read_bool(r, &shareable))
        return false;
    p->family_shareable = shareable;
    if (!read_presence(r, &present) || (present && !read_i32(r, &level))) return false;
    if (!read_presence(r, &present) || (present && !read_offer(r))) return false;
    if (!read_count(r, 22, &offers)) return false;
    for (uint32_t i = 0; i < offers; i++)
        if (!read_offer(r)) return false;
    return true;
}

static bool read_products(reader *r, sk_message *m) {
    uint32_t count;
    if (!read_count(r, 42, &count)) return false;
    if (count == 0) return true;
    m->products = calloc(count, sizeof *m->products);
    if (!m->products) return fail(r, "out of memory");
    for (uint32_t i = 0; i < count; i++) {
        m->product_count = i + 1;
        if (!read_product(r, &m->products[i])) return false;
    }
    return true;
}

static bool read_identifiers(reader *r, sk_message *m) {
    uint32_t count;
    if (!read_count(r, 4, &count)) return false;
    if (count == 0) return true;
    m->identifiers = calloc(count, sizeof *m->identifiers);
    if (!m->identifiers) return fail(r, "out of memory");
    for (uint32_t i = 0; i < count; i++) {
        m->identifier_count = i + 1;
        if (!read_string(r, &m->identifiers[i])) return false;
    }
    return true;
}

/* The messages this library asks for or is pushed; 133, 134, 138 and 139 it never asks for. */
static bool read_body(reader *r, sk_message *m) {
    switch (m->type) {
    case SK_MSG_WELCOME:
        return read_u16(r, &m->version) && read_u32(r, &m->uid) && read_string(r, &m->text) && read_string(r, &m->text2);
    case SK_MSG_RESULT:
        if (!read_u32(r, &m->request_id) || !read_u16(r, &m->code)) return false;
        if (m->code > STOREKIT_ERROR_STORE_UNREACHABLE) return fail(r, "an unknown result code");
        return read_i32(r, &m->detail) && read_u64(r, &m->value) && read_string(r, &m->text);
    case SK_MSG_UPDATED:
    case SK_MSG_REMOVED:
        return read_transactions(r, m);
    case SK_MSG_PRODUCTS_REPLY:
        return read_u32(r, &m->request_id) && read_products(r, m) && read_identifiers(r, m);
    case SK_MSG_STOREFRONT_CHANGED:
        return read_string(r, &m->text) && read_string(r, &m->text2);
    case SK_MSG_ENTITLEMENTS_REVOKED:
        return read_identifiers(r, m);
    case SK_MSG_PROMOTED_PURCHASE:
        m->products = calloc(1, sizeof *m->products);
        if (!m->products) return fail(r, "out of memory");
        m->product_count = 1;
        return read_product(r, &m->products[0]);
    case SK_MSG_RECEIPT_REPLY: {
        uint32_t length;
        const uint8_t *p;
        if (!read_u32(r, &m->request_id) || !read_u32(r, &length) || !take(r, length, &p)) return false;
        m->data = malloc(length ? length : 1);
        if (!m->data) return fail(r, "out of memory");
        memcpy(m->data, p, length);
        m->data_length = length;
        return true;
    }
    default:
        return fail(r, "an unknown message type");
    }
}

bool sk_message_decode(const uint8_t *body, size_t length, sk_message *out, char *why, size_t why_size) {
    *out = (sk_message){0};
    reader r = {.bytes = body, .left = length, .why = why, .why_size = why_size};
    if (!read_u8(&r, &out->type) || !read_body(&r, out) || (r.left != 0 && !fail(&r, "trailing bytes"))) {
        char reason[200];
        sk_format(reason, sizeof reason, "%s", why);
        sk_format(why, why_size, "a malformed frame of type %u from storekitd (%u bytes): %s", out->type,
                  (unsigned)length, reason);
        sk_message_free(out);
        return false;
    }
    return true;
}

void sk_transaction_clear(storekit_transaction *t) {
    free(t->app);
    free(t->product_id);
    free(t->error_message);
    free(t->application_username);
    free(t->jws);
}

void sk_product_clear(storekit_product *p) {
    free(p->product_id);
    free(p->title);
    free(p->description);
    free(p->display_price);
    free(p->currency_code);
    free(p->locale);
    free(p->subscription_group_id);
    free(p->subscription_period);
}

void sk_message_free(sk_message *m) {
    free(m->text);
    free(m->text2);
    for (size_t i = 0; i < m->transaction_count; i++) sk_transaction_clear(&m->transactions[i]);
    free(m->transactions);
    for (size_t i = 0; i < m->product_count; i++) sk_product_clear(&m->products[i]);
    free(m->products);
    for (size_t i = 0; i < m->identifier_count; i++) free(m->identifiers[i]);
    free(m->identifiers);
    free(m->data);
    *m = (sk_message){0};
}
