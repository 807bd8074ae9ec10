/*
 * libstorekit's tests, against a real storekitd (LibStoreKitTests starts it and runs this program
 * with STOREKITD_SOCKET and STOREKIT_ROOT_CERTIFICATE pointing at it) or against fake servers of
 * its own (malformed frames). Plain checks: the first failing one prints what it expected and
 * exits 1; a run that passes prints "N checks passed".
 *
 *   storekit-test flow APP            the requests and the signed data, end to end
 *   storekit-test no-daemon           NO_DAEMON at once, naming the paths tried
 *   storekit-test malformed           fake servers sending malformed frames: PROTOCOL, no crash
 *   storekit-test reconnect APP FILE  buys, writes FILE, then expects the daemon to be killed and
 *                                     restarted: DISCONNECTED, RECONNECTED, the transaction again
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <storekit/storekit.h>

static int checks;

#define CHECK(condition, ...)                                                                             \
    do {                                                                                                  \
        checks++;                                                                                         \
        if (!(condition)) {                                                                               \
            fprintf(stderr, "FAILED %s:%d: %s\n  ", __FILE__, __LINE__, #condition);                      \
            fprintf(stderr, __VA_ARGS__);                                                                 \
            fputc('\n', stderr);                                                                          \
            exit(1);                                                                                      \
        }                                                                                                 \
    } while (0)

static int64_t now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* ---- what the observer saw ---------------------------------------------------------------- */

typedef struct record {
    storekit_event_kind kind;
    uint32_t request_id;
    int error;
    int32_t skerror;
    uint64_t value;
    char message[512];
    storekit_transaction *transactions[64];
    size_t transaction_count;
    storekit_product *products[16];
    size_t product_count;
    char identifiers[8][128];
    size_t identifier_count;
    uint8_t *data;
    size_t data_length;
    int fd;        /* storekit_fd at the time */
    bool seen;     /* taken by a wait_for */
} record;

static record records[4096];
static size_t record_count;

static void observe(storekit *sk, const storekit_event *event, void *userdata) {
    (void)userdata;
    CHECK(record_count < sizeof records / sizeof records[0], "too many events");
    record *r = &records[record_count++];
    memset(r, 0, sizeof *r);
    r->kind = storekit_event_kind_of(event);
    r->request_id = storekit_event_request_id(event);
    r->error = storekit_event_error(event);
    r->skerror = storekit_event_skerror_code(event);
    r->value = storekit_event_value(event);
    snprintf(r->message, sizeof r->message, "%s", storekit_event_message(event));
    r->fd = storekit_fd(sk);
    for (size_t i = 0; i < storekit_event_transaction_count(event) && i < 64; i++)
        r->transactions[r->transaction_count++] = storekit_transaction_copy(storekit_event_transaction(event, i));
    for (size_t i = 0; i < storekit_event_product_count(event) && i < 16; i++)
        r->products[r->product_count++] = storekit_product_copy(storekit_event_product(event, i));
    for (size_t i = 0; i < storekit_event_identifier_count(event) && i < 8; i++)
        snprintf(r->identifiers[r->identifier_count++], 128, "%s", storekit_event_identifier(event, i));
    size_t length = 0;
    const uint8_t *data = storekit_event_data(event, &length);
    if (data) {
        r->data = malloc(length ? length : 1);
        memcpy(r->data, data, length);
        r->data_length = length;
    }
}

static void forget_records(void) {
    for (size_t i = 0; i < record_count; i++) {
        for (size_t k = 0; k < records[i].transaction_count; k++) storekit_transaction_free(records[i].transactions[k]);
        for (size_t k = 0; k < records[i].product_count; k++) storekit_product_free(records[i].products[k]);
        free(records[i].data);
    }
    record_count = 0;
}

typedef bool (*matcher)(const record *r, const void *argument);

/* Dispatches until a record not yet taken matches; fails the test after timeout_ms. */
static record *wait_for(storekit *sk, matcher match, const void *argument, int timeout_ms, const char *what) {
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        for (size_t i = 0; i < record_count; i++) {
            if (!records[i].seen && match(&records[i], argument)) {
                records[i].seen = true;
                return &records[i];
            }
        }
        int64_t left = deadline - now_ms();
        CHECK(left > 0, "no %s within %d ms (last message: %s)", what, timeout_ms, storekit_last_message(sk));
        int result = storekit_wait(sk, (int)(left > 200 ? 200 : left));
        CHECK(result == STOREKIT_OK || result == STOREKIT_ERROR_TIMED_OUT, "storekit_wait: %s (%s)",
              storekit_strerror(result), storekit_last_message(sk));
    }
}

static bool is_answer(const record *r, const void *argument) {
    return r->request_id == *(const uint32_t *)argument
        && (r->kind == STOREKIT_EVENT_RESULT || r->kind == STOREKIT_EVENT_PRODUCTS || r->kind == STOREKIT_EVENT_RECEIPT
            || r->kind == STOREKIT_EVENT_RESTORE_FINISHED);
}

static record *answer(storekit *sk, int64_t request) {
    CHECK(request > 0, "a request id, not %lld (%s)", (long long)request, storekit_last_message(sk));
    uint32_t id = (uint32_t)request;
    return wait_for(sk, is_answer, &id, 10000, "answer");
}

typedef struct transaction_match {
    storekit_event_kind kind;
    uint64_t id;        /* 0: any */
    int state;          /* -1: any */
} transaction_match;

static const storekit_transaction *find_transaction(const record *r, const transaction_match *m) {
    if (r->kind != m->kind) return NULL;
    for (size_t i = 0; i < r->transaction_count; i++) {
        const storekit_transaction *t = r->transactions[i];
        if ((m->id == 0 || storekit_transaction_id(t) == m->id)
            && (m->state < 0 || (int)storekit_transaction_state_of(t) == m->state))
            return t;
    }
    return NULL;
}

static bool has_transaction(const record *r, const void *argument) { return find_transaction(r, argument) != NULL; }

static const storekit_transaction *wait_transaction(storekit *sk, storekit_event_kind kind, uint64_t id, int state) {
    transaction_match m = {kind, id, state};
    record *r = wait_for(sk, has_transaction, &m, 10000, "transaction");
    return find_transaction(r, &m);
}

/* A purchase made and answered: the transaction id (RESULT's value), its purchased state seen. */
static const storekit_transaction *buy(storekit *sk, const char *product) {
    int64_t request = storekit_add_payment(sk, product, 1, NULL);
    record *result = answer(sk, request);
    CHECK(result->kind == STOREKIT_EVENT_RESULT && result->error == STOREKIT_OK, "buying %s: %s (%d)", product,
          result->message, result->error);
    CHECK(result->value != 0, "the RESULT of a payment carries the transaction id");
    return wait_transaction(sk, STOREKIT_EVENT_UPDATED, result->value, STOREKIT_PURCHASED);
}

static storekit *open_or_fail(const char *app) {
    storekit *sk = NULL;
    int result = storekit_open(app, &sk);
    CHECK(result == STOREKIT_OK && sk, "storekit_open(%s): %s: %s", app, storekit_strerror(result),
          storekit_open_error_message());
    CHECK(storekit_open_error_message()[0] == 0, "no open error message after a success");
    return sk;
}

/* ---- base64url, to tamper with a JWS ------------------------------------------------------ */

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static size_t base64url_decode(const char *text, size_t length, uint8_t *out) {
    uint32_t accumulator = 0;
    int bits = 0;
    size_t count = 0;
    for (size_t i = 0; i < length; i++) {
        const char *at = strchr(alphabet, text[i]);
        accumulator = accumulator << 6 | (uint32_t)(at - alphabet);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[count++] = (uint8_t)(accumulator >> bits);
        }
    }
    return count;
}

static size_t base64url_encode(const uint8_t *bytes, size_t length, char *out) {
    size_t count = 0;
    uint32_t accumulator = 0;
    int bits = 0;
    for (size_t i = 0; i < length; i++) {
        accumulator = accumulator << 8 | bytes[i];
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            out[count++] = alphabet[accumulator >> bits & 63];
        }
    }
    if (bits > 0) out[count++] = alphabet[accumulator << (6 - bits) & 63];
    out[count] = 0;
    return count;
}

/* The JWS with its payload's "quantity":1 made "quantity":2, still well-formed. */
static char *tampered(const char *jws) {
    const char *first = strchr(jws, '.');
    const char *second = strchr(first + 1, '.');
    size_t payload_length = (size_t)(second - first - 1);
    uint8_t *payload = malloc(payload_length);
    size_t decoded = base64url_decode(first + 1, payload_length, payload);
    char *quantity = memmem(payload, decoded, "\"quantity\":1", 12);
    CHECK(quantity != NULL, "the payload holds \"quantity\":1");
    quantity[11] = '2';
    char *result = malloc(strlen(jws) + 8);
    size_t header_length = (size_t)(first - jws);
    memcpy(result, jws, header_length + 1);
    size_t encoded = base64url_encode(payload, decoded, result + header_length + 1);
    strcpy(result + header_length + 1 + encoded, second);
    free(payload);
    return result;
}

/* ---- flow --------------------------------------------------------------------------------- */

static bool is_kind(const record *r, const void *argument) { return r->kind == *(const storekit_event_kind *)argument; }

static void make_wrong_root(char *path, size_t size) {
    char directory[] = "/tmp/storekit-test-XXXXXX";
    CHECK(mkdtemp(directory) != NULL, "mkdtemp: %s", strerror(errno));
    snprintf(path, size, "%s/wrong-root.pem", directory);
    char command[1024];
    snprintf(command, sizeof command,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout %s/key.pem -out %s "
             "-subj /CN=not-storekitd -days 2 >/dev/null 2>&1",
             directory, path);
    CHECK(system(command) == 0, "openssl made a root certificate of another chain");
    snprintf(command, sizeof command, "%s/key.pem", directory);
    unlink(command);   /* only the certificate is needed */
}

/* Removes the certificate make_wrong_root made, and its directory. */
static void remove_wrong_root(const char *path) {
    char directory[512];
    snprintf(directory, sizeof directory, "%s", path);
    char *slash = strrchr(directory, '/');
    unlink(path);
    if (slash) {
        *slash = 0;
        rmdir(directory);
    }
}

static int test_flow(const char *app) {
    storekit *sk = open_or_fail(app);
    CHECK(storekit_fd(sk) >= 0, "a descriptor to poll");
    CHECK(storekit_uid(sk) == getuid(), "the uid the daemon sees (%u) is ours", storekit_uid(sk));
    CHECK(strcmp(storekit_storefront_country_code(sk), "USA") == 0, "storefront %s", storekit_storefront_country_code(sk));
    CHECK(strcmp(storekit_storefront_id(sk), "143441") == 0, "storefront id %s", storekit_storefront_id(sk));
    int fd = storekit_fd(sk);

    /* Bad arguments are refused before anything is sent. */
    CHECK(storekit_add_payment(sk, "com.example.game.coins100", 0, NULL) == -STOREKIT_ERROR_BAD_ARGUMENT, "quantity 0");
    CHECK(storekit_add_payment(sk, "com.example.game.coins100", 11, NULL) == -STOREKIT_ERROR_BAD_ARGUMENT, "quantity 11");
    CHECK(storekit_add_payment(sk, NULL, 1, NULL) == -STOREKIT_ERROR_BAD_ARGUMENT, "no product");
    CHECK(storekit_add_payment(sk, "\xff\xfe", 1, NULL) == -STOREKIT_ERROR_BAD_ARGUMENT, "a product id not UTF-8");
    CHECK(storekit_add_payment(NULL, "x", 1, NULL) == -STOREKIT_ERROR_BAD_ARGUMENT, "no handle");
    CHECK(storekit_request_products(sk, NULL, 2) == -STOREKIT_ERROR_BAD_ARGUMENT, "no identifiers");
    CHECK(storekit_last_message(sk)[0] != 0, "a failing call says why");
    CHECK(storekit_dispatch(NULL) == STOREKIT_ERROR_BAD_ARGUMENT, "dispatch without a handle");

    /* The observer: its subscription answered. */
    record *subscribed = answer(sk, storekit_set_observer(sk, observe, NULL));
    CHECK(subscribed->kind == STOREKIT_EVENT_RESULT && subscribed->error == STOREKIT_OK, "subscribed: %s", subscribed->message);

    /* Products, known and unknown. */
    const char *ids[] = {"com.example.game.coins100", "com.example.nothing", "com.example.game.premium.monthly"};
    record *products = answer(sk, storekit_request_products(sk, ids, 3));
    CHECK(products->kind == STOREKIT_EVENT_PRODUCTS, "PRODUCTS answers a products request (got %d)", products->kind);
    CHECK(products->product_count == 2, "two known products, got %zu", products->product_count);
    CHECK(strcmp(storekit_product_id(products->products[0]), ids[0]) == 0, "request order");
    CHECK(storekit_product_type_of(products->products[0]) == STOREKIT_CONSUMABLE, "coins are consumable");
    CHECK(storekit_product_price_cents(products->products[0]) > 0, "a price");
    CHECK(storekit_product_title(products->products[0])[0] != 0, "a title");
    CHECK(strcmp(storekit_product_currency_code(products->products[0]), "USD") == 0, "USD");
    CHECK(storekit_product_subscription_period(products->products[0]) == NULL, "no period for coins");
    CHECK(storekit_product_type_of(products->products[1]) == STOREKIT_AUTO_RENEWABLE, "the monthly subscription");
    CHECK(storekit_product_subscription_period(products->products[1]) != NULL
              && storekit_product_subscription_group_id(products->products[1]) != NULL,
          "a subscription has a period and a group");
    CHECK(products->identifier_count == 1 && strcmp(products->identifiers[0], "com.example.nothing") == 0,
          "the unknown identifier is listed as invalid");

    /* Buy: purchased with a JWS that verifies; finish; REMOVED; finish again; unknown id. */
    const storekit_transaction *bought = buy(sk, "com.example.game.coins100");
    uint64_t id = storekit_transaction_id(bought);
    char decimal[32];
    snprintf(decimal, sizeof decimal, "%llu", (unsigned long long)id);
    CHECK(strcmp(storekit_transaction_identifier(bought), decimal) == 0, "the identifier is the id in decimal");
    CHECK(strcmp(storekit_transaction_product_id(bought), "com.example.game.coins100") == 0, "the product");
    CHECK(storekit_transaction_quantity(bought) == 1, "quantity 1");
    CHECK(strcmp(storekit_transaction_state_name(storekit_transaction_state_of(bought)), "purchased") == 0, "purchased");
    CHECK(!storekit_transaction_is_finished(bought), "not finished yet");
    CHECK(storekit_transaction_date(bought) > 0, "a date");
    const char *jws = storekit_transaction_jws(bought);
    CHECK(jws != NULL, "a purchased transaction carries its JWS");
    char *payload = NULL;
    int verified = storekit_verify_jws(sk, jws, &payload);
    CHECK(verified == STOREKIT_OK, "the JWS verifies: %s (%s)", storekit_strerror(verified), storekit_last_message(sk));
    CHECK(payload && strstr(payload, decimal), "the payload names the transaction: %s", payload ? payload : "(none)");
    free(payload);
    const char *root = getenv("STOREKIT_ROOT_CERTIFICATE");
    CHECK(root != NULL, "STOREKIT_ROOT_CERTIFICATE is set by the test");
    CHECK(storekit_verify_jws_with_root(jws, root, NULL) == STOREKIT_OK, "verifies with the root given");

    char *changed = tampered(jws);
    verified = storekit_verify_jws(sk, changed, &payload);
    CHECK(verified == STOREKIT_ERROR_INVALID_SIGNATURE, "a changed payload byte: INVALID_SIGNATURE, got %s (%s)",
          storekit_strerror(verified), storekit_last_message(sk));
    CHECK(payload == NULL, "no payload for what does not verify");
    free(changed);
    CHECK(storekit_verify_jws(sk, "a.b", NULL) == STOREKIT_ERROR_INVALID_ENCODING, "two parts");
    CHECK(storekit_verify_jws(sk, "e30.e30.AA==", NULL) == STOREKIT_ERROR_INVALID_ENCODING, "padding is not base64url");
    CHECK(storekit_verify_jws(sk, "e30.e30.AAAA", NULL) == STOREKIT_ERROR_INVALID_ENCODING, "a header without alg");
    CHECK(storekit_verify_jws_with_root(jws, "/nonexistent/root.pem", NULL) == STOREKIT_ERROR_NO_ROOT_CERTIFICATE,
          "a root that is not there");

    char wrong_root[512];
    make_wrong_root(wrong_root, sizeof wrong_root);
    verified = storekit_verify_jws_with_root(jws, wrong_root, NULL);
    CHECK(verified == STOREKIT_ERROR_INVALID_CHAIN, "another root: INVALID_CHAIN, got %s", storekit_strerror(verified));
    char *saved_root = strdup(root);
    setenv("STOREKIT_ROOT_CERTIFICATE", wrong_root, 1);
    verified = storekit_verify_jws(sk, jws, NULL);
    CHECK(verified == STOREKIT_ERROR_INVALID_CHAIN, "STOREKIT_ROOT_CERTIFICATE of another chain: INVALID_CHAIN, got %s",
          storekit_strerror(verified));
    setenv("STOREKIT_ROOT_CERTIFICATE", "/nonexistent/root.pem", 1);
    CHECK(storekit_verify_jws(sk, jws, NULL) == STOREKIT_ERROR_NO_ROOT_CERTIFICATE, "no root: NO_ROOT_CERTIFICATE");
    CHECK(strstr(storekit_last_message(sk), "/nonexistent/root.pem") != NULL, "the message names the path: %s",
          storekit_last_message(sk));
    setenv("STOREKIT_ROOT_CERTIFICATE", saved_root, 1);

    record *finished = answer(sk, storekit_finish(sk, id));
    CHECK(finished->error == STOREKIT_OK && finished->value == id, "finished: %s", finished->message);
    const storekit_transaction *removed = wait_transaction(sk, STOREKIT_EVENT_REMOVED, id, -1);
    CHECK(storekit_transaction_is_finished(removed), "REMOVED carries the finished record");
    record *again = answer(sk, storekit_finish(sk, id));
    CHECK(again->error == STOREKIT_OK, "finishing twice is fine: %s", again->message);
    record *unknown = answer(sk, storekit_finish(sk, 12345));
    CHECK(unknown->error == STOREKIT_ERROR_TRANSACTION_NOT_FOUND, "an unknown id: TRANSACTION_NOT_FOUND, got %d",
          unknown->error);
    CHECK(unknown->message[0] != 0, "the refusal says why");

    /* A refused payment: no transaction, STOREKIT with SKError 5. */
    record *refused = answer(sk, storekit_add_payment(sk, "com.example.nothing", 1, NULL));
    CHECK(refused->kind == STOREKIT_EVENT_RESULT && refused->error == STOREKIT_ERROR_STOREKIT && refused->skerror == 5,
          "an unknown product: STOREKIT / SKError 5, got %d / %d", refused->error, refused->skerror);
    CHECK(strcmp(storekit_last_message(sk), refused->message) == 0, "last_message has the refusal's words");

    /* Restore: a finished non-consumable comes back as restored. */
    const storekit_transaction *pack = buy(sk, "com.example.game.level_pack");
    uint64_t pack_id = storekit_transaction_id(pack);
    CHECK(answer(sk, storekit_finish(sk, pack_id))->error == STOREKIT_OK, "the level pack finished");
    record *restore = answer(sk, storekit_restore(sk, NULL));
    CHECK(restore->kind == STOREKIT_EVENT_RESTORE_FINISHED && restore->error == STOREKIT_OK && restore->value >= 1,
          "RESTORE_FINISHED with at least one restored (kind %d, error %d, value %llu)", restore->kind, restore->error,
          (unsigned long long)restore->value);
    transaction_match restored_match = {STOREKIT_EVENT_UPDATED, 0, STOREKIT_RESTORED};
    record *restored = wait_for(sk, has_transaction, &restored_match, 1, "restored transaction (before the result)");
    const storekit_transaction *restored_one = find_transaction(restored, &restored_match);
    CHECK(storekit_transaction_original_id(restored_one) != 0, "a restored transaction names its original");
    CHECK(storekit_transaction_jws(restored_one) != NULL, "and carries a JWS");
    CHECK(storekit_verify_jws(sk, storekit_transaction_jws(restored_one), NULL) == STOREKIT_OK, "which verifies");
    CHECK(answer(sk, storekit_finish(sk, storekit_transaction_id(restored_one)))->error == STOREKIT_OK, "finished");

    /* The receipt: PKCS#7 that verifies; a changed byte does not. */
    record *receipt = answer(sk, storekit_request_receipt(sk));
    CHECK(receipt->kind == STOREKIT_EVENT_RECEIPT && receipt->data && receipt->data_length > 100,
          "RECEIPT with bytes (kind %d: %s)", receipt->kind, receipt->message);
    int receipt_verified = storekit_verify_receipt(sk, receipt->data, receipt->data_length);
    CHECK(receipt_verified == STOREKIT_OK, "the receipt verifies: %s (%s)", storekit_strerror(receipt_verified),
          storekit_last_message(sk));
    setenv("STOREKIT_ROOT_CERTIFICATE", wrong_root, 1);
    receipt_verified = storekit_verify_receipt(sk, receipt->data, receipt->data_length);
    CHECK(receipt_verified == STOREKIT_ERROR_INVALID_CHAIN, "a receipt under another root: INVALID_CHAIN, got %s (%s)",
          storekit_strerror(receipt_verified), storekit_last_message(sk));
    setenv("STOREKIT_ROOT_CERTIFICATE", saved_root, 1);
    free(saved_root);
    remove_wrong_root(wrong_root);
    receipt->data[receipt->data_length / 2] ^= 0x01;
    receipt_verified = storekit_verify_receipt(sk, receipt->data, receipt->data_length);
    CHECK(receipt_verified != STOREKIT_OK, "a changed receipt byte does not verify");
    CHECK(storekit_verify_receipt(sk, (const uint8_t *)"junk", 4) == STOREKIT_ERROR_INVALID_ENCODING, "junk");

    /* Unsubscribe: NULL removes the observer; the answer still comes (to nobody). */
    int64_t ping = storekit_set_observer(sk, NULL, NULL);
    CHECK(ping > 0, "unsubscribe sent");
    for (int i = 0; i < 5; i++) storekit_wait(sk, 20);
    CHECK(storekit_fd(sk) == fd, "the descriptor never changes");
    storekit_close(sk);
    storekit_close(NULL);

    /* An app the daemon does not know is refused at open, with its words. */
    storekit *nobody = NULL;
    int refused_open = storekit_open("com.example.unregistered", &nobody);
    CHECK(refused_open == STOREKIT_ERROR_UNKNOWN_APP && nobody == NULL, "an unregistered app: UNKNOWN_APP, got %s",
          storekit_strerror(refused_open));
    CHECK(strstr(storekit_open_error_message(), "com.example.unregistered") != NULL, "the message names the app: %s",
          storekit_open_error_message());
    CHECK(storekit_open("", &nobody) == STOREKIT_ERROR_BAD_ARGUMENT, "an empty app id");
    CHECK(storekit_open(app, NULL) == STOREKIT_ERROR_BAD_ARGUMENT, "no out pointer");
    CHECK(strcmp(storekit_strerror(STOREKIT_ERROR_NOT_FINISHABLE), "the transaction is not finishable") == 0, "strerror");
    CHECK(strcmp(storekit_strerror(-STOREKIT_ERROR_DISCONNECTED), storekit_strerror(STOREKIT_ERROR_DISCONNECTED)) == 0,
          "strerror takes a request call's negative return too");
    CHECK(strcmp(storekit_strerror(9999), "unknown error") == 0, "an unknown code");
    forget_records();
    printf("flow: %d checks passed\n", checks);
    return 0;
}

/* ---- no daemon ---------------------------------------------------------------------------- */

static int test_no_daemon(void) {
    setenv("STOREKITD_SOCKET", "/nonexistent/storekitd/storekitd.sock", 1);
    storekit *sk = (storekit *)1;
    int64_t started = now_ms();
    int result = storekit_open("com.example.game", &sk);
    int64_t took = now_ms() - started;
    CHECK(result == STOREKIT_ERROR_NO_DAEMON && sk == NULL, "NO_DAEMON, got %s", storekit_strerror(result));
    CHECK(took < 1000, "at once when no socket file exists (took %lld ms)", (long long)took);
    CHECK(strstr(storekit_open_error_message(), "/nonexistent/storekitd/storekitd.sock") != NULL,
          "the message names the path tried: %s", storekit_open_error_message());

    /* Without STOREKITD_SOCKET: the default order (as root only the system daemon's). */
    unsetenv("STOREKITD_SOCKET");
    if (access("/run/storekitd/storekitd.sock", F_OK) != 0) {
        result = storekit_open("com.example.game", &sk);
        CHECK(result == STOREKIT_ERROR_NO_DAEMON, "NO_DAEMON by default, got %s", storekit_strerror(result));
        CHECK(strstr(storekit_open_error_message(), "/run/storekitd/storekitd.sock") != NULL,
              "the default paths are named: %s", storekit_open_error_message());
    }

    /* A socket file nobody listens on is waited for, STOREKIT_CONNECT_TIMEOUT long. */
    char directory[] = "/tmp/storekit-test-XXXXXX";
    CHECK(mkdtemp(directory) != NULL, "mkdtemp");
    char path[96];
    snprintf(path, sizeof path, "%s/storekitd.sock", directory);
    int listener = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    snprintf(address.sun_path, sizeof address.sun_path, "%s", path);
    CHECK(bind(listener, (struct sockaddr *)&address, sizeof address) == 0, "bind: %s", strerror(errno));
    close(listener); /* the file stays, nothing listens: ECONNREFUSED */
    setenv("STOREKITD_SOCKET", path, 1);
    setenv("STOREKIT_CONNECT_TIMEOUT", "0.5", 1);
    started = now_ms();
    result = storekit_open("com.example.game", &sk);
    took = now_ms() - started;
    CHECK(result == STOREKIT_ERROR_NO_DAEMON, "nothing listening: NO_DAEMON, got %s", storekit_strerror(result));
    CHECK(took >= 300 && took < 3000, "waited about STOREKIT_CONNECT_TIMEOUT (took %lld ms)", (long long)took);
    CHECK(strstr(storekit_open_error_message(), "nothing listens") != NULL, "%s", storekit_open_error_message());
    unlink(path);
    rmdir(directory);
    printf("no-daemon: %d checks passed\n", checks);
    return 0;
}

/* ---- malformed frames from a fake server -------------------------------------------------- */

static size_t frame(uint8_t *out, const uint8_t *body, size_t length) {
    out[0] = (uint8_t)length;
    out[1] = (uint8_t)(length >> 8);
    out[2] = (uint8_t)(length >> 16);
    out[3] = (uint8_t)(length >> 24);
    memcpy(out + 4, body, length);
    return length + 4;
}

static const uint8_t welcome_body[] = {0x80, 2, 0, 0xe8, 3, 0, 0, 3, 0, 0, 0, 'U', 'S', 'A', 6, 0, 0, 0, '1', '4', '3', '4', '4', '1'};

/*
 * Serves one connection at `path`: reads the hello, sends `welcome` (when asked), then `bytes`,
 * then reads until the client goes. Runs in a child process.
 */
static pid_t fake_server(const char *path, bool welcome, const uint8_t *bytes, size_t length) {
    unlink(path);
    int listener = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    snprintf(address.sun_path, sizeof address.sun_path, "%s", path);
    CHECK(bind(listener, (struct sockaddr *)&address, sizeof address) == 0 && listen(listener, 4) == 0, "fake server");
    pid_t child = fork();
    CHECK(child >= 0, "fork");
    if (child == 0) {
        int connection = accept(listener, NULL, NULL);
        uint8_t hello[512];
        if (read(connection, hello, sizeof hello) <= 0) _exit(2);
        uint8_t out[256];
        if (welcome && write(connection, out, frame(out, welcome_body, sizeof welcome_body)) < 0) _exit(3);
        if (length > 0 && write(connection, bytes, length) < 0) _exit(4);
        struct pollfd poller = {.fd = connection, .events = POLLIN};
        while (poll(&poller, 1, 3000) > 0 && read(connection, hello, sizeof hello) > 0) {}
        _exit(0);
    }
    close(listener);
    return child;
}

static bool is_disconnected(const record *r, const void *argument) {
    (void)argument;
    return r->kind == STOREKIT_EVENT_DISCONNECTED;
}

/* After a welcome, `bytes` arrive: dispatch says PROTOCOL, the observer hears DISCONNECTED. */
static void expect_protocol_error(const char *path, const char *what, const uint8_t *bytes, size_t length) {
    pid_t child = fake_server(path, true, bytes, length);
    storekit *sk = open_or_fail("com.example.game");
    int64_t subscribed = storekit_set_observer(sk, observe, NULL);
    CHECK(subscribed > 0, "%s: subscribe sent", what);
    bool protocol = false;
    int64_t deadline = now_ms() + 5000;
    while (!protocol && now_ms() < deadline) {
        int result = storekit_wait(sk, 100);
        if (result == STOREKIT_ERROR_PROTOCOL) protocol = true;
        else CHECK(result == STOREKIT_OK || result == STOREKIT_ERROR_TIMED_OUT, "%s: %s", what, storekit_strerror(result));
    }
    CHECK(protocol, "%s: storekit_dispatch returned PROTOCOL", what);
    record *lost = wait_for(sk, is_disconnected, NULL, 1000, "DISCONNECTED");
    CHECK(lost->error == STOREKIT_ERROR_PROTOCOL, "%s: DISCONNECTED with PROTOCOL, got %d", what, lost->error);
    CHECK(lost->message[0] != 0, "%s: the event says why", what);
    record *unanswered = wait_for(sk, is_answer, &(uint32_t){(uint32_t)subscribed}, 1000, "the subscribe's answer");
    CHECK(unanswered->error == STOREKIT_ERROR_DISCONNECTED, "%s: the waiting request is answered DISCONNECTED", what);
    printf("  %s: %s\n", what, lost->message);
    storekit_close(sk);
    forget_records();
    int status;
    waitpid(child, &status, 0);
}

static void put_u32(uint8_t *at, uint32_t value) {
    for (int i = 0; i < 4; i++) at[i] = (uint8_t)(value >> (8 * i));
}

static int test_malformed(void) {
    char directory[] = "/tmp/storekit-test-XXXXXX";
    CHECK(mkdtemp(directory) != NULL, "mkdtemp");
    char path[96];
    snprintf(path, sizeof path, "%s/fake.sock", directory);
    setenv("STOREKITD_SOCKET", path, 1);
    setenv("STOREKIT_CONNECT_TIMEOUT", "2", 1);
    uint8_t out[1024];

    /* A malformed answer to hello: open fails with PROTOCOL. */
    const uint8_t bad_welcome[] = {0x80, 2, 0, 0xe8, 3};
    pid_t child = fake_server(path, false, out, frame(out, bad_welcome, sizeof bad_welcome));
    storekit *sk = NULL;
    int result = storekit_open("com.example.game", &sk);
    CHECK(result == STOREKIT_ERROR_PROTOCOL && sk == NULL, "a truncated welcome: PROTOCOL, got %s (%s)",
          storekit_strerror(result), storekit_open_error_message());
    waitpid(child, NULL, 0);
    const uint8_t version_one[] = {0x80, 1, 0, 0xe8, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    child = fake_server(path, false, out, frame(out, version_one, sizeof version_one));
    CHECK(storekit_open("com.example.game", &sk) == STOREKIT_ERROR_PROTOCOL, "a welcome of another version");
    waitpid(child, NULL, 0);
    child = fake_server(path, false, (const uint8_t *)"\0\0\0\0", 4);
    CHECK(storekit_open("com.example.game", &sk) == STOREKIT_ERROR_PROTOCOL, "a frame of length 0 at hello");
    waitpid(child, NULL, 0);

    expect_protocol_error(path, "a frame of length 0", (const uint8_t *)"\0\0\0\0", 4);
    uint8_t huge[4];
    put_u32(huge, (64u << 20) + 1);
    expect_protocol_error(path, "a frame over 64 MiB", huge, 4);
    const uint8_t unknown_type[] = {0x7f};
    expect_protocol_error(path, "an unknown message type", out, frame(out, unknown_type, 1));
    const uint8_t short_list[] = {0x82, 1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    expect_protocol_error(path, "a list longer than its frame", out, frame(out, short_list, sizeof short_list));
    const uint8_t huge_list[] = {0x82, 0xff, 0xff, 0xff, 0xff};
    expect_protocol_error(path, "a list count of 4 billion", out, frame(out, huge_list, sizeof huge_list));

    /* The smallest record (50 bytes) with `finished` = 2. */
    uint8_t record_body[1 + 4 + 50] = {0x82, 1, 0, 0, 0};
    memset(record_body + 5, 0, 50);
    record_body[5 + 8 + 1 + 4 + 4 + 4 + 4 + 1 + 8 + 8] = 2;
    expect_protocol_error(path, "a bool that is 2", out, frame(out, record_body, sizeof record_body));
    record_body[5 + 8 + 1 + 4 + 4 + 4 + 4 + 1 + 8 + 8] = 0;
    record_body[5 + 8 + 1 + 4 + 4 + 4 + 4] = 9;
    expect_protocol_error(path, "an unknown transaction state", out, frame(out, record_body, sizeof record_body));
    record_body[5 + 8 + 1 + 4 + 4 + 4 + 4] = 1;
    record_body[5 + 8] = 7;
    expect_protocol_error(path, "a presence byte that is 7", out, frame(out, record_body, sizeof record_body));

    const uint8_t bad_utf8[] = {0x87, 2, 0, 0, 0, 0xff, 0xfe, 0, 0, 0, 0};
    expect_protocol_error(path, "a string that is not UTF-8", out, frame(out, bad_utf8, sizeof bad_utf8));
    const uint8_t nul_string[] = {0x87, 2, 0, 0, 0, 'U', 0, 0, 0, 0, 0};
    expect_protocol_error(path, "a string holding a NUL", out, frame(out, nul_string, sizeof nul_string));
    const uint8_t long_string[] = {0x87, 0xf0, 0xff, 0xff, 0xff, 'U', 'S'};
    expect_protocol_error(path, "a string longer than its frame", out, frame(out, long_string, sizeof long_string));
    const uint8_t trailing[] = {0x81, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xAA};
    expect_protocol_error(path, "trailing bytes", out, frame(out, trailing, sizeof trailing));
    const uint8_t bad_code[] = {0x81, 1, 0, 0, 0, 99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    expect_protocol_error(path, "an unknown result code", out, frame(out, bad_code, sizeof bad_code));
    const uint8_t short_receipt[] = {0x8c, 1, 0, 0, 0, 0x10, 0, 0, 0, 1, 2};
    expect_protocol_error(path, "receipt bytes past the frame", out, frame(out, short_receipt, sizeof short_receipt));
    const uint8_t truncated_result[] = {0x81, 1, 0};
    expect_protocol_error(path, "a truncated result", out, frame(out, truncated_result, sizeof truncated_result));
    const uint8_t second_welcome[sizeof welcome_body] = {0x80, 2, 0, 0xe8, 3, 0, 0, 3, 0, 0, 0, 'U', 'S', 'A', 6, 0, 0, 0,
                                                         '1', '4', '3', '4', '4', '1'};
    expect_protocol_error(path, "a second welcome", out, frame(out, second_welcome, sizeof second_welcome));

    /* A promoted product whose offers list is longer than the frame. */
    uint8_t product[64] = {0x89};
    size_t at = 1;
    memset(product + at, 0, 4 + 1 + 4 + 4 + 8 + 4 + 4 + 4 + 1 + 1 + 1 + 1 + 1);
    at += 4 + 1 + 4 + 4 + 8 + 4 + 4 + 4 + 1 + 1 + 1 + 1 + 1;
    put_u32(product + at, 1000);
    at += 4;
    expect_protocol_error(path, "a product with more offers than bytes", out, frame(out, product, at));

    /* A frame split across writes and a valid push are fine: no error. */
    const uint8_t fine[] = {0x87, 3, 0, 0, 0, 'D', 'E', 'U', 6, 0, 0, 0, '1', '4', '3', '4', '4', '3'};
    child = fake_server(path, true, out, frame(out, fine, sizeof fine));
    sk = open_or_fail("com.example.game");
    storekit_set_observer(sk, observe, NULL);
    storekit_event_kind changed = STOREKIT_EVENT_STOREFRONT_CHANGED;
    wait_for(sk, is_kind, &changed, 3000, "STOREFRONT_CHANGED");
    CHECK(strcmp(storekit_storefront_country_code(sk), "DEU") == 0, "the new storefront");
    storekit_close(sk);
    forget_records();
    waitpid(child, NULL, 0);
    unlink(path);
    rmdir(directory);
    printf("malformed: %d checks passed\n", checks);
    return 0;
}

/* ---- reconnect ---------------------------------------------------------------------------- */

static int test_reconnect(const char *app, const char *ready_file) {
    storekit *sk = open_or_fail(app);
    int fd = storekit_fd(sk);
    CHECK(answer(sk, storekit_set_observer(sk, observe, NULL))->error == STOREKIT_OK, "subscribed");
    const storekit_transaction *bought = buy(sk, "com.example.game.coins100");
    uint64_t id = storekit_transaction_id(bought);
    FILE *ready = fopen(ready_file, "w");
    CHECK(ready != NULL, "cannot write %s", ready_file);
    fprintf(ready, "%llu\n", (unsigned long long)id);
    fclose(ready);

    /* The test kills the daemon and starts it again now. */
    storekit_event_kind kind = STOREKIT_EVENT_DISCONNECTED;
    record *lost = wait_for(sk, is_kind, &kind, 30000, "DISCONNECTED");
    CHECK(lost->error == STOREKIT_ERROR_DISCONNECTED, "DISCONNECTED's error, got %d", lost->error);
    CHECK(lost->fd == fd, "the same descriptor while disconnected");
    int64_t refused = storekit_finish(sk, id);
    CHECK(refused == -STOREKIT_ERROR_DISCONNECTED || refused > 0, "a request while reconnecting: DISCONNECTED or sent");
    kind = STOREKIT_EVENT_RECONNECTED;
    record *back = wait_for(sk, is_kind, &kind, 30000, "RECONNECTED");
    CHECK(back->fd == fd, "the same descriptor after reconnecting (%d, was %d)", back->fd, fd);
    const storekit_transaction *again = wait_transaction(sk, STOREKIT_EVENT_UPDATED, id, STOREKIT_PURCHASED);
    CHECK(storekit_transaction_id(again) == id, "the unfinished transaction is delivered again");
    CHECK(storekit_fd(sk) == fd, "storekit_fd unchanged");
    CHECK(answer(sk, storekit_finish(sk, id))->error == STOREKIT_OK, "finished after the restart");
    wait_transaction(sk, STOREKIT_EVENT_REMOVED, id, -1);
    storekit_close(sk);
    forget_records();
    printf("reconnect: transaction %llu delivered again on descriptor %d; %d checks passed\n", (unsigned long long)id, fd,
           checks);
    return 0;
}

/*
 * verify jws|receipt FILE [ROOT]: checks the signed data in FILE (a JWS, or a receipt's DER) and
 * prints the result's name and code, for a test that drives the daemon in between (a revocation):
 * with ROOT, the JWS through storekit_verify_jws_with_root.
 */
static int verify_file(const char *kind, const char *path, const char *root) {
    FILE *file = fopen(path, "rb");
    if (!file) {
        fprintf(stderr, "cannot read %s\n", path);
        return 2;
    }
    static uint8_t bytes[1 << 20];
    size_t length = fread(bytes, 1, sizeof bytes - 1, file);
    fclose(file);
    bytes[length] = 0;
    int result;
    if (strcmp(kind, "jws") == 0) {
        while (length > 0 && (bytes[length - 1] == '\n' || bytes[length - 1] == ' ')) bytes[--length] = 0;
        result = root ? storekit_verify_jws_with_root((const char *)bytes, root, NULL)
                      : storekit_verify_jws(NULL, (const char *)bytes, NULL);
    } else if (strcmp(kind, "receipt") == 0) {
        result = storekit_verify_receipt(NULL, bytes, length);
    } else {
        fprintf(stderr, "verify jws|receipt FILE [ROOT]\n");
        return 2;
    }
    printf("%d %s\n", result, storekit_strerror(result));
    return 0;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 3 && strcmp(argv[1], "flow") == 0) return test_flow(argv[2]);
    if (argc == 2 && strcmp(argv[1], "no-daemon") == 0) return test_no_daemon();
    if (argc == 2 && strcmp(argv[1], "malformed") == 0) return test_malformed();
    if (argc == 4 && strcmp(argv[1], "reconnect") == 0) return test_reconnect(argv[2], argv[3]);
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "verify") == 0) return verify_file(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
    fprintf(stderr, "usage: storekit-test flow APP | no-daemon | malformed | reconnect APP READY_FILE | verify jws|receipt FILE [ROOT]\n");
    return 2;
}
