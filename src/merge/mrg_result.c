/* msprobe's merge_result (msprobe-merge_result(1)): the chosen APIs' metrics
 * of every rank side by side.
 *
 * The input is a directory of compare results: msprobe's own per-rank
 * workbooks (compare_result_rank{N}_{timestamp}.xlsx, also spelled
 * compare_result_rank{N}-rank{N}_{timestamp}.xlsx) or csv files, or what our
 * compare wrote (result.csv, else the details sheets of result.xlsx or of
 * result_rank{R}.xlsx), each row knowing its rank. The config (msprobe's
 * YAML) names the APIs (a row is kept when its NPU Name contains one) and
 * the compare indexes (columns; by default all of the compare's kind). The
 * output, OUT/multi_ranks_compare_merge.xlsx, has one sheet per index: one
 * row per kept tensor (with its step when the results have steps), one
 * column per rank. */
#include "mrg_internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xlsxwriter.h>

#define CMP_MERGE_FILE "multi_ranks_compare_merge.xlsx"

static const char *const cmp_index_tensor[] = {
    "Cosine",
    "EucDist",
    "MaxAbsErr",
    "MaxRelativeErr",
    "One Thousandth Err Ratio",
    "Five Thousandths Err Ratio",
};
static const char *const cmp_index_stats[] = {
    "Max diff",       "Min diff",       "Mean diff",       "L2norm diff",
    "MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr",
};
#define CMP_NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the merged table ---------------------------------------------------------- */

typedef struct cmp_mrow {
    char *name;   /* NPU Name */
    int64_t step; /* -1 when the results carry no step */
} cmp_mrow_t;

typedef struct cmp_mval {
    size_t row, index, slot;
    char *text;
} cmp_mval_t;

typedef struct cmp_merge {
    const cmp_merge_cfg_t *cfg;
    const char *const *index; /* the indexes merged */
    size_t n_index;
    int stats;        /* -1 not known yet, 0 tensor, 1 statistics */
    int64_t *ranks;   /* rank of each slot */
    char **rank_file; /* the file each rank came from */
    size_t n_ranks;
    cmp_mrow_t *rows;
    size_t n_rows, cap_rows;
    cmp_mval_t *vals;
    size_t n_vals, cap_vals;
    msp_index_t by_key; /* rows by (name, step) */
    int has_step;
    /* the file being read */
    const char *file;
    const char *sheet;
    int64_t file_rank; /* -1: from each row's Rank column */
    long col_name, col_rank, col_step, col_index[16];
    int header_seen;
} cmp_merge_t;

struct cmp_mrow_key {
    const cmp_merge_t *m;
    const char *name;
    int64_t step;
};

static int cmp_mrow_is(const void *ctx, size_t i)
{
    const struct cmp_mrow_key *k = ctx;
    const cmp_mrow_t *r = &k->m->rows[i];
    return r->step == k->step && !strcmp(r->name, k->name);
}

/* The row of (name, step), added when new; (size_t)-1 when out of memory. */
static size_t cmp_merge_row(cmp_merge_t *m, const char *name, int64_t step)
{
    struct cmp_mrow_key key = {m, name, step};
    uint64_t h = msp_str_hash(name, (uint64_t)step);
    size_t at = msp_index_find(&m->by_key, h, cmp_mrow_is, &key);
    if (at != SIZE_MAX)
        return at;
    cmp_mrow_t *nv = msp_grow(m->rows, &m->cap_rows, m->n_rows, sizeof *nv, 256);
    if (nv) /* kept even when what follows fails: the array may have moved */
        m->rows = nv;
    char *d = nv ? strdup(name) : NULL;
    if (!d)
        return (size_t)-1;
    if (msp_index_put(&m->by_key, h, m->n_rows)) {
        free(d);
        return (size_t)-1;
    }
    m->rows[m->n_rows] = (cmp_mrow_t){d, step};
    return m->n_rows++;
}

/* The slot of rank; a rank from two files is an error. */
static msp_err cmp_merge_slot(cmp_merge_t *m, int64_t rank, size_t *slot)
{
    for (size_t i = 0; i < m->n_ranks; i++)
        if (m->ranks[i] == rank) {
            if (strcmp(m->rank_file[i], m->file) != 0)
                return msp_fail(MSP_ERR_USAGE,
                                "rank %lld is in both %s and %s: give "
                                "merge_result one compare's results",
                                (long long)rank, m->rank_file[i], m->file);
            *slot = i;
            return MSP_OK;
        }
    int64_t *nr = realloc(m->ranks, (m->n_ranks + 1) * sizeof *nr);
    if (nr)
        m->ranks = nr;
    char **nf = nr ? realloc(m->rank_file, (m->n_ranks + 1) * sizeof *nf) : NULL;
    if (nf)
        m->rank_file = nf;
    char *f = nf ? strdup(m->file) : NULL;
    if (!f)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    m->ranks[m->n_ranks] = rank;
    m->rank_file[m->n_ranks] = f;
    *slot = m->n_ranks++;
    return MSP_OK;
}

static int cmp_contains_api(const cmp_merge_cfg_t *c, const char *name)
{
    for (size_t i = 0; i < c->n_api; i++)
        if (strstr(name, c->api[i]))
            return 1;
    return 0;
}

static long cmp_find_col(size_t n, const char *const *cells, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (cells[i] && !strcmp(cells[i], name))
            return (long)i;
    return -1;
}

/* The header row of a compare result: which columns to read. */
static msp_err cmp_merge_header(cmp_merge_t *m, size_t n, const char *const *cells)
{
    m->col_name = cmp_find_col(n, cells, "NPU Name");
    if (m->col_name < 0)
        return msp_fail(MSP_ERR_FORMAT, "%s%s%s: no column 'NPU Name': not a compare result",
                        m->file, m->sheet ? ": sheet " : "", m->sheet ? m->sheet : "");
    int stats = cmp_find_col(n, cells, "Cosine") >= 0     ? 0
                : cmp_find_col(n, cells, "Max diff") >= 0 ? 1
                                                          : -1;
    if (stats < 0)
        return msp_fail(MSP_ERR_FORMAT,
                        "%s: neither 'Cosine' nor 'Max diff' among its columns: "
                        "an md5 compare has no metrics to merge",
                        m->file);
    if (m->stats >= 0 && stats != m->stats)
        return msp_fail(MSP_ERR_USAGE,
                        "%s is a %s compare, the results before it %s: merge one "
                        "kind",
                        m->file, stats ? "statistics" : "tensor",
                        m->stats ? "statistics" : "tensor");
    m->stats = stats;
    if (!m->index) {
        m->index = m->cfg->n_index ? (const char *const *)m->cfg->index
                   : stats         ? cmp_index_stats
                                   : cmp_index_tensor;
        m->n_index = m->cfg->n_index ? m->cfg->n_index
                     : stats         ? CMP_NELEM(cmp_index_stats)
                                     : CMP_NELEM(cmp_index_tensor);
        if (m->n_index > CMP_NELEM(m->col_index))
            return msp_fail(MSP_ERR_USAGE,
                            "compare_index lists %zu indexes; a compare has %zu "
                            "at most",
                            m->n_index, CMP_NELEM(m->col_index));
    }
    for (size_t k = 0; k < m->n_index; k++) {
        m->col_index[k] = cmp_find_col(n, cells, m->index[k]);
        if (m->col_index[k] < 0)
            return msp_fail(MSP_ERR_USAGE,
                            "%s: no column '%s': compare_index names the "
                            "metrics of a %s compare (%s)",
                            m->file, m->index[k], stats ? "statistics" : "tensor",
                            stats ? "Max diff, Min diff, Mean diff, L2norm diff, "
                                    "MaxRelativeErr, MinRelativeErr, MeanRelativeErr, "
                                    "NormRelativeErr"
                                  : "Cosine, EucDist, MaxAbsErr, MaxRelativeErr, One "
                                    "Thousandth Err Ratio, Five Thousandths Err Ratio");
    }
    m->col_rank = m->file_rank >= 0 ? -1 : cmp_find_col(n, cells, "Rank");
    m->col_step = cmp_find_col(n, cells, "Step");
    if (m->file_rank < 0 && m->col_rank < 0)
        return msp_fail(MSP_ERR_FORMAT, "%s: no column 'Rank' and no rank in its name", m->file);
    if (m->col_step >= 0)
        m->has_step = 1;
    m->header_seen = 1;
    return MSP_OK;
}

static int cmp_parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    double d = strtod(s, &end); /* "3" and "3.0" alike (a number cell read back) */
    if (*end || errno || d < 0 || d > 9.2e18 || d > floor(d))
        return 0;
    *out = (int64_t)d;
    return 1;
}

static msp_err cmp_merge_cells(void *ud, size_t row, size_t n, const char *const *cells)
{
    cmp_merge_t *m = ud;
    if (row == 0)
        return cmp_merge_header(m, n, cells);
    const char *name = (size_t)m->col_name < n ? cells[m->col_name] : NULL;
    if (!name || !cmp_contains_api(m->cfg, name))
        return MSP_OK;
    int64_t rank = m->file_rank, step = -1;
    if (m->col_rank >= 0 &&
        !cmp_parse_i64((size_t)m->col_rank < n ? cells[m->col_rank] : NULL, &rank))
        return msp_fail(MSP_ERR_FORMAT, "%s: row %zu (%s): the Rank cell is not a whole number",
                        m->file, row + 1, name);
    if (m->col_step >= 0 &&
        !cmp_parse_i64((size_t)m->col_step < n ? cells[m->col_step] : NULL, &step))
        step = -1;
    size_t slot = 0, r;
    msp_err rc = cmp_merge_slot(m, rank, &slot);
    if (rc)
        return rc;
    if ((r = cmp_merge_row(m, name, step)) == (size_t)-1)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < m->n_index; k++) {
        const char *v = (size_t)m->col_index[k] < n ? cells[m->col_index[k]] : NULL;
        cmp_mval_t *nv = msp_grow(m->vals, &m->cap_vals, m->n_vals, sizeof *nv, 1024);
        char *d = nv ? strdup(v ? v : "") : NULL;
        if (!d)
            return msp_fail(MSP_ERR_NOMEM, "out of memory");
        m->vals = nv;
        m->vals[m->n_vals++] = (cmp_mval_t){r, k, slot, d};
    }
    return MSP_OK;
}

/* ---- reading the inputs ------------------------------------------------------ */

static msp_err cmp_merge_xlsx(cmp_merge_t *m, const char *path, int64_t rank, int details_only)
{
    cmp_xlsx_t *x = NULL;
    msp_err rc = cmp_xlsx_open(path, &x);
    int read = 0;
    for (size_t i = 0; !rc && x && i < cmp_xlsx_sheet_count(x); i++) {
        const char *name = cmp_xlsx_sheet_name(x, i);
        /* ours: details, details_2, ...; msprobe's: its one sheet */
        if (details_only && strncmp(name, "details", 7) != 0)
            continue;
        if (!details_only && read)
            break;
        m->file = path;
        m->sheet = name;
        m->file_rank = rank;
        m->header_seen = 0;
        rc = cmp_xlsx_rows(x, i, cmp_merge_cells, m);
        read++;
    }
    cmp_xlsx_close(x);
    return rc;
}

/* result.csv (RFC 4180, as msp_report_write_csv writes it) a row at a time. */
static msp_err cmp_merge_csv(cmp_merge_t *m, const char *path, int64_t rank)
{
    m->file = path;
    m->sheet = NULL;
    m->file_rank = rank;
    return msp_csv_read(path, 0, cmp_merge_cells, m);
}

/* msprobe's per-rank result name, as msprobe 8.3.3 and 26 write it
 * (compare_result_rank{N}_{14 digits}.xlsx) and as their merge_result also
 * takes it (compare_result_rank{N}-rank{N}_{14 digits}.xlsx); with .csv, the
 * per-rank csv msprobe 26 writes by default (and compare --msprobe-outputs).
 * *csv says which. */
static int cmp_msprobe_result(const char *name, int64_t *rank, int *csv)
{
    const char *p = name;
    if (strncmp(p, "compare_result_rank", 19) || !isdigit((unsigned char)p[19]))
        return 0;
    p += 19;
    char *end;
    long long a = strtoll(p, &end, 10);
    if (!strncmp(end, "-rank", 5)) {
        p = end + 5;
        long long b = isdigit((unsigned char)*p) ? strtoll(p, &end, 10) : -1;
        if (end == p || a != b)
            return 0;
    }
    if (*end != '_')
        return 0;
    p = end + 1;
    for (int i = 0; i < 14; i++, p++)
        if (!isdigit((unsigned char)*p))
            return 0;
    if (strcmp(p, ".xlsx") && strcmp(p, ".csv"))
        return 0;
    *csv = p[1] == 'c';
    *rank = a;
    return 1;
}

static int cmp_str_order(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* ---- writing the merged workbook ----------------------------------------------- */

static void cmp_put_value(lxw_worksheet *ws, lxw_row_t r, lxw_col_t c, const char *v,
                          lxw_error *err)
{
    if (!v || !*v)
        return;
    char *end;
    double d = strtod(v, &end);
    lxw_error e;
    if (!*end && end != v && isfinite(d)) {
        e = worksheet_write_number(ws, r, c, d, NULL);
    } else {
        char *cut = NULL;
        const char *s = msp_utf8_clean(v, 32767, &cut);
        e = s ? worksheet_write_string(ws, r, c, s, NULL) : LXW_ERROR_MEMORY_MALLOC_FAILED;
        free(cut);
    }
    if (e && !*err)
        *err = e;
}

static msp_err cmp_merge_write(cmp_merge_t *m, const char *out_dir)
{
    msp_err rc = msp_mkdirs(out_dir);
    if (rc)
        return rc;
    char *path = msp_asprintf("%s/%s", out_dir, CMP_MERGE_FILE);
    char *tmp = path ? msp_atomic_tmp_name(path) : NULL;
    size_t *order = calloc(m->n_ranks + 1, sizeof *order);
    const char **grid = calloc(m->n_rows * (m->n_ranks ? m->n_ranks : 1) + 1, sizeof *grid);
    lxw_workbook *wb = NULL;
    lxw_error err = LXW_NO_ERROR;
    if (!path || !tmp || !order || !grid) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory writing %s", out_dir);
        goto cleanup;
    }
    if (access(out_dir, W_OK | X_OK) != 0) {
        rc = msp_fail(MSP_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        goto cleanup;
    }
    /* ranks in order */
    for (size_t i = 0; i < m->n_ranks; i++)
        order[i] = i;
    for (size_t i = 1; i < m->n_ranks; i++)
        for (size_t j = i; j > 0 && m->ranks[order[j]] < m->ranks[order[j - 1]]; j--) {
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    lxw_workbook_options opts = {.constant_memory = LXW_TRUE, .tmpdir = (char *)out_dir};
    wb = workbook_new_opt(tmp, &opts);
    lxw_format *bold = wb ? workbook_add_format(wb) : NULL;
    if (!wb) {
        rc = msp_fail(MSP_ERR_XLSX, "cannot start workbook %s", tmp);
        goto cleanup;
    }
    if (bold)
        format_set_bold(bold);
    for (size_t k = 0; k < m->n_index && !err; k++) {
        char sheet[32];
        snprintf(sheet, sizeof sheet, "%.31s", m->index[k]);
        lxw_worksheet *ws = workbook_add_worksheet(wb, sheet);
        if (!ws) {
            rc = msp_fail(MSP_ERR_XLSX, "cannot add sheet '%s' to %s", sheet, path);
            goto cleanup;
        }
        memset(grid, 0, m->n_rows * (m->n_ranks ? m->n_ranks : 1) * sizeof *grid);
        for (size_t v = 0; v < m->n_vals; v++)
            if (m->vals[v].index == k)
                grid[m->vals[v].row * m->n_ranks + m->vals[v].slot] = m->vals[v].text;
        lxw_col_t c = 0;
        if (m->has_step)
            err = worksheet_write_string(ws, 0, c++, "Step", bold);
        if (!err)
            err = worksheet_write_string(ws, 0, c++, "NPU Name", bold);
        for (size_t i = 0; i < m->n_ranks && !err; i++) {
            char head[32];
            snprintf(head, sizeof head, "rank%lld", (long long)m->ranks[order[i]]);
            err = worksheet_write_string(ws, 0, (lxw_col_t)(c + i), head, bold);
        }
        worksheet_freeze_panes(ws, 1, 0);
        worksheet_set_column(ws, c - 1, c - 1, 60, NULL);
        for (size_t r = 0; r < m->n_rows && !err; r++) {
            lxw_row_t row = (lxw_row_t)(r + 1);
            lxw_col_t cc = 0;
            if (m->has_step) {
                if (m->rows[r].step >= 0)
                    err = worksheet_write_number(ws, row, cc, (double)m->rows[r].step, NULL);
                cc++;
            }
            if (!err)
                cmp_put_value(ws, row, cc++, m->rows[r].name, &err);
            for (size_t i = 0; i < m->n_ranks && !err; i++)
                cmp_put_value(ws, row, (lxw_col_t)(cc + i), grid[r * m->n_ranks + order[i]], &err);
        }
    }
    if (err) {
        rc = msp_fail(MSP_ERR_XLSX, "cannot write %s: %s", path, lxw_strerror(err));
        lxw_workbook_free(wb);
        wb = NULL;
        goto cleanup;
    }
    err = workbook_close(wb);
    wb = NULL;
    if (err) {
        rc = msp_fail(MSP_ERR_XLSX, "cannot write %s: %s", path, lxw_strerror(err));
        goto cleanup;
    }
    rc = msp_atomic_commit(tmp, path);
cleanup:
    if (rc != MSP_OK)
        msp_atomic_discard(tmp);
    if (wb)
        lxw_workbook_free(wb);
    free(order);
    free(grid);
    free(tmp);
    free(path);
    return rc;
}

/* ---- entry point ------------------------------------------------------------- */

msp_err msp_merge_result(const char *input_dir, const char *out_dir, const char *config_path,
                         msp_merge_info_t *info)
{
    cmp_merge_cfg_t cfg;
    cmp_merge_t m;
    memset(&m, 0, sizeof m);
    m.stats = -1;
    if (info)
        memset(info, 0, sizeof *info);
    if (!input_dir || !out_dir || !config_path)
        return msp_fail(MSP_ERR_USAGE, "merge_result: -i, -o and -config are required");
    msp_err rc = cmp_merge_cfg_load(config_path, &cfg);
    if (rc)
        return rc;
    m.cfg = &cfg;
    DIR *d = opendir(input_dir);
    char **names = NULL;
    size_t n = 0, cap = 0, files = 0;
    if (!d) {
        rc = msp_fail(MSP_ERR_IO, "cannot open the input directory %s: %s", input_dir,
                      strerror(errno));
        goto cleanup;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char **nv = msp_grow(names, &cap, n, sizeof *nv, 64);
        char *s = nv ? strdup(e->d_name) : NULL;
        if (!s) {
            rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
            break;
        }
        names = nv;
        names[n++] = s;
    }
    closedir(d);
    if (rc)
        goto cleanup;
    qsort(names, n, sizeof *names, cmp_str_order);
    /* msprobe's per-rank workbooks, when there are any */
    for (size_t i = 0; i < n && !rc; i++) {
        int64_t rank;
        int csv;
        if (!cmp_msprobe_result(names[i], &rank, &csv))
            continue;
        char *p = msp_asprintf("%s/%s", input_dir, names[i]);
        rc = !p    ? msp_fail(MSP_ERR_NOMEM, "out of memory")
             : csv ? cmp_merge_csv(&m, p, rank)
                   : cmp_merge_xlsx(&m, p, rank, 0);
        free(p);
        files++;
    }
    /* else ours: result.csv holds every row; without it the details sheets */
    int has_csv = 0, theirs = files > 0;
    for (size_t i = 0; i < n; i++)
        has_csv |= !strcmp(names[i], "result.csv");
    for (size_t i = 0; i < n && !rc && !theirs; i++) {
        int ours = has_csv ? !strcmp(names[i], "result.csv")
                           : !strcmp(names[i], "result.xlsx") ||
                                 (!strncmp(names[i], "result_rank", 11) && strlen(names[i]) > 16 &&
                                  !strcmp(names[i] + strlen(names[i]) - 5, ".xlsx"));
        if (!ours)
            continue;
        char *p = msp_asprintf("%s/%s", input_dir, names[i]);
        rc = !p        ? msp_fail(MSP_ERR_NOMEM, "out of memory")
             : has_csv ? cmp_merge_csv(&m, p, -1)
                       : cmp_merge_xlsx(&m, p, -1, 1);
        free(p);
        files++;
    }
    if (!rc && !files)
        rc = msp_fail(MSP_ERR_USAGE,
                      "%s holds no compare result: neither msprobe's "
                      "compare_result_rank{N}_{timestamp}.xlsx (or .csv) nor msprobe compare's "
                      "result.csv or result.xlsx",
                      input_dir);
    if (!rc && !m.index)
        rc = msp_fail(MSP_ERR_USAGE, "the compare results in %s have no rows", input_dir);
    if (!rc && !m.n_rows)
        rc = msp_fail(MSP_ERR_MISMATCH,
                      "no row of the compare results in %s names any API of "
                      "%s",
                      input_dir, config_path);
    if (!rc)
        rc = cmp_merge_write(&m, out_dir);
    if (!rc && info) {
        info->files = files;
        info->ranks = m.n_ranks;
        info->rows = m.n_rows;
        info->sheets = m.n_index;
    }
cleanup:
    cmp_strv_free(names, n);
    for (size_t i = 0; i < m.n_rows; i++)
        free(m.rows[i].name);
    free(m.rows);
    for (size_t i = 0; i < m.n_vals; i++)
        free(m.vals[i].text);
    free(m.vals);
    msp_index_free(&m.by_key);
    free(m.ranks);
    cmp_strv_free(m.rank_file, m.n_ranks);
    cmp_merge_cfg_free(&cfg);
    return rc;
}
