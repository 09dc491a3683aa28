/* A table with variable-length members read from the mapped file
 * (fmt_h5vlen.c), for /index and its producer column (fmt_h5index.c).
 * Private to the format module. */
#ifndef MSP_FMT_H5VLEN_H
#define MSP_FMT_H5VLEN_H

#include <hdf5.h>
#include <stddef.h>

/* The n rows of the one-dimensional table d of file `file`, whose bytes are
 * map[0, map_len) (the whole file as mapped), into out: n rows of memory
 * type mt over zeros, whose members are fixed-size types, variable-length
 * strings (char *) and variable-length sequences (hvl_t). Done when d is
 * stored as msprobe writes its index (contiguous, unfiltered, 8-byte
 * addresses and lengths) and every string and sequence is found whole in a
 * global heap collection of the file: 1, every string and sequence then
 * in one block, *block, that the caller frees (never H5Dvlen_reclaim).
 * 0 otherwise, out untouched, for H5Dread to read the table with its own
 * checks and errors. */
int msp_table_vlen_read(hid_t file, hid_t d, const unsigned char *map, size_t map_len, hid_t mt,
                        size_t n, void *out, char **block);

#endif
