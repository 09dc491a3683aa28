/* The monitor's helper thread and the statistics it computes
 * (py_monitor_ahead.c). */
#ifndef MSP_PY_MONITOR_AHEAD_H
#define MSP_PY_MONITOR_AHEAD_H

#include "py_monitor_out.h"

/* A tensor's statistics as they were at one version of it. */
typedef struct msp_mon_memo {
    PyObject *obj;   /* the tensor (a reference held), or NULL */
    int64_t version; /* its version counter when they were taken */
    int state;       /* 0 none, 1 ready (2: being computed ahead) */
    int ahead;       /* asked of the helper thread: join before reading */
    msp_mon_stat_t st;
    msp_mon_host_t h; /* what the helper reads */
    double eps;
} msp_mon_memo_t;

/* 1 with *out set when m holds t's statistics at its present version
 * (waiting for the helper thread if they are being computed); else 0. */
int msp_mon_memo_get(msp_mon_memo_t *m, PyObject *t, msp_mon_stat_t *out);
/* Drop what m holds. */
void msp_mon_memo_clear(msp_mon_memo_t *m);
/* Compute t's statistics on the helper thread, into m, while training goes
 * on (t a host tensor read in place; else nothing happens). GIL held. */
void msp_mon_ahead(msp_mon_memo_t *m, PyObject *t, double eps);
/* fn(arg) on the helper thread, after what was asked before (in the
 * calling thread now when there is no helper). fn must not touch Python. */
void msp_mon_helper(void (*fn)(void *), void *arg);
/* Wait until the helper thread has done everything asked of it. */
void msp_mon_ahead_join(void);

#endif
