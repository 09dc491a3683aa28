/* Error origin across records, called directly on a result built in memory
 * (src/compare/cmp_verdict.c): a backward record counts its forward's error
 * as an input, a module record the error the last optimizer step wrote into
 * its parameters, and a module is judged by the records that ran inside it.
 * Wanted values from msprobe-compare(1), ROOT CAUSE (Error of an op,
 * Optimizer steps, Modules), worked out by hand. */
#include "cmp_internal.h"

#include <math.h>
#include <string.h>

#include "unit_check.h"

#define FLOOR_BF16 0.03126 /* 8 x 2^-8 + 1e-5 */
#define ABOVE(x) ((x) * (1.0 + 1e-9))
#define BELOW(x) ((x) * (1.0 - 1e-9))

/* A result of up to 16 records of two rows each (input.0, output.0). */
typedef struct build {
    msp_record_cmp_t rec[16];
    msp_tensor_cmp_t ten[32];
    msp_compare_result_t res;
} build_t;

static void build_init(build_t *b)
{
    memset(b, 0, sizeof *b);
    b->res.records = b->rec;
    b->res.tensors = b->ten;
    b->res.root_record = b->res.root_tensor = b->res.first_rank = -1;
}

static void set_row(msp_tensor_cmp_t *t, const char *role, const char *dtype, double rel)
{
    memset(t, 0, sizeof *t);
    t->is_output = strncmp(role, "output", 6) == 0;
    snprintf(t->npu_dtype, sizeof t->npu_dtype, "%s", dtype);
    snprintf(t->bench_dtype, sizeof t->bench_dtype, "%s", dtype);
    t->cosine = 1.0;
    t->max_diff = NAN;
    t->rel_err = rel;
}

/* Append a record (records go in step, rank, order order) judged on its
 * own rows; order_begin -1 (not a module span). */
static msp_record_cmp_t *add(build_t *b, const char *name, int64_t step, int64_t rank,
                             int64_t order, const char *dtype, double ein, double eout)
{
    msp_compare_result_t *res = &b->res;
    msp_record_cmp_t *r = &b->rec[res->n_records++];
    memset(r, 0, sizeof *r);
    r->name = (char *)name;
    r->step = step;
    r->rank = rank;
    r->order = order;
    r->order_begin = -1;
    r->first_tensor = res->n_tensors;
    r->n_tensors = 2;
    set_row(&b->ten[res->n_tensors++], "input.0", dtype, ein);
    set_row(&b->ten[res->n_tensors++], "output.0", dtype, eout);
    cmp_record_finish(r, res->tensors);
    return r;
}

/* A backward record counts its forward's e = max(in, out) as an input,
 * as max(e, 2 sqrt(e) / 8). */
static msp_cause_t backward_cause(double fwd_in, double fwd_out, double bwd_out, double *bwd_in)
{
    build_t b;
    build_init(&b);
    add(&b, "Functional.relu.0.forward", 0, 0, 0, "torch.float32", fwd_in, fwd_out);
    msp_record_cmp_t *bw = add(&b, "Functional.relu.0.backward", 0, 0, 1, "torch.float32", 0.0,
                               bwd_out);
    CHECK_INT(cmp_link_backward(&b.res), MSP_OK);
    *bwd_in = bw->in_err;
    return bw->cause;
}

static void test_backward(void)
{
    double in = 0.0;
    /* e = 1e-4: 2 sqrt(1e-4) / 8 = 0.0025, so the bar is 8 x 0.0025 = 0.02 */
    CHECK_INT(backward_cause(1e-4, 1e-4, ABOVE(0.02), &in), MSP_CAUSE_INTRODUCED);
    CHECK_NEAR(in, 0.0025, 1e-12);
    CHECK_INT(backward_cause(1e-4, 1e-4, BELOW(0.02), &in), MSP_CAUSE_INHERITED);
    /* e = max(in, out) = 4e-4: 2 x 0.02 / 8 = 0.005, bar 0.04 */
    CHECK_INT(backward_cause(1e-4, 4e-4, BELOW(0.04), &in), MSP_CAUSE_INHERITED);
    CHECK_NEAR(in, 0.005, 1e-12);
    CHECK_INT(backward_cause(4e-4, 1e-4, ABOVE(0.04), &in), MSP_CAUSE_INTRODUCED);
    /* e = 0.09: 2 x 0.3 / 8 = 0.075 < 0.09, so e itself; bar 0.72 */
    CHECK_INT(backward_cause(0.09, 0.0, BELOW(0.72), &in), MSP_CAUSE_INHERITED);
    CHECK_NEAR(in, 0.09, 1e-12);
    CHECK_INT(backward_cause(0.09, 0.0, ABOVE(0.72), &in), MSP_CAUSE_INTRODUCED);
    /* a forward without error lends nothing */
    CHECK_INT(backward_cause(0.0, 0.0, ABOVE(1.0476837158203125e-05), &in), MSP_CAUSE_INTRODUCED);
    CHECK_NUM(in, 0.0);

    /* only the forward of the same step and rank counts */
    build_t b;
    build_init(&b);
    add(&b, "Functional.relu.0.forward", 0, 0, 0, "torch.float32", 0.1, 0.1);
    msp_record_cmp_t *other = add(&b, "Functional.relu.0.backward", 0, 1, 1, "torch.float32", 0.0,
                                  0.01);
    msp_record_cmp_t *later = add(&b, "Functional.relu.0.backward", 1, 0, 1, "torch.float32", 0.0,
                                  0.01);
    CHECK_INT(cmp_link_backward(&b.res), MSP_OK);
    CHECK_NUM(other->in_err, 0.0);
    CHECK_INT(other->cause, MSP_CAUSE_INTRODUCED);
    CHECK_NUM(later->in_err, 0.0);
    CHECK_INT(later->cause, MSP_CAUSE_INTRODUCED);

    /* a module's backward finds its forward by the direction token */
    build_init(&b);
    add(&b, "Module.fc.Linear.forward.0", 0, 0, 0, "torch.float32", 0.09, 0.0);
    msp_record_cmp_t *mb = add(&b, "Module.fc.Linear.backward.0", 0, 0, 1, "torch.float32", 0.0,
                               0.5);
    CHECK_INT(cmp_link_backward(&b.res), MSP_OK);
    CHECK_NEAR(mb->in_err, 0.09, 1e-12);
    CHECK_INT(mb->cause, MSP_CAUSE_INHERITED); /* 0.5 <= 8 x 0.09 */
}

/* A module record counts the worst parameter error the last optimizer step
 * of its rank wrote as an input error (msprobe-compare(1), Optimizer steps). */
static void test_module_params(void)
{
    build_t b;
    build_init(&b);
    add(&b, "Optimizer.Adam.0.step", 0, 0, 5, "torch.float32", 1e-6, 0.004);
    add(&b, "Optimizer.Adam.1.step", 0, 0, 6, "torch.float32", 1e-6, 0.01);
    msp_record_cmp_t *m = add(&b, "Module.fc.Linear.forward.0", 1, 0, 0, "torch.float32", 0.0,
                              BELOW(0.08));
    msp_record_cmp_t *m2 = add(&b, "Module.fc2.Linear.forward.0", 1, 0, 1, "torch.float32", 0.0,
                               ABOVE(0.08));
    msp_record_cmp_t *f = add(&b, "Functional.linear.0.forward", 1, 0, 2, "torch.float32", 0.0,
                              0.05);
    CHECK_INT(m->cause, MSP_CAUSE_INTRODUCED); /* before: nothing explains it */
    CHECK_INT(cmp_module_params(&b.res, 0.0), MSP_OK);
    CHECK_NUM(m->in_err, 0.01); /* the worst of that step's optimizer records */
    CHECK_INT(m->cause, MSP_CAUSE_INHERITED);
    CHECK_INT(m2->cause, MSP_CAUSE_INTRODUCED);
    CHECK_NUM(f->in_err, 0.0); /* an API record shows its parameters as inputs */
    CHECK_INT(f->cause, MSP_CAUSE_INTRODUCED);

    /* another rank's optimizer says nothing of this rank's parameters */
    build_init(&b);
    add(&b, "Optimizer.Adam.0.step", 0, 1, 5, "torch.float32", 1e-6, 0.01);
    m = add(&b, "Module.fc.Linear.forward.0", 1, 0, 0, "torch.float32", 0.0, 0.05);
    CHECK_INT(cmp_module_params(&b.res, 0.0), MSP_OK);
    CHECK_NUM(m->in_err, 0.0);
    CHECK_INT(m->cause, MSP_CAUSE_INTRODUCED);
    /* a streamed part: the seed stands for the step before */
    build_init(&b);
    m = add(&b, "Module.fc.Linear.forward.0", 1, 0, 0, "torch.float32", 0.0, 0.05);
    CHECK_INT(cmp_module_params(&b.res, 0.01), MSP_OK);
    CHECK_NUM(m->in_err, 0.01);
    CHECK_INT(m->cause, MSP_CAUSE_INHERITED);
}

/* A module record's span [order_begin, order) of its step and rank. */
static msp_record_cmp_t *module(build_t *b, const char *name, int64_t begin, int64_t order,
                                double eout)
{
    msp_record_cmp_t *m = add(b, name, 0, 0, order, "torch.float32", 0.0, eout);
    m->order_begin = begin;
    return m;
}

static void test_modules(void)
{
    build_t b;
    /* bf16 inside a block whose boundary is float32: bf16's floor */
    build_init(&b);
    add(&b, "Functional.linear.0.forward", 0, 0, 1, "torch.bfloat16", 0.0, 0.02);
    msp_record_cmp_t *m = module(&b, "Module.fc.Linear.forward.0", 1, 2, 0.02);
    CHECK_INT(m->cause, MSP_CAUSE_INTRODUCED); /* by its own float32 rows */
    CHECK_INT(cmp_judge_modules(&b.res), MSP_OK);
    CHECK_NEAR(m->floor, FLOOR_BF16, 1e-12);
    CHECK_INT(m->cause, MSP_CAUSE_NONE);
    CHECK_INT(m->explained_by, 0);

    /* a record inside that introduced error explains the module */
    build_init(&b);
    add(&b, "Functional.linear.0.forward", 0, 0, 1, "torch.float32", 0.0, 0.01);
    m = module(&b, "Module.fc.Linear.forward.0", 1, 2, 0.05);
    CHECK_INT(cmp_judge_modules(&b.res), MSP_OK);
    CHECK_INT(m->cause, MSP_CAUSE_INTRODUCED);
    CHECK_INT(m->explained_by, 1);

    /* one that carries at least 1/8 of the module's error does too:
     * 8 x 0.007 = 0.056 */
    static const struct {
        double mod;
        int explained;
    } eighth[] = {{0.05, 1}, {0.056, 1}, {0.06, 0}};
    for (size_t i = 0; i < sizeof eighth / sizeof eighth[0]; i++) {
        build_init(&b);
        /* before the span: it introduced error, but ran outside the module */
        add(&b, "Functional.gelu.0.forward", 0, 0, 0, "torch.float32", 0.0, 0.5);
        add(&b, "Functional.linear.0.forward", 0, 0, 1, "torch.float32", 0.001, 0.007);
        m = module(&b, "Module.fc.Linear.forward.0", 1, 2, eighth[i].mod);
        CHECK_INT(cmp_judge_modules(&b.res), MSP_OK);
        CHECK_INT(m->cause, MSP_CAUSE_INTRODUCED);
        CHECK_INT(m->explained_by, eighth[i].explained);
    }

    /* the backward module: by the backward records of what ran in its forward */
    build_init(&b);
    add(&b, "Functional.linear.0.forward", 0, 0, 1, "torch.float32", 0.0, 0.0);
    module(&b, "Module.fc.Linear.forward.0", 1, 2, 0.0);
    add(&b, "Functional.linear.0.backward", 0, 0, 3, "torch.float32", 0.0, 0.01);
    msp_record_cmp_t *mb = add(&b, "Module.fc.Linear.backward.0", 0, 0, 4, "torch.float32", 0.0,
                               0.05);
    CHECK_INT(cmp_judge_modules(&b.res), MSP_OK);
    CHECK_INT(mb->cause, MSP_CAUSE_INTRODUCED);
    CHECK_INT(mb->explained_by, 1);

    /* nested: the outer module sees the inner one already judged */
    build_init(&b);
    add(&b, "Functional.linear.0.forward", 0, 0, 1, "torch.float32", 0.0, 0.01);
    msp_record_cmp_t *inner = module(&b, "Module.blk.fc.Linear.forward.0", 1, 2, 0.05);
    msp_record_cmp_t *outer = module(&b, "Module.blk.Block.forward.0", 1, 3, 0.05);
    outer->order_begin = 0; /* spans the linear and the inner module */
    CHECK_INT(cmp_judge_modules(&b.res), MSP_OK);
    CHECK_INT(inner->explained_by, 1);
    CHECK_INT(outer->explained_by, 1);
}

int main(void)
{
    test_backward();
    test_module_params();
    test_modules();
    return unit_done("error origin across records");
}
