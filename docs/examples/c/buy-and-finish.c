/*
 * buy-and-finish APP PRODUCT — buys one PRODUCT as APP through storekitd, the way an app
 * written with libstorekit should: observe, pay, wait for `purchased`, check the signature
 * against storekitd's root, deliver, finish, and only then forget it. Prints the transaction id
 * and exits 0; any failure says why on stderr and exits 1.
 *
 *   cc buy-and-finish.c $(pkg-config --cflags --libs storekit) -o buy-and-finish
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <storekit/storekit.h>

struct purchase {
    int64_t payment_request;   /* storekit_add_payment's request id */
    uint64_t transaction_id;   /* the RESULT's value: the transaction this payment made */
    int64_t finish_request;
    bool finished;
    const char *failure;       /* set when the purchase cannot succeed */
    char failure_text[512];
    /* Transactions seen before the RESULT named ours: the daemon pushes a payment's states
     * before it answers the payment, so they are kept (latest per id) until then. */
    storekit_transaction *seen[16];
    size_t seen_count;
};

static void fail(struct purchase *purchase, const char *format, const char *detail, long code) {
    snprintf(purchase->failure_text, sizeof purchase->failure_text, format, detail, code);
    purchase->failure = purchase->failure_text;
}

/* The transaction this payment made, once it is decided: checked, "delivered", finished. */
static void transaction_updated(storekit *sk, struct purchase *purchase, const storekit_transaction *t) {
    switch (storekit_transaction_state_of(t)) {
    case STOREKIT_PURCHASING:
        return;
    case STOREKIT_PURCHASED:
        break;
    case STOREKIT_FAILED:
        fail(purchase, "the purchase failed: %s (SKError %ld)",
             storekit_transaction_error_message(t) ? storekit_transaction_error_message(t) : "no reason given",
             (long)storekit_transaction_error_code(t));
        /* A failed transaction is finished too, or it comes back at every start. */
        storekit_finish(sk, storekit_transaction_id(t));
        return;
    case STOREKIT_DEFERRED:
        fail(purchase, "the purchase waits for approval (Ask to Buy)%s%ld", "", 0);
        return;
    case STOREKIT_RESTORED:
        return;
    }
    const char *jws = storekit_transaction_jws(t);
    int verified = jws ? storekit_verify_jws(sk, jws, NULL) : STOREKIT_ERROR_INVALID_ENCODING;
    if (verified != STOREKIT_OK) {
        /* Not delivered, not finished: it stays in the queue and is delivered again. */
        fail(purchase, "the transaction's signature does not verify: %s (error %ld)", storekit_last_message(sk),
             (long)verified);
        return;
    }
    /* Deliver the content here, durably, before finishing. */
    purchase->finish_request = storekit_finish(sk, storekit_transaction_id(t));
    if (purchase->finish_request < 0)
        fail(purchase, "cannot finish the transaction: %s (error %ld)", storekit_last_message(sk),
             (long)-purchase->finish_request);
}

static void observe(storekit *sk, const storekit_event *event, void *userdata) {
    struct purchase *purchase = userdata;
    switch (storekit_event_kind_of(event)) {
    case STOREKIT_EVENT_RESULT: {
        int64_t request = storekit_event_request_id(event);
        int error = storekit_event_error(event);
        if (request == purchase->payment_request) {
            if (error != STOREKIT_OK) {
                fail(purchase, "the payment was refused: %s (SKError %ld)", storekit_event_message(event),
                     (long)storekit_event_skerror_code(event));
                return;
            }
            purchase->transaction_id = storekit_event_value(event);
            for (size_t i = 0; i < purchase->seen_count; i++)
                if (storekit_transaction_id(purchase->seen[i]) == purchase->transaction_id)
                    transaction_updated(sk, purchase, purchase->seen[i]);
        } else if (request == purchase->finish_request) {
            if (error != STOREKIT_OK) {
                fail(purchase, "finishing was refused: %s (error %ld)", storekit_event_message(event), (long)error);
                return;
            }
            purchase->finished = true;
        }
        return;
    }
    case STOREKIT_EVENT_UPDATED:
        for (size_t i = 0; i < storekit_event_transaction_count(event); i++) {
            const storekit_transaction *t = storekit_event_transaction(event, i);
            /* Only this payment's transaction; others (earlier, unfinished) are another story. */
            if (purchase->transaction_id != 0) {
                if (storekit_transaction_id(t) == purchase->transaction_id) transaction_updated(sk, purchase, t);
                continue;
            }
            size_t slot = 0;
            while (slot < purchase->seen_count && storekit_transaction_id(purchase->seen[slot]) != storekit_transaction_id(t))
                slot++;
            if (slot == sizeof purchase->seen / sizeof purchase->seen[0]) continue;
            if (slot == purchase->seen_count) purchase->seen_count++;
            else storekit_transaction_free(purchase->seen[slot]);
            purchase->seen[slot] = storekit_transaction_copy(t);
        }
        return;
    case STOREKIT_EVENT_DISCONNECTED:
        fprintf(stderr, "buy-and-finish: %s; reconnecting\n", storekit_event_message(event));
        return;
    default:
        return;
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: buy-and-finish APP PRODUCT\n");
        return 2;
    }
    storekit *sk;
    int opened = storekit_open(argv[1], &sk);
    if (opened != STOREKIT_OK) {
        fprintf(stderr, "buy-and-finish: cannot open storekitd as %s: %s (%s)\n", argv[1], storekit_open_error_message(),
                storekit_strerror(opened));
        return 1;
    }
    struct purchase purchase = {0};
    int64_t observing = storekit_set_observer(sk, observe, &purchase);
    purchase.payment_request = storekit_add_payment(sk, argv[2], 1, NULL);
    if (observing < 0 || purchase.payment_request < 0) {
        fprintf(stderr, "buy-and-finish: %s\n", storekit_last_message(sk));
        storekit_close(sk);
        return 1;
    }
    for (int waited = 0; !purchase.finished && !purchase.failure; waited++) {
        if (waited >= 300) {
            fail(&purchase, "no answer from storekitd within 30 s%s%ld", "", 0);
            break;
        }
        int result = storekit_wait(sk, 100);
        if (result != STOREKIT_OK && result != STOREKIT_ERROR_TIMED_OUT) {
            fail(&purchase, "the connection failed: %s (error %ld)", storekit_last_message(sk), (long)result);
            break;
        }
    }
    storekit_close(sk);
    for (size_t i = 0; i < purchase.seen_count; i++) storekit_transaction_free(purchase.seen[i]);
    if (purchase.failure) {
        fprintf(stderr, "buy-and-finish: %s\n", purchase.failure);
        return 1;
    }
    printf("%llu\n", (unsigned long long)purchase.transaction_id);
    return 0;
}
