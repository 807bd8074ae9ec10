/*
 * The connection: one handle, one socket at a time, one stable descriptor.
 *
 * storekit_open connects and says hello blocking (the only wait besides storekit_wait); from then
 * on the socket is non-blocking. The descriptor an app polls is an epoll instance holding the
 * socket (EPOLLIN, and EPOLLOUT only while output waits) and a timerfd; the socket inside may
 * change, the epoll descriptor never does. A lost connection is noticed where it happens (a read,
 * a write, a refusal) but handled in storekit_dispatch, so the observer is only ever called from
 * there: the pending requests are answered DISCONNECTED, and the timer paces reconnection
 * (OpenStoreKit's backoff: 50 ms doubling to 5 s, each wait x 0.5...1.5). Back, the library says
 * hello again and subscribes again when an observer is set, so the unfinished transactions
 * arrive again.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

typedef enum connection_state {
    DISCONNECTED, /* no socket; the timer says when to try again */
    HELLO_SENT,   /* reconnected, hello (and requests) sent, no welcome yet */
    CONNECTED,
} connection_state;

typedef struct pending_request {
    uint32_t id;
    uint8_t type;
} pending_request;

struct storekit {
    char *app;
    char *socket_path;
    int epoll_fd;
    int timer_fd;
    int socket_fd; /* -1 while disconnected */
    connection_state state;
    bool watching_output; /* EPOLLOUT is in the socket's interest set */

    /* A loss noticed but not yet handled (in storekit_dispatch). */
    bool lost;
    int lost_error;
    char lost_message[512];

    sk_buffer input;
    sk_buffer output;
    uint32_t next_request_id;
    pending_request *pending;
    size_t pending_count;
    size_t pending_capacity;

    storekit_observer observer;
    void *userdata;
    int backoff_ms;
    uint64_t random_state;

    bool dispatching;
    bool close_requested; /* storekit_close from inside the observer: freed when dispatch returns */

    uint32_t uid;
    char country_code[64];
    char storefront_id[64];
    char message[1024];
};

static _Thread_local char open_message[1024];

/* ---- small pieces ------------------------------------------------------------------------- */

static void set_message(storekit *sk, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void set_message(storekit *sk, const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(sk->message, sizeof sk->message, format, arguments);
    va_end(arguments);
}

static uint64_t next_random(storekit *sk) {
    /* xorshift64*: jitter only, not secrets (keys come from getrandom). */
    uint64_t x = sk->random_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    sk->random_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static void arm_timer(storekit *sk, int64_t milliseconds) {
    struct itimerspec when = {0};
    if (milliseconds <= 0) {
        when.it_value.tv_nsec = 1;
    } else {
        when.it_value.tv_sec = milliseconds / 1000;
        when.it_value.tv_nsec = (milliseconds % 1000) * 1000000;
    }
    timerfd_settime(sk->timer_fd, 0, &when, NULL);
}

/* Notes a lost connection; storekit_dispatch handles it (the timer wakes the app at once). */
static void lose(storekit *sk, int error, const char *format, ...) __attribute__((format(printf, 3, 4)));
static void lose(storekit *sk, int error, const char *format, ...) {
    if (sk->lost) return;
    sk->lost = true;
    sk->lost_error = error;
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(sk->lost_message, sizeof sk->lost_message, format, arguments);
    va_end(arguments);
    arm_timer(sk, 0);
}

static void watch_output(storekit *sk) {
    if (sk->socket_fd < 0) return;
    bool want = sk_buffer_pending(&sk->output) > 0;
    if (want == sk->watching_output) return;
    struct epoll_event event = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.u32 = 1};
    if (epoll_ctl(sk->epoll_fd, EPOLL_CTL_MOD, sk->socket_fd, &event) == 0) sk->watching_output = want;
}

/* Sends what the output buffer holds, as far as the socket takes it now. */
static void flush(storekit *sk) {
    while (sk->socket_fd >= 0 && !sk->lost && sk_buffer_pending(&sk->output) > 0) {
        ssize_t sent = send(sk->socket_fd, sk->output.bytes + sk->output.start, sk_buffer_pending(&sk->output),
                            MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent > 0) {
            sk_buffer_consume(&sk->output, (size_t)sent);
        } else if (sent < 0 && errno == EINTR) {
            continue;
        } else if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            break;
        } else {
            lose(sk, STOREKIT_ERROR_DISCONNECTED, "the connection to storekitd at %s was lost: %s", sk->socket_path,
                 strerror(errno));
        }
    }
    watch_output(sk);
}

/* A whole frame at the start of the input: 1 (body, length set), 0 (not yet), -1 (bad header). */
static int next_frame(storekit *sk, const uint8_t **body, size_t *length, char *why, size_t why_size) {
    size_t available = sk_buffer_pending(&sk->input);
    if (available < 4) return 0;
    const uint8_t *p = sk->input.bytes + sk->input.start;
    uint32_t declared = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    if (declared == 0 || declared > SK_MAX_BODY) {
        sk_format(why, why_size, "a frame of %u bytes from storekitd (allowed: 1 to %u)", declared, SK_MAX_BODY);
        return -1;
    }
    if (available - 4 < declared) return 0;
    *body = p + 4;
    *length = declared;
    return 1;
}

static bool add_pending(storekit *sk, uint32_t id, uint8_t type) {
    if (sk->pending_count == sk->pending_capacity) {
        size_t capacity = sk->pending_capacity ? sk->pending_capacity * 2 : 16;
        pending_request *grown = realloc(sk->pending, capacity * sizeof *grown);
        if (!grown) return false;
        sk->pending = grown;
        sk->pending_capacity = capacity;
    }
    sk->pending[sk->pending_count++] = (pending_request){id, type};
    return true;
}

/* Removes the pending request `id`; its type, or 0 when none was waiting. */
static uint8_t take_pending(storekit *sk, uint32_t id) {
    for (size_t i = 0; i < sk->pending_count; i++) {
        if (sk->pending[i].id != id) continue;
        uint8_t type = sk->pending[i].type;
        memmove(&sk->pending[i], &sk->pending[i + 1], (sk->pending_count - i - 1) * sizeof *sk->pending);
        sk->pending_count--;
        return type;
    }
    return 0;
}

static void deliver(storekit *sk, const storekit_event *event) {
    if (event->error != STOREKIT_OK && event->message && event->message[0]) set_message(sk, "%s", event->message);
    if (sk->observer) sk->observer(sk, event, sk->userdata);
}

/* ---- connecting --------------------------------------------------------------------------- */

/* A connected socket (blocking or not), or -1 with errno. */
static int connect_socket(const char *path, bool nonblocking) {
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof address.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(address.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0) return -1;
    int result;
    do result = connect(fd, (struct sockaddr *)&address, sizeof address);
    while (result < 0 && errno == EINTR);
    if (result < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

static int connect_timeout_ms(void) {
    const char *text = getenv("STOREKIT_CONNECT_TIMEOUT");
    if (text && text[0]) {
        char *end;
        double seconds = strtod(text, &end);
        if (*end == 0 && seconds > 0 && seconds < 86400) return (int)(seconds * 1000);
    }
    return 10000;
}

/* The words for a hello's refusal: "storekitd refused APP: MESSAGE (unknown-app)". */
static const char *result_name(int code) {
    static const char *const names[] = {"ok", "store-kit-error", "malformed-request", "unknown-app", "permission-denied",
        "transaction-not-found", "not-finishable", "restore-in-progress", "storage-failure", "storage-full",
        "limit-exceeded", "not-registered", "unsupported-version", "shutting-down", "invalid-argument",
        "internal-error", "rate-limited", "quota-exceeded", "store-unreachable"};
    return code >= 0 && code <= STOREKIT_ERROR_STORE_UNREACHABLE ? names[code] : "unknown";
}

/*
 * Waits for the answer to hello on the blocking socket: STOREKIT_OK (welcomed), a refusal's
 * code, or 1000 + errno-ish values never: -1 means "closed before answering" (worth retrying).
 */
static int await_welcome(storekit *sk, int64_t deadline) {
    uint8_t chunk[65536];
    for (;;) {
        const uint8_t *body;
        size_t length;
        char why[512];
        int framed = next_frame(sk, &body, &length, why, sizeof why);
        if (framed < 0) {
            sk_format(open_message, sizeof open_message, "%s", why);
            return STOREKIT_ERROR_PROTOCOL;
        }
        if (framed > 0) {
            sk_message message;
            if (!sk_message_decode(body, length, &message, why, sizeof why)) {
                sk_format(open_message, sizeof open_message, "%s", why);
                return STOREKIT_ERROR_PROTOCOL;
            }
            sk_buffer_consume(&sk->input, 4 + length);
            int result = STOREKIT_OK;
            if (message.type == SK_MSG_WELCOME && message.version == SK_PROTOCOL_VERSION) {
                sk->uid = message.uid;
                sk_format(sk->country_code, sizeof sk->country_code, "%s", message.text);
                sk_format(sk->storefront_id, sizeof sk->storefront_id, "%s", message.text2);
            } else if (message.type == SK_MSG_RESULT && message.code != 0) {
                sk_format(open_message, sizeof open_message, "storekitd refused %s: %s (%s)", sk->app, message.text,
                          result_name(message.code));
                result = message.code;
            } else {
                sk_format(open_message, sizeof open_message,
                          "storekitd answered hello with a message of type %u (version %u), not a welcome",
                          message.type, message.version);
                result = STOREKIT_ERROR_PROTOCOL;
            }
            sk_message_free(&message);
            return result;
        }
        int64_t left = deadline - sk_now_ms();
        if (left <= 0) {
            sk_format(open_message, sizeof open_message, "storekitd at %s did not answer hello in time", sk->socket_path);
            return STOREKIT_ERROR_TIMED_OUT;
        }
        struct pollfd poller = {.fd = sk->socket_fd, .events = POLLIN};
        int ready = poll(&poller, 1, (int)(left > 1000 ? 1000 : left));
        if (ready < 0 && errno != EINTR) {
            sk_format(open_message, sizeof open_message, "poll: %s", strerror(errno));
            return STOREKIT_ERROR_SYSTEM;
        }
        if (ready <= 0) continue;
        ssize_t count = recv(sk->socket_fd, chunk, sizeof chunk, 0);
        if (count == 0 || (count < 0 && (errno == ECONNRESET || errno == EPIPE))) return -1;
        if (count < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            sk_format(open_message, sizeof open_message, "reading from %s: %s", sk->socket_path, strerror(errno));
            return STOREKIT_ERROR_SYSTEM;
        }
        sk_buffer_append(&sk->input, chunk, (size_t)count);
        if (sk->input.failed) {
            sk_format(open_message, sizeof open_message, "out of memory");
            return STOREKIT_ERROR_NO_MEMORY;
        }
    }
}

/* Connects and says hello, blocking, retrying a socket nobody listens on until the deadline. */
static int connect_blocking(storekit *sk) {
    int timeout = connect_timeout_ms();
    int64_t deadline = sk_now_ms() + timeout;
    int64_t pause = 50;
    for (;;) {
        int fd = connect_socket(sk->socket_path, false);
        if (fd < 0) {
            int error = errno;
            if (error == ENOENT) {
                char *tried = sk_socket_paths_tried();
                sk_format(open_message, sizeof open_message,
                          "no storekitd socket: tried %s (start storekitd, or set STOREKITD_SOCKET)",
                          tried ? tried : sk->socket_path);
                free(tried);
                return STOREKIT_ERROR_NO_DAEMON;
            }
            if (error == EACCES || error == EPERM) {
                sk_format(open_message, sizeof open_message,
                          "permission denied on %s: this user may not reach storekitd there", sk->socket_path);
                return STOREKIT_ERROR_PERMISSION_DENIED;
            }
            if (error != ECONNREFUSED && error != EAGAIN) {
                sk_format(open_message, sizeof open_message, "cannot connect to %s: %s", sk->socket_path, strerror(error));
                return STOREKIT_ERROR_NO_DAEMON;
            }
            if (sk_now_ms() + pause > deadline) {
                sk_format(open_message, sizeof open_message,
                          "nothing listens on %s: storekitd is not running (waited %d ms, STOREKIT_CONNECT_TIMEOUT)",
                          sk->socket_path, timeout);
                return STOREKIT_ERROR_NO_DAEMON;
            }
            struct timespec nap = {0, (long)pause * 1000000};
            nanosleep(&nap, NULL);
            pause = pause * 2 > 500 ? 500 : pause * 2;
            continue;
        }
        sk->socket_fd = fd;
        sk_buffer_clear(&sk->input);
        sk_buffer_clear(&sk->output);
        sk_encode_hello(&sk->output, sk->app);
        bool written = true;
        while (sk_buffer_pending(&sk->output) > 0) {
            ssize_t sent = send(fd, sk->output.bytes + sk->output.start, sk_buffer_pending(&sk->output), MSG_NOSIGNAL);
            if (sent < 0 && errno == EINTR) continue;
            if (sent <= 0) {
                written = false;
                break;
            }
            sk_buffer_consume(&sk->output, (size_t)sent);
        }
        sk_buffer_clear(&sk->output);
        /* A daemon refusing at accept has closed already; its reason may still be readable. */
        int result = await_welcome(sk, deadline);
        if (result == -1 || (result == STOREKIT_OK && !written)) {
            close(fd);
            sk->socket_fd = -1;
            if (sk_now_ms() + pause > deadline) {
                sk_format(open_message, sizeof open_message, "storekitd at %s closed the connection before answering hello",
                          sk->socket_path);
                return STOREKIT_ERROR_DISCONNECTED;
            }
            struct timespec nap = {0, (long)pause * 1000000};
            nanosleep(&nap, NULL);
            continue;
        }
        if (result != STOREKIT_OK) {
            close(fd);
            sk->socket_fd = -1;
        }
        return result;
    }
}

/* One attempt to reconnect, from storekit_dispatch: hello and the subscription are queued. */
static void try_reconnect(storekit *sk) {
    int fd = connect_socket(sk->socket_path, true);
    if (fd < 0) {
        set_message(sk, "cannot reach storekitd at %s: %s; trying again", sk->socket_path, strerror(errno));
        int64_t wait = sk->backoff_ms * (int64_t)(50 + next_random(sk) % 101) / 100;
        sk->backoff_ms = sk->backoff_ms * 2 > 5000 ? 5000 : sk->backoff_ms * 2;
        arm_timer(sk, wait);
        return;
    }
    struct epoll_event event = {.events = EPOLLIN, .data.u32 = 1};
    if (epoll_ctl(sk->epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) {
        set_message(sk, "epoll_ctl: %s", strerror(errno));
        close(fd);
        arm_timer(sk, sk->backoff_ms);
        return;
    }
    sk->socket_fd = fd;
    sk->watching_output = false;
    sk->state = HELLO_SENT;
    sk_buffer_clear(&sk->input);
    sk_buffer_clear(&sk->output);
    sk_encode_hello(&sk->output, sk->app);
    /* Request id 0: the reply is the library's own, not an app's request. */
    if (sk->observer) sk_encode_request(&sk->output, SK_MSG_SUBSCRIBE, 0);
    flush(sk);
}

/* The loss noted by lose(): the socket goes, the waiting requests are answered, the timer set. */
static void handle_loss(storekit *sk) {
    if (sk->socket_fd >= 0) {
        epoll_ctl(sk->epoll_fd, EPOLL_CTL_DEL, sk->socket_fd, NULL);
        close(sk->socket_fd);
        sk->socket_fd = -1;
    }
    sk->state = DISCONNECTED;
    sk->lost = false;
    sk->watching_output = false;
    sk_buffer_clear(&sk->input);
    sk_buffer_clear(&sk->output);
    int64_t wait = sk->backoff_ms * (int64_t)(50 + next_random(sk) % 101) / 100;
    arm_timer(sk, wait);
    sk->backoff_ms = sk->backoff_ms * 2 > 5000 ? 5000 : sk->backoff_ms * 2;

    pending_request *waiting = sk->pending;
    size_t count = sk->pending_count;
    sk->pending = NULL;
    sk->pending_count = sk->pending_capacity = 0;

    char message[512];
    sk_format(message, sizeof message, "%s", sk->lost_message);
    storekit_event lost = {.kind = STOREKIT_EVENT_DISCONNECTED, .error = sk->lost_error, .message = message};
    deliver(sk, &lost);
    for (size_t i = 0; i < count && !sk->close_requested; i++) {
        storekit_event answer = {
            .kind = waiting[i].type == SK_MSG_RESTORE ? STOREKIT_EVENT_RESTORE_FINISHED : STOREKIT_EVENT_RESULT,
            .request_id = waiting[i].id,
            .error = STOREKIT_ERROR_DISCONNECTED,
            .message = message,
        };
        deliver(sk, &answer);
    }
    free(waiting);
}

/* ---- handling what arrives ---------------------------------------------------------------- */

static void handle_message(storekit *sk, const sk_message *m) {
    storekit_event event = {0};
    switch (m->type) {
    case SK_MSG_WELCOME:
        if (sk->state != HELLO_SENT || m->version != SK_PROTOCOL_VERSION) {
            lose(sk, STOREKIT_ERROR_PROTOCOL, "storekitd sent an unexpected welcome (version %u)", m->version);
            return;
        }
        sk->state = CONNECTED;
        sk->uid = m->uid;
        sk->backoff_ms = 50;
        sk_format(sk->country_code, sizeof sk->country_code, "%s", m->text);
        sk_format(sk->storefront_id, sizeof sk->storefront_id, "%s", m->text2);
        set_message(sk, "reconnected to storekitd at %s", sk->socket_path);
        event.kind = STOREKIT_EVENT_RECONNECTED;
        break;
    case SK_MSG_RESULT: {
        if (m->request_id == 0) {
            /* Code 0: the library's own re-subscription. Else the connection is refused. */
            if (m->code != 0)
                lose(sk, m->code, "storekitd refused %s: %s (%s)", sk->app, m->text, result_name(m->code));
            return;
        }
        uint8_t type = take_pending(sk, m->request_id);
        if (type == 0) return; /* an answer to a request already answered DISCONNECTED */
        event.kind = type == SK_MSG_RESTORE ? STOREKIT_EVENT_RESTORE_FINISHED : STOREKIT_EVENT_RESULT;
        event.request_id = m->request_id;
        event.error = m->code;
        event.skerror = m->code == STOREKIT_ERROR_STOREKIT ? m->detail : 0;
        event.value = m->value;
        event.message = m->text;
        break;
    }
    case SK_MSG_UPDATED:
    case SK_MSG_REMOVED:
        event.kind = m->type == SK_MSG_UPDATED ? STOREKIT_EVENT_UPDATED : STOREKIT_EVENT_REMOVED;
        event.transactions = m->transactions;
        event.transaction_count = m->transaction_count;
        break;
    case SK_MSG_PRODUCTS_REPLY:
        if (take_pending(sk, m->request_id) == 0) return;
        event.kind = STOREKIT_EVENT_PRODUCTS;
        event.request_id = m->request_id;
        event.products = m->products;
        event.product_count = m->product_count;
        event.identifiers = m->identifiers;
        event.identifier_count = m->identifier_count;
        break;
    case SK_MSG_RECEIPT_REPLY:
        if (take_pending(sk, m->request_id) == 0) return;
        event.kind = STOREKIT_EVENT_RECEIPT;
        event.request_id = m->request_id;
        event.data = m->data;
        event.data_length = m->data_length;
        break;
    case SK_MSG_STOREFRONT_CHANGED:
        sk_format(sk->country_code, sizeof sk->country_code, "%s", m->text);
        sk_format(sk->storefront_id, sizeof sk->storefront_id, "%s", m->text2);
        event.kind = STOREKIT_EVENT_STOREFRONT_CHANGED;
        break;
    case SK_MSG_ENTITLEMENTS_REVOKED:
        event.kind = STOREKIT_EVENT_ENTITLEMENTS_REVOKED;
        event.identifiers = m->identifiers;
        event.identifier_count = m->identifier_count;
        break;
    case SK_MSG_PROMOTED_PURCHASE:
        event.kind = STOREKIT_EVENT_PROMOTED_PURCHASE;
        event.products = m->products;
        event.product_count = m->product_count;
        break;
    default:
        lose(sk, STOREKIT_ERROR_PROTOCOL, "storekitd sent a message of type %u this library never asked for", m->type);
        return;
    }
    deliver(sk, &event);
}

/* Reads what the socket holds and handles every whole frame. */
static void read_and_handle(storekit *sk) {
    for (int reads = 0; reads < 64 && sk->socket_fd >= 0 && !sk->lost; reads++) {
        if (!sk_buffer_reserve(&sk->input, 65536)) {
            lose(sk, STOREKIT_ERROR_NO_MEMORY, "out of memory reading from storekitd");
            return;
        }
        ssize_t count = recv(sk->socket_fd, sk->input.bytes + sk->input.length, sk->input.capacity - sk->input.length,
                             MSG_DONTWAIT);
        if (count < 0 && errno == EINTR) continue;
        if (count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (count <= 0) {
            if (count == 0)
                lose(sk, STOREKIT_ERROR_DISCONNECTED, "storekitd closed the connection (%s)", sk->socket_path);
            else
                lose(sk, STOREKIT_ERROR_DISCONNECTED, "the connection to storekitd at %s was lost: %s", sk->socket_path,
                     strerror(errno));
            break; /* frames read before the close are still handled below */
        }
        sk->input.length += (size_t)count;
    }
    while (sk->socket_fd >= 0 && !sk->close_requested) {
        const uint8_t *body;
        size_t length;
        char why[512];
        int framed = next_frame(sk, &body, &length, why, sizeof why);
        if (framed == 0) break;
        sk_message message;
        if (framed < 0 || !sk_message_decode(body, length, &message, why, sizeof why)) {
            sk->lost = false; /* a protocol error outranks the close that may have followed it */
            lose(sk, STOREKIT_ERROR_PROTOCOL, "%s", why);
            return;
        }
        sk_buffer_consume(&sk->input, 4 + length);
        handle_message(sk, &message);
        sk_message_free(&message);
        if (sk->lost && sk->lost_error == STOREKIT_ERROR_PROTOCOL) return;
    }
}

/* ---- the public calls --------------------------------------------------------------------- */

static void free_handle(storekit *sk) {
    if (sk->socket_fd >= 0) close(sk->socket_fd);
    if (sk->timer_fd >= 0) close(sk->timer_fd);
    if (sk->epoll_fd >= 0) close(sk->epoll_fd);
    sk_buffer_free(&sk->input);
    sk_buffer_free(&sk->output);
    free(sk->pending);
    free(sk->app);
    free(sk->socket_path);
    free(sk);
}

SK_EXPORT const char *storekit_open_error_message(void) { return open_message; }

SK_EXPORT int storekit_open(const char *app_id, storekit **out) {
    open_message[0] = 0;
    if (!out) {
        sk_format(open_message, sizeof open_message, "storekit_open: out is NULL");
        return STOREKIT_ERROR_BAD_ARGUMENT;
    }
    *out = NULL;
    if (!app_id || !app_id[0] || !sk_utf8_valid((const uint8_t *)app_id, strlen(app_id))) {
        sk_format(open_message, sizeof open_message, "storekit_open: the app id must be a non-empty UTF-8 string");
        return STOREKIT_ERROR_BAD_ARGUMENT;
    }
    storekit *sk = calloc(1, sizeof *sk);
    if (!sk) goto no_memory;
    sk->epoll_fd = sk->timer_fd = sk->socket_fd = -1;
    sk->backoff_ms = 50;
    sk->next_request_id = 1;
    sk->app = strdup(app_id);
    sk->socket_path = sk_socket_path();
    if (!sk->app || !sk->socket_path) goto no_memory;
    if (getrandom(&sk->random_state, sizeof sk->random_state, GRND_NONBLOCK) != sizeof sk->random_state
        || sk->random_state == 0)
        sk->random_state = (uint64_t)sk_now_ms() * 2654435761u + 1;

    int result = connect_blocking(sk);
    if (result != STOREKIT_OK) {
        free_handle(sk);
        return result;
    }
    /* From here on every send and recv is MSG_DONTWAIT: the socket never blocks the app. */
    sk->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    sk->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct epoll_event socket_event = {.events = EPOLLIN, .data.u32 = 1};
    struct epoll_event timer_event = {.events = EPOLLIN, .data.u32 = 2};
    if (sk->epoll_fd < 0 || sk->timer_fd < 0 || epoll_ctl(sk->epoll_fd, EPOLL_CTL_ADD, sk->socket_fd, &socket_event) != 0
        || epoll_ctl(sk->epoll_fd, EPOLL_CTL_ADD, sk->timer_fd, &timer_event) != 0) {
        sk_format(open_message, sizeof open_message, "cannot make the poll descriptor: %s", strerror(errno));
        free_handle(sk);
        return STOREKIT_ERROR_SYSTEM;
    }
    sk->state = CONNECTED;
    /* Bytes that came with the welcome are in the input already, not in the socket: the
     * timer makes the descriptor readable so that storekit_dispatch handles them. */
    if (sk_buffer_pending(&sk->input) > 0) arm_timer(sk, 0);
    *out = sk;
    return STOREKIT_OK;

no_memory:
    if (sk) free_handle(sk);
    sk_format(open_message, sizeof open_message, "out of memory");
    return STOREKIT_ERROR_NO_MEMORY;
}

SK_EXPORT void storekit_close(storekit *sk) {
    if (!sk) return;
    if (sk->dispatching) {
        sk->close_requested = true;
        return;
    }
    free_handle(sk);
}

SK_EXPORT int storekit_fd(const storekit *sk) { return sk ? sk->epoll_fd : -1; }

SK_EXPORT int storekit_dispatch(storekit *sk) {
    if (!sk) return STOREKIT_ERROR_BAD_ARGUMENT;
    if (sk->dispatching) {
        set_message(sk, "storekit_dispatch called from inside the observer");
        return STOREKIT_ERROR_BAD_ARGUMENT;
    }
    sk->dispatching = true;
    int result = STOREKIT_OK;
    uint64_t expirations;
    bool fired = read(sk->timer_fd, &expirations, sizeof expirations) == sizeof expirations;

    if (sk->state != DISCONNECTED && !sk->lost) read_and_handle(sk);
    if (sk->lost && !sk->close_requested) {
        if (sk->lost_error == STOREKIT_ERROR_PROTOCOL) result = STOREKIT_ERROR_PROTOCOL;
        handle_loss(sk);
    } else if (sk->state == DISCONNECTED && fired && !sk->close_requested) {
        try_reconnect(sk);
    }
    if (sk->state != DISCONNECTED && !sk->close_requested) flush(sk);

    sk->dispatching = false;
    if (sk->close_requested) {
        free_handle(sk);
        return result;
    }
    return result;
}

SK_EXPORT int storekit_wait(storekit *sk, int timeout_ms) {
    if (!sk) return STOREKIT_ERROR_BAD_ARGUMENT;
    int64_t deadline = timeout_ms < 0 ? -1 : sk_now_ms() + timeout_ms;
    for (;;) {
        int left = deadline < 0 ? -1 : (int)(deadline - sk_now_ms());
        if (deadline >= 0 && left < 0) left = 0;
        struct pollfd poller = {.fd = sk->epoll_fd, .events = POLLIN};
        int ready = poll(&poller, 1, left);
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) {
            set_message(sk, "poll: %s", strerror(errno));
            return STOREKIT_ERROR_SYSTEM;
        }
        if (ready == 0) return STOREKIT_ERROR_TIMED_OUT;
        return storekit_dispatch(sk);
    }
}

SK_EXPORT uint32_t storekit_uid(const storekit *sk) { return sk ? sk->uid : 0; }
SK_EXPORT const char *storekit_storefront_country_code(const storekit *sk) { return sk ? sk->country_code : NULL; }
SK_EXPORT const char *storekit_storefront_id(const storekit *sk) { return sk ? sk->storefront_id : NULL; }
SK_EXPORT const char *storekit_last_message(const storekit *sk) { return sk ? sk->message : ""; }

/* ---- requests ----------------------------------------------------------------------------- */

/* Starts a request: its id, or a negative error (the handle cannot send now). */
static int64_t begin_request(storekit *sk, const char *what) {
    if (!sk) return -STOREKIT_ERROR_BAD_ARGUMENT;
    if (sk->state == DISCONNECTED || sk->lost) {
        set_message(sk, "%s: not connected to storekitd (reconnecting): %s", what,
                    sk->lost ? sk->lost_message : "the connection was lost");
        return -STOREKIT_ERROR_DISCONNECTED;
    }
    uint32_t id = sk->next_request_id++;
    if (sk->next_request_id == 0) sk->next_request_id = 1;
    return id;
}

/* Sends what was encoded since `mark` as request `id` of `type`. */
static int64_t end_request(storekit *sk, int64_t id, uint8_t type, size_t mark) {
    if (sk->output.failed || !add_pending(sk, (uint32_t)id, type)) {
        sk->output.failed = false;
        if (sk->output.length >= mark) sk->output.length = mark;
        set_message(sk, "out of memory");
        return -STOREKIT_ERROR_NO_MEMORY;
    }
    flush(sk);
    return id;
}

static bool valid_text(const char *text) { return text && sk_utf8_valid((const uint8_t *)text, strlen(text)); }

SK_EXPORT int64_t storekit_set_observer(storekit *sk, storekit_observer observer, void *userdata) {
    if (!sk) return -STOREKIT_ERROR_BAD_ARGUMENT;
    sk->observer = observer;
    sk->userdata = userdata;
    int64_t id = begin_request(sk, observer ? "subscribe" : "unsubscribe");
    if (id < 0) return id; /* kept: the subscription is made when the connection is back */
    size_t mark = sk->output.length;
    sk_encode_request(&sk->output, observer ? SK_MSG_SUBSCRIBE : SK_MSG_UNSUBSCRIBE, (uint32_t)id);
    return end_request(sk, id, observer ? SK_MSG_SUBSCRIBE : SK_MSG_UNSUBSCRIBE, mark);
}

/* A random idempotency key (a UUID, as OpenStoreKit's): a retried payment is one purchase. */
static bool make_key(char key[37]) {
    uint8_t bytes[16];
    size_t got = 0;
    while (got < sizeof bytes) {
        ssize_t count = getrandom(bytes + got, sizeof bytes - got, 0);
        if (count < 0 && errno == EINTR) continue;
        if (count <= 0) return false;
        got += (size_t)count;
    }
    bytes[6] = (bytes[6] & 0x0F) | 0x40;
    bytes[8] = (bytes[8] & 0x3F) | 0x80;
    static const char hex[] = "0123456789abcdef";
    size_t at = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) key[at++] = '-';
        key[at++] = hex[bytes[i] >> 4];
        key[at++] = hex[bytes[i] & 15];
    }
    key[at] = 0;
    return true;
}

SK_EXPORT int64_t storekit_add_payment(storekit *sk, const char *product_id, int32_t quantity,
                                       const char *application_username) {
    if (!sk) return -STOREKIT_ERROR_BAD_ARGUMENT;
    if (!valid_text(product_id) || !product_id[0] || quantity < 1 || quantity > 10
        || (application_username && !valid_text(application_username))) {
        set_message(sk, "storekit_add_payment: a product id (UTF-8, not empty), a quantity of 1 to 10 and an "
                        "application username that is NULL or UTF-8 are needed");
        return -STOREKIT_ERROR_BAD_ARGUMENT;
    }
    char key[37];
    if (!make_key(key)) {
        set_message(sk, "getrandom: %s", strerror(errno));
        return -STOREKIT_ERROR_SYSTEM;
    }
    int64_t id = begin_request(sk, "add_payment");
    if (id < 0) return id;
    size_t mark = sk->output.length;
    sk_encode_add_payment(&sk->output, (uint32_t)id, key, product_id, quantity, application_username);
    return end_request(sk, id, SK_MSG_ADD_PAYMENT, mark);
}

SK_EXPORT int64_t storekit_finish(storekit *sk, uint64_t transaction_id) {
    int64_t id = begin_request(sk, "finish");
    if (id < 0) return id;
    size_t mark = sk->output.length;
    sk_encode_finish(&sk->output, (uint32_t)id, transaction_id);
    return end_request(sk, id, SK_MSG_FINISH, mark);
}

SK_EXPORT int64_t storekit_restore(storekit *sk, const char *application_username) {
    if (sk && application_username && !valid_text(application_username)) {
        set_message(sk, "storekit_restore: the application username is not UTF-8");
        return -STOREKIT_ERROR_BAD_ARGUMENT;
    }
    int64_t id = begin_request(sk, "restore");
    if (id < 0) return id;
    size_t mark = sk->output.length;
    sk_encode_restore(&sk->output, (uint32_t)id, application_username);
    return end_request(sk, id, SK_MSG_RESTORE, mark);
}

SK_EXPORT int64_t storekit_request_products(storekit *sk, const char *const *product_ids, size_t count) {
    if (!sk) return -STOREKIT_ERROR_BAD_ARGUMENT;
    if ((count > 0 && !product_ids) || count > UINT32_MAX) {
        set_message(sk, "storekit_request_products: no identifiers");
        return -STOREKIT_ERROR_BAD_ARGUMENT;
    }
    for (size_t i = 0; i < count; i++) {
        if (!valid_text(product_ids[i])) {
            set_message(sk, "storekit_request_products: identifier %zu is NULL or not UTF-8", i);
            return -STOREKIT_ERROR_BAD_ARGUMENT;
        }
    }
    int64_t id = begin_request(sk, "request_products");
    if (id < 0) return id;
    size_t mark = sk->output.length;
    sk_encode_products(&sk->output, (uint32_t)id, product_ids, count);
    return end_request(sk, id, SK_MSG_PRODUCTS, mark);
}

SK_EXPORT int64_t storekit_request_receipt(storekit *sk) {
    int64_t id = begin_request(sk, "request_receipt");
    if (id < 0) return id;
    size_t mark = sk->output.length;
    sk_encode_request(&sk->output, SK_MSG_RECEIPT, (uint32_t)id);
    return end_request(sk, id, SK_MSG_RECEIPT, mark);
}

/* ---- signed data, with the handle's socket ------------------------------------------------ */

SK_EXPORT int storekit_verify_jws(storekit *sk, const char *jws, char **payload_json) {
    char message[1024] = "";
    int result = sk_verify_jws_with_socket(jws, sk ? sk->socket_path : NULL, payload_json, message, sizeof message);
    if (sk && result != STOREKIT_OK) set_message(sk, "%s", message);
    return result;
}

SK_EXPORT int storekit_verify_receipt(storekit *sk, const uint8_t *receipt, size_t length) {
    char message[1024] = "";
    int result = sk_verify_receipt_with_socket(receipt, length, sk ? sk->socket_path : NULL, message, sizeof message);
    if (sk && result != STOREKIT_OK) set_message(sk, "%s", message);
    return result;
}
