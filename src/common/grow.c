/* Growable memory, overflow-checked once here: msp_grow for arrays, msp_buf
 * for text and bytes (with a cap where the size comes from outside); and two
 * small text helpers: msp_str_add, text into a fixed buffer, and
 * msp_str_hash for hash tables. */
#include "msprobe/common.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int msp_str_add(char *dst, size_t size, size_t *at, const char *src)
{
    if (*at >= size)
        return -1;
    size_t room = size - 1 - *at, n = strlen(src);
    int cut = n > room;
    if (cut)
        n = room;
    memcpy(dst + *at, src, n);
    *at += n;
    dst[*at] = '\0';
    return cut ? -1 : 0;
}

uint64_t msp_str_hash(const char *s, uint64_t seed)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ seed;
    size_t n = strlen(s), i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = msp_mix64(h ^ w);
    }
    uint64_t w = 0;
    memcpy(&w, s + i, n - i);
    return msp_mix64(h ^ w ^ (uint64_t)n);
}

void *msp_grow(void *items, size_t *cap, size_t n, size_t elem, size_t first_cap)
{
    if (n < *cap)
        return items;
    size_t c = *cap ? *cap : (first_cap ? first_cap : 16);
    while (c <= n) {
        if (c > SIZE_MAX / 2)
            return NULL;
        c *= 2;
    }
    if (elem && c > SIZE_MAX / elem)
        return NULL;
    char *q = realloc(items, c * elem);
    if (!q)
        return NULL;
    memset(q + *cap * elem, 0, (c - *cap) * elem);
    *cap = c;
    return q;
}

/* Room for more bytes and the NUL; past b->max (when set) is too big. */
static int msp_buf_reserve(msp_buf_t *b, size_t more)
{
    if (b->oom)
        return 0;
    if (more > SIZE_MAX - b->len - 1 || (b->max && more > b->max - b->len)) {
        b->too_big = b->max != 0;
        b->oom = 1;
        return 0;
    }
    size_t need = b->len + more + 1;
    if (need <= b->cap)
        return 1;
    size_t cap = b->cap ? b->cap : b->first ? b->first : 4096;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (b->max && cap > b->max + 1)
        cap = b->max + 1;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->oom = 1;
        return 0;
    }
    b->data = p;
    b->cap = cap;
    return 1;
}

char *msp_buf_room(msp_buf_t *b, size_t want, size_t *room)
{
    if (b->max && !b->oom && b->len >= b->max) {
        b->too_big = b->oom = 1;
        return NULL;
    }
    if (b->max && want > b->max - b->len)
        want = b->max - b->len;
    if (!msp_buf_reserve(b, want))
        return NULL;
    size_t r = b->cap - b->len - 1;
    *room = b->max && r > b->max - b->len ? b->max - b->len : r;
    return b->data + b->len;
}

void msp_buf_grew(msp_buf_t *b, size_t n)
{
    b->len += n;
    b->data[b->len] = '\0';
}

void msp_buf_put(msp_buf_t *b, const char *s, size_t n)
{
    if (!msp_buf_reserve(b, n))
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void msp_buf_puts(msp_buf_t *b, const char *s)
{
    msp_buf_put(b, s, strlen(s));
}

void msp_buf_printf(msp_buf_t *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        msp_buf_put(b, small, (size_t)n);
        return;
    }
    if (!msp_buf_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void msp_buf_free(msp_buf_t *b)
{
    if (!b)
        return;
    free(b->data);
    memset(b, 0, sizeof *b);
}
