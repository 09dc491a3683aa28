/* msprobe's (the Python tool's) own dump directories, read into the same
 * catalogue as our HDF5 files so compare and ls take either, or one of each:
 *
 *   stepN/rankN/dump.json            task, level, framework, data: {record: {...}}
 *   stepN/rankN/stack.json           optional: {"0": [[records...], stack], ...}
 *   stepN/rankN/construct.json       optional: {record: parent record}
 *   stepN/rankN/dump_tensor_data/    <record>.<input|output>.<i>.pt or .npy
 *
 * A record's members map onto our roles: input_args[i] -> input.i,
 * input_kwargs[k] -> kwarg.k, output[i] -> output.i, backward input/output
 * likewise, parameters[k] -> parameters.k, nested lists -> input.1.0.
 * Statistics come from the JSON (Max, Min, Mean, Norm; md5 = the CRC-32 in
 * hex); tensor data, when saved, from the .pt / .npy named by data_name.
 *
 * These files come from anywhere: each one is opened without following a
 * symbolic link (a link could point anywhere on the machine), must be a
 * regular file (a FIFO would block, a device never end) no larger than a
 * cap, and a data_name is a plain name inside dump_tensor_data/ (no '/', no
 * ".."). dump.json is never held as one parsed tree (cJSON's takes some 20
 * times the text): a small scanner checks its structure and walks "data"
 * record by record, each record parsed alone; stack.json and construct.json
 * likewise, matched to records through a sorted name index. */
#include "fmt_backend.h"
#include "fmt_foreign.h"
#include "fmt_msjson.h"   /* opening the dump's files, scanning their JSON */
#include "fmt_msrecord.h" /* one record of "data" into the catalogue */

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A tensor data file: far above any tensor msprobe saves, and the loaders
 * check every size their headers declare against the file's own. */
#define MSP_MS_DATA_MAX ((uint64_t)64 << 30)

struct msp_ms_impl {
    struct msp_dump_base base; /* first: the table */
    struct msp_ms_record *recs;
    size_t recs_cap;
    char **stacks; /* the distinct stacks, shared by the records that name them */
    size_t n_stacks, stacks_cap;
};

/* Path of a msprobe dump.json when `path` is one, or is a directory holding
 * one (malloc'd), else NULL. */
static char *msp_msprobe_json_for(const char *path)
{
    struct stat st;
    if (!path || stat(path, &st) != 0)
        return NULL;
    /* a directory's dump.json is taken even when it is a link or no regular
     * file: opening it then says why it is refused */
    if (S_ISREG(st.st_mode)) {
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        return strcmp(base, "dump.json") == 0 ? strdup(path) : NULL;
    }
    if (!S_ISDIR(st.st_mode))
        return NULL;
    char *j = msp_asprintf("%s/dump.json", path);
    if (j && lstat(j, &st) != 0) {
        free(j);
        return NULL;
    }
    return j;
}

static void msp_msprobe_close(msp_dump_file_t *f)
{
    if (!f)
        return;
    struct msp_ms_impl *im = f->impl;
    for (size_t i = 0; i < f->n_records; i++) {
        msp_record_info_t *r = &f->records[i];
        for (size_t j = 0; j < r->n_tensors; j++) {
            free(r->tensors[j].role);
            free(r->tensors[j].producer);
            free(r->tensors[j].data_name);
            if (im && im->recs)
                free(im->recs[i].files[j]);
        }
        free(r->tensors);
        free(r->name);
        if (im && im->recs) {
            free(im->recs[i].files);
            for (size_t k = 0; k < im->recs[i].n_attrs; k++) {
                free(im->recs[i].attrs[k].key);
                free(im->recs[i].attrs[k].value);
            }
            free(im->recs[i].attrs);
        }
    }
    if (im) {
        free(im->recs);
        msp_free_strings(im->stacks, im->n_stacks);
    }
    free(im);
    free(f->records);
    free(f->path);
    free(f);
}

/* "step3" -> 3 from the name of the directory `up` levels above the file. */
static int64_t msp_ms_dir_number(const char *path, int up, const char *prefix)
{
    const char *end = path + strlen(path);
    for (int i = 0; i <= up; i++) {
        while (end > path && end[-1] != '/')
            end--;
        if (i < up) {
            if (end == path)
                return -1;
            end--;
        }
    }
    const char *start = end;
    const char *stop = strchr(start, '/');
    size_t pl = strlen(prefix);
    if (!stop || (size_t)(stop - start) <= pl || strncmp(start, prefix, pl) != 0)
        return -1;
    int64_t v = 0;
    for (const char *c = start + pl; c < stop; c++) {
        if (!isdigit((unsigned char)*c) || v > INT64_MAX / 10)
            return -1;
        v = v * 10 + (*c - '0');
    }
    return v;
}

/* ---- dump.json ------------------------------------------------------------- */

struct msp_ms_load {
    msp_dump_file_t *f;
    const char *dir;
    const char *text; /* for offsets in messages */
    size_t rec_cap;   /* f->records; im->recs_cap: im->recs */
    int64_t order;
    int saw_md5, saw_stats, saw_data;
    char task[64], level[64], framework[64];
};

/* Room for one more record in f->records and im->recs. */
static msp_err msp_ms_room(struct msp_ms_load *L)
{
    msp_dump_file_t *f = L->f;
    struct msp_ms_impl *im = f->impl;
    msp_record_info_t *r = msp_grow(f->records, &L->rec_cap, f->n_records, sizeof *r, 64);
    if (r)
        f->records = r;
    struct msp_ms_record *m = r ? msp_grow(im->recs, &im->recs_cap, f->n_records, sizeof *m, 64)
                                : NULL;
    if (!m)
        return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", f->path);
    im->recs = m;
    return MSP_OK;
}

/* One member of "data": a record, parsed alone. */
static msp_err msp_ms_data_member(const char *key, const char *end, const char *value, void *ud)
{
    struct msp_ms_load *L = ud;
    msp_dump_file_t *f = L->f;
    struct msp_ms_impl *im = f->impl;
    (void)value;
    int too_big = 0;
    cJSON *o = msp_js_member_tree(key, end, &too_big);
    if (!o)
        return too_big ? msp_fail(MSP_ERR_LIMIT,
                                  "file %s: the record at byte %td takes %td "
                                  "bytes, more than the %zu one record may take",
                                  f->path, key - L->text, end - key, MSP_MS_ENTRY_MAX)
                       : msp_fail(MSP_ERR_FORMAT,
                                  "file %s: the record at byte %td is not "
                                  "valid JSON",
                                  f->path, key - L->text);
    const cJSON *rec = o->child;
    msp_err rc = MSP_OK;
    if (!cJSON_IsObject(rec)) {
        char shown[200];
        msp_fg_clean(shown, sizeof shown, rec->string);
        rc = msp_fail(MSP_ERR_FORMAT, "file %s: record %s is not an object", f->path, shown);
    } else if (!(rc = msp_ms_room(L))) {
        rc = msp_ms_record(f, &im->recs[f->n_records], rec, L->dir, L->order++, &L->saw_md5,
                           &L->saw_stats);
    }
    cJSON_Delete(o);
    return rc;
}

/* A short string value of the top level ("task", "level", "framework"). */
static void msp_ms_top_string(const cJSON *v, char *buf, size_t size)
{
    snprintf(buf, size, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

/* One member of the top-level object: "data" walked record by record, the
 * few others that matter parsed, the rest only checked. */
static msp_err msp_ms_top_member(const char *key, const char *end, const char *value, void *ud)
{
    struct msp_ms_load *L = ud;
    /* the key alone, decoded (escapes and all) */
    struct msp_js k = {key, value, 0};
    while (k.p < k.end && *k.p != ':')
        k.p++;
    cJSON *name = cJSON_ParseWithLength(key, (size_t)(k.p - key));
    const char *nm = cJSON_IsString(name) ? name->valuestring : "";
    msp_err rc = MSP_OK;
    if (strcmp(nm, "data") == 0) {
        /* counted before a record is built: a dump.json of more records
         * than the cap is refused with the memory of its text alone */
        struct msp_js c = {value, end, 0};
        long long n = msp_js_count_members(&c);
        size_t cap = msp_ms_max_records();
        if (L->saw_data++) {
            rc = msp_fail(MSP_ERR_FORMAT, "file %s: two \"data\" objects", L->f->path);
        } else if (n > 0 && (unsigned long long)n > cap) {
            rc = msp_fail(MSP_ERR_LIMIT,
                          "file %s: %lld records in \"data\", more than the %zu "
                          "a dump.json may hold: refused (MSPROBE_DUMP_JSON_MAX_RECORDS raises "
                          "the limit)",
                          L->f->path, n, cap);
        } else {
            struct msp_js d = {value, end, 0};
            if (msp_js_members(&d, msp_ms_data_member, L, &rc) && !rc)
                rc = msp_fail(MSP_ERR_FORMAT,
                              "file %s: not a msprobe dump.json (\"data\" is "
                              "not an object)",
                              L->f->path);
        }
    } else if (!strcmp(nm, "task") || !strcmp(nm, "level") || !strcmp(nm, "framework")) {
        int too_big;
        cJSON *o = msp_js_member_tree(key, end, &too_big);
        const cJSON *v = o ? o->child : NULL;
        msp_ms_top_string(v,
                          !strcmp(nm, "task") ? L->task
                          : nm[0] == 'l'      ? L->level
                                              : L->framework,
                          sizeof L->task);
        cJSON_Delete(o);
    }
    cJSON_Delete(name);
    return rc;
}

static int msp_ms_name_idx_cmp(const void *a, const void *b, void *ud)
{
    const msp_dump_file_t *f = ud;
    return strcmp(f->records[*(const size_t *)a].name, f->records[*(const size_t *)b].name);
}

/* Record indices in name order, for the lookups of stack.json and
 * construct.json (each entry found in log time, not by a walk of all). */
struct msp_ms_names {
    const msp_dump_file_t *f;
    size_t *idx;
};

struct msp_ms_key {
    const struct msp_ms_names *nx;
    const char *name;
};

static int msp_ms_before(const void *ctx, size_t i)
{
    const struct msp_ms_key *k = ctx;
    return strcmp(k->nx->f->records[k->nx->idx[i]].name, k->name) < 0;
}

static long msp_ms_find(const struct msp_ms_names *nx, const char *name)
{
    struct msp_ms_key k = {nx, name};
    size_t i = msp_lower_bound(nx->f->n_records, msp_ms_before, &k);
    return i < nx->f->n_records && !strcmp(nx->f->records[nx->idx[i]].name, name) ? (long)nx->idx[i]
                                                                                  : -1;
}

/* ---- stack.json, construct.json ----------------------------------------------- */

struct msp_ms_extra {
    msp_dump_file_t *f;
    const struct msp_ms_names *nx;
};

/* stack.json: {"0": [[record, ...], stack], ...} (msprobe 8+), where stack
 * is a list of frames or one string; or the older {record: [frames]}. */
static msp_err msp_ms_stack_member(const char *key, const char *end, const char *value, void *ud)
{
    struct msp_ms_extra *X = ud;
    struct msp_ms_impl *im = X->f->impl;
    (void)value;
    int too_big;
    cJSON *o = msp_js_member_tree(key, end, &too_big);
    if (!o)
        return MSP_OK; /* optional: an entry that does not parse names no stack */
    const cJSON *e = o->child, *names = NULL, *frames = NULL;
    if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsArray(e->child)) {
        names = e->child;
        frames = e->child->next;
    } else {
        frames = e;
    }
    size_t flen = 1;
    char *joined = NULL;
    if (cJSON_IsString(frames)) {
        joined = strdup(frames->valuestring);
    } else if (cJSON_IsArray(frames)) {
        for (const cJSON *s = frames->child; s; s = s->next)
            flen += cJSON_IsString(s) ? strlen(s->valuestring) + 1 : 0;
        if ((joined = calloc(1, flen))) {
            char *w = joined;
            for (const cJSON *s = frames->child; s; s = s->next)
                if (cJSON_IsString(s)) {
                    if (w > joined)
                        *w++ = '\n';
                    size_t l = strlen(s->valuestring);
                    memcpy(w, s->valuestring, l + 1);
                    w += l;
                }
        }
    }
    msp_err rc = MSP_OK;
    char **pool = joined ? msp_grow(im->stacks, &im->stacks_cap, im->n_stacks, sizeof *pool, 16)
                         : NULL;
    if (!pool) {
        free(joined);
        cJSON_Delete(o);
        return frames && (cJSON_IsString(frames) || cJSON_IsArray(frames))
                   ? msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", X->f->path)
                   : MSP_OK;
    }
    im->stacks = pool;
    pool[im->n_stacks++] = joined;
    if (names) {
        for (const cJSON *n = names->child; n; n = n->next) {
            long i = cJSON_IsString(n) ? msp_ms_find(X->nx, n->valuestring) : -1;
            if (i >= 0 && !im->recs[i].stack)
                im->recs[i].stack = joined;
        }
    } else {
        long i = msp_ms_find(X->nx, e->string);
        if (i >= 0 && !im->recs[i].stack)
            im->recs[i].stack = joined;
    }
    cJSON_Delete(o);
    return rc;
}

/* construct.json: {record: parent record}, each parent an attribute. */
static msp_err msp_ms_construct_member(const char *key, const char *end, const char *value,
                                       void *ud)
{
    struct msp_ms_extra *X = ud;
    struct msp_ms_impl *im = X->f->impl;
    (void)value;
    int too_big;
    cJSON *o = msp_js_member_tree(key, end, &too_big);
    const cJSON *par = o ? o->child : NULL;
    long i = cJSON_IsString(par) ? msp_ms_find(X->nx, par->string) : -1;
    msp_err rc = MSP_OK;
    if (i >= 0) {
        struct msp_ms_record *mr = &im->recs[i];
        struct msp_ms_attr *na = realloc(mr->attrs, (mr->n_attrs + 1) * sizeof *na);
        if (na) {
            mr->attrs = na;
            na[mr->n_attrs].key = strdup("parent");
            na[mr->n_attrs].value = strdup(par->valuestring);
            if (na[mr->n_attrs].key && na[mr->n_attrs].value) {
                mr->n_attrs++;
            } else {
                free(na[mr->n_attrs].key);
                free(na[mr->n_attrs].value);
                na = NULL;
            }
        }
        if (!na)
            rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", X->f->path);
    }
    cJSON_Delete(o);
    return rc;
}

/* An optional JSON file of the rank directory, walked entry by entry. Its
 * absence is no error, nor is content that does not parse (it only adds
 * context); a link, a FIFO or an oversized file is. */
static msp_err msp_ms_optional(const char *dir, const char *name, msp_js_member_fn fn,
                               struct msp_ms_extra *X)
{
    char *p = msp_asprintf("%s/%s", dir, name), *text = NULL;
    size_t len = 0;
    if (!p)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    msp_err rc = msp_ms_slurp(p, &text, &len);
    if (rc == MSP_ERR_NOT_FOUND) {
        msp_clear_error();
        rc = MSP_OK;
    } else if (!rc) {
        struct msp_js s = {text, text + len, 0};
        msp_err frc = MSP_OK;
        (void)msp_js_members(&s, fn, X, &frc);
        rc = frc;
    }
    free(text);
    free(p);
    return rc;
}

/* 1 when the file's directory is msprobe's single-process one: "rank"
 * (8.x) or "proc<PID>" (26), both rank 0. */
static int msp_ms_single_process_dir(const char *path)
{
    const char *end = strrchr(path, '/'), *start = end;
    if (!end)
        return 0;
    while (start > path && start[-1] != '/')
        start--;
    size_t n = (size_t)(end - start);
    if (n == 4 && strncmp(start, "rank", 4) == 0)
        return 1;
    if (n <= 4 || strncmp(start, "proc", 4) != 0)
        return 0;
    for (const char *c = start + 4; c < end; c++)
        if (!isdigit((unsigned char)*c))
            return 0;
    return 1;
}

msp_err msp_msprobe_open(const char *json_path, msp_dump_file_t **out)
{
    *out = NULL;
    char *text = NULL, *dir = NULL;
    size_t len = 0;
    size_t *order = NULL;
    msp_dump_file_t *f = calloc(1, sizeof *f);
    struct msp_ms_impl *im = calloc(1, sizeof *im);
    msp_err rc = MSP_OK;
    if (!f || !im || !(f->path = strdup(json_path)) || !(dir = strdup(json_path))) {
        free(im);
        im = NULL;
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", json_path);
        goto cleanup;
    }
    im->base.ops = &msp_reader_msprobe;
    f->impl = im;
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        strcpy(dir, ".");
    if ((rc = msp_ms_slurp(json_path, &text, &len)) != MSP_OK)
        goto cleanup;
    struct msp_ms_load L = {.f = f, .dir = dir, .text = text};
    struct msp_js s = {text, text + len, 0};
    msp_err mrc = MSP_OK;
    int bad = msp_js_members(&s, msp_ms_top_member, &L, &mrc);
    if (mrc) {
        rc = mrc;
        goto cleanup;
    }
    msp_js_ws(&s);
    /* one JSON value and nothing after it: a second document or garbage
     * appended is a damaged file, not an empty one */
    if (bad || s.p != s.end) {
        rc = msp_fail(MSP_ERR_FORMAT,
                      "file %s: not a msprobe dump.json (invalid JSON, or data "
                      "after the JSON value, near byte %td)",
                      json_path, s.p - text);
        goto cleanup;
    }
    if (!L.saw_data) {
        rc = msp_fail(MSP_ERR_FORMAT, "file %s: not a msprobe dump.json (no \"data\" object)",
                      json_path);
        goto cleanup;
    }
    free(text); /* the catalogue is built: the text is not needed any more */
    text = NULL;
    snprintf(f->task, sizeof f->task, "%.*s", (int)sizeof f->task - 1, L.task);
    const char *lv = L.level;
    snprintf(f->dump_mode, sizeof f->dump_mode, "%.*s", (int)sizeof f->dump_mode - 1,
             !strcmp(lv, "L0")    ? "module"
             : !strcmp(lv, "L1")  ? "api"
             : !strcmp(lv, "mix") ? "mix"
                                  : lv);
    snprintf(f->framework, sizeof f->framework, "%.*s", (int)sizeof f->framework - 1, L.framework);
    f->step = msp_ms_dir_number(json_path, 2, "step");
    f->rank = msp_ms_dir_number(json_path, 1, "rank");
    if (f->rank < 0 && msp_ms_single_process_dir(json_path))
        f->rank = 0;
    f->world_size = -1;
    /* summary_mode md5 on the statistics task: compared on the CRC-32 */
    if (L.saw_md5 && !strcmp(f->task, "statistics"))
        snprintf(f->task, sizeof f->task, "md5");
    order = malloc((f->n_records ? f->n_records : 1) * sizeof *order);
    if (!order) {
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", json_path);
        goto cleanup;
    }
    for (size_t i = 0; i < f->n_records; i++)
        order[i] = i;
    qsort_r(order, f->n_records, sizeof *order, msp_ms_name_idx_cmp, f);
    for (size_t i = 1; i < f->n_records; i++)
        if (!strcmp(f->records[order[i - 1]].name, f->records[order[i]].name)) {
            char shown[200];
            msp_fg_clean(shown, sizeof shown, f->records[order[i]].name);
            rc = msp_fail(MSP_ERR_FORMAT, "file %s: record %s appears twice in \"data\"", json_path,
                          shown);
            goto cleanup;
        }
    struct msp_ms_names nx = {f, order};
    struct msp_ms_extra X = {f, &nx};
    if ((rc = msp_ms_optional(dir, "stack.json", msp_ms_stack_member, &X)) ||
        (rc = msp_ms_optional(dir, "construct.json", msp_ms_construct_member, &X)))
        goto cleanup;
cleanup:
    free(order);
    free(text);
    free(dir);
    if (rc) {
        msp_msprobe_close(f);
        return rc;
    }
    *out = f;
    return MSP_OK;
}

static double msp_ms_get(msp_dtype_t dt, const unsigned char *p)
{
    switch (dt) {
    case MSP_DTYPE_FLOAT32: {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    case MSP_DTYPE_FLOAT64: {
        double v;
        memcpy(&v, p, 8);
        return v;
    }
    case MSP_DTYPE_FLOAT16: {
        uint16_t v;
        memcpy(&v, p, 2);
        return msp_half_to_float(v);
    }
    case MSP_DTYPE_BFLOAT16: {
        uint16_t v;
        memcpy(&v, p, 2);
        return msp_bf16_to_float(v);
    }
    case MSP_DTYPE_INT8:
        return (int8_t)p[0];
    case MSP_DTYPE_UINT8:
    case MSP_DTYPE_BOOL:
        return p[0];
    case MSP_DTYPE_INT16: {
        int16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case MSP_DTYPE_INT32: {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    case MSP_DTYPE_INT64: {
        int64_t v;
        memcpy(&v, p, 8);
        return (double)v;
    }
    default:
        return NAN;
    }
}

static void msp_ms_put(msp_dtype_t dt, unsigned char *p, double v)
{
    switch (dt) {
    case MSP_DTYPE_FLOAT32: {
        float x = (float)v;
        memcpy(p, &x, 4);
        break;
    }
    case MSP_DTYPE_FLOAT64:
        memcpy(p, &v, 8);
        break;
    case MSP_DTYPE_FLOAT16: {
        uint16_t x = msp_double_to_half(v);
        memcpy(p, &x, 2);
        break;
    }
    case MSP_DTYPE_BFLOAT16: {
        uint16_t x = msp_double_to_bf16(v);
        memcpy(p, &x, 2);
        break;
    }
    case MSP_DTYPE_INT8: {
        int8_t x = (int8_t)v;
        memcpy(p, &x, 1);
        break;
    }
    case MSP_DTYPE_UINT8:
        p[0] = (unsigned char)v;
        break;
    case MSP_DTYPE_BOOL:
        p[0] = (v < 0.0 || v > 0.0);
        break;
    case MSP_DTYPE_INT16: {
        int16_t x = (int16_t)v;
        memcpy(p, &x, 2);
        break;
    }
    case MSP_DTYPE_INT32: {
        int32_t x = (int32_t)v;
        memcpy(p, &x, 4);
        break;
    }
    case MSP_DTYPE_INT64: {
        int64_t x = (int64_t)v;
        memcpy(p, &x, 8);
        break;
    }
    default:
        break;
    }
}

/* A plain name: no '/', not "." or "..": it can only name a file right in
 * dump_tensor_data/. */
static int msp_ms_plain_name(const char *n)
{
    return n[0] && !strchr(n, '/') && strcmp(n, ".") != 0 && strcmp(n, "..") != 0;
}

/* The data file `name` of the dump json_path, loaded: a plain name, opened
 * in dump_tensor_data/ (itself no link) as every file of the dump is. file
 * receives its path for messages. */
static msp_err msp_ms_open_data(const char *json_path, const char *name, const char *where,
                                char *file, size_t file_size, msp_raw_tensor_t *raw)
{
    char shown[256];
    msp_fg_clean(shown, sizeof shown, name);
    const char *slash = strrchr(json_path, '/');
    int dl = slash ? (int)(slash - json_path) : 1;
    const char *dir = slash ? json_path : ".";
    snprintf(file, file_size, "%.*s/dump_tensor_data/%s", dl, dir, shown);
    if (!msp_ms_plain_name(name))
        return msp_fail(MSP_ERR_FORMAT,
                        "%s: data_name \"%s\" is not a plain file name in "
                        "dump_tensor_data/ (no '/', no \"..\"): refused",
                        where, shown);
    char tdir[PATH_MAX];
    snprintf(tdir, sizeof tdir, "%.*s/dump_tensor_data", dl, dir);
    int dfd = open(tdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return msp_fail(errno == ENOENT ? MSP_ERR_NOT_FOUND : MSP_ERR_FORMAT, "%s: %s: %s", where,
                        tdir,
                        errno == ELOOP || errno == ENOTDIR
                            ? "not a directory of the dump (a link?): refused"
                            : strerror(errno));
    int fd = -1;
    uint64_t size = 0;
    msp_err rc = msp_ms_open_file(dfd, name, file, MSP_MS_DATA_MAX, &fd, &size);
    close(dfd);
    if (rc)
        return rc;
    size_t fl = strlen(name);
    return fl > 4 && !strcmp(name + fl - 4, ".npy") ? msp_npy_load_fd(fd, file, raw)
                                                    : msp_pt_load_fd(fd, file, raw);
}

static msp_err msp_msprobe_read_tensor(msp_dump_file_t *f, const msp_record_info_t *r,
                                       const msp_tensor_info_t *t, void *buf, size_t buf_size)
{
    struct msp_ms_impl *im = f->impl;
    size_t ri = (size_t)(r - f->records), ti = (size_t)(t - r->tensors);
    char where[700];
    snprintf(where, sizeof where, "file %s: record %s: %s", f->path, r->name, t->role);
    if (ri >= f->n_records || ti >= r->n_tensors)
        return msp_fail(MSP_ERR_USAGE, "%s: not a tensor of this file", where);
    const char *name = im->recs[ri].files[ti];
    msp_err prc = msp_read_check(t, t->has_data && name, buf_size, where);
    if (prc)
        return prc;
    msp_raw_tensor_t raw;
    char file[PATH_MAX + 64];
    msp_err rc = msp_ms_open_data(f->path, name, where, file, sizeof file, &raw);
    if (rc)
        return rc;
    if (raw.numel != t->numel) {
        rc = msp_fail(MSP_ERR_FORMAT, "%s: %s holds %lld elements, dump.json says %lld", where,
                      file, (long long)raw.numel, (long long)t->numel);
    } else if (raw.dtype == t->dtype) {
        memcpy(buf, raw.data, (size_t)t->nbytes);
    } else {
        /* e.g. a bfloat16 tensor msprobe saved as float32 .npy */
        size_t rs = msp_dtype_size(raw.dtype), ts = msp_dtype_size(t->dtype);
        for (int64_t i = 0; i < t->numel; i++)
            msp_ms_put(t->dtype, (unsigned char *)buf + (size_t)i * ts,
                       msp_ms_get(raw.dtype, (const unsigned char *)raw.data + (size_t)i * rs));
    }
    msp_raw_free(&raw);
    return rc;
}

static msp_err msp_msprobe_record_attrs(msp_dump_file_t *f, const msp_record_info_t *r,
                                        char ***keys, char ***values, size_t *n)
{
    struct msp_ms_impl *im = f->impl;
    size_t ri = (size_t)(r - f->records);
    *keys = *values = NULL;
    *n = 0;
    if (ri >= f->n_records)
        return msp_fail(MSP_ERR_USAGE, "file %s: record %s is not of this file", f->path, r->name);
    const struct msp_ms_record *mr = &im->recs[ri];
    size_t m = mr->n_attrs + (mr->stack ? 1 : 0);
    char **ks = calloc(m ? m : 1, sizeof *ks), **vs = calloc(m ? m : 1, sizeof *vs);
    if (!ks || !vs)
        goto nomem;
    for (size_t i = 0; i < mr->n_attrs; i++)
        if (!(ks[i] = strdup(mr->attrs[i].key)) || !(vs[i] = strdup(mr->attrs[i].value)))
            goto nomem;
    if (mr->stack && (!(ks[m - 1] = strdup("stack")) || !(vs[m - 1] = strdup(mr->stack))))
        goto nomem;
    *keys = ks;
    *values = vs;
    *n = m;
    return MSP_OK;
nomem:
    msp_free_strings(ks, m);
    msp_free_strings(vs, m);
    return msp_fail(MSP_ERR_NOMEM, "out of memory");
}

char *msp_msprobe_stack(const msp_dump_file_t *f, const char *record)
{
    if (!f || msp_reader_of(f) != &msp_reader_msprobe)
        return NULL;
    const struct msp_ms_impl *im = f->impl;
    for (size_t i = 0; i < f->n_records; i++)
        if (!strcmp(f->records[i].name, record))
            return im->recs[i].stack ? strdup(im->recs[i].stack) : NULL;
    return NULL;
}

/* A .pt or .npy of its own: loaded whole, as its parser reads it. */
static msp_err msp_msprobe_stream_open(msp_dump_file_t *f, const msp_record_info_t *r,
                                       const msp_tensor_info_t *t, msp_tensor_stream_t *s)
{
    msp_err rc = MSP_OK;
    if (!(s->buf = malloc((size_t)s->total)))
        rc = msp_fail(MSP_ERR_NOMEM, "%s: out of memory for %llu bytes", s->where,
                      (unsigned long long)s->total);
    else if (!(rc = msp_msprobe_read_tensor(f, r, t, s->buf, (size_t)s->total)))
        s->have = (size_t)s->total;
    return rc;
}

/* Takes a dump.json, or a directory holding one. */
static int msp_msprobe_probe(const char *path, char **file)
{
    *file = msp_msprobe_json_for(path);
    return *file != NULL;
}

const msp_reader_ops_t msp_reader_msprobe = {
    .name = "msprobe-dir",
    .probe = msp_msprobe_probe,
    .open = msp_msprobe_open,
    .read_tensor = msp_msprobe_read_tensor,
    .stream_open = msp_msprobe_stream_open,
    .record_attrs = msp_msprobe_record_attrs,
    .close = msp_msprobe_close,
};
