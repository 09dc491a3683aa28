/* Test helper: SHA-256 of stdin through msprobe's config_check core, so the
 * Python tests can hold it against hashlib; with "hmac KEY", the
 * HMAC-SHA-256 keyed by KEY. With "stats DTYPE", prints the tensor statistics
 * of stdin read as that torch dtype instead. */
#include "cc_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, stdin)) > 0) {
        len += got;
        if (len == cap) {
            unsigned char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                return 2;
            }
            buf = nb;
        }
    }
    if (!buf)
        return 2;
    if (argc == 3 && strcmp(argv[1], "stats") == 0) {
        msp_cc_dtype_t dt = msp_cc_dtype_from_name(argv[2]);
        size_t es = msp_cc_dtype_size(dt);
        if (!es)
            return 2;
        msp_cc_stats_t st;
        msp_cc_tensor_stats(buf, len / es, es, dt, &st);
        printf("%d %.17g %.17g %.17g %.17g %s\n", st.valid, st.max, st.min, st.mean, st.norm,
               st.hash);
    } else {
        char hex[65];
        int bad = argc == 3 && strcmp(argv[1], "hmac") == 0
                      ? msp_cc_hmac_sha256_hex(argv[2], strlen(argv[2]), buf, len, hex)
                      : msp_cc_sha256_hex(buf, len, hex);
        if (bad) {
            free(buf);
            return 2;
        }
        puts(hex);
    }
    free(buf);
    return 0;
}
