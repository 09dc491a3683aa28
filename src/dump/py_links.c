/* Producer links (msprobe-dump(5)): which earlier forward output of this
 * step a tensor given to a call is, as "RECORD/ROLE". py_tensor.c notes each
 * output it reads and looks each input up, while msp_t_links says so. */
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
 * The tables are C (open addressing on entry numbers; names and shapes in
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
    uint64_t mem_hash;
} link_entry_t;

static struct {
    int64_t step;
    link_entry_t *e;
    size_t n, cap;
    uint32_t *by_id, *by_mem; /* entry number + 1; 0: empty */
    size_t slots;             /* a power of two, > 2 n */
    int64_t *shapes;
    size_t nshapes, cap_shapes;
    char *names;
    size_t nnames, cap_names;
} g_links = {-1, NULL, 0, 0, NULL, NULL, 0, NULL, 0, 0, NULL, 0, 0};

void msp_links_reset(void)
{
    for (size_t i = 0; i < g_links.n; i++)
        Py_XDECREF(g_links.e[i].ref);
    g_links.n = g_links.nshapes = g_links.nnames = 0;
    if (g_links.slots) {
        memset(g_links.by_id, 0, g_links.slots * sizeof *g_links.by_id);
        memset(g_links.by_mem, 0, g_links.slots * sizeof *g_links.by_mem);
    }
}

static uint64_t mem_hash(const void *ptr, int ndim, const int64_t *shape)
{
    uint64_t h = msp_mix64((uint64_t)(uintptr_t)ptr);
    for (int i = 0; i < ndim; i++)
        h = msp_mix64(h ^ (uint64_t)shape[i]) + (uint64_t)i;
    return h;
}

static int mem_equal(const link_entry_t *e, const void *ptr, int ndim, const int64_t *shape)
{
    return e->ptr == ptr && e->ndim == ndim &&
           (ndim == 0 ||
            memcmp(g_links.shapes + e->shape_at, shape, (size_t)ndim * sizeof *shape) == 0);
}

/* The slot of key (id, or ptr and shape) in a table: its entry's or the empty one. */
static size_t slot_by_id(const void *id)
{
    size_t mask = g_links.slots - 1, i = (size_t)msp_mix64((uint64_t)(uintptr_t)id) & mask;
    while (g_links.by_id[i] && g_links.e[g_links.by_id[i] - 1].id != id)
        i = (i + 1) & mask;
    return i;
}

static size_t slot_by_mem(uint64_t h, const void *ptr, int ndim, const int64_t *shape)
{
    size_t mask = g_links.slots - 1, i = (size_t)h & mask;
    while (g_links.by_mem[i] && !mem_equal(&g_links.e[g_links.by_mem[i] - 1], ptr, ndim, shape))
        i = (i + 1) & mask;
    return i;
}

/* Room for one more entry in the tables (rehashed when they grow); 0 or -1. */
static int links_reserve(void)
{
    if (2 * (g_links.n + 1) < g_links.slots)
        return 0;
    size_t slots = g_links.slots ? 2 * g_links.slots : 1024;
    uint32_t *by_id = calloc(slots, sizeof *by_id), *by_mem = calloc(slots, sizeof *by_mem);
    if (!by_id || !by_mem || g_links.n >= UINT32_MAX - 1) {
        free(by_id);
        free(by_mem);
        return -1;
    }
    /* Each old slot's entry goes to its key's place in the new tables. */
    uint32_t *old_id = g_links.by_id, *old_mem = g_links.by_mem;
    size_t old_slots = g_links.slots;
    g_links.by_id = by_id;
    g_links.by_mem = by_mem;
    g_links.slots = slots;
    for (size_t i = 0; i < old_slots; i++) {
        if (old_id[i])
            by_id[slot_by_id(g_links.e[old_id[i] - 1].id)] = old_id[i];
        if (old_mem[i]) {
            const link_entry_t *e = &g_links.e[old_mem[i] - 1];
            by_mem[slot_by_mem(e->mem_hash, e->ptr, e->ndim, g_links.shapes + e->shape_at)] =
                old_mem[i];
        }
    }
    free(old_id);
    free(old_mem);
    return 0;
}

void msp_link_note(const char *rec, const char *role, PyObject *t, const void *ptr, int ndim,
                   const int64_t *shape)
{
    if (g_links.step != msp_g.step) {
        msp_links_reset();
        g_links.step = msp_g.step;
    }
    size_t lr = strlen(rec), lo = strlen(role);
    if (links_reserve() != 0)
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
    e->mem_hash = mem_hash(ptr, ndim, shape);
    uint32_t num = (uint32_t)++g_links.n;
    g_links.by_id[slot_by_id(t)] = num;
    g_links.by_mem[slot_by_mem(e->mem_hash, ptr, ndim, shape)] = num;
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
    uint32_t k = g_links.by_id[slot_by_id(t)];
    if (k && entry_alive(&g_links.e[k - 1]) == t) {
        hit = &g_links.e[k - 1];
    } else {
        k = g_links.by_mem[slot_by_mem(mem_hash(ptr, ndim, shape), ptr, ndim, shape)];
        const link_entry_t *m = k ? &g_links.e[k - 1] : NULL;
        if (m && entry_alive(m) && m->version >= 0 && m->version == msp_tensor_version(t))
            hit = m;
    }
    if (PyErr_Occurred())
        PyErr_Clear();
    return hit ? g_links.names + hit->name_at : NULL;
}
