/* One record of a msprobe dump.json (fmt_msprobe.c), parsed alone, into the
 * catalogue: its members mapped onto our roles (input_args[i] -> input.i,
 * input_kwargs[k] -> kwarg.k, nested lists -> input.1.0), each tensor's
 * dtype, shape, statistics and data file, each other argument an attribute
 * written as text. */
#include "fmt_msrecord.h"
#include "fmt_foreign.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    struct msp_ms_attr *na = msp_grow(b->a, &b->acap, b->na, sizeof *na, 8);
    if (!na)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    b->a = na;
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
    size_t ct = b->cap, cf = b->cap; /* two arrays, one length */
    msp_tensor_info_t *nt = msp_grow(b->t, &ct, b->n, sizeof *nt, 8);
    char **nf = nt ? msp_grow(b->files, &cf, b->n, sizeof *nf, 8) : NULL;
    if (nt)
        b->t = nt;
    if (!nt || !nf)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    b->files = nf;
    b->cap = ct;
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
                            ? (int64_t)e->valuedouble
                            : -1;
            if (v >= 0 && (double)v < e->valuedouble) /* 3.7 is no extent, nor 3 */
                v = -1;
            if (v < 0 || t->ndim >= MSP_MAX_NDIM || (v && t->numel > INT64_MAX / 8 / v))
                return msp_fail(MSP_ERR_FORMAT, "file %s: record %s: %s: bad shape", b->json_path,
                                b->rec, role);
            t->shape[t->ndim++] = v;
            t->numel *= v;
        }
    }
    t->nbytes = t->numel * (int64_t)msp_dtype_size(t->dtype);
    double v[4];
    static const char *const keys[4] = {"Max", "Min", "Mean", "Norm"};
    int have = 0;
    for (int i = 0; i < 4; i++)
        have |= msp_ms_num(cJSON_GetObjectItemCaseSensitive(o, keys[i]), &v[i]) << i;
    /* msprobe 26 writes an integer tensor's Mean and Norm as null: its Max
     * and Min are still statistics to compare, the other two are unknown */
    if (have == 0xf || have == 0x3) {
        t->has_stats = have == 0xf ? MSP_STATS_ALL : MSP_STATS_MAXMIN;
        b->saw_stats = 1;
        t->stats.max = v[0];
        t->stats.min = v[1];
        t->stats.mean = have == 0xf ? v[2] : NAN;
        t->stats.norm = have == 0xf ? v[3] : NAN;
    }
    const cJSON *md5 = cJSON_GetObjectItemCaseSensitive(o, "md5");
    if (cJSON_IsString(md5)) {
        char *end;
        unsigned long c = strtoul(md5->valuestring, &end, 16);
        if (*end || end == md5->valuestring || c > 0xffffffffUL) {
            char shown[64];
            msp_fg_clean(shown, sizeof shown, md5->valuestring);
            return msp_fail(MSP_ERR_FORMAT,
                            "file %s: record %s: %s: md5 \"%s\" is not a "
                            "CRC-32 in hex",
                            b->json_path, b->rec, role, shown);
        }
        t->stats.crc32 = (uint32_t)c;
        b->saw_md5 = 1;
    }
    const cJSON *rg = cJSON_GetObjectItemCaseSensitive(o, "requires_grad");
    t->requires_grad = cJSON_IsTrue(rg);
    /* A named data file is data: one that is missing, is no regular file,
     * is a link or lies outside dump_tensor_data/ is an error when the
     * tensor is read (msp_msprobe_read_tensor), never a quiet "no data"
     * that would turn the comparison into one of statistics. */
    const cJSON *dn = cJSON_GetObjectItemCaseSensitive(o, "data_name");
    if (cJSON_IsString(dn) && dn->valuestring[0]) {
        if (!(b->files[b->n - 1] = strdup(dn->valuestring)))
            return msp_fail(MSP_ERR_NOMEM, "out of memory");
        t->has_data = t->dtype != MSP_DTYPE_INVALID;
        if (!(t->data_name = strdup(dn->valuestring)))
            return msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    return MSP_OK;
}

/* Python's repr of a str ('sum'), as our own dump writes a string argument:
 * msprobe writes {"type": "str", "value": "sum"}, whose bare text the
 * replay's literal parser would take for a name. */
static char *msp_ms_pyrepr(const char *s)
{
    char *o = malloc(4 * strlen(s) + 3), *w = o;
    if (!o)
        return NULL;
    *w++ = '\'';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\\' || c == '\'') {
            *w++ = '\\';
            *w++ = (char)c;
        } else if (c < 0x20 || c == 0x7f) {
            w += sprintf(w, "\\x%02x", c);
        } else {
            *w++ = (char)c;
        }
    }
    *w++ = '\'';
    *w = '\0';
    return o;
}

/* A non-tensor argument's text: Python's repr, as our own dump writes it. */
static char *msp_ms_value_text(const char *type, const cJSON *val, const cJSON *fmt)
{
    if (cJSON_IsString(val) && !strcmp(type, "str"))
        return msp_ms_pyrepr(val->valuestring);
    if (cJSON_IsString(val) && !strcmp(type, "torch.device")) {
        char *r = msp_ms_pyrepr(val->valuestring);
        char *t = r ? msp_asprintf("device(%s)", r) : NULL;
        free(r);
        return t;
    }
    /* msprobe writes a bool argument as {"type": "bool", "value": false}: the
     * text is False, so that the replay's literal parser reads it and the two
     * dumps' arguments agree; torch.memory_format has no value but a format */
    return cJSON_IsString(val)   ? strdup(val->valuestring)
           : cJSON_IsBool(val)   ? strdup(cJSON_IsTrue(val) ? "True" : "False")
           : cJSON_IsNull(val)   ? strdup("None")
           : val                 ? cJSON_PrintUnformatted(val)
           : cJSON_IsString(fmt) ? msp_asprintf("torch.%s", fmt->valuestring)
                                 : strdup("None");
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
    if (!cJSON_IsObject(it)) {
        /* null: None. A forward call's argument that was None is one, as our
         * own dump writes it (embedding's padding_idx, input.2): a replay
         * needs every position up to the last. Elsewhere (a gradient that
         * autograd did not hand on) it is nothing. */
        size_t rl = strlen(b->rec);
        if (cJSON_IsNull(it) && rl > 8 && !strcmp(b->rec + rl - 8, ".forward") &&
            (!strncmp(role, "input.", 6) || !strncmp(role, "kwarg.", 6)))
            return msp_ms_attr_add(b, role, "None");
        return MSP_OK;
    }
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
    const cJSON *fmt = val ? NULL : cJSON_GetObjectItemCaseSensitive(it, "format");
    char *txt = msp_ms_value_text(type->valuestring, val, fmt);
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

msp_err msp_ms_record(msp_dump_file_t *f, struct msp_ms_record *mr, const cJSON *rec,
                      const char *dir, int64_t order, int *saw_md5, int *saw_stats)
{
    msp_record_info_t *r = &f->records[f->n_records];
    memset(r, 0, sizeof *r);
    memset(mr, 0, sizeof *mr);
    if (!(r->name = strdup(rec->string)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    r->order = order;
    f->n_records++;
    struct msp_ms_build b = {.json_path = f->path,
                             .dir = dir,
                             .rec = rec->string,
                             .tensor_task = !strcmp(f->task, "tensor")};
    msp_err rc = MSP_OK;
    for (const cJSON *m = rec->child; m && !rc; m = m->next) {
        const char *k = m->string;
        const char *role = !strcmp(k, "input_args")     ? "input"
                           : !strcmp(k, "input_kwargs") ? "kwarg"
                                                        : k;
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
    /* trimmed to size: a catalogue of 100,000 records would otherwise keep
     * room for 8 tensors in each */
    if (b.n && b.n < b.cap) {
        msp_tensor_info_t *nt = realloc(b.t, b.n * sizeof *nt);
        char **nf = realloc(b.files, b.n * sizeof *nf);
        b.t = nt ? nt : b.t;
        b.files = nf ? nf : b.files;
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
