/* A workbook's shared strings (xl/sharedStrings.xml), for the cells whose
 * texts repeat row after row: dtypes, shapes, verdicts, results, messages,
 * True/False. A details row of a statistics tree held eleven such cells as
 * inline strings, a quarter of its XML and of the deflating thread's work;
 * as shared strings each is an index (issue 42). Names and other texts that
 * rarely repeat stay inline (rep_sheet.c): the table takes only short texts
 * and holds at most REP_SST_MAX of them (a few MB at most), so its memory is
 * bounded whatever the tree; a text past that is written inline, as before.
 *
 * Used by the one thread that writes a workbook's rows. */
#include "rep_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define REP_SST_MAX 16384   /* distinct texts a workbook shares */
#define REP_SST_MAX_LEN 255 /* bytes of a text that may be shared */

struct rep_sst {
    char **strs;
    size_t n, cap;
    uint64_t count; /* cells that name one */
    msp_index_t idx;
};

rep_sst_t *rep_sst_new(void)
{
    return calloc(1, sizeof(rep_sst_t));
}

void rep_sst_free(rep_sst_t *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++)
        free(t->strs[i]);
    free(t->strs);
    msp_index_free(&t->idx);
    free(t);
}

static int rep_sst_eq(const void *ctx, size_t i)
{
    const void *const *c = ctx; /* {table, text} */
    const rep_sst_t *t = c[0];
    return strcmp(t->strs[i], (const char *)c[1]) == 0;
}

long rep_sst_id(rep_sst_t *t, const char *text, size_t len)
{
    if (!t || !len || len > REP_SST_MAX_LEN)
        return -1;
    uint64_t h = msp_str_hash(text, 0);
    const void *ctx[2] = {t, text};
    size_t at = msp_index_find(&t->idx, h, rep_sst_eq, ctx);
    if (at == SIZE_MAX) {
        if (t->n >= REP_SST_MAX)
            return -1;
        char **nv = msp_grow(t->strs, &t->cap, t->n, sizeof *nv, 64);
        if (!nv)
            return -1;
        t->strs = nv;
        if (!(t->strs[t->n] = strdup(text)))
            return -1;
        if (msp_index_put(&t->idx, h, t->n) != 0) {
            free(t->strs[t->n]);
            return -1;
        }
        at = t->n++;
    }
    t->count++;
    return (long)at;
}

void rep_sst_again(rep_sst_t *t)
{
    t->count++;
}

int rep_sst_used(const rep_sst_t *t)
{
    return t && t->n > 0;
}

/* text escaped as a cell's text is (rep_xml_escape) at the end of b. */
static void rep_sst_text(msp_buf_t *b, const char *s)
{
    size_t len = strlen(s), room = 0;
    char *p = msp_buf_room(b, len * 7 + 1, &room);
    if (p && room >= len * 7)
        msp_buf_grew(b, rep_xml_escape(p, s, len));
    else
        b->oom = 1;
}

char *rep_sst_xml(const rep_sst_t *t, size_t *len)
{
    msp_buf_t b = {0};
    msp_buf_printf(&b,
                   "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n"
                   "<sst xmlns=\"http://schemas.openxmlformats.org/spreadsheetml/2006/main\" "
                   "count=\"%llu\" uniqueCount=\"%zu\">",
                   (unsigned long long)t->count, t->n);
    for (size_t i = 0; i < t->n; i++) {
        const char *s = t->strs[i];
        size_t n = strlen(s);
        int keep = n && (isspace((unsigned char)s[0]) || isspace((unsigned char)s[n - 1]));
        msp_buf_puts(&b, keep ? "<si><t xml:space=\"preserve\">" : "<si><t>");
        rep_sst_text(&b, s);
        msp_buf_puts(&b, "</t></si>");
    }
    msp_buf_puts(&b, "</sst>");
    if (b.oom) {
        msp_buf_free(&b);
        return NULL;
    }
    *len = b.len;
    return b.data;
}
