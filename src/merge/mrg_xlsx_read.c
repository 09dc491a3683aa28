/* Reading compare results back (merge_result): the cells of an xlsx sheet,
 * row by row, as text.
 *
 * Enough of Office Open XML for the workbooks compare tools write: ours
 * (libxlsxwriter: inline strings) and msprobe's (openpyxl/pandas: shared
 * strings). The workbook's sheet names come from xl/workbook.xml and their
 * parts from xl/_rels/workbook.xml.rels; every part is read by expat as a
 * stream, a chunk at a time, and a sheet's cells are handed over a row at a
 * time, so memory holds one row plus the shared strings. Each part and each
 * row has a size cap, every index is checked, a document type declaration
 * is refused (a workbook has none; no entity is ever expanded), and an
 * error names the file and the part. */
#include "mrg_internal.h"

#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

/* Caps on what one workbook may make us hold or read. */
#define CMP_XLSX_MAX_PART ((zip_uint64_t)64 << 30)   /* a sheet's XML, read as a stream */
#define CMP_XLSX_MAX_SMALL ((zip_uint64_t)64 << 20)  /* workbook.xml, its rels */
#define CMP_XLSX_MAX_STRINGS ((zip_uint64_t)1 << 30) /* the shared strings, in bytes */
#define CMP_XLSX_MAX_ROW ((size_t)16 << 20)          /* the text of one row */
#define CMP_XLSX_MAX_COLS 16384                      /* Excel's own */
#define CMP_XLSX_CHUNK 65536

struct cmp_xlsx {
    char *path;
    zip_t *za;
    char **names, **parts; /* sheets in workbook order */
    size_t n_sheets;
    char **sst; /* shared strings */
    size_t n_sst;
};

static msp_err cmp_xlsx_fail(const cmp_xlsx_t *x, const char *part, const char *what)
{
    return msp_fail(MSP_ERR_FORMAT, "file %s: %s: %s", x->path, part, what);
}

static msp_err cmp_xlsx_nomem(const cmp_xlsx_t *x)
{
    return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", x->path);
}

/* ---- one part through expat ---------------------------------------------- */

/* What every handler gets: the parser, the part, the first error (a handler
 * that sets it stops the parser) and the handlers' own state. */
typedef struct cmp_xml {
    XML_Parser p;
    cmp_xlsx_t *x;
    const char *part;
    msp_err rc;
    void *ud;
} cmp_xml_t;

static void cmp_xml_stop(cmp_xml_t *xm, msp_err rc)
{
    if (!xm->rc)
        xm->rc = rc;
    XML_StopParser(xm->p, XML_FALSE);
}

/* An element's or attribute's name without its namespace prefix. */
static const char *cmp_xml_local(const char *name)
{
    const char *c = strrchr(name, ':');
    return c ? c + 1 : name;
}

/* The value of attribute name (prefixed: any prefix, "r:id" for "id"). */
static const char *cmp_xml_attr(const XML_Char **atts, const char *name, int prefixed)
{
    for (; atts[0]; atts += 2)
        if (prefixed ? strchr(atts[0], ':') && !strcmp(cmp_xml_local(atts[0]), name)
                     : !strcmp(atts[0], name))
            return atts[1];
    return NULL;
}

static void XMLCALL cmp_xml_doctype(void *ud, const XML_Char *name, const XML_Char *sysid,
                                    const XML_Char *pubid, int has_internal)
{
    cmp_xml_t *xm = ud;
    (void)name, (void)sysid, (void)pubid, (void)has_internal;
    cmp_xml_stop(xm, cmp_xlsx_fail(xm->x, xm->part,
                                   "a document type declaration (a workbook "
                                   "part has none): refused"));
}

typedef struct cmp_xml_handlers {
    XML_StartElementHandler start;
    XML_EndElementHandler end;
    XML_CharacterDataHandler text;
} cmp_xml_handlers_t;

/* Stream part (at most cap bytes) through expat with h; ud reaches the
 * handlers as cmp_xml_t.ud. A missing part is an error when must is set,
 * else MSP_OK with *found 0. */
static msp_err cmp_xml_read(cmp_xlsx_t *x, const char *part, zip_uint64_t cap, int must, int *found,
                            const cmp_xml_handlers_t *h, void *ud)
{
    *found = 0;
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat(x->za, part, 0, &st) != 0)
        return must ? cmp_xlsx_fail(x, part, "missing: not a workbook") : MSP_OK;
    *found = 1;
    char why[64];
    snprintf(why, sizeof why, "too large (over %llu %s)",
             (unsigned long long)(cap >= (1ull << 30) ? cap >> 30 : cap >> 20),
             cap >= (1ull << 30) ? "GiB" : "MiB");
    if ((st.valid & ZIP_STAT_SIZE) && st.size > cap)
        return cmp_xlsx_fail(x, part, why);
    zip_file_t *zf = zip_fopen(x->za, part, 0);
    if (!zf)
        return cmp_xlsx_fail(x, part, "cannot be opened");
    cmp_xml_t xm = {XML_ParserCreate(NULL), x, part, MSP_OK, ud};
    msp_err rc = xm.p ? MSP_OK : cmp_xlsx_nomem(x);
    if (xm.p) {
        XML_SetUserData(xm.p, &xm);
        XML_SetElementHandler(xm.p, h->start, h->end);
        XML_SetCharacterDataHandler(xm.p, h->text);
        XML_SetStartDoctypeDeclHandler(xm.p, cmp_xml_doctype);
    }
    zip_uint64_t total = 0;
    while (!rc) {
        void *buf = XML_GetBuffer(xm.p, CMP_XLSX_CHUNK);
        if (!buf) {
            rc = cmp_xlsx_nomem(x);
            break;
        }
        zip_int64_t got = zip_fread(zf, buf, CMP_XLSX_CHUNK);
        if (got < 0) {
            rc = cmp_xlsx_fail(x, part, "cannot be read (damaged zip member)");
            break;
        }
        if ((total += (zip_uint64_t)got) > cap) {
            rc = cmp_xlsx_fail(x, part, why);
            break;
        }
        if (XML_ParseBuffer(xm.p, (int)got, got == 0) != XML_STATUS_OK) {
            rc = xm.rc;
            if (!rc) {
                char what[160];
                snprintf(what, sizeof what, "not XML (line %lu: %s)",
                         (unsigned long)XML_GetCurrentLineNumber(xm.p),
                         XML_ErrorString(XML_GetErrorCode(xm.p)));
                rc = cmp_xlsx_fail(x, part, what);
            }
            break;
        }
        if (got == 0)
            break;
    }
    if (xm.p)
        XML_ParserFree(xm.p);
    zip_fclose(zf);
    return rc;
}

/* ---- the workbook ------------------------------------------------------------- */

void cmp_xlsx_close(cmp_xlsx_t *x)
{
    if (!x)
        return;
    if (x->za)
        zip_discard(x->za);
    cmp_strv_free(x->names, x->n_sheets);
    cmp_strv_free(x->parts, x->n_sheets);
    cmp_strv_free(x->sst, x->n_sst);
    free(x->path);
    free(x);
}

/* Pairs of strings read from workbook.xml (sheet name, r:id) or its rels
 * (Id, Target). */
typedef struct cmp_xml_pair {
    char *a, *b;
} cmp_xml_pair_t;

typedef struct cmp_xml_pairs {
    const char *elem, *a, *b;
    int b_prefixed;
    cmp_xml_pair_t *v;
    size_t n, cap;
} cmp_xml_pairs_t;

static void XMLCALL cmp_pairs_start(void *ud, const XML_Char *name, const XML_Char **atts)
{
    cmp_xml_t *xm = ud;
    cmp_xml_pairs_t *pr = xm->ud;
    if (strcmp(cmp_xml_local(name), pr->elem) != 0)
        return;
    const char *a = cmp_xml_attr(atts, pr->a, 0), *b = cmp_xml_attr(atts, pr->b, pr->b_prefixed);
    if (!a || !b) {
        if (!strcmp(pr->elem, "sheet"))
            cmp_xml_stop(xm, cmp_xlsx_fail(xm->x, xm->part, "a sheet without a name or a part"));
        return; /* a relationship we do not need */
    }
    cmp_xml_pair_t *nv = msp_grow(pr->v, &pr->cap, pr->n, sizeof *nv, 8);
    if (nv)
        pr->v = nv;
    char *da = nv ? strdup(a) : NULL, *db = da ? strdup(b) : NULL;
    if (!db) {
        free(da);
        cmp_xml_stop(xm, cmp_xlsx_nomem(xm->x));
        return;
    }
    pr->v[pr->n++] = (cmp_xml_pair_t){da, db};
}

static void cmp_pairs_free(cmp_xml_pairs_t *pr)
{
    for (size_t i = 0; i < pr->n; i++) {
        free(pr->v[i].a);
        free(pr->v[i].b);
    }
    free(pr->v);
}

static msp_err cmp_xlsx_sheets(cmp_xlsx_t *x)
{
    static const cmp_xml_handlers_t h = {cmp_pairs_start, NULL, NULL};
    cmp_xml_pairs_t sheets = {.elem = "sheet", .a = "name", .b = "id", .b_prefixed = 1};
    cmp_xml_pairs_t rels = {.elem = "Relationship", .a = "Id", .b = "Target"};
    int found;
    msp_err rc = cmp_xml_read(x, "xl/workbook.xml", CMP_XLSX_MAX_SMALL, 1, &found, &h, &sheets);
    if (!rc)
        rc = cmp_xml_read(x, "xl/_rels/workbook.xml.rels", CMP_XLSX_MAX_SMALL, 1, &found, &h,
                          &rels);
    if (!rc && sheets.n) {
        x->names = calloc(sheets.n, sizeof *x->names);
        x->parts = calloc(sheets.n, sizeof *x->parts);
        if (!x->names || !x->parts)
            rc = cmp_xlsx_nomem(x);
    }
    for (size_t i = 0; !rc && i < sheets.n; i++) {
        const char *target = NULL;
        for (size_t k = 0; k < rels.n && !target; k++)
            if (!strcmp(rels.v[k].a, sheets.v[i].b))
                target = rels.v[k].b;
        if (!target) {
            rc = cmp_xlsx_fail(x, "xl/workbook.xml", "a sheet without a name or a part");
            break;
        }
        /* relative to xl/, or absolute from the package root */
        char *part = target[0] == '/' ? strdup(target + 1) : msp_asprintf("xl/%s", target);
        if (!part) {
            rc = cmp_xlsx_nomem(x);
            break;
        }
        x->names[x->n_sheets] = sheets.v[i].a;
        x->parts[x->n_sheets++] = part;
        sheets.v[i].a = NULL; /* the workbook owns it now */
    }
    cmp_pairs_free(&sheets);
    cmp_pairs_free(&rels);
    return rc;
}

/* A malloc'd string onto the vector v (n items, cap); NULL s: out of memory. */
static int cmp_strv_push(char ***v, size_t *n, size_t *cap, char *s)
{
    char **nv = s ? msp_grow(*v, cap, *n, sizeof *nv, 256) : NULL;
    if (!nv) {
        free(s);
        return -1;
    }
    *v = nv;
    nv[(*n)++] = s;
    return 0;
}

/* ---- text of string items (<si>, a cell's <is>) ----------------------------------- */

/* The text of every <t> of a string item, rich text runs joined; a
 * phonetic run's (<rPh>, a reading aid) is not part of it. */
typedef struct cmp_xml_str {
    int in_item, in_t, in_rph;
    msp_buf_t acc;
    size_t cap; /* the shared strings' capacity (x->sst) */
} cmp_xml_str_t;

static void cmp_str_start(cmp_xml_str_t *s, const char *local)
{
    if (!strcmp(local, "rPh"))
        s->in_rph++;
    else if (!strcmp(local, "t") && s->in_item && !s->in_rph)
        s->in_t = 1;
}

static void cmp_str_end(cmp_xml_str_t *s, const char *local)
{
    if (!strcmp(local, "rPh") && s->in_rph)
        s->in_rph--;
    else if (!strcmp(local, "t"))
        s->in_t = 0;
}

/* The item's text so far, malloc'd ("" when none). */
static char *cmp_str_take(cmp_xml_str_t *s)
{
    char *t = strdup(s->acc.len ? s->acc.data : "");
    s->acc.len = 0;
    if (s->acc.data)
        s->acc.data[0] = '\0';
    return t;
}

static void XMLCALL cmp_sst_start(void *ud, const XML_Char *name, const XML_Char **atts)
{
    cmp_xml_t *xm = ud;
    cmp_xml_str_t *s = xm->ud;
    const char *local = cmp_xml_local(name);
    (void)atts;
    if (!strcmp(local, "si"))
        s->in_item = 1;
    cmp_str_start(s, local);
}

static void XMLCALL cmp_sst_end(void *ud, const XML_Char *name)
{
    cmp_xml_t *xm = ud;
    cmp_xml_str_t *s = xm->ud;
    const char *local = cmp_xml_local(name);
    cmp_str_end(s, local);
    if (strcmp(local, "si") != 0 || !s->in_item)
        return;
    s->in_item = 0;
    cmp_xlsx_t *x = xm->x;
    if (s->acc.oom || cmp_strv_push(&x->sst, &x->n_sst, &s->cap, cmp_str_take(s)))
        cmp_xml_stop(xm, cmp_xlsx_nomem(x));
}

static void XMLCALL cmp_str_text(void *ud, const XML_Char *t, int len)
{
    cmp_xml_t *xm = ud;
    cmp_xml_str_t *s = xm->ud;
    if (s->in_t)
        msp_buf_put(&s->acc, t, (size_t)len);
}

static msp_err cmp_xlsx_shared(cmp_xlsx_t *x)
{
    static const cmp_xml_handlers_t h = {cmp_sst_start, cmp_sst_end, cmp_str_text};
    cmp_xml_str_t s = {0};
    int found;
    /* none: libxlsxwriter's constant_memory writes inline strings */
    msp_err rc = cmp_xml_read(x, "xl/sharedStrings.xml", CMP_XLSX_MAX_STRINGS, 0, &found, &h, &s);
    msp_buf_free(&s.acc);
    return rc;
}

msp_err cmp_xlsx_open(const char *path, cmp_xlsx_t **out)
{
    *out = NULL;
    cmp_xlsx_t *x = calloc(1, sizeof *x);
    if (!x || !(x->path = strdup(path))) {
        free(x);
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    int zerr = 0, fd = -1;
    msp_err orc = msp_open_regular(path, &fd); /* libzip would block on a FIFO */
    if (orc) {
        cmp_xlsx_close(x);
        return orc;
    }
    x->za = zip_fdopen(fd, ZIP_RDONLY, &zerr); /* owns fd once open */
    if (!x->za) {
        close(fd);
        zip_error_t ze;
        zip_error_init_with_code(&ze, zerr);
        msp_err rc = msp_fail(MSP_ERR_FORMAT, "file %s: not a workbook (%s)", path,
                              zip_error_strerror(&ze));
        zip_error_fini(&ze);
        cmp_xlsx_close(x);
        return rc;
    }
    msp_err rc = cmp_xlsx_sheets(x);
    if (!rc)
        rc = cmp_xlsx_shared(x);
    if (rc) {
        cmp_xlsx_close(x);
        return rc;
    }
    *out = x;
    return MSP_OK;
}

size_t cmp_xlsx_sheet_count(const cmp_xlsx_t *x)
{
    return x->n_sheets;
}

const char *cmp_xlsx_sheet_name(const cmp_xlsx_t *x, size_t i)
{
    return i < x->n_sheets ? x->names[i] : NULL;
}

/* ---- rows ---------------------------------------------------------------------- */

/* "AB12" -> column 27 (0-based); -1 when not a cell reference. */
static long cmp_xlsx_col(const char *ref)
{
    long c = 0;
    int n = 0;
    for (; *ref >= 'A' && *ref <= 'Z' && n < 4; ref++, n++)
        c = c * 26 + (*ref - 'A' + 1);
    return n ? c - 1 : -1;
}

/* A sheet being read: the row in hand, the cell in hand. */
typedef struct cmp_sheet_read {
    cmp_xlsx_row_cb cb;
    void *cb_ud;
    char **cells; /* the row's cells by column; NULL: empty */
    size_t n, cap, row, row_bytes;
    int in_row, in_cell, in_v, has_v, has_is;
    long col, next;    /* the cell's column, the next one without a reference */
    char type[16];     /* the cell's t attribute ("s", "b", "inlineStr", ...) */
    cmp_xml_str_t str; /* the cell's <v> or <is> text */
} cmp_sheet_read_t;

static void cmp_row_clear(cmp_sheet_read_t *sr)
{
    for (size_t i = 0; i < sr->n; i++) {
        free(sr->cells[i]);
        sr->cells[i] = NULL;
    }
    sr->n = 0;
    sr->row_bytes = 0;
}

static void XMLCALL cmp_sheet_start(void *ud, const XML_Char *name, const XML_Char **atts)
{
    cmp_xml_t *xm = ud;
    cmp_sheet_read_t *sr = xm->ud;
    const char *local = cmp_xml_local(name);
    if (!strcmp(local, "row")) {
        cmp_row_clear(sr);
        sr->in_row = 1;
        sr->next = 0;
    } else if (!strcmp(local, "c") && sr->in_row) {
        const char *ref = cmp_xml_attr(atts, "r", 0), *t = cmp_xml_attr(atts, "t", 0);
        sr->col = ref ? cmp_xlsx_col(ref) : sr->next;
        if (sr->col < 0 || sr->col >= CMP_XLSX_MAX_COLS) {
            cmp_xml_stop(xm, cmp_xlsx_fail(xm->x, xm->part, "a cell reference is out of range"));
            return;
        }
        sr->next = sr->col + 1;
        snprintf(sr->type, sizeof sr->type, "%s", t ? t : "");
        sr->in_cell = 1;
        sr->has_v = sr->has_is = 0;
        sr->str.acc.len = 0;
    } else if (sr->in_cell && !strcmp(local, "v")) {
        sr->in_v = sr->has_v = 1;
        sr->str.in_t = 1; /* a value's text is collected as a <t>'s */
    } else if (sr->in_cell && !strcmp(local, "is")) {
        sr->has_is = sr->str.in_item = 1;
    } else if (sr->in_cell) {
        cmp_str_start(&sr->str, local);
    }
}

/* The text of the cell in hand (NULL: empty), its type applied; -1 with
 * the error stopped when a shared-string index is wrong. */
static int cmp_cell_text(cmp_xml_t *xm, cmp_sheet_read_t *sr, char **text)
{
    *text = NULL;
    int is_inline = !strcmp(sr->type, "inlineStr");
    if (is_inline ? !sr->has_is : !sr->has_v)
        return 0;
    char *t = cmp_str_take(&sr->str);
    if (t && !strcmp(sr->type, "s")) {
        char *e;
        unsigned long k = strtoul(t, &e, 10);
        int bad = *e || k >= xm->x->n_sst;
        free(t);
        if (bad) {
            cmp_xml_stop(xm, cmp_xlsx_fail(xm->x, xm->part,
                                           "a cell names a shared string that "
                                           "does not exist"));
            return -1;
        }
        t = strdup(xm->x->sst[k]);
    } else if (t && !strcmp(sr->type, "b")) {
        char *b = strdup(t[0] == '1' ? "True" : "False");
        free(t);
        t = b;
    }
    if (!t || sr->str.acc.oom) {
        free(t);
        cmp_xml_stop(xm, cmp_xlsx_nomem(xm->x));
        return -1;
    }
    *text = t;
    return 0;
}

static void cmp_cell_end(cmp_xml_t *xm, cmp_sheet_read_t *sr)
{
    sr->in_cell = sr->in_v = 0;
    sr->str.in_item = sr->str.in_t = sr->str.in_rph = 0;
    char *text;
    if (cmp_cell_text(xm, sr, &text) != 0 || !text)
        return;
    size_t col = (size_t)sr->col;
    sr->row_bytes += strlen(text);
    char **nv = sr->row_bytes <= CMP_XLSX_MAX_ROW
                    ? msp_grow(sr->cells, &sr->cap, col, sizeof *nv, 32)
                    : NULL;
    if (!nv) {
        free(text);
        cmp_xml_stop(xm, sr->row_bytes > CMP_XLSX_MAX_ROW
                             ? cmp_xlsx_fail(xm->x, xm->part, "a row is over 16 MiB of text")
                             : cmp_xlsx_nomem(xm->x));
        return;
    }
    sr->cells = nv;
    free(sr->cells[col]);
    sr->cells[col] = text;
    if (col + 1 > sr->n)
        sr->n = col + 1;
}

static void XMLCALL cmp_sheet_end(void *ud, const XML_Char *name)
{
    cmp_xml_t *xm = ud;
    cmp_sheet_read_t *sr = xm->ud;
    const char *local = cmp_xml_local(name);
    if (sr->in_cell && !strcmp(local, "c")) {
        cmp_cell_end(xm, sr);
    } else if (sr->in_cell && !strcmp(local, "v")) {
        sr->in_v = sr->str.in_t = 0;
    } else if (sr->in_cell && !strcmp(local, "is")) {
        sr->str.in_item = 0;
    } else if (sr->in_cell) {
        cmp_str_end(&sr->str, local);
    } else if (sr->in_row && !strcmp(local, "row")) {
        sr->in_row = 0;
        msp_err rc = sr->cb(sr->cb_ud, sr->row++, sr->n, (const char *const *)sr->cells);
        if (rc)
            cmp_xml_stop(xm, rc);
    }
}

static void XMLCALL cmp_sheet_text(void *ud, const XML_Char *t, int len)
{
    cmp_xml_t *xm = ud;
    cmp_sheet_read_t *sr = xm->ud;
    if (!sr->str.in_t)
        return;
    if (sr->str.acc.len + (size_t)len > CMP_XLSX_MAX_ROW) {
        cmp_xml_stop(xm, cmp_xlsx_fail(xm->x, xm->part, "a row is over 16 MiB of text"));
        return;
    }
    msp_buf_put(&sr->str.acc, t, (size_t)len);
}

msp_err cmp_xlsx_rows(cmp_xlsx_t *x, size_t sheet, cmp_xlsx_row_cb cb, void *ud)
{
    static const cmp_xml_handlers_t h = {cmp_sheet_start, cmp_sheet_end, cmp_sheet_text};
    if (sheet >= x->n_sheets)
        return msp_fail(MSP_ERR_INTERNAL, "file %s: no sheet %zu", x->path, sheet);
    cmp_sheet_read_t sr = {.cb = cb, .cb_ud = ud};
    int found;
    msp_err rc = cmp_xml_read(x, x->parts[sheet], CMP_XLSX_MAX_PART, 0, &found, &h, &sr);
    if (!rc && !found)
        rc = cmp_xlsx_fail(x, x->parts[sheet], "the sheet's part is missing");
    cmp_row_clear(&sr);
    free(sr.cells);
    msp_buf_free(&sr.str.acc);
    return rc;
}
