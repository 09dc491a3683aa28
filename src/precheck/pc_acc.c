/* acc_check (msprobe-acc_check(1)): msprobe's API pre-check on a tensor dump.
 *
 * Every API record (forward, backward, optimizer step) is sent to compare's
 * replay worker (replay.py, cmp_worker.c) as an "acc" job: the worker
 * re-runs the call on the CPU with the recorded inputs and arguments in
 * float64 (the benchmark) and in the recorded dtypes (the reference device:
 * what a correct kernel of that dtype gives), and returns msprobe's metrics of
 * the recorded output and of that reference, each against the benchmark.
 * Each output is then judged here by the standard msprobe assigns its API
 * and dtype (pc_acc_std.c). Records are shared among several workers, each
 * driven by a thread of its own with its own handle on the dump. */
#include "pc_internal.h"
#include "cmp_job.h" /* compare's replay worker and its jobs, which acc_check replays on */
#include "msprobe/proc.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A job's tensors together at most. */
#define ACC_MAX_JOB_BYTES ((uint64_t)2 << 30)
/* Seconds of wall time one record may replay (the worker ends the job's
 * child then: replay.py's job_limits); compare waits ACC_JOB_SLACK more
 * before it replaces a worker that did not answer. */
#define ACC_JOB_SECONDS 120.0
#define ACC_JOB_SLACK 30.0
/* The whole check's default budget of wall time (msp_acc_opts_t.budget). */
#define ACC_BUDGET_SECONDS 600.0
/* Workers started at most by one thread (a crash on one job restarts it). */
#define ACC_MAX_STARTS 4
#define ACC_MAX_WORKERS 8

typedef struct acc_job {
    size_t rec;       /* index into the file's records */
    const char *kind; /* "forward", "backward", "optimizer"; NULL: skipped */
    char *why;        /* why it is skipped (before or after replay) */
    char *answer;     /* the worker's JSON line */
} acc_job_t;

typedef struct acc_run {
    const char *path, *python;
    cJSON *refs; /* {custom name: "pkg.mod.fn"} or NULL */
    acc_job_t *jobs;
    size_t njobs;
    atomic_size_t next, done;
    const msp_acc_opts_t *opts;
    double budget;   /* seconds for the whole check; <= 0: none */
    double deadline; /* msp_monotonic() seconds when the budget runs out; 0: none */
    pthread_mutex_t mu;
    char *start_error; /* the first worker that could not start */
    int started;       /* workers that did */
} acc_run_t;

/* What job a record makes; NULL (and *why, static) when none. */
static const char *acc_kind(const char *name, const cJSON *refs, const char **why)
{
    static const char *const no[][2] = {
        {"Distributed.", "communication op: not replayed in one process"},
        {"NPU.", "device-only kernel: no CPU kernel to replay it"},
        {"Aten.", "aten op: not replayed"},
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        if (!strncmp(name, no[i][0], strlen(no[i][0]))) {
            *why = no[i][1];
            return NULL;
        }
    if (!strncmp(name, "Custom.", 7)) {
        /* Custom.<callable path>.N.<pass>: replayed only with a reference */
        char api[256];
        const char *last = strrchr(name, '.');
        const char *p = last ? last - 1 : name;
        while (p > name && *p != '.')
            p--;
        size_t n = p > name + 7 ? (size_t)(p - (name + 7)) : 0;
        snprintf(api, sizeof api, "%.*s", (int)(n < sizeof api ? n : sizeof api - 1), name + 7);
        if (!cJSON_GetObjectItemCaseSensitive(refs, api)) {
            *why =
                "custom callable: give it a reference to replay with (--reference NAME=pkg.mod.fn)";
            return NULL;
        }
    }
    return cmp_job_kind(name, why);
}

/* Build, send and answer one job; 0 done (answer or why set), -1 worker gone,
 * -2 time up. */
/* A dump of msprobe's own (dump.json) rather than ours. */
static int acc_is_msprobe_dump(const msp_dump_file_t *f)
{
    size_t n = strlen(f->path);
    return n >= 9 && !strcmp(f->path + n - 9, "dump.json");
}

/* msprobe records an API's backward as the gradients of the grad_fn of its
 * first output (replay_backward.py): the job says so, and names the forward
 * inputs that took a gradient in the run (dump.json's requires_grad), so the
 * replayed call builds the same node. */
static void acc_grad_fn_layout(cJSON *j, const msp_record_info_t *frec)
{
    cJSON_AddStringToObject(j, "grad_layout", "grad_fn");
    cJSON *rg = cJSON_AddArrayToObject(j, "requires_grad");
    for (size_t i = 0; rg && i < frec->n_tensors; i++)
        if (frec->tensors[i].requires_grad && strncmp(frec->tensors[i].role, "output", 6))
            cJSON_AddItemToArray(rg, cJSON_CreateString(frec->tensors[i].role));
}

static int acc_one(acc_run_t *run, cmp_worker_t *w, msp_dump_file_t *f,
                   const msp_record_info_t **names, acc_job_t *job, size_t id, void *buf,
                   size_t bufsz)
{
    const msp_record_info_t *rec = &f->records[job->rec];
    const char *why = NULL;
    cmp_job_tensor_t *tv = NULL;
    size_t nt = 0, cap = 0;
    uint64_t bytes = 0;
    char *fw = NULL, *text = NULL;
    int r = 0;
    cJSON *j = cJSON_CreateObject(), *args = cJSON_CreateObject(), *arr = cJSON_CreateArray();
    if (!j || !args || !arr) {
        why = "out of memory";
        goto done;
    }
    const msp_record_info_t *frec = rec;
    if (!strcmp(job->kind, "backward")) {
        fw = cmp_forward_name(rec->name);
        frec = cmp_name_find(f, names, fw);
        if (!frec) {
            why = "its forward record was not dumped";
            goto done;
        }
        cJSON_AddStringToObject(j, "forward", fw);
        cJSON *fd = cJSON_AddObjectToObject(j, "forward_dtypes");
        for (size_t i = 0; fd && i < frec->n_tensors; i++)
            if (!strncmp(frec->tensors[i].role, "output", 6))
                cJSON_AddStringToObject(fd, frec->tensors[i].role,
                                        msp_dtype_name(frec->tensors[i].dtype));
        if (acc_is_msprobe_dump(f))
            acc_grad_fn_layout(j, frec);
        why = cmp_job_add_tensors(arr, &tv, &nt, &cap, frec, "f", CMP_JOB_INPUTS, &bytes);
        if (!why)
            why = cmp_job_add_tensors(arr, &tv, &nt, &cap, rec, "b", CMP_JOB_ALL, &bytes);
    } else {
        why = cmp_job_add_tensors(arr, &tv, &nt, &cap, rec, "f", CMP_JOB_ALL, &bytes);
    }
    if (why)
        goto done;
    if (bytes > ACC_MAX_JOB_BYTES) {
        why = "its tensors are too large to replay (over 2 GiB)";
        goto done;
    }
    /* one dump: its arguments and its context (autocast, aliases) together */
    cmp_job_add_attrs(args, args, f, frec);
    cJSON_AddNumberToObject(j, "id", (double)id);
    cmp_job_limits(j, bytes, run->deadline, ACC_JOB_SECONDS);
    cJSON_AddStringToObject(j, "kind", job->kind);
    cJSON_AddStringToObject(j, "name", rec->name);
    if (run->opts && run->opts->error_data_dir) /* the benchmark outputs back too */
        cJSON_AddTrueToObject(cJSON_AddObjectToObject(j, "acc"), "keep");
    else
        cJSON_AddTrueToObject(j, "acc");
    if (run->refs)
        cJSON_AddItemToObject(j, "references", cJSON_Duplicate(run->refs, 1));
    cJSON_AddItemToObject(j, "args", args);
    cJSON_AddItemToObject(j, "tensors", arr);
    args = arr = NULL;
    if (!(text = cJSON_PrintUnformatted(j))) {
        why = "out of memory";
        goto done;
    }
    double deadline = msp_monotonic() + ACC_JOB_SECONDS + ACC_JOB_SLACK;
    if (run->deadline > 0 && run->deadline + ACC_JOB_SLACK < deadline)
        deadline = run->deadline + ACC_JOB_SLACK;
    uint32_t len = (uint32_t)strlen(text);
    if ((r = cmp_worker_send(w, &len, sizeof len, deadline)) ||
        (r = cmp_worker_send(w, text, len, deadline)))
        goto done;
    for (size_t i = 0; i < nt && !r; i++) {
        r = cmp_worker_send_tensor(w, f, &tv[i], buf, bufsz, deadline);
        if (r == -3) {
            why = "a tensor of it cannot be read";
            r = -1; /* the worker waits for bytes it will not get: start afresh */
        }
    }
    if (r || (r = cmp_worker_recv_line(w, deadline)))
        goto done;
    job->answer = strdup(w->line);
    cmp_worker_consume_line(w);
    if (!job->answer)
        why = "out of memory";
done:
    if (why && !job->why)
        job->why = strdup(why);
    free(text);
    free(tv);
    free(fw);
    cJSON_Delete(j);
    cJSON_Delete(args);
    cJSON_Delete(arr);
    return r;
}

static void acc_progress(acc_run_t *run)
{
    size_t d = atomic_fetch_add(&run->done, 1) + 1;
    if (run->opts && run->opts->progress)
        run->opts->progress(d, run->njobs, run->opts->progress_ud);
}

static void acc_note_start_error(acc_run_t *run, char *why)
{
    pthread_mutex_lock(&run->mu);
    if (!run->start_error)
        run->start_error = why;
    else
        free(why);
    pthread_mutex_unlock(&run->mu);
}

static void *acc_thread(void *arg)
{
    acc_run_t *run = arg;
    msp_dump_file_t *f = NULL;
    const msp_record_info_t **names = NULL;
    cmp_worker_t w;
    memset(&w, 0, sizeof w);
    w.fd = w.err_fd = -1;
    size_t bufsz = (size_t)1 << 20;
    void *buf = malloc(bufsz);
    if (!buf || msp_dump_open(run->path, &f) != MSP_OK || !(names = cmp_name_index(f))) {
        acc_note_start_error(run, msp_asprintf("cannot open %s: %s", run->path,
                                               buf ? msp_last_error() : "out of memory"));
        goto out;
    }
    char *why = cmp_worker_start(&w, run->python, msp_monotonic() + ACC_JOB_SECONDS);
    if (why) {
        acc_note_start_error(run, why);
        goto out;
    }
    pthread_mutex_lock(&run->mu);
    run->started++;
    pthread_mutex_unlock(&run->mu);
    int starts = 1;
    for (;;) {
        size_t i = atomic_fetch_add(&run->next, 1);
        if (i >= run->njobs)
            break;
        acc_job_t *job = &run->jobs[i];
        if (job->kind && run->deadline > 0 && msp_monotonic() >= run->deadline - 1.0 && !job->why) {
            job->why = msp_asprintf("not checked: acc_check's budget of %g s ran out (--budget)",
                                    run->budget);
            job->kind = NULL;
        }
        if (!job->kind) { /* skipped before replay */
            acc_progress(run);
            continue;
        }
        int r = acc_one(run, &w, f, names, job, i, buf, bufsz);
        if (r) {
            char tail[300];
            cmp_worker_err_tail(&w, tail, sizeof tail);
            cmp_worker_stop(&w);
            if (!job->why)
                job->why = r == -2 ? msp_asprintf("the replay took longer than %g s",
                                                  ACC_JOB_SECONDS + ACC_JOB_SLACK)
                                   : msp_asprintf("the replay worker died on it%s%s",
                                                  tail[0] ? ": " : "", tail);
            char *again = starts < ACC_MAX_STARTS
                              ? cmp_worker_start(&w, run->python, msp_monotonic() + ACC_JOB_SECONDS)
                              : msp_asprintf("the replay worker died %d times", starts);
            starts++;
            if (again) {
                /* this thread stops; the others take the rest */
                msp_log(MSP_LOG_WARN, "acc_check: a replay worker stopped: %s", again);
                free(again);
                acc_progress(run);
                break;
            }
        }
        acc_progress(run);
    }
out:
    if (w.pid > 0 || w.fd >= 0)
        cmp_worker_stop(&w);
    free(names);
    msp_dump_close(f);
    free(buf);
    return NULL;
}

/* ---- answers into rows -------------------------------------------------------------- */

static const char *const acc_metric_keys[MSP_ACC_NMETRICS] = {"cosine",
                                                              "max_abs_err",
                                                              "rel_err_hundredth",
                                                              "rel_err_thousandth",
                                                              "rel_err_ten_thousandth",
                                                              "error_rate",
                                                              "eb",
                                                              "rmse",
                                                              "small_value_err_ratio",
                                                              "max_rel_error",
                                                              "mean_rel_error",
                                                              "inf_nan_error_ratio",
                                                              "rel_err_ratio",
                                                              "abs_err_ratio",
                                                              "max_ulp_error",
                                                              "mean_ulp_error",
                                                              "ulp_error_proportion"};

static unsigned acc_metrics(const cJSON *o, double *v)
{
    unsigned have = 0;
    for (int i = 0; i < MSP_ACC_NMETRICS; i++) {
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, acc_metric_keys[i]);
        v[i] = NAN;
        if (cJSON_IsNumber(it)) {
            v[i] = it->valuedouble;
        } else if (cJSON_IsString(it)) {
            const char *s = it->valuestring;
            v[i] = !strcmp(s, "inf") ? INFINITY : !strcmp(s, "-inf") ? -INFINITY : NAN;
        } else {
            continue;
        }
        have |= 1u << i;
    }
    return have;
}

/* The columns msprobe fills for an output of this standard and dtype. */
static unsigned acc_shown(cmp_std_t std, const char *dtype, int is_float)
{
    unsigned m = 0;
    if (is_float) {
        m |= (1u << MSP_ACC_COSINE) | (1u << MSP_ACC_MAX_ABS) | (1u << MSP_ACC_THOUSANDTH);
        if (!strcmp(dtype, "torch.float16") || !strcmp(dtype, "torch.bfloat16"))
            m |= 1u << MSP_ACC_HUNDREDTH;
        else
            m |= 1u << MSP_ACC_TEN_THOUSANDTH;
    }
    switch (std) {
    case CMP_STD_BINARY:
        m |= 1u << MSP_ACC_ERROR_RATE;
        break;
    case CMP_STD_ACCUMULATIVE:
        m |= 1u << MSP_ACC_EB;
        /* fall through */
    case CMP_STD_ABSOLUTE:
        m |= (1u << MSP_ACC_INF_NAN) | (1u << MSP_ACC_REL_ERR_RATIO) |
             (1u << MSP_ACC_ABS_ERR_RATIO);
        break;
    case CMP_STD_ULP:
        m |= (1u << MSP_ACC_MAX_ULP) | (1u << MSP_ACC_MEAN_ULP) | (1u << MSP_ACC_ULP_PROPORTION);
        break;
    case CMP_STD_BENCHMARK:
        m |= (1u << MSP_ACC_SMALL_VALUE) | (1u << MSP_ACC_MAX_REL) | (1u << MSP_ACC_MEAN_REL) |
             (1u << MSP_ACC_RMSE) | (1u << MSP_ACC_EB);
        break;
    default:
        break;
    }
    return m;
}

static void acc_shape(const cJSON *sh, char *buf, size_t n)
{
    size_t at = 0;
    int k = 0;
    buf[0] = '\0';
    at += (size_t)snprintf(buf, n, "(");
    const cJSON *d;
    cJSON_ArrayForEach(d, sh)
    {
        if (at < n)
            at += (size_t)snprintf(buf + at, n - at, "%s%.0f", k ? ", " : "", d->valuedouble);
        k++;
    }
    if (at < n)
        snprintf(buf + at, n - at, k == 1 ? ",)" : ")");
}

static msp_err acc_add_output(msp_acc_result_t *res, size_t *cap, const char *record,
                              const char *role, msp_acc_output_t **o)
{
    msp_acc_output_t *nv = msp_grow(res->outputs, cap, res->n_outputs, sizeof *nv, 64);
    if (!nv)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    res->outputs = nv;
    *o = &nv[res->n_outputs++];
    memset(*o, 0, sizeof **o);
    (*o)->name = msp_asprintf("%s.%s", record, role);
    if (!(*o)->name)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    return MSP_OK;
}

/* One output of a record the worker answered. */
static msp_err acc_judge_output(msp_acc_result_t *res, size_t *cap, const char *record,
                                const cJSON *out)
{
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(out, "role");
    const cJSON *acc = cJSON_GetObjectItemCaseSensitive(out, "acc");
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(acc, "dtype");
    msp_acc_output_t *o = NULL;
    msp_err rc = acc_add_output(res, cap, record, cJSON_IsString(role) ? role->valuestring : "?",
                                &o);
    if (rc != MSP_OK)
        return rc;
    const char *dtype = cJSON_IsString(dt) ? dt->valuestring : "?";
    snprintf(o->bench_dtype, sizeof o->bench_dtype, "%s",
             cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(out, "float")) ? "torch.float64"
                                                                          : dtype);
    snprintf(o->device_dtype, sizeof o->device_dtype, "%s", dtype);
    acc_shape(cJSON_GetObjectItemCaseSensitive(acc, "shape"), o->shape, sizeof o->shape);
    const cJSON *dev = cJSON_GetObjectItemCaseSensitive(acc, "dev");
    if (!acc || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(dev, "empty"))) {
        o->status = MSP_ACC_SKIP;
        o->message = strdup(acc ? "empty tensor: nothing to compare" : "no metrics came back");
        return o->message ? MSP_OK : msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    double ref[MSP_ACC_NMETRICS];
    unsigned dh = acc_metrics(dev, o->metric);
    unsigned rh = acc_metrics(cJSON_GetObjectItemCaseSensitive(acc, "ref"), ref);
    char api[128];
    cmp_acc_api_base(record, api, sizeof api);
    cmp_std_t std = cmp_acc_standard(api, dtype);
    int is_float = msp_dtype_is_float(msp_dtype_from_name(dtype));
    o->have = dh & acc_shown(std, dtype, is_float);
    if (std != CMP_STD_NONE) {
        cmp_apc_verdict_t v;
        cmp_acc_judge(std, dtype, api, o->metric, dh, ref, rh, 1, &v);
        o->standard = cmp_std_name(std);
        o->status = v.result;
        o->message = msp_asprintf("%s%s%s", cmp_std_name(std), v.msg[0] ? ": " : "", v.msg);
    } else {
        char note[200];
        o->status = cmp_acc_first_pass(dtype, o->metric, dh, note, sizeof note);
        o->message = msp_asprintf("%s: not covered by the precision standards; msprobe's "
                                  "first-pass rule%s%s",
                                  dtype, note[0] ? ": " : "", note);
    }
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(dev, "cosine_note");
    if (o->message && cJSON_IsString(cn) && cn->valuestring[0]) {
        char *m = msp_asprintf("%s (%s)", o->message, cn->valuestring);
        free(o->message);
        o->message = m;
    }
    return o->message ? MSP_OK : msp_fail(MSP_ERR_NOMEM, "out of memory");
}

static msp_acc_status_t acc_worst(msp_acc_status_t a, msp_acc_status_t b)
{
    static const int rank[] = {0, 2, 3, 4, 1}; /* none < skip < pass < warning < error */
    return rank[b] > rank[a] ? b : a;
}

/* "Functional.conv2d.0.forward" -> "Functional.conv2d.0", and the pass. */
static char *acc_api_name(const char *record, const char **pass)
{
    const char *last = strrchr(record, '.');
    *pass = last ? last + 1 : "";
    return last ? msp_asprintf("%.*s", (int)(last - record), record) : strdup(record);
}

static msp_err acc_collect(acc_run_t *run, const msp_dump_file_t *f, msp_acc_result_t *res,
                           size_t **owner_out)
{
    size_t ocap = 0, acap = 0, wcap = 0;
    size_t *owner = NULL;
    msp_err rc = MSP_OK;
    *owner_out = NULL;
    for (size_t i = 0; i < run->njobs && rc == MSP_OK; i++) {
        acc_job_t *job = &run->jobs[i];
        const msp_record_info_t *rec = &f->records[job->rec];
        const char *pass;
        char *api = acc_api_name(rec->name, &pass);
        if (!api)
            return msp_fail(MSP_ERR_NOMEM, "out of memory");
        msp_acc_api_t *a = NULL;
        for (size_t k = res->n_apis; k-- > 0 && !a;)
            if (!strcmp(res->apis[k].name, api))
                a = &res->apis[k];
        if (!a) {
            msp_acc_api_t *nv = msp_grow(res->apis, &acap, res->n_apis, sizeof *nv, 64);
            if (!nv || !(nv[res->n_apis].message = strdup(""))) {
                free(api);
                return msp_fail(MSP_ERR_NOMEM, "out of memory");
            }
            res->apis = nv;
            a = &nv[res->n_apis++];
            a->name = api;
        } else {
            free(api);
        }
        int backward = !strcmp(pass, "backward");
        cJSON *ans = job->answer ? cJSON_Parse(job->answer) : NULL;
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(ans, "status");
        msp_acc_status_t agg = MSP_ACC_NONE;
        size_t before = res->n_outputs;
        if (ans && cJSON_IsString(st) && !strcmp(st->valuestring, "ok")) {
            res->replayed++;
            const cJSON *o;
            cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(ans, "outputs"))
            {
                if ((rc = acc_judge_output(res, &ocap, rec->name, o)) != MSP_OK)
                    break;
                agg = acc_worst(agg, res->outputs[res->n_outputs - 1].status);
            }
        } else {
            const cJSON *why = cJSON_GetObjectItemCaseSensitive(ans, "reason");
            const char *reason = job->why              ? job->why
                                 : cJSON_IsString(why) ? why->valuestring
                                                       : "not replayed: the replay workers "
                                                         "stopped before it";
            msp_acc_output_t *o = NULL;
            res->skipped++;
            if ((rc = acc_add_output(res, &ocap, rec->name, "output.0", &o)) == MSP_OK) {
                o->status = MSP_ACC_SKIP;
                o->message = strdup(reason);
                if (!o->message)
                    rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
            }
            agg = MSP_ACC_SKIP;
            char *m = msp_asprintf("%s%s%s: %s", a->message, a->message[0] ? "; " : "", pass,
                                   reason);
            if (m) {
                free(a->message);
                a->message = m;
            }
        }
        cJSON_Delete(ans);
        size_t ai = (size_t)(a - res->apis);
        for (size_t k = before; k < res->n_outputs && rc == MSP_OK; k++) {
            size_t *nw = msp_grow(owner, &wcap, k, sizeof *nw, 64);
            if (!nw) {
                rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
                break;
            }
            owner = nw;
            owner[k] = ai;
        }
        if (backward)
            a->backward = acc_worst(a->backward, agg);
        else
            a->forward = acc_worst(a->forward, agg);
    }
    for (size_t i = 0; i < res->n_outputs; i++) {
        msp_acc_status_t s = res->outputs[i].status;
        res->pass += s == MSP_ACC_PASS;
        res->warning += s == MSP_ACC_WARNING;
        res->error += s == MSP_ACC_ERROR;
    }
    *owner_out = owner;
    return rc;
}

/* Outputs of one API sit together in the result: a backward record comes
 * long after its forward, so the rows are regrouped by API, keeping their
 * order within each (owner[i]: the API of output i). */
static msp_err acc_group_outputs(msp_acc_result_t *res, const size_t *owner)
{
    msp_acc_output_t *v = calloc(res->n_outputs + 1, sizeof *v);
    size_t *at = calloc(res->n_apis + 1, sizeof *at);
    if (!v || !at) {
        free(v);
        free(at);
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < res->n_outputs; i++)
        at[owner[i] + 1]++;
    for (size_t a = 0; a < res->n_apis; a++) {
        at[a + 1] += at[a];
        res->apis[a].first = at[a];
        res->apis[a].n = at[a + 1] - at[a];
    }
    for (size_t i = 0; i < res->n_outputs; i++)
        v[at[owner[i]]++] = res->outputs[i];
    free(at);
    free(res->outputs);
    res->outputs = v;
    return MSP_OK;
}

static msp_err acc_references(const msp_acc_opts_t *o, cJSON **out)
{
    *out = NULL;
    if (!o || !o->n_references)
        return MSP_OK;
    cJSON *refs = cJSON_CreateObject();
    if (!refs)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < o->n_references; i++) {
        const char *r = o->references[i];
        const char *eq = strchr(r, '=');
        if (!eq || eq == r || !eq[1] || !strchr(eq + 1, '.')) {
            cJSON_Delete(refs);
            return msp_fail(MSP_ERR_USAGE, "--reference '%s': expected NAME=pkg.module.function",
                            r);
        }
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - r), r);
        cJSON_DeleteItemFromObjectCaseSensitive(refs, name);
        cJSON_AddStringToObject(refs, name, eq + 1);
    }
    *out = refs;
    return MSP_OK;
}

/* --save_error_data over the jobs answered (pc_acc_save.c). */
static msp_err acc_save_jobs(acc_run_t *run, msp_dump_file_t *f, msp_acc_result_t *res,
                             const char *dir)
{
    size_t *recs = calloc(run->njobs + 1, sizeof *recs);
    char **answers = calloc(run->njobs + 1, sizeof *answers);
    size_t n = 0;
    for (size_t i = 0; recs && answers && i < run->njobs; i++)
        if (run->jobs[i].answer) {
            recs[n] = run->jobs[i].rec;
            answers[n++] = run->jobs[i].answer;
        }
    msp_err rc = recs && answers
                     ? acc_save_error_data(dir, f, res, recs, answers, n, &res->error_files)
                     : msp_fail(MSP_ERR_NOMEM, "out of memory");
    free(recs);
    free(answers);
    return rc;
}

/* Whether record name's API ("Functional.relu.0" of ".forward") is one an
 * earlier check wrote (msp_acc_opts_t.checked). */
static int acc_checked_before(const msp_acc_opts_t *o, const char *name)
{
    const char *last = strrchr(name, '.');
    size_t n = last ? (size_t)(last - name) : strlen(name);
    for (size_t i = 0; o && i < o->n_checked; i++)
        if (strlen(o->checked[i]) == n && !strncmp(o->checked[i], name, n))
            return 1;
    return 0;
}

static int acc_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

msp_err msp_acc_check(const char *path, const msp_acc_opts_t *opts, msp_acc_result_t **out)
{
    *out = NULL;
    msp_dump_tree_t t;
    msp_err rc = msp_dump_tree_scan(path, 0, &t);
    if (rc != MSP_OK) {
        msp_dump_tree_free(&t);
        return rc;
    }
    if (t.n_files != 1) {
        rc = msp_fail(MSP_ERR_USAGE,
                      "%s holds %zu dump files; acc_check takes one: a dump file "
                      "or its rank directory (step%lld/rank%lld, ...)",
                      path, t.n_files, (long long)t.files[0].step, (long long)t.files[0].rank);
        msp_dump_tree_free(&t);
        return rc;
    }
    if (t.files[0].error) {
        rc = msp_fail(MSP_ERR_FORMAT, "%s: %s", t.files[0].path, t.files[0].error);
        msp_dump_tree_free(&t);
        return rc;
    }
    msp_acc_result_t *res = calloc(1, sizeof *res);
    acc_run_t run;
    memset(&run, 0, sizeof run);
    pthread_mutex_init(&run.mu, NULL);
    msp_dump_file_t *f = NULL;
    pthread_t *th = NULL;
    if (!res || !(res->path = strdup(t.files[0].path))) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = msp_dump_open(res->path, &f)) != MSP_OK)
        goto done;
    if ((rc = acc_references(opts, &run.refs)) != MSP_OK)
        goto done;
    int data = 0;
    for (size_t i = 0; i < f->n_records && !data; i++)
        for (size_t k = 0; k < f->records[i].n_tensors && !data; k++)
            data = f->records[i].tensors[k].has_data;
    if (!data) {
        rc = msp_fail(MSP_ERR_USAGE,
                      "%s holds no tensor data (task %s): acc_check replays the "
                      "recorded inputs; dump with task \"tensor\"",
                      res->path, f->task[0] ? f->task : "?");
        goto done;
    }
    if (!(run.jobs = calloc(f->n_records + 1, sizeof *run.jobs))) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < f->n_records; i++) {
        const char *name = f->records[i].name;
        if (!strncmp(name, "Module.", 7))
            continue; /* not an API: the records inside it are */
        if (acc_checked_before(opts, name))
            continue; /* an earlier check's CSV has its rows (-csv_path) */
        const char *why = NULL;
        acc_job_t *j = &run.jobs[run.njobs++];
        j->rec = i;
        j->kind = acc_kind(name, run.refs, &why);
        if (!j->kind && !(j->why = strdup(why))) {
            rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
            goto done;
        }
    }
    run.path = res->path;
    run.python = cmp_worker_python(opts ? opts->python : NULL);
    run.opts = opts;
    double budget = run.budget = opts && (opts->budget < 0 || opts->budget > 0)
                                     ? opts->budget
                                     : ACC_BUDGET_SECONDS;
    size_t to_replay = 0;
    for (size_t i = 0; i < run.njobs; i++)
        to_replay += run.jobs[i].kind != NULL;
    int nw = opts && opts->workers > 0 ? opts->workers : acc_cpus();
    if (nw > ACC_MAX_WORKERS)
        nw = ACC_MAX_WORKERS;
    if ((size_t)nw > to_replay)
        nw = to_replay ? (int)to_replay : 0;
    double t0 = msp_monotonic();
    run.deadline = budget > 0 ? t0 + budget : 0;
    if (nw && !(th = calloc((size_t)nw, sizeof *th))) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
        goto done;
    }
    int nt = 0;
    for (int i = 0; i < nw; i++)
        if (pthread_create(&th[nt], NULL, acc_thread, &run) == 0)
            nt++;
    for (int i = 0; i < nt; i++)
        pthread_join(th[i], NULL);
    res->seconds = msp_monotonic() - t0;
    res->workers = run.started;
    res->records = run.njobs;
    if (nw && !run.started) {
        rc = msp_fail(MSP_ERR_UNSUPPORTED, "acc_check: no replay worker started: %s",
                      run.start_error ? run.start_error : "cannot create a thread");
        goto done;
    }
    size_t *owner = NULL;
    if ((rc = acc_collect(&run, f, res, &owner)) == MSP_OK && opts && opts->error_data_dir)
        rc = acc_save_jobs(&run, f, res, opts->error_data_dir);
    if (rc == MSP_OK)
        rc = acc_group_outputs(res, owner);
    free(owner);
done:
    free(th);
    for (size_t i = 0; run.jobs && i < run.njobs; i++) {
        free(run.jobs[i].why);
        free(run.jobs[i].answer);
    }
    free(run.jobs);
    free(run.start_error);
    cJSON_Delete(run.refs);
    pthread_mutex_destroy(&run.mu);
    msp_dump_close(f);
    msp_dump_tree_free(&t);
    if (rc != MSP_OK) {
        msp_acc_result_free(res);
        return rc;
    }
    *out = res;
    return MSP_OK;
}

void msp_acc_result_free(msp_acc_result_t *res)
{
    if (!res)
        return;
    for (size_t i = 0; i < res->n_apis; i++) {
        free(res->apis[i].name);
        free(res->apis[i].message);
    }
    for (size_t i = 0; i < res->n_outputs; i++) {
        free(res->outputs[i].name);
        free(res->outputs[i].message);
    }
    free(res->apis);
    free(res->outputs);
    free(res->path);
    free(res);
}
