/* Checks for the unit tests (tests/unit): msp_check.h's CHECK, and checks
 * that print what they got beside what they wanted (numbers, strings, a
 * text's part), so that a failure says enough to act on without a debugger.
 * Every wanted value is written in the test by hand or from a documented
 * rule, never taken from the code under test. */
#ifndef MSP_UNIT_CHECK_H
#define MSP_UNIT_CHECK_H

#include "msp_check.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* got equals want within a relative rel (rel 0: exactly); two NaNs are
 * equal, and so are two infinities of one sign. */
static inline void unit_check_num(const char *file, int line, const char *expr, double got,
                                  double want, double rel)
{
    int ok;
    if (isnan(want) || isnan(got))
        ok = isnan(want) && isnan(got);
    else if (isinf(want) || isinf(got))
        ok = isinf(want) && isinf(got) && (want > 0) == (got > 0);
    else
        ok = !(fabs(got - want) > rel * fabs(want));
    if (!ok) {
        fprintf(stderr, "%s:%d: check failed: %s: got %.17g, want %.17g (rel %g)\n", file, line,
                expr, got, want, rel);
        failures++;
    }
}

static inline void unit_check_int(const char *file, int line, const char *expr, long long got,
                                  long long want)
{
    if (got != want) {
        fprintf(stderr, "%s:%d: check failed: %s: got %lld, want %lld\n", file, line, expr, got,
                want);
        failures++;
    }
}

/* Equal strings; NULL equals only NULL. */
static inline void unit_check_str(const char *file, int line, const char *expr, const char *got,
                                  const char *want)
{
    if (!got != !want || (got && strcmp(got, want) != 0)) {
        fprintf(stderr, "%s:%d: check failed: %s: got \"%s\", want \"%s\"\n", file, line, expr,
                got ? got : "(null)", want ? want : "(null)");
        failures++;
    }
}

/* part occurs in text. */
static inline void unit_check_has(const char *file, int line, const char *expr, const char *text,
                                  const char *part)
{
    if (!text || !strstr(text, part)) {
        fprintf(stderr, "%s:%d: check failed: %s holds \"%s\": it is \"%s\"\n", file, line, expr,
                part, text ? text : "(null)");
        failures++;
    }
}

#define CHECK_NEAR(got, want, rel) unit_check_num(__FILE__, __LINE__, #got, (got), (want), (rel))
#define CHECK_NUM(got, want) unit_check_num(__FILE__, __LINE__, #got, (got), (want), 0.0)
#define CHECK_INT(got, want)                                                                       \
    unit_check_int(__FILE__, __LINE__, #got, (long long)(got), (long long)(want))
#define CHECK_STR(got, want) unit_check_str(__FILE__, __LINE__, #got, (got), (want))
#define CHECK_HAS(text, part) unit_check_has(__FILE__, __LINE__, #text, (text), (part))

/* The end of a test's main: the count of failed checks decides. */
static inline int unit_done(const char *what)
{
    if (failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", what, failures);
        return 1;
    }
    printf("%s: all checks passed\n", what);
    return 0;
}

#endif
