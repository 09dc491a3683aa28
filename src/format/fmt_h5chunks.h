/* A table read chunk by chunk, each inflated by ISA-L (fmt_h5chunks.c),
 * for the compact layout's tables (fmt_h5stats.c). Private to the format
 * module. */
#ifndef MSP_FMT_H5CHUNKS_H
#define MSP_FMT_H5CHUNKS_H

#include <hdf5.h>
#include <stddef.h>

/* The n rows of dataset d (a one-dimensional table) into out, n rows of
 * size bytes of memory type mt over zeros, when d is stored as msprobe
 * writes its tables (chunks of one deflate filter): 1, out filled; 0 when
 * it is stored otherwise or a chunk does not inflate to a chunk's bytes,
 * out zeros again, for H5Dread to read it with its own checks and errors
 * (fmt_h5chunks.c). */
int msp_table_inflate(hid_t d, hid_t mt, size_t size, size_t n, void *out);

#endif
