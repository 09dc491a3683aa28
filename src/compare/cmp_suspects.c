/* Ranked suspects (msprobe-compare(1), ROOT CAUSE): each record that
 * introduced error, each parameter that differs before any op of its step
 * used it, and each input something msprobe did not record changed
 * (a producer gap, an op no one recorded, a module's own code), with its
 * reason line, in one order: earliest step, decisive evidence (replay, a
 * changed argument) before ratios, then execution order. The first of them
 * is the root cause. */
#include "cmp_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The row of "RECORD/ROLE" among the records of the same step and rank. */
static long cmp_find_producer_row(const msp_compare_result_t *res, const cmp_rec_index_t *ix,
                                  const msp_record_cmp_t *at, const char *producer)
{
    const char *slash = strrchr(producer, '/');
    if (!slash)
        return -1;
    char *name = msp_asprintf("%.*s", (int)(slash - producer), producer);
    const msp_record_cmp_t *p = name ? cmp_index_find(ix, at->step, at->rank, name) : NULL;
    size_t rl = name ? strlen(name) : 0;
    free(name);
    for (size_t k = 0; p && k < p->n_tensors; k++) {
        const msp_tensor_cmp_t *t = &res->tensors[p->first_tensor + k];
        const char *nm = t->npu_name ? t->npu_name : t->bench_name;
        if (nm && strlen(nm) > rl + 1 && strcmp(nm + rl + 1, slash + 1) == 0)
            return (long)(p->first_tensor + k);
    }
    return -1;
}

static const char *cmp_role_of(const msp_tensor_cmp_t *t, const msp_record_cmp_t *rec)
{
    const char *nm = t->npu_name ? t->npu_name : t->bench_name;
    size_t rl = strlen(rec->name);
    if (nm && strncmp(nm, rec->name, rl) == 0 && nm[rl] == '.')
        return nm + rl + 1;
    return nm ? nm : "?";
}

/* The dtype whose floor a record was judged against. */
static const char *cmp_floor_dtype(double fl)
{
    return fl >= cmp_floor_for(0x1p-8)    ? "bfloat16"
           : fl >= cmp_floor_for(0x1p-11) ? "float16"
           : fl >= cmp_floor_for(0x1p-24) ? "float32"
           : fl > 0.0                     ? "float64"
                                          : "exact";
}

long cmp_worst_output(const msp_compare_result_t *res, const msp_record_cmp_t *rec)
{
    long worst = -1;
    for (size_t k = 0; k < rec->n_tensors; k++) {
        const msp_tensor_cmp_t *t = &res->tensors[rec->first_tensor + k];
        if (t->is_output && !isnan(t->rel_err) &&
            (worst < 0 || t->rel_err > res->tensors[worst].rel_err))
            worst = (long)(rec->first_tensor + k);
    }
    return worst;
}

/* A suspect with its record, for sorting (qsort has no user pointer). */
typedef struct cmp_ranked {
    const msp_record_cmp_t *rec;
    msp_suspect_t s;
    int tier;
} cmp_ranked_t;

/* Earliest step first; inside a step, decisive evidence (replay, a changed
 * argument) before ratios alone, then execution order: blame goes to the
 * earliest record that introduced error, as the records ran (forward,
 * backward and optimizer alike). */
static int cmp_suspect_order(const void *x, const void *y)
{
    const cmp_ranked_t *a = x, *b = y;
    const msp_record_cmp_t *ra = a->rec, *rb = b->rec;
    if (ra->step != rb->step)
        return ra->step < rb->step ? -1 : 1;
    if (a->tier != b->tier)
        return a->tier < b->tier ? -1 : 1;
    if (ra->order != rb->order)
        return ra->order < rb->order ? -1 : 1;
    if (ra->rank != rb->rank)
        return ra->rank < rb->rank ? -1 : 1;
    return a->s.is_gap == b->s.is_gap ? 0 : (a->s.is_gap ? -1 : 1);
}

static char *cmp_fmt_err(double e, char *buf, size_t cap)
{
    if (isnan(e))
        snprintf(buf, cap, "N/A");
    else
        snprintf(buf, cap, "%.3g", e);
    return buf;
}

/* Takes s->reason (NULL: its msp_asprintf ran out of memory), freed on failure. */
static msp_err cmp_push_suspect(msp_compare_result_t *res, size_t *cap, const msp_suspect_t *s)
{
    msp_suspect_t *nv = s->reason ? msp_grow(res->suspects, cap, res->n_suspects, sizeof *nv, 16)
                                  : NULL;
    if (!nv) {
        free(s->reason);
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory for suspects");
    }
    res->suspects = nv;
    res->suspects[res->n_suspects++] = *s;
    return MSP_OK;
}

/* The innermost module forward record of rec's step and rank that ran rec
 * (a module record) inside it, or -1. */
static long cmp_enclosing_module(const msp_compare_result_t *res, size_t r)
{
    const msp_record_cmp_t *rec = &res->records[r];
    if (strncmp(rec->name, "Module.", 7) != 0 || rec->order_begin < 0 || !cmp_is_forward(rec->name))
        return -1;
    long best = -1;
    int64_t span = INT64_MAX;
    for (size_t k = 0; k < res->n_records; k++) {
        const msp_record_cmp_t *e = &res->records[k];
        if (k == r || e->step != rec->step || e->rank != rec->rank || e->order_begin < 0 ||
            strncmp(e->name, "Module.", 7) != 0 || !cmp_is_forward(e->name))
            continue;
        if (e->order_begin <= rec->order_begin && rec->order <= e->order &&
            e->order - e->order_begin < span) {
            span = e->order - e->order_begin;
            best = (long)k;
        }
    }
    return best;
}

/* A changed or unproduced input of a module record was made by code of the
 * module around it that msprobe did not record (its own forward, between
 * its children): name that module, once. 1 when it was named so. */
static int cmp_gap_to_module(msp_compare_result_t *res, size_t *cap, size_t r, size_t ti,
                             double known, double base, msp_err *rc)
{
    long e = cmp_enclosing_module(res, r);
    if (e < 0)
        return 0;
    for (size_t i = 0; i < res->n_suspects; i++)
        if (res->suspects[i].record == e && !res->suspects[i].is_gap)
            return 1;
    const msp_record_cmp_t *rec = &res->records[r], *m = &res->records[e];
    const msp_tensor_cmp_t *t = &res->tensors[ti];
    char a[32], b[32];
    msp_suspect_t s = {e,
                       (long)ti,
                       0,
                       res->stats_mode != 0,
                       known,
                       t->rel_err,
                       known > 0.0 ? t->rel_err / known : INFINITY,
                       base > 0.0 ? t->rel_err / base : INFINITY,
                       NULL};
    s.reason = msp_asprintf("%sits own code, outside the modules it calls, made %s.%s: error %s, "
                            "above %gx anything recorded before it (%s)",
                            s.from_stats ? "statistics only: " : "", rec->name, cmp_role_of(t, rec),
                            cmp_fmt_err(t->rel_err, a, sizeof a), CMP_AMPLIFY,
                            cmp_fmt_err(known, b, sizeof b));
    (void)m;
    *rc = cmp_push_suspect(res, cap, &s);
    return 1;
}

/* An input no recorded op produced (gap 2) is judged against the worst error
 * any output recorded before it carries (seen: gradients, optimizer updates
 * and the previous step included, since an unrecorded op may combine any of
 * them) and the floor of the coarsest dtype in that step (the unrecorded
 * op's precision is unknown). */
static msp_err cmp_orphan_suspect(msp_compare_result_t *res, size_t *cap, size_t r, size_t ti,
                                  double seen, double step_floor)
{
    const msp_record_cmp_t *rec = &res->records[r];
    const msp_tensor_cmp_t *t = &res->tensors[ti];
    double base = fmax(CMP_AMPLIFY * seen, step_floor);
    if (!(t->rel_err > base))
        return MSP_OK;
    msp_err rc = MSP_OK;
    if (cmp_gap_to_module(res, cap, r, ti, seen, base, &rc))
        return rc;
    char a[32], b[32];
    msp_suspect_t s = {(long)r,
                       (long)ti,
                       1,
                       res->stats_mode != 0,
                       seen,
                       t->rel_err,
                       seen > 0.0 ? t->rel_err / seen : INFINITY,
                       base > 0.0 ? t->rel_err / base : INFINITY,
                       NULL};
    s.reason = msp_asprintf("%sno recorded op produced %s.%s: an op msprobe did not record "
                            "(a custom kernel, an in-place update, an API outside the dump's "
                            "list) made it; its error %s is above %gx anything recorded before "
                            "it (%s)",
                            s.from_stats ? "statistics only: " : "", rec->name, cmp_role_of(t, rec),
                            cmp_fmt_err(t->rel_err, a, sizeof a), CMP_AMPLIFY,
                            cmp_fmt_err(seen, b, sizeof b));
    return cmp_push_suspect(res, cap, &s);
}

/* The worst finite output error of the steps before records[r]'s, on the
 * same rank (records are sorted by step, then rank); 0 when there is none.
 * Every earlier step, not only the last: a parameter carries what any
 * earlier update put into it, and two optimizers may take turns (a GAN's
 * discriminator and generator steps). */
static double cmp_prev_step_worst(const msp_compare_result_t *res, size_t r)
{
    const msp_record_cmp_t *rec = &res->records[r];
    double worst = 0.0;
    for (size_t q = r; q-- > 0;) {
        const msp_record_cmp_t *p = &res->records[q];
        if (p->rank != rec->rank || p->step == rec->step)
            continue;
        if (!isnan(p->out_err) && !isinf(p->out_err))
            worst = fmax(worst, p->out_err);
    }
    return worst;
}

/* A NaN or Inf the compare side's output holds and the bench's does not,
 * while every input of the compare side is finite: the record made it. */
static int cmp_nan_born(const msp_compare_result_t *res, const msp_record_cmp_t *rec)
{
    int born = 0;
    if (isinf(rec->in_err)) /* a backward record: its forward's tensors count too */
        return 0;
    for (size_t k = 0; k < rec->n_tensors; k++) {
        const msp_tensor_cmp_t *t = &res->tensors[rec->first_tensor + k];
        if (!t->is_output && t->npu_nonfinite)
            return 0;
        born |= t->is_output && t->npu_nonfinite && !t->bench_nonfinite;
    }
    return born;
}

/* Evidence replay does not erase (msprobe-compare(1), ROOT CAUSE): a NaN/Inf
 * made from finite inputs, and a changed argument (not numbers computed from
 * the run's data) under an output above its floor. NULL when neither. */
static char *cmp_kept_evidence(const msp_compare_result_t *res, const msp_record_cmp_t *rec,
                               int *tier)
{
    char a[32], fl[32];
    const char *pre = res->stats_mode ? "statistics only: " : "";
    if (cmp_nan_born(res, rec)) {
        *tier = 0;
        return msp_asprintf("%sits output holds NaN/Inf where the bench's does not, from "
                            "finite inputs: it made them%s%s",
                            pre, rec->arg_diff ? "; argument " : "",
                            rec->arg_diff ? rec->arg_diff : "");
    }
    if (!rec->arg_diff || rec->args_are_data || !(rec->out_err > rec->floor))
        return NULL;
    /* replay lowers it (tier 2): behind what it or the ratios found in its step */
    int lowered = rec->replay == MSP_RV_INHERITED;
    *tier = lowered ? 2 : 0;
    return msp_asprintf("%sthe call's arguments differ (%s) and its output error %s is above "
                        "the %s floor %s%s",
                        pre, rec->arg_diff, cmp_fmt_err(rec->out_err, a, sizeof a),
                        cmp_floor_dtype(rec->floor), cmp_fmt_err(rec->floor, fl, sizeof fl),
                        lowered ? "; the replay with the bench side's arguments reproduces its "
                                  "output, so the change may not be what made it"
                                : "");
}

/* ---- parameters that differ before any op of a step (issue 38, item 4) ---- */

/* The parameter (or buffer) name of rec's input `role`, from rec->params
 * ("ROLE=NAME" lines); its length in *len; NULL when it is none. */
static const char *cmp_param_of(const msp_record_cmp_t *rec, const char *role, size_t *len)
{
    size_t rl = strlen(role);
    for (const char *p = rec->params; p && *p;) {
        const char *eq = strchr(p, '='), *nl = strchr(p, '\n');
        if (!eq || !nl)
            break;
        if (eq < nl && (size_t)(eq - p) == rl && !strncmp(p, role, rl)) {
            *len = (size_t)(nl - eq - 1);
            return eq + 1;
        }
        p = nl + 1;
    }
    return NULL;
}

/* The step before records[r]'s that res holds for its rank, -1 if none
 * (records sort by step, rank, order; a streamed part's stand-in record of
 * the previous step counts). */
static int64_t cmp_prev_step_of(const msp_compare_result_t *res, size_t r)
{
    const msp_record_cmp_t *rec = &res->records[r];
    for (size_t q = r; q-- > 0;)
        if (res->records[q].rank == rec->rank && res->records[q].step != rec->step)
            return res->records[q].step;
    return -1;
}

/* What a step's parameters are judged against: mode 0 not judged (a step
 * whose step before is not compared: its updates may explain anything),
 * 1 the rounding of their dtype (step 0: nothing ran before it), 2 also
 * CMP_AMPLIFY times the worst error of the steps before (their updates). The
 * names already used in the step: only a parameter's first use is judged. */
typedef struct cmp_param_state {
    int mode;
    double prev_worst;
    struct {
        const char *s;
        size_t n;
    } * seen;
    size_t n_seen, cap_seen;
} cmp_param_state_t;

static void cmp_param_step(cmp_param_state_t *ps, const msp_compare_result_t *res, size_t r,
                           double prev_worst)
{
    int64_t prev = cmp_prev_step_of(res, r), step = res->records[r].step;
    ps->mode = prev < 0 && step == 0 ? 1 : prev >= 0 && prev == step - 1 ? 2 : 0;
    ps->prev_worst = prev_worst;
    ps->n_seen = 0;
}

/* A parameter or buffer whose first use in its step already differs beyond
 * what the step before (or, at step 0, rounding) explains was changed before
 * any recorded op of the step read it (a checkpoint loaded differently,
 * another seed): a suspect (is_gap 2) ahead of everything it feeds. */
static msp_err cmp_param_suspects(msp_compare_result_t *res, size_t *cap, cmp_param_state_t *ps,
                                  size_t r)
{
    const msp_record_cmp_t *rec = &res->records[r];
    for (size_t k = 0; ps->mode && rec->params && k < rec->n_tensors; k++) {
        size_t ti = rec->first_tensor + k, len = 0;
        const msp_tensor_cmp_t *t = &res->tensors[ti];
        const char *role = cmp_role_of(t, rec);
        const char *name = t->is_output ? NULL : cmp_param_of(rec, role, &len);
        int used = 0;
        for (size_t i = 0; name && i < ps->n_seen && !used; i++)
            used = ps->seen[i].n == len && !strncmp(ps->seen[i].s, name, len);
        if (!name || used)
            continue;
        void *nv = msp_grow(ps->seen, &ps->cap_seen, ps->n_seen, sizeof *ps->seen, 64);
        if (!nv)
            return msp_fail(MSP_ERR_NOMEM, "compare: out of memory for suspects");
        ps->seen = nv;
        ps->seen[ps->n_seen].s = name;
        ps->seen[ps->n_seen++].n = len;
        double fl = cmp_floor_for(cmp_row_unit(t));
        double known = ps->mode == 2 ? ps->prev_worst : 0.0;
        double base = fmax(CMP_AMPLIFY * known, fl);
        if (isnan(t->rel_err) || !(t->rel_err > base))
            continue;
        char a[32], b[32], c[32];
        msp_suspect_t s = {(long)r,
                           (long)ti,
                           2,
                           res->stats_mode != 0,
                           known,
                           t->rel_err,
                           known > 0.0 ? t->rel_err / known : INFINITY,
                           base > 0.0 ? t->rel_err / base : INFINITY,
                           NULL};
        if (ps->mode == 1)
            s.reason = msp_asprintf("%sparameter %.*s differs before any op of step %lld (rank "
                                    "%lld): at its first use, %s %s, its error is %s, above the "
                                    "%s rounding floor %s; it was different before training "
                                    "(a checkpoint loaded differently, another seed or data)",
                                    s.from_stats ? "statistics only: " : "", (int)len, name,
                                    (long long)rec->step, (long long)rec->rank, rec->name, role,
                                    cmp_fmt_err(t->rel_err, a, sizeof a), cmp_floor_dtype(fl),
                                    cmp_fmt_err(fl, b, sizeof b));
        else
            s.reason = msp_asprintf("%sparameter %.*s differs before any op of step %lld (rank "
                                    "%lld): at its first use, %s %s, its error is %s, above %gx "
                                    "the worst error of the steps before (%s) and the %s floor %s: "
                                    "something outside the recorded ops changed it between the "
                                    "steps",
                                    s.from_stats ? "statistics only: " : "", (int)len, name,
                                    (long long)rec->step, (long long)rec->rank, rec->name, role,
                                    cmp_fmt_err(t->rel_err, a, sizeof a), CMP_AMPLIFY,
                                    cmp_fmt_err(known, c, sizeof c), cmp_floor_dtype(fl),
                                    cmp_fmt_err(fl, b, sizeof b));
        msp_err rc = cmp_push_suspect(res, cap, &s);
        if (rc)
            return rc;
    }
    return MSP_OK;
}

/* The reason line of a record that introduced error; its tier in *tier.
 * NULL reason with tier -1: not a suspect. */
static char *cmp_record_reason(const msp_compare_result_t *res, const msp_record_cmp_t *rec,
                               int *tier)
{
    char a[32], b[32], fl[32];
    const char *pre = res->stats_mode ? "statistics only: " : "";
    double ein = isnan(rec->in_err) ? 0.0 : rec->in_err;
    *tier = -1;
    if (rec->replay != MSP_RV_INTRODUCED && !rec->explained_by) {
        char *kept = cmp_kept_evidence(res, rec, tier);
        if (kept || *tier >= 0)
            return kept;
    }
    if (rec->replay == MSP_RV_INTRODUCED) {
        *tier = 0;
        int how = rec->replay_note && *rec->replay_note;
        return msp_asprintf("replay: its output is %s from the float64 replay of its own "
                            "compare-side inputs, above the %s that rounding in its dtype "
                            "explains%s%s%s; it introduced the error%s%s",
                            cmp_fmt_err(rec->replay_err, a, sizeof a),
                            cmp_fmt_err(rec->replay_ref, b, sizeof b), how ? " (replayed " : "",
                            how ? rec->replay_note : "", how ? ")" : "",
                            rec->arg_diff ? "; argument " : "", rec->arg_diff ? rec->arg_diff : "");
    }
    if (rec->replay == MSP_RV_INHERITED || rec->explained_by)
        return NULL;
    /* An optimizer's update can normalise each element by its gradient's size
     * (Adam): its output error is no multiple of its inputs'. Replay or a
     * changed hyperparameter decides it, ratios never. */
    if (rec->cause != MSP_CAUSE_INTRODUCED || cmp_is_optimizer(rec))
        return NULL;
    /* identical inputs and a different output decide as much as replay does
     * (not for a module, whose parameters are inputs it does not show) */
    *tier = !isnan(rec->in_err) && !(rec->in_err > 0.0) && strncmp(rec->name, "Module.", 7) ? 0 : 1;
    char note[300] = "";
    if (rec->replay == MSP_RV_SKIPPED || rec->replay == MSP_RV_UNFINISHED)
        snprintf(note, sizeof note, " (not replayed: %s)",
                 rec->replay_note ? rec->replay_note : "?");
    if (ein > 0.0)
        return msp_asprintf("%soutput error %s is %.3gx its worst input's %s, above the %s "
                            "floor %s%s",
                            pre, cmp_fmt_err(rec->out_err, a, sizeof a), rec->out_err / ein,
                            cmp_fmt_err(ein, b, sizeof b), cmp_floor_dtype(rec->floor),
                            cmp_fmt_err(rec->floor, fl, sizeof fl), note);
    if (isnan(rec->in_err))
        return msp_asprintf("%sno comparable input; output error %s is above the %s floor %s%s",
                            pre, cmp_fmt_err(rec->out_err, a, sizeof a),
                            cmp_floor_dtype(rec->floor), cmp_fmt_err(rec->floor, fl, sizeof fl),
                            note);
    return msp_asprintf("%sinputs identical on both sides; output error %s is above the %s "
                        "floor %s%s",
                        pre, cmp_fmt_err(rec->out_err, a, sizeof a), cmp_floor_dtype(rec->floor),
                        cmp_fmt_err(rec->floor, fl, sizeof fl), note);
}

/* The gap suspects of one record's inputs: an input that differs from its
 * own producer's output on the same side (gap 1), changed by something
 * msprobe did not record, is a suspect only when its error is above
 * CMP_AMPLIFY times both its producer's and anything recorded before it. */
static msp_err cmp_gap_suspects(msp_compare_result_t *res, const cmp_rec_index_t *ix, size_t *cap,
                                size_t r, double seen, double step_floor, int params_judged)
{
    const msp_record_cmp_t *rec = &res->records[r];
    char a[32], b[32];
    for (size_t k = 0; k < rec->n_tensors; k++) {
        size_t ti = rec->first_tensor + k;
        const msp_tensor_cmp_t *t = &res->tensors[ti];
        if (t->is_output || !t->gap || isnan(t->rel_err))
            continue;
        size_t pl;
        const char *role = cmp_role_of(t, rec);
        /* a parameter: cmp_param_suspects judged it; a module's own one (a
         * step whose step before is not compared) no code of it made */
        if ((params_judged || !strncmp(role, "parameters.", 11)) && cmp_param_of(rec, role, &pl))
            continue;
        msp_err rc = MSP_OK;
        if (t->gap == 2) {
            rc = cmp_orphan_suspect(res, cap, r, ti, seen, step_floor);
        } else {
            long pr = t->producer ? cmp_find_producer_row(res, ix, rec, t->producer) : -1;
            double ein = pr >= 0 ? res->tensors[pr].rel_err : NAN;
            double known = fmax(isnan(ein) ? 0.0 : ein, seen);
            double fl = cmp_floor_for(cmp_row_unit(t));
            double base = fmax(CMP_AMPLIFY * known, fl);
            if (!(t->rel_err > base))
                continue;
            if (cmp_gap_to_module(res, cap, r, ti, known, base, &rc)) {
                if (rc)
                    return rc;
                continue;
            }
            msp_suspect_t s = {(long)r,
                               (long)ti,
                               1,
                               res->stats_mode != 0,
                               ein,
                               t->rel_err,
                               isnan(ein) || ein <= 0.0 ? INFINITY : t->rel_err / ein,
                               base > 0.0 ? t->rel_err / base : INFINITY,
                               NULL};
            s.reason = msp_asprintf("%sgap between %s and %s.%s: the input differs from its "
                                    "producer's output on the same side, so something msprobe "
                                    "did not record (an un-wrapped op, an in-place update, a "
                                    "custom kernel) changed it; error %s -> %s, above %gx "
                                    "anything recorded before it",
                                    s.from_stats ? "statistics only: " : "", t->producer, rec->name,
                                    cmp_role_of(t, rec), cmp_fmt_err(ein, a, sizeof a),
                                    cmp_fmt_err(t->rel_err, b, sizeof b), CMP_AMPLIFY);
            rc = cmp_push_suspect(res, cap, &s);
        }
        if (rc)
            return rc;
    }
    return MSP_OK;
}

/* After a NaN/Inf root, what it reaches: a gap whose error is itself
 * non-finite on the same rank (an input no recorded op produced, a value
 * changed between records) is the root's NaN arriving by a path msprobe did
 * not record, not a cause of its own: dropped, so the suspects after a NaN
 * root are the records it reaches, in order, or nothing. */
void cmp_drop_nan_echoes(msp_compare_result_t *res)
{
    size_t keep = 0;
    for (size_t i = 0; i < res->n_suspects; i++) {
        msp_suspect_t *s = &res->suspects[i];
        int echo = 0;
        if (s->is_gap && !isfinite(s->out_err)) {
            const msp_record_cmp_t *r = &res->records[s->record];
            for (size_t j = 0; j < keep && !echo; j++) {
                const msp_suspect_t *p = &res->suspects[j];
                const msp_record_cmp_t *q = &res->records[p->record];
                echo = !p->is_gap && !isfinite(p->out_err) && q->rank == r->rank &&
                       q->step <= r->step;
            }
        }
        if (echo)
            free(s->reason);
        else
            res->suspects[keep++] = *s;
    }
    res->n_suspects = keep;
}

/* One verdict everywhere: the Error Origin of a record is "introduced"
 * exactly when stdout names it as a suspect (not as a gap's consumer); a
 * record the ratios called introduced that replay, a module's children or
 * the optimizer rule cleared is "inherited", as the suspects say. */
static void cmp_origin_from_suspects(msp_compare_result_t *res)
{
    for (size_t r = 0; r < res->n_records; r++)
        if (res->records[r].cause == MSP_CAUSE_INTRODUCED)
            res->records[r].cause = MSP_CAUSE_INHERITED;
    for (size_t i = 0; i < res->n_suspects; i++)
        if (!res->suspects[i].is_gap)
            res->records[res->suspects[i].record].cause = MSP_CAUSE_INTRODUCED;
}

msp_err cmp_rank_suspects(msp_compare_result_t *res, int top)
{
    size_t cap = 0;
    double seen = 0.0, step_floor = 0.0;
    cmp_rec_index_t ix = {0};
    msp_err rc = cmp_index_build(res, &ix);
    int *tiers = NULL;
    size_t tcap = 0;
    cmp_param_state_t ps = {0};
    for (size_t r = 0; r < res->n_records && !rc; r++) {
        msp_record_cmp_t *rec = &res->records[r];
        rec->suspect_rank = 0;
        rec->is_root_cause = 0;
        rec->tier = -1;
        if (r == 0 || rec->step != rec[-1].step || rec->rank != rec[-1].rank) {
            /* parameters and optimizer state have no producer in a step and
             * carry what the earlier steps' gradients put into them: start
             * from the worst error of the earlier steps of this rank */
            seen = cmp_prev_step_worst(res, r);
            step_floor = 0.0;
            for (size_t q = r; q < res->n_records && res->records[q].step == rec->step &&
                               res->records[q].rank == rec->rank;
                 q++)
                step_floor = fmax(step_floor, res->records[q].floor);
            cmp_param_step(&ps, res, r, seen);
        }
        size_t before = res->n_suspects;
        if ((rc = cmp_param_suspects(res, &cap, &ps, r)))
            break;
        size_t params_end = res->n_suspects;
        if ((rc = cmp_gap_suspects(res, &ix, &cap, r, seen, step_floor, ps.mode != 0)))
            break;
        size_t gaps_end = res->n_suspects;
        int tier = -1;
        char *reason = cmp_record_reason(res, rec, &tier);
        if (reason) {
            long worst = cmp_worst_output(res, rec);
            double ein = isnan(rec->in_err) ? 0.0 : rec->in_err;
            msp_suspect_t s = {(long)r,
                               worst,
                               0,
                               res->stats_mode != 0,
                               rec->in_err,
                               rec->out_err,
                               ein > 0.0 ? rec->out_err / ein : INFINITY,
                               rec->score,
                               reason};
            rec->tier = tier;
            rc = cmp_push_suspect(res, &cap, &s);
        }
        int *nt = rc ? NULL : msp_grow(tiers, &tcap, res->n_suspects, sizeof *tiers, 16);
        if (!rc && !nt)
            rc = msp_fail(MSP_ERR_NOMEM, "compare: out of memory for suspects");
        if (rc)
            break;
        tiers = nt;
        for (size_t i = before; i < res->n_suspects; i++)
            /* a parameter is the earliest cause; gaps come from ratios alone */
            tiers[i] = i < params_end ? 0 : i < gaps_end ? 1 : tier;
        if (!isnan(rec->out_err) && !isinf(rec->out_err))
            seen = fmax(seen, rec->out_err);
    }
    if (!rc && res->n_suspects > 1) {
        cmp_ranked_t *v = calloc(res->n_suspects, sizeof *v);
        if (!v) {
            rc = msp_fail(MSP_ERR_NOMEM, "compare: out of memory for suspects");
        } else {
            for (size_t i = 0; i < res->n_suspects; i++)
                v[i] = (cmp_ranked_t){&res->records[res->suspects[i].record], res->suspects[i],
                                      tiers[i]};
            qsort(v, res->n_suspects, sizeof *v, cmp_suspect_order);
            for (size_t i = 0; i < res->n_suspects; i++)
                res->suspects[i] = v[i].s;
            free(v);
        }
    }
    free(tiers);
    free(ps.seen);
    cmp_index_free(&ix);
    if (rc)
        return rc;
    cmp_drop_nan_echoes(res);
    cmp_origin_from_suspects(res);
    for (size_t i = 0; i < res->n_suspects && (top <= 0 || i < (size_t)top); i++) {
        msp_record_cmp_t *rec = &res->records[res->suspects[i].record];
        if (!rec->suspect_rank)
            rec->suspect_rank = (int)i + 1;
    }
    if (res->n_suspects) {
        res->root_record = res->suspects[0].record;
        res->root_tensor = res->suspects[0].tensor;
        res->records[res->root_record].is_root_cause = 1;
    }
    return MSP_OK;
}
