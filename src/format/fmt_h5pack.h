/* Packed tensors read back (format_version 4, fmt_h5pack.c): the segments of
 * /packed and the packed /index rows checked against them, for
 * fmt_h5index.c's check of the table. The HDF5 lock held. Private to the
 * format module. */
#ifndef MSP_FMT_H5PACK_H
#define MSP_FMT_H5PACK_H

#include "fmt_h5file.h"

/* The segments of /packed, by offset, and the packed rows found in them so
 * far. */
struct msp_seg {
    int64_t at, len;
};
struct msp_segs {
    struct msp_seg *v; /* by offset */
    size_t n;
    int group; /* the file has /packed (one of the root's groups) */
    struct msp_seg *held;
    size_t n_held, cap_held;
};
/* The segments of f's /packed, none before version 4 or without it: each a
 * one-dimensional uint8 dataset stored contiguously, unfiltered, inside the
 * file, no two overlapping; anything else in /packed refuses the file. */
msp_err msp_segs_load(msp_dump_file_t *f, struct msp_segs *s);
/* The segment t's data begins in (a packed row, which names no dataset), or
 * NULL; msp_segs_note checks the row ends in that segment g too and keeps it
 * for msp_segs_check, which refuses two packed rows that overlap. Errors name
 * the row as msp_index_where does, from path, record and t's role. */
const struct msp_seg *msp_segs_find(const struct msp_segs *s, const msp_tensor_info_t *t);
msp_err msp_segs_note(struct msp_segs *s, const struct msp_seg *g, const msp_tensor_info_t *t,
                      const char *path, const char *record);
msp_err msp_segs_check(struct msp_segs *s, const char *path);
void msp_segs_free(struct msp_segs *s);

#endif
