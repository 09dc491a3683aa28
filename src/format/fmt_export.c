/* Our dump rewritten in msprobe's own layout, so that msprobe's own tools
 * (its compare, visualization, monitor) read it:
 *
 *   OUT/stepN/rankR/dump.json         task, level, framework, dump_data_dir, data
 *   OUT/stepN/rankR/stack.json        {"0": [[records], [frames]], ...}
 *   OUT/stepN/rankR/construct.json    {record: parent module record or null}; {} at L1
 *                                     (fmt_construct.c)
 *   OUT/stepN/rankR/dump_tensor_data/<record>.<input|output>.<i>.pt (or .npy)
 *
 * Roles map back as msprobe-dump(5), "MSPROBE'S OWN DIRECTORIES", reads them
 * the other way: input.i -> input_args[i], kwarg.k -> input_kwargs[k],
 * output.i -> output[i], a module record's parameters.NAME -> parameters[NAME],
 * nested roles to nested lists; backward records put
 * their outputs in msprobe's autograd order (grad_fn_outputs). A .pt is what
 * torch.save writes for one plain tensor (a stored zip: data.pkl calling
 * torch._utils._rebuild_tensor_v2, data/0, version); a .npy is format 1.0,
 * bfloat16 written as float32 (msprobe's dtype field keeps bfloat16).
 *
 * Nothing is written outside OUT, whatever OUT already holds: stepN, rankR
 * and dump_tensor_data are made, or taken when they exist, one component at
 * a time with no link followed (an existing link or non-directory there is
 * refused), and every file is written through the directory descriptors so
 * opened, to a temporary name made anew (O_EXCL, O_NOFOLLOW) and renamed over
 * its own name: a link or a hard link already at that name is replaced, never
 * written through. OUT itself is the user's to choose, link or not. */
#include "fmt_construct.h"
#include "msprobe/format.h"

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
#include <zip.h>

/* ---- where the files go -------------------------------------------------------- */

/* Directory name under parent (shown: its path, for messages), made if it is
 * not there, opened without following a link into *fd. */
static msp_err msp_xdir(int parent, const char *name, const char *shown, int *fd)
{
    *fd = -1;
    if (mkdirat(parent, name, 0777) != 0 && errno != EEXIST)
        return msp_fail(MSP_ERR_IO, "export: cannot create %s: %s", shown, strerror(errno));
    *fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*fd >= 0)
        return MSP_OK;
    struct stat st;
    int err = errno;
    if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
        return msp_fail(MSP_ERR_USAGE,
                        "export: %s is a symbolic link: refused (export writes "
                        "only inside -o and follows no link there; remove it, or export "
                        "into an empty directory)",
                        shown);
    if (err == ENOTDIR || err == ELOOP)
        return msp_fail(MSP_ERR_USAGE, "export: %s exists and is not a directory: refused", shown);
    return msp_fail(MSP_ERR_IO, "export: cannot open %s: %s", shown, strerror(err));
}

/* What a file's bytes come from: fill writes them to f. */
typedef msp_err (*msp_xfill_fn)(FILE *f, const char *shown, const void *ud);

/* name in directory dfd (shown: the file's path, for messages), written by
 * fill to a temporary name of its own, then renamed over name. */
static msp_err msp_xput(int dfd, const char *name, const char *shown, msp_xfill_fn fill,
                        const void *ud)
{
    char tmp[300];
    snprintf(tmp, sizeof tmp, ".export.%ld.tmp", (long)getpid());
    (void)unlinkat(dfd, tmp, 0); /* a stale one of a crashed run */
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0)
        return msp_fail(MSP_ERR_IO, "export: cannot create %s: %s", shown, strerror(errno));
    FILE *f = fdopen(fd, "wb");
    msp_err rc = f ? fill(f, shown, ud)
                   : msp_fail(MSP_ERR_IO, "export: cannot create %s: %s", shown, strerror(errno));
    if (!f)
        close(fd);
    else if ((ferror(f) | fclose(f)) && !rc)
        rc = msp_fail(MSP_ERR_IO, "export: cannot write %s: %s", shown,
                      strerror(errno ? errno : EIO));
    if (!rc && renameat(dfd, tmp, dfd, name) != 0)
        rc = msp_fail(MSP_ERR_IO, "export: cannot write %s: %s", shown, strerror(errno));
    if (rc)
        (void)unlinkat(dfd, tmp, 0);
    return rc;
}

/* ---- tensor files ---------------------------------------------------------- */

/* pickle bytes go into an msp_buf_t (bytes, not text: hence void *) */
static void xb_put(msp_buf_t *b, const void *d, size_t n)
{
    msp_buf_put(b, d, n);
}

static void xb_byte(msp_buf_t *b, unsigned char c)
{
    xb_put(b, &c, 1);
}

static void pk_str(msp_buf_t *b, const char *s) /* BINUNICODE */
{
    uint32_t n = (uint32_t)strlen(s);
    unsigned char h[5] = {'X', (unsigned char)n, (unsigned char)(n >> 8), (unsigned char)(n >> 16),
                          (unsigned char)(n >> 24)};
    xb_put(b, h, 5);
    xb_put(b, s, n);
}

static void pk_global(msp_buf_t *b, const char *mod, const char *name)
{
    xb_byte(b, 'c');
    xb_put(b, mod, strlen(mod));
    xb_byte(b, '\n');
    xb_put(b, name, strlen(name));
    xb_byte(b, '\n');
}

static void pk_int(msp_buf_t *b, int64_t v) /* BININT, else LONG1 */
{
    if (v >= INT32_MIN && v <= INT32_MAX) {
        uint32_t u = (uint32_t)(int32_t)v;
        unsigned char h[5] = {'J', (unsigned char)u, (unsigned char)(u >> 8),
                              (unsigned char)(u >> 16), (unsigned char)(u >> 24)};
        xb_put(b, h, 5);
        return;
    }
    unsigned char h[10] = {0x8a, 8};
    uint64_t u = (uint64_t)v;
    for (int i = 0; i < 8; i++)
        h[2 + i] = (unsigned char)(u >> (8 * i));
    xb_put(b, h, 10);
}

static void pk_ints(msp_buf_t *b, const int64_t *v, int n)
{
    if (n == 0) {
        xb_byte(b, ')'); /* EMPTY_TUPLE */
        return;
    }
    xb_byte(b, '(');
    for (int i = 0; i < n; i++)
        pk_int(b, v[i]);
    xb_byte(b, 't');
}

/* The storage class torch.save names for each dtype. A table rather than a
 * switch of literals: gcc's -Warray-bounds (Release, inlined into
 * msp_pt_save) took the switch's shortest literal as the bound of every
 * strlen of its result and failed the build. */
static const struct {
    msp_dtype_t dtype;
    const char *name;
} msp_storage_names[] = {
    {MSP_DTYPE_FLOAT32, "FloatStorage"},     {MSP_DTYPE_FLOAT16, "HalfStorage"},
    {MSP_DTYPE_BFLOAT16, "BFloat16Storage"}, {MSP_DTYPE_FLOAT64, "DoubleStorage"},
    {MSP_DTYPE_INT8, "CharStorage"},         {MSP_DTYPE_INT16, "ShortStorage"},
    {MSP_DTYPE_INT32, "IntStorage"},         {MSP_DTYPE_INT64, "LongStorage"},
    {MSP_DTYPE_UINT8, "ByteStorage"},        {MSP_DTYPE_BOOL, "BoolStorage"},
};

static const char *msp_storage_name(msp_dtype_t dt)
{
    for (size_t i = 0; i < sizeof msp_storage_names / sizeof msp_storage_names[0]; i++)
        if (msp_storage_names[i].dtype == dt)
            return msp_storage_names[i].name;
    return NULL;
}

/* torch.save of one contiguous tensor: a zip with stored entries, as torch
 * writes it (torch.load and our fmt_pt.c read it), as name in directory dfd
 * (shown: its path). libzip takes a path: /proc/self/fd/DFD/name is that
 * directory, whatever its path now leads to; libzip writes a temporary file
 * beside name (mkstemp) and renames it over name, as msp_xput does. */
msp_err msp_pt_save(int dfd, const char *name, const char *shown, const msp_tensor_info_t *t,
                    const void *data)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "/proc/self/fd/%d/%s", dfd, name) >= (int)sizeof path)
        return msp_fail(MSP_ERR_IO, "export: cannot create %s: %s", shown, strerror(ENAMETOOLONG));
    msp_buf_t pk = {0};
    int64_t stride[MSP_MAX_NDIM];
    int64_t s = 1;
    for (int d = t->ndim; d-- > 0;) {
        stride[d] = s;
        s *= t->shape[d] ? t->shape[d] : 1;
    }
    xb_put(&pk, "\x80\x02", 2);
    pk_global(&pk, "torch._utils", "_rebuild_tensor_v2");
    xb_put(&pk, "((", 2);
    pk_str(&pk, "storage");
    pk_global(&pk, "torch", msp_storage_name(t->dtype));
    pk_str(&pk, "0");
    pk_str(&pk, "cpu");
    pk_int(&pk, t->numel);
    xb_put(&pk, "tQ", 2); /* TUPLE, BINPERSID */
    pk_int(&pk, 0);
    pk_ints(&pk, t->shape, t->ndim);
    pk_ints(&pk, stride, t->ndim);
    xb_byte(&pk, t->requires_grad ? 0x88 : 0x89);
    pk_global(&pk, "collections", "OrderedDict");
    xb_put(&pk, ")Rt", 3); /* EMPTY_TUPLE, REDUCE, TUPLE */
    xb_put(&pk, "R.", 2);  /* REDUCE, STOP */
    if (pk.oom) {
        msp_buf_free(&pk);
        return msp_fail(MSP_ERR_NOMEM, "export: out of memory");
    }
    /* the zip's inner directory is the file's name, as torch.save names it */
    const char *base = name;
    size_t bl = strlen(base);
    char dirname[256];
    snprintf(dirname, sizeof dirname, "%.*s",
             (int)(bl > 3 && !strcmp(base + bl - 3, ".pt") ? bl - 3 : bl), base);
    int zerr = 0;
    msp_err rc = MSP_OK;
    zip_t *z = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &zerr);
    if (!z) {
        msp_buf_free(&pk);
        return msp_fail(MSP_ERR_IO, "export: cannot create %s (libzip error %d)", shown, zerr);
    }
    struct {
        const char *name;
        const void *d;
        size_t n;
    } ent[3] = {
        {"data.pkl", pk.data, pk.len}, {"data/0", data, (size_t)t->nbytes}, {"version", "3\n", 2}};
    for (int i = 0; i < 3 && !rc; i++) {
        char member[300];
        snprintf(member, sizeof member, "%s/%s", dirname, ent[i].name);
        zip_source_t *src = zip_source_buffer(z, ent[i].d, ent[i].n, 0);
        zip_int64_t idx = src ? zip_file_add(z, member, src, ZIP_FL_ENC_UTF_8) : -1;
        if (idx < 0) {
            zip_source_free(src);
            rc = msp_fail(MSP_ERR_IO, "export: %s: cannot add %s: %s", shown, member,
                          zip_strerror(z));
        } else {
            zip_set_file_compression(z, (zip_uint64_t)idx, ZIP_CM_STORE, 0);
        }
    }
    if (!rc && zip_close(z) != 0) {
        rc = msp_fail(MSP_ERR_IO, "export: cannot write %s: %s", shown, zip_strerror(z));
        zip_discard(z);
    } else if (rc) {
        zip_discard(z);
    }
    msp_buf_free(&pk);
    return rc;
}

/* numpy.save, format 1.0; bfloat16 as float32. */
struct msp_xnpy {
    const msp_tensor_info_t *t;
    const void *data;
};

/* msp_xput's fill of a .npy: ud a struct msp_xnpy; f is closed by msp_xput. */
static msp_err msp_fill_npy(FILE *f, const char *shown, const void *ud)
{
    const msp_tensor_info_t *t = ((const struct msp_xnpy *)ud)->t;
    const void *data = ((const struct msp_xnpy *)ud)->data;
    (void)shown;
    static const struct {
        msp_dtype_t dt;
        const char *descr;
    } map[] = {{MSP_DTYPE_FLOAT32, "<f4"}, {MSP_DTYPE_FLOAT16, "<f2"}, {MSP_DTYPE_BFLOAT16, "<f4"},
               {MSP_DTYPE_FLOAT64, "<f8"}, {MSP_DTYPE_INT8, "|i1"},    {MSP_DTYPE_INT16, "<i2"},
               {MSP_DTYPE_INT32, "<i4"},   {MSP_DTYPE_INT64, "<i8"},   {MSP_DTYPE_UINT8, "|u1"},
               {MSP_DTYPE_BOOL, "|b1"}};
    const char *descr = NULL;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].dt == t->dtype)
            descr = map[i].descr;
    char shape[MSP_SHAPE_STR_MAX + 8] = "(";
    for (int d = 0; d < t->ndim; d++)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%lld%s",
                 (long long)t->shape[d],
                 t->ndim == 1      ? ","
                 : d + 1 < t->ndim ? ", "
                                   : "");
    strcat(shape, ")");
    char head[1024];
    int hl = snprintf(head, sizeof head, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                      descr, shape);
    size_t total = 10 + (size_t)hl + 1, pad = (64 - total % 64) % 64;
    uint16_t hlen = (uint16_t)((size_t)hl + pad + 1);
    unsigned char magic[10] = {
        0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)hlen, (unsigned char)(hlen >> 8)};
    fwrite(magic, 1, 10, f);
    fwrite(head, 1, (size_t)hl, f);
    for (size_t i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    if (t->dtype == MSP_DTYPE_BFLOAT16) {
        const uint16_t *b = data;
        for (int64_t i = 0; i < t->numel; i++) {
            float v = msp_bf16_to_float(b[i]);
            fwrite(&v, 4, 1, f);
        }
    } else {
        fwrite(data, 1, (size_t)t->nbytes, f);
    }
    return MSP_OK; /* a failed write: ferror, which msp_xput checks */
}

/* ---- dump.json -------------------------------------------------------------- */

/* Python's json writes NaN and infinities bare; so does msprobe, and its
 * readers expect them (ours reads both forms). */
static cJSON *msp_xnum(double v)
{
    if (isnan(v))
        return cJSON_CreateRaw("NaN");
    if (isinf(v))
        return cJSON_CreateRaw(v > 0 ? "Infinity" : "-Infinity");
    return cJSON_CreateNumber(v);
}

/* A non-tensor argument (our attribute: Python's repr) as msprobe writes it. */
static cJSON *msp_xvalue(const char *s)
{
    cJSON *o;
    char *end;
    if (!strcmp(s, "None"))
        return cJSON_CreateNull();
    if (!strcmp(s, "True") || !strcmp(s, "False")) {
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "bool");
        cJSON_AddBoolToObject(o, "value", s[0] == 'T');
        return o;
    }
    long long iv = strtoll(s, &end, 10);
    if (*s && !*end) {
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "int");
        cJSON_AddNumberToObject(o, "value", (double)iv);
        return o;
    }
    double dv = strtod(s, &end);
    if (*s && !*end) {
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "float");
        cJSON_AddItemToObject(o, "value", msp_xnum(dv));
        return o;
    }
    if ((s[0] == '(' || s[0] == '[') && strlen(s) >= 2) { /* a tuple of scalars */
        cJSON *arr = cJSON_CreateArray();
        char *copy = strdup(s + 1);
        if (copy) {
            copy[strlen(copy) - 1] = '\0';
            char *sp = NULL;
            for (char *tok = strtok_r(copy, ", ", &sp); tok; tok = strtok_r(NULL, ", ", &sp))
                cJSON_AddItemToArray(arr, msp_xvalue(tok));
            free(copy);
        }
        return arr;
    }
    o = cJSON_CreateObject();
    if (!strncmp(s, "torch.", 6) && strstr(s, "_format")) {
        cJSON_AddStringToObject(o, "type", "torch.memory_format");
        cJSON_AddStringToObject(o, "format", s + 6);
    } else {
        cJSON_AddStringToObject(o, "type", !strncmp(s, "torch.", 6) ? "torch.dtype" : "str");
        cJSON_AddStringToObject(o, "value", s);
    }
    return o;
}

/* arr[i], created (as null fillers up to it) when missing; replaced by v. */
static void msp_xset(cJSON *arr, size_t i, cJSON *v)
{
    while ((size_t)cJSON_GetArraySize(arr) <= i)
        cJSON_AddItemToArray(arr, cJSON_CreateNull());
    cJSON_ReplaceItemInArray(arr, (int)i, v);
}

/* Place v under the role path rest ("3", "1.0", "name") in container c. */
static void msp_xplace(cJSON *c, const char *rest, cJSON *v)
{
    char head[256];
    size_t hl = strcspn(rest, ".");
    snprintf(head, sizeof head, "%.*s", (int)hl, rest);
    const char *tail = rest[hl] ? rest + hl + 1 : NULL;
    int num = hl > 0;
    for (size_t i = 0; i < hl; i++)
        num &= isdigit((unsigned char)rest[i]) != 0;
    if (cJSON_IsArray(c) && num) {
        size_t i = (size_t)strtoull(head, NULL, 10);
        if (!tail) {
            msp_xset(c, i, v);
            return;
        }
        cJSON *sub = cJSON_GetArrayItem(c, (int)i);
        if (!cJSON_IsArray(sub)) {
            sub = cJSON_CreateArray();
            msp_xset(c, i, sub);
        }
        msp_xplace(sub, tail, v);
        return;
    }
    if (cJSON_IsObject(c)) {
        if (!tail) {
            cJSON_DeleteItemFromObject(c, head);
            cJSON_AddItemToObject(c, head, v);
            return;
        }
        cJSON *sub = cJSON_GetObjectItemCaseSensitive(c, head);
        if (!cJSON_IsArray(sub)) {
            sub = cJSON_CreateArray();
            cJSON_AddItemToObject(c, head, sub);
        }
        msp_xplace(sub, tail, v);
        return;
    }
    cJSON_Delete(v);
}

typedef struct msp_xctx {
    msp_dump_file_t *f;
    const char *data_dir;
    int data_fd; /* data_dir, opened by msp_xdir */
    int npy, with_data, md5;
    void *buf;
    size_t buf_size;
    msp_xconstruct_t construct; /* each record's parent, for construct.json */
} msp_xctx_t;

static msp_err msp_xtensor(msp_xctx_t *x, const msp_record_info_t *r, const msp_tensor_info_t *t,
                           const char *io, const char *pos, cJSON **out)
{
    cJSON *o = cJSON_CreateObject();
    *out = o;
    if (!o)
        return msp_fail(MSP_ERR_NOMEM, "export: out of memory");
    cJSON *shape = cJSON_CreateArray();
    for (int d = 0; d < t->ndim; d++)
        cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
    cJSON_AddStringToObject(o, "type", "torch.Tensor");
    cJSON_AddStringToObject(o, "dtype", t->dtype_name);
    cJSON_AddItemToObject(o, "shape", shape);
    if (t->has_stats) {
        cJSON_AddItemToObject(o, "Max", msp_xnum(t->stats.max));
        cJSON_AddItemToObject(o, "Min", msp_xnum(t->stats.min));
        cJSON_AddItemToObject(o, "Mean", msp_xnum(t->stats.mean));
        cJSON_AddItemToObject(o, "Norm", msp_xnum(t->stats.norm));
    }
    cJSON_AddBoolToObject(o, "requires_grad", t->requires_grad != 0);
    if (x->md5) {
        char h[16];
        snprintf(h, sizeof h, "%08x", (unsigned)t->stats.crc32);
        cJSON_AddStringToObject(o, "md5", h);
    }
    if (!x->with_data || !t->has_data || !msp_storage_name(t->dtype))
        return MSP_OK;
    char name[700], *path = NULL;
    snprintf(name, sizeof name, "%s.%s.%s.%s", r->name, io, pos, x->npy ? "npy" : "pt");
    for (char *c = name; *c; c++)
        if (*c == '/')
            *c = '_';
    if ((size_t)t->nbytes > x->buf_size) {
        void *nb = realloc(x->buf, (size_t)t->nbytes ? (size_t)t->nbytes : 1);
        if (!nb)
            return msp_fail(MSP_ERR_NOMEM, "export: out of memory for %lld bytes",
                            (long long)t->nbytes);
        x->buf = nb;
        x->buf_size = (size_t)t->nbytes;
    }
    msp_err rc = msp_dump_read_tensor(x->f, r, t, x->buf, x->buf_size);
    if (!rc && !(path = msp_asprintf("%s/%s", x->data_dir, name)))
        rc = msp_fail(MSP_ERR_NOMEM, "export: out of memory");
    struct msp_xnpy nd = {t, x->buf};
    if (!rc)
        rc = x->npy ? msp_xput(x->data_fd, name, path, msp_fill_npy, &nd)
                    : msp_pt_save(x->data_fd, name, path, t, x->buf);
    free(path);
    if (!rc)
        cJSON_AddStringToObject(o, "data_name", name);
    return rc;
}

/* One record as msprobe writes it into dump.json's "data". */
static msp_err msp_xrecord(msp_xctx_t *x, const msp_record_info_t *r, cJSON *data, cJSON *stacks)
{
    char **keys = NULL, **vals = NULL, *map = NULL, *stack = NULL, *parent = NULL;
    int64_t order_begin = -1;
    size_t na = 0;
    msp_err rc = msp_dump_record_attrs(x->f, r, &keys, &vals, &na);
    if (rc)
        return rc;
    int backward = strstr(r->name, ".backward") != NULL;
    cJSON *rec = cJSON_CreateObject();
    cJSON *in = cJSON_CreateArray(), *kw = backward ? NULL : cJSON_CreateObject();
    cJSON *out = cJSON_CreateArray();
    for (size_t i = 0; i < na; i++) {
        if (!strcmp(keys[i], "grad_fn_outputs"))
            map = vals[i];
        else if (!strcmp(keys[i], "stack"))
            stack = vals[i];
        else if (!strcmp(keys[i], "parent"))
            parent = vals[i];
        else if (!strcmp(keys[i], "order_begin"))
            order_begin = strtoll(vals[i], NULL, 10);
        else if (!strncmp(keys[i], "input.", 6))
            msp_xplace(in, keys[i] + 6, msp_xvalue(vals[i]));
        else if (kw && !strncmp(keys[i], "kwarg.", 6))
            msp_xplace(kw, keys[i] + 6, msp_xvalue(vals[i]));
    }
    for (size_t j = 0; j < r->n_tensors && !rc; j++) {
        const msp_tensor_info_t *t = &r->tensors[j];
        const char *role = t->role;
        cJSON *v = NULL;
        char pos[64] = "";
        if (!strncmp(role, "input.", 6)) {
            if (!(rc = msp_xtensor(x, r, t, "input", role + 6, &v)))
                msp_xplace(in, role + 6, v);
            continue;
        }
        if (kw && !strncmp(role, "kwarg.", 6)) {
            if (!(rc = msp_xtensor(x, r, t, "input", role + 6, &v)))
                msp_xplace(kw, role + 6, v);
            continue;
        }
        if (!backward && !strncmp(role, "parameters.", 11) && role[11]) {
            /* a module record's own parameters: msprobe's "parameters" */
            cJSON *ps = cJSON_GetObjectItemCaseSensitive(rec, "parameters");
            if (!ps && (ps = cJSON_CreateObject()))
                cJSON_AddItemToObject(rec, "parameters", ps);
            if (!(rc = msp_xtensor(x, r, t, "parameters", role + 11, &v)) && ps)
                cJSON_AddItemToObject(ps, role + 11, v);
            else
                cJSON_Delete(v);
            continue;
        }
        int is_out = !strncmp(role, "output.", 7), is_node = !strncmp(role, "grad_fn.", 8);
        if (!is_out && !is_node)
            continue;
        if (backward && map) { /* msprobe's autograd order: output.K is what map names at K */
            long at = 0, k = -1;
            for (const char *p = map; *p && k < 0; at++) {
                size_t len = strcspn(p, ",");
                if (len == strlen(role) && !strncmp(p, role, len))
                    k = at;
                p += len + (p[len] == ',');
            }
            if (k < 0)
                continue;
            snprintf(pos, sizeof pos, "%ld", k);
        } else if (is_out) {
            snprintf(pos, sizeof pos, "%s", role + 7);
        } else {
            continue;
        }
        if (!(rc = msp_xtensor(x, r, t, "output", pos, &v)))
            msp_xplace(out, pos, v);
        else
            cJSON_Delete(v);
    }
    if (backward) {
        if (map && map[0]) { /* a grad the node hands on as None stays a null in its place */
            size_t n = 1;
            for (const char *p = map; *p; p++)
                n += *p == ',';
            if ((size_t)cJSON_GetArraySize(out) < n)
                msp_xset(out, n - 1, cJSON_CreateNull());
        }
        cJSON_AddItemToObject(rec, "input", in);
        cJSON_AddItemToObject(rec, "output", out);
    } else {
        cJSON_AddItemToObject(rec, "input_args", in);
        cJSON_AddItemToObject(rec, "input_kwargs", kw);
        cJSON_AddItemToObject(rec, "output", out);
    }
    cJSON_AddItemToObject(data, r->name, rec);
    if (!rc)
        rc = msp_xconstruct_note(&x->construct, r->name, r->order, parent, order_begin);
    if (stack) { /* "@RECORD": the text of that record */
        const char *text = stack;
        cJSON *hit = NULL;
        if (text[0] == '@') {
            for (cJSON *e = stacks->child; e && !hit; e = e->next)
                for (cJSON *n = e->child->child; n && !hit; n = n->next)
                    if (!strcmp(n->valuestring, text + 1))
                        hit = e;
        } else {
            for (cJSON *e = stacks->child; e && !hit; e = e->next)
                if (!strcmp(e->child->next->valuestring, text))
                    hit = e;
            if (!hit) {
                hit = cJSON_CreateArray();
                cJSON_AddItemToArray(hit, cJSON_CreateArray());
                cJSON_AddItemToArray(hit, cJSON_CreateString(text));
                char key[32];
                snprintf(key, sizeof key, "%d", cJSON_GetArraySize(stacks));
                cJSON_AddItemToObject(stacks, key, hit);
            }
        }
        if (hit)
            cJSON_AddItemToArray(hit->child, cJSON_CreateString(r->name));
    }
    msp_free_strings(keys, na);
    msp_free_strings(vals, na);
    return rc;
}

/* stack.json holds each call site's frames as msprobe writes them:
 * "File F, line N, in FUNC, \n code". */
static void msp_xframes(cJSON *stacks)
{
    for (cJSON *e = stacks->child; e; e = e->next) {
        cJSON *textv = e->child->next;
        cJSON *frames = cJSON_CreateArray();
        char *text = strdup(textv->valuestring), *save = NULL;
        char frame[2048] = "";
        for (char *line = text ? strtok_r(text, "\n", &save) : NULL; line;
             line = strtok_r(NULL, "\n", &save)) {
            if (!strncmp(line, "File ", 5)) {
                if (frame[0])
                    cJSON_AddItemToArray(frames, cJSON_CreateString(frame));
                snprintf(frame, sizeof frame, "%s", line);
            } else {
                while (*line == ' ')
                    line++;
                size_t fl = strlen(frame);
                snprintf(frame + fl, sizeof frame - fl, ", \n %s", line);
            }
        }
        if (frame[0])
            cJSON_AddItemToArray(frames, cJSON_CreateString(frame));
        free(text);
        cJSON_ReplaceItemInArray(e, 1, frames);
    }
}

static msp_err msp_fill_text(FILE *f, const char *shown, const void *ud)
{
    (void)shown;
    fputs(ud, f);
    return MSP_OK;
}

/* name in the rank directory rfd (dir: its path) holding j. */
static msp_err msp_xwrite_json(int rfd, const char *dir, const char *name, cJSON *j)
{
    char *text = cJSON_Print(j);
    char *path = msp_asprintf("%s/%s", dir, name);
    msp_err rc = text && path ? msp_xput(rfd, name, path, msp_fill_text, text)
                              : msp_fail(MSP_ERR_NOMEM, "export: out of memory");
    free(text);
    free(path);
    return rc;
}

static msp_err msp_export_file(const char *in, int64_t step, int64_t rank, const char *out_dir,
                               int npy)
{
    msp_dump_file_t *f = NULL;
    char *dir = NULL, *data_dir = NULL, *step_dir = NULL;
    cJSON *root = NULL, *stacks = NULL;
    msp_xctx_t x = {.data_fd = -1};
    int ofd = -1, sfd = -1, rfd = -1;
    msp_err rc = msp_dump_open(in, &f);
    if (rc)
        return rc;
    size_t pl = strlen(f->path);
    if (pl >= 9 && !strcmp(f->path + pl - 9, "dump.json")) {
        rc = msp_fail(MSP_ERR_USAGE, "export: %s is msprobe's own layout already", f->path);
        goto cleanup;
    }
    if (step < 0)
        step = f->step >= 0 ? f->step : 0;
    if (rank < 0)
        rank = f->rank >= 0 ? f->rank : 0;
    char sname[32], rname[32];
    snprintf(sname, sizeof sname, "step%lld", (long long)step);
    snprintf(rname, sizeof rname, "rank%lld", (long long)rank);
    step_dir = msp_asprintf("%s/%s", out_dir, sname);
    dir = step_dir ? msp_asprintf("%s/%s", step_dir, rname) : NULL;
    data_dir = dir ? msp_asprintf("%s/dump_tensor_data", dir) : NULL;
    if (!dir || !data_dir) {
        rc = msp_fail(MSP_ERR_NOMEM, "export: out of memory");
        goto cleanup;
    }
    x.f = f;
    x.data_dir = data_dir;
    x.npy = npy;
    x.with_data = !strcmp(f->task, "tensor");
    x.md5 = !strcmp(f->task, "md5");
    if ((rc = msp_mkdirs(out_dir)))
        goto cleanup;
    if ((ofd = open(out_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        rc = msp_fail(MSP_ERR_IO, "export: cannot open %s: %s", out_dir, strerror(errno));
        goto cleanup;
    }
    if ((rc = msp_xdir(ofd, sname, step_dir, &sfd)) || (rc = msp_xdir(sfd, rname, dir, &rfd)) ||
        (x.with_data && (rc = msp_xdir(rfd, "dump_tensor_data", data_dir, &x.data_fd))))
        goto cleanup;
    root = cJSON_CreateObject();
    stacks = cJSON_CreateObject();
    cJSON *data = cJSON_CreateObject();
    if (!root || !stacks || !data) {
        cJSON_Delete(data);
        rc = msp_fail(MSP_ERR_NOMEM, "export: out of memory");
        goto cleanup;
    }
    cJSON_AddStringToObject(root, "task", x.with_data ? "tensor" : "statistics");
    const char *level = !strcmp(f->dump_mode, "module") ? "L0"
                        : !strcmp(f->dump_mode, "mix")  ? "mix"
                                                        : "L1";
    cJSON_AddStringToObject(root, "level", level);
    cJSON_AddStringToObject(root, "framework", "pytorch");
    char *abs = x.with_data ? realpath(data_dir, NULL) : NULL;
    if (abs)
        cJSON_AddStringToObject(root, "dump_data_dir", abs);
    else
        cJSON_AddNullToObject(root, "dump_data_dir");
    free(abs);
    cJSON_AddItemToObject(root, "data", data);
    /* optimizer steps have no place in msprobe's layout (its dump records
     * the calls a step makes; ours keeps the step as one record) */
    for (size_t i = 0; i < f->n_records && !rc; i++)
        if (strncmp(f->records[i].name, "Optimizer.", 10) != 0)
            rc = msp_xrecord(&x, &f->records[i], data, stacks);
    if (rc)
        goto cleanup;
    msp_xframes(stacks);
    cJSON *construct = NULL;
    if (!(rc = msp_xconstruct_build(&x.construct, level, &construct)) &&
        !(rc = msp_xwrite_json(rfd, dir, "dump.json", root)) &&
        !(rc = msp_xwrite_json(rfd, dir, "stack.json", stacks)))
        rc = msp_xwrite_json(rfd, dir, "construct.json", construct);
    cJSON_Delete(construct);
cleanup:
    cJSON_Delete(root);
    cJSON_Delete(stacks);
    msp_xconstruct_free(&x.construct);
    free(x.buf);
    free(dir);
    free(data_dir);
    free(step_dir);
    const int fds[] = {ofd, sfd, rfd, x.data_fd};
    for (size_t k = 0; k < sizeof fds / sizeof fds[0]; k++)
        if (fds[k] >= 0)
            close(fds[k]);
    msp_dump_close(f);
    return rc;
}

msp_err msp_export_msprobe(const char *path, const char *out_dir, int npy, size_t *n_files)
{
    msp_dump_tree_t t;
    *n_files = 0;
    msp_err rc = msp_dump_tree_scan(path, 0, &t);
    if (rc)
        return rc;
    for (size_t i = 0; i < t.n_files && !rc; i++) {
        if (t.files[i].error) {
            rc = msp_fail(MSP_ERR_FORMAT, "export: %s: %s", t.files[i].path, t.files[i].error);
            break;
        }
        if (t.files[i].writer) /* rank{R}-{K}: a second writer of rank R */
            continue;
        if (!(rc = msp_export_file(t.files[i].path, t.files[i].step, t.files[i].rank, out_dir,
                                   npy)))
            (*n_files)++;
    }
    msp_dump_tree_free(&t);
    return rc;
}
