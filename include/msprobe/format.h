/* The msprobe dump file (HDF5), one per step and rank: dump_path/step{N}/rank{R}/dump.h5.
 * The full layout is documented in man/msprobe-dump.5 (msprobe-dump(5)); in short:
 *
 *   /                      attrs format="msprobe-dump", format_version=2 (3: a statistics
 *                          dump, below), framework, framework_version, task, dump_mode,
 *                          step, rank, world_size
 *   /<record>              a group per record that holds tensor data, e.g.
 *                          "Functional.conv2d.0.forward", "Module.layer1.0.conv1.Conv2d.forward.0";
 *                          attr order (int64)
 *   /<record>/<role>       one dataset per tensor: "input.0", "kwarg.weight", "output.0";
 *                          native element type (bf16 = HDF5 float, 8 exp / 7 mantissa bits),
 *                          contiguous, uncompressed; statistics-only tensors have a null
 *                          dataspace. attrs dtype (torch name), shape (int64[ndim]), max, min,
 *                          mean, norm, nan_count, inf_count, crc32, device, requires_grad
 *                          (bool data and requires_grad: h5py's bool enum over int8)
 *   /index                 compound table, one row per tensor; columns record, role,
 *                          order, dtype, ndim, shape (vlen int64), has_data, max, min,
 *                          mean, norm, nan_count, inf_count, crc32, offset, nbytes,
 *                          device, requires_grad, producer (a record without tensors:
 *                          one row with an empty role)
 *   /attrs                 compound table, one row per record attribute (a non-tensor
 *                          argument named like its role, stack, ...): record, key, value,
 *                          all UTF-8 strings. Version 1 files kept these as string
 *                          attributes of the record groups; readers take either.
 *   /defaults              compound table like /attrs, one row per (API, parameter) for
 *                          the APIs recorded in the file: record = the API
 *                          ("Functional.gelu"), key "#K" = the K-th positional
 *                          parameter's name, key NAME = the repr of NAME's default.
 *                          Absent from older files.
 *
 * A statistics dump (task "statistics", format_version 3) has no groups and
 * keeps its catalogue in numbered, deflated tables (msprobe-dump(5),
 * STATISTICS DUMPS; about 80-200 bytes a record):
 *   /strings               uint8: every string of the file once, each NUL-ended;
 *                          string k = the k-th piece split at NULs (0 = "")
 *   /records               compound (name: string number, order int64), a row a record
 *   /stats                 compound, a row a tensor: record, role, dtype (string
 *                          numbers), ndim, shape (int64[W], W = widest ndim), values
 *                          (its /values row), device (string number), requires_grad,
 *                          producer (string number)
 *   /values                compound, a row a distinct set of statistics: max, min,
 *                          mean, norm, nan_count, inf_count, crc32
 *   /attrs, /defaults      as above with uint32 string numbers for record, key, value
 *   root string attrs      fixed-length UTF-8 (no 4 KiB global heap)
 * Tensors with data in such a file (the shim writes none) keep the groups and
 * /index of a tensor dump.
 *
 * This module is the only code that calls H5*. All functions here serialise on
 * one internal mutex, so they may be called from any thread; one writer or one
 * open dump file is used by one thread at a time, except msp_dump_read_tensor,
 * which may run on several threads at once for the same file. HDF5's own error
 * printing is turned off on first use: errors come back as msp_err + detail.
 */
#ifndef MSPROBE_FORMAT_H
#define MSPROBE_FORMAT_H

#include "msprobe/common.h"

#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MSP_FORMAT_NAME "msprobe-dump"
/* The newest format_version this msprobe reads: 4. A tensor dump is written
 * as version 2, or 4 when its small tensors are packed (/packed,
 * msp_dump_meta_t.pack_below); a statistics dump as 3, the compact layout. */
#define MSP_FORMAT_VERSION 4
#define MSP_TENSOR_FORMAT_VERSION 2
#define MSP_STATS_FORMAT_VERSION 3
#define MSP_PACKED_FORMAT_VERSION 4
/* The largest pack_below a writer takes: bigger tensors keep their datasets. */
#define MSP_PACK_BELOW_MAX ((int64_t)1 << 20)
#define MSP_MAX_NDIM 32

typedef enum msp_dtype {
    MSP_DTYPE_INVALID = 0,
    MSP_DTYPE_FLOAT32,
    MSP_DTYPE_FLOAT16,
    MSP_DTYPE_BFLOAT16,
    MSP_DTYPE_FLOAT64,
    MSP_DTYPE_INT8,
    MSP_DTYPE_INT16,
    MSP_DTYPE_INT32,
    MSP_DTYPE_INT64,
    MSP_DTYPE_UINT8,
    MSP_DTYPE_BOOL,
    MSP_DTYPE_COUNT_
} msp_dtype_t;

/* Torch name ("torch.float32", "torch.bfloat16", "torch.bool"); "unknown" for invalid. */
const char *msp_dtype_name(msp_dtype_t dt);
/* Accepts "torch.float32" or "float32" (also "float", "half", "double", "long", "int"...). */
msp_dtype_t msp_dtype_from_name(const char *name);
/* Bytes per element; 0 for invalid. */
size_t msp_dtype_size(msp_dtype_t dt);
/* 1 for the floating types (float16/32/64, bfloat16), 0 otherwise. */
int msp_dtype_is_float(msp_dtype_t dt);

/* The one decoder of the 16-bit floats, exact, inline so hot loops (compare's
 * kernel, statistics) vectorise it. Half: branch-free and without float
 * denormal arithmetic (slow on x86): a subnormal half is em * 2^-24 exactly. */
static inline float msp_bits_to_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float msp_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t normal = (em << 13) + ((uint32_t)(127 - 15) << 23);
    float subf = (float)em * 0x1p-24f;
    uint32_t sub;
    memcpy(&sub, &subf, sizeof sub);
    uint32_t special = (em << 13) | 0x7f800000u;
    uint32_t r = em < 0x400u ? sub : (em >= 0x7c00u ? special : normal);
    return msp_bits_to_float(r | sign);
}

static inline float msp_bf16_to_float(uint16_t b)
{
    return msp_bits_to_float((uint32_t)b << 16);
}

uint16_t msp_double_to_bf16(double v); /* round to nearest even */
uint16_t msp_double_to_half(double v); /* round to nearest even */

/* "[2, 3, 4]" ("[]" for a scalar) into buf; truncated to size. MSP_SHAPE_STR_MAX
 * holds any shape. */
#define MSP_SHAPE_STR_MAX (MSP_MAX_NDIM * 22 + 4)
void msp_shape_str(const int64_t *shape, int ndim, char *buf, size_t size);

/* The one role order, used by the reader and by compare's row pairing:
 * input.*, kwarg.*, output.*, anything else; digit runs compare by value
 * (input.2 < input.10); names equal but for leading zeros ("input.01",
 * "input.1") are still different roles, ordered by strcmp, so they never pair. */
int msp_role_cmp(const char *a, const char *b);
/* Natural order alone: 0 for "a.01" vs "a.1". */
int msp_natural_cmp(const char *a, const char *b);

/* Per-tensor statistics, computed over all elements as torch does: a NaN makes
 * max/min/mean/norm NaN. Empty tensor: max=min=mean=NaN, norm=0. bool as 0/1.
 * norm is the L2 norm. crc32 is zlib's CRC-32 of the raw native bytes. */
typedef struct msp_stats {
    double max, min, mean, norm;
    int64_t nan_count, inf_count;
    uint32_t crc32;
} msp_stats_t;

void msp_stats_compute(msp_dtype_t dt, const void *data, size_t n, msp_stats_t *out);
uint32_t msp_crc32(uint32_t crc, const void *buf, size_t len);

/* ---- writer ----------------------------------------------------------- */

/* NULL strings are written as framework "pytorch", framework_version "",
 * task "tensor", dump_mode "api". */
typedef struct msp_dump_meta {
    const char *framework;         /* "pytorch" */
    const char *framework_version; /* torch.__version__ */
    const char *task;              /* "tensor" | "statistics" */
    const char *dump_mode;         /* "api" | "module" | "mix" */
    int64_t step, rank, world_size;
    /* A tensor dump's data of 1 to pack_below - 1 bytes goes into the
     * segments of /packed instead of a dataset each (format_version 4,
     * msprobe-dump(5) PACKED TENSORS); 0: every tensor its dataset. At most
     * MSP_PACK_BELOW_MAX; statistics dumps ignore it. */
    int64_t pack_below;
} msp_dump_meta_t;

typedef struct msp_writer msp_writer_t;

typedef struct msp_tensor_in {
    const char *role; /* "input.0", "kwarg.weight", "output.0" */
    msp_dtype_t dtype;
    int ndim;                 /* 0..MSP_MAX_NDIM; 0 = scalar */
    const int64_t *shape;     /* ndim entries; a 0 entry makes an empty tensor */
    const void *data;         /* C-contiguous native elements, or NULL: statistics only */
    const msp_stats_t *stats; /* NULL: computed here from data (then data must be set) */
    const char *device;       /* "cpu", "cuda:0"; NULL = "cpu" */
    int requires_grad;
    /* Forward inputs: the earlier record of this file whose output this tensor
     * is, "RECORD/ROLE" (e.g. "Functional.conv2d.0.forward/output.0"); NULL or
     * "" = unknown. Written as the dataset attribute "producer" and the /index
     * column "producer". */
    const char *producer;
} msp_tensor_in_t;

/* Create (truncate) path; parent directories must exist. Tensor data goes to
 * disk with one H5Dwrite per tensor, unconverted; nothing is fsync'ed unless
 * msp_writer_set_durable is on. */
msp_err msp_writer_open(const char *path, const msp_dump_meta_t *meta, msp_writer_t **out);
/* Start a record; tensors and attrs that follow belong to it (a group is
 * made only for tensor data). A record name that already exists in the
 * file, or a table's name ("index", "attrs", "defaults", "strings",
 * "records", "stats", "values"), is an error. */
msp_err msp_writer_begin_record(msp_writer_t *w, const char *record, int64_t order);
/* The data is written before this returns (the caller may reuse it). When
 * stats is NULL they are computed here, for tensors of 1 MiB or more on a
 * short-lived helper thread while the data is being written. */
msp_err msp_writer_add_tensor(msp_writer_t *w, const msp_tensor_in_t *t);
/* Non-tensor argument or any other record attribute (string value): a row
 * of /attrs, written at close; a key set again replaces its value. */
msp_err msp_writer_set_attr(msp_writer_t *w, const char *key, const char *value);
msp_err msp_writer_end_record(msp_writer_t *w);
/* The signature of API api ("Functional.gelu"): n rows of /defaults (keys
 * "#K" = the K-th positional parameter's name, NAME = the repr of NAME's
 * default; msprobe-dump(5)), copied, written at close. Any time the file is
 * open, once per API: the writer does not look for repeats. */
msp_err msp_writer_add_defaults(msp_writer_t *w, const char *api, const char *const *keys,
                                const char *const *values, size_t n);
/* Durable mode: tensor data is handed to the disk as it is written
 * (write-behind, so the disk works while the caller goes on) and close
 * returns only once the whole file is on stable storage (fdatasync), so a
 * machine crash, not only a process crash, loses at most the open file.
 * Off by default. */
void msp_writer_set_durable(msp_writer_t *w, int on);
/* Write /index and close. Frees w on every path; NULL-safe. In durable mode
 * a failed fdatasync is MSP_ERR_IO. */
msp_err msp_writer_close(msp_writer_t *w);
/* Close without writing /index (e.g. disk full); frees w; NULL-safe. */
void msp_writer_abort(msp_writer_t *w);

/* ---- reader ----------------------------------------------------------- */

/* msp_tensor_info_t.has_stats: which statistics the dump gave. */
#define MSP_STATS_ALL 1
#define MSP_STATS_MAXMIN 2

typedef struct msp_tensor_info {
    char *role;          /* "input.0" */
    msp_dtype_t dtype;   /* MSP_DTYPE_INVALID if not one we know */
    char dtype_name[40]; /* torch name, or what the file said */
    int ndim;
    int64_t shape[MSP_MAX_NDIM];
    int64_t numel;
    int has_data;  /* 0: statistics only */
    int has_stats; /* MSP_STATS_ALL: max/min/mean/norm were present;
                                    MSP_STATS_MAXMIN: max and min only, mean and
                                    norm NaN (msprobe 26 leaves them null for an
                                    integer tensor); 0: none (counts and crc32
                                    default to 0 when absent) */
    msp_stats_t stats;
    int64_t offset;  /* file offset of contiguous native little-endian data
                                    readable with pread(), or -1: use msp_dump_read_tensor */
    int64_t nbytes;  /* numel * element size */
    char device[32]; /* "" when the file does not say */
    int requires_grad;
    char *data_name; /* msprobe's own dump: the tensor file's name
                                    (dump.json's data_name); NULL otherwise. Freed by
                                    msp_dump_close. */
    char *producer;  /* "RECORD/ROLE" of the earlier forward output this
                                    tensor is (msprobe-dump(5) attribute 'producer' or
                                    the /index column); NULL when unknown. Freed by
                                    msp_dump_close. */
} msp_tensor_info_t;

typedef struct msp_record_info {
    char *name;
    int64_t order;              /* execution order within the step; without an order
                                    attribute, the record's position among the root's
                                    groups (creation order if tracked, else by name) */
    msp_tensor_info_t *tensors; /* in role order: input.*, kwarg.*, output.* (natural sort) */
    size_t n_tensors;
} msp_record_info_t;

typedef struct msp_dump_file {
    char *path;
    char framework[32], framework_version[64], task[16], dump_mode[16];
    int64_t step, rank, world_size; /* -1 when the file does not say */
    int has_index;                  /* 1 if read from /index, 0 if groups were walked */
    msp_record_info_t *records;     /* sorted by order, then name */
    size_t n_records;
    void *impl; /* private */
    /* private: the block of NUL-ended strings that record names, roles and
     * producers may point into (a statistics dump's /strings), freed with
     * the file; such strings are not freed one by one */
    char *strings;
    size_t strings_len;
} msp_dump_file_t;

/* Open and load the catalogue (from /index when present, otherwise by walking
 * groups: a file written by hand with h5py following msprobe-dump(5) works).
 * A path that is msprobe's dump.json, or a directory holding one, is read as
 * msprobe's own dump directory instead (msprobe-dump(5), "MSPROBE'S OWN
 * DIRECTORIES"): same catalogue, offset always -1, data read from its .pt /
 * .npy files by msp_dump_read_tensor; task "md5" when its statistics carry
 * md5 values.
 * Missing file: MSP_ERR_NOT_FOUND; not HDF5, truncated, not a dump, or a
 * dtype attribute contradicting the stored type: MSP_ERR_FORMAT; a newer
 * format_version: MSP_ERR_UNSUPPORTED. The detail names the path. */
msp_err msp_dump_open(const char *path, msp_dump_file_t **out);
/* Read a whole tensor as native elements into buf (buf_size >= t->nbytes):
 * pread() at t->offset when >= 0 (no lock held), else H5Dread converting to
 * native. MSP_ERR_USAGE for a statistics-only tensor, MSP_ERR_UNSUPPORTED for
 * dtype MSP_DTYPE_INVALID. */
msp_err msp_dump_read_tensor(msp_dump_file_t *f, const msp_record_info_t *r,
                             const msp_tensor_info_t *t, void *buf, size_t buf_size);
/* A tensor's bytes in order, a block at a time, so memory stays bounded by
 * a block (4 MiB) however large the tensor: pread at t->offset; chunked or
 * compressed datasets by hyperslabs of whole rows (in the reader helper when
 * the file is contained: msprobe-catalogue --read sends frames as it reads);
 * an msprobe directory's .pt/.npy tensor is loaded whole, as its parser
 * reads it. read gives exactly n more bytes (n <= what is left). Same errors
 * as msp_dump_read_tensor, found when the bytes are reached. */
typedef struct msp_tensor_stream msp_tensor_stream_t;
msp_err msp_tensor_stream_open(msp_dump_file_t *f, const msp_record_info_t *r,
                               const msp_tensor_info_t *t, msp_tensor_stream_t **out);
msp_err msp_tensor_stream_read(msp_tensor_stream_t *s, void *buf, size_t n);
/* Pass over the next n bytes (n <= what is left): no read at all where the
 * tensor is read with pread or was loaded whole; read and dropped else. */
msp_err msp_tensor_stream_skip(msp_tensor_stream_t *s, uint64_t n);
void msp_tensor_stream_close(msp_tensor_stream_t *s); /* NULL-safe */
/* A record's attributes other than "order" (non-tensor args, stack, ...):
 * its /attrs rows, or in a version 1 file the attributes of its group, in
 * key (byte) order either way, as parallel arrays of malloc'd strings;
 * caller frees with msp_free_strings. */
msp_err msp_dump_record_attrs(msp_dump_file_t *f, const msp_record_info_t *r, char ***keys,
                              char ***values, size_t *n);
/* The signature of API api ("Functional.gelu", a record name without its
 * ".N.forward"), as the dump's /defaults gives it (msprobe-dump(5), THE
 * DEFAULTS TABLE): keys "#K" (value: the K-th positional parameter's name)
 * and parameter names (value: the repr of that parameter's default), in
 * key (byte) order, as parallel arrays of malloc'd strings the caller frees
 * with msp_free_strings. *n 0 when the file has none for api: a file
 * written before the table, msprobe's dump.json, an API the shim knew no
 * signature of. A malformed /defaults fails msp_dump_open (naming the file
 * and the table). */
msp_err msp_dump_api_defaults(msp_dump_file_t *f, const char *api, char ***keys, char ***values,
                              size_t *n);
void msp_free_strings(char **v, size_t n);
void msp_dump_close(msp_dump_file_t *f); /* NULL-safe */

/* ---- dump trees --------------------------------------------------------- */

typedef enum msp_dump_tree_kind {
    MSP_TREE_FILE, /* a dump file, or a rank directory holding dump.h5 */
    MSP_TREE_STEP, /* a step directory: rank{R}/dump.h5 */
    MSP_TREE_ROOT  /* a dump root: step{N}/rank{R}/dump.h5 */
} msp_dump_tree_kind_t;

typedef struct msp_dump_entry {
    int64_t step, rank; /* from the directory names; -1 when the path does not say */
    int64_t writer;     /* K of a rank{R}-{K} directory (a second process that wrote rank
                           R: msprobe-dump(5)); 0 for rank{R} */
    char *path;         /* the dump file (dump.h5, or msprobe's dump.json); for a rank
                           directory holding neither, the directory */
    char *error;        /* NULL, or why this entry is skipped ("holds neither dump.h5
                           (msprobe-c) nor dump.json (msprobe)", msp_dump_open's detail
                           for a 0-byte, truncated or foreign file) */
} msp_dump_entry_t;

typedef struct msp_dump_tree {
    msp_dump_tree_kind_t kind;
    msp_dump_entry_t *files; /* by step, then rank */
    size_t n_files;
    /* msprobe's own directories (rank/, proc<PID>/: Huawei's msprobe running
     * in the same script) found in a step directory or dump root that holds
     * our rank{R}/dump.h5, and left out: how many, and the first (NULL when
     * none). */
    size_t n_left_out;
    char *left_out;
} msp_dump_tree_t;

/* Find the dump files under path (a file, a rank or step directory, a dump
 * root); a rank directory may hold our dump.h5 or msprobe's dump.json (dump.h5
 * wins when both are there). A step or root holding our rank{R}/dump.h5 is
 * ours: msprobe's rank/ and proc<PID>/ in it are left out (n_left_out).
 * Rank directories holding neither are listed with error set. With
 * check, every file found inside a directory is opened once and one that
 * cannot be read gets error set too, so a caller can warn, skip it and go on
 * with the rest (a single named file is left to the caller's own open).
 * MSP_ERR_NOT_FOUND when path does not exist or holds no dump. Free with
 * msp_dump_tree_free (NULL-safe; also after a failure). */
msp_err msp_dump_tree_scan(const char *path, int check, msp_dump_tree_t *out);
void msp_dump_tree_free(msp_dump_tree_t *t);

/* ---- export to msprobe's own layout -------------------------------------- */

/* Rewrite our dump at path (a file, rank or step dir, or a root) in msprobe's
 * own layout under out_dir, for msprobe's own tools: stepN/rankR/dump.json,
 * stack.json, construct.json and dump_tensor_data/<record>.<input|output>.<i>.pt
 * (torch.save's format; npy: numpy's .npy, bfloat16 as float32). Backward
 * records list their outputs in msprobe's autograd order (grad_fn_outputs).
 * A statistics or md5 dump gets no tensor files. *n_files: dumps written.
 * Errors name the file; a dump that is msprobe's already is MSP_ERR_USAGE. */
msp_err msp_export_msprobe(const char *path, const char *out_dir, int npy, size_t *n_files);
/* torch.save of one contiguous tensor: t's dtype, ndim, shape, numel, nbytes
 * and requires_grad, data its bytes, written as name in directory dfd (shown:
 * its path, in errors), a zip as torch writes it (torch.load reads it).
 * Used by export and by acc_check's --save_error_data. */
msp_err msp_pt_save(int dfd, const char *name, const char *shown, const msp_tensor_info_t *t,
                    const void *data);

#ifdef __cplusplus
}
#endif
#endif
