/* A report sheet's numbers (rep_sheet_num, src/report/rep_sheet.c) as
 * msprobe-compare(1) documents them, worked out here with printf and strtod:
 * an integer below 10^15 as its digits, any other number as printf's %.15g
 * when that reads back as the same double, else %.17g. The sheet keeps the
 * text of numbers it printed lately, by their bits, in a small table: here
 * 6,000 cells draw from 2,500 values (more than the table holds, so that
 * values meet in it), most of them again within a few rows as a details
 * sheet's statistics do, and every cell must still read as its own value's
 * text: -0 beside 0, a bfloat16 value beside the float32 next to it,
 * values one bit apart, subnormals, the ends of the range (NaN and the
 * infinities are texts, "N/A" and "inf", before they reach a sheet). The
 * cells are read from the sheet's XML before it is deflated (its first
 * 256 KiB stay in memory). The same values as percentages
 * (cmp_percent_text, through the sheet's table of them) are printf's
 * "%.15g%%". */
#include "rep_internal.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msp_rand.h"
#include "unit_check.h"

#define POOL 2500
#define CELLS 6000

static uint64_t rng_state = MSP_RAND_SEED;

static uint64_t rng(void)
{
    return msp_xorshift64(&rng_state);
}

/* The documented text of v (MSP_DTOA_SIZE bytes at out). */
static void want_text(double v, char *out, size_t size)
{
    int64_t iv = v > -1e15 && v < 1e15 ? (int64_t)v : 0;
    int whole = !((double)iv < v) && !((double)iv > v);
    if (v > -1e15 && v < 1e15 && whole && msp_bits_of(v) != msp_bits_of(-0.0)) {
        snprintf(out, size, "%lld", (long long)iv);
        return;
    }
    snprintf(out, size, "%.15g", v);
    if (msp_bits_of(strtod(out, NULL)) != msp_bits_of(v))
        snprintf(out, size, "%.17g", v);
}

/* The pool: values a statistics sheet prints, and neighbours that share
 * most of their bits. */
static void fill_pool(double *pool)
{
    size_t n = 0;
    const double fixed[] = {0.0,     -0.0,        1.0,     -1.0,     0.1,     1e15, 1e-300,
                            DBL_MIN, DBL_MIN / 4, DBL_MAX, -DBL_MAX, 12345.0, 0.5};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        pool[n++] = fixed[i];
    while (n < POOL) {
        uint64_t r = rng();
        double v;
        switch (r % 5) {
        case 0: /* any double */
            v = msp_double_of(rng());
            break;
        case 1: { /* a bfloat16 value */
            uint32_t b = (uint32_t)(rng() & 0xffff0000u);
            float f;
            memcpy(&f, &b, sizeof f);
            v = f;
            break;
        }
        case 2: { /* a float32 value */
            uint32_t b = (uint32_t)rng();
            float f;
            memcpy(&f, &b, sizeof f);
            v = f;
            break;
        }
        case 3: /* the value before in the pool, one bit off */
            v = msp_double_of(msp_bits_of(pool[n - 1]) ^ 1);
            break;
        default: /* a mean or a norm */
            v = (double)(rng() % 2000000) / 1048576.0 - 1.0 + 1e-9 * (double)(rng() % 1000);
            break;
        }
        if (isfinite(v))
            pool[n++] = v;
    }
}

int main(void)
{
    static double pool[POOL], cells[CELLS];
    fill_pool(pool);
    for (size_t i = 0; i < CELLS; i++) {
        size_t back = (size_t)(rng() % 8);
        /* half the cells repeat a cell a few rows up, the rest draw anew */
        cells[i] = i > back && rng() % 2 ? cells[i - 1 - back] : pool[rng() % POOL];
    }
    char dir[] = "/tmp/msp-unit-sheet-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    rep_sheet_t s;
    CHECK(rep_sheet_open(&s, dir, 3) == MSP_OK);
    for (size_t i = 0; i < CELLS; i += 3) {
        rep_sheet_row(&s, i / 3 + 1);
        for (size_t c = 0; c < 3 && i + c < CELLS; c++)
            rep_sheet_num(&s, (int)c, cells[i + c], 0);
    }
    CHECK(s.err == 0);
    CHECK(s.xml_len < (size_t)1 << 18); /* all of it still in memory */
    /* the cells' texts in order: "<v>TEXT</v>" */
    size_t k = 0, bad = 0;
    const char *p = s.xml, *end = s.xml + s.xml_len;
    while (k < CELLS && (p = memmem(p, (size_t)(end - p), "<v>", 3)) != NULL) {
        p += 3;
        const char *q = memmem(p, (size_t)(end - p), "</v>", 4);
        CHECK(q != NULL);
        if (!q)
            break;
        char want[64], got[64];
        want_text(cells[k], want, sizeof want);
        snprintf(got, sizeof got, "%.*s", (int)(q - p), p);
        if (strcmp(got, want) != 0 && bad++ < 10)
            fprintf(stderr, "cell %zu (bits %016llx): got '%s', want '%s'\n", k,
                    (unsigned long long)msp_bits_of(cells[k]), got, want);
        k++;
        p = q + 4;
    }
    CHECK(k == CELLS);
    CHECK(bad == 0);
    /* a relative error's percentage (msprobe-compare(1): printf's "%.15g%%"),
     * through the sheet's table of percentages, the same cells */
    size_t pbad = 0;
    for (size_t i = 0; i < CELLS; i++) {
        char want[64], got[64];
        snprintf(want, sizeof want, "%.15g%%", cells[i]);
        cmp_percent_text(s.pcts, cells[i], got, sizeof got);
        if (strcmp(got, want) != 0 && pbad++ < 10)
            fprintf(stderr, "percentage %zu: got '%s', want '%s'\n", i, got, want);
    }
    CHECK(pbad == 0);
    rep_sheet_free(&s);
    CHECK(rmdir(dir) == 0);
    printf("%zu cells, %zu wrong; %zu percentages wrong\n", k, bad, pbad);
    return failures ? 1 : 0;
}
