/* Private to the in-process HDF5 backend (fmt_h5read.c): the private part
 * of its files and the catalogue loaders it calls, from /index
 * (fmt_h5index.c) or by walking the record groups (fmt_h5walk.c). Every
 * function here runs with the HDF5 lock held. */
#ifndef MSP_FMT_H5READ_H
#define MSP_FMT_H5READ_H

#include "fmt_backend.h"
#include "fmt_internal.h"

struct msp_h5_impl {
    struct msp_dump_base base; /* first: the table */
    hid_t file;
    int fd;
    int64_t file_size;
    int64_t version;   /* root attribute format_version (1 when absent) */
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

/* ---- catalogue from /index (fmt_h5index.c) ---- */

/* 1: /index usable (all columns present; *dset opened), 0: absent or not
 * ours, -1 error. */
int msp_index_usable(hid_t file, hid_t *dset);
/* f's records from /index d, in name order, each record's tensors in role
 * order; then its optional column producer (call while f->records is still
 * in name order). */
msp_err msp_load_index(msp_dump_file_t *f, hid_t d);
msp_err msp_load_index_producers(msp_dump_file_t *f, hid_t d);
/* Each row against the dataset it names, and the table against the file. */
msp_err msp_verify_index(msp_dump_file_t *f);

/* ---- catalogue by walking groups (fmt_h5walk.c) ---- */

/* A growable vector of strdup'd names; returns -1 on OOM (an HDF5 iteration stop). */
struct msp_strvec {
    char **v;
    size_t n, cap;
};
int msp_strvec_push(struct msp_strvec *sv, const char *name);

struct msp_names {
    struct msp_strvec sv;
    H5O_type_t want;
};

/* Names of the hard-linked children of g of type `want` into ns (freed with
 * msp_free_strings(ns->sv.v, ns->sv.n)), in creation order when the group
 * tracks it, otherwise in name order. */
msp_err msp_children(hid_t g, H5O_type_t want, struct msp_names *ns, const char *where);
/* Refuses data kept outside the file (external storage, virtual layout);
 * *plain (plain may be NULL): contiguous and unfiltered. */
msp_err msp_check_storage(hid_t d, const char *where, int *plain);
/* Refuses a tensor read through H5Dread that declares far more bytes than
 * its storage holds. */
msp_err msp_check_expansion(hid_t d, const msp_tensor_info_t *t, const char *where);
/* numel and nbytes of a shape (esize bytes an element); MSP_ERR_FORMAT with
 * detail naming `where` on overflow or a negative extent. */
msp_err msp_shape_size(const int64_t *shape, int ndim, size_t esize, int64_t *numel,
                       int64_t *nbytes, const char *where);
/* f's records by walking the root's groups and their datasets. */
msp_err msp_walk(msp_dump_file_t *f);

#endif
