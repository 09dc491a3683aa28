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

/* One frame of the --read answer: a type byte, a 4-byte little-endian
 * length, the bytes (fmt_contain.c, msp_contained_stream_read). */
static int msp_frame(char type, const void *p, size_t n)
{
    unsigned char hd[5] = {(unsigned char)type, (unsigned char)n, (unsigned char)(n >> 8),
                           (unsigned char)(n >> 16), (unsigned char)(n >> 24)};
    return fwrite(hd, 1, sizeof hd, stdout) == sizeof hd && fwrite(p, 1, n, stdout) == n;
}

static int msp_frame_error(msp_err rc)
{
    char *ans = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&ans, &n);
    if (m) {
        msp_wire_put_error(m, rc, msp_last_error());
        fclose(m);
    }
    if (ans && n <= 64 * 1024)
        msp_frame('X', ans, n);
    free(ans);
    fflush(stdout);
    return 2;
}

/* --read FILE RECORD ROLE: the tensor's bytes as read, a block at a time, so
 * neither this process nor the caller holds more than a block of a chunked
 * or compressed tensor. */
static int msp_send_tensor(const char *path, const char *record, const char *role)
{
    msp_dump_file_t *f;
    msp_err rc = msp_dump_open_local(path, &f);
    if (rc)
        return msp_frame_error(rc);
    const msp_record_info_t *r = NULL;
    const msp_tensor_info_t *t = NULL;
    for (size_t i = 0; i < f->n_records && !t; i++) {
        if (strcmp(f->records[i].name, record) != 0)
            continue;
        r = &f->records[i];
        for (size_t j = 0; j < r->n_tensors && !t; j++)
            if (strcmp(r->tensors[j].role, role) == 0)
                t = &r->tensors[j];
    }
    msp_tensor_stream_t *s = NULL;
    if (!t)
        rc = msp_fail(MSP_ERR_NOT_FOUND, "file %s: no tensor %s/%s", path, record, role);
    else
        rc = msp_tensor_stream_open(f, r, t, &s);
    size_t block = (size_t)1 << 20;
    unsigned char *buf = rc ? NULL : malloc(block);
    if (!rc && !buf)
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", path);
    int bad = 0;
    for (uint64_t left = rc ? 0 : (uint64_t)t->nbytes; left && !rc && !bad;) {
        size_t k = left < block ? (size_t)left : block;
        if (!(rc = msp_tensor_stream_read(s, buf, k))) {
            bad = !msp_frame('D', buf, k);
            left -= k;
        }
    }
    free(buf);
    msp_tensor_stream_close(s);
    msp_dump_close(f);
    if (rc)
        return msp_frame_error(rc);
    return !bad && fflush(stdout) == 0 ? 0 : 2;
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
    if (argc == 5 && strcmp(argv[1], "--read") == 0)
        return msp_send_tensor(argv[2], argv[3], argv[4]);
    fprintf(stderr, "msprobe-catalogue: the reader helper msprobe runs; not for direct use\n"
                    "usage: msprobe-catalogue -- FILE | --read FILE RECORD ROLE\n");
    return 2;
}
