/* Call sites: where in the user's code each record was made, as msprobe's
 * stack.json keeps it, so a failing row in compare's report leads to the
 * source line (NPU_Stack_Info).
 *
 * At each recorded call the Python stack is walked from the innermost frame
 * outwards: frames of torch itself (and of this shim's own embedded code)
 * are skipped, then up to MSP_STACK_FRAMES frames are kept, each as
 * "File F, line N, in FUNC" and its source line. A step's file holds each
 * distinct text once: the first record with it carries it in its attribute
 * "stack"; later records (and backward records of the same call) carry
 * "@RECORD", naming that first record (msprobe-dump(5)).
 *
 * Runs with the GIL held, in the shim's own re-entrancy depth, so nothing it
 * calls is recorded. Turned off by msprobe's "extra_info": false. */
#include "dump_py.h"

#include <stdlib.h>
#include <string.h>

#define MSP_STACK_FRAMES 5  /* user frames kept: the call site and its callers */
#define MSP_STACK_WALK 96   /* frames looked at, at most */
#define MSP_STACK_TEXT 2048 /* bytes of one record's text */

static PyObject *g_getframe;  /* sys._getframe */
static PyObject *g_getline;   /* linecache.getline */
static PyObject *g_lines;     /* (filename, lineno) -> stripped source line */
static char g_torch_dir[512]; /* ".../site-packages/torch/" */
static int g_ready;           /* 1 set up, -1 cannot be */

/* dedup: this step's texts -> the record that carries each */
static PyObject *g_seen;
static int64_t g_seen_step = -1;

static int stack_setup(void)
{
    if (g_ready)
        return g_ready;
    g_ready = -1;
    PyObject *sys = PyImport_ImportModule("sys");
    PyObject *lc = PyImport_ImportModule("linecache");
    PyObject *mods = PySys_GetObject("modules"); /* borrowed */
    PyObject *torch = mods ? PyDict_GetItemString(mods, "torch") : NULL;
    PyObject *file = torch ? PyObject_GetAttrString(torch, "__file__") : NULL;
    PyObject *fb = file ? PyUnicode_AsUTF8String(file) : NULL;
    if (fb) {
        const char *f = PyBytes_AsString(fb), *slash = strrchr(f, '/');
        if (slash && (size_t)(slash - f) + 2 < sizeof g_torch_dir)
            snprintf(g_torch_dir, sizeof g_torch_dir, "%.*s/", (int)(slash - f), f);
    }
    g_getframe = sys ? PyObject_GetAttrString(sys, "_getframe") : NULL;
    g_getline = lc ? PyObject_GetAttrString(lc, "getline") : NULL;
    g_lines = PyDict_New();
    g_seen = PyDict_New();
    Py_XDECREF(fb);
    Py_XDECREF(file);
    Py_XDECREF(lc);
    Py_XDECREF(sys);
    if (g_getframe && g_getline && g_lines && g_seen && g_torch_dir[0])
        g_ready = 1;
    PyErr_Clear();
    return g_ready;
}

/* The stripped source line, remembered per (file, line). New reference or NULL. */
static PyObject *source_line(PyObject *fname, PyObject *lineno)
{
    PyObject *key = PyTuple_Pack(2, fname, lineno);
    PyObject *line = key ? PyDict_GetItem(g_lines, key) : NULL; /* borrowed */
    if (line) {
        Py_INCREF(line);
    } else if (key) {
        PyObject *raw = PyObject_CallFunctionObjArgs(g_getline, fname, lineno, NULL);
        line = raw ? PyObject_CallMethod(raw, "strip", NULL) : NULL;
        Py_XDECREF(raw);
        if (line && PyDict_Size(g_lines) < 65536)
            PyDict_SetItem(g_lines, key, line);
    }
    Py_XDECREF(key);
    PyErr_Clear();
    return line;
}

static int skipped(const char *f)
{
    return strncmp(f, g_torch_dir, strlen(g_torch_dir)) == 0 || strncmp(f, "<frozen ", 8) == 0 ||
           strncmp(f, "msprobe_", 8) == 0;
}

static PyObject *s_f_code, *s_f_lineno, *s_f_back, *s_co_filename, *s_co_name;

static PyObject *attr(PyObject *o, PyObject **slot, const char *name)
{
    if (!*slot)
        *slot = PyUnicode_InternFromString(name);
    return *slot ? PyObject_GetAttr(o, *slot) : NULL;
}

/* Per code object: NULL to skip its frames (torch's own), else "File F, line "
 * and ", in FUNC" as a (bytes, bytes) tuple. Borrowed from g_codes. */
static PyObject *g_codes;

static PyObject *code_info(PyObject *code)
{
    PyObject *info = PyDict_GetItem(g_codes, code); /* borrowed */
    if (info)
        return info == Py_None ? NULL : info;
    PyObject *fname = attr(code, &s_co_filename, "co_filename");
    PyObject *func = attr(code, &s_co_name, "co_name");
    PyObject *fb = fname ? PyUnicode_AsUTF8String(fname) : NULL;
    PyObject *nb = func ? PyUnicode_AsUTF8String(func) : NULL;
    info = Py_None;
    if (fb && nb && !skipped(PyBytes_AsString(fb)))
        info = Py_BuildValue("(OO)", fname, nb);
    if (info && PyDict_Size(g_codes) < 100000)
        PyDict_SetItem(g_codes, code, info);
    if (info && info != Py_None)
        Py_DECREF(info); /* the dict holds it */
    Py_XDECREF(nb);
    Py_XDECREF(fb);
    Py_XDECREF(func);
    Py_XDECREF(fname);
    PyErr_Clear();
    info = PyDict_GetItem(g_codes, code);
    return info == Py_None ? NULL : info;
}

/* The text of a call site given as ((code, line), ...) innermost first: made
 * once, then found in g_texts. New reference (a str) or NULL. */
static PyObject *g_texts;

static PyObject *site_text(PyObject *key)
{
    PyObject *t = PyDict_GetItem(g_texts, key);
    if (t) {
        Py_INCREF(t);
        return t;
    }
    char *text = malloc(MSP_STACK_TEXT);
    if (!text)
        return NULL;
    size_t at = 0;
    text[0] = '\0';
    for (Py_ssize_t i = 0; i < PyTuple_Size(key); i++) {
        PyObject *e = PyTuple_GetItem(key, i);
        PyObject *info = PyDict_GetItem(g_codes, PyTuple_GetItem(e, 0));
        if (!info || info == Py_None)
            continue;
        PyObject *fname = PyTuple_GetItem(info, 0), *lineno = PyTuple_GetItem(e, 1);
        PyObject *fb = PyUnicode_AsUTF8String(fname);
        PyObject *src = source_line(fname, lineno);
        PyObject *sb = src ? PyUnicode_AsUTF8String(src) : NULL;
        int n = fb ? snprintf(text + at, MSP_STACK_TEXT - at, "%sFile %s, line %ld, in %s%s%s",
                              at ? "\n" : "", PyBytes_AsString(fb), PyLong_AsLong(lineno),
                              PyBytes_AsString(PyTuple_GetItem(info, 1)),
                              sb && PyBytes_Size(sb) ? "\n    " : "", sb ? PyBytes_AsString(sb) : "")
                   : -1;
        Py_XDECREF(sb);
        Py_XDECREF(src);
        Py_XDECREF(fb);
        if (n < 0 || (size_t)n >= MSP_STACK_TEXT - at) {
            text[at] = '\0'; /* this frame does not fit: the text ends before it */
            break;
        }
        at += (size_t)n;
    }
    t = at ? PyUnicode_FromString(text) : NULL;
    free(text);
    if (t && PyDict_Size(g_texts) < 100000)
        PyDict_SetItem(g_texts, key, t);
    PyErr_Clear();
    return t;
}

char *msp_stack_capture(void)
{
    if (!msp_g.cfg.stacks || stack_setup() != 1)
        return NULL;
    if ((!g_codes && !(g_codes = PyDict_New())) || (!g_texts && !(g_texts = PyDict_New()))) {
        PyErr_Clear();
        return NULL;
    }
    msp_t_depth++;
    PyObject *sites[MSP_STACK_FRAMES];
    int kept = 0;
    PyObject *frame = PyObject_CallFunction(g_getframe, "i", 0);
    for (int walked = 0; frame && frame != Py_None && kept < MSP_STACK_FRAMES &&
                         walked < MSP_STACK_WALK;
         walked++) {
        PyObject *code = attr(frame, &s_f_code, "f_code");
        if (code && code_info(code)) {
            PyObject *lineno = attr(frame, &s_f_lineno, "f_lineno");
            PyObject *e = lineno ? PyTuple_Pack(2, code, lineno) : NULL;
            if (e)
                sites[kept++] = e;
            Py_XDECREF(lineno);
        }
        Py_XDECREF(code);
        PyObject *back = attr(frame, &s_f_back, "f_back");
        Py_DECREF(frame);
        frame = back;
    }
    Py_XDECREF(frame);
    char *out = NULL;
    PyObject *key = kept ? PyTuple_New(kept) : NULL;
    for (int i = 0; i < kept; i++) {
        if (key)
            PyTuple_SetItem(key, i, sites[i]); /* steals */
        else
            Py_DECREF(sites[i]);
    }
    PyObject *t = key ? site_text(key) : NULL;
    PyObject *tb = t ? PyUnicode_AsUTF8String(t) : NULL;
    if (tb)
        out = strdup(PyBytes_AsString(tb));
    Py_XDECREF(tb);
    Py_XDECREF(t);
    Py_XDECREF(key);
    PyErr_Clear();
    msp_t_depth--;
    return out;
}

void msp_stack_commit(msp_dq_rec_t *r)
{
    char *text = r->stack;
    r->stack = NULL;
    if (!text)
        return;
    if (g_seen_step != msp_g.step) { /* a new step is a new file */
        PyDict_Clear(g_seen);
        g_seen_step = msp_g.step;
    }
    PyObject *key = PyUnicode_FromString(text);
    PyObject *first = key ? PyDict_GetItem(g_seen, key) : NULL; /* borrowed */
    PyObject *fb = first ? PyUnicode_AsUTF8String(first) : NULL;
    if (fb) {
        char ref[600];
        snprintf(ref, sizeof ref, "@%s", PyBytes_AsString(fb));
        msp_dq_rec_add_attr(r, "stack", ref);
    } else {
        msp_dq_rec_add_attr(r, "stack", text);
        PyObject *name = key ? PyUnicode_FromString(r->name) : NULL;
        if (name && PyDict_Size(g_seen) < 1000000)
            PyDict_SetItem(g_seen, key, name);
        Py_XDECREF(name);
    }
    Py_XDECREF(fb);
    Py_XDECREF(key);
    PyErr_Clear();
    free(text);
}
