/* The shim's messages (shim_log.c): "msprobe: ..." lines to stderr or
 * MSPROBE_LOG_FILE, from any thread. No Python here: the writer thread
 * (dump_writer.c) speaks through it too. */
#ifndef MSP_SHIM_LOG_H
#define MSP_SHIM_LOG_H

#include "msprobe/common.h"

#include <stdint.h>

void msp_shim_log_init(void);
void msp_shim_msg(const char *fmt, ...) MSP_PRINTF(1, 2);
/* "msprobe: warning: ..." the first time `kind` is seen; afterwards only counted. */
void msp_shim_warn_once(const char *kind, const char *fmt, ...) MSP_PRINTF(2, 3);
/* How often `kind` fired so far. */
uint64_t msp_shim_warn_count(const char *kind);
/* At exit: one line per kind that fired more than once, with its count. */
void msp_shim_warn_summary(void);
/* A size in MiB from the environment variable `name`: dflt when it is unset
 * or empty; a value that is not a whole number from 1 to 1048576 (1 TiB)
 * costs one warning naming the variable and its value, and dflt. */
int64_t msp_env_mib(const char *name, int64_t dflt);
/* The whole number of unit (a word for the warning) in variable name, from lo
 * to hi; dflt when unset or empty, and with one warning when not such a number. */
int64_t msp_env_range(const char *name, int64_t dflt, int64_t lo, int64_t hi, const char *unit);

#endif
