/* A pair's result as bytes, and a file of them.
 *
 * A streamed compare (cmp_stream.c) keeps one step x rank pair in memory at a
 * time: each finished pair is packed here and appended to a spool file (an
 * unlinked temp file: nothing is left behind whatever happens), and read back
 * when the report is written. The same bytes travel between the processes of
 * an MPI compare. Both ends are this very binary, so the fixed part of each
 * struct is copied as it is and only its strings are written out (common's
 * wire codec, msp_wput_* and msp_wget_*); the asserts below stop the build when a struct changes, until the lists of
 * its strings here are brought up to date. */
#include "cmp_internal.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

_Static_assert(sizeof(msp_record_cmp_t) == 264,
               "msp_record_cmp_t changed: update cmp_rec_strs() and this size");
_Static_assert(sizeof(msp_tensor_cmp_t) == 568,
               "msp_tensor_cmp_t changed: update cmp_part_pack's tensor rows and this size");
_Static_assert(sizeof(msp_suspect_t) == 64,
               "msp_suspect_t changed: update the suspect's strings and this size");
_Static_assert(sizeof(msp_tensor_sample_t) == 616,
               "msp_tensor_sample_t changed: update the sample's arrays and this size");

#define CMP_PART_MAGIC 0x3174726170707370ull /* "psppart1" */

/* The string fields of each struct, in a fixed order. */
#define CMP_REC_STRS 8
static void cmp_rec_strs(msp_record_cmp_t *r, char **f[CMP_REC_STRS])
{
    f[0] = &r->name;
    f[1] = &r->bench_name;
    f[2] = &r->npu_stack;
    f[3] = &r->arg_diff;
    f[4] = &r->replay_note;
    f[5] = &r->comm_group;
    f[6] = &r->parent;
    f[7] = &r->params;
}

/* A tensor row: its names (npu_name, bench_name), its fixed text fields
 * (npu_dtype .. bench_shape) and, after them, numbers and four more strings
 * (err_message, producer, npu_data_name, bench_data_name) that the packing
 * writes out by name. */
#define CMP_TEN_FIXED_END offsetof(msp_tensor_cmp_t, npu_requires_grad)
_Static_assert(offsetof(msp_tensor_cmp_t, npu_dtype) == 2 * sizeof(char *) &&
                   offsetof(msp_tensor_cmp_t, bench_shape) + 96 == CMP_TEN_FIXED_END,
               "msp_tensor_cmp_t's layout changed: update cmp_part_pack's tensor rows");

/* The numbers after the fixed text, as 8-byte words: a row packs a mask of
 * the words that differ from the row before it (the first from zeros) and
 * those words alone. A statistics row leaves most of them as the row above
 * (the tensor-mode metrics NaN, verdicts, flags): the spool's bytes were a
 * tenth of a statistics compare's CPU, written and read back (issue 42).
 * The four string pointers among them count as zero (they go by name).
 * The mask's top bits say which bench-side texts (dtype, shape, name) are
 * the compare side's, as they mostly are; those are not packed again. */
#define CMP_TEN_TAIL (sizeof(msp_tensor_cmp_t) - CMP_TEN_FIXED_END)
#define CMP_TEN_WORDS (CMP_TEN_TAIL / 8)
#define CMP_TEN_WORD(field) ((offsetof(msp_tensor_cmp_t, field) - CMP_TEN_FIXED_END) / 8)
#define CMP_SAME_DTYPE ((uint64_t)1 << 61)
#define CMP_SAME_SHAPE ((uint64_t)1 << 62)
#define CMP_SAME_NAME ((uint64_t)1 << 63)
_Static_assert(CMP_TEN_TAIL % 8 == 0 && CMP_TEN_WORDS <= 61 && CMP_TEN_FIXED_END % 8 == 0 &&
                   offsetof(msp_tensor_cmp_t, err_message) % 8 == 0 &&
                   offsetof(msp_tensor_cmp_t, producer) % 8 == 0 &&
                   offsetof(msp_tensor_cmp_t, npu_data_name) % 8 == 0 &&
                   offsetof(msp_tensor_cmp_t, bench_data_name) % 8 == 0,
               "msp_tensor_cmp_t's numbers no longer fall in 8-byte words: update the "
               "tensor rows' packing");

static void cmp_ten_words(const msp_tensor_cmp_t *t, uint64_t w[CMP_TEN_WORDS])
{
    memcpy(w, (const unsigned char *)t + CMP_TEN_FIXED_END, CMP_TEN_TAIL);
    w[CMP_TEN_WORD(err_message)] = w[CMP_TEN_WORD(producer)] = 0;
    w[CMP_TEN_WORD(npu_data_name)] = w[CMP_TEN_WORD(bench_data_name)] = 0;
}

/* ---- packing ------------------------------------------------------------- */

msp_err cmp_part_pack(const msp_compare_result_t *part, unsigned char **out, size_t *len)
{
    msp_buf_t b = {0};
    *out = NULL;
    *len = 0;
    msp_wput_u64(&b, CMP_PART_MAGIC);
    msp_wput_u64(&b, (uint64_t)part->stats_mode);
    msp_wput_u64(&b, part->n_pairs);
    msp_wput_u64(&b, part->bytes_compared);
    msp_wput_u64(&b, part->n_failed);
    msp_wput_u64(&b, part->n_unpaired);
    for (size_t i = 0; i < part->n_unpaired; i++)
        msp_wput_str(&b, part->unpaired[i]);
    msp_wput_u64(&b, part->n_unread);
    for (size_t i = 0; i < part->n_unread; i++)
        msp_wput_str(&b, part->unread[i]);
    msp_wput_u64(&b, part->n_crc_bad);
    msp_wput_u64(&b, part->n_unreadable);
    msp_wput_str(&b, part->first_unreadable);
    msp_wput_u64(&b, part->n_records);
    for (size_t i = 0; i < part->n_records; i++) {
        msp_record_cmp_t r = part->records[i];
        char **f[CMP_REC_STRS];
        cmp_rec_strs(&r, f);
        char *keep[CMP_REC_STRS];
        for (int k = 0; k < CMP_REC_STRS; k++) {
            keep[k] = *f[k];
            *f[k] = NULL;
        }
        msp_wput(&b, &r, sizeof r);
        for (int k = 0; k < CMP_REC_STRS; k++)
            msp_wput_str(&b, keep[k]);
    }
    msp_wput_u64(&b, part->n_tensors);
    uint64_t prev[CMP_TEN_WORDS] = {0};
    for (size_t i = 0; i < part->n_tensors; i++) {
        /* the fixed text fields (dtype, shape: 272 bytes, mostly zeros) go as
         * strings, the numbers as the words that changed */
        const msp_tensor_cmp_t *t = &part->tensors[i];
        uint64_t cur[CMP_TEN_WORDS], row[1 + CMP_TEN_WORDS], mask = 0;
        size_t n = 1;
        cmp_ten_words(t, cur);
        for (size_t w = 0; w < CMP_TEN_WORDS; w++)
            if (cur[w] != prev[w]) {
                mask |= (uint64_t)1 << w;
                row[n++] = prev[w] = cur[w];
            }
        if (!strcmp(t->bench_dtype, t->npu_dtype))
            mask |= CMP_SAME_DTYPE;
        if (!strcmp(t->bench_shape, t->npu_shape))
            mask |= CMP_SAME_SHAPE;
        if (t->npu_name && t->bench_name && !strcmp(t->bench_name, t->npu_name))
            mask |= CMP_SAME_NAME;
        row[0] = mask;
        msp_wput(&b, row, n * 8);
        msp_wput_str(&b, t->npu_dtype);
        if (!(mask & CMP_SAME_DTYPE))
            msp_wput_str(&b, t->bench_dtype);
        msp_wput_str(&b, t->npu_shape);
        if (!(mask & CMP_SAME_SHAPE))
            msp_wput_str(&b, t->bench_shape);
        msp_wput_str(&b, t->npu_name);
        if (!(mask & CMP_SAME_NAME))
            msp_wput_str(&b, t->bench_name);
        msp_wput_str(&b, t->err_message);
        msp_wput_str(&b, t->producer);
        msp_wput_str(&b, t->npu_data_name);
        msp_wput_str(&b, t->bench_data_name);
    }
    msp_wput_u64(&b, part->n_suspects);
    for (size_t i = 0; i < part->n_suspects; i++) {
        msp_suspect_t s = part->suspects[i];
        s.reason = NULL;
        msp_wput(&b, &s, sizeof s);
        msp_wput_str(&b, part->suspects[i].reason);
    }
    msp_wput_u64(&b, part->n_samples);
    for (size_t i = 0; i < part->n_samples; i++) {
        const msp_tensor_sample_t *src = &part->samples[i];
        msp_tensor_sample_t s = *src;
        s.why = NULL;
        s.npu = s.bench = NULL;
        msp_wput(&b, &s, sizeof s);
        msp_wput(&b, src->npu, src->n * sizeof *src->npu);
        msp_wput(&b, src->bench, src->n * sizeof *src->bench);
        msp_wput_str(&b, src->why);
    }
    if (b.oom) {
        msp_buf_free(&b);
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory packing a pair's result");
    }
    *out = (unsigned char *)b.data;
    *len = b.len;
    return MSP_OK;
}

/* ---- unpacking -------------------------------------------------------------- */

/* A part's strings as they are read: each malloc'd (strs NULL), or copied
 * into strs, the one block of a part the reports only read, cap bytes (the
 * message's length and one: a string's NUL takes no more room than its
 * length word did; strs[0] is the "" of every empty default). Unpacked one
 * malloc a string, then freed one by one, they were 13 M mallocs and frees
 * on the 64-rank statistics tree, 3 % of its compare's instructions (issue
 * 42). */
typedef struct cmp_strs {
    msp_wire_rd_t *r;
    char *strs;
    size_t used, cap;
} cmp_strs_t;

static char *cmp_get_str(cmp_strs_t *a)
{
    return a->strs ? msp_wget_str_in(a->r, a->strs, &a->used, a->cap) : msp_wget_str(a->r);
}

/* s again (a second field of the same text), or "" for an absent s */
static char *cmp_dup_str(cmp_strs_t *a, const char *s)
{
    return a->strs ? (s ? (char *)s : a->strs) : strdup(s ? s : "");
}

/* shared: the strings into one block (cmp_strs_t), for a part that is read only */
static msp_err cmp_part_read(const unsigned char *buf, size_t len, int shared,
                             msp_compare_result_t **out)
{
    msp_wire_rd_t r = {buf, len, 0, 0, 0};
    *out = NULL;
    msp_compare_result_t *p = calloc(1, sizeof *p);
    if (!p)
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory reading a pair's result");
    p->root_record = p->root_tensor = p->first_rank = -1;
    cmp_strs_t a = {&r, NULL, 1, len + 2};
    if (shared && !(a.strs = p->strs = malloc(a.cap))) {
        free(p);
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory reading a pair's result");
    }
    if (a.strs)
        a.strs[0] = '\0';
    if (msp_wget_u64(&r) != CMP_PART_MAGIC)
        r.bad = 1;
    p->stats_mode = (int)msp_wget_u64(&r);
    p->n_pairs = (size_t)msp_wget_u64(&r);
    p->bytes_compared = msp_wget_u64(&r);
    p->n_failed = (size_t)msp_wget_u64(&r);
    size_t nu = msp_wget_count(&r, 8);
    if (nu && !(p->unpaired = calloc(nu, sizeof *p->unpaired)))
        r.oom = 1;
    for (size_t i = 0; p->unpaired && i < nu; i++, p->n_unpaired++)
        p->unpaired[i] = msp_wget_str(&r);
    size_t nun = msp_wget_count(&r, 8);
    if (nun && !(p->unread = calloc(nun, sizeof *p->unread)))
        r.oom = 1;
    for (size_t i = 0; p->unread && i < nun; i++, p->n_unread++)
        p->unread[i] = msp_wget_str(&r);
    p->n_crc_bad = (size_t)msp_wget_u64(&r);
    p->n_unreadable = (size_t)msp_wget_u64(&r);
    p->first_unreadable = msp_wget_str(&r);
    size_t nr = msp_wget_count(&r, sizeof(msp_record_cmp_t));
    if (nr && !r.oom && !(p->records = calloc(nr, sizeof *p->records)))
        r.oom = 1;
    for (size_t i = 0; p->records && i < nr && !r.bad; i++, p->n_records++) {
        msp_record_cmp_t *rec = &p->records[i];
        msp_wget(&r, rec, sizeof *rec);
        char **f[CMP_REC_STRS];
        cmp_rec_strs(rec, f);
        for (int k = 0; k < CMP_REC_STRS; k++)
            *f[k] = NULL; /* pointers of the packing process: never followed */
        for (int k = 0; k < CMP_REC_STRS; k++)
            *f[k] = cmp_get_str(&a);
    }
    size_t nt = msp_wget_count(&r, 8 + 7 * 8);
    if (nt && !r.oom && !(p->tensors = calloc(nt, sizeof *p->tensors)))
        r.oom = 1;
    uint64_t prev[CMP_TEN_WORDS] = {0};
    for (size_t i = 0; p->tensors && i < nt && !r.bad; i++, p->n_tensors++) {
        msp_tensor_cmp_t *t = &p->tensors[i];
        uint64_t mask = msp_wget_u64(&r), got[CMP_TEN_WORDS];
        uint64_t same = mask & (CMP_SAME_DTYPE | CMP_SAME_SHAPE | CMP_SAME_NAME);
        mask &= ~same;
        if (mask >> CMP_TEN_WORDS)
            r.bad = 1;
        size_t n = r.bad ? 0 : (size_t)__builtin_popcountll(mask);
        msp_wget(&r, got, n * 8);
        for (size_t w = 0, k = 0; w < CMP_TEN_WORDS && !r.bad; w++)
            if (mask >> w & 1)
                prev[w] = got[k++];
        memcpy((unsigned char *)t + CMP_TEN_FIXED_END, prev, CMP_TEN_TAIL);
        /* the packing process's pointers: never followed */
        t->err_message = t->producer = t->npu_data_name = t->bench_data_name = NULL;
        msp_wget_fixed(&r, t->npu_dtype, sizeof t->npu_dtype);
        if (same & CMP_SAME_DTYPE)
            memcpy(t->bench_dtype, t->npu_dtype, sizeof t->bench_dtype);
        else
            msp_wget_fixed(&r, t->bench_dtype, sizeof t->bench_dtype);
        msp_wget_fixed(&r, t->npu_shape, sizeof t->npu_shape);
        if (same & CMP_SAME_SHAPE)
            memcpy(t->bench_shape, t->npu_shape, sizeof t->bench_shape);
        else
            msp_wget_fixed(&r, t->bench_shape, sizeof t->bench_shape);
        t->npu_name = cmp_get_str(&a);
        if (!(same & CMP_SAME_NAME))
            t->bench_name = cmp_get_str(&a);
        else if (!t->npu_name)
            r.bad = 1; /* the same as no name */
        else if (!(t->bench_name = cmp_dup_str(&a, t->npu_name)))
            r.oom = 1;
        t->err_message = cmp_get_str(&a);
        t->producer = cmp_get_str(&a);
        t->npu_data_name = cmp_get_str(&a);
        t->bench_data_name = cmp_get_str(&a);
        if (!t->err_message && !(t->err_message = cmp_dup_str(&a, NULL)))
            r.oom = 1;
    }
    size_t ns = msp_wget_count(&r, sizeof(msp_suspect_t));
    if (ns && !r.oom && !(p->suspects = calloc(ns, sizeof *p->suspects)))
        r.oom = 1;
    for (size_t i = 0; p->suspects && i < ns && !r.bad; i++, p->n_suspects++) {
        msp_wget(&r, &p->suspects[i], sizeof p->suspects[i]);
        p->suspects[i].reason = cmp_get_str(&a);
        if (!p->suspects[i].reason && !(p->suspects[i].reason = cmp_dup_str(&a, NULL)))
            r.oom = 1;
    }
    size_t nsa = msp_wget_count(&r, sizeof(msp_tensor_sample_t));
    if (nsa && !r.oom && !r.bad && !(p->samples = calloc(nsa, sizeof *p->samples)))
        r.oom = 1;
    for (size_t i = 0; p->samples && i < nsa && !r.bad && !r.oom; i++, p->n_samples++) {
        msp_tensor_sample_t *s = &p->samples[i];
        msp_wget(&r, s, sizeof *s);
        s->why = NULL; /* the packing process's pointers: never followed */
        s->npu = s->bench = NULL;
        if (r.bad || r.at > r.n || s->n > (r.n - r.at) / (2 * sizeof(double))) {
            r.bad = 1;
            break;
        }
        s->npu = malloc((s->n ? s->n : 1) * sizeof *s->npu);
        s->bench = malloc((s->n ? s->n : 1) * sizeof *s->bench);
        if (!s->npu || !s->bench) {
            msp_tensor_sample_free(s);
            r.oom = 1;
            break;
        }
        msp_wget(&r, s->npu, s->n * sizeof *s->npu);
        msp_wget(&r, s->bench, s->n * sizeof *s->bench);
        s->why = msp_wget_str(&r);
    }
    for (size_t i = 0; !r.bad && i < p->n_samples; i++)
        if (p->samples[i].tensor < 0 || (size_t)p->samples[i].tensor >= p->n_tensors)
            r.bad = 1;
    /* every index must land inside the arrays it names */
    for (size_t i = 0; !r.bad && i < p->n_records; i++)
        if (p->records[i].first_tensor > p->n_tensors ||
            p->records[i].n_tensors > p->n_tensors - p->records[i].first_tensor)
            r.bad = 1;
    for (size_t i = 0; !r.bad && i < p->n_suspects; i++)
        if (p->suspects[i].record < 0 || (size_t)p->suspects[i].record >= p->n_records ||
            p->suspects[i].tensor >= (long)p->n_tensors)
            r.bad = 1;
    if (r.oom || r.bad || r.at != r.n) {
        msp_compare_result_free(p);
        return r.oom ? msp_fail(MSP_ERR_NOMEM, "compare: out of memory reading a pair's result")
                     : msp_fail(MSP_ERR_INTERNAL,
                                "compare: a pair's packed result is damaged "
                                "(%zu bytes, stopped at %zu)",
                                len, r.at);
    }
    *out = p;
    return MSP_OK;
}

/* ---- the spool file -------------------------------------------------------- */

/* A part is packed, written and freed on a thread of the spool's own, while
 * the compare goes on with the next pair: the writes were two fifths of
 * phase A's time on a statistics tree, and the packing and freeing another
 * seventh of the compare's own thread once the writes had left it (issue
 * 42). At most CMP_SPOOL_QUEUE parts wait; a part is read back once it is
 * written; a packing or write that failed is the error of the next give or
 * get. */
#define CMP_SPOOL_QUEUE 2

struct cmp_spool_job {
    msp_compare_result_t *part; /* packed there, then freed */
};

struct cmp_spool {
    int fd;
    uint64_t end;  /* the writer's */
    uint64_t *off; /* part i: [off[i], off[i + 1]), set once written */
    size_t n, cap;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    int th_live, closing;
    struct cmp_spool_job q[CMP_SPOOL_QUEUE];
    size_t q_head, q_n;
    size_t written; /* parts 0 .. written - 1 are in the file */
    int err;        /* the first failed packing's or write's errno (-1: no space) */
    char *dir;      /* where the file is, for the messages */
};

static int cmp_spool_write(int fd, const unsigned char *buf, size_t len, uint64_t at)
{
    size_t done = 0;
    while (done < len) {
        ssize_t w = pwrite(fd, buf + done, len - done, (off_t)(at + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : -1;
        done += (size_t)w;
    }
    return 0;
}

static msp_err cmp_spool_failed(const cmp_spool_t *s, int err)
{
    if (err == ENOMEM) /* packing a part */
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory for its temporary file");
    return msp_fail(MSP_ERR_IO,
                    "compare: cannot write its temporary file in %s: %s "
                    "(TMPDIR names another directory)",
                    s->dir, err > 0 ? strerror(err) : "no space");
}

/* A part (the spool's, freed here) packed and written at the file's end,
 * s->end, its *len bytes: 0, or the errno of what failed (-1: no space).
 * One thread at a time writes: the writer, or the giving thread when there
 * is none. The caller notes where it went, under the lock (a give may move
 * s->off meanwhile). */
static int cmp_spool_write_part(cmp_spool_t *s, msp_compare_result_t *part, size_t *len)
{
    unsigned char *buf = NULL;
    *len = 0;
    int err = cmp_part_pack(part, &buf, len) ? ENOMEM : 0;
    msp_compare_result_free(part);
    if (err)
        msp_clear_error(); /* this thread's own text: the next give or get says it */
    else
        err = cmp_spool_write(s->fd, buf, *len, s->end);
    free(buf);
    return err;
}

/* Part i, written (err 0) as len bytes at s->end: noted. Under s->mu. */
static void cmp_spool_wrote(cmp_spool_t *s, size_t i, size_t len, int err)
{
    if (!err) {
        s->off[i] = s->end;
        s->end += len;
        s->off[i + 1] = s->end;
    } else if (!s->err) {
        s->err = err;
    }
    s->written++;
}

static void *cmp_spool_writer(void *arg)
{
    cmp_spool_t *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->q_n && !s->closing)
            pthread_cond_wait(&s->cv, &s->mu);
        if (!s->q_n)
            break;
        struct cmp_spool_job j = s->q[s->q_head];
        int failed = s->err;
        size_t i = s->written;
        pthread_mutex_unlock(&s->mu);
        int err = 0;
        size_t len = 0;
        if (failed)
            msp_compare_result_free(j.part);
        else
            err = cmp_spool_write_part(s, j.part, &len);
        pthread_mutex_lock(&s->mu);
        cmp_spool_wrote(s, i, len, failed ? 0 : err);
        s->q_head = (s->q_head + 1) % CMP_SPOOL_QUEUE;
        s->q_n--;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

const char cmp_spool_memory[] = "memory";

/* A spool in memory (msp_compare_run, whose result is all in memory anyway):
 * an anonymous file, -1 where the kernel has none. */
static int cmp_spool_memfd(void)
{
#ifdef MFD_CLOEXEC
    return memfd_create("msprobe-compare-spool", MFD_CLOEXEC);
#else
    return -1;
#endif
}

msp_err cmp_spool_open(const char *dir, cmp_spool_t **out)
{
    *out = NULL;
    int memfd = dir == cmp_spool_memory ? cmp_spool_memfd() : -1;
    if (memfd >= 0) {
        cmp_spool_t *s = calloc(1, sizeof *s);
        if (!s || !(s->dir = strdup(cmp_spool_memory))) {
            free(s);
            close(memfd);
            return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
        }
        s->fd = memfd;
        pthread_mutex_init(&s->mu, NULL);
        pthread_cond_init(&s->cv, NULL);
        *out = s;
        return MSP_OK;
    }
    if (!dir || !*dir || dir == cmp_spool_memory)
        dir = getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/tmp";
    char *path = msp_asprintf("%s/.msprobe-compare-spool.XXXXXX", dir);
    cmp_spool_t *s = calloc(1, sizeof *s);
    if (!path || !s) {
        free(path);
        free(s);
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    }
    s->fd = mkostemp(path, O_CLOEXEC);
    if (s->fd < 0) {
        msp_err rc = msp_fail(MSP_ERR_IO,
                              "compare: cannot create a temporary file in %s: %s "
                              "(set TMPDIR to a writable directory)",
                              dir, strerror(errno));
        free(path);
        free(s);
        return rc;
    }
    unlink(path); /* gone with the last descriptor, whatever happens */
    free(path);
    if (!(s->dir = strdup(dir))) {
        close(s->fd);
        free(s);
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    *out = s;
    return MSP_OK;
}

msp_err cmp_spool_give(cmp_spool_t *s, msp_compare_result_t *part)
{
    pthread_mutex_lock(&s->mu);
    if (!s->th_live)
        s->th_live = pthread_create(&s->th, NULL, cmp_spool_writer, s) == 0 ? 1 : -1;
    while (s->th_live > 0 && s->q_n == CMP_SPOOL_QUEUE && !s->err)
        pthread_cond_wait(&s->cv, &s->mu);
    uint64_t *nv = s->err ? NULL : msp_grow(s->off, &s->cap, s->n + 2, sizeof *nv, 64);
    if (!nv) {
        int err = s->err;
        pthread_mutex_unlock(&s->mu);
        msp_compare_result_free(part);
        return err ? cmp_spool_failed(s, err) : msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    }
    s->off = nv;
    size_t i = s->n++;
    if (s->th_live > 0) {
        s->q[(s->q_head + s->q_n++) % CMP_SPOOL_QUEUE] = (struct cmp_spool_job){part};
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        return MSP_OK;
    }
    size_t len = 0;
    int err = cmp_spool_write_part(s, part, &len);
    cmp_spool_wrote(s, i, len, err);
    pthread_mutex_unlock(&s->mu);
    return err ? cmp_spool_failed(s, err) : MSP_OK;
}

size_t cmp_spool_count(cmp_spool_t *s)
{
    if (!s)
        return 0;
    pthread_mutex_lock(&s->mu);
    size_t n = s->n;
    pthread_mutex_unlock(&s->mu);
    return n;
}

msp_err cmp_spool_get_packed(cmp_spool_t *s, size_t i, unsigned char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    pthread_mutex_lock(&s->mu);
    while (i < s->n && s->written <= i && !s->err)
        pthread_cond_wait(&s->cv, &s->mu);
    int err = s->err, have = i < s->n;
    uint64_t at = have ? s->off[i] : 0;
    size_t n = have ? (size_t)(s->off[i + 1] - at) : 0;
    pthread_mutex_unlock(&s->mu);
    if (!have)
        return msp_fail(MSP_ERR_INTERNAL, "compare: no part %zu in the spool", i);
    if (err)
        return cmp_spool_failed(s, err);
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf)
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory reading back %zu bytes", n);
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(s->fd, buf + done, n - done, (off_t)(at + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            free(buf);
            return msp_fail(MSP_ERR_IO, "compare: cannot read back its temporary file: %s",
                            r < 0 ? strerror(errno) : "short read");
        }
        done += (size_t)r;
    }
    *out = buf;
    *len = n;
    return MSP_OK;
}

msp_err cmp_part_unpack(const unsigned char *buf, size_t len, msp_compare_result_t **out)
{
    return cmp_part_read(buf, len, 0, out);
}

static msp_err cmp_spool_read(cmp_spool_t *s, size_t i, int shared, msp_compare_result_t **part)
{
    unsigned char *buf = NULL;
    size_t len = 0;
    msp_err rc = cmp_spool_get_packed(s, i, &buf, &len);
    if (!rc)
        rc = cmp_part_read(buf, len, shared, part);
    free(buf);
    return rc;
}

msp_err cmp_spool_get(cmp_spool_t *s, size_t i, msp_compare_result_t **part)
{
    return cmp_spool_read(s, i, 0, part);
}

msp_err cmp_spool_get_shared(cmp_spool_t *s, size_t i, msp_compare_result_t **part)
{
    return cmp_spool_read(s, i, 1, part);
}

void cmp_spool_close(cmp_spool_t *s)
{
    if (!s)
        return;
    if (s->th_live > 0) {
        pthread_mutex_lock(&s->mu);
        s->closing = 1;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->th, NULL);
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    if (s->fd >= 0)
        close(s->fd);
    free(s->off);
    free(s->dir);
    free(s);
}
