/* The --mapping file parser against hostile input. Two builds of one file:
 *  - libFuzzer:  clang -g -D_GNU_SOURCE -DMSP_LIBFUZZER -fsanitize=fuzzer,address,undefined
 *                -Iinclude -Ibuild/include -Isrc/compare -Itests/common tests/compare/cmp_mapping_fuzz.c
 *                src/compare/cmp_mapping.c src/common/{error,fsutil,grow,log,yaml}.c -lyaml -lm
 *                (start it from a copy of tests/fuzz/seeds/mapping)
 *  - ctest:      a deterministic mutation run over a small corpus (argv[1] = iterations).
 * Invariants: the result is MSP_OK or MSP_ERR_USAGE; an error names the file and
 * line ("path:N:") and leaves no entries; a success holds only non-empty names
 * free of blanks and '#', at most one pair per line or per ':' (a YAML flow
 * mapping holds many on one line). Anything else aborts. */
#include "cmp_internal.h"
#include "msp_rand.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[256];

static void check(int ok, const char *what, const unsigned char *data, size_t len)
{
    if (!ok) {
        fprintf(stderr, "cmp_mapping_fuzz: invariant broken: %s\ninput (%zu bytes): %.*s\n", what,
                len, (int)len, (const char *)data);
        abort();
    }
}

static void one(const unsigned char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        perror("cmp_mapping_fuzz: cannot write the input file");
        exit(2);
    }
    size_t lines = 1, colons = 0;
    for (size_t i = 0; i < len; i++) {
        lines += data[i] == '\n';
        colons += data[i] == ':';
    }
    cmp_mapping_t m = {0};
    msp_err rc = cmp_mapping_load(path, &m);
    if (rc != MSP_OK) {
        check(rc == MSP_ERR_USAGE, "error other than MSP_ERR_USAGE", data, len);
        check(strncmp(msp_last_error(), "mapping file ", 13) == 0 &&
                  strstr(msp_last_error(), path) != NULL,
              "detail does not name the file", data, len);
        check(m.n == 0 && m.e == NULL, "entries left after an error", data, len);
        return;
    }
    check(m.n <= lines + colons, "more pairs than lines and colons", data, len);
    for (size_t i = 0; i < m.n; i++) {
        const char *names[2] = {m.e[i].bench, m.e[i].cmp};
        for (int k = 0; k < 2; k++) {
            check(names[k] && names[k][0], "empty name", data, len);
            check(strpbrk(names[k], " \t\r\n#") == NULL, "blank or '#' inside a name", data, len);
        }
    }
    cmp_mapping_free(&m);
}

#ifdef MSP_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    if (!path[0])
        snprintf(path, sizeof path, "/tmp/cmp_mapping_fuzz.%d.txt", (int)getpid());
    one(data, len);
    return 0;
}
#else
static const char *corpus[] = {
    "Functional.gelu.0.forward NPU.fast_gelu.0.forward\n",
    "# header\n\nA.a.0.forward   B.b.0.forward  # trailing\r\nC.c.1.backward\tD.d.1.backward\n",
    "only_one_name\n",
    "a b c\n",
    "",
    ("NPU.gelu.0.forward.input.0: Functional.gelu.0.forward.input.0\n"
     "'A.0.forward': \"B.0.forward\"\n"),
    "a.0.forward:\n  - [b]\nc: &x d\ne: *x\n",
    "{A.0.forward.input.0: B.0.forward.input.0, 'C.0.forward': D.0.forward}\n",
};

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 10000;
    snprintf(path, sizeof path, "/tmp/cmp_mapping_fuzz.%d.txt", (int)getpid());
    static const unsigned char alphabet[] = " \t\r\n#.a0\xff:'\"-[]{}&*";
    unsigned char buf[512];
    uint64_t x = MSP_RAND_SEED;
    for (long it = 0; it < iters; it++) {
        const char *seed = corpus[(size_t)it % (sizeof corpus / sizeof corpus[0])];
        size_t len = strlen(seed);
        memcpy(buf, seed, len);
        int edits = 1 + (int)(it % 8);
        for (int e = 0; e < edits; e++) {
            msp_xorshift64(&x);
            size_t pos = len ? (size_t)(x >> 8) % (len + 1) : 0;
            unsigned char c = alphabet[(x >> 40) % (sizeof alphabet - 1)];
            if ((x & 3) == 0 && len < sizeof buf - 1) { /* insert */
                memmove(buf + pos + 1, buf + pos, len - pos);
                buf[pos] = c;
                len++;
            } else if ((x & 3) == 1 && len) { /* delete */
                if (pos == len)
                    pos--;
                memmove(buf + pos, buf + pos + 1, len - pos - 1);
                len--;
            } else if (len) { /* replace */
                buf[pos == len ? pos - 1 : pos] = c;
            }
        }
        one(buf, len);
    }
    unlink(path);
    return 0;
}
#endif
