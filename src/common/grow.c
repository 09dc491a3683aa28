/* The one doubling-array growth every module uses, overflow-checked once here. */
#include "msprobe/common.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void *msp_grow(void *items, size_t *cap, size_t n, size_t elem, size_t first_cap)
{
    if (n < *cap)
        return items;
    size_t c = *cap ? *cap : (first_cap ? first_cap : 16);
    while (c <= n) {
        if (c > SIZE_MAX / 2)
            return NULL;
        c *= 2;
    }
    if (elem && c > SIZE_MAX / elem)
        return NULL;
    char *q = realloc(items, c * elem);
    if (!q)
        return NULL;
    memset(q + *cap * elem, 0, (c - *cap) * elem);
    *cap = c;
    return q;
}
