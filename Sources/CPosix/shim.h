/* What Glibc's Swift overlay does not import: struct ucred, accept4, epoll. */
#ifndef STOREKIT_CPOSIX_SHIM_H
#define STOREKIT_CPOSIX_SHIM_H
/* No _GNU_SOURCE here: the headers must match the Glibc module's. What needs it is declared below. */
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
#include <sys/signalfd.h>
#include <grp.h>
#include <stdint.h>
#include <sys/syscall.h>

/* Sets the calling thread's slice in the fair scheduler (sched_attr.sched_runtime, honoured from
   Linux 6.12; no privilege needed), keeping its policy and nice value: a thread with a shorter
   slice gets the CPU sooner when it wakes up. Returns 0, or -1 with errno set. */
static inline int storekit_set_time_slice(uint64_t nanoseconds) {
    struct { uint32_t size, policy; uint64_t flags; int32_t nice; uint32_t priority;
             uint64_t runtime, deadline, period; uint32_t util_min, util_max; } attr;
    memset(&attr, 0, sizeof attr);
    if (syscall(SYS_sched_getattr, 0, &attr, (unsigned)sizeof attr, 0) != 0) return -1;
    attr.size = sizeof attr;
    attr.runtime = nanoseconds;
    return (int)syscall(SYS_sched_setattr, 0, &attr, 0);
}

struct storekit_ucred { pid_t pid; uid_t uid; gid_t gid; }; /* layout of Linux struct ucred */
extern int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);

static inline int storekit_peer_credentials(int fd, struct storekit_ucred *out) {
    socklen_t len = sizeof(*out);
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, out, &len);
}

static inline int storekit_accept(int fd) {
    return accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
}

static inline int storekit_errno(void) { return errno; }

/* renameat2(RENAME_EXCHANGE): swaps two paths in one step (Linux 3.15). Returns 0, or -1 with errno. */
static inline int storekit_exchange(const char *first, const char *second) {
    return (int)syscall(SYS_renameat2, AT_FDCWD, first, AT_FDCWD, second, 2 /* RENAME_EXCHANGE */);
}

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
/* Blocks SIGTERM, SIGINT, SIGHUP in this thread (and in threads started later) and returns a
   signalfd that reads them; SIGPIPE is ignored (writes use MSG_NOSIGNAL anyway). */
static inline int storekit_signalfd(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM); sigaddset(&set, SIGINT); sigaddset(&set, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0) return -1;
    signal(SIGPIPE, SIG_IGN);
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

/* Reads one pending signal number from a signalfd; 0 when none. */
static inline int storekit_read_signal(int fd) {
    struct signalfd_siginfo info;
    ssize_t n = read(fd, &info, sizeof(info));
    return n == (ssize_t)sizeof(info) ? (int)info.ssi_signo : 0;
}
/* Binds a datagram Unix socket at `path` (a notify socket for tests and the benchmark). */
static inline int storekit_bind_unix_dgram(const char *path) {
    struct sockaddr_un addr;
    if (strlen(path) >= sizeof(addr.sun_path)) { errno = ENAMETOOLONG; return -1; }
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    strcpy(addr.sun_path, path);
    if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) { int e = errno; close(fd); errno = e; return -1; }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
    return fd;
}
/* Receives one datagram with any SCM_RIGHTS fds (a fake service manager's notify socket).
   Returns the byte count or -1; *n_fds is set to the number of fds stored in fds. */
static inline ssize_t storekit_recv_with_fds(int fd, char *buffer, size_t length, int *fds, int max_fds, int *n_fds) {
    union { struct cmsghdr align; char buffer[CMSG_SPACE(sizeof(int) * 253)]; } control;
    struct iovec iov = { buffer, length };
    struct msghdr message;
    memset(&message, 0, sizeof(message));
    message.msg_iov = &iov; message.msg_iovlen = 1;
    message.msg_control = control.buffer; message.msg_controllen = sizeof(control.buffer);
    ssize_t count = recvmsg(fd, &message, MSG_CMSG_CLOEXEC);
    *n_fds = 0;
    if (count < 0) return -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&message); c; c = CMSG_NXTHDR(&message, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            int *received = (int *)CMSG_DATA(c);
            for (int i = 0; i < n; i++) {
                if (*n_fds < max_fds) fds[(*n_fds)++] = received[i]; else close(received[i]);
            }
        }
    }
    return count;
}
/* Sends `length` bytes on a stream socket with one descriptor attached to the first byte
   (SCM_RIGHTS), without SIGPIPE. Returns the bytes sent or -1. */
static inline ssize_t storekit_send_with_fd(int socket, const void *buffer, size_t length, int fd) {
    union { struct cmsghdr align; char buffer[CMSG_SPACE(sizeof(int))]; } control;
    struct iovec iov = { (void *)buffer, length };
    struct msghdr message;
    memset(&message, 0, sizeof(message));
    memset(&control, 0, sizeof(control));
    message.msg_iov = &iov; message.msg_iovlen = 1;
    message.msg_control = control.buffer; message.msg_controllen = sizeof(control.buffer);
    struct cmsghdr *c = CMSG_FIRSTHDR(&message);
    c->cmsg_level = SOL_SOCKET; c->cmsg_type = SCM_RIGHTS; c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    return sendmsg(socket, &message, MSG_NOSIGNAL);
}
/* Sends the `count` buffers of `iov` in order on a stream socket (one gathering write), with the
   descriptor `fd` attached to the first byte (SCM_RIGHTS) unless it is -1; without SIGPIPE.
   Returns the bytes sent or -1. */
static inline ssize_t storekit_sendv(int socket, const struct iovec *iov, int count, int fd) {
    union { struct cmsghdr align; char buffer[CMSG_SPACE(sizeof(int))]; } control;
    struct msghdr message;
    memset(&message, 0, sizeof(message));
    message.msg_iov = (struct iovec *)iov; message.msg_iovlen = (size_t)count;
    if (fd >= 0) {
        memset(&control, 0, sizeof(control));
        message.msg_control = control.buffer; message.msg_controllen = sizeof(control.buffer);
        struct cmsghdr *c = CMSG_FIRSTHDR(&message);
        c->cmsg_level = SOL_SOCKET; c->cmsg_type = SCM_RIGHTS; c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    return sendmsg(socket, &message, MSG_NOSIGNAL);
}
/* Bytes written to a Unix stream socket that its peer has not read yet (SIOCOUTQ), or -1. */
#include <sys/ioctl.h>
#include <linux/sockios.h>
static inline int storekit_unread_output(int fd) {
    int count = 0;
    return ioctl(fd, SIOCOUTQ, &count) == 0 ? count : -1;
}
/* pidfd_open(2) through syscall(2): glibc 2.36 has no wrapper in its headers here. */
#include <sys/syscall.h>
#include <poll.h>
static inline int storekit_pidfd_open(pid_t pid) {
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    return (int)syscall(434, pid, 0);
#endif
}

/* 1 when `fd` reports readable/hang-up at once (a pidfd of an exited process, a closed peer). */
static inline int storekit_poll_now(int fd, short events) {
    struct pollfd p = { fd, events, 0 };
    return poll(&p, 1, 0) > 0 ? 1 : 0;
}
/* Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and every thread it starts later. */
static inline int storekit_block_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM); sigaddset(&set, SIGINT); sigaddset(&set, SIGHUP);
    return sigprocmask(SIG_BLOCK, &set, NULL);
}
/* pwritev2 (glibc 2.26, Linux 4.7) with its flags, e.g. RWF_DSYNC = 2: a write that returns
   once its range is on disk. */
struct iovec;
extern ssize_t pwritev2(int fd, const struct iovec *iov, int count, off_t offset, int flags);
static inline ssize_t storekit_pwrite_flags(int fd, const void *buffer, size_t count, off_t offset, int flags) {
    struct { const void *base; size_t length; } vector = { buffer, count };
    return pwritev2(fd, (const struct iovec *)&vector, 1, offset, flags);
}

/* Names the calling thread (at most 15 bytes), as ps -T, top -H and perf show it. */
#include <sys/prctl.h>
static inline void storekit_name_thread(const char *name) {
    (void)prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

/* Starts writing back a range of a file without waiting for it (sync_file_range with
   SYNC_FILE_RANGE_WRITE): the file system allocates the range's blocks as it does. */
extern int sync_file_range(int fd, __off64_t offset, __off64_t count, unsigned int flags);
static inline int storekit_start_writeback(int fd, __off64_t offset, __off64_t count) {
    return sync_file_range(fd, offset, count, 2 /* SYNC_FILE_RANGE_WRITE */);
}

/* The type of the file system holding `path` (statfs f_type, e.g. 0xEF53 for ext4), or -1. */
#include <sys/vfs.h>
static inline long storekit_file_system_type(const char *path) {
    struct statfs info;
    return statfs(path, &info) == 0 ? (long)info.f_type : -1;
}

/* Whether any extent of the file is still waiting for delayed allocation (FIEMAP): 1 yes, 0 no,
   -1 when the file system cannot say (errno set). */
#include <sys/ioctl.h>
#include <linux/fs.h>
#include <linux/fiemap.h>
static inline int storekit_has_delayed_allocation(int fd) {
    struct { struct fiemap map; struct fiemap_extent extents[64]; } request;
    __u64 start = 0;
    for (;;) {
        memset(&request, 0, sizeof(request));
        request.map.fm_start = start;
        request.map.fm_length = ~0ULL;
        request.map.fm_extent_count = 64;
        if (ioctl(fd, FS_IOC_FIEMAP, &request.map) < 0) return -1;
        if (request.map.fm_mapped_extents == 0) return 0;
        for (__u32 i = 0; i < request.map.fm_mapped_extents; i++) {
            struct fiemap_extent *extent = &request.extents[i];
            if (extent->fe_flags & FIEMAP_EXTENT_DELALLOC) return 1;
            if (extent->fe_flags & FIEMAP_EXTENT_LAST) return 0;
            start = extent->fe_logical + extent->fe_length;
        }
    }
}

#endif
