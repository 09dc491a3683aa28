/* Reads byte strings from stdin, each preceded by a 4-byte little-endian
 * length and a 4-byte cap, and writes each cleaned (msp_utf8_clean) the same
 * way to stdout: the Python test checks it against Python's own decoder. */
#include "msprobe/common.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rd32(uint32_t *v)
{
    unsigned char b[4];
    if (fread(b, 1, 4, stdin) != 4)
        return 0;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return 1;
}

static void wr32(uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    fwrite(b, 1, 4, stdout);
}

int main(void)
{
    uint32_t n, cap;
    while (rd32(&n) && rd32(&cap)) {
        char *s = malloc((size_t)n + 1);
        if (!s || fread(s, 1, n, stdin) != n)
            return 2;
        s[n] = '\0';
        char *owned = NULL;
        const char *t = msp_utf8_clean(s, cap, &owned);
        if (!t)
            return 2;
        if (!owned && t != s)
            return 3;
        wr32((uint32_t)strlen(t));
        fwrite(t, 1, strlen(t), stdout);
        free(owned);
        free(s);
    }
    return 0;
}
