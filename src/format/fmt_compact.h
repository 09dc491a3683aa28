/* The compact layout of statistics dumps (format_version 3, msprobe-dump(5),
 * STATISTICS DUMPS) as tables in memory, and the catalogue built from them.
 * fmt_h5stats.c reads the tables with libhdf5 (in this process, or in the
 * reader helper, which then sends them as they are: fmt_contain_put.c);
 * msp_compact_build, which uses no libhdf5, makes the catalogue of them,
 * checking every number a row holds against the table it points into.
 * Shared by the backends, as fmt_readutil.c is (fmt_backend.h). Private to
 * the format module. */
#ifndef MSP_FMT_COMPACT_H
#define MSP_FMT_COMPACT_H

#include "fmt_backend.h"

#include <stddef.h>
#include <stdint.h>

/* A row of /stats. Strings are numbers into /strings (0 is ""); values is
 * the row of /values that holds its statistics. Column order on disk is the
 * field order here; shape holds the first ndim entries of the file's widest
 * shape (the column is int64[W], W = the largest ndim, at least 1; entries
 * past ndim are 0). */
struct msp_srow {
    uint32_t record, role, dtype;
    uint8_t ndim;
    int64_t shape[MSP_MAX_NDIM];
    uint32_t values;
    uint32_t device;
    int8_t requires_grad;
    uint32_t producer;
};

/* A row of /values: statistics, each distinct set once (a tensor that is one
 * record's output and a later one's input, a parameter in its module's
 * record and in the optimizer's, are one row). */
struct msp_vrow {
    double max, min, mean, norm;
    int64_t nan_count, inf_count;
    uint32_t crc32;
};

/* A row of /records: its name (a string number) and execution order. */
struct msp_rrow {
    uint32_t name;
    int64_t order;
};

/* A row of /attrs or /defaults in the compact layout: string numbers. */
struct msp_crow {
    uint32_t record, key, value;
};

/* /stats in memory: "narrow" rows of msp_nrow_size(width) bytes, the
 * columns at these offsets (little-endian, as the file's), the shape's
 * width entries last. struct msp_srow spends 256 bytes on a shape of
 * MSP_MAX_NDIM entries where a file has a few: a 12,500-row table took
 * 3.6 MB that way. */
enum {
    MSP_NROW_RECORD = 0,
    MSP_NROW_ROLE = 4,
    MSP_NROW_DTYPE = 8,
    MSP_NROW_VALUES = 12,
    MSP_NROW_DEVICE = 16,
    MSP_NROW_PRODUCER = 20,
    MSP_NROW_NDIM = 24,
    MSP_NROW_REQUIRES_GRAD = 25,
    MSP_NROW_SHAPE = 32
};

static inline size_t msp_nrow_size(int width)
{
    return MSP_NROW_SHAPE + 8 * (size_t)width;
}

/* A file's compact tables, each malloc'd (NULL when empty or absent). */
struct msp_ctables {
    int present;   /* the tables were read (msp_dump_open_tables) */
    char *strings; /* /strings: NUL-ended strings, back to back */
    size_t n_strings;
    struct msp_rrow *records;
    size_t n_records;
    struct msp_vrow *values;
    size_t n_values;
    unsigned char *stats; /* narrow rows */
    size_t n_stats;
    int width; /* of /stats's shape column: 1..MSP_MAX_NDIM */
    struct msp_crow *attrs, *defaults;
    size_t n_attrs, n_defaults;
};

void msp_ctables_free(struct msp_ctables *t);

/* numel and nbytes of a shape (esize bytes an element); MSP_ERR_FORMAT with
 * detail naming `where` on overflow or a negative extent. */
msp_err msp_shape_size(const int64_t *shape, int ndim, size_t esize, int64_t *numel,
                       int64_t *nbytes, const char *where);
/* msp_shape_size without a message: 1 with *numel and *nbytes set, 0 for a
 * negative dimension or a size past int64 (msp_shape_size then says which). */
int msp_shape_fits(const int64_t *shape, int ndim, size_t esize, int64_t *numel, int64_t *nbytes);

/* The catalogue of the tables into f: /records merged with the records
 * f already has (from /index: tensors with data; f->records in name
 * order), /stats's rows as their tensors, and /attrs and /defaults as rows
 * sorted by record, then key (*attrs and *defs, freed with msp_rows_free,
 * also on failure). f->records ends in name order (in /records's order when
 * f had none), each record's tensors in role order. Errors name f->path and the table. t's strings become
 * f's (t->strings NULL after): the records' names, roles and producers
 * point into them. */
msp_err msp_compact_build(msp_dump_file_t *f, struct msp_ctables *t, struct msp_attr_row **attrs,
                          size_t *n_attrs, struct msp_attr_row **defs, size_t *n_defs);

#endif
