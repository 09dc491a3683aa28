/* config_check: pack what makes two runs differ, and diff two packs.
 *
 * Two halves:
 *  - in-process collection, called by the dump shim's Python side (GIL held),
 *    writes a pack zip atomically at exit (and optionally at a step);
 *  - packs read back and compared by the msprobe CLI into result.xlsx.
 */
#ifndef MSPROBE_CONFIGCHECK_H
#define MSPROBE_CONFIGCHECK_H

#include "msprobe/common.h"
#include "msprobe/config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- in-process hooks (implemented in the msp_configcheck_py library) ----
 * The shim calls these from its Python side with the GIL held. They must
 * never raise into training code: failures become one "msprobe:" warning. */

/* Once at boot, when cfg->has_config_check or MSPROBE_CONFIG_CHECK is set.
 * cfg may be NULL when only MSPROBE_CONFIG_CHECK is set. Returns MSP_OK, or an
 * error with detail (the shim prints it and leaves collection off). */
msp_err msp_cc_py_boot(const msp_config_t *cfg);
/* After every outermost import statement returns (cheap when nothing new). */
void msp_cc_py_after_import(void);
/* When the shim ends step `step` (0-based). */
void msp_cc_py_step_end(int64_t step);

#ifdef __cplusplus
}
#endif
#endif
