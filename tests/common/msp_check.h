/* CHECK for the C tests: a failed condition is printed with its place and
 * counted in `failures`, and the test goes on; main returns failures != 0. */
#ifndef MSP_TEST_CHECK_H
#define MSP_TEST_CHECK_H

#include <stdio.h>

static int failures;
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#endif
