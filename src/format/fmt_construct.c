/* msprobe's construct.json for msprobe export: each record of a step mapped
 * to the module record it ran inside, or null. msprobe writes it only at
 * levels L0 and mix ({} at L1, see its DataCollector.update_construct), and
 * its graph_visualize builds the model's tree from it. Our dump keeps the
 * parent of a forward record as its "parent" attribute in tensor dumps; in
 * statistics dumps, where records carry no attribute, the module records'
 * [order_begin, order) ranges say the same (msprobe-dump(5)). */
#include "fmt_construct.h"

#include <stdlib.h>
#include <string.h>

msp_err msp_xconstruct_note(msp_xconstruct_t *c, const char *name, int64_t order,
                            const char *parent, int64_t order_begin)
{
    msp_xnode_t *v = msp_grow(c->v, &c->cap, c->n, sizeof *v, 64);
    if (!v)
        return msp_fail(MSP_ERR_NOMEM, "export: out of memory");
    c->v = v;
    msp_xnode_t *e = &v[c->n];
    e->name = strdup(name);
    e->parent = parent ? strdup(parent) : NULL;
    e->order = order;
    e->order_begin = order_begin;
    if (!e->name || (parent && !e->parent)) {
        free(e->name);
        free(e->parent);
        return msp_fail(MSP_ERR_NOMEM, "export: out of memory");
    }
    c->n++;
    return MSP_OK;
}

void msp_xconstruct_free(msp_xconstruct_t *c)
{
    for (size_t i = 0; c && i < c->n; i++) {
        free(c->v[i].name);
        free(c->v[i].parent);
    }
    if (c) {
        free(c->v);
        memset(c, 0, sizeof *c);
    }
}

/* A module record's name: "Module.<path>.<Class>.<forward|backward>.<N>". */
static int is_module(const char *name)
{
    return strncmp(name, "Module.", 7) == 0;
}

/* The position of the direction word in name (".forward" or ".backward"
 * before the trailing call index of a module, or at the end of an API
 * record), or NULL when name has neither. */
static const char *direction_at(const char *name, const char *word)
{
    size_t n = strlen(name), w = strlen(word);
    if (!is_module(name))
        return n > w && strcmp(name + n - w, word) == 0 ? name + n - w : NULL;
    const char *dot = strrchr(name, '.');
    if (!dot || dot - name < (ptrdiff_t)w || strncmp(dot - w, word, w) != 0)
        return NULL;
    for (const char *d = dot + 1; *d; d++)
        if (*d < '0' || *d > '9')
            return NULL;
    return dot[1] ? dot - w : NULL;
}

/* name with its direction word `from` replaced by `to`, malloc'd; NULL when
 * name has no such word or out of memory. */
static char *swap_direction(const char *name, const char *from, const char *to)
{
    const char *at = direction_at(name, from);
    if (!at)
        return NULL;
    return msp_asprintf("%.*s%s%s", (int)(at - name), name, to, at + strlen(from));
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(msp_xnode_t *const *)a)->name, (*(msp_xnode_t *const *)b)->name);
}

static int by_order(const void *a, const void *b)
{
    const msp_xnode_t *x = *(msp_xnode_t *const *)a, *y = *(msp_xnode_t *const *)b;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Outer modules first where two begin at the same order (the outer one ends
 * later), so the stack below holds the inner one on top. */
static int by_begin(const void *a, const void *b)
{
    const msp_xnode_t *x = *(msp_xnode_t *const *)a, *y = *(msp_xnode_t *const *)b;
    if (x->order_begin != y->order_begin)
        return x->order_begin < y->order_begin ? -1 : 1;
    return x->order > y->order ? -1 : x->order < y->order;
}

static const msp_xnode_t *find(msp_xnode_t **sorted, size_t n, const char *name)
{
    msp_xnode_t key = {.name = (char *)name}, *k = &key;
    msp_xnode_t **hit = bsearch(&k, sorted, n, sizeof *sorted, by_name);
    return hit ? *hit : NULL;
}

/* Each forward record without a parent attribute gets the innermost module
 * forward whose [order_begin, order) holds its order: one sweep over the
 * records in order, with the modules open at that point on a stack (the
 * ranges of one thread nest). parent[i] is set for node i (borrowed names). */
static msp_err infer_parents(const msp_xconstruct_t *c, const char **parent)
{
    msp_xnode_t **rec = malloc((c->n + 1) * sizeof *rec), **mod = malloc((c->n + 1) * sizeof *mod);
    msp_xnode_t **stack = malloc((c->n + 1) * sizeof *stack);
    msp_err rc = MSP_OK;
    if (!rec || !mod || !stack) {
        rc = msp_fail(MSP_ERR_NOMEM, "export: out of memory");
        goto cleanup;
    }
    size_t nr = 0, nm = 0, top = 0, next = 0;
    for (size_t i = 0; i < c->n; i++) {
        rec[nr++] = &c->v[i];
        if (c->v[i].order_begin >= 0 && direction_at(c->v[i].name, ".forward"))
            mod[nm++] = &c->v[i];
    }
    qsort(rec, nr, sizeof *rec, by_order);
    qsort(mod, nm, sizeof *mod, by_begin);
    for (size_t i = 0; i < nr; i++) {
        int64_t o = rec[i]->order;
        while (next < nm && mod[next]->order_begin <= o) {
            while (top && stack[top - 1]->order <= mod[next]->order_begin)
                top--;
            stack[top++] = mod[next++];
        }
        while (top && stack[top - 1]->order <= o)
            top--;
        size_t at = (size_t)(rec[i] - c->v);
        if (!parent[at] && direction_at(rec[i]->name, ".forward") && top)
            parent[at] = stack[top - 1]->name;
    }
cleanup:
    free(rec);
    free(mod);
    free(stack);
    return rc;
}

/* A backward record's parent: the backward record of its forward's parent,
 * when the dump holds one (msprobe's on torch 2, where module backward
 * records exist; null otherwise, as msprobe writes on torch 1.13). */
static const char *backward_parent(const msp_xconstruct_t *c, msp_xnode_t **sorted,
                                   const char **parent, const char *name)
{
    char *fwd = swap_direction(name, ".backward", ".forward");
    const msp_xnode_t *f = fwd ? find(sorted, c->n, fwd) : NULL;
    free(fwd);
    const char *fp = f ? parent[f - c->v] : NULL;
    char *bp = fp ? swap_direction(fp, ".forward", ".backward") : NULL;
    const msp_xnode_t *b = bp ? find(sorted, c->n, bp) : NULL;
    free(bp);
    return b ? b->name : NULL;
}

msp_err msp_xconstruct_build(const msp_xconstruct_t *c, const char *level, cJSON **out)
{
    msp_err rc = MSP_OK;
    const char **parent = NULL;
    msp_xnode_t **sorted = NULL;
    cJSON *o = cJSON_CreateObject();
    *out = NULL;
    if (!o)
        return msp_fail(MSP_ERR_NOMEM, "export: out of memory");
    if (strcmp(level, "L1") == 0 || c->n == 0)
        goto done;
    parent = calloc(c->n, sizeof *parent);
    sorted = malloc(c->n * sizeof *sorted);
    if (!parent || !sorted) {
        rc = msp_fail(MSP_ERR_NOMEM, "export: out of memory");
        goto done;
    }
    for (size_t i = 0; i < c->n; i++) {
        parent[i] = c->v[i].parent;
        sorted[i] = &c->v[i];
    }
    qsort(sorted, c->n, sizeof *sorted, by_name);
    if ((rc = infer_parents(c, parent)))
        goto done;
    for (size_t i = 0; i < c->n; i++) {
        const char *p = parent[i];
        if (!p && direction_at(c->v[i].name, ".backward"))
            p = backward_parent(c, sorted, parent, c->v[i].name);
        cJSON *v = p ? cJSON_CreateString(p) : cJSON_CreateNull();
        if (!v || !cJSON_AddItemToObject(o, c->v[i].name, v)) {
            cJSON_Delete(v);
            rc = msp_fail(MSP_ERR_NOMEM, "export: out of memory");
            goto done;
        }
    }
done:
    free(parent);
    free(sorted);
    if (rc)
        cJSON_Delete(o);
    else
        *out = o;
    return rc;
}
