/* The dump side's asynchronous writer: the training thread hands over records
 * whose tensor bytes it has already copied, and goes on; one writer thread
 * owns the HDF5 file of the current step. No Python here. */
#ifndef MSP_DUMP_WRITER_H
#define MSP_DUMP_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "dump_pool.h" /* the records and buffers handed over */

typedef struct msp_dq_params {
    const char *dump_path;
    int statistics; /* 1: write statistics only */
    const char *task, *dump_mode;
    size_t queue_bytes;    /* bound on tensor bytes waiting */
    int durable;           /* each step's file is on disk when it closes */
    int overflow;          /* task overflow_check: write only records whose outputs
                                hold NaN/Inf, each with the record before it */
    int64_t overflow_nums; /* overflow: stop after this many (-1: never) */
    int64_t pack_below;    /* msp_dump_meta_t.pack_below (MSPROBE_PACK_KIB) */
} msp_dq_params_t;

/* Copies what it needs; starts the thread lazily at the first push. */
int msp_dq_init(const msp_dq_params_t *p);
/* Framework details stamped into every file opened afterwards. */
void msp_dq_set_framework(const char *version);
void msp_dq_set_world_size(int64_t world_size);

/* Task overflow_check: 0 once overflow_nums records with NaN/Inf outputs have
 * been written (nothing more will be), else 1. Any thread, no lock. */
int msp_dq_accepting(void);

/* Queue a record (ownership passes); waits only while the queue is full. */
void msp_dq_push(msp_dq_rec_t *r);
/* How many backward records were pushed: training ran (a backward pass). */
uint64_t msp_dq_backward_records(void);
/* Close the file of `step` once everything queued before is written. */
void msp_dq_end_step(int64_t step);
/* Write out everything queued, close the last file, stop the thread. */
void msp_dq_shutdown(void);
/* In a forked child: forget the parent's thread and queue without touching them. */
void msp_dq_forget_after_fork(void);

#endif
