/* msprobe's dynamic start and stop (py_monitor_dyn.c). */
#ifndef MSP_PY_MONITOR_DYN_H
#define MSP_PY_MONITOR_DYN_H

#include "dump_py.h"
#include "msprobe/monitor.h"

/* DYNAMIC_MONITOR=true (read once). */
int msp_mon_dyn_on(void);
/* 1 when path changed since the last look and now reads, with dynamic_on
 * true: *fresh holds it (the caller owns it); else 0. */
int msp_mon_dyn_poll(const char *path, msp_mon_config_t *fresh);
/* collect_times reached: the file says dynamic_on false again. */
void msp_mon_dyn_finished(const char *path);

#endif
