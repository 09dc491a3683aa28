/* The catalogue of an HDF5 dump from its /index table, and the table checked
 * against the file (fmt_h5index.c), for the in-process reader (fmt_h5read.c).
 * Every function here runs with the HDF5 lock held. Private to the format
 * module. */
#ifndef MSP_FMT_H5INDEX_H
#define MSP_FMT_H5INDEX_H

#include "fmt_h5file.h"

/* 1: /index usable (all columns present; *dset opened), 0: absent or not
 * ours, -1 error. */
int msp_index_usable(hid_t file, hid_t *dset);
/* f's records from /index d, in name order, each record's tensors in role
 * order, with their producers where d has that optional column. */
msp_err msp_load_index(msp_dump_file_t *f, hid_t d);
/* Each row against the dataset it names, and the table against the file. */
msp_err msp_verify_index(msp_dump_file_t *f);

#endif
