/* Verdicts and error origin, called directly on rows and records built in
 * memory (src/compare/cmp_verdict.c): msprobe's Accuracy Reached or Not at
 * its thresholds, the unit roundoff and floor of each dtype, introduced
 * against inherited just above and just below 8 x in and the floor,
 * integer and bool outputs, NaN/Inf rows, N/A records and the highlight
 * rules. Every wanted value comes from msprobe-compare(1) (VERDICT, ROOT
 * CAUSE, HIGHLIGHTING) worked out by hand; backward records and modules are
 * in unit_origin.c. */
#include "cmp_internal.h"

#include <math.h>
#include <string.h>

#include "unit_check.h"

/* floor = 8 u + 1e-5 (msprobe-compare(1), Error of an op), by hand */
#define FLOOR_BF16 0.03126                /* 8 x 2^-8 = 0.03125 */
#define FLOOR_FP16 0.00391625             /* 8 x 2^-11 = 0.00390625 */
#define FLOOR_FP32 1.0476837158203125e-05 /* 8 x 2^-24 = 4.76837158203125e-07 */
#define FLOOR_FP64 1.0000000000888178e-05 /* 8 x 2^-53 = 8.881784197001252e-16 */

#define ABOVE(x) ((x) * (1.0 + 1e-9))
#define BELOW(x) ((x) * (1.0 - 1e-9))

/* A row that agrees everywhere (Cosine 1, MaxAbsErr 0, verdict Yes) but
 * for its error e = ||n - b|| / ||b||. */
static void row(msp_tensor_cmp_t *t, const char *role, const char *dtype, double rel)
{
    memset(t, 0, sizeof *t);
    t->is_output = strncmp(role, "output", 6) == 0;
    snprintf(t->npu_dtype, sizeof t->npu_dtype, "%s", dtype);
    snprintf(t->bench_dtype, sizeof t->bench_dtype, "%s", dtype);
    t->cosine = 1.0;
    t->max_abs_err = 0.0;
    t->max_diff = NAN;
    t->rel_err = rel;
    t->verdict = MSP_VERDICT_YES;
}

/* rec judged on rows[0..n) with no autocast and no changed argument. */
static void judge(msp_record_cmp_t *rec, msp_tensor_cmp_t *rows, size_t n)
{
    memset(rec, 0, sizeof *rec);
    rec->n_tensors = n;
    cmp_record_finish(rec, rows);
}

/* One rec of an input error ein and an output error eout in dtype dt. */
static msp_cause_t cause_of(const char *dt, double ein, double eout, msp_record_cmp_t *rec)
{
    msp_tensor_cmp_t r[2];
    row(&r[0], "input.0", dt, ein);
    row(&r[1], "output.0", dt, eout);
    judge(rec, r, 2);
    return rec->cause;
}

static void test_tensor_verdict(void)
{
    msp_compare_opts_t o;
    msp_compare_opts_default(&o);
    /* the defaults of msprobe-compare(1), VERDICT */
    CHECK_NUM(o.cos_warn, 0.99);
    CHECK_NUM(o.abs_warn, 0.001);
    CHECK_NUM(o.cos_fail, 0.9);
    CHECK_NUM(o.abs_fail, 1.0);
    static const struct {
        double cos, mx;
        int scalar;
        msp_verdict_t want;
    } cases[] = {
        {1.0, 0.0, 0, MSP_VERDICT_YES},
        {0.99, 0.5, 0, MSP_VERDICT_YES},    /* Cosine not below 0.99 */
        {0.989, 0.0011, 0, MSP_VERDICT_NO}, /* below 0.99 and MaxAbsErr > 0.001 */
        {0.989, 0.001, 0, MSP_VERDICT_YES}, /* MaxAbsErr not above 0.001 */
        {0.989, 0.0009, 0, MSP_VERDICT_YES},
        {0.9, 0.0005, 0, MSP_VERDICT_YES},   /* Cosine not below 0.9 */
        {0.8999, 0.0, 0, MSP_VERDICT_NO},    /* Cosine < 0.9 alone */
        {1.0, 1.0, 0, MSP_VERDICT_YES},      /* MaxAbsErr not above 1 */
        {1.0, 1.0000001, 0, MSP_VERDICT_NO}, /* MaxAbsErr > 1 alone */
        {1.0, NAN, 0, MSP_VERDICT_NO},       /* N/A MaxAbsErr */
        {NAN, 0.0, 0, MSP_VERDICT_NO},       /* N/A Cosine (one side all zero) */
        {NAN, 0.5, 1, MSP_VERDICT_YES},      /* one element: MaxAbsErr alone */
        {NAN, 1.0, 1, MSP_VERDICT_YES},
        {NAN, 1.5, 1, MSP_VERDICT_NO},
        {NAN, NAN, 1, MSP_VERDICT_NO},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        msp_tensor_cmp_t t;
        row(&t, "output.0", "torch.float32", 0.0);
        t.cosine = cases[i].cos;
        t.max_abs_err = cases[i].mx;
        t.verdict = MSP_VERDICT_NA; /* overwritten */
        cmp_tensor_verdict(&t, &o, cases[i].scalar);
        if (t.verdict != cases[i].want)
            fprintf(stderr, "verdict case %zu (cos %g, mx %g, scalar %d)\n", i, cases[i].cos,
                    cases[i].mx, cases[i].scalar);
        CHECK_INT(t.verdict, cases[i].want);
    }
    /* the thresholds are the options' */
    msp_tensor_cmp_t t;
    row(&t, "output.0", "torch.float32", 0.0);
    t.cosine = 0.94;
    o.cos_fail = 0.95;
    cmp_tensor_verdict(&t, &o, 0);
    CHECK_INT(t.verdict, MSP_VERDICT_NO);
    o.cos_fail = 0.9;
    t.max_abs_err = 0.5;
    o.abs_fail = 0.4;
    t.cosine = 1.0;
    cmp_tensor_verdict(&t, &o, 0);
    CHECK_INT(t.verdict, MSP_VERDICT_NO);
}

static void test_roundoff_and_floor(void)
{
    /* bfloat16 2^-8, float16 2^-11, float32 2^-24, float64 2^-53, exact 0 */
    CHECK_NUM(cmp_unit_roundoff("torch.bfloat16"), 0.00390625);
    CHECK_NUM(cmp_unit_roundoff("torch.float16"), 0.00048828125);
    CHECK_NUM(cmp_unit_roundoff("torch.half"), 0.00048828125);
    CHECK_NUM(cmp_unit_roundoff("torch.float32"), 5.9604644775390625e-08);
    CHECK_NUM(cmp_unit_roundoff("torch.float64"), 1.1102230246251565e-16);
    CHECK_NUM(cmp_unit_roundoff("torch.double"), 1.1102230246251565e-16);
    const char *exact[] = {
        "torch.int64", "torch.int32", "torch.int8", "torch.uint8", "torch.bool", "", NULL};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        CHECK_NUM(cmp_unit_roundoff(exact[i]), 0.0);
    CHECK_NEAR(cmp_floor_for(0x1p-8), FLOOR_BF16, 1e-12);
    CHECK_NEAR(cmp_floor_for(0x1p-11), FLOOR_FP16, 1e-12);
    CHECK_NEAR(cmp_floor_for(0x1p-24), FLOOR_FP32, 1e-12);
    CHECK_NEAR(cmp_floor_for(0x1p-53), FLOOR_FP64, 1e-12);
    CHECK_NUM(cmp_floor_for(0.0), 0.0); /* integers: any difference is above it */
    /* a record's floor is its coarsest dtype's */
    msp_record_cmp_t rec;
    static const struct {
        const char *dt;
        double floor;
    } per[] = {{"torch.bfloat16", FLOOR_BF16}, {"torch.float16", FLOOR_FP16},
               {"torch.float32", FLOOR_FP32},  {"torch.float64", FLOOR_FP64},
               {"torch.int64", 0.0},           {"torch.bool", 0.0}};
    for (size_t i = 0; i < sizeof per / sizeof per[0]; i++) {
        cause_of(per[i].dt, 0.0, 0.0, &rec);
        CHECK_NEAR(rec.floor, per[i].floor, 1e-12);
    }
    CHECK_NUM(CMP_AMPLIFY, 8.0);
    CHECK_NUM(CMP_FLOOR_ULPS, 8.0);
    CHECK_NUM(CMP_FLOOR_ABS, 1e-5);
}

static void test_thresholds(void)
{
    msp_record_cmp_t rec;
    /* float32, in = 1e-3: introduced once out > 8e-3 (above the floor) */
    CHECK_INT(cause_of("torch.float32", 1e-3, ABOVE(8e-3), &rec), MSP_CAUSE_INTRODUCED);
    CHECK_NEAR(rec.score, 1.0 + 1e-9, 1e-12); /* out / max(8 in, floor) */
    CHECK_NEAR(rec.in_err, 1e-3, 0.0);
    CHECK_NEAR(rec.out_err, ABOVE(8e-3), 0.0);
    CHECK_INT(cause_of("torch.float32", 1e-3, BELOW(8e-3), &rec), MSP_CAUSE_INHERITED);
    CHECK_INT(cause_of("torch.float32", 1e-3, 8.0 * 1e-3, &rec), MSP_CAUSE_INHERITED); /* not > */
    /* identical inputs: the floor alone decides */
    CHECK_INT(cause_of("torch.float32", 0.0, ABOVE(FLOOR_FP32), &rec), MSP_CAUSE_INTRODUCED);
    CHECK_NEAR(rec.score, 1.0 + 1e-9, 1e-9);
    CHECK_INT(cause_of("torch.float32", 0.0, BELOW(FLOOR_FP32), &rec), MSP_CAUSE_NONE);
    CHECK_NUM(rec.score, NAN);
    CHECK_INT(cause_of("torch.float32", 0.0, 0.0, &rec), MSP_CAUSE_NONE);
    /* 8 x in below the floor: the floor is the bar */
    CHECK_INT(cause_of("torch.float32", 1e-7, ABOVE(FLOOR_FP32), &rec), MSP_CAUSE_INTRODUCED);
    CHECK_INT(cause_of("torch.float32", 1e-7, BELOW(FLOOR_FP32), &rec), MSP_CAUSE_NONE);
    /* bfloat16: 0.03 is rounding, 0.0313 is not */
    CHECK_INT(cause_of("torch.bfloat16", 1e-3, BELOW(FLOOR_BF16), &rec), MSP_CAUSE_NONE);
    CHECK_INT(cause_of("torch.bfloat16", 1e-3, ABOVE(FLOOR_BF16), &rec), MSP_CAUSE_INTRODUCED);
    CHECK_INT(cause_of("torch.bfloat16", 0.01, BELOW(0.08), &rec), MSP_CAUSE_INHERITED);
    CHECK_INT(cause_of("torch.bfloat16", 0.01, ABOVE(0.08), &rec), MSP_CAUSE_INTRODUCED);
    CHECK_INT(cause_of("torch.float16", 0.0, BELOW(FLOOR_FP16), &rec), MSP_CAUSE_NONE);
    CHECK_INT(cause_of("torch.float16", 0.0, ABOVE(FLOOR_FP16), &rec), MSP_CAUSE_INTRODUCED);

    /* in = the worst input (kwarg.* included), out = the worst output */
    msp_tensor_cmp_t r[5];
    row(&r[0], "input.0", "torch.float32", 1e-4);
    row(&r[1], "input.1", "torch.float32", NAN); /* not comparable: no part of in */
    row(&r[2], "kwarg.weight", "torch.float32", 3e-4);
    row(&r[3], "output.0", "torch.float32", 2e-3);
    row(&r[4], "output.1", "torch.float32", 2.5e-3);
    r[3].cosine = 0.97;
    r[4].cosine = 0.98;
    r[3].max_abs_err = 0.5;
    r[4].max_abs_err = 0.25;
    judge(&rec, r, 5);
    CHECK_NUM(rec.in_err, 3e-4);
    CHECK_NUM(rec.out_err, 2.5e-3);
    CHECK_INT(rec.cause, MSP_CAUSE_INTRODUCED); /* 2.5e-3 > 8 x 3e-4 = 2.4e-3 */
    CHECK_NUM(rec.worst_cosine, 0.97);
    CHECK_NUM(rec.worst_max_abs, 0.5);
    r[2].rel_err = 3.2e-4; /* 8 x 3.2e-4 = 2.56e-3 > 2.5e-3 */
    judge(&rec, r, 5);
    CHECK_INT(rec.cause, MSP_CAUSE_INHERITED);
}

/* Integer and bool outputs flip under any noise: introduced only with
 * identical inputs; a differing integer input counts as +Inf. */
static void test_discrete(void)
{
    msp_tensor_cmp_t r[3];
    msp_record_cmp_t rec;
    row(&r[0], "input.0", "torch.float32", 1e-7);
    row(&r[1], "output.0", "torch.int64", 0.5);
    judge(&rec, r, 2);
    CHECK_INT(rec.cause, MSP_CAUSE_INHERITED); /* 0.5 > 8e-7, but the input differs */
    CHECK_NEAR(rec.floor, FLOOR_FP32, 1e-12);  /* int64's u is 0: float32 is the coarsest */
    r[0].rel_err = 0.0;
    judge(&rec, r, 2);
    CHECK_INT(rec.cause, MSP_CAUSE_INTRODUCED);
    row(&r[1], "output.0", "torch.bool", 0.0);
    judge(&rec, r, 2);
    CHECK_INT(rec.cause, MSP_CAUSE_NONE);

    /* integers only: the floor is 0, any difference counts */
    row(&r[0], "input.0", "torch.int64", 0.0);
    row(&r[1], "input.1", "torch.bool", 0.0);
    row(&r[2], "output.0", "torch.int64", 0.25);
    judge(&rec, r, 3);
    CHECK_NUM(rec.floor, 0.0);
    CHECK_INT(rec.cause, MSP_CAUSE_INTRODUCED);
    r[1].rel_err = 0.01; /* a changed mask explains any output */
    judge(&rec, r, 3);
    CHECK_NUM(rec.in_err, INFINITY);
    CHECK_INT(rec.cause, MSP_CAUSE_INHERITED);

    /* a changed index explains a float output too */
    row(&r[0], "input.0", "torch.float32", 0.0);
    row(&r[1], "input.1", "torch.int64", 1e-6);
    row(&r[2], "output.0", "torch.float32", 10.0);
    judge(&rec, r, 3);
    CHECK_NUM(rec.in_err, INFINITY);
    CHECK_INT(rec.cause, MSP_CAUSE_INHERITED);
    CHECK_NUM(rec.score, 0.0); /* out / +Inf */
}

/* NaN/Inf at different places make e +Inf (msprobe-compare(1), Error of a
 * tensor); a row without a comparable error (NaN) counts for nothing. */
static void test_nonfinite(void)
{
    msp_compare_opts_t o;
    msp_compare_opts_default(&o);
    msp_tensor_cmp_t r[2];
    msp_record_cmp_t rec;
    row(&r[0], "input.0", "torch.float32", 1e-6);
    row(&r[1], "output.0", "torch.float32", INFINITY);
    r[1].cosine = NAN; /* every metric N/A */
    r[1].max_abs_err = NAN;
    r[1].highlight = MSP_HL_RED; /* the row builder marks an NPU NaN red */
    cmp_tensor_verdict(&r[1], &o, 0);
    CHECK_INT(r[1].verdict, MSP_VERDICT_NO);
    judge(&rec, r, 2);
    CHECK_INT(rec.cause, MSP_CAUSE_INTRODUCED);
    CHECK_NUM(rec.score, INFINITY);
    CHECK_INT(rec.verdict, MSP_VERDICT_NO);
    CHECK_INT(rec.highlight, MSP_HL_RED);
    CHECK_NUM(rec.worst_cosine, NAN); /* no output Cosine to take */

    r[0].rel_err = INFINITY; /* the NaN came in */
    judge(&rec, r, 2);
    CHECK_INT(rec.cause, MSP_CAUSE_INHERITED);

    row(&r[0], "input.0", "torch.float32", NAN); /* no comparable input */
    row(&r[1], "output.0", "torch.float32", 0.5);
    judge(&rec, r, 2);
    CHECK_NUM(rec.in_err, NAN);
    CHECK_INT(rec.cause, MSP_CAUSE_INTRODUCED);
    CHECK_NEAR(rec.score, 0.5 / FLOOR_FP32, 1e-12);

    row(&r[1], "output.0", "torch.float32", NAN); /* nothing to compare */
    judge(&rec, r, 2);
    CHECK_NUM(rec.out_err, NAN);
    CHECK_INT(rec.cause, MSP_CAUSE_NONE);
}

/* A record is the worst verdict of its rows; N/A only when every row is. */
static void test_record_verdict(void)
{
    static const struct {
        msp_verdict_t a, b, want;
    } cases[] = {
        {MSP_VERDICT_NA, MSP_VERDICT_NA, MSP_VERDICT_NA},
        {MSP_VERDICT_NA, MSP_VERDICT_YES, MSP_VERDICT_YES},
        {MSP_VERDICT_NA, MSP_VERDICT_NO, MSP_VERDICT_NO},
        {MSP_VERDICT_YES, MSP_VERDICT_WARNING, MSP_VERDICT_WARNING},
        {MSP_VERDICT_WARNING, MSP_VERDICT_NO, MSP_VERDICT_NO},
        {MSP_VERDICT_NO, MSP_VERDICT_WARNING, MSP_VERDICT_NO},
        {MSP_VERDICT_YES, MSP_VERDICT_YES, MSP_VERDICT_YES},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        msp_tensor_cmp_t r[2];
        msp_record_cmp_t rec;
        row(&r[0], "input.0", "torch.float32", NAN);
        row(&r[1], "output.0", "torch.float32", NAN);
        r[0].verdict = cases[i].a;
        r[1].verdict = cases[i].b;
        judge(&rec, r, 2);
        CHECK_INT(rec.verdict, cases[i].want);
        CHECK_INT(rec.cause, MSP_CAUSE_NONE);
    }
}

/* Autocast and mixed dtypes: the coarsest precision the op computed at. */
static void test_compute_precision(void)
{
    msp_tensor_cmp_t r[2];
    msp_record_cmp_t rec;
    row(&r[0], "input.0", "torch.float32", 0.0);
    row(&r[1], "output.0", "torch.float32", 0.02);
    judge(&rec, r, 2);
    CHECK_INT(rec.cause, MSP_CAUSE_INTRODUCED); /* 0.02 is far above float32's floor */
    memset(&rec, 0, sizeof rec);
    rec.n_tensors = 2;
    rec.autocast_u = 0x1p-8; /* ran under bf16 autocast */
    cmp_record_finish(&rec, r);
    CHECK_NEAR(rec.floor, FLOOR_BF16, 1e-12);
    CHECK_INT(rec.cause, MSP_CAUSE_NONE);
    /* a bf16 input of an op with a float32 output: bf16's floor */
    row(&r[0], "input.0", "torch.bfloat16", 0.0);
    judge(&rec, r, 2);
    CHECK_NEAR(rec.floor, FLOOR_BF16, 1e-12);
    CHECK_INT(rec.cause, MSP_CAUSE_NONE);
    /* one row bf16 on the compare side, float32 on the bench side */
    row(&r[0], "input.0", "torch.float32", 0.0);
    snprintf(r[1].npu_dtype, sizeof r[1].npu_dtype, "torch.bfloat16");
    judge(&rec, r, 2);
    CHECK_NEAR(rec.floor, FLOOR_BF16, 1e-12);
}

/* A changed number close to the data's own error was computed from the
 * data (compare.h, args_are_data: no more than the input error, and 1 %). */
static void test_args_are_data(void)
{
    static const struct {
        double ein, reldiff;
        int data;
    } cases[] = {
        {1e-3, 5e-4, 1}, {1e-3, 1e-3, 1},
        {1e-3, 2e-3, 0}, {0.05, 0.02, 0}, /* above 1 % whatever the input error */
        {0.05, 0.01, 1}, {1e-3, -1.0, 0}, /* -1: not one number on each side */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        msp_tensor_cmp_t r[2];
        msp_record_cmp_t rec;
        row(&r[0], "input.0", "torch.float32", cases[i].ein);
        row(&r[1], "output.0", "torch.float32", 0.5);
        memset(&rec, 0, sizeof rec);
        rec.n_tensors = 2;
        rec.arg_diff = "kwarg.min: NPU 0.5, bench 0.5005";
        rec.arg_reldiff = cases[i].reldiff;
        cmp_record_finish(&rec, r);
        CHECK_INT(rec.args_are_data, cases[i].data);
        CHECK_NUM(rec.in_err, cases[i].ein); /* never below the input error */
    }
}

/* msprobe-compare(1), HIGHLIGHTING, first match wins. */
static msp_highlight_t highlight(double in_abs, double in_cos, msp_verdict_t in_v, double out_abs,
                                 double out_cos, msp_verdict_t out_v)
{
    msp_tensor_cmp_t r[2];
    msp_record_cmp_t rec;
    row(&r[0], "input.0", "torch.float32", 0.0);
    row(&r[1], "output.0", "torch.float32", 0.0);
    r[0].max_abs_err = in_abs;
    r[0].cosine = in_cos;
    r[0].verdict = in_v;
    r[0].highlight = MSP_HL_RED; /* input rows are never coloured */
    r[1].max_abs_err = out_abs;
    r[1].cosine = out_cos;
    r[1].verdict = out_v;
    judge(&rec, r, 2);
    CHECK_INT(r[0].highlight, MSP_HL_NONE);
    CHECK_INT(rec.highlight, r[1].highlight);
    return r[1].highlight;
}

static void test_highlight(void)
{
    const msp_verdict_t Y = MSP_VERDICT_YES, N = MSP_VERDICT_NO;
    CHECK_INT(highlight(0.0, 1.0, N, 2e10, 1.0, N), MSP_HL_RED);      /* error > 1e10 */
    CHECK_INT(highlight(0.0, 1.0, Y, 0.5, 0.95, N), MSP_HL_RED);      /* accuracy lost */
    CHECK_INT(highlight(0.125, 1.0, Y, 1.25, 1.0, Y), MSP_HL_YELLOW); /* exactly 10 x */
    CHECK_INT(highlight(0.125, 1.0, Y, 1.2499, 1.0, Y), MSP_HL_NONE);
    CHECK_INT(highlight(0.0, 1.0, Y, 0.0, 1.0, Y), MSP_HL_NONE);      /* no error at all */
    CHECK_INT(highlight(0.5, 0.75, N, 0.5, 0.625, N), MSP_HL_YELLOW); /* Cosine 0.125 lower */
    CHECK_INT(highlight(0.5, 0.75, N, 0.5, 0.6875, N), MSP_HL_NONE);  /* 0.0625 lower */
    CHECK_INT(highlight(0.5, 1.0, N, 0.5, 1.0, N), MSP_HL_NONE);

    /* the across-the-op rules need an input */
    msp_tensor_cmp_t r[1];
    msp_record_cmp_t rec;
    row(&r[0], "output.0", "torch.float32", 0.5);
    r[0].verdict = MSP_VERDICT_NO;
    r[0].max_abs_err = 3.0;
    judge(&rec, r, 1);
    CHECK_INT(r[0].highlight, MSP_HL_NONE);
    /* statistics rows: |Max diff| stands for MaxAbsErr */
    row(&r[0], "output.0", "torch.float32", 0.5);
    r[0].max_abs_err = NAN;
    r[0].max_diff = -3e10;
    judge(&rec, r, 1);
    CHECK_INT(r[0].highlight, MSP_HL_RED);
}

int main(void)
{
    test_tensor_verdict();
    test_roundoff_and_floor();
    test_thresholds();
    test_discrete();
    test_nonfinite();
    test_record_verdict();
    test_compute_precision();
    test_args_are_data();
    test_highlight();
    return unit_done("verdicts and error origin");
}
