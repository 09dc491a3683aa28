/* Doubles as the reports print them: the shortest of 15 or 17 significant
 * digits that reads back as the same double, in printf's %g form.
 *
 * Why not printf: glibc formats a double exactly with multi-precision
 * arithmetic, and a statistics tree's reports print 14 numbers a row, each
 * twice (%.15g, then %.17g when the first does not read back): on a 64-rank
 * tree that was a quarter of compare's CPU (issue 42). Here the digits come
 * from one multiplication in long double (64-bit mantissa, 3 more decimal
 * digits than 17 need), off by less than 2e-19 of the value (powl within
 * 1.2 units of its last place, measured, and the product's rounding); a
 * value whose digits sit nearer a rounding tie than that (a tie, a
 * subnormal) is printed by printf as before, so the digits are always
 * printf's own, correctly rounded.
 *
 * Nor strtod, to check that 15 digits read back (a fifth of the reports'
 * CPU once printf was gone): m x 10^k with m below 2^53 and |k| <= 22 is
 * one correctly rounded multiplication or division of two exact doubles,
 * so computing it is what strtod would read (Clinger's fast path); other
 * exponents still ask strtod. 17 correctly rounded digits always read
 * back. With 15 digits there is at most one decimal of that length that
 * reads back, so the text is printf's %.15g whenever that reads back. */
#include "msprobe/common.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DT_MIN10 (-340)
#define DT_MAX10 340

static long double dt_pow10[DT_MAX10 - DT_MIN10 + 1];
static pthread_once_t dt_once = PTHREAD_ONCE_INIT;

static void dt_init(void)
{
    for (int k = DT_MIN10; k <= DT_MAX10; k++)
        dt_pow10[k - DT_MIN10] = powl(10.0L, (long double)k);
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

/* a (> 0, normal) as m x 10^(e - prec + 1), m of exactly prec digits,
 * correctly rounded; 0 when the scaled value sits too near a tie for the
 * multiplication's error (below 2e-19 of it, guarded at 3e-19) to leave the
 * rounding certain. */
static int dt_digits(double a, int prec, uint64_t *m, int *e)
{
    int e2;
    frexp(a, &e2);
    int x = (int)floor((e2 - 1) * 0.30102999566398120); /* floor(log10 a), or one below */
    for (int tries = 0; tries < 3; tries++) {
        int k = prec - 1 - x;
        if (k < DT_MIN10 || k > DT_MAX10)
            return 0;
        long double s = (long double)a * dt_pow10[k - DT_MIN10];
        if (s >= (long double)dt_ten[prec]) {
            x++;
            continue;
        }
        if (s < (long double)dt_ten[prec - 1]) {
            x--;
            continue;
        }
        long double fl = floorl(s), frac = s - fl;
        long double guard = (long double)dt_ten[prec] * 3e-19L;
        if (frac > 0.5L - guard && frac < 0.5L + guard)
            return 0; /* a tie, or too near one for these digits */
        uint64_t r = (uint64_t)fl + (frac > 0.5L);
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
    char d[24];
    for (int i = prec - 1; i >= 0; i--) {
        d[i] = (char)('0' + m % 10);
        m /= 10;
    }
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
        n += (size_t)snprintf(buf + n, 8, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
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

/* Whether m x 10^k (m of 15 digits, a > 0) reads back as a, worked out
 * without strtod where one IEEE operation of two exact doubles gives it. */
static int dt_15_reads_back(uint64_t m, int k, double a, const char *text)
{
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
    static const double p10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    if (k >= -22 && k <= 22) {
        volatile double d = (double)m; /* exact: m < 10^15 < 2^53 */
        double back = k >= 0 ? d * p10[k] : d / p10[-k];
        return !(back < a) && !(back > a);
    }
#endif
    return dt_reads_back(text, a);
}

size_t msp_dtoa(double v, char *buf)
{
    double a = fabs(v);
    if (isfinite(v) && a >= DBL_MIN) {
        pthread_once(&dt_once, dt_init);
        uint64_t m;
        int e;
        if (dt_digits(a, 15, &m, &e)) {
            size_t n = dt_format(buf, v < 0, m, e, 15);
            if (dt_15_reads_back(m, e - 14, a, buf + (v < 0)))
                return n;
            if (dt_digits(a, 17, &m, &e))
                return dt_format(buf, v < 0, m, e, 17);
        }
    }
    /* zero, subnormals, NaN, Inf, and what the fast digits could not serve */
    int n = snprintf(buf, MSP_DTOA_SIZE, "%.15g", v);
    if (isfinite(v) && !dt_reads_back(buf, v))
        n = snprintf(buf, MSP_DTOA_SIZE, "%.17g", v);
    return (size_t)n;
}

size_t msp_fmt_g15(double v, char *buf)
{
    double a = fabs(v);
    if (isfinite(v) && a >= DBL_MIN) {
        pthread_once(&dt_once, dt_init);
        uint64_t m;
        int e;
        if (dt_digits(a, 15, &m, &e))
            return dt_format(buf, v < 0, m, e, 15);
    }
    return (size_t)snprintf(buf, MSP_DTOA_SIZE, "%.15g", v);
}
