/* The in-process HDF5 backend's open file: its part of msp_dump_file_t,
 * which fmt_h5read.c opens and reads, and whose catalogue fmt_h5index.c (from
 * /index) or fmt_h5walk.c (by walking the record groups) loads. Types and
 * inline functions only. Every function on it runs with the HDF5 lock held.
 * Private to the format module. */
#ifndef MSP_FMT_H5FILE_H
#define MSP_FMT_H5FILE_H

#include "fmt_backend.h"
#include "fmt_internal.h"

struct msp_h5_impl {
    struct msp_dump_base base; /* first: the table */
    hid_t file;
    int fd;
    int64_t file_size;
    void *map; /* the file mapped read-only, libhdf5's file image (fmt_h5read.c) */
    size_t map_len;
    int64_t version; /* root attribute format_version (1 when absent) */
    /* /attrs (format_version 2), sorted by record, then key; has_attrs 0:
     * the records' attributes are on their groups. */
    struct msp_attr_row *attrs;
    size_t n_attrs;
    int has_attrs;
    /* /defaults (the APIs' signature defaults), sorted by record, then key;
     * none in files written before it. */
    struct msp_attr_row *defs;
    size_t n_defs;
};

static inline struct msp_h5_impl *msp_impl(msp_dump_file_t *f)
{
    return f->impl;
}

static inline int64_t im_file_size(msp_dump_file_t *f)
{
    return msp_impl(f)->file_size;
}

#endif
