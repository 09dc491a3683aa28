/* msprobe-catalogue: the reader helper (fmt_contain.c). Parses one dump file
 * with libhdf5 in this short-lived process and writes its verified catalogue
 * to stdout, or with --read the bytes of one tensor. Whatever libhdf5 does
 * with a corrupt file (crash, endless loop, huge allocation) ends here.
 *
 *   msprobe-catalogue -- FILE
 *   msprobe-catalogue --read FILE RECORD ROLE
 *
 * Not for people: msprobe runs it. Exit 0 with an answer on stdout, or 2
 * with an error message in the wire form. */
#include "fmt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* The limits a parse may use: CPU seconds and address space
 * (MSPROBE_READER_MEMORY_MB, default 4096). Under a sanitizer the address
 * space is the sanitizer's own business. */
static void msp_limit_self(void)
{
    struct rlimit cpu = {120, 121};
    setrlimit(RLIMIT_CPU, &cpu);
#if !defined(__SANITIZE_ADDRESS__) && !defined(MSP_HAS_ASAN)
    const char *e = getenv("MSPROBE_READER_MEMORY_MB");
    long mb = e ? strtol(e, NULL, 10) : 0;
    rlim_t bytes = (rlim_t)(mb >= 64 ? mb : 4096) << 20;
    struct rlimit as = {bytes, bytes};
    setrlimit(RLIMIT_AS, &as);
#endif
}

static int msp_answer_error(msp_err rc)
{
    msp_wire_put_error(stdout, rc, msp_last_error());
    return 2;
}

int main(int argc, char **argv)
{
    msp_limit_self();
    if (argc == 3 && strcmp(argv[1], "--") == 0) {
        msp_dump_file_t *f;
        msp_err rc = msp_dump_open_local(argv[2], &f);
        if (rc)
            return msp_answer_error(rc);
        int bad = msp_wire_put_file(stdout, f);
        msp_dump_close(f);
        return bad ? 2 : 0;
    }
    if (argc == 5 && strcmp(argv[1], "--read") == 0) {
        msp_dump_file_t *f;
        msp_err rc = msp_dump_open_local(argv[2], &f);
        if (rc)
            return msp_answer_error(rc);
        for (size_t i = 0; i < f->n_records; i++) {
            msp_record_info_t *r = &f->records[i];
            if (strcmp(r->name, argv[3]) != 0)
                continue;
            for (size_t j = 0; j < r->n_tensors; j++) {
                msp_tensor_info_t *t = &r->tensors[j];
                if (strcmp(t->role, argv[4]) != 0)
                    continue;
                void *buf = malloc(t->nbytes > 0 ? (size_t)t->nbytes : 1);
                rc = buf ? msp_dump_read_tensor(f, r, t, buf, (size_t)t->nbytes)
                         : msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", argv[2]);
                if (rc) {
                    free(buf);
                    msp_dump_close(f);
                    return msp_answer_error(rc);
                }
                size_t want = (size_t)t->nbytes; /* t goes with f */
                size_t n = fwrite(buf, 1, want, stdout);
                free(buf);
                msp_dump_close(f);
                return n == want && fflush(stdout) == 0 ? 0 : 2;
            }
        }
        msp_dump_close(f);
        return msp_answer_error(msp_fail(MSP_ERR_NOT_FOUND, "file %s: no tensor %s/%s", argv[2],
                                         argv[3], argv[4]));
    }
    fprintf(stderr, "msprobe-catalogue: the reader helper msprobe runs; not for direct use\n"
                    "usage: msprobe-catalogue -- FILE | --read FILE RECORD ROLE\n");
    return 2;
}
