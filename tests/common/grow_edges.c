/* msp_grow: growth keeps old items, zeroes new slots, and refuses a size that
 * would overflow instead of wrapping around. msp_str_add: text appended,
 * cut to fit with its NUL, and the cut reported; msp_str_hash: texts told
 * apart. Expected values by hand. */
#include "msprobe/common.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msp_check.h"

int main(void)
{
    size_t cap = 0;
    int *v = NULL;
    for (int i = 0; i < 100; i++) {
        int *nv = msp_grow(v, &cap, (size_t)i, sizeof *nv, 4);
        CHECK(nv != NULL);
        if (!nv)
            return 1;
        v = nv;
        CHECK(v[i] == 0); /* a fresh slot is zero */
        v[i] = i * 3;
    }
    CHECK(cap == 128); /* 4, 8, ..., 128: the first power-of-two multiple of 4 above 99 */
    for (int i = 0; i < 100; i++)
        CHECK(v[i] == i * 3);
    CHECK(msp_grow(v, &cap, 50, sizeof *v, 4) == v); /* room already: unchanged */
    CHECK(cap == 128);

    size_t big = 0;
    CHECK(msp_grow(NULL, &big, SIZE_MAX / 2, 16, 4) == NULL); /* bytes would overflow */
    CHECK(big == 0);
    CHECK(msp_grow(v, &cap, SIZE_MAX - 1, 1, 4) == NULL); /* count would overflow */
    CHECK(cap == 128 && v[99] == 297);                    /* and the array is intact */
    free(v);

    char buf[8];
    size_t at = 0;
    CHECK(msp_str_add(buf, sizeof buf, &at, "@") == 0 && at == 1);
    CHECK(msp_str_add(buf, sizeof buf, &at, "") == 0 && at == 1 && strcmp(buf, "@") == 0);
    CHECK(msp_str_add(buf, sizeof buf, &at, "abcdef") == 0 && at == 7);
    CHECK(strcmp(buf, "@abcdef") == 0); /* 7 bytes and the NUL: exactly full */
    CHECK(msp_str_add(buf, sizeof buf, &at, "x") == -1 && at == 7 && strcmp(buf, "@abcdef") == 0);
    at = 3;
    CHECK(msp_str_add(buf, sizeof buf, &at, "123456") == -1 && at == 7);
    CHECK(strcmp(buf, "@ab1234") == 0); /* cut after 4 of 6 */
    at = 8;                             /* no room at all: nothing written */
    CHECK(msp_str_add(buf, sizeof buf, &at, "y") == -1 && at == 8 && strcmp(buf, "@ab1234") == 0);

    /* msp_str_hash: the same text and seed, the same hash; a byte anywhere
     * (the first word, the tail after the last whole word), the length or
     * the seed changes it */
    CHECK(msp_str_hash("Functional.relu.0.forward", 3) ==
          msp_str_hash("Functional.relu.0.forward", 3));
    CHECK(msp_str_hash("Functional.relu.0.forward", 3) !=
          msp_str_hash("Functional.relu.0.forward", 4));
    CHECK(msp_str_hash("abcdefgh1", 0) != msp_str_hash("abcdefgh2", 0));
    CHECK(msp_str_hash("xbcdefgh1", 0) != msp_str_hash("abcdefgh1", 0));
    CHECK(msp_str_hash("abcdefgh", 0) != msp_str_hash("abcdefghabcdefgh", 0));
    CHECK(msp_str_hash("a", 0) != msp_str_hash("a\x01", 0));
    CHECK(msp_str_hash("", 0) != msp_str_hash("", 1));
    if (failures)
        return 1;
    printf("msp_grow, msp_str_add, msp_str_hash: all checks passed\n");
    return 0;
}
