/* A dataset's object header read from the mapped file, for the check of
 * /index against the file (fmt_h5index.c): libhdf5 opening and closing
 * every dataset was most of the reader helper's work on a file of many
 * small tensors (issue 42). Only ever a shortcut to "accepted": a header
 * is accepted here only when it is, byte for byte, one libhdf5 already
 * opened and msp_verify_row accepted for the same dtype (its datatype,
 * fill value and layout kind), but for its shape, storage address and
 * size, which are read and checked against the row as msp_verify_row
 * checks them. Anything else (another header version, a message not
 * listed, a checksum that fails, no template yet) is not refused here: the
 * caller opens the dataset with libhdf5 as before, and that decides. */
#ifndef MSP_FMT_H5OHDR_H
#define MSP_FMT_H5OHDR_H

#include "fmt_internal.h"

#include <stdint.h>

#define MSP_OHDR_TEMPLATES 16
#define MSP_OHDR_TEMPLATE_BYTES 96

struct msp_ohdr_template {
    int dtype; /* msp_dtype_t; 0: slot free */
    uint8_t dtype_msg[MSP_OHDR_TEMPLATE_BYTES], fill_msg[MSP_OHDR_TEMPLATE_BYTES];
    uint16_t dtype_len, fill_len; /* fill_len 0: no fill value message */
    uint8_t dtype_flags, fill_flags, fill_type;
    uint8_t space_head[3];  /* dataspace version, flags, and type or 0 */
    uint8_t layout_head[2]; /* layout version and class */
    uint8_t layout_flags;
};

struct msp_ohdr {
    const uint8_t *map; /* the file's bytes, from offset 0 (no user block) */
    size_t len;
    int on; /* superblock 2 or 3 at 0, 8-byte offsets and lengths, base 0 */
    struct msp_ohdr_template tpl[MSP_OHDR_TEMPLATES];
};

/* A group's links read from its header: a version 2 header whose links are
 * compact (link messages in the header itself, no fractal heap), names
 * pointing into the map (not NUL-terminated); address UINT64_MAX for a
 * link that is not a hard one. */
#define MSP_OHDR_LINKS 32
struct msp_ohdr_link {
    const char *name;
    size_t len;
    uint64_t addr;
    int hard;
};
struct msp_ohdr_group {
    size_t n;
    struct msp_ohdr_link l[MSP_OHDR_LINKS];
};

/* o set up over the mapped file (map NULL: never on). */
void msp_ohdr_init(struct msp_ohdr *o, const void *map, size_t len);
/* 1 when the object header at file address addr is a dataset t's row
 * describes exactly (see above); 0: not known here. */
int msp_ohdr_accepts(const struct msp_ohdr *o, uint64_t addr, const msp_tensor_info_t *t);
/* After libhdf5 opened the dataset at addr and msp_verify_row accepted it
 * for row t, with storage at file offset h5_offset (H5Dget_offset): its
 * header becomes t's dtype's template, when that has none and the header
 * reads here to the same storage. A header that reads to other storage
 * turns o off. */
void msp_ohdr_learn(struct msp_ohdr *o, uint64_t addr, const msp_tensor_info_t *t,
                    uint64_t h5_offset);
/* 1 when the header at addr is a group's whose links g now lists (every
 * link it has); 0: not known here (g->n 0). */
int msp_ohdr_group(const struct msp_ohdr *o, uint64_t addr, struct msp_ohdr_group *g);
/* 1 when g has a link named name, its address (UINT64_MAX: not a hard
 * link) in *addr. */
int msp_ohdr_group_find(const struct msp_ohdr_group *g, const char *name, uint64_t *addr);
/* Jenkins' lookup3 hash of n bytes (initval 0), HDF5's metadata checksum. */
uint32_t msp_lookup3(const uint8_t *k, size_t n);

#endif
