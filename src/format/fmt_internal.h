/* Private to src/format: the HDF5 lock, type factory and attribute helpers
 * shared by the writer and the reader. */
#ifndef MSP_FMT_INTERNAL_H
#define MSP_FMT_INTERNAL_H

#include "fmt_backend.h" /* struct msp_attr_row */
#include "msprobe/format.h"

#include <hdf5.h>

/* Every H5* call of msprobe goes through this one lock, so the module is
 * safe with an HDF5 built without thread safety (Debian 12's 1.10.8 happens
 * to be built thread-safe; other builds are not). msp_h5_lock() also turns
 * HDF5's automatic error printing off for the calling thread (the library
 * never prints). */
void msp_h5_lock(void);
void msp_h5_unlock(void);

/* msp_fail() with the innermost HDF5 error description appended, then the
 * HDF5 error stack cleared. Call with the lock held. */
msp_err msp_h5_fail(msp_err code, const char *fmt, ...) MSP_PRINTF(2, 3);

/* The file/memory type of dt as written by msprobe (little-endian; bf16 =
 * 1 sign / 8 exponent / 7 mantissa bits; bool = h5py's enum {FALSE=0,
 * TRUE=1} over int8). Returns a new type id the caller closes, or -1. */
hid_t msp_h5_type_for(msp_dtype_t dt);
/* Whether HDF5 type t is that type of dt, in one libhdf5 call (the types
 * made once and kept; call with the lock held). */
int msp_h5_type_is(hid_t t, msp_dtype_t dt);

/* The dtype whose native little-endian bytes are exactly the elements of
 * HDF5 type t, or MSP_DTYPE_INVALID. *exact is set to 1 when the stored bytes
 * are byte-identical to msprobe's in-memory layout (so pread() of the raw
 * storage yields native elements), 0 when H5Dread must convert (big-endian,
 * padded, ...). name (size >= 40) receives a description of t. */
msp_dtype_t msp_h5_dtype_of(hid_t t, int *exact, char *name, size_t name_size);

/* Attribute helpers. All return MSP_OK or an msp_err with detail naming
 * `where` (e.g. "file x.h5: record R: input.0"). The put functions create
 * the attribute and fail if it exists (they are for objects just created:
 * no lookup first, which is a measurable cost at 11 attributes per tensor). */
msp_err msp_h5_attr_put_str(hid_t obj, const char *key, const char *value, const char *where);
msp_err msp_h5_attr_put_i64(hid_t obj, const char *key, int64_t v, const char *where);
msp_err msp_h5_attr_put_f64(hid_t obj, const char *key, double v, const char *where);
msp_err msp_h5_attr_put_u32(hid_t obj, const char *key, uint32_t v, const char *where);
msp_err msp_h5_attr_put_bool(hid_t obj, const char *key, int v, const char *where);
msp_err msp_h5_attr_put_i64_array(hid_t obj, const char *key, const int64_t *v, int n,
                                  const char *where);

/* Readers return 1 when the attribute exists and was read, 0 when it is
 * absent, -1 (with msp_fail detail) when it exists but cannot be read as
 * asked. */
int msp_h5_attr_get_str(hid_t obj, const char *key, char *buf, size_t size, const char *where);
/* Integer, enum (h5py bool) or float scalar attribute as int64 / double. */
int msp_h5_attr_get_i64(hid_t obj, const char *key, int64_t *out, const char *where);
int msp_h5_attr_get_f64(hid_t obj, const char *key, double *out, const char *where);
/* 1-d integer attribute (or empty) into v[MSP_MAX_NDIM]; *n = its length. */
int msp_h5_attr_get_i64_array(hid_t obj, const char *key, int64_t *v, int *n, const char *where);
/* Any string or numeric scalar attribute as malloc'd text in *out. */
int msp_h5_attr_get_text(hid_t obj, const char *key, char **out, const char *where);

/* One row of /index as held in memory; strings are UTF-8, shape is an
 * hvl_t of int64. Column names and order are fixed (see msprobe-dump(5)). */
struct msp_index_row {
    char *record;
    char *role;
    int64_t order;
    char *dtype;
    int32_t ndim;
    hvl_t shape;
    int8_t has_data;
    double max, min, mean, norm;
    int64_t nan_count, inf_count;
    uint32_t crc32;
    int64_t offset;
    int64_t nbytes;
    char *device;
    int8_t requires_grad;
};

/* Compound type of struct msp_index_row: packed = 0 for memory (native
 * offsets), 1 for the file (packed little-endian). Caller closes.
 * msp_h5_index_type_at: the same columns at offset at of a struct of size
 * bytes, then the optional column "producer" (a string) at producer_at
 * when that is not -1 (absent from older files, so kept out of the shared
 * row). */
hid_t msp_h5_index_type(int packed);
hid_t msp_h5_index_type_at(size_t size, size_t at, long producer_at, int packed);
/* Member i of the memory compound mt and its namesake in the file's
 * compound ft: ft's index of it, *a and *b their types for the caller to
 * close; -1 when ft has no member of that name (nothing then opened). */
int msp_h5_member_pair(hid_t ft, hid_t mt, unsigned i, hid_t *a, hid_t *b);
/* A row's place in its errors, into w (cap bytes): "file PATH: /index:
 * record NAME" and ": ROLE" when role is not NULL. */
void msp_index_where(char *w, size_t cap, const char *path, const char *name, const char *role);
/* Column names of /index, NULL-terminated. */
extern const char *const msp_index_columns[];

/* Compound type of struct msp_attr_row (fmt_backend.h; packed as for
 * msp_h5_index_type): the rows of /attrs (format_version 2) and /defaults. */
hid_t msp_h5_attrs_type(int packed);

/* ---- HDF5's file format read from the mapped file (fmt_h5vlen.c, fmt_h5ohdr.c) ---- */

#include <endian.h>
#include <stdint.h>
#include <string.h>

/* Little-endian fields, as the format stores every number. */
static inline uint16_t msp_h5_rd16(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return le16toh(v);
}

static inline uint32_t msp_h5_rd32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return le32toh(v);
}

static inline uint64_t msp_h5_rd64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return le64toh(v);
}

/* A field of n bytes, n 1, 2, 4 or 8 (a size whose width a flag gives). */
static inline uint64_t msp_h5_rdn(const unsigned char *p, int n)
{
    return n == 1 ? p[0] : n == 2 ? msp_h5_rd16(p) : n == 4 ? msp_h5_rd32(p) : msp_h5_rd64(p);
}

/* ---- contained reading (fmt_contain.c, fmt_contain_get.c, fmt_contain_put.c) ---- */

#include <stdio.h>
#include <sys/types.h>

/* A record's attributes as the reader helper sent them. */
struct msp_rattrs { /* k and v may be NULL when n is 0 */
    char **k, **v;
    size_t n;
};

/* The helper's side of the pipe: the catalogue of f, or a compact
 * statistics file's tables as read (msp_dump_open_tables), or an error. */
/* the wire form's version: written by the helper, checked by the caller
 * (3: strings in common's codec, u64 length + 1; 4: a compact file's
 * tables, "MSPT") */
#define MSP_WIRE_VERSION 4u
int msp_wire_put_file(FILE *o, msp_dump_file_t *f);
struct msp_ctables;
int msp_wire_put_tables(FILE *o, msp_dump_file_t *f, const struct msp_ctables *t);
int msp_wire_put_error(FILE *o, msp_err code, const char *detail);
/* Parses a catalogue message into f (path and impl set; records freed by
 * msp_dump_close): a catalogue, or tables whose catalogue is built here
 * (msp_compact_build, every number checked). */
msp_err msp_wire_get_file(const unsigned char *buf, size_t n, msp_dump_file_t *f,
                          struct msp_rattrs **attrs, struct msp_attr_row **defs, size_t *n_defs);
/* An error answer after its "MSPE": its code and detail (malloc'd, or NULL);
 * -1 when the answer is short or malformed (fmt_contain_get.c). */
int msp_wire_get_error(const unsigned char *buf, size_t n, int64_t *code, char **detail);
/* The catalogue message of the file open on fd, when the helper already
 * verified that same unchanged file in this process (fmt_contain_cache.c):
 * 1 with a malloc'd copy in *buf, else 0. put keeps buf, the malloc'd one
 * the helper just sent (or frees it). */
int msp_cat_cache_get(int fd, unsigned char **buf, size_t *n);
void msp_cat_cache_put(int fd, unsigned char *buf, size_t n);
/* The reader helper's program (a new string; NULL: none found) and its
 * environment (a new array of ours and msprobe's additions, with *text the
 * one string allocated; NULL: ours as it is) (fmt_contain_env.c). */
char *msp_helper_path(void);
char **msp_helper_env(char **text);

/* The reader helper's time limits (fmt_contain_limit.c). msp_helper_timeout:
 * the seconds of work (CPU time) a helper may spend on a file of file_size
 * bytes: the environment's MSPROBE_READER_TIMEOUT, else a floor that grows
 * with the size; INFINITY for none. msp_helper_wall: the wall-clock backstop
 * for a helper with that limit. msp_helper_limit_work: sets the limit in the
 * calling helper (SIGXCPU when it is reached). The errors: the limit reached
 * (MSP_ERR_LIMIT, "timed out after N s of work"), the backstop reached
 * (MSP_ERR_IO); neither calls the file corrupt. */
double msp_helper_timeout(int64_t file_size);
/* The limit of work of a helper that streams one tensor: the same, or 120 s
 * if that is more. */
double msp_helper_read_work(int64_t file_size);
double msp_helper_wall(double work);
void msp_helper_limit_work(double work);
msp_err msp_helper_work_error(const char *path, double work);
msp_err msp_helper_wall_error(const char *path, double work);

#endif
