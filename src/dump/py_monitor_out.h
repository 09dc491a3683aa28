/* A monitored step's rows and their way out (py_monitor_out.c); see
 * py_monitor_stats.h for the three files of monitor mode. */
#ifndef MSP_PY_MONITOR_OUT_H
#define MSP_PY_MONITOR_OUT_H

#include "py_monitor_stats.h"

/* ---- py_monitor_out.c ---- */
/* Output settings once the config is read; 0, or -1 with a message given. */
int msp_mon_out_init(const msp_mon_config_t *cfg);
/* A row of this step: tensor t (NULL: none) named name; micro < 0: the task
 * has no micro_step column. */
void msp_mon_row(msp_mon_task_t task, const char *name, int64_t micro, PyObject *t);
/* The step's rows are complete: alerts, CSV files, anomaly_detected/. */
void msp_mon_out_step(int64_t step);
/* Forget the rows taken (a step that is not written). */
void msp_mon_out_discard(void);

#endif
