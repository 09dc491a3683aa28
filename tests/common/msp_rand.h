/* A fixed-seed generator for the C tests and fuzzers (xorshift64): the same
 * sequence on every machine, so a failure reproduces from its iteration. */
#ifndef MSP_TEST_RAND_H
#define MSP_TEST_RAND_H

#include <stdint.h>
#include <string.h>

#define MSP_RAND_SEED 0x9E3779B97F4A7C15ull

/* The next value of the sequence *state (never 0 from a nonzero seed). */
static inline uint64_t msp_xorshift64(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

/* The double whose bits are b (a random pattern read as a value), and the
 * bits of v. */
static inline double msp_double_of(uint64_t b)
{
    double v;
    memcpy(&v, &b, sizeof v);
    return v;
}

static inline uint64_t msp_bits_of(double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}

#endif
