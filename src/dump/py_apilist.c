/* The API list: which torch APIs the shim may wrap, discovered from the
 * running torch (api_discover.py) or else the table of torch 1.13
 * (api_table.c); the namespaces they live in and the record prefix of each;
 * the closest name to a misspelt one; `msprobe dump --list-apis`. */
#include "dump_py.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Sorted names the shim may wrap: what api_discover.py found in this torch at
 * boot, or the committed table of torch 1.13 (api_table.c) when discovery
 * failed, was turned off (MSPROBE_API_TABLE=1) or has not run yet. */
static char **g_found;
static size_t g_nfound;
static int g_list_state; /* 0 not tried, 1 discovered, 2 table */
static double g_discover_ms;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

const char *const *msp_api_list(size_t *n)
{
    if (g_list_state == 1) {
        *n = g_nfound;
        return (const char *const *)g_found;
    }
    *n = msp_api_table_len;
    return msp_api_table;
}

int msp_api_known(const char *name)
{
    size_t n;
    const char *const *l = msp_api_list(&n);
    return bsearch(&name, l, n, sizeof *l, cmp_str) != NULL;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Run api_discover.py's discover(torch); a list of str, or NULL with an error set. */
static PyObject *run_discover(PyObject *torch)
{
    PyObject *ns = msp_py_run_source(msp_api_discover_py, "msprobe_api_discover");
    PyObject *fn = ns ? PyDict_GetItemString(ns, "discover") : NULL; /* borrowed */
    PyObject *out = NULL;
    if (fn)
        out = PyObject_CallFunctionObjArgs(fn, torch, NULL);
    else if (ns)
        PyErr_SetString(PyExc_RuntimeError, "api_discover.py defines no discover()");
    if (out && (!PyList_Check(out) || PyList_Size(out) == 0)) {
        Py_CLEAR(out);
        PyErr_SetString(PyExc_RuntimeError, "discover() found no API");
    }
    Py_XDECREF(ns);
    return out;
}

int msp_api_discover(PyObject *torch)
{
    if (g_list_state)
        return g_list_state;
    g_list_state = 2;
    if (msp_env_flag("MSPROBE_API_TABLE"))
        return g_list_state;
    msp_quiet_t quiet = msp_quiet_begin(); /* what discovery calls is not dumped */
    double t0 = now_ms();
    PyObject *names = run_discover(torch);
    Py_ssize_t n = names ? PyList_Size(names) : 0;
    char **v = n > 0 ? calloc((size_t)n, sizeof *v) : NULL;
    Py_ssize_t k = 0;
    for (; v && k < n; k++) {
        PyObject *b = PyUnicode_AsUTF8String(PyList_GetItem(names, k));
        v[k] = b ? strdup(PyBytes_AsString(b)) : NULL;
        Py_XDECREF(b);
        if (!v[k])
            break;
    }
    if (v && k == n) {
        qsort(v, (size_t)n, sizeof *v, cmp_str);
        g_found = v;
        g_nfound = (size_t)n;
        g_list_state = 1;
    } else {
        for (Py_ssize_t i = 0; v && i < k; i++)
            free(v[i]);
        free(v);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        msp_py_warn_error("api discovery",
                          "cannot list the APIs of this torch; using the "
                          "built-in list of torch 1.13 instead (APIs added since are not dumped)");
    }
    g_discover_ms = now_ms() - t0;
    Py_XDECREF(names);
    PyErr_Clear();
    msp_quiet_end(quiet);
    return g_list_state;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 120 || lb > 120)
        return (size_t)-1;
    size_t prev[121], cur[121];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (lb + 1) * sizeof *prev);
    }
    return prev[lb];
}

static int ns_rank(const char *e)
{
    if (strncmp(e, "torch.nn.functional.", 20) == 0)
        return 0;
    if (strncmp(e, "torch.Tensor.", 13) == 0)
        return 2;
    if (strncmp(e, "torch.distributed.", 18) == 0)
        return 3;
    return 1;
}

const char *msp_api_near(const char *name)
{
    const char *best = NULL;
    size_t best_score = (size_t)-1, best_d = (size_t)-1;
    const char *leaf = strrchr(name, '.');
    leaf = leaf ? leaf + 1 : name;
    size_t nl;
    const char *const *l = msp_api_list(&nl);
    for (size_t i = 0; i < nl; i++) {
        const char *e = l[i];
        size_t d = edit_distance(name, e);
        /* The same function under another namespace (torch.nn.functional.matmul
         * for torch.matmul) counts as a one-letter typo; among those, prefer
         * functional, then torch, then Tensor. */
        const char *eleaf = strrchr(e, '.');
        size_t score = d * 10;
        if (eleaf && strcmp(eleaf + 1, leaf) == 0 && d > 1) {
            d = 1;
            score = 10 + (size_t)ns_rank(e);
        }
        if (score < best_score) {
            best_score = score;
            best_d = d;
            best = e;
        }
    }
    size_t len = strlen(name);
    size_t limit = len / 4 > 3 ? len / 4 : 3;
    return best_d <= limit ? best : NULL;
}

/* ---- namespaces ----------------------------------------------------------- */

static const msp_api_space_t g_spaces[] = {
    {"torch.nn.functional.", "Functional", 0},
    {"torch.Tensor.", "Tensor", 1},
    {"torch.distributed.", "Distributed", 0},
    {"torch._VF.", "VF", 0}, /* what nn.LSTM/GRU/RNN and their cells call */
    {"torch.", "Torch", 0},
};

const msp_api_space_t *msp_api_space(const char *full, const char **attr)
{
    for (size_t s = 0; s < sizeof g_spaces / sizeof g_spaces[0]; s++) {
        size_t pl = strlen(g_spaces[s].path);
        if (strncmp(full, g_spaces[s].path, pl) == 0 && !strchr(full + pl, '.')) {
            *attr = full + pl;
            return &g_spaces[s];
        }
    }
    *attr = full;
    return NULL;
}

int msp_api_write_list(PyObject *torch, const char *path)
{
    int state = msp_api_discover(torch);
    PyObject *v = PyObject_GetAttrString(torch, "__version__");
    PyObject *vs = v ? PyObject_Str(v) : NULL;
    PyObject *vb = vs ? PyUnicode_AsUTF8String(vs) : NULL;
    const char *ver = vb ? PyBytes_AsString(vb) : "?";
    size_t n;
    const char *const *l = msp_api_list(&n);
    FILE *f = fopen(path, "w");
    int rc = -1;
    if (f) {
        if (state == 1)
            fprintf(f, "# torch %s: %zu APIs, discovered at run time in %.1f ms\n", ver, n,
                    g_discover_ms);
        else
            fprintf(f, "# torch %s: %zu APIs from the built-in list of torch 1.13 (%s)\n", ver, n,
                    msp_env_flag("MSPROBE_API_TABLE") ? "MSPROBE_API_TABLE is set"
                                                      : "discovery failed");
        fprintf(f, "# NAME\tRECORD (dump record prefix, before .N.forward)\n");
        for (size_t i = 0; i < n; i++) {
            const char *attr;
            const msp_api_space_t *sp = msp_api_space(l[i], &attr);
            fprintf(f, "%s\t%s.%s\n", l[i], sp ? sp->prefix : "?", attr);
        }
        rc = fclose(f) == 0 ? 0 : -1;
    }
    Py_XDECREF(vb);
    Py_XDECREF(vs);
    Py_XDECREF(v);
    PyErr_Clear();
    return rc;
}
