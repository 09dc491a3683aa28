/* The compact layout of statistics dumps (format_version 3, msprobe-dump(5),
 * STATISTICS DUMPS): every string of the file once in /strings, a row per
 * record in /records, a row per statistics-only tensor in /stats, its
 * statistics a row of /values shared by every tensor that has them, /attrs
 * and /defaults whose columns are string numbers; all of them chunked and
 * deflated, so a record costs tens of bytes instead of a group,
 * or /index rows of variable-length strings (each a global heap object).
 * The row types shared by the writer (fmt_writer_stats.c) and the reader
 * (fmt_h5stats.c). Private to the format module. */
#ifndef MSP_FMT_H5STATS_H
#define MSP_FMT_H5STATS_H

#include "fmt_h5file.h"

#define MSP_COMPACT_VERSION 3 /* the first format_version with these tables */

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

/* Compound types of the rows, packed = 1 for the file, 0 for memory; width:
 * the shape column's length. The caller closes them; -1 on failure. */
hid_t msp_srow_type(int packed, int width);
hid_t msp_rrow_type(int packed);
hid_t msp_vrow_type(int packed);
hid_t msp_crow_type(int packed);

/* Whether f (version >= 3) is in the compact layout (/records exists):
 * 1 yes, 0 no, -1 error. */
int msp_compact_present(msp_dump_file_t *f);
/* Loads /strings, /records and /stats into f's catalogue, merging with the
 * records /index gave (tensors with data; f->records in name order), and
 * the compact /attrs and /defaults into im->attrs and im->defs. Checks
 * every number against its table, shapes, roles given twice, and that every
 * record group of the file has its /index rows. */
msp_err msp_load_compact(msp_dump_file_t *f, int has_index);

#endif
