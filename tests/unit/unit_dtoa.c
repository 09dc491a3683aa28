/* msp_dtoa (src/common/dtoa.c) against the rule it documents, worked out
 * here with printf and strtod: the text reads back as the same double; it
 * is printf's %.15g whenever that reads back (then it is the only 15-digit
 * decimal that does), else printf's %.17g; and msp_fmt_g15 is printf's
 * %.15g, always, and msp_fmt_g printf's %.*g at every precision (a page's
 * numbers). Over values the reports print: random bit patterns, short
 * decimals, bfloat16 and float32 values, integers, powers of ten and two,
 * values next to them, the ends of the double range, subnormals, zeros,
 * NaN and infinities; and a few texts written out by hand. */
#include "msprobe/common.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msp_rand.h"
#include "unit_check.h"

static uint64_t rng_state = MSP_RAND_SEED;

static uint64_t rng(void)
{
    return msp_xorshift64(&rng_state);
}

static size_t checked;

/* Significant digits of a %g text: those before any exponent, from the first
 * that is not zero. */
static int sig_digits(const char *t)
{
    int n = 0, started = 0;
    for (; *t && *t != 'e'; t++) {
        if (*t < '0' || *t > '9')
            continue;
        started |= *t != '0';
        n += started;
    }
    return n;
}

static void check_one(double v)
{
    char got[MSP_DTOA_SIZE], g15[MSP_DTOA_SIZE], p15[40], p17[40];
    size_t n = msp_dtoa(v, got);
    CHECK(n == strlen(got));
    snprintf(p15, sizeof p15, "%.15g", v);
    snprintf(p17, sizeof p17, "%.17g", v);
    checked++;
    n = msp_fmt_g15(v, g15);
    CHECK(n == strlen(g15));
    if (strcmp(g15, p15) != 0)
        fprintf(stderr, "msp_fmt_g15(%a) = \"%s\", want \"%s\"\n", v, g15, p15);
    CHECK(strcmp(g15, p15) == 0);
    if (isnan(v)) {
        CHECK(strcmp(got, p15) == 0);
        return;
    }
    double back = strtod(got, NULL);
    double b15 = strtod(p15, NULL);
    int reads_back = memcmp(&back, &v, sizeof v) == 0; /* bit for bit: -0 reads back as -0 */
    if (!reads_back)
        fprintf(stderr, "msp_dtoa(%a) = \"%s\" (%%.15g \"%s\", %%.17g \"%s\")\n", v, got, p15, p17);
    CHECK(reads_back);
    if (!(b15 < v) && !(b15 > v)) { /* %.15g reads back: it is the answer */
        if (strcmp(got, p15) != 0)
            fprintf(stderr, "msp_dtoa(%a) = \"%s\", want \"%s\"\n", v, got, p15);
        CHECK(strcmp(got, p15) == 0);
    } else { /* else printf's 17 digits, trailing zeros dropped as %g drops them */
        if (strcmp(got, p17) != 0)
            fprintf(stderr, "msp_dtoa(%a) = \"%s\", want \"%s\"\n", v, got, p17);
        CHECK(strcmp(got, p17) == 0);
        CHECK(sig_digits(got) >= 16); /* 15 would have been %.15g */
    }
}

/* msp_fmt_g(v, p) is printf's %.*g of v for every precision 1 to 17 (and
 * out-of-range precisions clamped to them) */
static size_t checked_g;

static void check_g(double v)
{
    for (int p = 0; p <= 18; p++) {
        char got[MSP_DTOA_SIZE], want[40];
        int q = p < 1 ? 1 : p > 17 ? 17 : p;
        size_t n = msp_fmt_g(v, p, got);
        snprintf(want, sizeof want, "%.*g", q, v);
        CHECK(n == strlen(got));
        if (strcmp(got, want) != 0)
            fprintf(stderr, "msp_fmt_g(%a, %d) = \"%s\", want \"%s\"\n", v, p, got, want);
        CHECK(strcmp(got, want) == 0);
        checked_g++;
    }
}

/* check of v, -v and the doubles next to v */
static void near(void (*check)(double), double v)
{
    check(v);
    check(-v);
    check(nextafter(v, INFINITY));
    check(nextafter(v, -INFINITY));
}

/* a random float32 value and the bfloat16 value of its upper half */
static void f32_and_bf16(double *f32, double *bf16)
{
    uint32_t b = (uint32_t)rng();
    float f, h;
    memcpy(&f, &b, sizeof f);
    b &= 0xFFFF0000u;
    memcpy(&h, &b, sizeof h);
    *f32 = f;
    *bf16 = h;
}

/* every precision over the same kinds of values, fewer of each */
static void all_precisions(void)
{
    for (int i = 0; i < 20000; i++) { /* any bit pattern */
        check_g(msp_double_of(rng()));
        double f, h; /* float32 and bfloat16 values */
        f32_and_bf16(&f, &h);
        check_g(f);
        check_g(h);
        /* short decimals, and the ties of a short decimal's last digit */
        double v = (double)(int64_t)(rng() % 2000001 - 1000000) / pow(10, (double)(rng() % 12));
        near(check_g, v);
        int d = (int)(rng() % 16) + 1;
        double m = (double)(rng() % 900000 + 100000);
        near(check_g, (m * 10 + 5) * pow(10, (int)(rng() % 40) - 20 - d));
    }
    /* exact ties at some precision: odd multiples of a power of two below
     * one (0.125 at 2 digits), and integers ending in 5 (125 at 2 digits),
     * where the digits' multiplication cannot round and exact arithmetic
     * or printf must */
    for (int i = 0; i < 20000; i++) {
        double odd = (double)(2 * (rng() % 1000000) + 1);
        check_g(ldexp(odd, -(int)(rng() % 40) - 1));
        check_g(odd * 5 * pow(10, (double)(rng() % 8)));
    }
    for (int e = -330; e <= 310; e += 3)
        near(check_g, pow(10, e));
    for (int e = -1074; e <= 1023; e += 5)
        near(check_g, ldexp(1.0, e));
    static const double special[] = {0.0, -0.0, INFINITY, -INFINITY, NAN,  0.5,
                                     9.5, 99.5, 0.95,     9.9999999, 1e21, 123456789.0};
    for (size_t i = 0; i < sizeof special / sizeof *special; i++)
        check_g(special[i]);
}

static void hand_written(void)
{
    static const struct {
        double v;
        const char *want;
    } cases[] = {
        {0.1, "0.1"},
        {0.1 + 0.2, "0.30000000000000004"},
        {1e-05, "1e-05"},
        {0.0001, "0.0001"},
        {123456789012345.0, "123456789012345"},
        {1e15, "1e+15"},
        {-2.5, "-2.5"},
        {0.734375, "0.734375"}, /* a bfloat16 value */
        {1.0 / 3.0, "0.33333333333333331"},
        {DBL_MAX, "1.7976931348623157e+308"},
        {0.0, "0"},
        {-0.0, "-0"},
        {INFINITY, "inf"},
        {-INFINITY, "-inf"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char got[MSP_DTOA_SIZE];
        msp_dtoa(cases[i].v, got);
        if (strcmp(got, cases[i].want) != 0)
            fprintf(stderr, "msp_dtoa(%a) = \"%s\", want \"%s\"\n", cases[i].v, got, cases[i].want);
        CHECK(strcmp(got, cases[i].want) == 0);
    }
}

int main(void)
{
    hand_written();
    for (int i = 0; i < 200000; i++) { /* any bit pattern: every exponent, NaNs */
        check_one(msp_double_of(rng()));
    }
    for (int i = 0; i < 100000; i++) { /* short decimals: k / 10^j */
        double v = (double)(int64_t)(rng() % 2000001 - 1000000) / pow(10, (double)(rng() % 12));
        near(check_one, v);
    }
    for (int i = 0; i < 100000; i++) { /* float32 and bfloat16 values */
        double f, h;
        f32_and_bf16(&f, &h);
        check_one(f);
        check_one(h);
    }
    for (int i = 0; i < 100000; i++) { /* next to a tie at the 15th and the 17th digit */
        double m15 = (double)(rng() % 900000000000000ULL + 100000000000000ULL);
        int k = (int)(rng() % 40) - 20;
        near(check_one, (m15 + 0.5) * pow(10, k));
        double m17 = (double)(rng() % 9000000000000000ULL + 1000000000000000ULL);
        near(check_one, (m17 * 10 + 5) * pow(10, k - 1));
    }
    for (int e = -330; e <= 310; e++) { /* powers of ten and the values next to them */
        near(check_one, pow(10, e));
        near(check_one, 5 * pow(10, e));
    }
    for (int e = -1074; e <= 1023; e++) /* powers of two, down through the subnormals */
        near(check_one, ldexp(1.0, e));
    for (int64_t k = -100000; k <= 100000; k += 7) /* integers */
        check_one((double)k);
    near(check_one, DBL_MIN);
    near(check_one, DBL_MAX / 2);
    near(check_one, DBL_TRUE_MIN * 3);
    all_precisions();
    printf("%zu values checked, %zu at every precision\n", checked, checked_g / 19);
    return unit_done("unit_dtoa");
}
