/* record.c: an LD_PRELOAD library that records what a process writes to the files of one
 * directory, and when it asks for them to be durable, for the power-cut tests
 * (docs/powercut.md). Every write, sync, truncation, allocation, rename and unlink of a file
 * under $POWERCUT_DIR is appended to $POWERCUT_LOG as a record:
 *
 *   u32 op, u32 path length, u64 offset, u64 length, u64 CLOCK_MONOTONIC ns, path, data
 *
 * (data only for writes; for renames the path is "from\0to"). The call itself is made first
 * and recorded only when it succeeded; records are written under one lock, in the order the
 * calls returned. Memory-mapped writes (SQLite's -shm index) are not seen: the tests drop that
 * file from every crash state, as a power cut may. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum { OP_WRITE = 1, OP_SYNC = 2, OP_TRUNCATE = 3, OP_ALLOCATE = 4, OP_RENAME = 5, OP_EXCHANGE = 6, OP_UNLINK = 7,
       OP_CREATE = 8 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = -1;
static char dir[PATH_MAX];
static size_t dir_length;
#define MAX_FDS 65536
static char *paths[MAX_FDS];
static int dsync[MAX_FDS];

static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_write)(int, const void *, size_t);

static void setup(void) {
    static int done;
    if (done) return;
    done = 1;
    real_pwrite = dlsym(RTLD_NEXT, "pwrite64");
    real_write = dlsym(RTLD_NEXT, "write");
    const char *d = getenv("POWERCUT_DIR"), *l = getenv("POWERCUT_LOG");
    if (!d || !l) return;
    if (!realpath(d, dir)) return;
    dir_length = strlen(dir);
    int (*real_open)(const char *, int, ...) = dlsym(RTLD_NEXT, "open64");
    log_fd = real_open(l, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The absolute path of `path` (relative to `dirfd`) if it is under the directory, else NULL. */
static char *watched(int dirfd, const char *path) {
    if (log_fd < 0 || !path) return NULL;
    char full[PATH_MAX * 2];
    if (path[0] == '/') {
        snprintf(full, sizeof full, "%s", path);
    } else {
        char base[PATH_MAX];
        if (dirfd == AT_FDCWD) {
            if (!getcwd(base, sizeof base)) return NULL;
        } else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            ssize_t n = readlink(link, base, sizeof base - 1);
            if (n < 0) return NULL;
            base[n] = 0;
        }
        snprintf(full, sizeof full, "%s/%s", base, path);
    }
    if (strncmp(full, dir, dir_length) != 0 || (full[dir_length] != '/' && full[dir_length] != 0)) return NULL;
    return strdup(full);
}

static void record(uint32_t op, const char *path, size_t path_length, uint64_t offset, uint64_t length,
                   const struct iovec *data, int count) {
    uint32_t header32[2] = { op, (uint32_t)path_length };
    uint64_t header64[3] = { offset, length, now_ns() };
    pthread_mutex_lock(&lock);
    struct iovec parts[3 + 64];
    int n = 0;
    parts[n++] = (struct iovec){ header32, sizeof header32 };
    parts[n++] = (struct iovec){ header64, sizeof header64 };
    parts[n++] = (struct iovec){ (void *)path, path_length };
    for (int i = 0; i < count && n < 3 + 64; i++) parts[n++] = data[i];
    /* One record, one writev: O_APPEND keeps records whole even if the daemon forks. */
    ssize_t (*real_writev)(int, const struct iovec *, int) = dlsym(RTLD_NEXT, "writev");
    real_writev(log_fd, parts, n);
    pthread_mutex_unlock(&lock);
}

static void record_path(uint32_t op, const char *path, uint64_t offset, uint64_t length) {
    record(op, path, strlen(path), offset, length, NULL, 0);
}

static void track(int fd, char *path, int flags) {
    if (fd < 0 || fd >= MAX_FDS) { free(path); return; }
    free(paths[fd]);
    paths[fd] = path;
    dsync[fd] = (flags & (O_DSYNC | O_SYNC)) != 0;
}

static int opened(int fd, int dirfd, const char *path, int flags, int existed) {
    if (fd < 0) return fd;
    char *full = watched(dirfd, path);
    if (!full) { if (fd < MAX_FDS) { free(paths[fd]); paths[fd] = NULL; } return fd; }
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        if (!existed) record_path(OP_CREATE, full, 0, 0);
        if (flags & O_TRUNC) record_path(OP_TRUNCATE, full, 0, 0);
        track(fd, full, flags);
    } else {
        free(full);
    }
    return fd;
}

static int exists_at(int dirfd, const char *path) {
    struct stat st;
    return fstatat(dirfd, path, &st, 0) == 0;
}

#define OPEN_MODE(flags, mode) \
    mode_t mode = 0; \
    if ((flags) & (O_CREAT | O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); }

int open64(const char *path, int flags, ...) {
    setup();
    OPEN_MODE(flags, mode)
    int existed = exists_at(AT_FDCWD, path);
    int (*real)(const char *, int, ...) = dlsym(RTLD_NEXT, "open64");
    return opened(real(path, flags, mode), AT_FDCWD, path, flags, existed);
}
int open(const char *path, int flags, ...) {
    setup();
    OPEN_MODE(flags, mode)
    int existed = exists_at(AT_FDCWD, path);
    int (*real)(const char *, int, ...) = dlsym(RTLD_NEXT, "open");
    return opened(real(path, flags, mode), AT_FDCWD, path, flags, existed);
}
int openat64(int dirfd, const char *path, int flags, ...) {
    setup();
    OPEN_MODE(flags, mode)
    int existed = exists_at(dirfd, path);
    int (*real)(int, const char *, int, ...) = dlsym(RTLD_NEXT, "openat64");
    return opened(real(dirfd, path, flags, mode), dirfd, path, flags, existed);
}
int openat(int dirfd, const char *path, int flags, ...) {
    setup();
    OPEN_MODE(flags, mode)
    int existed = exists_at(dirfd, path);
    int (*real)(int, const char *, int, ...) = dlsym(RTLD_NEXT, "openat");
    return opened(real(dirfd, path, flags, mode), dirfd, path, flags, existed);
}

int close(int fd) {
    setup();
    int (*real)(int) = dlsym(RTLD_NEXT, "close");
    if (fd >= 0 && fd < MAX_FDS && paths[fd]) { free(paths[fd]); paths[fd] = NULL; }
    return real(fd);
}

static const char *path_of(int fd) { return fd >= 0 && fd < MAX_FDS ? paths[fd] : NULL; }

static void wrote(int fd, off_t offset, const struct iovec *iov, int count, ssize_t written, int sync) {
    const char *path = path_of(fd);
    if (!path || written <= 0) return;
    /* Only what was written: trim the vectors to `written` bytes. */
    struct iovec parts[64];
    int n = 0;
    size_t left = (size_t)written;
    for (int i = 0; i < count && left > 0 && n < 64; i++) {
        size_t take = iov[i].iov_len < left ? iov[i].iov_len : left;
        parts[n++] = (struct iovec){ iov[i].iov_base, take };
        left -= take;
    }
    record(OP_WRITE, path, strlen(path), (uint64_t)offset, (uint64_t)written, parts, n);
    if (sync || dsync[fd]) record_path(OP_SYNC, path, 0, 0);
}

ssize_t pwrite64(int fd, const void *buffer, size_t count, off_t offset) {
    setup();
    ssize_t n = real_pwrite(fd, buffer, count, offset);
    struct iovec v = { (void *)buffer, count };
    wrote(fd, offset, &v, 1, n, 0);
    return n;
}
ssize_t pwrite(int fd, const void *buffer, size_t count, off_t offset) { return pwrite64(fd, buffer, count, offset); }

ssize_t write(int fd, const void *buffer, size_t count) {
    setup();
    if (!path_of(fd)) return real_write(fd, buffer, count);
    off_t offset = lseek(fd, 0, SEEK_CUR);
    ssize_t n = real_write(fd, buffer, count);
    struct iovec v = { (void *)buffer, count };
    wrote(fd, offset, &v, 1, n, 0);
    return n;
}

ssize_t pwritev2(int fd, const struct iovec *iov, int count, off_t offset, int flags) {
    setup();
    ssize_t (*real)(int, const struct iovec *, int, off_t, int) = dlsym(RTLD_NEXT, "pwritev2");
    off_t at = offset == -1 ? lseek(fd, 0, SEEK_CUR) : offset;
    ssize_t n = real(fd, iov, count, offset, flags);
    wrote(fd, at, iov, count, n, (flags & (RWF_DSYNC | RWF_SYNC)) != 0);
    return n;
}
ssize_t pwritev64v2(int fd, const struct iovec *iov, int count, off_t offset, int flags) {
    return pwritev2(fd, iov, count, offset, flags);
}
ssize_t pwritev(int fd, const struct iovec *iov, int count, off_t offset) { return pwritev2(fd, iov, count, offset, 0); }
ssize_t pwritev64(int fd, const struct iovec *iov, int count, off_t offset) { return pwritev2(fd, iov, count, offset, 0); }
ssize_t writev(int fd, const struct iovec *iov, int count) {
    setup();
    ssize_t (*real)(int, const struct iovec *, int) = dlsym(RTLD_NEXT, "writev");
    if (!path_of(fd)) return real(fd, iov, count);
    off_t at = lseek(fd, 0, SEEK_CUR);
    ssize_t n = real(fd, iov, count);
    wrote(fd, at, iov, count, n, 0);
    return n;
}

static int synced(int fd, int result) {
    const char *path = path_of(fd);
    if (path && result == 0) record_path(OP_SYNC, path, 0, 0);
    return result;
}
int fsync(int fd) {
    setup();
    int (*real)(int) = dlsym(RTLD_NEXT, "fsync");
    return synced(fd, real(fd));
}
int fdatasync(int fd) {
    setup();
    int (*real)(int) = dlsym(RTLD_NEXT, "fdatasync");
    return synced(fd, real(fd));
}

int ftruncate64(int fd, off_t length) {
    setup();
    int (*real)(int, off_t) = dlsym(RTLD_NEXT, "ftruncate64");
    int result = real(fd, length);
    const char *path = path_of(fd);
    if (path && result == 0) record_path(OP_TRUNCATE, path, (uint64_t)length, 0);
    return result;
}
int ftruncate(int fd, off_t length) { return ftruncate64(fd, length); }

int fallocate64(int fd, int mode, off_t offset, off_t length) {
    setup();
    int (*real)(int, int, off_t, off_t) = dlsym(RTLD_NEXT, "fallocate64");
    int result = real(fd, mode, offset, length);
    const char *path = path_of(fd);
    /* Mode 0 only changes the size (zeros); KEEP_SIZE and hole punching change no content read back. */
    if (path && result == 0 && mode == 0) record_path(OP_ALLOCATE, path, (uint64_t)offset, (uint64_t)length);
    return result;
}
int fallocate(int fd, int mode, off_t offset, off_t length) { return fallocate64(fd, mode, offset, length); }
int posix_fallocate64(int fd, off_t offset, off_t length) {
    setup();
    int (*real)(int, off_t, off_t) = dlsym(RTLD_NEXT, "posix_fallocate64");
    int result = real(fd, offset, length);
    const char *path = path_of(fd);
    if (path && result == 0) record_path(OP_ALLOCATE, path, (uint64_t)offset, (uint64_t)length);
    return result;
}
int posix_fallocate(int fd, off_t offset, off_t length) { return posix_fallocate64(fd, offset, length); }

static void renamed(uint32_t op, int fromfd, const char *from, int tofd, const char *to, int result) {
    if (result != 0) return;
    char *a = watched(fromfd, from), *b = watched(tofd, to);
    if (a && b) {
        size_t la = strlen(a), lb = strlen(b);
        char *both = malloc(la + lb + 1);
        memcpy(both, a, la + 1);
        memcpy(both + la + 1, b, lb);
        record(op, both, la + 1 + lb, 0, 0, NULL, 0);
        free(both);
    }
    free(a);
    free(b);
}
int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned int flags) {
    setup();
    int (*real)(int, const char *, int, const char *, unsigned int) = dlsym(RTLD_NEXT, "renameat2");
    int result = real(fromfd, from, tofd, to, flags);
    renamed((flags & RENAME_EXCHANGE) ? OP_EXCHANGE : OP_RENAME, fromfd, from, tofd, to, result);
    return result;
}
int renameat(int fromfd, const char *from, int tofd, const char *to) { return renameat2(fromfd, from, tofd, to, 0); }
int rename(const char *from, const char *to) { return renameat2(AT_FDCWD, from, AT_FDCWD, to, 0); }

int unlinkat(int dirfd, const char *path, int flags) {
    setup();
    char *full = watched(dirfd, path);
    int (*real)(int, const char *, int) = dlsym(RTLD_NEXT, "unlinkat");
    int result = real(dirfd, path, flags);
    if (full && result == 0 && !(flags & AT_REMOVEDIR)) record_path(OP_UNLINK, full, 0, 0);
    free(full);
    return result;
}
int unlink(const char *path) { return unlinkat(AT_FDCWD, path, 0); }
