/* Private to fmt_msprobe.c: what it keeps of a msprobe record besides the
 * catalogue entry, and the parser of one record (fmt_msrecord.c). */
#ifndef MSP_FMT_MSRECORD_H
#define MSP_FMT_MSRECORD_H

#include "msprobe/format.h"

#include <cjson/cJSON.h>

struct msp_ms_attr {
    char *key, *value;
};

struct msp_ms_record {
    char **files;              /* per tensor, in catalogue order: its data_name (a bare
                                  name checked when read), or NULL when no data */
    struct msp_ms_attr *attrs; /* non-tensor arguments, construct.json's parent */
    size_t n_attrs;
    const char *stack; /* stack.json, frames joined by '\n' (in the impl's pool) */
};

/* Record rec (one member of "data", parsed alone) appended to f->records
 * (room made by the caller) as the record of order `order`, its data file
 * names and attributes in mr; *saw_md5 / *saw_stats set when one of its
 * tensors has md5 / Max..Norm. dir: the dump directory. */
msp_err msp_ms_record(msp_dump_file_t *f, struct msp_ms_record *mr, const cJSON *rec,
                      const char *dir, int64_t order, int *saw_md5, int *saw_stats);

#endif
