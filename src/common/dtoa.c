/* Doubles as the reports print them: the shortest of 15 or 17 significant
 * digits that reads back as the same double, in printf's %g form.
 *
 * Why not printf: glibc formats a double exactly with multi-precision
 * arithmetic, and a statistics tree's reports print 14 numbers a row, each
 * twice (%.15g, then %.17g when the first does not read back): on a 64-rank
 * tree that was a quarter of compare's CPU (issue 42). Here:
 *  - the 17 digits come from one integer multiplication, the double's
 *    53-bit significand times a 128-bit 10^k (a table made at first use),
 *    below the true product by less than 2^-125 of it;
 *  - a value whose digits sit nearer a rounding tie than that error is
 *    rounded in exact 128-bit integer arithmetic when its scale allows
 *    (10^0..10^22), else printed by printf as before; so the digits are
 *    always printf's own, correctly rounded;
 *  - the 15 digits are the 17 rounded once more, unless those end in
 *    exactly 50 (rounding twice could differ: computed again);
 *  - whether 15 digits read back is worked out without strtod where it can
 *    be: m x 10^k with m below 2^53 and |k| <= 22 is one correctly rounded
 *    multiplication or division of two exact doubles, what strtod would
 *    read (Clinger's fast path); other exponents still ask strtod.
 * 17 correctly rounded digits always read back. With 15 digits there is at
 * most one decimal of that length that reads back, so the text is printf's
 * %.15g whenever that reads back. About 35 ns a float32 value, where printf
 * and strtod took 400 (and a long double multiplication 60). */
#include "msprobe/common.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef __SIZEOF_INT128__
#error "dtoa.c's digits need unsigned __int128 (gcc and clang on 64-bit targets)"
#endif

#define DT_MIN10 (-340)
#define DT_MAX10 340

/* 10^k = (hi:lo) x 2^exp, hi's top bit set: 128 bits, truncated from 192
 * worked out exactly step by step (so within 2^-126 of 10^k) */
struct dt_pow {
    uint64_t hi, lo;
    int exp;
};
static struct dt_pow dt_pow10[DT_MAX10 - DT_MIN10 + 1];
static pthread_once_t dt_once = PTHREAD_ONCE_INIT;

/* v (3 words, most significant first, top bit of v[0] set) times 10, or
 * divided by 10, normalised again; *exp follows the binary point. The
 * bits dropped are below 2^-190 of the value: 340 steps lose less than
 * 2^-181. */
static void dt_times10(uint64_t v[3], int *exp)
{
    unsigned __int128 c = 0;
    uint64_t w[4];
    for (int i = 2; i >= 0; i--) {
        c += (unsigned __int128)v[i] * 10;
        w[i + 1] = (uint64_t)c;
        c >>= 64;
    }
    w[0] = (uint64_t)c; /* 1 to 9 */
    int sh = 64 - __builtin_clzll(w[0]);
    for (int i = 0; i < 3; i++)
        v[i] = (w[i] << (64 - sh)) | (w[i + 1] >> sh);
    *exp += sh;
}

static void dt_div10(uint64_t v[3], int *exp)
{
    unsigned __int128 r = 0;
    for (int i = 0; i < 3; i++) {
        r = (r << 64) | v[i];
        v[i] = (uint64_t)(r / 10);
        r %= 10;
    }
    int sh = __builtin_clzll(v[0]); /* 3 or 4 */
    for (int i = 0; i < 2; i++)
        v[i] = (v[i] << sh) | (v[i + 1] >> (64 - sh));
    v[2] = (v[2] << sh) | (uint64_t)((r << 64) / 10 >> (64 - sh));
    *exp -= sh;
}

static void dt_init(void)
{
    uint64_t v[3] = {1ULL << 63, 0, 0};
    int exp = -191; /* v x 2^exp = 1 */
    for (int k = 0; k <= DT_MAX10; k++) {
        dt_pow10[k - DT_MIN10] = (struct dt_pow){v[0], v[1], exp + 64};
        dt_times10(v, &exp);
    }
    v[0] = 1ULL << 63, v[1] = v[2] = 0, exp = -191;
    for (int k = -1; k >= DT_MIN10; k--) {
        dt_div10(v, &exp);
        dt_pow10[k - DT_MIN10] = (struct dt_pow){v[0], v[1], exp + 64};
    }
}

static const uint64_t dt_ten[] = {1ULL,
                                  10ULL,
                                  100ULL,
                                  1000ULL,
                                  10000ULL,
                                  100000ULL,
                                  1000000ULL,
                                  10000000ULL,
                                  100000000ULL,
                                  1000000000ULL,
                                  10000000000ULL,
                                  100000000000ULL,
                                  1000000000000ULL,
                                  10000000000000ULL,
                                  100000000000000ULL,
                                  1000000000000000ULL,
                                  10000000000000000ULL,
                                  100000000000000000ULL};

/* a x 10^k (a > 0, normal; 0 <= k <= 22) rounded to an integer, ties to
 * even as printf rounds them, in exact integer arithmetic: a = M x 2^E with
 * M below 2^53, and M x 10^k below 2^127. For the values whose digits sit
 * too near a tie for dt_digits's product; 0 where it cannot serve. */
static int dt_exact(double a, int k, uint64_t *r)
{
    int e2;
    double f = frexp(a, &e2);
    uint64_t m = (uint64_t)ldexp(f, 53);
    int e = e2 - 53; /* a = m x 2^e */
    if (k < 0 || k > 22 || e < -127 || e > 8)
        return 0;
    unsigned __int128 n = m;
    for (int i = 0; i < k; i++)
        n *= 10;
    if (e >= 0) {
        n <<= e;
    } else {
        unsigned __int128 q = n >> -e, rem = n - (q << -e), half = (unsigned __int128)1 << (-e - 1);
        n = q + (rem > half || (rem == half && (q & 1)));
    }
    if (n >> 64)
        return 0;
    *r = (uint64_t)n;
    return 1;
}

/* floor(log10 a) for a = 1.f x 2^k2 (normal), or one less: floor(k2 log10 2),
 * which 78913 / 2^18 gives exactly for |k2| <= 1200 (checked against
 * 50-digit log10 2); dt_digits's loop takes the one more. */
static int dt_log10_low(int k2)
{
    int t = k2 * 78913;
    return t >= 0 ? t >> 18 : -((-t + (1 << 18) - 1) >> 18);
}

/* 64 bits of the 192-bit w (w[0] most significant) from bit b up, 0 <= b <= 128 */
static uint64_t dt_bits64(const uint64_t w[3], int b)
{
    if (b >= 64)
        return (uint64_t)((((unsigned __int128)w[0] << 64) | w[1]) >> (b - 64));
    return (uint64_t)((((unsigned __int128)w[1] << 64) | w[2]) >> b);
}

/* a (> 0, normal) as m x 10^(e - prec + 1), m of exactly prec digits,
 * correctly rounded; 0 when a x 10^k sits too near a tie to round it
 * without exact arithmetic that cannot serve (dt_exact).
 *
 * a x 10^k is a's 53-bit significand times 10^k's 128 (dt_pow10): a 192-bit
 * product, exact but for 10^k's truncation, so below the true value by less
 * than 2^-125 of it: under 2^-68 for the 17-digit integers printed, a
 * sixteenth of the last of the 64 fraction bits kept. A fraction within 16
 * of those units of one half is a tie or too near one. (This replaced a
 * long double multiplication: its x87 loads, conversions and rounding were
 * two fifths of result.csv's CPU, issue 42.) */
static int dt_digits(double a, int prec, uint64_t *m, int *e)
{
    uint64_t bits;
    memcpy(&bits, &a, sizeof bits);
    int biased = (int)((bits >> 52) & 0x7ff);
    uint64_t sig = (bits & ((1ULL << 52) - 1)) | (1ULL << 52);
    int e2 = biased - 1075; /* a = sig x 2^e2 */
    int x = dt_log10_low(biased - 1023);
    for (int tries = 0; tries < 3; tries++) {
        int k = prec - 1 - x;
        if (k < DT_MIN10 || k > DT_MAX10)
            return 0;
        const struct dt_pow *p = &dt_pow10[k - DT_MIN10];
        unsigned __int128 lo = (unsigned __int128)sig * p->lo, hi = (unsigned __int128)sig * p->hi;
        unsigned __int128 mid = (lo >> 64) + (uint64_t)hi;
        uint64_t w[3] = {(uint64_t)(hi >> 64) + (uint64_t)(mid >> 64), (uint64_t)mid, (uint64_t)lo};
        int sh = -(e2 + p->exp); /* a x 10^k = w x 2^-sh */
        if (sh < 64 || sh > 191)
            return 0;
        uint64_t n = sh >= 128 ? w[0] >> (sh - 128) : dt_bits64(w, sh);
        if (sh < 128 && (w[0] >> (sh - 64)) != 0)
            n = UINT64_MAX; /* 2^64 or more: past any prec digits */
        if (n >= dt_ten[prec]) {
            x++;
            continue;
        }
        if (n < dt_ten[prec - 1]) {
            x--;
            continue;
        }
        uint64_t frac = dt_bits64(w, sh - 64);
        const uint64_t half = 1ULL << 63, guard = 16;
        uint64_t r = n + (frac > half);
        if (frac > half - guard && frac < half + guard && !dt_exact(a, k, &r))
            return 0;            /* a tie, or too near one for these digits */
        if (r == dt_ten[prec]) { /* 99..9.5 rounded up */
            r = dt_ten[prec - 1];
            x++;
        }
        *m = r;
        *e = x;
        return 1;
    }
    return 0;
}

/* m (prec digits) x 10^(e - prec + 1) in %g form at buf; its length. */
static size_t dt_format(char *buf, int neg, uint64_t m, int e, int prec)
{
    static const char pairs[] = "00010203040506070809101112131415161718192021222324"
                                "25262728293031323334353637383940414243444546474849"
                                "50515253545556575859606162636465666768697071727374"
                                "75767778798081828384858687888990919293949596979899";
    char d[24];
    int at = prec;
    if (prec > 8) {
        /* the last 8 digits in 32-bit arithmetic, beside the others: two
         * short chains of divisions instead of one long one */
        uint32_t lo = (uint32_t)(m % 100000000);
        m /= 100000000;
        for (int i = 0; i < 4; i++, lo /= 100)
            memcpy(d + prec - 2 - 2 * i, pairs + 2 * (lo % 100), 2);
        at -= 8;
    }
    uint32_t hi = (uint32_t)m; /* below 10^9 */
    for (; at >= 2; at -= 2) { /* two digits a division */
        memcpy(d + at - 2, pairs + 2 * (hi % 100), 2);
        hi /= 100;
    }
    if (at)
        d[0] = (char)('0' + hi);
    int len = prec;
    while (len > 1 && d[len - 1] == '0')
        len--;
    size_t n = 0;
    if (neg)
        buf[n++] = '-';
    if (e < -4 || e >= prec) {
        buf[n++] = d[0];
        if (len > 1) {
            buf[n++] = '.';
            memcpy(buf + n, d + 1, (size_t)len - 1);
            n += (size_t)len - 1;
        }
        int ae = e < 0 ? -e : e; /* "e%+03d", without printf */
        buf[n++] = 'e';
        buf[n++] = e < 0 ? '-' : '+';
        if (ae >= 100)
            buf[n++] = (char)('0' + ae / 100);
        buf[n++] = (char)('0' + ae / 10 % 10);
        buf[n++] = (char)('0' + ae % 10);
    } else if (e >= 0) {
        for (int i = 0; i <= e; i++)
            buf[n++] = i < len ? d[i] : '0';
        if (len > e + 1) {
            buf[n++] = '.';
            memcpy(buf + n, d + e + 1, (size_t)(len - e - 1));
            n += (size_t)(len - e - 1);
        }
    } else {
        buf[n++] = '0';
        buf[n++] = '.';
        for (int i = 0; i < -e - 1; i++)
            buf[n++] = '0';
        memcpy(buf + n, d, (size_t)len);
        n += (size_t)len;
    }
    buf[n] = '\0';
    return n;
}

static int dt_reads_back(const char *text, double v)
{
    double back = strtod(text, NULL);
    return !(back < v) && !(back > v);
}

/* Whether m x 10^e-14 (m of 15 digits, a > 0) reads back as a, worked out
 * without strtod where one IEEE operation of two exact doubles gives it;
 * the text is printed at buf (sign first when neg) either way, when it
 * does, and its length stored in *n. */
static int dt_15_try(uint64_t m, int e, double a, int neg, char *buf, size_t *n)
{
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
    static const double p10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    int k = e - 14;
    if (k >= -22 && k <= 22) {
        volatile double d = (double)m; /* exact: m < 10^15 < 2^53 */
        double back = k >= 0 ? d * p10[k] : d / p10[-k];
        if (back < a || back > a)
            return 0;
        *n = dt_format(buf, neg, m, e, 15);
        return 1;
    }
#endif
    *n = dt_format(buf, neg, m, e, 15);
    return dt_reads_back(buf + neg, a);
}

/* The 15 digits of a from its correctly rounded 17 (m17, e17): 0 when the
 * last two are exactly 50, where rounding twice may differ from rounding
 * once. */
static int dt_15_of_17(uint64_t m17, int e17, uint64_t *m, int *e)
{
    uint64_t r = m17 % 100;
    if (r == 50)
        return 0;
    *m = m17 / 100 + (r > 50);
    *e = e17;
    if (*m == dt_ten[15]) {
        *m = dt_ten[14];
        (*e)++;
    }
    return 1;
}

size_t msp_dtoa(double v, char *buf)
{
    double a = fabs(v);
    if (isfinite(v) && a >= DBL_MIN) {
        pthread_once(&dt_once, dt_init);
        /* 17 digits first, and the 15 rounded from them: one multiplication
         * for both, where most values the reports print (float32 and
         * bfloat16 statistics) need 17 */
        uint64_t m17, m;
        int e17, e;
        int have17 = dt_digits(a, 17, &m17, &e17);
        size_t n;
        if (have17 ? dt_15_of_17(m17, e17, &m, &e) : dt_digits(a, 15, &m, &e)) {
            if (dt_15_try(m, e, a, v < 0, buf, &n))
                return n;
        } else if (have17 && dt_digits(a, 15, &m, &e) && dt_15_try(m, e, a, v < 0, buf, &n)) {
            return n;
        }
        if (have17) /* 17 correctly rounded digits always read back */
            return dt_format(buf, v < 0, m17, e17, 17);
    }
    /* zero, subnormals, NaN, Inf, and what the fast digits could not serve */
    int n = snprintf(buf, MSP_DTOA_SIZE, "%.15g", v);
    if (isfinite(v) && !dt_reads_back(buf, v))
        n = snprintf(buf, MSP_DTOA_SIZE, "%.17g", v);
    return (size_t)n;
}

size_t msp_fmt_g(double v, int prec, char *buf)
{
    prec = prec < 1 ? 1 : prec > 17 ? 17 : prec;
    double a = fabs(v);
    if (isfinite(v) && a >= DBL_MIN) {
        pthread_once(&dt_once, dt_init);
        uint64_t m;
        int e;
        if (dt_digits(a, prec, &m, &e))
            return dt_format(buf, v < 0, m, e, prec);
    }
    return (size_t)snprintf(buf, MSP_DTOA_SIZE, "%.*g", prec, v);
}

size_t msp_fmt_g15(double v, char *buf)
{
    return msp_fmt_g(v, 15, buf);
}

/* ---- a table of texts printed lately ---------------------------------------- */

#define MSP_NUM_MEMO_BITS 8
struct msp_num_text {
    uint64_t bits;
    uint8_t len; /* 0: empty */
    char text[MSP_DTOA_SIZE - 1];
};
struct msp_num_memo {
    struct msp_num_text e[(size_t)1 << MSP_NUM_MEMO_BITS];
};

msp_num_memo_t *msp_num_memo_new(void)
{
    return calloc(1, sizeof(msp_num_memo_t));
}

void msp_num_memo_free(msp_num_memo_t *m)
{
    free(m);
}

static size_t msp_memo_fmt(msp_num_memo_t *m, double v, char *buf, size_t (*fmt)(double, char *))
{
    if (!m)
        return fmt(v, buf);
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    /* Fibonacci hashing: a bfloat16's low bits are all zero */
    struct msp_num_text *e = &m->e[(bits * 0x9e3779b97f4a7c15ULL) >> (64 - MSP_NUM_MEMO_BITS)];
    if (e->len && e->bits == bits) {
        memcpy(buf, e->text, e->len);
        buf[e->len] = '\0';
        return e->len;
    }
    size_t n = fmt(v, buf);
    if (n <= sizeof e->text) {
        e->bits = bits;
        e->len = (uint8_t)n;
        memcpy(e->text, buf, n);
    }
    return n;
}

size_t msp_dtoa_memo(msp_num_memo_t *m, double v, char *buf)
{
    return msp_memo_fmt(m, v, buf, msp_dtoa);
}

size_t msp_fmt_g15_memo(msp_num_memo_t *m, double v, char *buf)
{
    return msp_memo_fmt(m, v, buf, msp_fmt_g15);
}
