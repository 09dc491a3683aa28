/* The monitor mode of the shim (msprobe-monitor(1)), private to its three
 * files, each calling only those before it:
 *   py_monitor_stats.c  a tensor's statistics: host tensors in one fused pass
 *                       over their memory; device tensors reduced where they
 *                       live, all of a step's results copied in one transfer
 *   py_monitor_out.c    a step's rows: msprobe's CSV files, the alert rules,
 *                       anomaly_detected/
 *   py_monitor.c        the config, the runtime's listener (optimizer steps,
 *                       root modules) and the hooks that take the tensors */
#ifndef MSP_PY_MONITOR_STATS_H
#define MSP_PY_MONITOR_STATS_H

#include "dump_py.h"
#include "msprobe/monitor.h"

/* What msprobe calls a task: the prefix of its CSV files, and the last part
 * of a tag ("0:fc1.weight/rank0/post_grad"). */
typedef enum msp_mon_task {
    MSP_MT_ACTV = 0,
    MSP_MT_ACTV_GRAD,
    MSP_MT_GRAD_UNREDUCED,
    MSP_MT_GRAD_REDUCED,
    MSP_MT_EXP_AVG,
    MSP_MT_EXP_AVG_SQ,
    MSP_MT_PARAM_ORIGIN,
    MSP_MT_PARAM_UPDATED,
    MSP_MT_NTASKS
} msp_mon_task_t;

/* One tensor's statistics (msp_mon_op_t order), shape and dtype as msprobe
 * writes them ("[16, 8]", "torch.float32"). have 0: no tensor (a row of nan). */
typedef struct msp_mon_stat {
    double v[MSP_MON_NOPS];
    int have;
    char shape[96];
    char dtype[24];
} msp_mon_stat_t;

/* ---- py_monitor_stats.c ---- */
/* A dense host tensor of a dtype read in place: its memory, elements, dtype. */
typedef struct msp_mon_host {
    const void *p;
    int64_t n;
    int dt;
} msp_mon_host_t;
/* 1 with *h set, and s's shape and dtype, when t is such a tensor; else 0
 * (take it with msp_mon_stats_take). GIL held. */
int msp_mon_stats_host(PyObject *t, msp_mon_stat_t *s, msp_mon_host_t *h);
/* Its statistics into s: no Python, any thread. */
void msp_mon_stats_pass(const msp_mon_host_t *h, double eps, msp_mon_stat_t *s);
int msp_mon_stats_init(PyObject *torch);
/* The statistics of tensor t (borrowed) for row `row`: written into *s now
 * (host tensors), or queued to be written by msp_mon_stats_flush (device).
 * Never raises; a tensor that cannot be read leaves s->have 0. seen: the
 * kind of tensor (msp_mon_seen_t) whose recent ones may share their
 * numbers with t when t is the same memory unchanged, or -1 for none. */
typedef enum msp_mon_seen {
    MSP_MON_SEEN_ACTV = 0,
    MSP_MON_SEEN_GRAD,
    MSP_MON_SEEN_N
} msp_mon_seen_t;
void msp_mon_stats_take(PyObject *t, double eps, msp_mon_stat_t *s, size_t row, int seen);
/* How many tensors msp_mon_stats_take reduced, how many took the numbers of
 * one seen (their own tensors and the optimizer's state alike), and how many
 * of those reduced were read in pieces by two threads. */
void msp_mon_stats_counts(int64_t *passes, int64_t *reused, int64_t *pieced);
/* The end of a group of tensors taken together (a hook's, the optimizer's
 * step's): the small device tensors among them are reduced now, together,
 * before anything changes them. */
void msp_mon_stats_launch(void);
/* Every queued result, in one copy from each device, into at(row). */
void msp_mon_stats_flush(msp_mon_stat_t *(*at)(size_t row));
/* Drop what is queued (a step not written), and the tensors seen. */
void msp_mon_stats_reset(void);

#endif
