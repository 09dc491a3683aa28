/* What the files of src/monitor share and nothing else sees. */
#ifndef MSP_MON_INTERNAL_H
#define MSP_MON_INTERNAL_H

#include "msprobe/moncmp.h"

/* The series of r with s's rank, vpp, micro step, kind and name and the
 * given metric (s's own when NULL), through r's index: NULL when r has none
 * (mon_read.c). */
const msp_mon_series_t *mon_find(const msp_mon_run_t *r, const msp_mon_series_t *s,
                                 const char *metric);
/* diff / thr of pair p at index k (Inf: a difference over a threshold of 0;
 * mon_heat.c). */
double mon_ratio(const msp_mon_pair_t *p, size_t k);
/* The heat map's steps, modules and cells of a finished compare (mon_heat.c). */
msp_err mon_heat(msp_mon_cmp_t *c);

#endif
