/* common's decimal digits (msp_u64_digits, msp_i64_digits: src/common/fsutil.c)
 * as printf's %llu and %lld write them: every power of ten and its
 * neighbours, both ends of each type, and a million values of every
 * length. */
#include "msprobe/common.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "msp_rand.h"
#include "unit_check.h"

static size_t bad;

/* got (n bytes) against printf's want */
static void check_text(const char *got, size_t n, const char *want)
{
    if ((strlen(want) != n || memcmp(got, want, n) != 0) && bad++ < 10)
        fprintf(stderr, "%s: got '%.*s'\n", want, (int)n, got);
}

static void check_u(uint64_t v)
{
    char got[32], want[32];
    snprintf(want, sizeof want, "%" PRIu64, v);
    check_text(got, msp_u64_digits(got, v), want);
}

static void check_i(int64_t v)
{
    char got[32], want[32];
    snprintf(want, sizeof want, "%" PRId64, v);
    check_text(got, msp_i64_digits(got, v), want);
}

int main(void)
{
    uint64_t p = 1;
    for (int k = 0; k < 20; k++, p *= 10)
        for (int d = -1; d <= 1; d++) {
            check_u(p + (uint64_t)d);
            check_i((int64_t)(p + (uint64_t)d));
            check_i(-(int64_t)(p + (uint64_t)d));
        }
    check_u(UINT64_MAX);
    check_i(INT64_MAX);
    check_i(INT64_MIN);
    uint64_t state = MSP_RAND_SEED;
    for (int i = 0; i < 1000000; i++) {
        uint64_t x = msp_xorshift64(&state);
        check_u(x >> (x % 64)); /* every length, from one digit to twenty */
        check_i((int64_t)(x >> (x % 64)) * (x & 1 ? -1 : 1));
    }
    CHECK(bad == 0);
    printf("%zu wrong\n", bad);
    return failures ? 1 : 0;
}
