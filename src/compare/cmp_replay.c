/* Replay (msprobe-compare(1), REPLAY): records of a tensor dump re-run on the
 * CPU with the compare side's own inputs, by replay.py in a Python that has
 * torch, to settle what error ratios cannot: did this call make its output
 * error, or did its inputs bring it?
 *
 * The worker is one process for the whole compare, fed one job at a time
 * over a socket (not a pipe: a worker that dies mid-job must give an error
 * here, not a SIGPIPE), in priority order (most suspicious first), until the
 * time budget runs out. Its answers are numbers; the decision is made here:
 * a record introduced error when an output's e_cmp (its distance from the
 * float64 replay) exceeds CMP_REPLAY_FACTOR times e_ref (the same-dtype
 * replay's distance), CMP_REPLAY_ULPS unit roundoffs of its dtype and, for a
 * reducing op, e_kernel: what any correct kernel of it may differ by for its
 * reduction length (replay.py, kernel_bounds). */
#include "cmp_internal.h"
#include "cmp_job.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The worker, its transport and the pieces of a job live in cmp_worker.c
 * (acc_check runs the same worker); the names this file has always used. */
typedef cmp_worker_t rp_worker_t;
typedef cmp_job_tensor_t rp_tensor_t;
#define rp_now msp_monotonic
#define rp_start cmp_worker_start
#define rp_stop cmp_worker_stop
#define rp_send cmp_worker_send
#define rp_recv_line cmp_worker_recv_line
#define rp_consume_line cmp_worker_consume_line
#define rp_err_tail cmp_worker_err_tail
#define rp_index cmp_name_index
#define rp_find cmp_name_find
#define rp_add_attrs cmp_job_add_attrs
#define rp_add_tensors cmp_job_add_tensors
#define rp_send_tensor cmp_worker_send_tensor
/* One job's tensors together at most (both records of a backward job). */
#define RP_MAX_JOB_BYTES ((uint64_t)2 << 30)
/* A record may replay for a quarter of the budget, and no less than this. */
#define RP_RECORD_MIN_SECONDS 10.0
/* Workers started at most in one compare (a crash on one job restarts it). */
#define RP_MAX_STARTS 4
/* Files kept open while jobs move between step/rank pairs. */
#define RP_OPEN_FILES 4

/* ---- files and records ------------------------------------------------------ */

typedef struct rp_file {
    const cmp_file_pair_t *fp;
    msp_dump_file_t *bf, *cf;
    const msp_record_info_t **bnames, **cnames; /* by name */
    unsigned long used;
} rp_file_t;

static void rp_file_close(rp_file_t *f)
{
    msp_dump_close(f->bf);
    msp_dump_close(f->cf);
    free(f->bnames);
    free(f->cnames);
    memset(f, 0, sizeof *f);
}

/* The open files of the pair holding step/rank (opened into the least
 * recently used slot), or NULL with why set. */
static rp_file_t *rp_files(rp_file_t *slots, unsigned long *clock, const cmp_file_pair_t *fps,
                           size_t nfp, int64_t step, int64_t rank, char **why)
{
    for (int i = 0; i < RP_OPEN_FILES; i++)
        if (slots[i].fp && slots[i].fp->step == step && slots[i].fp->rank == rank) {
            slots[i].used = ++*clock;
            return &slots[i];
        }
    const cmp_file_pair_t *fp = NULL;
    for (size_t i = 0; i < nfp && !fp; i++)
        if (fps[i].step == step && fps[i].rank == rank)
            fp = &fps[i];
    if (!fp && nfp == 1)
        fp = &fps[0]; /* two single files: step and rank came from the file */
    if (!fp) {
        *why = msp_asprintf("no file pair for step %lld rank %lld", (long long)step,
                            (long long)rank);
        return NULL;
    }
    int lru = 0;
    for (int i = 1; i < RP_OPEN_FILES; i++)
        if (slots[i].used < slots[lru].used)
            lru = i;
    rp_file_t *s = &slots[lru];
    rp_file_close(s);
    if (msp_dump_open(fp->cmp, &s->cf) != MSP_OK || msp_dump_open(fp->bench, &s->bf) != MSP_OK) {
        *why = msp_asprintf("cannot reopen the dump: %s", msp_last_error());
        msp_clear_error();
        rp_file_close(s);
        return NULL;
    }
    s->cnames = rp_index(s->cf);
    s->bnames = rp_index(s->bf);
    if (!s->cnames || !s->bnames) {
        *why = msp_asprintf("out of memory");
        rp_file_close(s);
        return NULL;
    }
    s->fp = fp;
    s->used = ++*clock;
    return s;
}

/* ---- jobs ---------------------------------------------------------------------- */

/* What kind of job a record makes, or NULL with *why when none can. */
static const char *rp_kind(const char *name, const char **why)
{
    static const char *const no[][2] = {
        {"Module.", "a module: judged by the records inside it"},
        {"Distributed.", "communication op: not replayed in one process"},
        {"Custom.", "custom callable: not replayed"},
        {"NPU.", "device-only kernel: no CPU kernel to replay it"},
        {"Aten.", "aten op: not replayed"},
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        if (!strncmp(name, no[i][0], strlen(no[i][0]))) {
            *why = no[i][1];
            return NULL;
        }
    return cmp_job_kind(name, why);
}

/* The worst output of one side's answer: its e_cmp, the threshold it is held
 * to, and whether any output exceeds its threshold; -1 when none is comparable. */
static double rp_worst(const cJSON *outs, double *thr_out, int *over)
{
    const cJSON *o;
    double worst = -1.0, worst_thr = 0.0, worst_ratio = -1.0;
    *over = 0;
    cJSON_ArrayForEach(o, outs)
    {
        double e = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "e_cmp"));
        double ref = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "e_ref"));
        double u = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "u"));
        /* what any correct kernel of a reducing op may differ by (replay.py) */
        double ker = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "e_kernel"));
        int is_float = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "float"));
        if (isnan(e) || e < 0.0)
            continue;
        if (e >= 1e300)
            e = INFINITY;
        if (isnan(ref) || ref < 0.0)
            ref = 0.0;
        if (ref >= 1e300)
            ref = INFINITY;
        double thr = fmax(CMP_REPLAY_FACTOR * ref, is_float ? CMP_REPLAY_ULPS * u : 0.0);
        if (is_float && ker > 0.0 && ker < 1e300)
            thr = fmax(thr, ker);
        double ratio = thr > 0.0 ? e / thr : (e > 0.0 ? INFINITY : 0.0);
        if (e > thr)
            *over = 1;
        if (ratio > worst_ratio) {
            worst_ratio = ratio;
            worst = e;
            worst_thr = thr;
        }
    }
    *thr_out = worst_thr;
    return worst;
}

/* Turn the worker's answer for the compare side into rec's verdict. */
static void rp_apply(msp_record_cmp_t *rec, const cJSON *ans)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(ans, "status");
    if (!cJSON_IsString(st) || strcmp(st->valuestring, "ok") != 0) {
        const cJSON *why = cJSON_GetObjectItemCaseSensitive(ans, "reason");
        rec->replay = MSP_RV_SKIPPED;
        rec->replay_note = strdup(cJSON_IsString(why) ? why->valuestring : "not replayed");
        return;
    }
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(ans, "mode");
    double worst_thr = 0.0;
    int introduced = 0;
    double worst = rp_worst(cJSON_GetObjectItemCaseSensitive(ans, "outputs"), &worst_thr,
                            &introduced);
    if (worst < 0.0) {
        rec->replay = MSP_RV_SKIPPED;
        rec->replay_note = strdup("the replay gave no comparable output");
        return;
    }
    rec->replay = introduced ? MSP_RV_INTRODUCED : MSP_RV_INHERITED;
    rec->replay_err = worst;
    rec->replay_ref = worst_thr;
    rec->replay_note = strdup(cJSON_IsString(mode) ? mode->valuestring : "");
}

/* The bench side's replay must reproduce the bench output, or the call is
 * not rebuilt exactly and replay has nothing to say of rec. */
static void rp_validate(msp_record_cmp_t *rec, const cJSON *ans)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(ans, "status");
    const cJSON *why = cJSON_GetObjectItemCaseSensitive(ans, "reason");
    double thr = 0.0;
    int over = 0;
    double e = cJSON_IsString(st) && !strcmp(st->valuestring, "ok")
                   ? rp_worst(cJSON_GetObjectItemCaseSensitive(ans, "outputs"), &thr, &over)
                   : -1.0;
    if (e >= 0.0 && !over)
        return;
    char eb[32], tb[32];
    snprintf(eb, sizeof eb, "%.3g", e);
    snprintf(tb, sizeof tb, "%.3g", thr);
    free(rec->replay_note);
    rec->replay = MSP_RV_SKIPPED;
    rec->replay_err = rec->replay_ref = NAN;
    rec->replay_note =
        e < 0.0 ? msp_asprintf("the bench side cannot be replayed (%s)",
                               cJSON_IsString(why) ? why->valuestring : "?")
                : msp_asprintf("the call is not rebuilt exactly: the replay of the bench side's "
                               "own inputs is %s from its output (bound %s)",
                               eb, tb);
}

typedef struct rp_cand {
    size_t rec;
    double prio;
} rp_cand_t;

static int rp_cand_order(const void *x, const void *y)
{
    const rp_cand_t *a = x, *b = y;
    if (a->prio > b->prio)
        return -1;
    if (a->prio < b->prio)
        return 1;
    return a->rec < b->rec ? -1 : a->rec > b->rec;
}

/* Most suspicious first: what the ratios call introduced (strongest first),
 * then a changed argument, then outputs above their floor, then any
 * difference at all. */
static double rp_priority(const msp_record_cmp_t *r)
{
    double s = isnan(r->score) ? 0.0 : fmin(r->score, 1e6) / 1e6;
    if (r->cause == MSP_CAUSE_INTRODUCED)
        return 3.0 + s;
    if (r->arg_diff && !r->args_are_data)
        return 2.0 + s;
    if (r->out_err > r->floor)
        return 1.0 + s;
    return isnan(r->out_err) ? 0.0 : fmin(r->out_err, 1.0) * 0.5;
}

/* One side of a record: f its file; fwd the record (or a backward record's
 * forward), bwd the backward record or NULL. */
typedef struct rp_side_in {
    msp_dump_file_t *f;
    const msp_record_info_t *fwd, *bwd;
    int own_numbers; /* the record's number arguments are data: this side's own */
    uint64_t every;  /* the sample (cmp_job_every) to send; 0: decided here, and set */
    /* the other side, against which a sample must show the record's output
     * error (out_err) to stand for the whole tensors */
    msp_dump_file_t *of;
    const msp_record_info_t *ofwd, *obwd;
    double out_err;
    /* the bench record whose outputs ride along as the check (tag "k"), or
     * NULL: its replay would be this very call (rp_same_call) */
    const msp_record_info_t *check;
} rp_side_in_t;

/* Into args, this side's own text of every number argument both sides
 * have: numbers computed from the run's tensors are inputs, each side its own
 * (msp_record_cmp_t.args_are_data). */
static void rp_own_numbers(cJSON *args, msp_dump_file_t *f, const msp_record_info_t *r)
{
    cJSON *own = cJSON_CreateObject(), *it;
    if (!own || cmp_job_add_attrs(own, NULL, f, r) != 0) {
        cJSON_Delete(own);
        return;
    }
    cJSON_ArrayForEach(it, own)
    {
        cJSON *have = cJSON_GetObjectItemCaseSensitive(args, it->string);
        double x;
        /* the numbers cmp_arg_reldiff measured: one on each side */
        if (have && cJSON_IsString(have) && cJSON_IsString(it) &&
            cmp_scalars(have->valuestring, &x, 1) == 1 &&
            cmp_scalars(it->valuestring, &x, 1) == 1 &&
            strcmp(have->valuestring, it->valuestring) != 0)
            cJSON_ReplaceItemInObjectCaseSensitive(args, it->string,
                                                   cJSON_CreateString(it->valuestring));
    }
    cJSON_Delete(own);
}

/* Send one side's job and read the answer into *ans. 0, -1 worker gone, -2
 * time up; *why set (and nothing sent) when the job cannot be built. */
/* Whether every k-th element of the outputs in tv shows at least half of the
 * output error of the whole tensors against the other side: an error that
 * sits in a few elements (a kernel's tail, one bad lane) can fall between
 * the samples, and then the record is replayed whole. */
static int rp_sample_sees(const rp_side_in_t *in, const char *kind, const rp_tensor_t *tv,
                          size_t nt, uint64_t k)
{
    if (!in->of || isnan(in->out_err) || !(in->out_err > 0.0))
        return 1;
    const msp_record_info_t *mine = in->bwd ? in->bwd : in->fwd;
    const msp_record_info_t *other = in->bwd ? in->obwd : in->ofwd;
    double worst = 0.0;
    for (size_t i = 0; other && i < nt; i++) {
        if (tv[i].rec != mine || strncmp(tv[i].t->role, "output", 6))
            continue;
        for (size_t j = 0; j < other->n_tensors; j++)
            if (!strcmp(other->tensors[j].role, tv[i].t->role)) {
                double e = cmp_sampled_err(in->f, mine, tv[i].t, in->of, other, &other->tensors[j],
                                           cmp_job_tensor_every(k, kind, tv, nt, i));
                if (isnan(e))
                    return 1; /* not measurable here: the sample stands */
                worst = fmax(worst, e);
            }
    }
    return worst >= in->out_err / 2.0;
}

static int rp_side(rp_worker_t *w, size_t id, const char *kind, const char *name, const cJSON *args,
                   rp_side_in_t *in, double deadline, double per_record, void *buf, size_t bufsz,
                   cJSON **ans, const char **why)
{
    rp_tensor_t *tv = NULL;
    size_t nt = 0, cap = 0;
    uint64_t bytes = 0;
    char *text = NULL;
    int r = 0;
    *ans = NULL;
    cJSON *job = cJSON_CreateObject(), *arr = cJSON_CreateArray();
    cJSON *a = cJSON_Duplicate(args, 1);
    if (!job || !arr || !a) {
        *why = "out of memory";
        goto done;
    }
    /* this side's context: the autocast it ran under, its aliases */
    rp_add_attrs(NULL, a, in->f, in->fwd);
    if (in->own_numbers)
        rp_own_numbers(a, in->f, in->fwd);
    if (in->bwd) {
        cJSON_AddStringToObject(job, "forward", in->fwd->name);
        cJSON *fd = cJSON_AddObjectToObject(job, "forward_dtypes");
        for (size_t i = 0; fd && i < in->fwd->n_tensors; i++)
            if (!strncmp(in->fwd->tensors[i].role, "output", 6))
                cJSON_AddStringToObject(fd, in->fwd->tensors[i].role,
                                        msp_dtype_name(in->fwd->tensors[i].dtype));
        *why = rp_add_tensors(arr, &tv, &nt, &cap, in->fwd, "f", CMP_JOB_INPUTS, &bytes);
        if (!*why)
            *why = rp_add_tensors(arr, &tv, &nt, &cap, in->bwd, "b", CMP_JOB_ALL, &bytes);
    } else {
        *why = rp_add_tensors(arr, &tv, &nt, &cap, in->fwd, "f", CMP_JOB_ALL, &bytes);
        /* the other side's outputs, judged against this replay (rp_same_call) */
        if (!*why && in->check)
            *why = rp_add_tensors(arr, &tv, &nt, &cap, in->check, "k", CMP_JOB_OUTPUTS, &bytes);
    }
    if (*why)
        goto done;
    /* an elementwise call or optimizer with large tensors: a sample of each,
     * when the sample shows the record's error */
    if (!in->every) {
        const cJSON *cls = cJSON_GetObjectItemCaseSensitive(a, "class");
        const char *cn = cJSON_IsString(cls) ? strrchr(cls->valuestring, '.') : NULL;
        in->every = cmp_job_every(w, kind, in->fwd->name, cn ? cn + 1 : NULL, tv, nt);
        if (in->every > 1 && !rp_sample_sees(in, kind, tv, nt, in->every))
            in->every = 1;
    }
    if (in->every > 1) {
        cmp_job_sample(in->every, kind, tv, nt, arr, &bytes);
        cJSON_AddNumberToObject(job, "every", (double)in->every);
    }
    if (bytes > RP_MAX_JOB_BYTES) {
        *why = "its tensors are too large to replay (over 2 GiB)";
        goto done;
    }
    cJSON_AddNumberToObject(job, "id", (double)id);
    cmp_job_limits(job, bytes, deadline, per_record);
    cJSON_AddStringToObject(job, "kind", kind);
    cJSON_AddStringToObject(job, "name", name);
    cJSON_AddItemToObject(job, "args", a);
    cJSON_AddItemToObject(job, "tensors", arr);
    a = arr = NULL;
    if (!(text = cJSON_PrintUnformatted(job))) {
        *why = "out of memory";
        goto done;
    }
    uint32_t len = (uint32_t)strlen(text);
    if ((r = rp_send(w, &len, sizeof len, deadline)) || (r = rp_send(w, text, len, deadline)))
        goto done;
    for (size_t i = 0; i < nt && !r; i++) {
        /* the check's tensors are the other side's, read from its file */
        msp_dump_file_t *from = in->check && tv[i].rec == in->check ? in->of : in->f;
        r = rp_send_tensor(w, from, &tv[i], buf, bufsz, deadline);
        if (r == -3) {
            /* the worker waits for bytes it will not get: start afresh */
            *why = "a tensor of it cannot be read";
            r = -1;
        }
    }
    if (r || (r = rp_recv_line(w, deadline)))
        goto done;
    *ans = cJSON_Parse(w->line);
    rp_consume_line(w);
    if (!*ans)
        r = -1;
done:
    free(text);
    free(tv);
    cJSON_Delete(job);
    cJSON_Delete(arr);
    cJSON_Delete(a);
    return r;
}

/* Whether replay can change what compare says of r: a changed argument,
 * what the ratio rule calls introduced (replay confirms or clears it), or an
 * output whose error grew past CMP_REPLAY_GROWTH times its inputs' and an
 * eighth of its floor (a low-precision op the ratios cannot judge, a kernel
 * below its dtype hidden under noisy inputs). An output that carries about
 * what its inputs brought is inherited whatever a replay says. */
int cmp_replay_in_doubt(const msp_record_cmp_t *r)
{
    double ein = isnan(r->in_err) ? 0.0 : r->in_err;
    if ((r->arg_diff && !r->args_are_data) || r->cause == MSP_CAUSE_INTRODUCED)
        return 1;
    return r->out_err > CMP_REPLAY_GROWTH * ein && r->out_err > r->floor / 8.0;
}

int cmp_replay_choose(msp_record_cmp_t *r, const msp_compare_opts_t *o, double *prio)
{
    int differs = !isnan(r->out_err) && r->out_err > 0.0;
    if (o->replay == MSP_REPLAY_OFF || !r->bench_name ||
        (!differs && o->replay != MSP_REPLAY_ALL) || isnan(r->out_err))
        return 0;
    if (o->replay != MSP_REPLAY_ALL && !cmp_replay_in_doubt(r))
        return 0;
    const char *why = NULL;
    if (!rp_kind(r->name, &why)) {
        r->replay = MSP_RV_SKIPPED;
        r->replay_note = strdup(why);
        return 0;
    }
    *prio = rp_priority(r);
    return 1;
}

/* Whether rec recorded a tensor under role. */
static int rp_tensor_role(const msp_record_info_t *rec, const char *role)
{
    for (size_t i = 0; i < rec->n_tensors; i++)
        if (!strcmp(rec->tensors[i].role, role))
            return 1;
    return 0;
}

/* Into args (which holds the bench side's non-tensor arguments), the compare
 * side's arguments that the bench side recorded as tensors (it has no text
 * for them), or all of them when there is no bench record. A keyword the
 * bench call left out takes the API's own default in the replay, never the
 * compare side's value: given on one side only, it is a changed argument,
 * and replaying it from the compare side reproduced the change. */
static void rp_add_cmp_attrs(cJSON *args, msp_dump_file_t *cf, const msp_record_info_t *crec,
                             const msp_record_info_t *brec)
{
    cJSON *c = cJSON_CreateObject(), *it;
    if (!c)
        return;
    rp_add_attrs(c, NULL, cf, crec);
    cJSON_ArrayForEach(it, c)
    {
        if (cJSON_GetObjectItemCaseSensitive(args, it->string) ||
            (brec && !rp_tensor_role(brec, it->string)))
            continue;
        cJSON *dup = cJSON_Duplicate(it, 0);
        if (dup)
            cJSON_AddItemToObject(args, it->string, dup);
    }
    cJSON_Delete(c);
}

/* Whether the bench side's replay of rec would be the compare side's very
 * call: a forward or optimizer record whose inputs are identical on both
 * sides (in_err 0), each tensor of the same role, dtype and shape, the same
 * context (autocast, aliases) and arguments that are settings, not data.
 * Then the check rides along in the compare side's job (the bench outputs
 * judged against the same replay) instead of a second job. */
static int rp_same_call(const msp_record_cmp_t *rec, const rp_file_t *files,
                        const msp_record_info_t *c, const msp_record_info_t *b)
{
    if (!c || !b || rec->args_are_data || isnan(rec->in_err) || rec->in_err > 0.0 ||
        c->n_tensors != b->n_tensors)
        return 0;
    for (size_t i = 0; i < c->n_tensors; i++) {
        const msp_tensor_info_t *x = &c->tensors[i], *y = NULL;
        for (size_t j = 0; j < b->n_tensors && !y; j++)
            if (!strcmp(b->tensors[j].role, x->role))
                y = &b->tensors[j];
        if (!y || x->dtype != y->dtype || x->ndim != y->ndim ||
            memcmp(x->shape, y->shape, (size_t)x->ndim * sizeof *x->shape))
            return 0;
    }
    cJSON *cc = cJSON_CreateObject(), *bc = cJSON_CreateObject();
    int same = cc && bc;
    if (same) {
        rp_add_attrs(NULL, cc, files->cf, c);
        rp_add_attrs(NULL, bc, files->bf, b);
        same = cJSON_Compare(cc, bc, 1);
    }
    cJSON_Delete(cc);
    cJSON_Delete(bc);
    return same;
}

/* Replay one record: the compare side, judged; then, when it is called
 * introduced and the bench side holds tensors, the bench side as the check
 * that the call is rebuilt exactly. 0 done, -1 worker gone, -2 time up. */
static int rp_job(rp_worker_t *w, msp_record_cmp_t *rec, size_t id, rp_file_t *files,
                  const char *kind, double deadline, double per_record, void *buf, size_t bufsz)
{
    const char *why = NULL;
    char *fw = NULL, *bfw = NULL;
    int r = 0;
    cJSON *ans = NULL, *args = cJSON_CreateObject();
    const msp_record_info_t *crec = rp_find(files->cf, files->cnames, rec->name);
    const msp_record_info_t *brec = rp_find(files->bf, files->bnames, rec->bench_name);
    const msp_record_info_t *cf = crec, *bfr = brec;
    int bwd = !strcmp(kind, "backward");
    if (!args) {
        why = "out of memory";
        goto done;
    }
    if (!crec) {
        why = "the record is missing on the compare side";
        goto done;
    }
    if (bwd) {
        fw = cmp_forward_name(rec->name);
        bfw = rec->bench_name ? cmp_forward_name(rec->bench_name) : NULL;
        cf = rp_find(files->cf, files->cnames, fw);
        bfr = rp_find(files->bf, files->bnames, bfw);
        if (!cf) {
            why = "its forward record was not dumped";
            goto done;
        }
    }
    if (!cmp_worker_may_call(w, cf->name, &why))
        goto done;
    rp_add_attrs(args, NULL, files->bf, bfr);
    rp_add_cmp_attrs(args, files->cf, cf, bfr);
    rp_side_in_t cin = {.f = files->cf,
                        .fwd = cf,
                        .bwd = bwd ? crec : NULL,
                        .own_numbers = rec->args_are_data,
                        .of = files->bf,
                        .ofwd = bfr,
                        .obwd = bwd ? brec : NULL,
                        .out_err = rec->out_err,
                        .check = !bwd && rp_same_call(rec, files, cf, bfr) ? bfr : NULL};
    if ((r = rp_side(w, id, kind, rec->name, args, &cin, deadline, per_record, buf, bufsz, &ans,
                     &why)) ||
        why)
        goto done;
    rp_apply(rec, ans);
    const cJSON *check = cJSON_GetObjectItemCaseSensitive(ans, "check");
    if (rec->replay == MSP_RV_INTRODUCED && cin.check && cJSON_IsObject(check)) {
        rp_validate(rec, check); /* the bench side's replay was this one */
        goto done;
    }
    cJSON_Delete(ans);
    ans = NULL;
    if (rec->replay != MSP_RV_INTRODUCED || !bfr || (bwd && !brec))
        goto done;
    /* the check: the same sample as the compare side's */
    rp_side_in_t bin = {
        .f = files->bf, .fwd = bfr, .bwd = bwd ? brec : NULL, .every = cin.every, .out_err = NAN};
    const char *bwhy = NULL;
    if ((r = rp_side(w, id, kind, rec->name, args, &bin, deadline, per_record, buf, bufsz, &ans,
                     &bwhy)))
        goto done;
    if (!bwhy) /* a bench side without data (statistics) cannot check: the verdict stands */
        rp_validate(rec, ans);
done:
    if (why && !rec->replay_note) {
        rec->replay = MSP_RV_SKIPPED;
        rec->replay_note = strdup(why);
    }
    free(fw);
    free(bfw);
    cJSON_Delete(ans);
    cJSON_Delete(args);
    return r;
}

void cmp_replay_count(msp_compare_result_t *res, msp_replay_verdict_t v)
{
    switch (v) {
    case MSP_RV_INTRODUCED:
        res->replay_introduced++;
        break;
    case MSP_RV_INHERITED:
        res->replay_inherited++;
        break;
    case MSP_RV_SKIPPED:
        res->replay_skipped++;
        break;
    case MSP_RV_UNFINISHED:
        res->replay_unfinished++;
        break;
    default:
        break;
    }
}

/* Whether no tensor of rec's compare-side record holds data (a statistics
 * dump): its replay has nothing to call and is decided without the worker,
 * which a statistics tree then never starts (a cold one imports torch). */
static int rp_stats_only(const rp_file_t *f, const msp_record_cmp_t *rec)
{
    const msp_record_info_t *c = rp_find(f->cf, f->cnames, rec->name);
    if (!c || !c->n_tensors)
        return 0;
    for (size_t i = 0; i < c->n_tensors; i++)
        if (c->tensors[i].has_data)
            return 0;
    return 1;
}

/* The worker started for the first record that needs it: 0, or -1 with
 * res->replay_unavailable saying why. */
static int rp_begin(rp_worker_t *w, const char *py, double deadline, msp_compare_result_t *res)
{
    char *why = rp_start(w, py, deadline);
    if (!why)
        return 0;
    res->replay_unavailable = why;
    msp_log(MSP_LOG_WARN, "replay: %s; suspects come from error ratios alone", why);
    return -1;
}

msp_err cmp_replay_run(msp_compare_result_t *res, const cmp_file_pair_t *fps, size_t nfp,
                       const msp_compare_opts_t *o, rp_worker_t *given)
{
    if (o->replay == MSP_REPLAY_OFF || res->n_records == 0)
        return MSP_OK;
    double t0 = rp_now();
    double deadline = o->replay_budget > 0 ? t0 + o->replay_budget : 0;
    /* one record that never ends (a dump can ask for that) leaves the rest
     * of the budget to the others */
    double per_record = o->replay_budget > 0 ? fmax(RP_RECORD_MIN_SECONDS, o->replay_budget / 4)
                                             : 0;
    rp_cand_t *cand = calloc(res->n_records, sizeof *cand);
    if (!cand)
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory for replay");
    size_t nc = 0;
    for (size_t i = 0; i < res->n_records; i++) {
        double prio;
        if (cmp_replay_choose(&res->records[i], o, &prio))
            cand[nc++] = (rp_cand_t){i, prio};
    }
    res->replay_candidates = nc;
    if (!nc) {
        free(cand);
        return MSP_OK;
    }
    qsort(cand, nc, sizeof *cand, rp_cand_order);
    const char *py = cmp_worker_python(o->replay_python);
    rp_worker_t own;
    memset(&own, 0, sizeof own);
    own.fd = own.err_fd = -1;
    rp_worker_t *w = given ? given : &own;
    if (w->released) /* a session an earlier batch ended */
        rp_stop(w);
    rp_file_t files[RP_OPEN_FILES];
    memset(files, 0, sizeof files);
    unsigned long clock = 0;
    size_t bufsz = (size_t)1 << 20;
    void *buf = malloc(bufsz);
    int ready = w->fd >= 0 && !w->joined; /* the caller's, already serving */
    int starts = 1;
    size_t k = 0;
    if (!buf) {
        res->replay_unavailable = msp_asprintf("out of memory");
        k = nc;
    }
    for (; k < nc; k++) {
        msp_record_cmp_t *r = &res->records[cand[k].rec];
        if (deadline > 0 && rp_now() >= deadline)
            break;
        char *fwhy = NULL;
        rp_file_t *f = rp_files(files, &clock, fps, nfp, r->step, r->rank, &fwhy);
        if (!f) {
            r->replay = MSP_RV_SKIPPED;
            r->replay_note = fwhy;
            continue;
        }
        if (rp_stats_only(f, r)) {
            r->replay = MSP_RV_SKIPPED;
            r->replay_note = strdup(CMP_JOB_STATS_ONLY);
            continue;
        }
        if (!ready && rp_begin(w, py, deadline, res) != 0)
            break;
        ready = 1;
        const char *kwhy = NULL;
        const char *kind = rp_kind(r->name, &kwhy);
        int rr = rp_job(w, r, k, f, kind, deadline, per_record, buf, bufsz);
        if (rr == -2)
            break;
        if (rr == -1) {
            char tail[300];
            rp_err_tail(w, tail, sizeof tail);
            rp_stop(w);
            if (r->replay == MSP_RV_NONE) {
                r->replay = MSP_RV_SKIPPED;
                r->replay_note = msp_asprintf("the replay worker died on it%s%s",
                                              tail[0] ? ": " : "", tail);
            }
            /* a worker that died on one record is started again for the rest */
            char *again = starts < RP_MAX_STARTS
                              ? rp_start(w, py, deadline)
                              : msp_asprintf("the replay worker died %d times", starts);
            starts++;
            if (again) {
                msp_log(MSP_LOG_WARN, "replay stopped: %s", again);
                free(again);
                k++;
                break;
            }
        }
        if (o->replay_progress)
            o->replay_progress(k + 1, nc, o->replay_progress_ud);
    }
    for (size_t j = k; j < nc; j++) {
        msp_record_cmp_t *r = &res->records[cand[j].rec];
        if (r->replay == MSP_RV_NONE && !res->replay_unavailable) {
            r->replay = MSP_RV_UNFINISHED;
            r->replay_note = msp_asprintf("not replayed: the replay budget of %g s ran out",
                                          o->replay_budget);
        }
    }
    if (w == &own)
        rp_stop(w);
    else if (w->pid > 0 || w->fd >= 0)
        cmp_worker_release(w); /* the session cleans up while reports are written */
    for (int i = 0; i < RP_OPEN_FILES; i++)
        rp_file_close(&files[i]);
    free(buf);
    free(cand);
    for (size_t i = 0; i < res->n_records; i++) {
        cmp_replay_count(res, res->records[i].replay);
    }
    res->replay_done = res->replay_introduced + res->replay_inherited;
    res->replay_seconds = rp_now() - t0;
    return MSP_OK;
}
