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

#include "fmt_compact.h" /* the row structs */
#include "fmt_h5file.h"

#define MSP_COMPACT_VERSION 3 /* the first format_version with these tables */

/* Compound types of the rows, packed = 1 for the file, 0 for memory; width:
 * the shape column's length. The caller closes them; -1 on failure. */
hid_t msp_srow_type(int packed, int width);
hid_t msp_rrow_type(int packed);
hid_t msp_vrow_type(int packed);
hid_t msp_crow_type(int packed);

/* Whether f (version >= 3) is in the compact layout (/records exists):
 * 1 yes, 0 no, -1 error. */
int msp_compact_present(msp_dump_file_t *f);
/* The compact tables of f into t (msp_ctables_free'd by the caller, also on
 * failure): each checked to be a one-dimensional table with the columns of
 * msprobe-dump(5), of no more rows than a file of its size can hold, and
 * without /index (has_index 0), no record group in the file. */
msp_err msp_compact_read(msp_dump_file_t *f, int has_index, struct msp_ctables *t);
/* Loads /strings, /records and /stats into f's catalogue, merging with the
 * records /index gave (tensors with data; f->records in name order), and
 * the compact /attrs and /defaults into im->attrs and im->defs: the tables
 * read (msp_compact_read), then built (msp_compact_build). Checks every
 * number against its table, shapes, roles given twice, and that every
 * record group of the file has its /index rows. */
msp_err msp_load_compact(msp_dump_file_t *f, int has_index);

#endif
