/*
 * libstorekit's private types: the handle, the decoded records and events, and the pieces each
 * source file offers the others. Nothing here is exported (the version script keeps every
 * symbol but the header's local).
 */
#ifndef STOREKIT_INTERNAL_H
#define STOREKIT_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storekit/storekit.h"

#define SK_EXPORT __attribute__((visibility("default")))

/* The protocol version this library speaks (docs/protocol.md). */
#define SK_PROTOCOL_VERSION 2
/* The largest frame body accepted from the daemon (protocol.md §2: "up to 64 MiB"). */
#define SK_MAX_BODY (64u << 20)

/* ---- buffers ------------------------------------------------------------------------------ */

/* A growable byte buffer; `start` is where unread data begins (input) or unsent data (output). */
typedef struct sk_buffer {
    uint8_t *bytes;
    size_t start;
    size_t length; /* bytes in use, from index 0; [start, length) is pending */
    size_t capacity;
    bool failed;   /* an allocation failed: everything appended since is lost */
} sk_buffer;

void sk_buffer_free(sk_buffer *buffer);
bool sk_buffer_reserve(sk_buffer *buffer, size_t more);
void sk_buffer_append(sk_buffer *buffer, const void *bytes, size_t count);
void sk_buffer_u8(sk_buffer *buffer, uint8_t value);
void sk_buffer_u16(sk_buffer *buffer, uint16_t value);
void sk_buffer_u32(sk_buffer *buffer, uint32_t value);
void sk_buffer_u64(sk_buffer *buffer, uint64_t value);
void sk_buffer_string(sk_buffer *buffer, const char *text);
size_t sk_buffer_pending(const sk_buffer *buffer);
void sk_buffer_consume(sk_buffer *buffer, size_t count);
void sk_buffer_clear(sk_buffer *buffer);

/* Whether `bytes` is well-formed UTF-8 holding no NUL (what a protocol string must be). */
bool sk_utf8_valid(const uint8_t *bytes, size_t count);

/* ---- records ------------------------------------------------------------------------------ */

struct storekit_transaction {
    uint64_t id;
    char identifier[24];
    uint64_t original_id;          /* 0: absent */
    uint32_t uid;
    char *app;
    char *product_id;
    int32_t quantity;
    uint8_t state;
    uint64_t sequence;
    int64_t date;
    bool finished;
    int32_t error_code;            /* 0: absent */
    char *error_message;
    int64_t revocation_date;       /* 0: absent */
    int32_t revocation_reason;
    char *application_username;
    int64_t expires_date;          /* 0: absent */
    char *jws;
};

struct storekit_product {
    char *product_id;
    uint8_t kind;
    char *title;
    char *description;
    int64_t price_cents;
    char *display_price;
    char *currency_code;
    char *locale;
    char *subscription_group_id;
    char *subscription_period;
    bool family_shareable;
};

void sk_transaction_clear(storekit_transaction *t);
void sk_product_clear(storekit_product *p);

/* ---- server messages ---------------------------------------------------------------------- */

enum {
    SK_MSG_HELLO = 1, SK_MSG_SUBSCRIBE = 2, SK_MSG_UNSUBSCRIBE = 3, SK_MSG_ADD_PAYMENT = 4,
    SK_MSG_FINISH = 5, SK_MSG_RESTORE = 6, SK_MSG_PRODUCTS = 7, SK_MSG_PING = 10, SK_MSG_RECEIPT = 15,

    SK_MSG_WELCOME = 128, SK_MSG_RESULT = 129, SK_MSG_UPDATED = 130, SK_MSG_REMOVED = 131,
    SK_MSG_PRODUCTS_REPLY = 132, SK_MSG_TRANSACTIONS = 133, SK_MSG_CONTROL_RESULT = 134,
    SK_MSG_STOREFRONT_CHANGED = 135, SK_MSG_ENTITLEMENTS_REVOKED = 136, SK_MSG_PROMOTED_PURCHASE = 137,
    SK_MSG_SUBSCRIPTION_STATUS = 138, SK_MSG_SIGNED = 139, SK_MSG_RECEIPT_REPLY = 140,
};

/* One decoded server message; which fields are set depends on `type`. */
typedef struct sk_message {
    uint8_t type;
    uint32_t request_id;
    uint16_t version, code;
    uint32_t uid;
    int32_t detail;
    uint64_t value;
    char *text;          /* result's message; storefrontChanged's / welcome's country code */
    char *text2;         /* storefront id */
    storekit_transaction *transactions;
    size_t transaction_count;
    storekit_product *products;
    size_t product_count;
    char **identifiers;
    size_t identifier_count;
    uint8_t *data;
    size_t data_length;
} sk_message;

/* Decodes one frame body. false: malformed, with the reason in `why` (never over-reads). */
bool sk_message_decode(const uint8_t *body, size_t length, sk_message *out, char *why, size_t why_size);
void sk_message_free(sk_message *message);

/* ---- client messages ---------------------------------------------------------------------- */

void sk_encode_hello(sk_buffer *out, const char *app);
void sk_encode_request(sk_buffer *out, uint8_t type, uint32_t request_id);   /* subscribe, unsubscribe, ping, receipt */
void sk_encode_add_payment(sk_buffer *out, uint32_t request_id, const char *key, const char *product_id,
                           int32_t quantity, const char *application_username);
void sk_encode_finish(sk_buffer *out, uint32_t request_id, uint64_t transaction_id);
void sk_encode_restore(sk_buffer *out, uint32_t request_id, const char *application_username);
void sk_encode_products(sk_buffer *out, uint32_t request_id, const char *const *ids, size_t count);

/* ---- events ------------------------------------------------------------------------------- */

struct storekit_event {
    storekit_event_kind kind;
    uint32_t request_id;
    int error;
    int32_t skerror;
    uint64_t value;
    const char *message;
    const storekit_transaction *transactions;
    size_t transaction_count;
    const storekit_product *products;
    size_t product_count;
    char *const *identifiers;
    size_t identifier_count;
    const uint8_t *data;
    size_t data_length;
};

/* ---- where things are --------------------------------------------------------------------- */

/* The client socket to use (SocketLocation.clientSocket); malloc'd. */
char *sk_socket_path(void);
/* "a, b, c": every client socket looked for (SocketLocation.clientSocketsTried); malloc'd. */
char *sk_socket_paths_tried(void);
/* Whether `path` is a directory owned by the user or root that group and others cannot write. */
bool sk_directory_trusted(const char *path, char *why, size_t why_size);

/* ---- signed data -------------------------------------------------------------------------- */

/* Finds and reads the root certificate for the socket at `socket_path` (may be NULL). */
int sk_verify_jws_with_socket(const char *jws, const char *socket_path, char **payload_json,
                              char *message, size_t message_size);
int sk_verify_receipt_with_socket(const uint8_t *receipt, size_t length, const char *socket_path,
                                  char *message, size_t message_size);

/* ---- small helpers ------------------------------------------------------------------------ */

void sk_format(char *out, size_t size, const char *format, ...) __attribute__((format(printf, 3, 4)));
char *sk_strdup(const char *text);   /* NULL stays NULL */
/* Monotonic milliseconds. */
int64_t sk_now_ms(void);

#endif
