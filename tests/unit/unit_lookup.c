/* common's lookups (src/common/lookup.c, include/msprobe/common.h):
 * msp_lower_bound against a linear scan worked out here for every key of
 * sorted arrays with repeats, and msp_index against a plain array searched
 * by hand: finds, misses, colliding hashes, a later item replacing an
 * earlier (msp_index_set), growth to 100000 entries, and clearing. */
#include "msprobe/common.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unit_check.h"

/* ---- msp_lower_bound ------------------------------------------------------------ */

struct ints {
    const int *v;
    int key;
};

static int int_before(const void *ctx, size_t i)
{
    const struct ints *k = ctx;
    return k->v[i] < k->key;
}

/* The first index whose item is not below key, by a scan. */
static size_t scan_lower(const int *v, size_t n, int key)
{
    size_t i = 0;
    while (i < n && v[i] < key)
        i++;
    return i;
}

static void lower_bound_cases(void)
{
    static const int v[] = {1, 3, 3, 3, 7, 9, 9, 12};
    const size_t n = sizeof v / sizeof v[0];
    for (size_t len = 0; len <= n; len++) /* every prefix, so odd and even sizes, and empty */
        for (int key = -1; key <= 14; key++) {
            struct ints k = {v, key};
            size_t got = msp_lower_bound(len, int_before, &k);
            if (got != scan_lower(v, len, key)) {
                fprintf(stderr, "lower bound of %d in the first %zu: got %zu, want %zu\n", key, len,
                        got, scan_lower(v, len, key));
                failures++;
            }
        }
    struct ints k3 = {v, 3}, k9 = {v, 9}, big = {v, 100}, small = {v, -5};
    CHECK_INT(msp_lower_bound(n, int_before, &k3), 1); /* the first of the three 3s */
    CHECK_INT(msp_lower_bound(n, int_before, &k9), 5);
    CHECK_INT(msp_lower_bound(n, int_before, &big), n); /* past the end */
    CHECK_INT(msp_lower_bound(n, int_before, &small), 0);
}

/* ---- msp_index ------------------------------------------------------------------ */

static char names[100000][16];

struct name_key {
    const char *name;
};

static int name_is(const void *ctx, size_t i)
{
    return strcmp(names[i], ((const struct name_key *)ctx)->name) == 0;
}

static size_t find(const msp_index_t *t, uint64_t h, const char *name)
{
    struct name_key k = {name};
    return msp_index_find(t, h, name_is, &k);
}

/* Every key's hash is 7: all collide, so only eq tells them apart. */
static void index_collisions(void)
{
    msp_index_t t = {0};
    CHECK_INT(find(&t, 7, "a"), SIZE_MAX); /* an empty index finds nothing */
    for (int i = 0; i < 40; i++) {
        snprintf(names[i], sizeof names[i], "k%d", i);
        CHECK_INT(msp_index_put(&t, 7, (size_t)i), 0);
    }
    CHECK_INT(t.n, 40);
    CHECK(t.cap > 80); /* at most half full */
    CHECK_INT(find(&t, 7, "k0"), 0);
    CHECK_INT(find(&t, 7, "k39"), 39);
    CHECK_INT(find(&t, 7, "k40"), SIZE_MAX);
    CHECK_INT(find(&t, 8, "k3"), SIZE_MAX); /* the right name under another hash: not there */
    /* a later item with name k5 (index 41) replaces index 5 */
    snprintf(names[41], sizeof names[41], "k5");
    struct name_key k5 = {"k5"};
    CHECK_INT(msp_index_set(&t, 7, name_is, &k5, 41), 0);
    CHECK_INT(t.n, 40); /* replaced, not added */
    CHECK_INT(find(&t, 7, "k5"), 41);
    snprintf(names[42], sizeof names[42], "new");
    struct name_key kn = {"new"};
    CHECK_INT(msp_index_set(&t, 7, name_is, &kn, 42), 0); /* not there: added */
    CHECK_INT(t.n, 41);
    CHECK_INT(find(&t, 7, "new"), 42);
    msp_index_clear(&t);
    CHECK_INT(t.n, 0);
    CHECK_INT(find(&t, 7, "k0"), SIZE_MAX);
    CHECK_INT(msp_index_put(&t, 7, 3), 0); /* usable after clearing */
    CHECK_INT(find(&t, 7, "k3"), 3);
    msp_index_free(&t);
    CHECK(t.slot == NULL && t.cap == 0 && t.n == 0);
}

/* 100000 names by msp_str_hash: each found at its own index after every
 * growth, and names never put are missed. */
static void index_growth(void)
{
    msp_index_t t = {0};
    const size_t n = sizeof names / sizeof names[0];
    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "Torch.mul.%zu", i);
        if (msp_index_put(&t, msp_str_hash(names[i], 0), i) != 0) {
            failures++;
            break;
        }
    }
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++)
        wrong += find(&t, msp_str_hash(names[i], 0), names[i]) != i;
    CHECK_INT(wrong, 0);
    char other[32];
    size_t found = 0;
    for (size_t i = n; i < n + 1000; i++) {
        snprintf(other, sizeof other, "Torch.mul.%zu", i);
        found += find(&t, msp_str_hash(other, 0), other) != SIZE_MAX;
    }
    CHECK_INT(found, 0);
    CHECK_INT(t.n, n);
    CHECK(t.cap >= 2 * n && (t.cap & (t.cap - 1)) == 0); /* a power of two, half full at most */
    msp_index_free(&t);
}

int main(void)
{
    lower_bound_cases();
    index_collisions();
    index_growth();
    return unit_done("unit_lookup");
}
