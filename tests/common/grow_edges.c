/* msp_grow: growth keeps old items, zeroes new slots, and refuses a size that
 * would overflow instead of wrapping around. Expected values by hand. */
#include "msprobe/common.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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
    if (failures)
        return 1;
    printf("msp_grow: all checks passed\n");
    return 0;
}
