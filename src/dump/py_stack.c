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

#include <dlfcn.h>
#include <stdint.h>
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

/* dedup: this step's texts -> the record that carries each. Open
 * addressing; a slot of an earlier step counts as free (the whole table
 * turns over at once, so no chain of this step runs through one), and is
 * reused with its buffers. Only touched with the GIL held. */
typedef struct {
    char *text, *first; /* malloc'd: the text (first: the slot is used, as
                           table_grow wants), the record that carries it */
    int64_t step;
    uint64_t hash;
} seen_t;
static seen_t *g_seen;
static size_t g_nseen, g_capseen;
static int64_t g_seen_step = -1;
#define MSP_SEEN_MAX 1000000

static void frames_setup(void);

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
    Py_XDECREF(fb);
    Py_XDECREF(file);
    Py_XDECREF(lc);
    Py_XDECREF(sys);
    if (g_getframe && g_getline && g_lines && g_torch_dir[0])
        g_ready = 1;
    frames_setup();
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

/* Walking frames. CPython's own accessors where it has them (3.9+, found at
 * run time: the limited API this file is built against lacks them), else the
 * frame's attributes; a walk costs no Python call and no attribute lookup then. */
static PyObject *(*p_get_frame)(void);        /* PyEval_GetFrame: borrowed */
static PyObject *(*p_frame_back)(PyObject *); /* PyFrame_GetBack: new reference */
static PyObject *(*p_frame_code)(PyObject *); /* PyFrame_GetCode: new reference */
static int (*p_frame_line)(PyObject *);       /* PyFrame_GetLineNumber */
/* 3.11+: where a frame is, as a byte offset in its code, in O(1); its line
 * is looked up (a walk of the code's line table, some 4000 instructions a
 * frame on a short function) only when a call site's text is first made. */
static int (*p_frame_lasti)(PyObject *);    /* PyFrame_GetLasti */
static int (*p_addr2line)(PyObject *, int); /* PyCode_Addr2Line */
static PyObject *s_f_code, *s_f_lineno, *s_f_back, *s_co_filename, *s_co_name;

static PyObject *attr(PyObject *o, PyObject **slot, const char *name)
{
    if (!*slot)
        *slot = PyUnicode_InternFromString(name);
    return *slot ? PyObject_GetAttr(o, *slot) : NULL;
}

static void frames_setup(void)
{
    p_get_frame = (PyObject * (*)(void)) dlsym(RTLD_DEFAULT, "PyEval_GetFrame");
    p_frame_back = (PyObject * (*)(PyObject *)) dlsym(RTLD_DEFAULT, "PyFrame_GetBack");
    p_frame_code = (PyObject * (*)(PyObject *)) dlsym(RTLD_DEFAULT, "PyFrame_GetCode");
    p_frame_line = (int (*)(PyObject *))dlsym(RTLD_DEFAULT, "PyFrame_GetLineNumber");
    p_frame_lasti = (int (*)(PyObject *))dlsym(RTLD_DEFAULT, "PyFrame_GetLasti");
    p_addr2line = (int (*)(PyObject *, int))dlsym(RTLD_DEFAULT, "PyCode_Addr2Line");
    if (!p_get_frame || !p_frame_back || !p_frame_code || !p_frame_line || msp_test.stack_attrs)
        p_get_frame = NULL; /* all or none */
    if (!p_get_frame || !p_addr2line || msp_test.stack_lines)
        p_frame_lasti = NULL;
}

/* The innermost frame, a new reference (or NULL). */
static PyObject *frame_top(void)
{
    if (p_get_frame) {
        PyObject *f = p_get_frame();
        Py_XINCREF(f);
        return f;
    }
    PyObject *f = PyObject_CallFunction(g_getframe, "i", 0);
    if (f == Py_None)
        Py_CLEAR(f);
    return f;
}

static PyObject *frame_back(PyObject *f)
{
    PyObject *b = p_get_frame ? p_frame_back(f) : attr(f, &s_f_back, "f_back");
    if (b == Py_None)
        Py_CLEAR(b);
    return b;
}

/* One step down a walk of the stack: the frame below f (a new reference,
 * NULL at the bottom), f's own reference given up. */
static PyObject *frame_down(PyObject *f)
{
    PyObject *b = frame_back(f);
    Py_DECREF(f);
    return b;
}

static PyObject *frame_code(PyObject *f)
{
    return p_get_frame ? p_frame_code(f) : attr(f, &s_f_code, "f_code");
}

static long frame_line(PyObject *f)
{
    if (p_get_frame)
        return p_frame_line(f);
    PyObject *n = attr(f, &s_f_lineno, "f_lineno");
    long v = n ? PyLong_AsLong(n) : -1;
    Py_XDECREF(n);
    return v;
}

/* A site's position in its code: a byte offset (>= 0) where the frame
 * says it, else -(line) - 2 (line -1: unknown). */
static long frame_pos(PyObject *f)
{
    if (p_frame_lasti) {
        int at = p_frame_lasti(f);
        if (at >= 0)
            return at;
    }
    return -frame_line(f) - 2;
}

static long pos_line(PyObject *code, long pos)
{
    return pos >= 0 ? p_addr2line(code, (int)pos) : -pos - 2;
}

/* Per code object, found by its address (the table holds a reference, so the
 * address is not reused; a code object's own hash reads its whole bytecode
 * and constants, each time): NULL to skip its frames (torch's own), else
 * (filename, func as bytes). */
typedef struct {
    PyObject *code, *info; /* info: Py_None to skip */
} code_slot_t;
static code_slot_t *g_codes;
static size_t g_ncodes, g_capcodes;

static size_t ptr_hash(const void *p)
{
    return (size_t)msp_mix64((uint64_t)(uintptr_t)p);
}

/* Both tables below: open addressing, a power-of-two capacity, a slot used
 * when its first pointer is set. Doubles *cap (from 1024), placing the used
 * slots again by hash(slot); unchanged when there is no memory. */
static void table_grow(void **slots, size_t *cap, size_t size, size_t (*hash)(const void *))
{
    size_t ncap = *cap ? 2 * *cap : 1024;
    char *t = calloc(ncap, size), *old = *slots;
    if (!t)
        return;
    for (size_t k = 0; k < *cap; k++) {
        const char *s = old + k * size;
        if (!*(void *const *)(const void *)s)
            continue;
        size_t i = hash(s) & (ncap - 1);
        while (*(void **)(void *)(t + i * size))
            i = (i + 1) & (ncap - 1);
        memcpy(t + i * size, s, size);
    }
    free(old);
    *slots = t;
    *cap = ncap;
}

static PyObject *code_new_info(PyObject *code)
{
    PyObject *fname = attr(code, &s_co_filename, "co_filename");
    PyObject *func = attr(code, &s_co_name, "co_name");
    PyObject *fb = fname ? PyUnicode_AsUTF8String(fname) : NULL;
    PyObject *nb = func ? PyUnicode_AsUTF8String(func) : NULL;
    PyObject *info = NULL;
    if (fb && nb && !skipped(PyBytes_AsString(fb)))
        info = Py_BuildValue("(OO)", fname, nb);
    Py_XDECREF(nb);
    Py_XDECREF(fb);
    Py_XDECREF(func);
    Py_XDECREF(fname);
    PyErr_Clear();
    if (!info) {
        info = Py_None;
        Py_INCREF(info);
    }
    return info;
}

static size_t code_slot_hash(const void *slot)
{
    return ptr_hash(((const code_slot_t *)slot)->code);
}

/* Borrowed; NULL: a frame to skip. */
static PyObject *code_info(PyObject *code)
{
    if (g_capcodes) {
        for (size_t i = ptr_hash(code) & (g_capcodes - 1); g_codes[i].code;
             i = (i + 1) & (g_capcodes - 1))
            if (g_codes[i].code == code)
                return g_codes[i].info == Py_None ? NULL : g_codes[i].info;
    }
    if (2 * (g_ncodes + 1) > g_capcodes && g_ncodes < 100000)
        table_grow((void **)&g_codes, &g_capcodes, sizeof *g_codes, code_slot_hash);
    PyObject *info = code_new_info(code);
    if (2 * (g_ncodes + 1) > g_capcodes) { /* full (or no memory): not kept */
        Py_DECREF(info); /* the caller's frame holds code, and info is only read now... */
        return NULL;     /* ...so skip rather than hand out a dead reference */
    }
    size_t i = ptr_hash(code) & (g_capcodes - 1);
    while (g_codes[i].code)
        i = (i + 1) & (g_capcodes - 1);
    Py_INCREF(code);
    g_codes[i] = (code_slot_t){code, info};
    g_ncodes++;
    return info == Py_None ? NULL : info;
}

/* The text of a call site, its kept frames innermost first as (code,
 * position): made once, then found by those pointers and positions. Two
 * positions on one line make two slots of the same text. */
typedef struct {
    PyObject *code; /* borrowed: g_codes holds it */
    long pos;       /* frame_pos */
} site_t;
typedef struct {
    char *text; /* first: set when the slot is used (table_grow) */
    int n;
    site_t site[MSP_STACK_FRAMES];
} text_slot_t;
static text_slot_t *g_texts;
static size_t g_ntexts, g_captexts;

static size_t sites_hash(const site_t *s, int n)
{
    uint64_t h = (uint64_t)n;
    for (int i = 0; i < n; i++)
        h = msp_mix64(h ^ (uint64_t)(uintptr_t)s[i].code) ^ msp_mix64((uint64_t)s[i].pos + h);
    return (size_t)h;
}

static size_t text_slot_hash(const void *slot)
{
    const text_slot_t *e = slot;
    return sites_hash(e->site, e->n);
}

static char *site_text_new(const site_t *s, int n)
{
    char *text = malloc(MSP_STACK_TEXT);
    if (!text)
        return NULL;
    size_t at = 0;
    text[0] = '\0';
    for (int i = 0; i < n; i++) {
        PyObject *info = code_info(s[i].code);
        if (!info)
            continue;
        long line = pos_line(s[i].code, s[i].pos);
        PyObject *fname = PyTuple_GetItem(info, 0), *lineno = PyLong_FromLong(line);
        PyObject *fb = PyUnicode_AsUTF8String(fname);
        PyObject *src = lineno ? source_line(fname, lineno) : NULL;
        PyObject *sb = src ? PyUnicode_AsUTF8String(src) : NULL;
        int k = fb ? snprintf(text + at, MSP_STACK_TEXT - at, "%sFile %s, line %ld, in %s%s%s",
                              at ? "\n" : "", PyBytes_AsString(fb), line,
                              PyBytes_AsString(PyTuple_GetItem(info, 1)),
                              sb && PyBytes_Size(sb) ? "\n    " : "",
                              sb ? PyBytes_AsString(sb) : "")
                   : -1;
        Py_XDECREF(sb);
        Py_XDECREF(src);
        Py_XDECREF(fb);
        Py_XDECREF(lineno);
        if (k < 0 || (size_t)k >= MSP_STACK_TEXT - at) {
            text[at] = '\0'; /* this frame does not fit: the text ends before it */
            break;
        }
        at += (size_t)k;
    }
    PyErr_Clear();
    if (!at) {
        free(text);
        return NULL;
    }
    char *t = realloc(text, at + 1);
    return t ? t : text;
}

/* The text (owned by the table, or by the caller when *own is set). */
static const char *site_text(const site_t *s, int n, int *own)
{
    *own = 0;
    size_t h = sites_hash(s, n);
    if (g_captexts) {
        for (size_t i = h & (g_captexts - 1); g_texts[i].text; i = (i + 1) & (g_captexts - 1))
            if (g_texts[i].n == n && memcmp(g_texts[i].site, s, (size_t)n * sizeof *s) == 0)
                return g_texts[i].text;
    }
    char *text = site_text_new(s, n);
    if (!text)
        return NULL;
    if (2 * (g_ntexts + 1) > g_captexts && g_ntexts < 100000)
        table_grow((void **)&g_texts, &g_captexts, sizeof *g_texts, text_slot_hash);
    if (2 * (g_ntexts + 1) > g_captexts) {
        *own = 1;
        return text;
    }
    size_t i = h & (g_captexts - 1);
    while (g_texts[i].text)
        i = (i + 1) & (g_captexts - 1);
    text_slot_t *e = &g_texts[i];
    memset(e, 0, sizeof *e);
    memcpy(e->site, s, (size_t)n * sizeof *s);
    e->n = n;
    e->text = text;
    g_ntexts++;
    return text;
}

char *msp_stack_capture(void)
{
    if (!msp_g.cfg.stacks || stack_setup() != 1)
        return NULL;
    msp_quiet_t quiet = msp_quiet_begin();
    site_t sites[MSP_STACK_FRAMES];
    memset(sites, 0, sizeof sites);
    int kept = 0;
    PyObject *frame = frame_top();
    for (int walked = 0; frame && kept < MSP_STACK_FRAMES && walked < MSP_STACK_WALK; walked++) {
        PyObject *code = frame_code(frame);
        if (code && code_info(code)) { /* g_codes holds code from now on */
            sites[kept].code = code;
            sites[kept++].pos = frame_pos(frame);
        }
        Py_XDECREF(code);
        frame = frame_down(frame);
    }
    Py_XDECREF(frame);
    PyErr_Clear();
    int own = 0;
    const char *t = kept ? site_text(sites, kept, &own) : NULL;
    char *out = t ? (own ? (char *)t : strdup(t)) : NULL;
    msp_quiet_end(quiet);
    return out;
}

static size_t seen_slot_hash(const void *slot)
{
    return (size_t)((const seen_t *)slot)->hash;
}

/* A slot of this step's table (an earlier step's is free). */
static int seen_now(const seen_t *e)
{
    return e->text && e->step == g_seen_step;
}

/* The slot of text in this step's table: its own, or the free one where it
 * goes; NULL when the table cannot take it. */
static seen_t *seen_slot(const char *text, uint64_t h)
{
    if (2 * (g_nseen + 1) > g_capseen) {
        if (g_nseen >= MSP_SEEN_MAX)
            return NULL;
        for (size_t k = 0; k < g_capseen; k++) /* only this step's entries move */
            if (g_seen[k].text && !seen_now(&g_seen[k])) {
                free(g_seen[k].text);
                free(g_seen[k].first);
                g_seen[k] = (seen_t){NULL, NULL, 0, 0};
            }
        size_t cap = g_capseen;
        table_grow((void **)&g_seen, &g_capseen, sizeof *g_seen, seen_slot_hash);
        if (g_capseen == cap)
            return NULL; /* no memory */
    }
    size_t i = h & (g_capseen - 1);
    for (; seen_now(&g_seen[i]); i = (i + 1) & (g_capseen - 1))
        if (g_seen[i].hash == h && strcmp(g_seen[i].text, text) == 0)
            break;
    return &g_seen[i];
}

void msp_stack_commit(msp_dq_rec_t *r)
{
    char *text = r->stack;
    r->stack = NULL;
    if (!text)
        return;
    if (g_seen_step != msp_g.step) { /* a new step is a new file */
        g_seen_step = msp_g.step;
        g_nseen = 0;
    }
    uint64_t h = msp_str_hash(text, 0);
    seen_t *e = seen_slot(text, h);
    if (e && seen_now(e)) {
        char ref[600] = "@";
        size_t at = 1;
        msp_str_add(ref, sizeof ref, &at, e->first);
        msp_dq_rec_add_attr(r, "stack", ref);
        free(text);
        return;
    }
    msp_dq_rec_add_attr(r, "stack", text);
    char *first = e && r->name ? strdup(r->name) : NULL;
    if (first) { /* the slot keeps the text itself */
        free(e->text);
        free(e->first);
        *e = (seen_t){text, first, g_seen_step, h};
        g_nseen++;
        return;
    }
    free(text);
}

/* ---- where data preparation ends (py_prep.c) ---- */

int msp_stack_refs(msp_frame_ref_t *out, int max)
{
    if (stack_setup() != 1)
        return 0;
    msp_quiet_t quiet = msp_quiet_begin();
    int n = 0;
    PyObject *frame = frame_top();
    while (frame && n < max) {
        PyObject *code = frame_code(frame);
        out[n++] = (msp_frame_ref_t){frame, code, frame_pos(frame)};
        Py_XDECREF(code); /* identities only from here on */
        frame = frame_down(frame);
    }
    Py_XDECREF(frame);
    PyErr_Clear();
    msp_quiet_end(quiet);
    return n;
}

/* loop(code, at): the innermost loop of code around position at (a byte
 * offset, or -(line) - 2), as the positions (or lines) of its first and last
 * instruction: a backward jump and its target; None outside every loop. */
static const char g_loop_py[] =
    "import dis\n"
    "JUMPS = set(getattr(dis, 'hasjump', dis.hasjrel + dis.hasjabs))\n"
    "def loop(code, at):\n"
    "    starts = None\n"
    "    if at < 0:\n"
    "        at = -at - 2\n"
    "        starts = [(o, l) for o, l in dis.findlinestarts(code) if l is not None]\n"
    "    best = None\n"
    "    for ins in dis.get_instructions(code):\n"
    "        t = ins.argval\n"
    "        if ins.opcode not in JUMPS or not isinstance(t, int) or t > ins.offset:\n"
    "            continue\n"
    "        lo, hi = t, ins.offset\n"
    "        if starts is not None:\n"
    "            ls = [l for o, l in starts if o <= lo][-1:] + [l for o, l in starts if lo < o <= "
    "hi]\n"
    "            if not ls:\n"
    "                continue\n"
    "            lo, hi = min(ls), max(ls)\n"
    "        if lo <= at <= hi and (best is None or hi - lo < best[1] - best[0]):\n"
    "            best = (lo, hi)\n"
    "    return best\n";

/* The innermost loop around where frame f is, in *lo.. *hi (positions as
 * frame_pos gives them, or lines when those are negative); 0: none. */
static int loop_around(PyObject *code, long pos, long *lo, long *hi)
{
    static PyObject *fn; /* the helper, made once */
    static int failed;
    if (!fn && !failed) {
        PyObject *ns = msp_py_run_source(g_loop_py, "msprobe_prep_loop");
        fn = ns ? PyDict_GetItemString(ns, "loop") : NULL;
        Py_XINCREF(fn);
        Py_XDECREF(ns);
        failed = !fn;
    }
    PyObject *r = fn ? PyObject_CallFunction(fn, "Ol", code, pos) : NULL;
    int found = r && PyTuple_Check(r) && PyTuple_Size(r) == 2;
    if (found) {
        *lo = PyLong_AsLong(PyTuple_GetItem(r, 0));
        *hi = PyLong_AsLong(PyTuple_GetItem(r, 1));
    }
    Py_XDECREF(r);
    if (PyErr_Occurred()) {
        msp_py_warn_error("data preparation", "finding the loop that runs the model");
        found = 0;
    }
    return found;
}

int msp_stack_call_loop(msp_frame_loop_t *loop)
{
    if (stack_setup() != 1)
        return 0;
    msp_quiet_t quiet = msp_quiet_begin();
    int found = 0;
    PyObject *frame = frame_top();
    for (int walked = 0; frame && !found && walked < MSP_STACK_WALK; walked++) {
        PyObject *code = frame_code(frame);
        /* torch's frames (Module.__call__) and the shim's are not the caller */
        if (code && code_info(code)) {
            found = loop_around(code, frame_pos(frame), &loop->lo, &loop->hi);
            loop->frame = frame;
            loop->code = code;
        }
        Py_XDECREF(code);
        frame = frame_down(frame);
    }
    Py_XDECREF(frame);
    PyErr_Clear();
    msp_quiet_end(quiet);
    return found;
}

int msp_stack_in_loop(const msp_frame_ref_t *ref, const msp_frame_loop_t *loop)
{
    if (ref->frame != loop->frame || ref->code != loop->code)
        return 0;
    long at = ref->pos >= 0 ? ref->pos : -ref->pos - 2;
    return loop->lo <= at && at <= loop->hi;
}
