/* Reading compare results back (merge_result): the cells of an xlsx sheet,
 * row by row, as text.
 *
 * Enough of Office Open XML for the workbooks compare tools write: ours
 * (libxlsxwriter: inline strings) and msprobe's (openpyxl/pandas: shared
 * strings). The workbook's sheet names come from xl/workbook.xml and their
 * parts from xl/_rels/workbook.xml.rels; a sheet's XML is read a chunk at a
 * time and handed over a row at a time, so memory holds one row plus the
 * shared strings. Each part and the shared strings have a size cap, every
 * index is checked, and an error names the file and the part. */
#include "mrg_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

/* Caps on what one workbook may make us hold or read. */
#define CMP_XLSX_MAX_PART ((zip_uint64_t)64 << 30)  /* a sheet's XML, read as a stream */
#define CMP_XLSX_MAX_SMALL ((zip_uint64_t)64 << 20)  /* workbook.xml, its rels */
#define CMP_XLSX_MAX_STRINGS ((zip_uint64_t)1 << 30) /* the shared strings, in bytes */
#define CMP_XLSX_MAX_ROW ((size_t)16 << 20)         /* one <row> element */
#define CMP_XLSX_MAX_COLS 16384                     /* Excel's own */

struct cmp_xlsx {
    char *path;
    zip_t *za;
    char **names, **parts; /* sheets in workbook order */
    size_t n_sheets;
    char **sst;            /* shared strings */
    size_t n_sst;
};

static msp_err cmp_xlsx_fail(const cmp_xlsx_t *x, const char *part, const char *what)
{
    return msp_fail(MSP_ERR_FORMAT, "file %s: %s: %s", x->path, part, what);
}

/* A whole part into memory (NUL-terminated), at most cap bytes. */
static msp_err cmp_xlsx_slurp(cmp_xlsx_t *x, const char *part, zip_uint64_t cap, char **out,
                              size_t *len, int must)
{
    *out = NULL;
    *len = 0;
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat(x->za, part, 0, &st) != 0)
        return must ? cmp_xlsx_fail(x, part, "missing: not a workbook") : MSP_OK;
    if (!(st.valid & ZIP_STAT_SIZE) || st.size > cap) {
        char why[64];
        snprintf(why, sizeof why, "too large (over %llu MiB)", (unsigned long long)(cap >> 20));
        return cmp_xlsx_fail(x, part, why);
    }
    zip_file_t *zf = zip_fopen(x->za, part, 0);
    char *buf = malloc((size_t)st.size + 1);
    if (!zf || !buf) {
        if (zf)
            zip_fclose(zf);
        free(buf);
        return zf ? msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", x->path)
                  : cmp_xlsx_fail(x, part, "cannot be opened");
    }
    zip_int64_t got = zip_fread(zf, buf, st.size);
    zip_fclose(zf);
    if (got < 0 || (zip_uint64_t)got != st.size) {
        free(buf);
        return cmp_xlsx_fail(x, part, "cannot be read (damaged zip member)");
    }
    buf[got] = '\0';
    *out = buf;
    *len = (size_t)got;
    return MSP_OK;
}

/* ---- a little XML ----------------------------------------------------------- */

/* The value of attribute name inside the tag text [p, end) (malloc'd,
 * entities not decoded: the names we read have none), or NULL. */
static char *cmp_xml_attr(const char *p, const char *end, const char *name)
{
    size_t n = strlen(name);
    for (const char *q = p; q + n + 2 < end; q++) {
        if ((q == p || q[-1] == ' ' || q[-1] == '\t' || q[-1] == '\n' || q[-1] == '\r') &&
            !strncmp(q, name, n) && q[n] == '=' && (q[n + 1] == '"' || q[n + 1] == '\'')) {
            char quote = q[n + 1];
            const char *v = q + n + 2, *e = memchr(v, quote, (size_t)(end - v));
            if (!e)
                return NULL;
            return msp_asprintf("%.*s", (int)(e - v), v);
        }
    }
    return NULL;
}

/* Text between tags, entities decoded, appended to *acc. */
static int cmp_xml_text(const char *p, const char *end, char **acc, size_t *len, size_t *cap)
{
    while (p < end) {
        char c = *p;
        size_t adv = 1;
        char utf[5] = {c, 0, 0, 0, 0};
        size_t ulen = 1;
        if (c == '&') {
            const char *semi = memchr(p, ';', (size_t)(end - p) < 12 ? (size_t)(end - p) : 12);
            if (semi) {
                size_t k = (size_t)(semi - p) + 1;
                unsigned long cp = 0;
                int known = 1;
                if (!strncmp(p, "&lt;", 4))
                    cp = '<';
                else if (!strncmp(p, "&gt;", 4))
                    cp = '>';
                else if (!strncmp(p, "&amp;", 5))
                    cp = '&';
                else if (!strncmp(p, "&quot;", 6))
                    cp = '"';
                else if (!strncmp(p, "&apos;", 6))
                    cp = '\'';
                else if (p[1] == '#')
                    cp = p[2] == 'x' ? strtoul(p + 3, NULL, 16) : strtoul(p + 2, NULL, 10);
                else
                    known = 0;
                if (known && cp > 0 && cp <= 0x10FFFF) {
                    adv = k;
                    if (cp < 0x80) {
                        utf[0] = (char)cp;
                        ulen = 1;
                    } else if (cp < 0x800) {
                        utf[0] = (char)(0xC0 | (cp >> 6));
                        utf[1] = (char)(0x80 | (cp & 0x3F));
                        ulen = 2;
                    } else if (cp < 0x10000) {
                        utf[0] = (char)(0xE0 | (cp >> 12));
                        utf[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
                        utf[2] = (char)(0x80 | (cp & 0x3F));
                        ulen = 3;
                    } else {
                        utf[0] = (char)(0xF0 | (cp >> 18));
                        utf[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
                        utf[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
                        utf[3] = (char)(0x80 | (cp & 0x3F));
                        ulen = 4;
                    }
                }
            }
        }
        char *nb = msp_grow(*acc, cap, *len + ulen, 1, 64);
        if (!nb)
            return -1;
        *acc = nb;
        memcpy(*acc + *len, utf, ulen);
        *len += ulen;
        (*acc)[*len] = '\0';
        p += adv;
    }
    return 0;
}

/* The text of every <t> inside [p, end): a string item (<si>, <is>), rich
 * text runs joined. */
static char *cmp_xml_string_item(const char *p, const char *end)
{
    size_t len = 0, cap = 1;
    char *acc = calloc(1, 1);
    if (!acc)
        return NULL;
    while (p < end) {
        const char *t = strstr(p, "<t");
        if (!t || t >= end)
            break;
        if (t[2] != '>' && t[2] != ' ') { /* <tab>, <tc>...: not a text element */
            p = t + 2;
            continue;
        }
        const char *gt = memchr(t, '>', (size_t)(end - t));
        if (!gt)
            break;
        if (gt[-1] == '/') { /* <t/> */
            p = gt + 1;
            continue;
        }
        const char *close = strstr(gt + 1, "</t>");
        if (!close || close > end)
            break;
        if (cmp_xml_text(gt + 1, close, &acc, &len, &cap) != 0) {
            free(acc);
            return NULL;
        }
        p = close + 4;
    }
    return acc;
}

/* ---- the workbook ------------------------------------------------------------- */

void cmp_xlsx_close(cmp_xlsx_t *x)
{
    if (!x)
        return;
    if (x->za)
        zip_discard(x->za);
    for (size_t i = 0; i < x->n_sheets; i++) {
        free(x->names[i]);
        free(x->parts[i]);
    }
    free(x->names);
    free(x->parts);
    for (size_t i = 0; i < x->n_sst; i++)
        free(x->sst[i]);
    free(x->sst);
    free(x->path);
    free(x);
}

static msp_err cmp_xlsx_sheets(cmp_xlsx_t *x)
{
    char *wb = NULL, *rels = NULL;
    size_t wl, rl;
    msp_err rc = cmp_xlsx_slurp(x, "xl/workbook.xml", CMP_XLSX_MAX_SMALL, &wb, &wl, 1);
    if (!rc)
        rc = cmp_xlsx_slurp(x, "xl/_rels/workbook.xml.rels", CMP_XLSX_MAX_SMALL, &rels, &rl, 1);
    size_t cap = 0;
    for (const char *p = wb; !rc && p && (p = strstr(p, "<sheet ")) != NULL;) {
        const char *gt = strchr(p, '>');
        if (!gt) {
            rc = cmp_xlsx_fail(x, "xl/workbook.xml", "a <sheet> element does not end");
            break;
        }
        char *name = cmp_xml_attr(p, gt, "name"), *rid = cmp_xml_attr(p, gt, "r:id");
        char *target = NULL;
        /* the relationship with that id: its target is the sheet's part */
        for (const char *q = rels; rid && q && (q = strstr(q, "<Relationship ")) != NULL;) {
            const char *qe = strchr(q, '>');
            if (!qe)
                break;
            char *id = cmp_xml_attr(q, qe, "Id");
            if (id && !strcmp(id, rid))
                target = cmp_xml_attr(q, qe, "Target");
            free(id);
            if (target)
                break;
            q = qe;
        }
        if (!name || !rid || !target) {
            free(name);
            free(rid);
            free(target);
            rc = cmp_xlsx_fail(x, "xl/workbook.xml", "a sheet without a name or a part");
            break;
        }
        free(rid);
        /* relative to xl/, or absolute from the package root */
        char *part = target[0] == '/' ? msp_asprintf("%s", target + 1)
                                      : msp_asprintf("xl/%s", target);
        free(target);
        char **nn = part ? msp_grow(x->names, &cap, x->n_sheets, sizeof *nn, 8) : NULL;
        if (nn)
            x->names = nn;
        char **np = nn ? realloc(x->parts, cap * sizeof *np) : NULL; /* as many as names */
        if (!np) {
            free(name);
            free(part);
            rc = msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", x->path);
            break;
        }
        x->parts = np;
        x->names[x->n_sheets] = name;
        x->parts[x->n_sheets++] = part;
        p = gt;
    }
    free(wb);
    free(rels);
    return rc;
}

static msp_err cmp_xlsx_shared(cmp_xlsx_t *x)
{
    const char *part = "xl/sharedStrings.xml";
    char *buf = NULL;
    size_t blen = 0;
    /* none: libxlsxwriter's constant_memory writes inline strings */
    msp_err rc = cmp_xlsx_slurp(x, part, CMP_XLSX_MAX_STRINGS, &buf, &blen, 0);
    if (rc || !buf)
        return rc;
    size_t cap = 0;
    for (const char *p = buf; (p = strstr(p, "<si")) != NULL;) {
        if (p[3] != '>' && p[3] != ' ') {
            p += 3;
            continue;
        }
        const char *gt = strchr(p, '>');
        const char *end = gt && gt[-1] != '/' ? strstr(gt, "</si>") : NULL;
        char *s;
        if (gt && gt[-1] == '/') { /* <si/> */
            s = strdup("");
            end = gt - 4; /* so that end + 5 is just past it */
        } else if (!end) {
            rc = cmp_xlsx_fail(x, part, "a string item does not end");
            break;
        } else {
            s = cmp_xml_string_item(p, end);
        }
        char **nv = s ? msp_grow(x->sst, &cap, x->n_sst, sizeof *nv, 256) : NULL;
        if (!nv) {
            free(s);
            rc = msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", x->path);
            break;
        }
        x->sst = nv;
        x->sst[x->n_sst++] = s;
        p = end + 5;
    }
    free(buf);
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

typedef struct cmp_row_state {
    char **cells;
    size_t n, cap;
} cmp_row_state_t;

static void cmp_row_clear(cmp_row_state_t *rs)
{
    for (size_t i = 0; i < rs->n; i++) {
        free(rs->cells[i]);
        rs->cells[i] = NULL;
    }
    rs->n = 0;
}

/* One <row>...</row> (or <row .../>) into cells; 0, or -1 with rc set. */
static int cmp_xlsx_row(cmp_xlsx_t *x, const char *part, const char *p, const char *end,
                        cmp_row_state_t *rs, msp_err *rc)
{
    cmp_row_clear(rs);
    long next = 0;
    while (p < end) {
        const char *c = strstr(p, "<c");
        if (!c || c >= end)
            break;
        if (c[2] != ' ' && c[2] != '>' && c[2] != '/') {
            p = c + 2;
            continue;
        }
        const char *gt = memchr(c, '>', (size_t)(end - c));
        if (!gt)
            break;
        char *ref = cmp_xml_attr(c, gt, "r"), *type = cmp_xml_attr(c, gt, "t");
        long col = ref ? cmp_xlsx_col(ref) : next;
        free(ref);
        int empty = gt[-1] == '/';
        const char *ce = empty ? gt + 1 : strstr(gt, "</c>");
        if (!ce || ce > end) {
            free(type);
            *rc = cmp_xlsx_fail(x, part, "a cell does not end");
            return -1;
        }
        if (col < 0 || col >= CMP_XLSX_MAX_COLS) {
            free(type);
            *rc = cmp_xlsx_fail(x, part, "a cell reference is out of range");
            return -1;
        }
        next = col + 1;
        char *text = NULL;
        if (!empty) {
            if (type && !strcmp(type, "inlineStr")) {
                text = cmp_xml_string_item(gt + 1, ce);
            } else {
                const char *v = strstr(gt, "<v>"), *ve = v ? strstr(v, "</v>") : NULL;
                if (v && ve && ve < ce) {
                    char *acc = NULL;
                    size_t len = 0, cap = 0;
                    if (cmp_xml_text(v + 3, ve, &acc, &len, &cap) == 0)
                        text = acc ? acc : strdup("");
                    if (text && type && !strcmp(type, "s")) {
                        char *e2;
                        unsigned long k = strtoul(text, &e2, 10);
                        free(text);
                        text = NULL;
                        if (*e2 || k >= x->n_sst) {
                            free(type);
                            *rc = cmp_xlsx_fail(x, part, "a cell names a shared string that "
                                                         "does not exist");
                            return -1;
                        }
                        text = strdup(x->sst[k]);
                    } else if (text && type && !strcmp(type, "b")) {
                        char *b = strdup(text[0] == '1' ? "True" : "False");
                        free(text);
                        text = b;
                    }
                }
            }
        }
        free(type);
        if (text) {
            char **nv = msp_grow(rs->cells, &rs->cap, (size_t)col, sizeof *nv, 32);
            if (!nv) {
                free(text);
                *rc = msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", x->path);
                return -1;
            }
            rs->cells = nv;
            free(rs->cells[col]);
            rs->cells[col] = text;
            if ((size_t)col + 1 > rs->n)
                rs->n = (size_t)col + 1;
        }
        p = empty ? gt + 1 : ce + 4;
    }
    return 0;
}

msp_err cmp_xlsx_rows(cmp_xlsx_t *x, size_t sheet, cmp_xlsx_row_cb cb, void *ud)
{
    if (sheet >= x->n_sheets)
        return msp_fail(MSP_ERR_INTERNAL, "file %s: no sheet %zu", x->path, sheet);
    const char *part = x->parts[sheet];
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat(x->za, part, 0, &st) != 0)
        return cmp_xlsx_fail(x, part, "the sheet's part is missing");
    if ((st.valid & ZIP_STAT_SIZE) && st.size > CMP_XLSX_MAX_PART)
        return cmp_xlsx_fail(x, part, "too large (over 64 GiB)");
    zip_file_t *zf = zip_fopen(x->za, part, 0);
    if (!zf)
        return cmp_xlsx_fail(x, part, "cannot be opened");
    size_t cap = (size_t)1 << 20, len = 0;
    char *buf = malloc(cap + 1);
    cmp_row_state_t rs = {0};
    msp_err rc = buf ? MSP_OK : msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", x->path);
    size_t row_i = 0;
    int eof = 0;
    while (!rc) {
        if (!eof && len < cap) {
            zip_int64_t got = zip_fread(zf, buf + len, cap - len);
            if (got < 0) {
                rc = cmp_xlsx_fail(x, part, "cannot be read (damaged zip member)");
                break;
            }
            eof = got == 0;
            len += (size_t)got;
        }
        buf[len] = '\0';
        /* every complete row in the buffer */
        char *p = buf;
        for (;;) {
            char *r = strstr(p, "<row");
            if (!r || (r[4] != ' ' && r[4] != '>'))
                break;
            char *gt = strchr(r, '>');
            if (!gt)
                break;
            char *re = gt[-1] == '/' ? gt + 1 : strstr(gt, "</row>");
            if (!re)
                break;
            if (cmp_xlsx_row(x, part, gt + 1, gt[-1] == '/' ? gt : re, &rs, &rc) != 0)
                break;
            if ((rc = cb(ud, row_i++, rs.n, (const char *const *)rs.cells)))
                break;
            p = gt[-1] == '/' ? gt + 1 : re + 6;
        }
        if (rc)
            break;
        /* keep what is left of an unfinished row (or the tail of the XML) */
        char *keep = strstr(p, "<row");
        size_t from = keep ? (size_t)(keep - buf) : (len > 8 ? len - 8 : 0);
        if (!keep && p > buf + from)
            from = (size_t)(p - buf);
        memmove(buf, buf + from, len - from);
        len -= from;
        if (eof)
            break;
        if (len >= cap) {
            /* one row fills the buffer: grow it, within reason */
            if (cap >= CMP_XLSX_MAX_ROW) {
                rc = cmp_xlsx_fail(x, part, "a row is over 16 MiB of XML");
                break;
            }
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb) {
                rc = msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", x->path);
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    cmp_row_clear(&rs);
    free(rs.cells);
    free(buf);
    zip_fclose(zf);
    return rc;
}
