/* The binary messages two processes of one msprobe build exchange on one
 * machine (the reader helper's catalogue, fmt_contain*.c; a compare part in
 * the spool or between MPI ranks, cmp_spool.c), written and read by one
 * codec: fixed-size fields in the machine's byte order, and strings as a u64
 * length + 1 (0 for NULL) then their bytes. Reading checks every field
 * against what is left, so that no message, however garbled, makes a reader
 * run past it or allocate more than the message itself can describe. */
#include "msprobe/common.h"

#include <stdlib.h>
#include <string.h>

void msp_wput(msp_buf_t *b, const void *src, size_t n)
{
    msp_buf_put(b, src, n);
}

void msp_wput_u64(msp_buf_t *b, uint64_t v)
{
    msp_buf_put(b, (const char *)&v, sizeof v);
}

void msp_wput_i64(msp_buf_t *b, int64_t v)
{
    msp_buf_put(b, (const char *)&v, sizeof v);
}

void msp_wput_f64(msp_buf_t *b, double v)
{
    msp_buf_put(b, (const char *)&v, sizeof v);
}

/* Its length word and bytes through one reservation: two puts were 120
 * instructions a string, 3 % of a statistics compare's packing of its
 * results (issue 42). Near the buffer's limit, the two puts as before. */
void msp_wput_str(msp_buf_t *b, const char *s)
{
    size_t n = s ? strlen(s) : 0, room = 0;
    uint64_t v = s ? (uint64_t)n + 1 : 0;
    char *p = msp_buf_room(b, sizeof v + n, &room);
    if (!p || room < sizeof v + n) {
        msp_wput_u64(b, v);
        if (n)
            msp_buf_put(b, s, n);
        return;
    }
    memcpy(p, &v, sizeof v);
    if (n) /* s may be NULL: no bytes, and memcpy may not be given it */
        memcpy(p + sizeof v, s, n);
    msp_buf_grew(b, sizeof v + n);
}

void msp_wget(msp_wire_rd_t *r, void *dst, size_t n)
{
    if (r->bad || n > r->n - r->at) {
        r->bad = 1;
        memset(dst, 0, n);
        return;
    }
    memcpy(dst, r->p + r->at, n);
    r->at += n;
}

uint64_t msp_wget_u64(msp_wire_rd_t *r)
{
    uint64_t v = 0;
    msp_wget(r, &v, sizeof v);
    return v;
}

int64_t msp_wget_i64(msp_wire_rd_t *r)
{
    int64_t v = 0;
    msp_wget(r, &v, sizeof v);
    return v;
}

double msp_wget_f64(msp_wire_rd_t *r)
{
    double v = 0;
    msp_wget(r, &v, sizeof v);
    return v;
}

/* A string's length (its u64 less one), checked against what is left: 0
 * with *null set for NULL, or on a bad message. */
static size_t msp_wget_len(msp_wire_rd_t *r, int *null)
{
    uint64_t n = msp_wget_u64(r);
    *null = r->bad || n == 0;
    if (*null)
        return 0;
    if (n - 1 > r->n - r->at) {
        r->bad = *null = 1;
        return 0;
    }
    return (size_t)(n - 1);
}

const char *msp_wget_view(msp_wire_rd_t *r, size_t *n)
{
    int null;
    *n = msp_wget_len(r, &null);
    if (null)
        return NULL;
    const char *s = (const char *)r->p + r->at;
    r->at += *n;
    return s;
}

char *msp_wget_str(msp_wire_rd_t *r)
{
    size_t n = 0;
    const char *v = msp_wget_view(r, &n);
    char *s = v ? malloc(n + 1) : NULL;
    if (!s) {
        r->oom |= v != NULL;
        return NULL;
    }
    memcpy(s, v, n);
    s[n] = '\0';
    return s;
}

char *msp_wget_str_in(msp_wire_rd_t *r, char *block, size_t *used, size_t cap)
{
    size_t n = 0;
    const char *v = msp_wget_view(r, &n);
    if (!v)
        return NULL;
    if (n >= cap - *used) {
        r->bad = 1;
        return NULL;
    }
    char *s = block + *used;
    memcpy(s, v, n);
    s[n] = '\0';
    *used += n + 1;
    return s;
}

void msp_wget_fixed(msp_wire_rd_t *r, char *dst, size_t cap)
{
    int null;
    size_t n = msp_wget_len(r, &null);
    memset(dst, 0, cap);
    if (null)
        return;
    if (n >= cap) {
        r->bad = 1;
        return;
    }
    memcpy(dst, r->p + r->at, n);
    r->at += n;
}

size_t msp_wget_count(msp_wire_rd_t *r, size_t min_bytes)
{
    uint64_t n = msp_wget_u64(r);
    if (r->bad || n > (r->n - r->at) / (min_bytes ? min_bytes : 1)) {
        r->bad = 1;
        return 0;
    }
    return (size_t)n;
}
