/* Suspects, ranked (src/compare/cmp_suspects.c, cmp_rank_suspects) on a
 * result built in memory whose records carry replay verdicts, changed
 * arguments, ratio causes, producer gaps and parameters. The order is
 * msprobe-compare(1)'s Ranking: earliest step, then decisive evidence
 * (parameters, replay, a changed argument) before error ratios, then
 * execution order, then rank; the reason lines must carry the facts the
 * man page names, the numbers written by hand. */
#include "cmp_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "unit_check.h"

#define ABOVE(x) ((x) * (1.0 + 1e-9))
#define BELOW(x) ((x) * (1.0 - 1e-9))
#define FP32 "torch.float32"

typedef struct sbuild {
    msp_record_cmp_t rec[16];
    msp_tensor_cmp_t ten[48];
    char names[48][96];
    msp_compare_result_t res;
} sbuild_t;

static void sb_init(sbuild_t *b)
{
    memset(b, 0, sizeof *b);
    b->res.records = b->rec;
    b->res.tensors = b->ten;
    b->res.root_record = b->res.root_tensor = b->res.first_rank = -1;
}

/* A new record (records go in step, rank, order order); rows follow. */
static msp_record_cmp_t *sb_rec(sbuild_t *b, const char *name, int64_t step, int64_t rank,
                                int64_t order)
{
    msp_record_cmp_t *r = &b->rec[b->res.n_records++];
    r->name = (char *)name;
    r->step = step;
    r->rank = rank;
    r->order = order;
    r->order_begin = -1;
    r->first_tensor = b->res.n_tensors;
    return r;
}

/* A float32 row of the last record, named RECORD.ROLE on both sides. */
static msp_tensor_cmp_t *sb_row(sbuild_t *b, const char *role, double rel)
{
    size_t i = b->res.n_tensors++;
    msp_record_cmp_t *r = &b->rec[b->res.n_records - 1];
    msp_tensor_cmp_t *t = &b->ten[i];
    snprintf(b->names[i], sizeof b->names[i], "%s.%s", r->name, role);
    t->npu_name = t->bench_name = b->names[i];
    t->is_output = strncmp(role, "output", 6) == 0;
    snprintf(t->npu_dtype, sizeof t->npu_dtype, FP32);
    snprintf(t->bench_dtype, sizeof t->bench_dtype, FP32);
    t->cosine = 1.0;
    t->max_diff = NAN;
    t->rel_err = rel;
    r->n_tensors++;
    return t;
}

/* The last record judged on its rows (msprobe-compare(1), Error of an op). */
static msp_record_cmp_t *sb_done(sbuild_t *b)
{
    msp_record_cmp_t *r = &b->rec[b->res.n_records - 1];
    cmp_record_finish(r, b->res.tensors);
    return r;
}

/* A record of one input and one output. */
static msp_record_cmp_t *sb_add(sbuild_t *b, const char *name, int64_t step, int64_t rank,
                                int64_t order, double ein, double eout)
{
    sb_rec(b, name, step, rank, order);
    sb_row(b, "input.0", ein);
    sb_row(b, "output.0", eout);
    return sb_done(b);
}

static void sb_free(sbuild_t *b)
{
    for (size_t i = 0; i < b->res.n_suspects; i++)
        free(b->res.suspects[i].reason);
    free(b->res.suspects);
}

static long sb_index(const sbuild_t *b, const msp_record_cmp_t *r)
{
    return (long)(r - b->rec);
}

/* Replay, a changed argument and ratios across two ranks and two steps. */
static void test_order(void)
{
    sbuild_t b;
    sb_init(&b);
    msp_record_cmp_t *ratio0 = sb_add(&b, "Functional.linear.0.forward", 0, 0, 0, 1e-6, 0.01);
    msp_record_cmp_t *arg = sb_add(&b, "Functional.gelu.0.forward", 0, 0, 1, 0.01, 0.05);
    arg->arg_diff = "kwarg.approximate: NPU 'tanh', bench 'none' (default)";
    msp_record_cmp_t *rp0 = sb_add(&b, "Functional.matmul.0.forward", 0, 0, 2, 0.05, 0.1);
    rp0->replay = MSP_RV_INTRODUCED;
    rp0->replay_err = 0.1;
    rp0->replay_ref = 0.001;
    rp0->replay_note = "float64 and torch.float32";
    msp_record_cmp_t *ratio1 = sb_add(&b, "Functional.linear.0.forward", 0, 1, 0, 1e-6, 0.01);
    msp_record_cmp_t *rp1b = sb_add(&b, "Functional.bmm.0.forward", 0, 1, 1, 0.05, 0.1);
    rp1b->replay = MSP_RV_INTRODUCED;
    msp_record_cmp_t *rp1 = sb_add(&b, "Functional.matmul.0.forward", 0, 1, 2, 0.05, 0.1);
    rp1->replay = MSP_RV_INTRODUCED;
    msp_record_cmp_t *next = sb_add(&b, "Functional.linear.0.forward", 1, 0, 0, 0.05, 0.1);
    next->replay = MSP_RV_INTRODUCED;
    CHECK_INT(arg->cause, MSP_CAUSE_INHERITED); /* by ratio: 0.05 <= 8 x 0.01 */
    CHECK_INT(rp0->cause, MSP_CAUSE_INHERITED);

    CHECK_INT(cmp_rank_suspects(&b.res, 3), MSP_OK);
    /* step 0: decisive first (argument #1 rank 0, replay #1 rank 1, replay
     * #2 rank 0, #2 rank 1: execution order, then rank), then ratios (#0
     * rank 0, #0 rank 1); then step 1 */
    const msp_record_cmp_t *want[] = {arg, rp1b, rp0, rp1, ratio0, ratio1, next};
    CHECK_INT(b.res.n_suspects, 7);
    for (size_t i = 0; i < 7 && i < b.res.n_suspects; i++) {
        CHECK_INT(b.res.suspects[i].record, sb_index(&b, want[i]));
        CHECK_INT(b.res.suspects[i].is_gap, 0);
        CHECK_INT(b.res.records[b.res.suspects[i].record].cause, MSP_CAUSE_INTRODUCED);
    }
    /* the first --top 3 are marked; the first is the root cause */
    CHECK_INT(arg->suspect_rank, 1);
    CHECK_INT(rp1b->suspect_rank, 2);
    CHECK_INT(rp0->suspect_rank, 3);
    CHECK_INT(rp1->suspect_rank, 0);
    CHECK_INT(ratio0->suspect_rank, 0);
    CHECK_INT(next->suspect_rank, 0);
    CHECK_INT(b.res.root_record, sb_index(&b, arg));
    CHECK_INT(b.res.root_tensor, (long)arg->first_tensor + 1); /* its output */
    CHECK_INT(arg->is_root_cause, 1);
    CHECK_INT(rp0->is_root_cause, 0);
    /* what each line says */
    const msp_suspect_t *s = b.res.suspects;
    CHECK_HAS(s[0].reason, "the call's arguments differ (kwarg.approximate: NPU 'tanh', bench "
                           "'none' (default))");
    CHECK_HAS(s[0].reason, "output error 0.05 is above the float32 floor 1.05e-05");
    CHECK_HAS(s[2].reason, "replay: its output is 0.1 from the float64 replay");
    CHECK_HAS(s[2].reason, "above the 0.001 that rounding in its dtype explains");
    CHECK_HAS(s[2].reason, "replayed float64 and torch.float32");
    /* 0.01 / 1e-6 = 1e4 */
    CHECK_HAS(s[4].reason, "output error 0.01 is 1e+04x its worst input's 1e-06, above the "
                           "float32 floor 1.05e-05");
    CHECK_NUM(s[4].in_err, 1e-6);
    CHECK_NUM(s[4].out_err, 0.01);
    CHECK_NEAR(s[4].amplification, 1e4, 1e-12);
    CHECK_INT(s[4].tensor, (long)ratio0->first_tensor + 1);
    CHECK_INT(s[4].from_stats, 0);
    sb_free(&b);

    /* top <= 0 marks every suspect */
    sb_init(&b);
    msp_record_cmp_t *a = sb_add(&b, "Functional.linear.0.forward", 0, 0, 0, 1e-6, 0.01);
    msp_record_cmp_t *c = sb_add(&b, "Functional.linear.1.forward", 0, 0, 1, 1e-6, 0.01);
    CHECK_INT(cmp_rank_suspects(&b.res, 0), MSP_OK);
    CHECK_INT(a->suspect_rank, 1);
    CHECK_INT(c->suspect_rank, 2);
    sb_free(&b);
}

/* What ratios alone do not decide, and evidence replay does not erase. */
static void test_not_suspects(void)
{
    sbuild_t b;
    sb_init(&b);
    /* an optimizer: ratios never decide it; a changed hyperparameter does */
    msp_record_cmp_t *opt = sb_add(&b, "Optimizer.Adam.0.step", 0, 0, 0, 1e-6, 0.5);
    msp_record_cmp_t *lr = sb_add(&b, "Optimizer.SGD.0.step", 0, 0, 1, 1e-6, 0.5);
    lr->arg_diff = "lr: NPU 0.002, bench 0.001";
    /* replay clears what ratios call introduced */
    msp_record_cmp_t *cleared = sb_add(&b, "Functional.linear.0.forward", 0, 0, 2, 1e-6, 0.5);
    cleared->replay = MSP_RV_INHERITED;
    /* a module something inside explains */
    msp_record_cmp_t *mod = sb_add(&b, "Module.fc.Linear.forward.0", 0, 0, 3, 1e-6, 0.5);
    mod->explained_by = 1;
    /* a changed argument under an output within its floor */
    msp_record_cmp_t *quiet = sb_add(&b, "Functional.gelu.0.forward", 0, 0, 4, 0.0, 1e-6);
    quiet->arg_diff = "kwarg.approximate: NPU 'tanh', bench 'none'";
    /* numbers computed from the data, inherited by ratio */
    sb_rec(&b, "Torch.clamp.0.forward", 0, 0, 5);
    b.rec[5].arg_diff = "kwarg.min: NPU 0.5, bench 0.5005";
    b.rec[5].arg_reldiff = 1e-3;
    sb_row(&b, "input.0", 2e-3);
    sb_row(&b, "output.0", 5e-3);
    msp_record_cmp_t *data = sb_done(&b);
    CHECK_INT(data->args_are_data, 1);
    CHECK_INT(opt->cause, MSP_CAUSE_INTRODUCED);
    CHECK_INT(cleared->cause, MSP_CAUSE_INTRODUCED);

    CHECK_INT(cmp_rank_suspects(&b.res, 5), MSP_OK);
    CHECK_INT(b.res.n_suspects, 1);
    if (b.res.n_suspects) {
        CHECK_INT(b.res.suspects[0].record, sb_index(&b, lr));
        CHECK_HAS(b.res.suspects[0].reason, "the call's arguments differ (lr: NPU 0.002, "
                                            "bench 0.001)");
    }
    /* one verdict everywhere: what is not a suspect is not introduced */
    CHECK_INT(opt->cause, MSP_CAUSE_INHERITED);
    CHECK_INT(cleared->cause, MSP_CAUSE_INHERITED);
    CHECK_INT(mod->cause, MSP_CAUSE_INHERITED);
    CHECK_INT(quiet->cause, MSP_CAUSE_NONE);
    CHECK_INT(data->cause, MSP_CAUSE_INHERITED);
    CHECK_INT(lr->cause, MSP_CAUSE_INTRODUCED);
    sb_free(&b);

    /* a changed argument replay did not confirm (compare.h, tier 2) goes
     * behind the ratio suspects of its step, its reason saying so */
    sb_init(&b);
    msp_record_cmp_t *lowered = sb_add(&b, "Functional.gelu.0.forward", 0, 0, 0, 0.01, 0.05);
    lowered->arg_diff = "kwarg.approximate: NPU 'tanh', bench 'none'";
    lowered->replay = MSP_RV_INHERITED;
    msp_record_cmp_t *ratio = sb_add(&b, "Functional.linear.0.forward", 0, 0, 1, 1e-6, 0.01);
    CHECK_INT(cmp_rank_suspects(&b.res, 5), MSP_OK);
    CHECK_INT(b.res.n_suspects, 2);
    if (b.res.n_suspects == 2) {
        CHECK_INT(b.res.suspects[0].record, sb_index(&b, ratio));
        CHECK_INT(b.res.suspects[1].record, sb_index(&b, lowered));
        CHECK_HAS(b.res.suspects[1].reason, "the replay with the bench side's arguments "
                                            "reproduces its output");
    }
    sb_free(&b);
}

/* The three ratio reasons (msprobe-compare(1), EXAMPLES and Ranking). */
static void test_ratio_reasons(void)
{
    sbuild_t b;
    sb_init(&b);
    msp_record_cmp_t *nan_in = sb_add(&b, "Functional.linear.0.forward", 0, 0, 0, NAN, 0.01);
    sb_add(&b, "Functional.linear.1.forward", 0, 0, 1, 1e-6, 0.01);
    msp_record_cmp_t *same = sb_add(&b, "Functional.linear.2.forward", 0, 0, 2, 0.0, 0.895);
    CHECK_INT(cmp_rank_suspects(&b.res, 5), MSP_OK);
    CHECK_INT(b.res.n_suspects, 3);
    if (b.res.n_suspects == 3) {
        /* identical inputs are decisive on their own (RANKS: "its own inputs
         * identical, its output different"): ahead of the ratios */
        CHECK_INT(b.res.suspects[0].record, sb_index(&b, same));
        CHECK_HAS(b.res.suspects[0].reason, "inputs identical on both sides; output error "
                                            "0.895 is above the float32 floor 1.05e-05");
        CHECK_NUM(b.res.suspects[0].amplification, INFINITY);
        CHECK_INT(b.res.suspects[1].record, sb_index(&b, nan_in));
        CHECK_HAS(b.res.suspects[1].reason, "no comparable input; output error 0.01 is above "
                                            "the float32 floor 1.05e-05");
    }
    sb_free(&b);

    /* statistics dumps: every suspect says so */
    sb_init(&b);
    b.res.stats_mode = 1;
    sb_add(&b, "Functional.linear.0.forward", 0, 0, 0, 1e-6, 0.01);
    CHECK_INT(cmp_rank_suspects(&b.res, 5), MSP_OK);
    CHECK_INT(b.res.n_suspects, 1);
    if (b.res.n_suspects) {
        CHECK_INT(b.res.suspects[0].from_stats, 1);
        CHECK(strncmp(b.res.suspects[0].reason, "statistics only: ", 17) == 0);
    }
    sb_free(&b);
}

/* A gap of producer error p and input error e, with worst earlier output
 * error seen (msprobe-compare(1), Producer gaps). */
static size_t gap_suspects(double seen, double p, double e, sbuild_t *b)
{
    sb_init(b);
    sb_add(b, "Functional.mul.0.forward", 0, 0, 0, seen, seen);
    sb_add(b, "Functional.linear.0.forward", 0, 0, 1, p, p);
    sb_rec(b, "Functional.relu.0.forward", 0, 0, 2);
    msp_tensor_cmp_t *in = sb_row(b, "input.0", e);
    in->gap = 1;
    in->producer = "Functional.linear.0.forward/output.0";
    sb_row(b, "output.0", e);
    sb_done(b);
    CHECK_INT(cmp_rank_suspects(&b->res, 5), MSP_OK);
    return b->res.n_suspects;
}

static void test_gaps(void)
{
    sbuild_t b;
    /* 8 x max(p = 1e-3, seen = 1e-4) = 8e-3 */
    CHECK_INT(gap_suspects(1e-4, 1e-3, ABOVE(8e-3), &b), 1);
    if (b.res.n_suspects) {
        const msp_suspect_t *s = &b.res.suspects[0];
        CHECK_INT(s->record, 2);
        CHECK_INT(s->tensor, 4); /* the consumer's input row */
        CHECK_INT(s->is_gap, 1);
        CHECK_NUM(s->in_err, 1e-3);
        CHECK_NEAR(s->amplification, 8.0, 1e-8);
        CHECK_HAS(s->reason, "gap between Functional.linear.0.forward/output.0 and "
                             "Functional.relu.0.forward.input.0");
        CHECK_HAS(s->reason, "error 0.001 -> 0.008");
        CHECK_INT(b.rec[2].cause, MSP_CAUSE_INHERITED); /* the consumer only inherits */
        CHECK_INT(b.res.root_record, 2);
        CHECK_INT(b.res.root_tensor, 4);
    }
    sb_free(&b);
    CHECK_INT(gap_suspects(1e-4, 1e-3, BELOW(8e-3), &b), 0);
    sb_free(&b);
    /* the worst output before it counts too: 8 x max(1e-4, 1e-3) */
    CHECK_INT(gap_suspects(1e-3, 1e-4, BELOW(8e-3), &b), 0);
    sb_free(&b);
    CHECK_INT(gap_suspects(1e-3, 1e-4, ABOVE(8e-3), &b), 1);
    sb_free(&b);
    /* and the floor of its dtype */
    CHECK_INT(gap_suspects(0.0, 0.0, BELOW(1.0476837158203125e-05), &b), 0);
    sb_free(&b);

    /* an input no recorded op produced: 8 x the worst output before it */
    sb_init(&b);
    sb_add(&b, "Functional.linear.0.forward", 0, 0, 0, 1e-3, 1e-3);
    sb_rec(&b, "Functional.add.0.forward", 0, 0, 1);
    sb_row(&b, "input.0", 1e-3)->producer = "Functional.linear.0.forward/output.0";
    sb_row(&b, "input.1", ABOVE(8e-3))->gap = 2;
    sb_row(&b, "output.0", 8e-3);
    sb_done(&b);
    CHECK_INT(cmp_rank_suspects(&b.res, 5), MSP_OK);
    CHECK_INT(b.res.n_suspects, 1);
    if (b.res.n_suspects) {
        CHECK_INT(b.res.suspects[0].tensor, 3);
        CHECK_HAS(b.res.suspects[0].reason, "no recorded op produced Functional.add.0.forward."
                                            "input.1");
    }
    sb_free(&b);
    sb_init(&b);
    sb_add(&b, "Functional.linear.0.forward", 0, 0, 0, 1e-3, 1e-3);
    sb_rec(&b, "Functional.add.0.forward", 0, 0, 1);
    sb_row(&b, "input.0", BELOW(8e-3))->gap = 2;
    sb_row(&b, "output.0", 8e-3);
    sb_done(&b);
    CHECK_INT(cmp_rank_suspects(&b.res, 5), MSP_OK);
    CHECK_INT(b.res.n_suspects, 0);
    sb_free(&b);
}

/* A parameter's first use in a step (msprobe-compare(1), Parameters before
 * any op): above its floor at step 0; above 8 x the worst error of the
 * steps before when the step before is compared; judged as an input no
 * recorded op produced when it is not. */
static void test_params(void)
{
    sbuild_t b;
    sb_init(&b);
    sb_rec(&b, "Functional.linear.0.forward", 0, 0, 0)->params = "input.1=fc1.weight\n";
    sb_row(&b, "input.0", 0.0);
    sb_row(&b, "input.1", 0.01);
    sb_row(&b, "output.0", 0.01);
    msp_record_cmp_t *first = sb_done(&b);
    sb_rec(&b, "Functional.linear.1.forward", 0, 0, 1)->params = "input.1=fc1.weight\n";
    sb_row(&b, "input.0", 0.0);
    sb_row(&b, "input.1", 0.01);
    sb_row(&b, "output.0", 0.01);
    sb_done(&b);
    CHECK_INT(cmp_rank_suspects(&b.res, 5), MSP_OK);
    CHECK_INT(b.res.n_suspects, 1); /* its later use is not judged again */
    if (b.res.n_suspects) {
        const msp_suspect_t *s = &b.res.suspects[0];
        CHECK_INT(s->record, 0);
        CHECK_INT(s->tensor, 1);
        CHECK_INT(s->is_gap, 2);
        CHECK_HAS(s->reason, "parameter fc1.weight differs before any op of step 0 (rank 0)");
        CHECK_HAS(s->reason, "Functional.linear.0.forward input.1, its error is 0.01, above the "
                             "float32 rounding floor 1.05e-05");
        CHECK_INT(first->cause, MSP_CAUSE_INHERITED);
    }
    sb_free(&b);

    /* step 1, step 0 compared: 8 x 1e-3, the worst error of step 0 */
    static const struct {
        int64_t step;
        double e;
        int gap;
        const char *says; /* NULL: no suspect */
    } cases[] = {
        {1, ABOVE(8e-3), 0, "above 8x the worst error of the steps before (0.001)"},
        {1, BELOW(8e-3), 0, NULL},
        /* step 2 after step 0: the step before is not compared */
        {2, 0.01, 0, NULL},
        {2, 0.01, 2, "no recorded op produced Functional.linear.0.forward.input.1"},
        {2, BELOW(8e-3), 2, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sb_init(&b);
        sb_add(&b, "Functional.linear.0.forward", 0, 0, 0, 1e-3, 1e-3);
        sb_rec(&b, "Functional.linear.0.forward", cases[i].step, 0, 0)->params =
            "input.1=fc1.weight\n";
        sb_row(&b, "input.0", 0.0);
        sb_row(&b, "input.1", cases[i].e)->gap = cases[i].gap;
        sb_row(&b, "output.0", cases[i].e);
        sb_done(&b);
        CHECK_INT(cmp_rank_suspects(&b.res, 5), MSP_OK);
        CHECK_INT(b.res.n_suspects, cases[i].says ? 1 : 0);
        if (cases[i].says && b.res.n_suspects)
            CHECK_HAS(b.res.suspects[0].reason, cases[i].says);
        sb_free(&b);
    }

    /* ahead of the ratio suspects of its step, and of its own record */
    sb_init(&b);
    msp_record_cmp_t *ratio = sb_add(&b, "Functional.conv2d.0.forward", 0, 0, 0, 1e-6, 0.01);
    sb_rec(&b, "Functional.linear.0.forward", 0, 0, 1)->params = "input.1=fc1.weight\n";
    sb_row(&b, "input.0", 0.0);
    sb_row(&b, "input.1", 0.01);
    sb_row(&b, "output.0", 1.0);
    msp_record_cmp_t *own = sb_done(&b);
    own->replay = MSP_RV_INTRODUCED;
    CHECK_INT(cmp_rank_suspects(&b.res, 5), MSP_OK);
    CHECK_INT(b.res.n_suspects, 3);
    if (b.res.n_suspects == 3) {
        CHECK_INT(b.res.suspects[0].is_gap, 2);
        CHECK_INT(b.res.suspects[1].record, sb_index(&b, own));
        CHECK_INT(b.res.suspects[1].is_gap, 0);
        CHECK_INT(b.res.suspects[2].record, sb_index(&b, ratio));
    }
    sb_free(&b);
}

/* A NaN made from finite inputs is decisive (compare.h, tier 0) and stays
 * so whatever replay says; the NaN it hands on to an input no recorded op
 * produced is no cause of its own (cmp_internal.h, cmp_drop_nan_echoes). */
static void test_nan(void)
{
    sbuild_t b;
    sb_init(&b);
    msp_record_cmp_t *ratio = sb_add(&b, "Functional.linear.0.forward", 0, 0, 0, 1e-6, 0.01);
    sb_rec(&b, "Functional.log.0.forward", 0, 0, 1);
    sb_row(&b, "input.0", 0.01);
    sb_row(&b, "output.0", INFINITY)->npu_nonfinite = 1;
    msp_record_cmp_t *born = sb_done(&b);
    born->replay = MSP_RV_INHERITED;
    sb_rec(&b, "Functional.add.0.forward", 0, 0, 2);
    sb_row(&b, "input.0", INFINITY)->gap = 2;
    b.ten[b.res.n_tensors - 1].npu_nonfinite = 1;
    sb_row(&b, "output.0", INFINITY)->npu_nonfinite = 1;
    sb_done(&b);
    CHECK_INT(born->cause, MSP_CAUSE_INTRODUCED); /* by ratio, which replay cleared */
    CHECK_INT(cmp_rank_suspects(&b.res, 5), MSP_OK);
    CHECK_INT(b.res.n_suspects, 2);
    if (b.res.n_suspects == 2) {
        CHECK_INT(b.res.suspects[0].record, sb_index(&b, born));
        CHECK_HAS(b.res.suspects[0].reason, "its output holds NaN/Inf where the bench's does "
                                            "not, from finite inputs");
        CHECK_INT(b.res.suspects[1].record, sb_index(&b, ratio));
    }
    /* the bench side's NaN too: not made by the compare side */
    sb_free(&b);
    sb_init(&b);
    sb_rec(&b, "Functional.log.0.forward", 0, 0, 0);
    sb_row(&b, "input.0", 0.0);
    msp_tensor_cmp_t *o = sb_row(&b, "output.0", 0.0);
    o->npu_nonfinite = o->bench_nonfinite = 1;
    sb_done(&b);
    CHECK_INT(cmp_rank_suspects(&b.res, 5), MSP_OK);
    CHECK_INT(b.res.n_suspects, 0);
    sb_free(&b);
}

int main(void)
{
    test_order();
    test_not_suspects();
    test_ratio_reasons();
    test_gaps();
    test_params();
    test_nan();
    return unit_done("suspects");
}
