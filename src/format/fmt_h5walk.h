/* The catalogue of an HDF5 dump by walking its record groups, and the
 * listing, storage and size checks fmt_h5index.c shares (fmt_h5walk.c), for
 * the in-process reader (fmt_h5read.c). Every function here runs with the
 * HDF5 lock held. Private to the format module. */
#ifndef MSP_FMT_H5WALK_H
#define MSP_FMT_H5WALK_H

#include "fmt_h5file.h"

/* Transfer properties for a compound table's read: a 64 KiB conversion
 * buffer instead of libhdf5's 1 MiB (fmt_h5walk.c says why). */
hid_t msp_h5_small_dxpl(void);

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
/* The same answer from the messages of d's object header, for a dataset
 * whose row gives a file offset (H5Dget_offset then tells a contiguous one
 * from the others): no copy of its creation properties. */
msp_err msp_check_header_storage(hid_t d, const char *where, int *plain);
/* Refuses a tensor read through H5Dread that declares far more bytes than
 * its storage holds. */
msp_err msp_check_expansion(hid_t d, const msp_tensor_info_t *t, const char *where);
/* f's records by walking the root's groups and their datasets. */
msp_err msp_walk(msp_dump_file_t *f);

#endif
