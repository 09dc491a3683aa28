/* The writer queue's memory (dump_pool.c): the records the training thread
 * hands to the writer (dump_writer.h), their tensor byte buffers from a pool,
 * and records kept for reuse. Any thread; no Python. */
#ifndef MSP_DUMP_POOL_H
#define MSP_DUMP_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "msprobe/format.h"

typedef struct msp_dq_tensor {
    char *role;
    msp_dtype_t dtype;
    int ndim;
    int64_t shape[MSP_MAX_NDIM];
    void *data; /* malloc'd C-contiguous copy; owned by the record */
    size_t nbytes;
    char device[24];
    int requires_grad;
    msp_stats_t stats; /* filled by the statistics thread */
    int has_stats;
    int stats_given; /* stats computed where the tensor lives (no data): the
                             statistics thread leaves them */
    char *producer;  /* "RECORD/ROLE" this input was the output of (msp_dq_rec_strdup), or NULL */
} msp_dq_tensor_t;

typedef struct msp_dq_attr {
    char *key, *value;
} msp_dq_attr_t;

/* An API's signature as the dump's /defaults holds it (msprobe-dump(5)):
 * made once per wrapped API at its first recorded call (py_sig.c) and never
 * freed, so that every record of the API may point at it. file_mark is the
 * writer thread's alone: the serial of the last file its rows went into. */
typedef struct msp_dq_sig {
    char *api; /* "Functional.gelu" */
    size_t n;
    char **keys, **values; /* "#0" -> "input", "approximate" -> "'none'" */
    uint64_t file_mark;
} msp_dq_sig_t;

typedef struct msp_dq_rec {
    int kind; /* MSP_DQ_* */
    char *name;
    int64_t step, rank, order;
    msp_dq_tensor_t *t;
    size_t nt, cap_t;
    msp_dq_attr_t *a;
    size_t na, cap_a;
    size_t bytes;      /* tensor bytes held; what the queue bound counts */
    int stats_ready;   /* the statistics thread is done with it */
    int dev_pending;   /* statistics still being computed on a device: the
                             shim holds the record back until they are in */
    int keep_data;     /* a statistics dump keeps this record's data too
                             (msprobe's tensor_list); set at submit */
    char *stack;       /* malloc'd call-site text, turned into the attribute
                             "stack" at submit (py_stack.c); freed with the record */
    msp_dq_sig_t *sig; /* the API's signature, or NULL (not an API call, or none
                             known); written once per file by the writer */
    /* How the shim adds tensors to it now (py_tensor.c), set by whoever adds
     * them around each batch, 0 otherwise: links, MSP_LINK_FIND (each input
     * gets its producer) or MSP_LINK_NOTE (each output is noted for later
     * inputs); dev_defer, the kinds of device window (MSP_DEV_*) whose
     * copies may wait for later records'. */
    int links, dev_defer;
    struct msp_dq_rec *next;
    struct msp_dq_strs *strs; /* where name, roles and attributes are kept */
} msp_dq_rec_t;

enum { MSP_DQ_RECORD = 0, MSP_DQ_END_STEP = 1, MSP_DQ_SHUTDOWN = 2 };

/* Tensor byte buffers come from a pool of recently freed ones of the same
 * size: the same shapes recur every step, and reusing resident pages saves
 * the training thread the page faults of fresh memory. */
void *msp_dq_buf_get(size_t nbytes);
/* One more owner of buf (from msp_dq_buf_get): each owner puts it once, and
 * it goes back to the pool with the last. Shared bytes must not change. */
void *msp_dq_buf_ref(void *buf);
void msp_dq_buf_put(void *buf, size_t nbytes);
/* The writer's side of the pool (dump_pool.c): the statistics of buf's bytes
 * once computed (1 and *out; 0: not yet; the statistics thread only), the
 * pool's caps in bytes, and a forked child's fresh, empty pool. */
int msp_dq_buf_stats(void *buf, msp_stats_t *out);
void msp_dq_buf_set_stats(void *buf, const msp_stats_t *s);
void msp_dq_pool_caps(size_t big, size_t small_bytes);
void msp_dq_pool_forget_after_fork(void);

/* Records and small buffers freed by the writer are kept for the next ones
 * (a bounded number): the training thread then allocates nothing in the
 * steady state, and no malloc arena is shared with the writer's frees. */
msp_dq_rec_t *msp_dq_rec_new(const char *name);
/* Takes ownership of data (from msp_dq_buf_get). Returns 0, or -1 on OOM (data freed). */
int msp_dq_rec_add_tensor(msp_dq_rec_t *r, const char *role, msp_dtype_t dt, int ndim,
                          const int64_t *shape, void *data, size_t nbytes, const char *device,
                          int requires_grad);
int msp_dq_rec_add_attr(msp_dq_rec_t *r, const char *key, const char *value);
/* A copy of s that lives as long as the record; NULL on OOM. */
char *msp_dq_rec_strdup(msp_dq_rec_t *r, const char *s);
void msp_dq_rec_free(msp_dq_rec_t *r);

#endif
