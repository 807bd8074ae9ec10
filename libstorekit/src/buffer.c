/* Growable byte buffers with the protocol's little-endian writers, and the UTF-8 check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

void sk_buffer_free(sk_buffer *buffer) {
    free(buffer->bytes);
    *buffer = (sk_buffer){0};
}

bool sk_buffer_reserve(sk_buffer *buffer, size_t more) {
    if (buffer->failed) return false;
    /* Reclaim what was consumed before growing. */
    if (buffer->start > 0 && buffer->length + more > buffer->capacity) {
        memmove(buffer->bytes, buffer->bytes + buffer->start, buffer->length - buffer->start);
        buffer->length -= buffer->start;
        buffer->start = 0;
    }
    if (more > SIZE_MAX / 2 - buffer->length) {
        buffer->failed = true;
        return false;
    }
    size_t needed = buffer->length + more;
    if (needed <= buffer->capacity) return true;
    size_t capacity = buffer->capacity ? buffer->capacity : 4096;
    while (capacity < needed) capacity *= 2;
    uint8_t *bytes = realloc(buffer->bytes, capacity);
    if (!bytes) {
        buffer->failed = true;
        return false;
    }
    buffer->bytes = bytes;
    buffer->capacity = capacity;
    return true;
}

void sk_buffer_append(sk_buffer *buffer, const void *bytes, size_t count) {
    if (count == 0 || !sk_buffer_reserve(buffer, count)) return;
    memcpy(buffer->bytes + buffer->length, bytes, count);
    buffer->length += count;
}

void sk_buffer_u8(sk_buffer *buffer, uint8_t value) { sk_buffer_append(buffer, &value, 1); }

void sk_buffer_u16(sk_buffer *buffer, uint16_t value) {
    uint8_t bytes[2] = {(uint8_t)value, (uint8_t)(value >> 8)};
    sk_buffer_append(buffer, bytes, 2);
}

void sk_buffer_u32(sk_buffer *buffer, uint32_t value) {
    uint8_t bytes[4];
    for (int i = 0; i < 4; i++) bytes[i] = (uint8_t)(value >> (8 * i));
    sk_buffer_append(buffer, bytes, 4);
}

void sk_buffer_u64(sk_buffer *buffer, uint64_t value) {
    uint8_t bytes[8];
    for (int i = 0; i < 8; i++) bytes[i] = (uint8_t)(value >> (8 * i));
    sk_buffer_append(buffer, bytes, 8);
}

void sk_buffer_string(sk_buffer *buffer, const char *text) {
    size_t length = strlen(text);
    sk_buffer_u32(buffer, (uint32_t)length);
    sk_buffer_append(buffer, text, length);
}

size_t sk_buffer_pending(const sk_buffer *buffer) { return buffer->length - buffer->start; }

void sk_buffer_consume(sk_buffer *buffer, size_t count) {
    buffer->start += count;
    if (buffer->start == buffer->length) buffer->start = buffer->length = 0;
}

void sk_buffer_clear(sk_buffer *buffer) {
    buffer->start = buffer->length = 0;
    buffer->failed = false;
}

bool sk_utf8_valid(const uint8_t *bytes, size_t count) {
    size_t i = 0;
    while (i < count) {
        uint8_t byte = bytes[i];
        if (byte == 0) return false;
        if (byte < 0x80) {
            i++;
            continue;
        }
        size_t extra;
        uint32_t code;
        if (byte >= 0xC2 && byte <= 0xDF) {
            extra = 1;
            code = byte & 0x1F;
        } else if (byte >= 0xE0 && byte <= 0xEF) {
            extra = 2;
            code = byte & 0x0F;
        } else if (byte >= 0xF0 && byte <= 0xF4) {
            extra = 3;
            code = byte & 0x07;
        } else {
            return false;
        }
        if (count - i <= extra) return false;
        for (size_t k = 1; k <= extra; k++) {
            if ((bytes[i + k] & 0xC0) != 0x80) return false;
            code = code << 6 | (bytes[i + k] & 0x3F);
        }
        /* Overlong forms, surrogates and code points past U+10FFFF. */
        if ((extra == 2 && code < 0x800) || (extra == 3 && code < 0x10000) || code > 0x10FFFF
            || (code >= 0xD800 && code <= 0xDFFF))
            return false;
        i += extra + 1;
    }
    return true;
}

void sk_format(char *out, size_t size, const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(out, size, format, arguments);
    va_end(arguments);
}

char *sk_strdup(const char *text) { return text ? strdup(text) : NULL; }

int64_t sk_now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}
