/* What Glibc's Swift overlay does not import: struct ucred, accept4, epoll. */
#ifndef STOREKIT_CPOSIX_SHIM_H
#define STOREKIT_CPOSIX_SHIM_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>
#include <errno.h>
#include <string.h>
#include <signal.h>

struct storekit_ucred { pid_t pid; uid_t uid; gid_t gid; };

static inline int storekit_peer_credentials(int fd, struct storekit_ucred *out) {
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) return -1;
    out->pid = cred.pid; out->uid = cred.uid; out->gid = cred.gid;
    return 0;
}

static inline int storekit_accept(int fd) {
    return accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
}

static inline int storekit_errno(void) { return errno; }

/* Binds and listens on a filesystem Unix socket path; returns fd or -1 (errno set). */
static inline int storekit_listen_unix(const char *path, int backlog, int nonblock) {
    struct sockaddr_un addr;
    if (strlen(path) >= sizeof(addr.sun_path)) { errno = ENAMETOOLONG; return -1; }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0) return -1;
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    strcpy(addr.sun_path, path);
    if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(fd, backlog) < 0) {
        int e = errno; close(fd); errno = e; return -1;
    }
    return fd;
}

/* Connects a stream socket to a Unix path; returns fd or -1 (errno set). */
static inline int storekit_connect_unix(const char *path) {
    struct sockaddr_un addr;
    if (strlen(path) >= sizeof(addr.sun_path)) { errno = ENAMETOOLONG; return -1; }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    strcpy(addr.sun_path, path);
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) { int e = errno; close(fd); errno = e; return -1; }
    return fd;
}

static inline int storekit_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event ev; ev.events = events; ev.data.u64 = data;
    return epoll_ctl(epfd, op, fd, &ev);
}

static inline int storekit_epoll_wait(int epfd, uint64_t *datas, uint32_t *events, int max, int timeout) {
    struct epoll_event evs[256];
    if (max > 256) max = 256;
    int n = epoll_wait(epfd, evs, max, timeout);
    for (int i = 0; i < n; i++) { datas[i] = evs[i].data.u64; events[i] = evs[i].events; }
    return n;
}

/* Sends fds with SCM_RIGHTS on a datagram/stream socket (for sd_notify FD store tests). */
static inline int storekit_set_nonblocking(int fd, int on) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) return -1;
    return fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}
#endif
