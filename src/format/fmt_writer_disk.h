/* The dump writer's file as a file (fmt_writer_disk.c: the file's space,
 * syncs and closing tables), and the writer's state it works on, shared with
 * fmt_writer.c (records and tensors into HDF5), which calls it. Private to
 * the format module. */
#ifndef MSP_FMT_WRITER_DISK_H
#define MSP_FMT_WRITER_DISK_H

#include "fmt_internal.h"

/* An /index row as this writer keeps it: the columns every reader knows,
 * then the producer column (absent from older files, so kept out of the
 * shared row and type). */
struct msp_wrow {
    struct msp_index_row r;
    char *producer; /* "" when unknown */
    int pending;    /* r.offset counts from the start of the segment being packed */
};

struct msp_writer {
    char *path;
    hid_t file;
    hid_t group;        /* the open record's group once it needs one, or -1 */
    const char *record; /* the open record's name (its copy in names), or NULL */
    int64_t order;
    size_t record_tensors;
    size_t record_row; /* its first /index row */
    /* Every record name begun in this file, found by names_ix: records
     * without data have no group, so HDF5 cannot catch duplicates. */
    char **names;
    size_t n_names, cap_names;
    msp_index_t names_ix;
    hid_t types[MSP_DTYPE_COUNT_];
    hid_t dcpl; /* contiguous, allocated at creation, never filled */
    hid_t gcpl;
    struct msp_wrow *rows;
    size_t n_rows, cap_rows;
    /* The open record's rows by role, once it has many (an optimizer's
     * record holds four a parameter): emptied at its end. */
    msp_index_t roles;
    /* /attrs rows, kept until close: an attribute on a record group cost
     * HDF5 a group and an attribute (about 25 us a record), a row costs
     * nothing until the one write at close. key and value are owned. */
    struct msp_attr_row *attrs;
    size_t n_attrs, cap_attrs;
    uint64_t *attr_keys; /* each row's key hashed: a key set again is found by it */
    size_t cap_attr_keys;
    size_t record_attr; /* the open record's first row */
    /* /defaults rows (msp_writer_add_defaults), all strings owned */
    struct msp_attr_row *defs;
    size_t n_defs, cap_defs;
    int fd;               /* HDF5's own descriptor (sec2 driver), for preallocation; -1: none */
    int64_t prealloc_end; /* file blocks are reserved up to here */
    int no_prealloc;      /* the filesystem cannot reserve blocks */
    int durable;          /* msp_writer_set_durable */
    /* task "statistics": the compact layout (format_version 3, fmt_h5stats.h) */
    int compact;
    /* Packed tensors (fmt_writer_pack.c): data below pack_below bytes is
     * gathered into pack, written as /packed/<n_segments> when full or at
     * close; rows from pack_row on may be pending. */
    size_t pack_below;
    hid_t pack_group; /* /packed once created, or -1 */
    unsigned char *pack;
    size_t pack_len, pack_cap, pack_row;
    unsigned n_segments;
};

/* fmt_writer_pack.c. Call with the lock held. Whether a tensor of n bytes
 * is packed; appends its bytes (flushing a full segment first), *pos their
 * place in the segment; writes the segment being packed and fixes its rows'
 * offsets. */
int msp_pack_wants(const msp_writer_t *w, size_t n);
msp_err msp_pack_add(msp_writer_t *w, const void *data, size_t n, int64_t *pos);
msp_err msp_pack_flush(msp_writer_t *w);

/* Objects above this many bytes start on a 4 KiB boundary: whole pages for
 * the page cache and for readers that mmap or pread the raw data. */
#define MSP_ALIGN_THRESHOLD (64 * 1024)
#define MSP_ALIGN 4096
#define MSP_META_BLOCK (64 * 1024)
/* A statistics file's metadata and raw data blocks: HDF5's default 2 KiB
 * raw data block left about 1.5 KiB of a step's file a hole (a record is
 * about 100 bytes). */
#define MSP_SMALL_DATA_COMPACT 512
#define MSP_META_BLOCK_COMPACT 512
#define MSP_MDC_INITIAL (16 * 1024 * 1024)
#define MSP_MDC_MAX (64 * 1024 * 1024)
/* Tensor data goes into file space reserved ahead in steps of at least this
 * much (see msp_writer_prealloc). */
#define MSP_PREALLOC_STEP ((int64_t)64 * 1024 * 1024)
#define MSP_INDEX_XFER_MIN ((size_t)16 * 1024)
#define MSP_INDEX_XFER_MAX ((size_t)1024 * 1024) /* HDF5's default */

void msp_writer_prealloc(msp_writer_t *w, int64_t off, int64_t n);
void msp_writer_write_behind(msp_writer_t *w, int64_t off, int64_t n);
msp_err msp_writer_finish_file(const char *path, int64_t prealloc_end, int durable);
hid_t msp_wrow_type(int packed);
/* Rows a chunk of a deflated table: a table smaller than this is one chunk. */
#define MSP_TABLE_CHUNK_ROWS 65536
msp_err msp_writer_table(msp_writer_t *w, const char *name, hid_t ft, hid_t mt, const void *rows,
                         size_t n_rows, size_t row_size, int deflate);
/* The closing tables of a compact file (fmt_writer_stats.c): /records,
 * /stats, /index for rows with data, /attrs, /defaults and /strings. */
msp_err msp_writer_compact_tables(msp_writer_t *w);
/* A root attribute of a compact file: a fixed-length UTF-8 string (NUL
 * padded), as a variable-length one would cost the file a 4 KiB global heap
 * collection, more than the rest of a small step's metadata. */
msp_err msp_compact_attr_str(hid_t obj, const char *key, const char *value, const char *where);

#endif
