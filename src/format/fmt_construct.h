/* Private to src/format: msprobe's construct.json (each record's parent
 * module record) built from our dump's records, for msprobe export. */
#ifndef MSP_FMT_CONSTRUCT_H
#define MSP_FMT_CONSTRUCT_H

#include "msprobe/common.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* What one record says about its place: its name, its order in the step,
 * its "parent" attribute (NULL when absent) and, on a module forward record,
 * its "order_begin" (-1 when absent). The strings are copied. */
typedef struct msp_xnode {
    char *name;
    char *parent;
    int64_t order, order_begin;
} msp_xnode_t;

typedef struct msp_xconstruct {
    msp_xnode_t *v;
    size_t n, cap;
} msp_xconstruct_t;

/* Note one record (name, order, parent or NULL, order_begin or -1). */
msp_err msp_xconstruct_note(msp_xconstruct_t *c, const char *name, int64_t order,
                            const char *parent, int64_t order_begin);

/* construct.json for a dump at `level` ("L1", "L0" or "mix"): {} at L1, as
 * msprobe writes it; otherwise every noted record mapped to its parent module
 * record or null. A forward record's parent is its "parent" attribute, else
 * the innermost module forward whose [order_begin, order) holds its order
 * (statistics dumps carry no parent attribute); a backward record's is the
 * backward record of its forward's parent, when the dump holds one. Returns a
 * new object in *out, or an error. */
msp_err msp_xconstruct_build(const msp_xconstruct_t *c, const char *level, cJSON **out);

/* Free what note kept; safe on a zeroed one. */
void msp_xconstruct_free(msp_xconstruct_t *c);

#endif
