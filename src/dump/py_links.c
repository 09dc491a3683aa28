/* Producer links (msprobe-dump(5)): which earlier forward output of this
 * step a tensor given to a call is, as "RECORD/ROLE". py_tensor.c notes each
 * output it reads and looks each input up, as the record's links say. */
#include "dump_py.h"

#include <stdlib.h>
#include <string.h>

/* Within a dumped step, every forward output written is noted as
 * (weakref to the tensor, "RECORD/ROLE", _version) under two keys: the
 * object's id, and (data pointer, shape). A later forward input is linked to
 * the entry for its own object (alive: the weakref still points at it), else
 * to the entry for its storage and shape when that output is still alive (so
 * its memory cannot have been reused) and the version counter has not moved.
 * Later notes replace earlier ones: the outermost wrapper, which finishes
 * last, wins. Only weak references: the table keeps no tensor alive.
 *
 * The tables are C (msp_index on entry numbers; names and shapes in
 * growing arrays), not Python dicts of tuples: a note cost a formatted str,
 * a tuple, a key tuple of ints and two dict stores, ~2400 times a step on a
 * loop of small ops. */
typedef struct link_entry {
    PyObject *ref;   /* weak reference to the output */
    const void *id;  /* the object, as its id */
    const void *ptr; /* its data */
    int64_t version;
    int ndim;
    size_t shape_at, name_at; /* into g_links.shapes, g_links.names */
} link_entry_t;

static struct {
    int64_t step;
    link_entry_t *e;
    size_t n, cap;
    msp_index_t by_id, by_mem; /* entry numbers by id, by (data pointer, shape) */
    int64_t *shapes;
    size_t nshapes, cap_shapes;
    char *names;
    size_t nnames, cap_names;
} g_links = {.step = -1};

void msp_links_reset(void)
{
    for (size_t i = 0; i < g_links.n; i++)
        Py_XDECREF(g_links.e[i].ref);
    g_links.n = g_links.nshapes = g_links.nnames = 0;
    msp_index_clear(&g_links.by_id);
    msp_index_clear(&g_links.by_mem);
}

static uint64_t mem_hash(const void *ptr, int ndim, const int64_t *shape)
{
    uint64_t h = msp_mix64((uint64_t)(uintptr_t)ptr);
    for (int i = 0; i < ndim; i++)
        h = msp_mix64(h ^ (uint64_t)shape[i]) + (uint64_t)i;
    return h;
}

/* A key of either table: the object (id), or its data pointer and shape. */
typedef struct {
    const void *id, *ptr;
    int ndim;
    const int64_t *shape;
} link_key_t;

static int id_equal(const void *ctx, size_t i)
{
    return g_links.e[i].id == ((const link_key_t *)ctx)->id;
}

static int mem_equal(const void *ctx, size_t i)
{
    const link_key_t *k = ctx;
    const link_entry_t *e = &g_links.e[i];
    return e->ptr == k->ptr && e->ndim == k->ndim &&
           (k->ndim == 0 || memcmp(g_links.shapes + e->shape_at, k->shape,
                                   (size_t)k->ndim * sizeof *k->shape) == 0);
}

static uint64_t id_hash(const void *id)
{
    return msp_mix64((uint64_t)(uintptr_t)id);
}

void msp_link_note(const char *rec, const char *role, PyObject *t, const void *ptr, int ndim,
                   const int64_t *shape)
{
    if (g_links.step != msp_g.step) {
        msp_links_reset();
        g_links.step = msp_g.step;
    }
    size_t lr = strlen(rec), lo = strlen(role);
    if (g_links.n >= UINT32_MAX - 1 || msp_index_reserve(&g_links.by_id, g_links.n + 1) ||
        msp_index_reserve(&g_links.by_mem, g_links.n + 1))
        return;
    link_entry_t *ne = msp_grow(g_links.e, &g_links.cap, g_links.n, sizeof *ne, 256);
    if (!ne)
        return;
    g_links.e = ne;
    /* room for items nshapes .. nshapes + ndim - 1, and the name with its '/' and NUL */
    int64_t *ns = msp_grow(g_links.shapes, &g_links.cap_shapes, g_links.nshapes + (size_t)ndim,
                           sizeof *ns, 256);
    if (!ns)
        return;
    g_links.shapes = ns;
    char *nn = msp_grow(g_links.names, &g_links.cap_names, g_links.nnames + lr + lo + 1, 1, 256);
    if (!nn)
        return;
    g_links.names = nn;
    PyObject *ref = PyWeakref_NewRef(t, NULL);
    if (!ref) {
        PyErr_Clear();
        return;
    }
    link_entry_t *e = &g_links.e[g_links.n];
    e->ref = ref;
    e->id = t;
    e->ptr = ptr;
    e->version = msp_tensor_version(t);
    e->ndim = ndim;
    e->shape_at = g_links.nshapes;
    if (ndim > 0)
        memcpy(g_links.shapes + g_links.nshapes, shape, (size_t)ndim * sizeof *shape);
    g_links.nshapes += (size_t)ndim;
    e->name_at = g_links.nnames;
    char *name = g_links.names + g_links.nnames;
    memcpy(name, rec, lr);
    name[lr] = '/';
    memcpy(name + lr + 1, role, lo + 1);
    g_links.nnames += lr + lo + 2;
    /* a later note of a key replaces the earlier (both tables have room) */
    link_key_t key = {t, ptr, ndim, shape};
    msp_index_set(&g_links.by_id, id_hash(t), id_equal, &key, g_links.n);
    msp_index_set(&g_links.by_mem, mem_hash(ptr, ndim, shape), mem_equal, &key, g_links.n);
    g_links.n++;
}

/* The entry's tensor when it is still alive, borrowed; NULL otherwise. */
static PyObject *entry_alive(const link_entry_t *e)
{
    PyObject *o = PyWeakref_GetObject(e->ref);
    return o && o != Py_None ? o : NULL;
}

/* "RECORD/ROLE" of the output t is (in the links' own storage, valid until
 * the next note), or NULL. */
const char *msp_link_find(PyObject *t, const void *ptr, int ndim, const int64_t *shape)
{
    if (g_links.step != msp_g.step || !g_links.n)
        return NULL;
    const link_entry_t *hit = NULL;
    link_key_t key = {t, ptr, ndim, shape};
    size_t k = msp_index_find(&g_links.by_id, id_hash(t), id_equal, &key);
    if (k != SIZE_MAX && entry_alive(&g_links.e[k]) == t) {
        hit = &g_links.e[k];
    } else {
        k = msp_index_find(&g_links.by_mem, mem_hash(ptr, ndim, shape), mem_equal, &key);
        const link_entry_t *m = k != SIZE_MAX ? &g_links.e[k] : NULL;
        if (m && entry_alive(m) && m->version >= 0 && m->version == msp_tensor_version(t))
            hit = m;
    }
    if (PyErr_Occurred())
        PyErr_Clear();
    return hit ? g_links.names + hit->name_at : NULL;
}
