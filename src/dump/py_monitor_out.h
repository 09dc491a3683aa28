/* A monitored step's rows and their way out (py_monitor_out.c); see
 * py_monitor_stats.h for the three files of monitor mode. */
#ifndef MSP_PY_MONITOR_OUT_H
#define MSP_PY_MONITOR_OUT_H

#include "py_monitor_stats.h"

/* ---- py_monitor_out.c ---- */
/* Output settings once the config is read; 0, or -1 with a message given. */
int msp_mon_out_init(const msp_mon_config_t *cfg);
/* A row of this step: tensor t (NULL: none) named name; micro < 0: the task
 * has no micro_step column. Its statistics (have 1 when they are known now;
 * valid until the next row), or NULL when no row was made. */
const msp_mon_stat_t *msp_mon_row(msp_mon_task_t task, const char *name, int64_t micro,
                                  PyObject *t);
/* A row whose statistics come later (computed ahead: py_monitor_ahead.c):
 * its index, for msp_mon_row_fill before the step is written; or -1. */
int64_t msp_mon_row_later(msp_mon_task_t task, const char *name, int64_t micro);
void msp_mon_row_fill(int64_t row, const msp_mon_stat_t *st);
/* A row whose statistics are known already (computed by the helper thread). */
void msp_mon_row_with(msp_mon_task_t task, const char *name, int64_t micro,
                      const msp_mon_stat_t *st);
/* The end of a group of rows taken at one moment (a hook's, the step's
 * before or after the optimizer): their device statistics are launched. */
void msp_mon_rows_end(void);
/* The step's rows are complete: their device statistics read, the alerts
 * run, anomaly_detected/ written (GIL held); what is left is the CSV files:
 * a batch for msp_mon_out_write (which frees it; no Python, any thread, in
 * step order), or NULL. */
void *msp_mon_out_step(int64_t step);
void msp_mon_out_write(void *batch);
/* MSPROBE_MONITOR_PROFILE=1 (bench/monitor): the training thread's CPU time
 * spent in the monitor, by part, said at exit as a mean per written step.
 * msp_mon_clock: now (0 when off); msp_mon_spent: add what part spent since. */
enum { MSP_MON_T_HOOKS = 0, MSP_MON_T_STEP, MSP_MON_T_WRITE, MSP_MON_T_N };
int64_t msp_mon_clock(void);
void msp_mon_spent(int part, int64_t since);
/* At exit, with the tensors reduced, reused and copies counted (copies: the
 * activations copied for an in-place change, py_monitor_actv.c). */
void msp_mon_profile_report(int64_t copies);
/* Forget the rows taken (a step that is not written). */
void msp_mon_out_discard(void);

#endif
