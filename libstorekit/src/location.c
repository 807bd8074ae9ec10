/*
 * Where the daemon's client socket is: the order of SocketLocation
 * (Sources/StoreKitConnection/WireConnection.swift, docs/protocol.md §1). A user directory is
 * used only when the socket is there and the directory is one no other user may change.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define SYSTEM_DIRECTORY "/run/storekitd"
#define SOCKET_NAME "/storekitd.sock"

bool sk_directory_trusted(const char *path, char *why, size_t why_size) {
    struct stat status;
    uid_t uid = getuid();
    if (lstat(path, &status) != 0) {
        sk_format(why, why_size, "cannot inspect %s", path);
        return false;
    }
    if (!S_ISDIR(status.st_mode)) {
        sk_format(why, why_size, "%s is not a directory", path);
        return false;
    }
    if (status.st_uid != uid && status.st_uid != 0) {
        sk_format(why, why_size, "%s belongs to uid %u, not to uid %u or root", path, (unsigned)status.st_uid, (unsigned)uid);
        return false;
    }
    if (status.st_mode & 022) {
        sk_format(why, why_size, "%s is writable by its group or other users", path);
        return false;
    }
    return true;
}

static bool exists(const char *path) {
    struct stat status;
    return stat(path, &status) == 0;
}

/* The user's own daemon's directories, in order; returns how many (at most 2), each malloc'd. */
static size_t user_directories(char *out[2]) {
    size_t count = 0;
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (xdg && xdg[0] == '/') {
        size_t length = strlen(xdg);
        if (length > 1 && xdg[length - 1] == '/') length--;
        char *directory = malloc(length + sizeof "/storekitd");
        if (directory) {
            memcpy(directory, xdg, length);
            strcpy(directory + length, "/storekitd");
            out[count++] = directory;
        }
    }
    char temporary[64];
    sk_format(temporary, sizeof temporary, "/tmp/storekitd-%u", (unsigned)getuid());
    out[count] = strdup(temporary);
    if (out[count]) count++;
    return count;
}

static char *join(const char *directory, const char *name) {
    size_t length = strlen(directory) + strlen(name) + 1;
    char *path = malloc(length);
    if (path) snprintf(path, length, "%s%s", directory, name);
    return path;
}

char *sk_socket_path(void) {
    const char *explicit = getenv("STOREKITD_SOCKET");
    if (explicit && explicit[0]) return strdup(explicit);
    if (getuid() == 0) return strdup(SYSTEM_DIRECTORY SOCKET_NAME);
    char *directories[2];
    size_t count = user_directories(directories);
    char *chosen = NULL;
    for (size_t i = 0; i < count; i++) {
        char why[256];
        char *candidate = join(directories[i], SOCKET_NAME);
        if (!chosen && candidate && exists(candidate) && sk_directory_trusted(directories[i], why, sizeof why)) {
            chosen = candidate;
        } else {
            free(candidate);
        }
        free(directories[i]);
    }
    return chosen ? chosen : strdup(SYSTEM_DIRECTORY SOCKET_NAME);
}

char *sk_socket_paths_tried(void) {
    const char *explicit = getenv("STOREKITD_SOCKET");
    if (explicit && explicit[0]) return strdup(explicit);
    sk_buffer text = {0};
    if (getuid() != 0) {
        char *directories[2];
        size_t count = user_directories(directories);
        for (size_t i = 0; i < count; i++) {
            char why[256];
            /* A directory another user may change is passed over, so not named. */
            if (!exists(directories[i]) || sk_directory_trusted(directories[i], why, sizeof why)) {
                sk_buffer_append(&text, directories[i], strlen(directories[i]));
                sk_buffer_append(&text, SOCKET_NAME ", ", strlen(SOCKET_NAME ", "));
            }
            free(directories[i]);
        }
    }
    sk_buffer_append(&text, SYSTEM_DIRECTORY SOCKET_NAME, sizeof SYSTEM_DIRECTORY SOCKET_NAME);
    if (text.failed) {
        sk_buffer_free(&text);
        return strdup(SYSTEM_DIRECTORY SOCKET_NAME);
    }
    return (char *)text.bytes;
}
