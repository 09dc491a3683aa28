/* Copies shared between records. Within a step the same bytes are read again
 * and again: a weight by every call that takes it, an op's output as the
 * next op's input, a grad as an output of one backward record and an input
 * of the next (12 of the 22 MB read a step on the LSTM cell loop). A CPU
 * tensor read in place is compared with the last copy made from the same
 * address (same dtype and size); when the bytes are equal the record shares
 * that buffer: a memcmp of memory still in cache instead of a copy into a
 * cold buffer, and the statistics thread computes its statistics once. Equal
 * bytes: the same records and statistics, whatever the version counters say.
 * The table holds at most MSP_RECENT_BYTES of buffers, dropped when a new
 * step starts. */
#include "dump_py.h"

#include <stdlib.h>
#include <string.h>

#define MSP_RECENT_SLOTS 512
#define MSP_RECENT_BYTES ((size_t)32 << 20)

typedef struct recent {
    const void *src;
    void *buf; /* a reference of ours (msp_dq_buf_ref), or NULL */
    size_t nbytes;
    msp_dtype_t dtype;
} recent_t;
static recent_t g_recent[MSP_RECENT_SLOTS];
static size_t g_recent_bytes;
static int64_t g_recent_step = -1;

static recent_t *recent_slot(const void *src)
{
    return &g_recent[msp_mix64((uint64_t)(uintptr_t)src) & (MSP_RECENT_SLOTS - 1)];
}

static void recent_drop(recent_t *e)
{
    if (e->buf) {
        msp_dq_buf_put(e->buf, e->nbytes);
        g_recent_bytes -= e->nbytes;
        e->buf = NULL;
    }
}

/* A new reference to the last copy of these bytes, or NULL. */
void *msp_recent_find(const void *src, size_t nbytes, msp_dtype_t dtype)
{
    if (g_recent_step != msp_g.step) {
        for (size_t i = 0; i < MSP_RECENT_SLOTS; i++)
            recent_drop(&g_recent[i]);
        g_recent_step = msp_g.step;
        return NULL;
    }
    const recent_t *e = recent_slot(src);
    if (e->buf && e->src == src && e->nbytes == nbytes && e->dtype == dtype &&
        memcmp(e->buf, src, nbytes) == 0)
        return msp_dq_buf_ref(e->buf);
    return NULL;
}

/* buf now holds a copy of the nbytes at src. */
void msp_recent_keep(const void *src, size_t nbytes, msp_dtype_t dtype, void *buf)
{
    recent_t *e = recent_slot(src);
    recent_drop(e);
    if (g_recent_bytes + nbytes > MSP_RECENT_BYTES)
        return;
    e->src = src;
    e->buf = msp_dq_buf_ref(buf);
    e->nbytes = nbytes;
    e->dtype = dtype;
    g_recent_bytes += nbytes;
}
