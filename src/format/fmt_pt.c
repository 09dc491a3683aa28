/* torch.save of one plain tensor, read without Python: the file is a zip
 * holding <name>/data.pkl (pickle protocol 2) and <name>/data/<key> (the
 * storage's raw little-endian bytes). data.pkl is walked by a tiny
 * interpreter that knows only the opcodes torch writes for
 *   torch._utils._rebuild_tensor_v2(persistent storage, offset, size, stride,
 *                                   requires_grad, OrderedDict())
 * with a persistent id ('storage', torch.<Type>Storage, key, location, numel).
 * No object is ever constructed from the pickle and no code named in it runs:
 * a GLOBAL is only a name compared against those two callables, and anything
 * else (another callable, another opcode) is refused naming the file. */
#include "fmt_foreign.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

/* The most a broadcast (stride 0) view is expanded to. */
#define MSP_PT_VIEW_MAX ((uint64_t)1 << 30)

enum msp_pv_kind {
    PV_NONE,
    PV_BOOL,
    PV_INT,
    PV_STR,
    PV_GLOBAL,
    PV_TUPLE,
    PV_DICT,
    PV_PERSID,
    PV_TENSOR,
    PV_MARK
};

typedef struct msp_pv {
    enum msp_pv_kind kind;
    int64_t i;             /* INT, BOOL */
    char *s;               /* STR, GLOBAL ("module name") */
    struct msp_pv **items; /* TUPLE */
    size_t n;
    struct msp_pv *next_alloc; /* every value, for one free at the end */
} msp_pv_t;

typedef struct msp_pk {
    const char *path;
    msp_pv_t *all;
    msp_pv_t **stack;
    size_t sp, cap;
    msp_pv_t **memo;
    size_t n_memo;
} msp_pk_t;

static msp_pv_t *pk_new(msp_pk_t *k, enum msp_pv_kind kind)
{
    msp_pv_t *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->kind = kind;
    v->next_alloc = k->all;
    k->all = v;
    return v;
}

static int pk_push(msp_pk_t *k, msp_pv_t *v)
{
    if (!v)
        return -1;
    if (k->sp >= 4096) /* a pickle nested deeper is not a tensor's */
        return -1;
    msp_pv_t **ns = msp_grow(k->stack, &k->cap, k->sp, sizeof *ns, 32);
    if (!ns)
        return -1;
    k->stack = ns;
    k->stack[k->sp++] = v;
    return 0;
}

static msp_pv_t *pk_pop(msp_pk_t *k)
{
    return k->sp ? k->stack[--k->sp] : NULL;
}

/* Pops n values (or back to the MARK when n < 0) into a new tuple. */
static msp_pv_t *pk_tuple(msp_pk_t *k, long n)
{
    size_t base;
    if (n < 0) {
        base = k->sp;
        while (base > 0 && k->stack[base - 1]->kind != PV_MARK)
            base--;
        if (base == 0)
            return NULL;
    } else {
        if ((size_t)n > k->sp)
            return NULL;
        base = k->sp - (size_t)n;
    }
    msp_pv_t *t = pk_new(k, PV_TUPLE);
    if (!t)
        return NULL;
    t->n = k->sp - base;
    t->items = calloc(t->n ? t->n : 1, sizeof *t->items);
    if (!t->items)
        return NULL;
    if (t->n) /* the stack is still NULL when the pickle starts with ')' */
        memcpy(t->items, k->stack + base, t->n * sizeof *t->items);
    k->sp = n < 0 ? base - 1 : base;
    return t;
}

static void pk_free(msp_pk_t *k)
{
    for (msp_pv_t *v = k->all, *nx; v; v = nx) {
        nx = v->next_alloc;
        free(v->s);
        free(v->items);
        free(v);
    }
    free(k->stack);
    free(k->memo);
}

static const struct {
    const char *storage;
    msp_dtype_t dt;
} msp_pt_storages[] = {
    {"torch FloatStorage", MSP_DTYPE_FLOAT32},     {"torch HalfStorage", MSP_DTYPE_FLOAT16},
    {"torch BFloat16Storage", MSP_DTYPE_BFLOAT16}, {"torch DoubleStorage", MSP_DTYPE_FLOAT64},
    {"torch CharStorage", MSP_DTYPE_INT8},         {"torch ShortStorage", MSP_DTYPE_INT16},
    {"torch IntStorage", MSP_DTYPE_INT32},         {"torch LongStorage", MSP_DTYPE_INT64},
    {"torch ByteStorage", MSP_DTYPE_UINT8},        {"torch BoolStorage", MSP_DTYPE_BOOL}};

/* What the pickle describes: storage key and type, offset, size, stride. */
typedef struct msp_pt_desc {
    char key[64];
    msp_dtype_t dtype;
    int64_t storage_numel, offset;
    int ndim;
    int64_t size[MSP_MAX_NDIM], stride[MSP_MAX_NDIM];
} msp_pt_desc_t;

static int pk_ints(const msp_pv_t *t, int64_t *out, int *n)
{
    if (!t || t->kind != PV_TUPLE || t->n > MSP_MAX_NDIM)
        return -1;
    for (size_t i = 0; i < t->n; i++) {
        if (t->items[i]->kind != PV_INT)
            return -1;
        out[i] = t->items[i]->i;
    }
    *n = (int)t->n;
    return 0;
}

/* REDUCE of _rebuild_tensor_v2: check the argument tuple, fill d. */
static msp_err pk_rebuild(msp_pk_t *k, const msp_pv_t *args, msp_pt_desc_t *d)
{
    if (args->kind != PV_TUPLE || args->n < 5 || args->items[0]->kind != PV_PERSID ||
        args->items[1]->kind != PV_INT)
        return msp_fail(MSP_ERR_UNSUPPORTED,
                        "file %s: _rebuild_tensor_v2 with arguments "
                        "msprobe-c does not know",
                        k->path);
    const msp_pv_t *pid = args->items[0]->items[0];
    /* ('storage', torch.XStorage, key, location, numel) */
    if (pid->kind != PV_TUPLE || pid->n != 5 || pid->items[0]->kind != PV_STR ||
        strcmp(pid->items[0]->s, "storage") != 0 || pid->items[1]->kind != PV_GLOBAL ||
        pid->items[2]->kind != PV_STR || pid->items[4]->kind != PV_INT ||
        strlen(pid->items[2]->s) >= sizeof d->key)
        return msp_fail(MSP_ERR_UNSUPPORTED,
                        "file %s: a persistent id that is not a torch "
                        "storage",
                        k->path);
    d->dtype = MSP_DTYPE_INVALID;
    for (size_t i = 0; i < sizeof msp_pt_storages / sizeof msp_pt_storages[0]; i++)
        if (strcmp(pid->items[1]->s, msp_pt_storages[i].storage) == 0)
            d->dtype = msp_pt_storages[i].dt;
    if (!d->dtype) {
        char shown[200];
        msp_fg_clean(shown, sizeof shown, pid->items[1]->s);
        return msp_fail(MSP_ERR_UNSUPPORTED, "file %s: storage type %s is not supported", k->path,
                        shown);
    }
    strcpy(d->key, pid->items[2]->s);
    d->storage_numel = pid->items[4]->i;
    d->offset = args->items[1]->i;
    int ns = 0;
    if (pk_ints(args->items[2], d->size, &d->ndim) || pk_ints(args->items[3], d->stride, &ns) ||
        ns != d->ndim)
        return msp_fail(MSP_ERR_FORMAT,
                        "file %s: tensor size and stride are not integer tuples "
                        "of one length",
                        k->path);
    return MSP_OK;
}

static int64_t pk_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n; i-- > 0;)
        v = v << 8 | p[i];
    if (n < 8 && (v >> (8 * n - 1)) & 1)
        v |= ~UINT64_C(0) << (8 * n); /* sign-extend */
    return (int64_t)v;
}

/* BINPUT: the top of the stack into memo slot n, the memo grown as needed.
 * 0; -1: malformed (an empty stack, a slot past 4096); -2: out of memory. */
static int pk_memo_put(msp_pk_t *k, size_t n)
{
    if (!k->sp || n > 4096)
        return -1;
    if (n >= k->n_memo) {
        msp_pv_t **nm = realloc(k->memo, (n + 1) * sizeof *nm);
        if (!nm)
            return -2;
        memset(nm + k->n_memo, 0, (n + 1 - k->n_memo) * sizeof *nm);
        k->memo = nm;
        k->n_memo = n + 1;
    }
    k->memo[n] = k->stack[k->sp - 1];
    return 0;
}

/* STOP: the pickle must have left one plain tensor. */
static msp_err pk_stop(const msp_pk_t *k)
{
    if (k->sp == 1 && k->stack[0]->kind == PV_TENSOR)
        return MSP_OK;
    return msp_fail(MSP_ERR_UNSUPPORTED,
                    "file %s: holds something other than one tensor (a dict, a list, a "
                    "model?); only a plain tensor saved with torch.save is read",
                    k->path);
}

enum { PK_OK = 0, PK_TRUNCATED = 1, PK_NOMEM = 2 };

/* The text opcodes at *p (op already read): GLOBAL's "module\nname\n" as
 * one PV_GLOBAL "module name", BINUNICODE's and SHORT_BINUNICODE's string
 * as a PV_STR, in *out; *p moves past them. PK_TRUNCATED when they run past
 * end, PK_NOMEM when out of memory or longer than the tensor's pickle has. */
static int pk_text(msp_pk_t *k, unsigned char op, const unsigned char **pp,
                   const unsigned char *end, msp_pv_t **out)
{
    const unsigned char *p = *pp;
    msp_pv_t *v;
    if (op == 'c') {
        const unsigned char *nl1 = memchr(p, '\n', (size_t)(end - p));
        const unsigned char *nl2 = nl1 ? memchr(nl1 + 1, '\n', (size_t)(end - nl1 - 1)) : NULL;
        if (!nl2 || nl2 - p > 200)
            return PK_TRUNCATED;
        if (!(v = pk_new(k, PV_GLOBAL)) || !(v->s = malloc((size_t)(nl2 - p) + 1)))
            return PK_NOMEM;
        memcpy(v->s, p, (size_t)(nl2 - p));
        v->s[nl1 - p] = ' ';
        v->s[nl2 - p] = '\0';
        *pp = nl2 + 1;
        *out = v;
        return PK_OK;
    }
    size_t w = op == 'X' ? 4 : 1;
    if ((size_t)(end - p) < w)
        return PK_TRUNCATED;
    size_t n = op == 'X' ? (size_t)(uint32_t)pk_le(p, 4) : *p;
    p += w;
    if ((size_t)(end - p) < n)
        return PK_TRUNCATED;
    if (n > 4096 || !(v = pk_new(k, PV_STR)) || !(v->s = malloc(n + 1)))
        return PK_NOMEM;
    memcpy(v->s, p, n);
    v->s[n] = '\0';
    *pp = p + n;
    *out = v;
    return PK_OK;
}

/* REDUCE of the callable a on the tuple b: only the two callables torch
 * uses, and never called: an empty OrderedDict, or the one tensor (d filled,
 * *have_tensor set). *out: what goes on the stack (NULL when out of memory:
 * pushing it fails). */
static msp_err pk_reduce(msp_pk_t *k, const msp_pv_t *a, const msp_pv_t *b, msp_pt_desc_t *d,
                         int *have_tensor, msp_pv_t **out)
{
    *out = NULL;
    if (strcmp(a->s, "collections OrderedDict") == 0 && b->n == 0) {
        *out = pk_new(k, PV_DICT);
    } else if (strcmp(a->s, "torch._utils _rebuild_tensor_v2") == 0 && !*have_tensor) {
        msp_err rc = pk_rebuild(k, b, d);
        if (rc)
            return rc;
        *have_tensor = 1;
        *out = pk_new(k, PV_TENSOR);
    } else {
        char shown[200];
        msp_fg_clean(shown, sizeof shown, a->s);
        return msp_fail(MSP_ERR_UNSUPPORTED,
                        "file %s: the pickle calls %s; only a plain "
                        "tensor saved with torch.save is read (nothing in it is run)",
                        k->path, shown);
    }
    return MSP_OK;
}

static msp_err pk_run(msp_pk_t *k, const unsigned char *p, size_t len, msp_pt_desc_t *d)
{
#define NEED(n)                                                                                    \
    do {                                                                                           \
        if ((size_t)(end - p) < (size_t)(n))                                                       \
            goto truncated;                                                                        \
    } while (0)
#define PUSH(v)                                                                                    \
    do {                                                                                           \
        if (pk_push(k, (v)))                                                                       \
            goto nomem;                                                                            \
    } while (0)
    const unsigned char *end = p + len;
    int have_tensor = 0, put;
    msp_err rc;
    while (p < end) {
        unsigned char op = *p++;
        msp_pv_t *v, *a, *b;
        size_t n;
        switch (op) {
        case 0x80: /* PROTO */
            NEED(1);
            if (*p > 5)
                goto unsupported;
            p++;
            break;
        case 'c':  /* GLOBAL module\nname\n */
        case 'X':  /* BINUNICODE */
        case 0x8c: /* SHORT_BINUNICODE */
            put = pk_text(k, op, &p, end, &v);
            if (put == PK_TRUNCATED)
                goto truncated;
            if (put == PK_NOMEM)
                goto nomem;
            PUSH(v);
            break;
        case 'K':
        case 'M':
        case 'J': /* BININT1, BININT2, BININT */
            n = op == 'K' ? 1 : op == 'M' ? 2 : 4;
            NEED(n);
            if (!(v = pk_new(k, PV_INT)))
                goto nomem;
            v->i = op == 'J' ? pk_le(p, 4)
                             : (int64_t)(uint32_t)(op == 'K' ? p[0] : p[0] | p[1] << 8);
            p += n;
            PUSH(v);
            break;
        case 0x8a: /* LONG1 */
            NEED(1);
            n = *p++;
            NEED(n);
            if (n > 8 || !(v = pk_new(k, PV_INT)))
                goto unsupported;
            v->i = n ? pk_le(p, (int)n) : 0;
            p += n;
            PUSH(v);
            break;
        case 0x88:
        case 0x89: /* NEWTRUE, NEWFALSE */
            if (!(v = pk_new(k, PV_BOOL)))
                goto nomem;
            v->i = op == 0x88;
            PUSH(v);
            break;
        case 'N':
            PUSH(pk_new(k, PV_NONE));
            break;
        case '(':
            PUSH(pk_new(k, PV_MARK));
            break;
        case ')':
            PUSH(pk_tuple(k, 0));
            break;
        case 't':
        case 0x85:
        case 0x86:
        case 0x87: /* TUPLE, TUPLE1..3 */
            v = pk_tuple(k, op == 't' ? -1 : op - 0x84);
            if (!v)
                goto malformed;
            PUSH(v);
            break;
        case '}':
            PUSH(pk_new(k, PV_DICT));
            break;
        case 'q':
        case 'r': /* BINPUT, LONG_BINPUT */
            NEED(op == 'q' ? 1 : 4);
            n = op == 'q' ? *p : (size_t)(uint32_t)pk_le(p, 4);
            p += op == 'q' ? 1 : 4;
            put = pk_memo_put(k, n);
            if (put == -1)
                goto malformed;
            if (put == -2)
                goto nomem;
            break;
        case 'h':
        case 'j': /* BINGET, LONG_BINGET */
            NEED(op == 'h' ? 1 : 4);
            n = op == 'h' ? *p : (size_t)(uint32_t)pk_le(p, 4);
            p += op == 'h' ? 1 : 4;
            if (n >= k->n_memo || !k->memo[n])
                goto malformed;
            PUSH(k->memo[n]);
            break;
        case 'Q': /* BINPERSID */
            a = pk_pop(k);
            if (!a || !(v = pk_new(k, PV_PERSID)) || !(v->items = calloc(1, sizeof *v->items)))
                goto malformed;
            v->items[0] = a;
            v->n = 1;
            PUSH(v);
            break;
        case 'R': /* REDUCE: only the two callables torch uses, never called */
            b = pk_pop(k);
            a = pk_pop(k);
            if (!a || !b || a->kind != PV_GLOBAL || b->kind != PV_TUPLE)
                goto malformed;
            if ((rc = pk_reduce(k, a, b, d, &have_tensor, &v)) != MSP_OK)
                return rc;
            PUSH(v);
            break;
        case '.': /* STOP */
            return pk_stop(k);
        default:
            goto unsupported;
        }
        if (0) {
        unsupported:
            return msp_fail(MSP_ERR_UNSUPPORTED,
                            "file %s: pickle opcode 0x%02x at byte %zu is "
                            "outside what torch.save writes for a plain tensor",
                            k->path, op, (size_t)(p - 1 - (end - len)));
        }
    }
truncated:
    return msp_fail(MSP_ERR_FORMAT, "file %s: data.pkl ends early (truncated?)", k->path);
malformed:
    return msp_fail(MSP_ERR_FORMAT, "file %s: malformed data.pkl", k->path);
nomem:
    return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory (or a pickle too large)", k->path);
#undef NEED
#undef PUSH
}

/* Member idx of z (of a file of file_size bytes) read whole, if at most max
 * bytes. The sizes in the zip directory are the file's word: a member may
 * not declare more than its compressed bytes, which lie in the file, can
 * expand to (stored, as torch writes: the same; deflate: 1032:1 at most),
 * so a few flipped bits cannot make us allocate gigabytes. */
static msp_err pt_read_member(zip_t *z, zip_int64_t idx, size_t max, uint64_t file_size,
                              unsigned char **out, size_t *len, const char *path)
{
    zip_stat_t st;
    *out = NULL;
    const zip_uint64_t need = ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD;
    if (zip_stat_index(z, (zip_uint64_t)idx, 0, &st) != 0 || (st.valid & need) != need)
        return msp_fail(MSP_ERR_FORMAT, "file %s: unreadable zip member", path);
    char shown[200];
    msp_fg_clean(shown, sizeof shown, st.valid & ZIP_STAT_NAME ? st.name : "?");
    if (st.size > max)
        return msp_fail(MSP_ERR_LIMIT, "file %s: zip member %s is larger than expected", path,
                        shown);
    if (st.comp_size > file_size)
        return msp_fail(MSP_ERR_FORMAT,
                        "file %s: zip member %s declares %llu compressed bytes "
                        "in a file of %llu (a damaged zip?)",
                        path, shown, (unsigned long long)st.comp_size,
                        (unsigned long long)file_size);
    if (st.size > (st.comp_method == ZIP_CM_STORE ? st.comp_size : st.comp_size * 1032 + 64))
        return msp_fail(MSP_ERR_FORMAT,
                        "file %s: zip member %s declares %llu bytes, more "
                        "than its %llu compressed bytes can hold (a damaged zip?)",
                        path, shown, (unsigned long long)st.size, (unsigned long long)st.comp_size);
    unsigned char *b = malloc(st.size ? st.size : 1);
    zip_file_t *zf = b ? zip_fopen_index(z, (zip_uint64_t)idx, 0) : NULL;
    zip_int64_t got = zf ? zip_fread(zf, b, st.size) : -1;
    if (zf)
        zip_fclose(zf);
    if (got < 0 || (zip_uint64_t)got != st.size) {
        free(b);
        return msp_fail(b ? MSP_ERR_FORMAT : MSP_ERR_NOMEM, "file %s: cannot read zip member %s",
                        path, shown);
    }
    *out = b;
    *len = (size_t)st.size;
    return MSP_OK;
}

msp_err msp_pt_load(const char *path, msp_raw_tensor_t *out)
{
    memset(out, 0, sizeof *out);
    int fd;
    msp_err rc = msp_foreign_open(path, &fd);
    return rc ? rc : msp_pt_load_fd(fd, path, out);
}

msp_err msp_pt_load_fd(int fd, const char *path, msp_raw_tensor_t *out)
{
    memset(out, 0, sizeof *out);
    int zerr = 0;
    msp_err rc = MSP_OK;
    unsigned char *pkl = NULL, *store = NULL;
    size_t pkl_len = 0, store_len = 0;
    msp_pk_t k = {.path = path};
    msp_pt_desc_t d;
    memset(&d, 0, sizeof d);
    struct stat fst;
    uint64_t file_size = fstat(fd, &fst) == 0 ? (uint64_t)fst.st_size : 0;
    zip_t *z = zip_fdopen(fd, ZIP_RDONLY, &zerr); /* owns fd once open */
    if (!z) {
        close(fd);
        return msp_fail(MSP_ERR_FORMAT,
                        "file %s: not a torch.save zip file (libzip error %d); "
                        "the legacy non-zip format is not supported",
                        path, zerr);
    }
    /* <name>/data.pkl: <name> is whatever the saving file was called */
    zip_int64_t pk_idx = -1, n = zip_get_num_entries(z, 0);
    char prefix[512] = "";
    for (zip_int64_t i = 0; i < n; i++) {
        const char *nm = zip_get_name(z, (zip_uint64_t)i, 0);
        size_t l = nm ? strlen(nm) : 0;
        if (l >= 9 && strcmp(nm + l - 9, "/data.pkl") == 0 && l - 8 < sizeof prefix) {
            pk_idx = i;
            memcpy(prefix, nm, l - 8);
            prefix[l - 8] = '\0';
        }
        if (nm && l >= 10 && strcmp(nm + l - 10, "/byteorder") == 0) {
            /* anything but exactly "little" (an unreadable or over-long
             * member included) may be big-endian data: refused, never read
             * as little-endian */
            unsigned char *bo = NULL;
            size_t bl = 0;
            if (pt_read_member(z, i, 16, file_size, &bo, &bl, path) != MSP_OK ||
                !(bl == 6 && memcmp(bo, "little", 6) == 0)) {
                free(bo);
                rc = msp_fail(MSP_ERR_UNSUPPORTED,
                              "file %s: its byteorder member is not "
                              "\"little\": big-endian or unknown storage is not supported",
                              path);
                goto cleanup;
            }
            free(bo);
        }
    }
    if (pk_idx < 0) {
        rc = msp_fail(MSP_ERR_FORMAT,
                      "file %s: zip without <name>/data.pkl: not a torch.save "
                      "file",
                      path);
        goto cleanup;
    }
    if ((rc = pt_read_member(z, pk_idx, 1u << 20, file_size, &pkl, &pkl_len, path)) ||
        (rc = pk_run(&k, pkl, pkl_len, &d)))
        goto cleanup;
    char member[600];
    snprintf(member, sizeof member, "%sdata/%s", prefix, d.key);
    zip_int64_t st_idx = zip_name_locate(z, member, 0);
    if (st_idx < 0) {
        rc = msp_fail(MSP_ERR_FORMAT, "file %s: storage member %s is missing", path, member);
        goto cleanup;
    }
    size_t es = msp_dtype_size(d.dtype);
    if ((rc = pt_read_member(z, st_idx, (size_t)1 << 40, file_size, &store, &store_len, path)))
        goto cleanup;
    /* Every element the size/stride view reaches must lie in the storage.
     * The pickle's integers are anything a file says: no product or sum of
     * them may overflow on the way. */
    int64_t numel = 1, last = d.offset;
    int past = d.offset < 0;
    for (int i = 0; i < d.ndim && !past; i++) {
        if (d.size[i] < 0 || d.stride[i] < 0) {
            rc = msp_fail(MSP_ERR_UNSUPPORTED, "file %s: negative size or stride", path);
            goto cleanup;
        }
        if (d.size[i] && numel > INT64_MAX / d.size[i]) {
            rc = msp_fail(MSP_ERR_FORMAT, "file %s: tensor size with more than 2^63 elements",
                          path);
            goto cleanup;
        }
        numel *= d.size[i];
        if (d.size[i] > 1 && d.stride[i] > (INT64_MAX - last) / (d.size[i] - 1))
            past = 1;
        else if (d.size[i] > 1)
            last += (d.size[i] - 1) * d.stride[i];
    }
    if (past || (numel && (uint64_t)last >= store_len / es)) {
        rc = msp_fail(MSP_ERR_FORMAT,
                      "file %s: the tensor view reaches past its storage of %zu "
                      "bytes",
                      path, store_len);
        goto cleanup;
    }
    /* A view holds at most its storage's elements unless strides overlap
     * (a broadcast, stride 0), which is expanded here only up to a bound. */
    if ((uint64_t)numel > store_len / es && (uint64_t)numel > MSP_PT_VIEW_MAX / es) {
        rc = msp_fail(MSP_ERR_LIMIT,
                      "file %s: a broadcast view of %lld elements expands its "
                      "%zu-byte storage past the %llu bytes msprobe-c reads",
                      path, (long long)numel, store_len, (unsigned long long)MSP_PT_VIEW_MAX);
        goto cleanup;
    }
    out->dtype = d.dtype;
    out->ndim = d.ndim;
    memcpy(out->shape, d.size, sizeof d.size);
    out->numel = numel;
    if (!(out->data = malloc(numel ? (size_t)numel * es : 1))) {
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", path);
        goto cleanup;
    }
    /* Gather the view in C order (a transposed or sliced save keeps its
     * storage's layout). */
    int contiguous = 1;
    int64_t expect = 1;
    for (int i = d.ndim; numel && i-- > 0;) { /* empty: other sizes may overflow expect */
        if (d.size[i] != 1 && d.stride[i] != expect)
            contiguous = 0;
        expect *= d.size[i] ? d.size[i] : 1;
    }
    int64_t idx[MSP_MAX_NDIM] = {0};
    unsigned char *dst = out->data;
    if (contiguous && numel)
        memcpy(dst, store + (size_t)d.offset * es, (size_t)numel * es);
    for (int64_t e = 0; !contiguous && e < numel; e++) {
        int64_t off = d.offset;
        for (int i = 0; i < d.ndim; i++)
            off += idx[i] * d.stride[i];
        memcpy(dst + (size_t)e * es, store + (size_t)off * es, es);
        for (int i = d.ndim; i-- > 0;) {
            if (++idx[i] < d.size[i])
                break;
            idx[i] = 0;
        }
    }
cleanup:
    pk_free(&k);
    free(pkl);
    free(store);
    zip_discard(z);
    if (rc)
        msp_raw_free(out);
    return rc;
}
