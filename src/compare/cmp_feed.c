/* One read of a finished tree's parts for several writers at once (issue 39:
 * "reports read the finished result once"). The workbook, result.csv and
 * the whole result behind result.html each take every part in order, on
 * threads of their own; each part is loaded (from the spool: cmp_tree_load)
 * by whichever reader asks first and freed when the last one lets go.
 *
 * Memory stays bounded: a ring of `window` slots, part i in slot
 * i % window, so a reader running ahead waits until the others have let go
 * of part i - window. A reader holds no part while it waits (one taking
 * every part lets go of part i before asking for i + 1; the per-rank
 * workbooks, one reader on several threads, each hold one part), so every
 * wait is for a holder that is not waiting: none goes round in a circle. */
#include "cmp_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define CMP_FEED_MAX_WINDOW 16
#define CMP_FEED_MAX_READERS 8

enum { CMP_SLOT_EMPTY, CMP_SLOT_LOADING, CMP_SLOT_READY };

typedef struct cmp_slot {
    int state;
    size_t part;
    msp_compare_result_t *p; /* NULL when the load failed */
    unsigned waiting;        /* readers (bits) that have not let go of it yet */
    msp_err rc;
    char *detail; /* the failed load's message */
} cmp_slot_t;

struct cmp_feed {
    cmp_feed_load_fn load;
    cmp_feed_wants_fn wants;
    const void *ud;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned active; /* readers (bits) still reading */
    int readers;
    size_t next_load; /* parts before it are loaded, or passed over */
    size_t window;
    cmp_slot_t slot[CMP_FEED_MAX_WINDOW];
};

msp_err cmp_feed_new(cmp_feed_load_fn load, cmp_feed_wants_fn wants, const void *ud, int readers,
                     size_t window, cmp_feed_t **out)
{
    *out = NULL;
    if (readers < 1 || readers > CMP_FEED_MAX_READERS || window < 1 || window > CMP_FEED_MAX_WINDOW)
        return msp_fail(MSP_ERR_USAGE, "cmp_feed_new: %d readers (1..%d), window %zu (1..%d)",
                        readers, CMP_FEED_MAX_READERS, window, CMP_FEED_MAX_WINDOW);
    cmp_feed_t *f = calloc(1, sizeof *f);
    if (!f)
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    f->load = load;
    f->wants = wants;
    f->ud = ud;
    f->readers = readers;
    f->window = window;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    f->active = (1u << readers) - 1;
    *out = f;
    return MSP_OK;
}

static void cmp_slot_clear(cmp_slot_t *s)
{
    msp_compare_result_free(s->p);
    free(s->detail);
    memset(s, 0, sizeof *s);
}

/* Reader r lets go of slot s (the lock held). */
static void cmp_feed_release(cmp_feed_t *f, cmp_slot_t *s, int r)
{
    s->waiting &= ~(1u << r);
    if (!s->waiting && s->state == CMP_SLOT_READY) {
        cmp_slot_clear(s);
        pthread_cond_broadcast(&f->cv);
    }
}

/* The readers that want part i (the lock held). */
static unsigned cmp_feed_mask(const cmp_feed_t *f, size_t i)
{
    unsigned m = 0;
    for (int k = 0; k < f->readers; k++)
        if ((f->active >> k & 1u) && (!f->wants || f->wants(f->ud, k, i)))
            m |= 1u << k;
    return m;
}

/* Load part j into its slot (free; the lock held, dropped meanwhile). */
static void cmp_feed_load(cmp_feed_t *f, cmp_slot_t *s, size_t j, unsigned mask)
{
    s->state = CMP_SLOT_LOADING;
    s->part = j;
    s->waiting = mask;
    pthread_mutex_unlock(&f->mu);
    msp_compare_result_t *p = NULL;
    msp_err rc = f->load(f->ud, j, &p);
    char *detail = rc ? strdup(msp_last_error()) : NULL;
    pthread_mutex_lock(&f->mu);
    s->p = p;
    s->rc = rc;
    s->detail = detail;
    s->state = CMP_SLOT_READY;
    if (!s->waiting) /* its readers left meanwhile */
        cmp_slot_clear(s);
    pthread_cond_broadcast(&f->cv);
}

msp_err cmp_feed_get(cmp_feed_t *f, int r, size_t i, msp_compare_result_t **part)
{
    *part = NULL;
    pthread_mutex_lock(&f->mu);
    /* Parts are loaded in order, each into the slot the part `window`
     * before it has left: one loaded out of order could take the slot an
     * earlier part still needs from a reader behind. Parts no reader wants
     * are passed over. */
    while (f->next_load <= i) {
        size_t j = f->next_load;
        unsigned mask = cmp_feed_mask(f, j);
        cmp_slot_t *s = &f->slot[j % f->window];
        if (!mask) {
            f->next_load++;
        } else if (s->state != CMP_SLOT_EMPTY) {
            pthread_cond_wait(&f->cv, &f->mu); /* part j - window is still held */
        } else {
            f->next_load++;
            cmp_feed_load(f, s, j, mask);
        }
    }
    cmp_slot_t *s = &f->slot[i % f->window];
    while (s->part == i && s->state == CMP_SLOT_LOADING)
        pthread_cond_wait(&f->cv, &f->mu);
    msp_err rc;
    char *detail = NULL;
    if (s->part != i || s->state != CMP_SLOT_READY || !(s->waiting >> r & 1u)) {
        rc = msp_fail(MSP_ERR_INTERNAL,
                      "compare: report reader %d asked for part %zu, "
                      "not among those it takes",
                      r, i);
        pthread_mutex_unlock(&f->mu);
        return rc;
    }
    rc = s->rc;
    if (rc && s->detail)
        detail = strdup(s->detail);
    *part = s->p;
    if (rc) /* the reader does not come back for a part it did not get */
        cmp_feed_release(f, s, r);
    pthread_mutex_unlock(&f->mu);
    if (rc) {
        rc = msp_fail(rc, "%s", detail ? detail : "cannot read the compare's spool");
        free(detail);
    }
    return rc;
}

void cmp_feed_put(cmp_feed_t *f, int r, const msp_compare_result_t *part)
{
    pthread_mutex_lock(&f->mu);
    for (size_t k = 0; part && k < f->window; k++) {
        cmp_slot_t *s = &f->slot[k];
        if (s->state == CMP_SLOT_READY && s->p == part) {
            cmp_feed_release(f, s, r);
            break;
        }
    }
    pthread_mutex_unlock(&f->mu);
}

void cmp_feed_leave(cmp_feed_t *f, int r)
{
    pthread_mutex_lock(&f->mu);
    f->active &= ~(1u << r);
    /* a reader that stops early (done, or failed; it holds nothing now)
     * holds up no one */
    for (size_t k = 0; k < f->window; k++) {
        cmp_slot_t *s = &f->slot[k];
        s->waiting &= ~(1u << r);
        if (s->state == CMP_SLOT_READY && !s->waiting)
            cmp_slot_clear(s);
    }
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

void cmp_feed_free(cmp_feed_t *f)
{
    if (!f)
        return;
    for (size_t k = 0; k < f->window; k++)
        cmp_slot_clear(&f->slot[k]);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f);
}
