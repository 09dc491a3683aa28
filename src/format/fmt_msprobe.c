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
 * hex); tensor data, when saved, from the .pt / .npy named by data_name. */
#include "fmt_foreign.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MSP_MS_JSON_MAX ((size_t)1 << 31)

struct msp_ms_attr {
    char *key, *value;
};

struct msp_ms_record {
    char **files;              /* per tensor, in catalogue order; NULL when no data */
    struct msp_ms_attr *attrs; /* non-tensor arguments, construct.json's parent */
    size_t n_attrs;
    char *stack;               /* stack.json, frames joined by '\n' */
};

struct msp_ms_impl {
    unsigned magic;
    struct msp_ms_record *recs;
};

#define MSP_MS_MAGIC 0x6d73706au

int msp_msprobe_owns(const msp_dump_file_t *f)
{
    /* The HDF5 reader's impl begins with an hid_t; ours with a magic that
     * reader never stores there. The path check alone would do; both are
     * cheap and make a mix-up impossible. */
    const char *base = f && f->path ? strrchr(f->path, '/') : NULL;
    base = base ? base + 1 : (f ? f->path : NULL);
    return f && f->impl && base && strcmp(base, "dump.json") == 0 &&
           ((const struct msp_ms_impl *)f->impl)->magic == MSP_MS_MAGIC;
}

char *msp_msprobe_json_for(const char *path)
{
    struct stat st;
    if (!path || stat(path, &st) != 0)
        return NULL;
    if (S_ISREG(st.st_mode)) {
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        return strcmp(base, "dump.json") == 0 ? strdup(path) : NULL;
    }
    if (!S_ISDIR(st.st_mode))
        return NULL;
    char *j = msp_asprintf("%s/dump.json", path);
    if (j && (stat(j, &st) != 0 || !S_ISREG(st.st_mode))) {
        free(j);
        return NULL;
    }
    return j;
}

/* Python's json writes NaN, Infinity and -Infinity bare; cJSON refuses
 * them, so they become the strings "NaN", "Infinity", "-Infinity". */
static char *msp_ms_quote_specials(const char *in, size_t len)
{
    char *out = malloc(len * 2 + 16), *o = out;
    if (!out)
        return NULL;
    int in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = in[i];
        if (in_str) {
            *o++ = c;
            if (c == '\\' && i + 1 < len)
                *o++ = in[++i];
            else if (c == '"')
                in_str = 0;
            continue;
        }
        if (c == '"') {
            in_str = 1;
        } else {
            static const char *const tok[] = {"NaN", "Infinity", "-Infinity"};
            size_t t = 0;
            while (t < 3 && strncmp(in + i, tok[t], strlen(tok[t])) != 0)
                t++;
            if (t < 3) {
                size_t tl = strlen(tok[t]);
                *o++ = '"';
                memcpy(o, tok[t], tl);
                o += tl;
                *o++ = '"';
                i += tl - 1;
                continue;
            }
        }
        *o++ = c;
    }
    *o = '\0';
    return out;
}

static int msp_ms_num(const cJSON *it, double *out)
{
    if (cJSON_IsNumber(it)) {
        *out = it->valuedouble;
        return 1;
    }
    if (cJSON_IsString(it)) {
        const char *s = it->valuestring;
        if (!strcmp(s, "NaN") || !strcasecmp(s, "nan"))
            *out = NAN;
        else if (!strcmp(s, "Infinity") || !strcasecmp(s, "inf"))
            *out = INFINITY;
        else if (!strcmp(s, "-Infinity") || !strcasecmp(s, "-inf"))
            *out = -INFINITY;
        else
            return 0;
        return 1;
    }
    return 0;
}

/* Building one record: growing tensor and attribute lists. */
struct msp_ms_build {
    const char *json_path, *dir, *rec;
    msp_tensor_info_t *t;
    char **files;
    size_t n, cap;
    struct msp_ms_attr *a;
    size_t na, acap;
    int saw_md5, saw_stats;
    int tensor_task; /* task "tensor": every data_name is a file it saved */
};

static msp_err msp_ms_attr_add(struct msp_ms_build *b, const char *key, const char *value)
{
    if (b->na == b->acap) {
        size_t nc = b->acap ? b->acap * 2 : 8;
        struct msp_ms_attr *na = realloc(b->a, nc * sizeof *na);
        if (!na)
            return msp_fail(MSP_ERR_NOMEM, "out of memory");
        b->a = na;
        b->acap = nc;
    }
    b->a[b->na].key = strdup(key);
    b->a[b->na].value = strdup(value);
    if (!b->a[b->na].key || !b->a[b->na].value) {
        free(b->a[b->na].key);
        free(b->a[b->na].value);
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    b->na++;
    return MSP_OK;
}

static msp_err msp_ms_tensor(struct msp_ms_build *b, const cJSON *o, const char *role)
{
    if (b->n == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 8;
        msp_tensor_info_t *nt = realloc(b->t, nc * sizeof *nt);
        char **nf = nt ? realloc(b->files, nc * sizeof *nf) : NULL;
        if (nt)
            b->t = nt;
        if (!nt || !nf)
            return msp_fail(MSP_ERR_NOMEM, "out of memory");
        b->files = nf;
        b->cap = nc;
    }
    msp_tensor_info_t *t = &b->t[b->n];
    memset(t, 0, sizeof *t);
    b->files[b->n] = NULL;
    if (!(t->role = strdup(role)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    b->n++;
    t->offset = -1;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(o, "dtype");
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s",
             cJSON_IsString(dt) ? dt->valuestring : "unknown");
    t->dtype = msp_dtype_from_name(t->dtype_name);
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(o, "shape");
    t->numel = 1;
    if (cJSON_IsArray(sh)) {
        for (const cJSON *e = sh->child; e; e = e->next) {
            /* 2^62 bounds each extent so the cast is defined; the product
             * is checked too, as nbytes follows from it */
            int64_t v = cJSON_IsNumber(e) && e->valuedouble >= 0 && e->valuedouble < 0x1p62
                            ? (int64_t)e->valuedouble : -1;
            if (v < 0 || t->ndim >= MSP_MAX_NDIM || (v && t->numel > INT64_MAX / 8 / v))
                return msp_fail(MSP_ERR_FORMAT, "file %s: record %s: %s: bad shape",
                                b->json_path, b->rec, role);
            t->shape[t->ndim++] = v;
            t->numel *= v;
        }
    }
    t->nbytes = t->numel * (int64_t)msp_dtype_size(t->dtype);
    double v[4];
    static const char *const keys[4] = {"Max", "Min", "Mean", "Norm"};
    int have = 0;
    for (int i = 0; i < 4; i++)
        have += msp_ms_num(cJSON_GetObjectItemCaseSensitive(o, keys[i]), &v[i]);
    if (have == 4) {
        t->has_stats = 1;
        b->saw_stats = 1;
        t->stats.max = v[0];
        t->stats.min = v[1];
        t->stats.mean = v[2];
        t->stats.norm = v[3];
    }
    const cJSON *md5 = cJSON_GetObjectItemCaseSensitive(o, "md5");
    if (cJSON_IsString(md5)) {
        char *end;
        unsigned long c = strtoul(md5->valuestring, &end, 16);
        if (*end || end == md5->valuestring || c > 0xffffffffUL) {
            char shown[64];
            msp_fg_clean(shown, sizeof shown, md5->valuestring);
            return msp_fail(MSP_ERR_FORMAT, "file %s: record %s: %s: md5 \"%s\" is not a "
                            "CRC-32 in hex", b->json_path, b->rec, role, shown);
        }
        t->stats.crc32 = (uint32_t)c;
        b->saw_md5 = 1;
    }
    const cJSON *rg = cJSON_GetObjectItemCaseSensitive(o, "requires_grad");
    t->requires_grad = cJSON_IsTrue(rg);
    const cJSON *dn = cJSON_GetObjectItemCaseSensitive(o, "data_name");
    if (cJSON_IsString(dn) && dn->valuestring[0] && !strchr(dn->valuestring, '/')) {
        char *p = msp_asprintf("%s/dump_tensor_data/%s", b->dir, dn->valuestring);
        struct stat st;
        if (!p)
            return msp_fail(MSP_ERR_NOMEM, "out of memory");
        if ((stat(p, &st) == 0 && S_ISREG(st.st_mode)) || b->tensor_task) {
            /* a tensor dump's missing file is that one tensor's error when
             * read (compare: its row's), not a statistics-only tensor */
            b->files[b->n - 1] = p;
            t->has_data = t->dtype != MSP_DTYPE_INVALID;
            if (!(t->data_name = strdup(dn->valuestring)))
                return msp_fail(MSP_ERR_NOMEM, "out of memory");
        } else {
            free(p);
        }
    }
    return MSP_OK;
}

static msp_err msp_ms_walk(struct msp_ms_build *b, const cJSON *it, const char *role, int top)
{
    char sub[512];
    msp_err rc = MSP_OK;
    if (cJSON_IsArray(it)) {
        size_t i = 0;
        for (const cJSON *e = it->child; e && !rc; e = e->next, i++) {
            snprintf(sub, sizeof sub, "%s.%zu", role, i);
            rc = msp_ms_walk(b, e, sub, 0);
        }
        return rc;
    }
    if (!cJSON_IsObject(it))
        return MSP_OK; /* null: an absent optional argument */
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(it, "type");
    if (!cJSON_IsString(type)) { /* kwargs or parameters: a dict of arguments */
        for (const cJSON *e = it->child; e && !rc; e = e->next) {
            snprintf(sub, sizeof sub, "%s.%s", role, e->string);
            rc = msp_ms_walk(b, e, sub, 0);
        }
        return rc;
    }
    if (top) { /* a bare single output is our output.0 */
        snprintf(sub, sizeof sub, "%s.0", role);
        role = sub;
    }
    if (cJSON_GetObjectItemCaseSensitive(it, "shape") &&
        cJSON_GetObjectItemCaseSensitive(it, "dtype"))
        return msp_ms_tensor(b, it, role);
    const cJSON *val = cJSON_GetObjectItemCaseSensitive(it, "value");
    /* torch.memory_format has no value but a format: written as Python's repr */
    const cJSON *fmt = val ? NULL : cJSON_GetObjectItemCaseSensitive(it, "format");
    char *txt = cJSON_IsString(val)   ? strdup(val->valuestring)
                : val                 ? cJSON_PrintUnformatted(val)
                : cJSON_IsString(fmt) ? msp_asprintf("torch.%s", fmt->valuestring)
                                      : strdup("None");
    if (!txt)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    rc = msp_ms_attr_add(b, role, txt);
    free(txt);
    return rc;
}

struct msp_ms_sortable {
    msp_tensor_info_t t;
    char *file;
};

static int msp_ms_role_order(const void *a, const void *b)
{
    return msp_role_cmp(((const struct msp_ms_sortable *)a)->t.role,
                        ((const struct msp_ms_sortable *)b)->t.role);
}

static msp_err msp_ms_record(msp_dump_file_t *f, struct msp_ms_record *mr, const cJSON *rec,
                             const char *dir, int64_t order, int *saw_md5, int *saw_stats)
{
    msp_record_info_t *r = &f->records[f->n_records];
    memset(r, 0, sizeof *r);
    memset(mr, 0, sizeof *mr);
    if (!(r->name = strdup(rec->string)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    r->order = order;
    f->n_records++;
    struct msp_ms_build b = {.json_path = f->path, .dir = dir, .rec = rec->string,
                             .tensor_task = !strcmp(f->task, "tensor")};
    msp_err rc = MSP_OK;
    for (const cJSON *m = rec->child; m && !rc; m = m->next) {
        const char *k = m->string;
        const char *role = !strcmp(k, "input_args") ? "input"
                           : !strcmp(k, "input_kwargs") ? "kwarg" : k;
        rc = msp_ms_walk(&b, m, role, !strcmp(role, "output") || !strcmp(role, "input"));
    }
    if (!rc && b.n > 1) {
        struct msp_ms_sortable *s = malloc(b.n * sizeof *s);
        if (!s) {
            rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
        } else {
            for (size_t i = 0; i < b.n; i++)
                s[i] = (struct msp_ms_sortable){b.t[i], b.files[i]};
            qsort(s, b.n, sizeof *s, msp_ms_role_order);
            for (size_t i = 0; i < b.n; i++) {
                b.t[i] = s[i].t;
                b.files[i] = s[i].file;
            }
            free(s);
        }
    }
    r->tensors = b.t;
    r->n_tensors = b.n;
    mr->files = b.files;
    mr->attrs = b.a;
    mr->n_attrs = b.na;
    *saw_md5 |= b.saw_md5;
    *saw_stats |= b.saw_stats;
    return rc;
}

/* stack.json: {"0": [[record, ...], stack], ...} (msprobe 8+), where stack
 * is a list of frames or one string; or the older {record: [frames]}. */
static void msp_ms_stacks(msp_dump_file_t *f, const char *dir)
{
    struct msp_ms_impl *im = f->impl;
    char *p = msp_asprintf("%s/stack.json", dir), *text = NULL, *q = NULL;
    size_t len = 0;
    cJSON *root = NULL;
    if (!p || msp_read_file(p, MSP_MS_JSON_MAX, &text, &len) != MSP_OK ||
        !(q = msp_ms_quote_specials(text, len)) || !(root = cJSON_Parse(q)) ||
        !cJSON_IsObject(root)) /* an array's items have no names to match */
        goto cleanup;
    for (const cJSON *e = root->child; e; e = e->next) {
        const cJSON *names = NULL, *frames = NULL;
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
            if ((joined = calloc(1, flen)))
                for (const cJSON *s = frames->child; s; s = s->next)
                    if (cJSON_IsString(s)) {
                        if (*joined)
                            strcat(joined, "\n");
                        strcat(joined, s->valuestring);
                    }
        }
        if (!joined)
            continue;
        for (size_t i = 0; i < f->n_records; i++) {
            int hit = 0;
            if (names) {
                for (const cJSON *n = names->child; n && !hit; n = n->next)
                    hit = cJSON_IsString(n) && !strcmp(n->valuestring, f->records[i].name);
            } else {
                hit = !strcmp(e->string, f->records[i].name);
            }
            if (hit && !im->recs[i].stack)
                im->recs[i].stack = strdup(joined);
        }
        free(joined);
    }
cleanup:
    cJSON_Delete(root);
    free(q);
    free(text);
    free(p);
    msp_clear_error();
}

void msp_msprobe_close(msp_dump_file_t *f)
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
            free(im->recs[i].stack);
        }
    }
    if (im)
        free(im->recs);
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
    char *text = NULL, *q = NULL, *dir = NULL;
    size_t len = 0;
    cJSON *root = NULL;
    msp_dump_file_t *f = calloc(1, sizeof *f);
    struct msp_ms_impl *im = calloc(1, sizeof *im);
    msp_err rc = MSP_OK;
    if (!f || !im || !(f->path = strdup(json_path)) || !(dir = strdup(json_path))) {
        free(im);
        im = NULL;
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", json_path);
        goto cleanup;
    }
    im->magic = MSP_MS_MAGIC;
    f->impl = im;
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        strcpy(dir, ".");
    if ((rc = msp_read_file(json_path, MSP_MS_JSON_MAX, &text, &len)) != MSP_OK)
        goto cleanup;
    if (!(q = msp_ms_quote_specials(text, len))) {
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", json_path);
        goto cleanup;
    }
    root = cJSON_Parse(q);
    const cJSON *data = root ? cJSON_GetObjectItemCaseSensitive(root, "data") : NULL;
    if (!cJSON_IsObject(data)) {
        rc = msp_fail(MSP_ERR_FORMAT, "file %s: not a msprobe dump.json (%s)", json_path,
                      root ? "no \"data\" object" : "invalid JSON");
        goto cleanup;
    }
    const cJSON *task = cJSON_GetObjectItemCaseSensitive(root, "task");
    const cJSON *level = cJSON_GetObjectItemCaseSensitive(root, "level");
    const cJSON *fw = cJSON_GetObjectItemCaseSensitive(root, "framework");
    snprintf(f->task, sizeof f->task, "%s", cJSON_IsString(task) ? task->valuestring : "");
    const char *lv = cJSON_IsString(level) ? level->valuestring : "";
    snprintf(f->dump_mode, sizeof f->dump_mode, "%s",
             !strcmp(lv, "L0") ? "module" : !strcmp(lv, "L1") ? "api" : !strcmp(lv, "mix") ? "mix" : lv);
    snprintf(f->framework, sizeof f->framework, "%s", cJSON_IsString(fw) ? fw->valuestring : "");
    f->step = msp_ms_dir_number(json_path, 2, "step");
    f->rank = msp_ms_dir_number(json_path, 1, "rank");
    if (f->rank < 0 && msp_ms_single_process_dir(json_path))
        f->rank = 0;
    f->world_size = -1;
    size_t n = (size_t)cJSON_GetArraySize(data);
    f->records = calloc(n ? n : 1, sizeof *f->records);
    im->recs = calloc(n ? n : 1, sizeof *im->recs);
    if (!f->records || !im->recs) {
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", json_path);
        goto cleanup;
    }
    int saw_md5 = 0, saw_stats = 0;
    int64_t order = 0;
    for (const cJSON *rec = data->child; rec && !rc; rec = rec->next) {
        if (!cJSON_IsObject(rec)) {
            rc = msp_fail(MSP_ERR_FORMAT, "file %s: record %s is not an object", json_path,
                          rec->string ? rec->string : "?");
            break;
        }
        rc = msp_ms_record(f, &im->recs[f->n_records], rec, dir, order++, &saw_md5, &saw_stats);
    }
    if (rc)
        goto cleanup;
    /* summary_mode md5 on the statistics task: compared on the CRC-32 */
    if (saw_md5 && !strcmp(f->task, "statistics"))
        snprintf(f->task, sizeof f->task, "md5");
    (void)saw_stats;
    msp_ms_stacks(f, dir);
    /* construct.json: each record's parent module, as an attribute */
    char *cp = msp_asprintf("%s/construct.json", dir), *ct = NULL;
    size_t cl = 0;
    cJSON *croot = NULL;
    if (cp && msp_read_file(cp, MSP_MS_JSON_MAX, &ct, &cl) == MSP_OK && (croot = cJSON_Parse(ct))) {
        for (size_t i = 0; i < f->n_records; i++) {
            const cJSON *par = cJSON_GetObjectItemCaseSensitive(croot, f->records[i].name);
            if (!cJSON_IsString(par))
                continue;
            struct msp_ms_record *mr = &im->recs[i];
            struct msp_ms_attr *na = realloc(mr->attrs, (mr->n_attrs + 1) * sizeof *na);
            if (!na)
                break;
            mr->attrs = na;
            na[mr->n_attrs].key = strdup("parent");
            na[mr->n_attrs].value = strdup(par->valuestring);
            if (na[mr->n_attrs].key && na[mr->n_attrs].value)
                mr->n_attrs++;
            else {
                free(na[mr->n_attrs].key);
                free(na[mr->n_attrs].value);
            }
        }
    }
    cJSON_Delete(croot);
    free(ct);
    free(cp);
    msp_clear_error();
cleanup:
    cJSON_Delete(root);
    free(q);
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
    case MSP_DTYPE_FLOAT32: { float v; memcpy(&v, p, 4); return v; }
    case MSP_DTYPE_FLOAT64: { double v; memcpy(&v, p, 8); return v; }
    case MSP_DTYPE_FLOAT16: { uint16_t v; memcpy(&v, p, 2); return msp_half_to_float(v); }
    case MSP_DTYPE_BFLOAT16: { uint16_t v; memcpy(&v, p, 2); return msp_bf16_to_float(v); }
    case MSP_DTYPE_INT8: return (int8_t)p[0];
    case MSP_DTYPE_UINT8: case MSP_DTYPE_BOOL: return p[0];
    case MSP_DTYPE_INT16: { int16_t v; memcpy(&v, p, 2); return v; }
    case MSP_DTYPE_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case MSP_DTYPE_INT64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    default: return NAN;
    }
}

static void msp_ms_put(msp_dtype_t dt, unsigned char *p, double v)
{
    switch (dt) {
    case MSP_DTYPE_FLOAT32: { float x = (float)v; memcpy(p, &x, 4); break; }
    case MSP_DTYPE_FLOAT64: memcpy(p, &v, 8); break;
    case MSP_DTYPE_FLOAT16: { uint16_t x = msp_double_to_half(v); memcpy(p, &x, 2); break; }
    case MSP_DTYPE_BFLOAT16: { uint16_t x = msp_double_to_bf16(v); memcpy(p, &x, 2); break; }
    case MSP_DTYPE_INT8: { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
    case MSP_DTYPE_UINT8: p[0] = (unsigned char)v; break;
    case MSP_DTYPE_BOOL: p[0] = (v < 0.0 || v > 0.0); break;
    case MSP_DTYPE_INT16: { int16_t x = (int16_t)v; memcpy(p, &x, 2); break; }
    case MSP_DTYPE_INT32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    case MSP_DTYPE_INT64: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
    default: break;
    }
}

msp_err msp_msprobe_read_tensor(msp_dump_file_t *f, const msp_record_info_t *r,
                                const msp_tensor_info_t *t, void *buf, size_t buf_size)
{
    struct msp_ms_impl *im = f->impl;
    size_t ri = (size_t)(r - f->records), ti = (size_t)(t - r->tensors);
    char where[700];
    snprintf(where, sizeof where, "file %s: record %s: %s", f->path, r->name, t->role);
    if (ri >= f->n_records || ti >= r->n_tensors)
        return msp_fail(MSP_ERR_USAGE, "%s: not a tensor of this file", where);
    const char *file = im->recs[ri].files[ti];
    msp_err prc = msp_read_check(t, t->has_data && file, buf_size, where);
    if (prc)
        return prc;
    size_t fl = strlen(file);
    msp_raw_tensor_t raw;
    msp_err rc = fl > 4 && !strcmp(file + fl - 4, ".npy") ? msp_npy_load(file, &raw)
                                                          : msp_pt_load(file, &raw);
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

msp_err msp_msprobe_record_attrs(msp_dump_file_t *f, const msp_record_info_t *r, char ***keys,
                                 char ***values, size_t *n)
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
    if (!msp_msprobe_owns(f))
        return NULL;
    const struct msp_ms_impl *im = f->impl;
    for (size_t i = 0; i < f->n_records; i++)
        if (!strcmp(f->records[i].name, record))
            return im->recs[i].stack ? strdup(im->recs[i].stack) : NULL;
    return NULL;
}
