/* Test helper: SHA-256 of stdin through msprobe's own implementation, so the
 * Python tests can hold it against hashlib (MSPROBE_NO_SHA_NI=1 selects the
 * portable path). With "stats DTYPE", prints the tensor statistics of stdin
 * read as that torch dtype instead. */
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
        printf("%d %.17g %.17g %.17g %.17g %s\n", st.valid, st.max, st.min, st.mean, st.norm, st.hash);
    } else {
        msp_cc_sha256_t s;
        char hex[65];
        msp_cc_sha256_init(&s);
        /* Odd-sized updates exercise the buffering between blocks. */
        for (size_t off = 0; off < len;) {
            size_t n = len - off < 1000 ? len - off : 1000;
            msp_cc_sha256_update(&s, buf + off, n);
            off += n;
        }
        msp_cc_sha256_hex(&s, hex);
        puts(hex);
    }
    free(buf);
    return 0;
}
