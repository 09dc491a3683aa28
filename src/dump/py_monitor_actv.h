/* Activations and their gradients for monitor mode (py_monitor_actv.c). */
#ifndef MSP_PY_MONITOR_ACTV_H
#define MSP_PY_MONITOR_ACTV_H

#include "py_monitor_out.h"

/* The global module hooks xy_distribution asks for, armed; rows are made
 * while *collect is set (the step is written). */
void msp_mon_actv_install(const msp_mon_config_t *cfg, const int *collect);
/* Registers the hooks (on) or removes them (off): armed for written steps
 * only, so that the others run as plain training. No-op before install. */
void msp_mon_actv_arm(int on);
/* How many tensors the hooks copied for an in-place change, so far. */
int64_t msp_mon_actv_copies(void);
/* The model's modules: a dict module -> b"name" (borrowed; kept). */
void msp_mon_actv_model(PyObject *modules);

#endif
