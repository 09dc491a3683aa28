/* The writer queue's memory: tensor buffers from a pool of recently freed
 * ones (a reference count and the statistics of their bytes in a header),
 * and records kept for reuse with their strings packed in blocks they own.
 * Any thread; no Python. */
#include "dump_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- buffer pool ------------------------------------------------------ */

#define MSP_POOL_MIN ((size_t)64 << 10) /* below this: the small free lists */
#define MSP_POOL_SLOTS 512

static struct {
    pthread_mutex_t mu;
    void *buf[MSP_POOL_SLOTS];
    size_t size[MSP_POOL_SLOTS];
    int n;
    size_t bytes, cap;
} pool = {PTHREAD_MUTEX_INITIALIZER, {NULL}, {0}, 0, 0, (size_t)128 << 20};

/* Smaller buffers come in classes of a quarter octave from 64 B to 64 KB,
 * each a LIFO list linked through the buffers themselves. A loop of small
 * ops (~2400 tensors a step of an LSTM cell) otherwise mallocs each on the
 * training thread and frees it on the writer: the arena's lock, its
 * consolidation and fresh pages showed as ~3% of the training thread. */
#define MSP_SMALL_CLASSES 41

static struct {
    pthread_mutex_t mu;
    void *head[MSP_SMALL_CLASSES];
    size_t bytes, cap;
} small = {PTHREAD_MUTEX_INITIALIZER, {NULL}, 0, (size_t)32 << 20};

/* Class 0: 64 B; then 2^k * (1.25, 1.5, 1.75, 2) for k = 6..15. */
static int small_class(size_t nbytes)
{
    if (nbytes <= 64)
        return 0;
    int k = 6;
    while (((size_t)2 << k) < nbytes)
        k++;
    size_t quarter = (size_t)1 << (k - 2);
    return (k - 6) * 4 + (int)((nbytes - 1 - ((size_t)1 << k)) / quarter) + 1;
}

static size_t class_size(int c)
{
    if (c == 0)
        return 64;
    int k = (c - 1) / 4 + 6, j = (c - 1) % 4;
    return ((size_t)1 << k) + (size_t)(j + 1) * ((size_t)1 << (k - 2));
}

static void *block_get(size_t size)
{
    if (size < MSP_POOL_MIN) {
        int c = small_class(size);
        pthread_mutex_lock(&small.mu);
        void *b = small.head[c];
        if (b) {
            small.head[c] = *(void **)b;
            small.bytes -= class_size(c);
        }
        pthread_mutex_unlock(&small.mu);
        return b ? b : malloc(class_size(c));
    }
    pthread_mutex_lock(&pool.mu);
    for (int i = pool.n - 1; i >= 0; i--)
        if (pool.size[i] == size) {
            void *b = pool.buf[i];
            pool.n--;
            pool.buf[i] = pool.buf[pool.n];
            pool.size[i] = pool.size[pool.n];
            pool.bytes -= size;
            pthread_mutex_unlock(&pool.mu);
            return b;
        }
    pthread_mutex_unlock(&pool.mu);
    return malloc(size);
}

static void block_put(void *buf, size_t size)
{
    if (size < MSP_POOL_MIN) {
        int c = small_class(size);
        pthread_mutex_lock(&small.mu);
        if (small.bytes + class_size(c) <= small.cap) {
            *(void **)buf = small.head[c];
            small.head[c] = buf;
            small.bytes += class_size(c);
            buf = NULL;
        }
        pthread_mutex_unlock(&small.mu);
        free(buf);
        return;
    }
    pthread_mutex_lock(&pool.mu);
    /* Full pool: the oldest buffer makes room (shapes of past steps go first). */
    while (pool.n > 0 && (pool.n == MSP_POOL_SLOTS || pool.bytes + size > pool.cap)) {
        free(pool.buf[0]);
        pool.bytes -= pool.size[0];
        pool.n--;
        memmove(pool.buf, pool.buf + 1, (size_t)pool.n * sizeof *pool.buf);
        memmove(pool.size, pool.size + 1, (size_t)pool.n * sizeof *pool.size);
    }
    if (pool.bytes + size <= pool.cap) {
        pool.buf[pool.n] = buf;
        pool.size[pool.n++] = size;
        pool.bytes += size;
        buf = NULL;
    }
    pthread_mutex_unlock(&pool.mu);
    free(buf);
}

/* Every tensor buffer follows a header: a reference count (a buffer is
 * shared by the tensors of several records when their bytes are the same,
 * see py_tensor.c) and the statistics of its bytes once computed, so that
 * a shared buffer's are computed once. 64 bytes keep malloc's alignment. */
#define MSP_BUF_HDR 64
typedef struct buf_hdr {
    atomic_int refs;
    int has_stats; /* statistics thread only */
    msp_stats_t stats;
} buf_hdr_t;
_Static_assert(sizeof(buf_hdr_t) <= MSP_BUF_HDR, "buffer header too big");

static buf_hdr_t *hdr_of(void *buf)
{
    return (buf_hdr_t *)(void *)((char *)buf - MSP_BUF_HDR);
}

void *msp_dq_buf_get(size_t nbytes)
{
    char *b = block_get(nbytes + MSP_BUF_HDR);
    if (!b)
        return NULL;
    buf_hdr_t *h = (buf_hdr_t *)(void *)b;
    atomic_init(&h->refs, 1);
    h->has_stats = 0;
    return b + MSP_BUF_HDR;
}

void *msp_dq_buf_ref(void *buf)
{
    atomic_fetch_add_explicit(&hdr_of(buf)->refs, 1, memory_order_relaxed);
    return buf;
}

void msp_dq_buf_put(void *buf, size_t nbytes)
{
    if (!buf)
        return;
    buf_hdr_t *h = hdr_of(buf);
    if (atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1)
        block_put(h, nbytes + MSP_BUF_HDR);
}

int msp_dq_buf_stats(void *buf, msp_stats_t *out)
{
    buf_hdr_t *h = hdr_of(buf);
    if (!h->has_stats)
        return 0;
    *out = h->stats;
    return 1;
}

void msp_dq_buf_set_stats(void *buf, const msp_stats_t *s)
{
    buf_hdr_t *h = hdr_of(buf);
    h->stats = *s;
    h->has_stats = 1;
}

void msp_dq_pool_caps(size_t big, size_t small_bytes)
{
    pool.cap = big;
    small.cap = small_bytes;
}

/* A record's strings, packed in blocks it owns; a recycled record keeps one. */
typedef struct msp_dq_strs {
    struct msp_dq_strs *next;
    size_t used, cap;
    char text[];
} msp_dq_strs_t;

#define MSP_STRS_BLOCK 1024
#define MSP_FREE_RECS 4096

static struct {
    pthread_mutex_t mu;
    msp_dq_rec_t *head;
    int n;
} spare = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

char *msp_dq_rec_strdup(msp_dq_rec_t *r, const char *s)
{
    size_t len = strlen(s) + 1;
    msp_dq_strs_t *b = r->strs;
    if (!b || b->cap - b->used < len) {
        size_t cap = len > MSP_STRS_BLOCK ? len : MSP_STRS_BLOCK;
        if (!(b = malloc(sizeof *b + cap)))
            return NULL;
        b->next = r->strs;
        b->used = 0;
        b->cap = cap;
        r->strs = b;
    }
    char *p = b->text + b->used;
    memcpy(p, s, len);
    b->used += len;
    return p;
}

msp_dq_rec_t *msp_dq_rec_new(const char *name)
{
    pthread_mutex_lock(&spare.mu);
    msp_dq_rec_t *r = spare.head;
    if (r) {
        spare.head = r->next;
        spare.n--;
    }
    pthread_mutex_unlock(&spare.mu);
    if (r) {
        /* Emptied by msp_dq_rec_free; only its arrays and one string block remain. */
        r->next = NULL;
        r->keep_data = 0;
        r->stack = NULL;
        r->sig = NULL;
        r->links = r->dev_defer = 0;
    } else if (!(r = calloc(1, sizeof *r))) {
        return NULL;
    }
    if (name && !(r->name = msp_dq_rec_strdup(r, name))) {
        msp_dq_rec_free(r);
        return NULL;
    }
    return r;
}

int msp_dq_rec_add_tensor(msp_dq_rec_t *r, const char *role, msp_dtype_t dt, int ndim,
                          const int64_t *shape, void *data, size_t nbytes, const char *device,
                          int requires_grad)
{
    if (r->nt == r->cap_t) {
        msp_dq_tensor_t *t = msp_grow(r->t, &r->cap_t, r->nt, sizeof *t, 4);
        if (!t) {
            msp_dq_buf_put(data, nbytes);
            return -1;
        }
        r->t = t;
    }
    msp_dq_tensor_t *t = &r->t[r->nt];
    memset(t, 0, sizeof *t);
    if (!(t->role = msp_dq_rec_strdup(r, role))) {
        msp_dq_buf_put(data, nbytes);
        return -1;
    }
    t->dtype = dt;
    t->ndim = ndim;
    if (ndim > 0)
        memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->data = data;
    t->nbytes = nbytes;
    const char *dev = device ? device : "cpu";
    size_t dn = strnlen(dev, sizeof t->device - 1);
    memcpy(t->device, dev, dn); /* per tensor: no snprintf */
    t->device[dn] = '\0';
    t->requires_grad = requires_grad;
    r->bytes += nbytes;
    r->nt++;
    return 0;
}

int msp_dq_rec_add_attr(msp_dq_rec_t *r, const char *key, const char *value)
{
    if (r->na == r->cap_a) {
        msp_dq_attr_t *a = msp_grow(r->a, &r->cap_a, r->na, sizeof *a, 4);
        if (!a)
            return -1;
        r->a = a;
    }
    char *k = msp_dq_rec_strdup(r, key), *v = k ? msp_dq_rec_strdup(r, value) : NULL;
    if (!v)
        return -1;
    r->a[r->na].key = k;
    r->a[r->na].value = v;
    r->na++;
    return 0;
}

void msp_dq_rec_free(msp_dq_rec_t *r)
{
    if (!r)
        return;
    free(r->stack);
    r->stack = NULL;
    for (size_t i = 0; i < r->nt; i++)
        msp_dq_buf_put(r->t[i].data, r->t[i].nbytes);
    /* Kept for a next record: its arrays and its first string block, empty. */
    msp_dq_strs_t *keep = r->strs;
    while (keep && keep->next) {
        msp_dq_strs_t *b = keep;
        keep = keep->next;
        free(b);
    }
    msp_dq_tensor_t *t = r->t;
    msp_dq_attr_t *a = r->a;
    size_t cap_t = r->cap_t, cap_a = r->cap_a;
    pthread_mutex_lock(&spare.mu);
    int kept = spare.n < MSP_FREE_RECS;
    if (kept) {
        memset(r, 0, sizeof *r);
        r->t = t;
        r->cap_t = cap_t;
        r->a = a;
        r->cap_a = cap_a;
        if ((r->strs = keep))
            keep->used = 0;
        r->next = spare.head;
        spare.head = r;
        spare.n++;
    }
    pthread_mutex_unlock(&spare.mu);
    if (!kept) {
        free(keep);
        free(t);
        free(a);
        free(r);
    }
}

void msp_dq_pool_forget_after_fork(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    memcpy(&pool.mu, &fresh, sizeof fresh);
    pool.n = 0;
    pool.bytes = 0;
    memcpy(&small.mu, &fresh, sizeof fresh);
    memset(small.head, 0, sizeof small.head);
    small.bytes = 0;
    memcpy(&spare.mu, &fresh, sizeof fresh);
    spare.head = NULL;
    spare.n = 0;
}
