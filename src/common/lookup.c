/* Finding things in memory, written once for every module: msp_lower_bound
 * (where a key is, or goes, in a sorted array), msp_sort (a sort that
 * checks first) and msp_index (an
 * open-addressing hash table of indexes into an array its caller owns). Both
 * leave the items' layout and their comparison to the caller, so one code
 * serves records sorted by (step, rank, name), rows sorted by name, ranges of
 * tensors, a dump writer's names and roles, the shim's links and
 * merge_result's rows. */
#include "msprobe/common.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void msp_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    const char *p = base;
    size_t i = 1;
    while (i < n && cmp(p + (i - 1) * size, p + i * size) <= 0)
        i++;
    if (i < n)
        qsort(base, n, size, cmp);
}

int msp_size_cmp(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

size_t msp_lower_bound(size_t n, msp_before_fn before, const void *ctx)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (before(ctx, mid))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

size_t msp_index_find(const msp_index_t *t, uint64_t h, msp_index_eq_fn eq, const void *ctx)
{
    if (!t->cap)
        return SIZE_MAX;
    size_t mask = t->cap - 1;
    for (size_t i = (size_t)h & mask; t->slot[i].idx1; i = (i + 1) & mask)
        if (t->slot[i].hash == h && eq(ctx, t->slot[i].idx1 - 1))
            return t->slot[i].idx1 - 1;
    return SIZE_MAX;
}

/* Places (h, idx1) in the first free slot of its probe sequence. */
static void msp_index_place(struct msp_index_slot *slot, size_t cap, uint64_t h, size_t idx1)
{
    size_t i = (size_t)h & (cap - 1);
    while (slot[i].idx1)
        i = (i + 1) & (cap - 1);
    slot[i] = (struct msp_index_slot){h, idx1};
}

int msp_index_reserve(msp_index_t *t, size_t n)
{
    if (n > SIZE_MAX / 4)
        return -1;
    if (2 * n < t->cap)
        return 0;
    size_t cap = t->cap ? t->cap : 64;
    while (2 * n >= cap) {
        if (cap > SIZE_MAX / 2 / sizeof *t->slot)
            return -1;
        cap *= 2;
    }
    struct msp_index_slot *s = calloc(cap, sizeof *s);
    if (!s)
        return -1;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slot[i].idx1)
            msp_index_place(s, cap, t->slot[i].hash, t->slot[i].idx1);
    free(t->slot);
    t->slot = s;
    t->cap = cap;
    return 0;
}

int msp_index_put(msp_index_t *t, uint64_t h, size_t idx)
{
    if (idx >= SIZE_MAX - 1 || msp_index_reserve(t, t->n + 1))
        return -1;
    msp_index_place(t->slot, t->cap, h, idx + 1);
    t->n++;
    return 0;
}

int msp_index_set(msp_index_t *t, uint64_t h, msp_index_eq_fn eq, const void *ctx, size_t idx)
{
    if (idx >= SIZE_MAX - 1)
        return -1;
    size_t mask = t->cap ? t->cap - 1 : 0;
    for (size_t i = (size_t)h & mask; t->cap && t->slot[i].idx1; i = (i + 1) & mask)
        if (t->slot[i].hash == h && eq(ctx, t->slot[i].idx1 - 1)) {
            t->slot[i].idx1 = idx + 1;
            return 0;
        }
    return msp_index_put(t, h, idx);
}

void msp_index_clear(msp_index_t *t)
{
    if (t->slot)
        memset(t->slot, 0, t->cap * sizeof *t->slot);
    t->n = 0;
}

void msp_index_free(msp_index_t *t)
{
    free(t->slot);
    *t = (msp_index_t){0};
}
