/* What every reader backend (fmt_reader.c's HDF5, fmt_msprobe.c's
 * directories, the contained helper) shares, below all of them. */
#include "fmt_internal.h"
#include "fmt_foreign.h"

#include <stdlib.h>

void msp_free_strings(char **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

msp_err msp_read_check(const msp_tensor_info_t *t, int has_data, size_t buf_size,
                       const char *where)
{
    if (!has_data)
        return msp_fail(MSP_ERR_USAGE, "%s: statistics only, no data to read", where);
    if (!t->dtype)
        return msp_fail(MSP_ERR_UNSUPPORTED, "%s: element type %s is not supported", where,
                        t->dtype_name);
    if (t->nbytes < 0 || buf_size < (size_t)t->nbytes)
        return msp_fail(MSP_ERR_USAGE, "%s: buffer of %zu bytes, need %lld", where, buf_size,
                        (long long)t->nbytes);
    return MSP_OK;
}
