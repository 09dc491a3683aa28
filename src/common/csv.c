/* CSV text (RFC 4180) as msprobe writes and reads it: one field at a time
 * into result.csv and acc_check's csvs, and a file's records read back by
 * libcsv, strict, for api_precision_compare and merge_result
 * (include/msprobe/common.h). */
#include "msprobe/common.h"

#include <csv.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void msp_csv_field_buf(msp_buf_t *b, const char *s, int first)
{
    s = s ? s : "";
    size_t n = msp_csv_plain_len(s), room;
    if (n != SIZE_MAX) {
        char *d = msp_buf_room(b, n + 1, &room);
        if (d) {
            *d = ',';
            memcpy(d + !first, s, n);
            msp_buf_grew(b, n + !first);
        }
        return;
    }
    char *owned = NULL;
    s = msp_utf8_clean(s, 0, &owned); /* csv is read as UTF-8: no invalid bytes */
    if (!s) {
        b->oom = 1;
        return;
    }
    if (!first)
        msp_buf_put(b, ",", 1);
    n = strlen(s);
    char *d = strpbrk(s, ",\"\r\n") ? msp_buf_room(b, 2 * n + 2, &room) : NULL;
    if (d) {
        size_t k = 0;
        d[k++] = '"';
        for (const char *p = s; *p; p++) {
            if (*p == '"')
                d[k++] = '"';
            d[k++] = *p;
        }
        d[k++] = '"';
        msp_buf_grew(b, k);
    } else if (!b->oom) {
        msp_buf_put(b, s, n);
    }
    free(owned);
}

void msp_csv_field(FILE *f, const char *s, int first)
{
    size_t n = msp_csv_plain_len(s ? s : "");
    if (n != SIZE_MAX) {
        if (!first)
            fputc_unlocked(',', f);
        fwrite_unlocked(s ? s : "", 1, n, f);
        return;
    }
    msp_buf_t b = {0};
    msp_csv_field_buf(&b, s, first);
    if (!b.oom)
        fwrite_unlocked(b.data, 1, b.len, f);
    msp_buf_free(&b);
}

/* ---- reading --------------------------------------------------------------- */

/* libcsv grows a field's buffer through this: refusing past the cap is how a
 * field over MSP_CSV_MAX_FIELD stops the parse (CSV_ENOMEM, told apart from
 * a real lack of memory by the buffer's size). */
static void *msp_csv_realloc(void *p, size_t n)
{
    return n > MSP_CSV_MAX_FIELD + 4096 ? NULL : realloc(p, n);
}

/* No byte is a blank to trim: " " is a field of its own (acc_check writes it). */
static int msp_csv_no_space(unsigned char c)
{
    (void)c;
    return 0;
}

typedef struct msp_csv_read_state {
    msp_csv_row_cb cb;
    void *ud;
    char **cells;
    size_t n, cap, row;
    msp_err rc;
} msp_csv_read_state_t;

static void msp_csv_on_field(void *data, size_t len, void *ud)
{
    msp_csv_read_state_t *st = ud;
    if (st->rc)
        return;
    char **nv = msp_grow(st->cells, &st->cap, st->n, sizeof *nv, 32);
    char *d = nv ? malloc(len + 1) : NULL;
    if (!d) {
        st->rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
        return;
    }
    st->cells = nv;
    if (len)
        memcpy(d, data, len);
    d[len] = '\0';
    st->cells[st->n++] = d;
}

static void msp_csv_on_row(int term, void *ud)
{
    msp_csv_read_state_t *st = ud;
    (void)term;
    if (!st->rc)
        st->rc = st->cb(st->ud, st->row++, st->n, (const char *const *)st->cells);
    for (size_t i = 0; i < st->n; i++)
        free(st->cells[i]);
    st->n = 0;
}

static size_t msp_csv_lines(const unsigned char *p, size_t n)
{
    size_t k = 0;
    for (const unsigned char *e = p + n; (p = memchr(p, '\n', (size_t)(e - p))) != NULL; p++)
        k++;
    return k;
}

/* The error of a parse that stopped at line (1-based; at_end: the end of
 * the file, where csv_fini found a quoted field still open). */
static msp_err msp_csv_error(struct csv_parser *p, const char *path, size_t line, int at_end)
{
    if (csv_error(p) == CSV_ENOMEM && csv_get_buffer_size(p) > MSP_CSV_MAX_FIELD / 2)
        return msp_fail(MSP_ERR_LIMIT, "%s: line %zu: a field over %d MiB", path, line,
                        MSP_CSV_MAX_FIELD >> 20);
    if (csv_error(p) != CSV_EPARSE)
        return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", path);
    if (at_end) /* the field opened as many lines up as it holds line breaks */
        return msp_fail(MSP_ERR_FORMAT, "%s: line %zu: a quoted field is never closed", path,
                        line - msp_csv_lines(p->entry_buf, p->entry_pos));
    return msp_fail(MSP_ERR_FORMAT,
                    "%s: line %zu: a stray '\"' (RFC 4180: a field that holds "
                    "a quote is quoted whole, its quotes doubled)",
                    path, line);
}

msp_err msp_csv_read(const char *path, size_t max_bytes, msp_csv_row_cb cb, void *ud)
{
    FILE *f;
    msp_err rc = msp_fopen_regular(path, "rb", &f);
    if (rc)
        return rc;
    struct csv_parser p;
    if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0) {
        fclose(f);
        return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", path);
    }
    csv_set_realloc_func(&p, msp_csv_realloc);
    csv_set_space_func(&p, msp_csv_no_space);
    csv_set_blk_size(&p, 4096);
    msp_csv_read_state_t st = {.cb = cb, .ud = ud};
    unsigned char buf[1 << 16];
    size_t total = 0, line = 1, got;
    while (!st.rc && (got = fread(buf, 1, sizeof buf, f)) > 0) {
        size_t from = 0;
        if (total == 0 && got >= 3 && !memcmp(buf, "\xEF\xBB\xBF", 3))
            from = 3; /* a UTF-8 byte order mark */
        total += got;
        if (max_bytes && total > max_bytes) {
            st.rc = msp_fail(MSP_ERR_LIMIT, "%s is larger than %zu bytes", path, max_bytes);
            break;
        }
        size_t done = csv_parse(&p, buf + from, got - from, msp_csv_on_field, msp_csv_on_row, &st);
        if (!st.rc && done < got - from)
            st.rc = msp_csv_error(&p, path, line + msp_csv_lines(buf + from, done), 0);
        line += msp_csv_lines(buf + from, got - from);
    }
    if (!st.rc && ferror(f))
        st.rc = msp_fail(MSP_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    if (!st.rc && csv_fini(&p, msp_csv_on_field, msp_csv_on_row, &st) != 0 && !st.rc)
        st.rc = msp_csv_error(&p, path, line, 1);
    for (size_t i = 0; i < st.n; i++)
        free(st.cells[i]);
    free(st.cells);
    csv_free(&p);
    fclose(f);
    return st.rc;
}
