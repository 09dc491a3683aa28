/* Private to src/format: the one interface every dump reader backend
 * implements, and what the backends share below them (fmt_readutil.c).
 *
 * A backend is a table of operations, as SQLite's sqlite3_io_methods or
 * curl's protocol handlers. msp_dump_open (fmt_reader.c) asks the backends
 * in turn whether they take the path (probe) and opens it with the first
 * that does; every later call on the file goes through the table its
 * private part (f->impl) begins with. The front never asks which backend a
 * file has:
 *
 *   msp_reader_msprobe    msprobe's own dump directories (dump.json + .pt/.npy),
 *                         fmt_msprobe.c
 *   msp_reader_hdf5       our HDF5 dump, parsed by libhdf5 in this process
 *                         (MSPROBE_READER_INPROC=1, and msprobe-catalogue itself),
 *                         fmt_h5read.c
 *   msp_reader_contained  the same, parsed in a reader helper process, fmt_contain.c
 *
 * Calls go one way: the front calls the backends (through these tables),
 * the backends call fmt_readutil.c; no backend calls the front or another
 * backend. The catalogue (f->records) is loaded whole by open, so listing
 * records needs no operation. */
#ifndef MSP_FMT_BACKEND_H
#define MSP_FMT_BACKEND_H

#include "msprobe/format.h"

#include <stdint.h>
#include <sys/stat.h>

typedef struct msp_reader_ops msp_reader_ops_t;

/* One row of a table keyed by record (/attrs: a record's attribute;
 * /defaults: an API's parameter, its record the API's record-name prefix),
 * UTF-8, each string malloc'd. */
struct msp_attr_row {
    char *record;
    char *key;
    char *value;
};

/* Makes stream s read tensor t of f (see stream_open below). */
typedef msp_err (*msp_stream_open_fn)(msp_dump_file_t *f, const msp_record_info_t *r,
                                      const msp_tensor_info_t *t, msp_tensor_stream_t *s);

struct msp_reader_ops {
    const char *name; /* "msprobe-dir", "hdf5", "hdf5-contained" */
    /* 1 when this backend reads path, with *file the file to open instead
     * (malloc'd: a directory names the dump.json inside it) or NULL for path
     * itself; 0: not this backend's. May stat path, never opens it. */
    int (*probe)(const char *path, char **file);
    /* The file and its whole catalogue, or an error naming the file with
     * nothing left open (*out NULL). (*out)->impl begins with this table. */
    msp_err (*open)(const char *path, msp_dump_file_t **out);
    /* A whole tensor into buf, as msp_dump_read_tensor (its arguments
     * checked by the front). */
    msp_err (*read_tensor)(msp_dump_file_t *f, const msp_record_info_t *r,
                           const msp_tensor_info_t *t, void *buf, size_t buf_size);
    /* For a tensor with bytes to read (s->where and s->total set, t checked):
     * sets s->ops and s->state to a kind that reads them, or leaves the
     * buffer kind with s->buf holding them (have = total). On failure s is
     * still closed with its kind's close. */
    msp_stream_open_fn stream_open;
    /* As msp_dump_record_attrs (arguments checked, *keys and *values NULL
     * and *n 0 on entry). */
    msp_err (*record_attrs)(msp_dump_file_t *f, const msp_record_info_t *r, char ***keys,
                            char ***values, size_t *n);
    /* Optional (NULL: the format has no signature defaults): the file's
     * /defaults rows, sorted by record then key, borrowed for as long as f
     * is open (*n 0: none, e.g. a file written before the table). */
    msp_err (*api_defaults)(msp_dump_file_t *f, const struct msp_attr_row **rows, size_t *n);
    /* The file, its catalogue and f itself. */
    void (*close)(msp_dump_file_t *f);
};

extern const msp_reader_ops_t msp_reader_msprobe;
extern const msp_reader_ops_t msp_reader_hdf5;
extern const msp_reader_ops_t msp_reader_contained;

/* What every backend's private part (f->impl) begins with, as every
 * sqlite3_file begins with its pMethods. */
struct msp_dump_base {
    const msp_reader_ops_t *ops;
};

/* The table of an open file; NULL for a file object no backend made. */
static inline const msp_reader_ops_t *msp_reader_of(const msp_dump_file_t *f)
{
    return f->impl ? ((const struct msp_dump_base *)f->impl)->ops : NULL;
}

/* Entry points by backend, for msprobe-catalogue and the fuzz targets: the
 * in-process HDF5 reader (fmt_h5read.c), and a file from a reader helper's
 * catalogue message alone, without a descriptor (fmt_contain.c). */
msp_err msp_dump_open_local(const char *path, msp_dump_file_t **out);
/* msp_dump_open_local, but a file in the compact statistics layout without
 * /index (fmt_compact.h) has its tables read into *t (t->present set) and
 * no catalogue: f's root attributes only. The reader helper sends such
 * tables as they are. *t is msp_ctables_free'd by the caller. */
struct msp_ctables;
msp_err msp_dump_open_tables(const char *path, msp_dump_file_t **out, struct msp_ctables *t);
msp_err msp_dump_from_wire(const char *path, const unsigned char *buf, size_t n,
                           msp_dump_file_t **out);

/* ---- tensor streams --------------------------------------------------------- */

/* How one kind of stream reads; the front counts what was read and checks
 * the caller's arguments first. */
typedef struct msp_stream_ops {
    /* exactly n more bytes (n <= what is left) into buf */
    msp_err (*read)(msp_tensor_stream_t *s, void *buf, size_t n);
    /* the kind's own state (s->state; may be NULL after a failed open);
     * NULL: none */
    void (*close)(msp_tensor_stream_t *s);
    /* n more bytes passed over unread (n <= what is left); NULL: they are
     * read and dropped */
    msp_err (*skip)(msp_tensor_stream_t *s, uint64_t n);
} msp_stream_ops_t;

/* A tensor stream: what every kind shares, then its own state. */
struct msp_tensor_stream {
    const msp_stream_ops_t *ops; /* msp_stream_buffer until a backend opens it */
    char where[700];             /* "file F: record R: ROLE", for messages */
    uint64_t total, done;        /* bytes */
    int fd;                      /* msp_stream_pread: the file's descriptor, at offset */
    int64_t offset;
    unsigned char *buf; /* buffered kinds: bytes [at, have) not yet given;
                                    freed with the stream */
    size_t have, at;
    void *state; /* the kind's own: an HDF5 dataset, a helper process */
};

/* The bytes in s->buf (a tensor loaded whole; nothing for an empty stream). */
extern const msp_stream_ops_t msp_stream_buffer;
/* Makes s read its bytes from fd at offset with pread(). */
void msp_stream_pread(msp_tensor_stream_t *s, int fd, int64_t offset);
/* Exactly n bytes out of s->buf into p, calling fill for the next block each
 * time the buffer is spent (fill NULL: a buffer that is all there is). */
msp_err msp_stream_drain(msp_tensor_stream_t *s, unsigned char *p, size_t n,
                         msp_err (*fill)(msp_tensor_stream_t *s));

/* The front of every stream: a new one for tensor t of record r in f, with
 * where and total set, of the (empty) buffer kind, once t passes
 * msp_read_check; on a failed check or out of memory, the error and no
 * stream. */
msp_err msp_stream_new(const msp_dump_file_t *f, const msp_record_info_t *r,
                       const msp_tensor_info_t *t, msp_tensor_stream_t **out);
/* Exactly n more bytes of s into buf through its kind (n larger than what
 * is left: MSP_ERR_USAGE). */
msp_err msp_stream_next(msp_tensor_stream_t *s, void *buf, size_t n);
/* Pass over n more bytes of s unread where its kind can (else read and
 * dropped); the same checks as msp_stream_next. */
msp_err msp_stream_skip(msp_tensor_stream_t *s, uint64_t n);
void msp_stream_free(msp_tensor_stream_t *s); /* NULL-safe */

/* ---- shared by the backends (fmt_readutil.c) ---------------------------------- */

/* The checks every tensor read starts with (data present, a known element
 * type, a big enough buffer); where names the tensor. */
msp_err msp_read_check(const msp_tensor_info_t *t, int has_data, size_t buf_size,
                       const char *where);
/* Exactly n bytes of fd at off, or an error naming where. */
msp_err msp_pread_all(int fd, void *buf, size_t n, int64_t off, const char *where);
/* msp_dump_read_tensor for a file read through descriptor fd (both HDF5
 * backends): the checks, pread() at t->offset when there is one, else the
 * whole tensor a block at a time through the backend's stream_open. */
msp_err msp_read_tensor_fd(msp_dump_file_t *f, int fd, const msp_record_info_t *r,
                           const msp_tensor_info_t *t, void *buf, size_t buf_size,
                           msp_stream_open_fn stream_open);

/* A new, empty file object for path read by ops: its private part impl_size
 * bytes, zeroed but for the table; step, rank and world_size -1. */
msp_err msp_dump_alloc(const char *path, const msp_reader_ops_t *ops, size_t impl_size,
                       msp_dump_file_t **out);
/* What an HDF5 backend's file object holds besides its private part (freed
 * first, by the backend): the records and their tensors, the path, f. */
void msp_dump_free(msp_dump_file_t *f);
/* stat() of a dump file's path: MSP_ERR_NOT_FOUND or MSP_ERR_IO naming it. */
msp_err msp_dump_stat(const char *path, struct stat *sb);
/* MSP_ERR_FORMAT unless sb (path's) is a regular file: a directory, a FIFO
 * or a device is no dump file (and a FIFO would hang). */
msp_err msp_dump_check_regular(const char *path, const struct stat *sb);
/* The rows of rows[0..n) (sorted by record) whose record is `record`, as
 * parallel arrays of malloc'd strings in the table's order (none: *m 0);
 * out of memory names where. */
msp_err msp_rows_find(const struct msp_attr_row *rows, size_t n, const char *record, char ***keys,
                      char ***values, size_t *m, const char *where);
/* Sorts rows[0..n) (every string set) by record, then key; rows of the same
 * record and key keep their order. Out of memory names where. */
msp_err msp_rows_sort(struct msp_attr_row *rows, size_t n, const char *where);
/* Frees rows[0..n) and their strings; NULL-safe. */
void msp_rows_free(struct msp_attr_row *rows, size_t n);
/* f's catalogue in the order msp_dump_open gives it: records by execution
 * order (then name, naturally), each record's tensors by role. */
void msp_catalogue_sort(msp_dump_file_t *f);
/* path opened for reading into *fd, still a regular file once open. */
msp_err msp_dump_open_fd(const char *path, int *fd);

#endif
