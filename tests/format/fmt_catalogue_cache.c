/* Opens one path three times in one process, the way compare reopens a step
 * file for replay and for the report's samples, and prints the record names
 * each open listed (one line an open: "open N: name name ..." or "open N:
 * error: ..."):
 *   1. the file as given (copied from A to PATH), the reader helper running;
 *   2. the same unchanged file with MSPROBE_CATALOGUE_HELPER naming no
 *      program: only a kept catalogue can list it;
 *   3. PATH rewritten with B's bytes, the helper still missing: a changed
 *      file must not be served from what was kept for the old one.
 *   4. the helper back: B's records.
 * usage: fmt_catalogue_cache A B PATH (run with MSPROBE_READER_SERVER=0, a
 * helper per open, so that step 2 and 3 cannot reach a server started
 * before). */
#include "msprobe/format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[65536];
    size_t n;
    int ok = in && out;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
        ok = fwrite(buf, 1, n, out) == n;
    if (in)
        fclose(in);
    if (out && fclose(out) != 0)
        ok = 0;
    return ok ? 0 : -1;
}

static void list(int k, const char *path)
{
    msp_dump_file_t *f = NULL;
    printf("open %d:", k);
    if (msp_dump_open(path, &f) != MSP_OK) {
        printf(" error: %s\n", msp_last_error());
        msp_clear_error();
        return;
    }
    for (size_t i = 0; i < f->n_records; i++)
        printf(" %s", f->records[i].name);
    printf("\n");
    msp_dump_close(f);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: fmt_catalogue_cache A B PATH\n");
        return 2;
    }
    if (copy_file(argv[1], argv[3]) != 0)
        return 2;
    list(1, argv[3]);
    setenv("MSPROBE_CATALOGUE_HELPER", "/nonexistent/msprobe-catalogue", 1);
    list(2, argv[3]);
    if (copy_file(argv[2], argv[3]) != 0)
        return 2;
    list(3, argv[3]);
    unsetenv("MSPROBE_CATALOGUE_HELPER");
    list(4, argv[3]);
    return 0;
}
