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
 * calls is recorded. Turned off by msprobe's "extra_info": false.
 *
 * The same walk tells whose code makes a call when Huawei's msprobe package
 * is the msprobe imported (msp_stack_msprobe_call): its hooks compute
 * statistics and copy tensors through the very torch APIs the shim records,
 * and those calls are its own, not the script's. Its frames are skipped in
 * call sites as torch's are. */
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
/* Huawei's msprobe package, when the module "msprobe" is a file's (the
 * shim's own, msprobe_api.py, has none): its directory ".../msprobe/", and
 * the module it was read from (a reference, so its address stays its own). */
static char g_msprobe_dir[512];
static PyObject *g_msprobe_mod;

/* dedup: this step's texts -> the record that carries each (entries found
 * by g_seen_ix by text; emptied when a step begins). Only touched with the
 * GIL held. */
typedef struct {
    char *text, *first; /* malloc'd: the text, the record that carries it */
} seen_t;
static seen_t *g_seen;
static size_t g_nseen, g_capseen;
static msp_index_t g_seen_ix;
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

static int in_msprobe(const char *f)
{
    return g_msprobe_dir[0] && strncmp(f, g_msprobe_dir, strlen(g_msprobe_dir)) == 0;
}

/* Whether Huawei's msprobe (or any package named msprobe imported from
 * files) is loaded; g_msprobe_dir names it then. A dict lookup when nothing
 * changed. Its code objects exist only once its module is in sys.modules,
 * so none was classed before its directory was known. */
static int msprobe_loaded(void)
{
    PyObject *mods = PySys_GetObject("modules"); /* borrowed */
    PyObject *m = mods ? PyDict_GetItemString(mods, "msprobe") : NULL;
    if (m == g_msprobe_mod)
        return g_msprobe_dir[0] != '\0';
    Py_XDECREF(g_msprobe_mod);
    Py_XINCREF(m);
    g_msprobe_mod = m;
    g_msprobe_dir[0] = '\0';
    PyObject *file = m ? PyObject_GetAttrString(m, "__file__") : NULL;
    PyObject *fb = file && PyUnicode_Check(file) ? PyUnicode_AsUTF8String(file) : NULL;
    const char *f = fb ? PyBytes_AsString(fb) : NULL, *slash = f ? strrchr(f, '/') : NULL;
    if (slash && (size_t)(slash - f) + 2 < sizeof g_msprobe_dir)
        snprintf(g_msprobe_dir, sizeof g_msprobe_dir, "%.*s/", (int)(slash - f), f);
    Py_XDECREF(fb);
    Py_XDECREF(file);
    PyErr_Clear();
    return g_msprobe_dir[0] != '\0';
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
 * (filename, func as bytes). Entries found by g_codes_ix; at most
 * MSP_STACK_KEPT of them, as of the call-site texts below. */
enum { CODE_USER, CODE_SKIP, CODE_MSPROBE };
typedef struct {
    PyObject *code, *info; /* info: Py_None to skip */
    int kind;              /* CODE_* */
} code_slot_t;
static code_slot_t *g_codes;
static size_t g_ncodes, g_capcodes;
static msp_index_t g_codes_ix;
#define MSP_STACK_KEPT 100000

static uint64_t ptr_hash(const void *p)
{
    return msp_mix64((uint64_t)(uintptr_t)p);
}

static int code_is(const void *ctx, size_t i)
{
    return g_codes[i].code == ctx;
}

static PyObject *code_new_info(PyObject *code, int *kind)
{
    PyObject *fname = attr(code, &s_co_filename, "co_filename");
    PyObject *func = attr(code, &s_co_name, "co_name");
    PyObject *fb = fname ? PyUnicode_AsUTF8String(fname) : NULL;
    PyObject *nb = func ? PyUnicode_AsUTF8String(func) : NULL;
    PyObject *info = NULL;
    *kind = !fb                                ? CODE_SKIP
            : in_msprobe(PyBytes_AsString(fb)) ? CODE_MSPROBE
            : skipped(PyBytes_AsString(fb))    ? CODE_SKIP
                                               : CODE_USER;
    if (fb && nb && *kind == CODE_USER)
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

/* Borrowed; NULL: a frame to skip. *kind (may be NULL): its CODE_*. */
static PyObject *code_classify(PyObject *code, int *kind)
{
    int k;
    kind = kind ? kind : &k;
    uint64_t h = ptr_hash(code);
    size_t at = msp_index_find(&g_codes_ix, h, code_is, code);
    if (at != SIZE_MAX) {
        *kind = g_codes[at].kind;
        return g_codes[at].info == Py_None ? NULL : g_codes[at].info;
    }
    msprobe_loaded(); /* its directory known before its code is classed */
    PyObject *info = code_new_info(code, kind);
    code_slot_t *v = g_ncodes < MSP_STACK_KEPT
                         ? msp_grow(g_codes, &g_capcodes, g_ncodes, sizeof *v, 1024)
                         : NULL;
    if (v)
        g_codes = v;
    if (!v || msp_index_put(&g_codes_ix, h, g_ncodes)) { /* full (or no memory): not kept */
        Py_DECREF(info); /* the caller's frame holds code, and info is only read now... */
        return NULL;     /* ...so skip rather than hand out a dead reference */
    }
    Py_INCREF(code);
    g_codes[g_ncodes++] = (code_slot_t){code, info, *kind};
    return info == Py_None ? NULL : info;
}

static PyObject *code_info(PyObject *code)
{
    return code_classify(code, NULL);
}

/* The text of a call site, its kept frames innermost first as (code,
 * position): made once, then found by those pointers and positions. Two
 * positions on one line make two slots of the same text. */
typedef struct {
    PyObject *code; /* borrowed: g_codes holds it */
    long pos;       /* frame_pos */
} site_t;
typedef struct {
    char *text;
    int n;
    site_t site[MSP_STACK_FRAMES];
} text_slot_t;
static text_slot_t *g_texts;
static size_t g_ntexts, g_captexts;
static msp_index_t g_texts_ix;

static uint64_t sites_hash(const site_t *s, int n)
{
    uint64_t h = (uint64_t)n;
    for (int i = 0; i < n; i++)
        h = msp_mix64(h ^ (uint64_t)(uintptr_t)s[i].code) ^ msp_mix64((uint64_t)s[i].pos + h);
    return h;
}

typedef struct {
    const site_t *s;
    int n;
} sites_key_t;

static int sites_are(const void *ctx, size_t i)
{
    const sites_key_t *k = ctx;
    return g_texts[i].n == k->n && memcmp(g_texts[i].site, k->s, (size_t)k->n * sizeof *k->s) == 0;
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
    uint64_t h = sites_hash(s, n);
    sites_key_t key = {s, n};
    size_t at = msp_index_find(&g_texts_ix, h, sites_are, &key);
    if (at != SIZE_MAX)
        return g_texts[at].text;
    char *text = site_text_new(s, n);
    if (!text)
        return NULL;
    text_slot_t *v = g_ntexts < MSP_STACK_KEPT
                         ? msp_grow(g_texts, &g_captexts, g_ntexts, sizeof *v, 1024)
                         : NULL;
    if (v)
        g_texts = v;
    if (!v || msp_index_put(&g_texts_ix, h, g_ntexts)) { /* full (or no memory): the caller's */
        *own = 1;
        return text;
    }
    text_slot_t *e = &g_texts[g_ntexts++];
    memset(e, 0, sizeof *e);
    memcpy(e->site, s, (size_t)n * sizeof *s);
    e->n = n;
    e->text = text;
    return text;
}

char *msp_stack_capture(void)
{
    if (!msp_cfg->stacks || stack_setup() != 1)
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

/* ---- whose code makes a call (Huawei's msprobe loaded) ---- */

/* msprobe's frames that pass a call on to what it wrapped are looked for
 * among the innermost of its frames only: its API wrapper is 4 to 6 frames
 * deep (msprobe 26), its hooks' own calls sit farther out (10 or more). */
#define MSP_PASSAGE_FRAMES 8

/* Whether v is obj, or an object whose attributes hold it (msprobe's
 * ApiTemplate keeps the function it wraps as self.api_func). */
static int holds(PyObject *v, PyObject *obj)
{
    static PyObject *s_dict;
    if (v == obj)
        return 1;
    if (PyType_Check(v) || PyModule_Check(v) || PyDict_Check(v))
        return 0;
    PyObject *d = attr(v, &s_dict, "__dict__");
    PyObject *vals = d && PyDict_Check(d) ? PyDict_Values(d) : NULL;
    int found = 0;
    for (Py_ssize_t i = 0; vals && !found && i < PyList_Size(vals); i++)
        found = PyList_GetItem(vals, i) == obj;
    Py_XDECREF(vals);
    Py_XDECREF(d);
    PyErr_Clear();
    return found;
}

/* Whether frame holds obj among its local (and free) variables, or one
 * attribute away from them. */
static int frame_holds(PyObject *frame, PyObject *obj)
{
    static PyObject *s_f_locals;
    PyObject *loc = attr(frame, &s_f_locals, "f_locals");
    PyObject *vals = loc ? PyMapping_Values(loc) : NULL;
    int found = 0;
    for (Py_ssize_t i = 0; vals && !found && i < PyList_Size(vals); i++)
        found = holds(PyList_GetItem(vals, i), obj);
    Py_XDECREF(vals);
    Py_XDECREF(loc);
    PyErr_Clear();
    return found;
}

int msp_stack_msprobe_call(PyObject *callee)
{
    if (stack_setup() != 1 || !msprobe_loaded())
        return 0;
    msp_quiet_t quiet = msp_quiet_begin();
    /* The wrapper msprobe put in place of the API passes the script's call
     * on to ours through a few frames of its own, the outermost of them
     * holding ours as the function it wraps: those frames are a passage.
     * The first frame that is neither torch's nor such a passage decides:
     * the script's code, or msprobe's own. */
    int seen = 0, first = CODE_SKIP;
    PyObject *frame = frame_top();
    for (int walked = 0; frame && walked < MSP_STACK_WALK; walked++) {
        PyObject *code = frame_code(frame);
        int kind = CODE_SKIP;
        if (code)
            code_classify(code, &kind);
        Py_XDECREF(code);
        if (kind == CODE_MSPROBE && seen++ < MSP_PASSAGE_FRAMES && frame_holds(frame, callee))
            first = CODE_SKIP; /* what lies inside it was the passage */
        else if (first == CODE_SKIP)
            first = kind;
        if (kind == CODE_USER || seen > MSP_PASSAGE_FRAMES)
            break; /* no passage farther out: the answer is known */
        frame = frame_down(frame);
    }
    Py_XDECREF(frame);
    PyErr_Clear();
    msp_quiet_end(quiet);
    return first == CODE_MSPROBE;
}

static int seen_is(const void *ctx, size_t i)
{
    return strcmp(g_seen[i].text, ctx) == 0;
}

/* A new step is a new file: its texts are written again. */
static void seen_reset(void)
{
    for (size_t i = 0; i < g_nseen; i++) {
        free(g_seen[i].text);
        free(g_seen[i].first);
    }
    g_nseen = 0;
    msp_index_clear(&g_seen_ix);
}

/* The table keeps text (malloc'd; hash h), first carried by record name:
 * 1, or 0 when it cannot (text is still the caller's). */
static int seen_add(char *text, uint64_t h, const char *name)
{
    seen_t *v = g_nseen < MSP_SEEN_MAX ? msp_grow(g_seen, &g_capseen, g_nseen, sizeof *v, 1024)
                                       : NULL;
    if (v)
        g_seen = v;
    char *first = v ? strdup(name) : NULL;
    if (!first || msp_index_put(&g_seen_ix, h, g_nseen)) {
        free(first);
        return 0;
    }
    g_seen[g_nseen++] = (seen_t){text, first};
    return 1;
}

void msp_stack_commit(msp_dq_rec_t *r)
{
    char *text = r->stack;
    r->stack = NULL;
    if (!text)
        return;
    if (g_seen_step != msp_g.step) {
        g_seen_step = msp_g.step;
        seen_reset();
    }
    uint64_t h = msp_str_hash(text, 0);
    size_t seen = msp_index_find(&g_seen_ix, h, seen_is, text);
    if (seen != SIZE_MAX) {
        char ref[600] = "@";
        size_t at = 1;
        msp_str_add(ref, sizeof ref, &at, g_seen[seen].first);
        msp_dq_rec_add_attr(r, "stack", ref);
        free(text);
        return;
    }
    msp_dq_rec_add_attr(r, "stack", text);
    if (!r->name || !seen_add(text, h, r->name)) /* else the table keeps the text itself */
        free(text);
}

/* ---- where data preparation ends (py_record.c) ---- */

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

/* loops(code, at): the loops of code around position at (a byte offset, or
 * -(line) - 2), innermost first, each as the positions (or lines) of its
 * first and last instruction: a backward jump's target and the last backward
 * jump to it (a continue jumps back too: the loop is the widest). */
static const char g_loop_py[] =
    "import dis\n"
    "JUMPS = set(getattr(dis, 'hasjump', dis.hasjrel + dis.hasjabs))\n"
    "def loops(code, at):\n"
    "    starts = None\n"
    "    if at < 0:\n"
    "        at = -at - 2\n"
    "        starts = [(o, l) for o, l in dis.findlinestarts(code) if l is not None]\n"
    "    found = {}\n"
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
    "        found.setdefault(lo, []).append(hi)\n"
    "    spans = [(lo, max(his)) for lo, his in found.items()]\n"
    "    return sorted([r for r in spans if r[0] <= at <= r[1]], key=lambda r: r[1] - r[0])\n";

/* The loops around where frame f is, innermost first, into loop (positions
 * as frame_pos gives them, or lines when those are negative): how many. */
static int loops_around(PyObject *code, long pos, msp_frame_loop_t *loop)
{
    static PyObject *fn; /* the helper, made once */
    static int failed;
    if (!fn && !failed) {
        PyObject *ns = msp_py_run_source(g_loop_py, "msprobe_prep_loop");
        fn = ns ? PyDict_GetItemString(ns, "loops") : NULL;
        Py_XINCREF(fn);
        Py_XDECREF(ns);
        failed = !fn;
    }
    PyObject *r = fn ? PyObject_CallFunction(fn, "Ol", code, pos) : NULL;
    Py_ssize_t n = r && PyList_Check(r) ? PyList_Size(r) : 0;
    loop->n = 0;
    for (Py_ssize_t i = 0; i < n && loop->n < MSP_FRAME_LOOPS; i++) {
        PyObject *t = PyList_GetItem(r, i);
        if (!t || !PyTuple_Check(t) || PyTuple_Size(t) != 2)
            break;
        loop->lo[loop->n] = PyLong_AsLong(PyTuple_GetItem(t, 0));
        loop->hi[loop->n++] = PyLong_AsLong(PyTuple_GetItem(t, 1));
    }
    Py_XDECREF(r);
    if (PyErr_Occurred()) {
        msp_py_warn_error("data preparation", "finding the loop that runs the model");
        loop->n = 0;
    }
    return loop->n;
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
            found = loops_around(code, frame_pos(frame), loop) > 0;
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

int msp_stack_loop_of(const msp_frame_ref_t *ref, const msp_frame_loop_t *loop)
{
    if (ref->frame != loop->frame || ref->code != loop->code)
        return -1;
    long at = ref->pos >= 0 ? ref->pos : -ref->pos - 2;
    for (int k = 0; k < loop->n; k++)
        if (loop->lo[k] <= at && at <= loop->hi[k])
            return k;
    return -1;
}
