/* What a torch.distributed call's arguments do not say by themselves, recorded
 * beside them (msprobe-dump(5), RECORDS) so that compare can line up one
 * collective across the ranks that took part in it:
 *  - "group" = the global ranks of its process group, as ranges ("0-3",
 *    "0,2", "4-7"); the default group is every rank of the world;
 *  - "peer" = the global rank at the other end of a point-to-point call or
 *    the root of a rooted collective: send's dst, recv's src (the rank it
 *    received from when src was None), broadcast's and scatter's src,
 *    reduce's and gather's dst.
 * Where each is among the positional arguments is read once per API from its
 * signature (inspect.signature), so torch versions that add or move
 * parameters need no table here. A group's ranks are asked of torch once per
 * group object. Nothing here raises: what cannot be told is left out. */
#include "dump_py.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MSP_DIST_APIS 32
#define MSP_DIST_GROUPS 16

typedef struct {
    char api[64];
    int group_pos;     /* positional index of "group", -1 none */
    int peer_pos;      /* positional index of "src"/"dst", -1 none */
    char peer_name[8]; /* "src" or "dst", "" none */
} dist_sig_t;

static dist_sig_t g_sigs[MSP_DIST_APIS];
static int g_nsigs;

static struct {
    PyObject *group; /* strong reference: a process group lives as long as the job */
    char ranks[256];
} g_groups[MSP_DIST_GROUPS];
static int g_ngroups;

/* Positions of group and src/dst in fn's signature. */
static void read_sig(PyObject *fn, dist_sig_t *s)
{
    s->group_pos = s->peer_pos = -1;
    s->peer_name[0] = '\0';
    PyObject *inspect = PyImport_ImportModule("inspect");
    PyObject *sig = inspect ? PyObject_CallMethod(inspect, "signature", "O", fn) : NULL;
    PyObject *params = sig ? PyObject_GetAttrString(sig, "parameters") : NULL;
    PyObject *keys = params ? PyMapping_Keys(params) : NULL;
    Py_ssize_t n = keys ? PyList_Size(keys) : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PyList_GetItem(keys, i);
        if (!k || !PyUnicode_Check(k))
            break;
        if (PyUnicode_CompareWithASCIIString(k, "group") == 0) {
            s->group_pos = (int)i;
            continue;
        }
        for (int j = 0; j < 2 && s->peer_pos < 0; j++) {
            const char *name = j ? "dst" : "src";
            if (PyUnicode_CompareWithASCIIString(k, name) == 0) {
                s->peer_pos = (int)i;
                snprintf(s->peer_name, sizeof s->peer_name, "%s", name);
            }
        }
    }
    Py_XDECREF(keys);
    Py_XDECREF(params);
    Py_XDECREF(sig);
    Py_XDECREF(inspect);
    if (PyErr_Occurred())
        PyErr_Clear();
}

static const dist_sig_t *sig_of(const char *api, PyObject *fn)
{
    for (int i = 0; i < g_nsigs; i++)
        if (!strcmp(g_sigs[i].api, api))
            return &g_sigs[i];
    static dist_sig_t spare;
    dist_sig_t *s = g_nsigs < MSP_DIST_APIS ? &g_sigs[g_nsigs++] : &spare;
    snprintf(s->api, sizeof s->api, "%s", api);
    read_sig(fn, s);
    return s;
}

/* The argument named name at positional index pos (borrowed; NULL when absent). */
static PyObject *arg_at(PyObject *args, PyObject *kw, int pos, const char *name)
{
    PyObject *v = kw && PyDict_Check(kw) ? PyDict_GetItemString(kw, name) : NULL;
    if (v)
        return v;
    if (pos >= 0 && args && pos < PyTuple_Size(args))
        return PyTuple_GetItem(args, pos);
    return NULL;
}

/* Sorted distinct ranks as "0-3,8,10-11"; cut with "..." if it does not fit. */
static void ranks_text(const long long *v, Py_ssize_t n, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = '\0';
    for (Py_ssize_t i = 0; i < n;) {
        Py_ssize_t j = i;
        while (j + 1 < n && v[j + 1] == v[j] + 1)
            j++;
        char part[48];
        if (j == i)
            snprintf(part, sizeof part, "%s%lld", at ? "," : "", v[i]);
        else
            snprintf(part, sizeof part, "%s%lld-%lld", at ? "," : "", v[i], v[j]);
        size_t pl = strlen(part);
        if (at + pl + 4 >= cap) {
            snprintf(buf + at, cap - at, ",...");
            return;
        }
        memcpy(buf + at, part, pl + 1);
        at += pl;
        i = j + 1;
    }
}

static int ll_cmp(const void *x, const void *y)
{
    long long a = *(const long long *)x, b = *(const long long *)y;
    return a < b ? -1 : a > b;
}

/* The global ranks of group (None: the world) as text; 0 when unknown. */
static int group_ranks(PyObject *dist, PyObject *group, char *buf, size_t cap)
{
    PyObject *g = group && group != Py_None ? group : NULL;
    for (int i = 0; g && i < g_ngroups; i++)
        if (g_groups[i].group == g) {
            snprintf(buf, cap, "%s", g_groups[i].ranks);
            return 1;
        }
    PyObject *list = NULL;
    if (g) {
        list = PyObject_CallMethod(dist, "get_process_group_ranks", "O", g);
    } else {
        PyObject *ws = PyObject_CallMethod(dist, "get_world_size", NULL);
        long long n = ws ? PyLong_AsLongLong(ws) : -1;
        Py_XDECREF(ws);
        if (n > 0 && !PyErr_Occurred()) {
            snprintf(buf, cap, n == 1 ? "0" : "0-%lld", n - 1);
            return 1;
        }
    }
    Py_ssize_t n = list && PyList_Check(list) ? PyList_Size(list) : 0;
    long long *v = n > 0 ? PyMem_Malloc((size_t)n * sizeof *v) : NULL;
    int ok = 0;
    if (v) {
        ok = 1;
        for (Py_ssize_t i = 0; i < n && ok; i++) {
            v[i] = PyLong_AsLongLong(PyList_GetItem(list, i));
            ok = !PyErr_Occurred();
        }
        if (ok) {
            qsort(v, (size_t)n, sizeof *v, ll_cmp);
            ranks_text(v, n, buf, cap);
        }
        PyMem_Free(v);
    }
    Py_XDECREF(list);
    if (PyErr_Occurred())
        PyErr_Clear();
    if (ok && g_ngroups < MSP_DIST_GROUPS) {
        Py_INCREF(g);
        g_groups[g_ngroups].group = g;
        snprintf(g_groups[g_ngroups].ranks, sizeof g_groups[g_ngroups].ranks, "%s", buf);
        g_ngroups++;
    }
    return ok;
}

void msp_dist_add_context(msp_dq_rec_t *r, const char *api, PyObject *fn, PyObject *args,
                          PyObject *kw, PyObject *out)
{
    PyObject *mods = PySys_GetObject("modules");
    PyObject *dist = mods ? PyDict_GetItemString(mods, "torch.distributed") : NULL;
    if (!dist)
        return;
    const char *leaf = strrchr(api, '.');
    leaf = leaf ? leaf + 1 : api;
    const dist_sig_t *s = sig_of(leaf, fn);
    char text[256];
    if (group_ranks(dist, arg_at(args, kw, s->group_pos, "group"), text, sizeof text))
        msp_dq_rec_add_attr(r, "group", text);
    if (s->peer_name[0]) {
        PyObject *p = arg_at(args, kw, s->peer_pos, s->peer_name);
        /* recv(src=None) receives from anyone and returns who it was */
        if ((!p || p == Py_None) && !strcmp(s->peer_name, "src") && out && PyLong_Check(out))
            p = out;
        if (p && PyLong_Check(p)) {
            long long v = PyLong_AsLongLong(p);
            if (!PyErr_Occurred()) {
                snprintf(text, sizeof text, "%lld", v);
                msp_dq_rec_add_attr(r, "peer", text);
            }
        }
    }
    if (PyErr_Occurred())
        PyErr_Clear();
}
