/* A stdio stream for one long sequential write (result.csv: 6 GB for a
 * 1,024-rank statistics tree) that goes around the page cache where the
 * file system allows it: O_DIRECT writes of whole aligned blocks, the tail
 * written plainly. On a 2-core VM a buffered write of those 6 GB cost 3 to
 * 12 s of kernel CPU, copying each byte into a fresh cache page; the direct
 * one 0.4 s (the device reads the bytes itself), and the cache is left to
 * the reads that need it (issue 42). Where O_DIRECT is refused (tmpfs on
 * older kernels, some network and FUSE file systems), at the open or at the
 * first write, the same stream writes through the cache as fopen's would.
 * MSPROBE_DIRECT_IO=0 turns it off. */
#include "msprobe/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MSP_SEQ_ALIGN 4096     /* a multiple of every logical block size in use */
#define MSP_SEQ_BUF (1u << 20) /* bytes a write: past 1 MiB the device gains nothing */

struct msp_seqfile {
    int fd;
    int direct; /* O_DIRECT still set on fd */
    char *buf;  /* MSP_SEQ_BUF bytes, MSP_SEQ_ALIGN-aligned */
    size_t len;
};

/* Clears O_DIRECT: the rest goes through the cache. */
static int msp_seq_plain(struct msp_seqfile *s)
{
    int fl = fcntl(s->fd, F_GETFL);
    if (fl < 0 || fcntl(s->fd, F_SETFL, fl & ~O_DIRECT) != 0)
        return -1;
    s->direct = 0;
    return 0;
}

/* All of p[0, n) to the file; -1 with errno set on failure. A direct
 * write the file system refuses (EINVAL) is written again plainly. */
static int msp_seq_put(struct msp_seqfile *s, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(s->fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EINVAL && s->direct) {
            if (msp_seq_plain(s) != 0)
                return -1;
            continue;
        }
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return -1;
        }
        p += w;
        n -= (size_t)w;
        /* a short direct write leaves an unaligned rest: plainly from here */
        if (n && s->direct && ((size_t)w % MSP_SEQ_ALIGN) && msp_seq_plain(s) != 0)
            return -1;
    }
    return 0;
}

static ssize_t msp_seq_write(void *cookie, const char *p, size_t n)
{
    struct msp_seqfile *s = cookie;
    size_t done = 0;
    while (done < n) {
        size_t k = MSP_SEQ_BUF - s->len;
        if (k > n - done)
            k = n - done;
        memcpy(s->buf + s->len, p + done, k);
        s->len += k;
        done += k;
        if (s->len == MSP_SEQ_BUF) {
            if (msp_seq_put(s, s->buf, s->len) != 0)
                return -1;
            s->len = 0;
        }
    }
    return (ssize_t)n;
}

static int msp_seq_close(void *cookie)
{
    struct msp_seqfile *s = cookie;
    int rc = 0, err = 0;
    /* the tail: its whole blocks direct, the last partial one plainly */
    size_t whole = s->direct ? s->len / MSP_SEQ_ALIGN * MSP_SEQ_ALIGN : 0;
    if (whole && msp_seq_put(s, s->buf, whole) != 0)
        rc = -1, err = errno;
    if (!rc && s->len > whole && s->direct && msp_seq_plain(s) != 0)
        rc = -1, err = errno;
    if (!rc && s->len > whole && msp_seq_put(s, s->buf + whole, s->len - whole) != 0)
        rc = -1, err = errno;
    if (close(s->fd) != 0 && !rc)
        rc = -1, err = errno;
    free(s->buf);
    free(s);
    if (rc)
        errno = err;
    return rc;
}

msp_err msp_fopen_seq(const char *path, FILE **f)
{
    *f = NULL;
    struct msp_seqfile *s = calloc(1, sizeof *s);
    void *buf = NULL;
    if (!s || posix_memalign(&buf, MSP_SEQ_ALIGN, MSP_SEQ_BUF) != 0) {
        free(s);
        return msp_fail(MSP_ERR_NOMEM, "out of memory opening %s", path);
    }
    s->buf = buf;
    const char *env = getenv("MSPROBE_DIRECT_IO");
    int want = !(env && strcmp(env, "0") == 0);
    int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
    s->fd = want ? open(path, flags | O_DIRECT, 0666) : -1;
    s->direct = s->fd >= 0;
    if (s->fd < 0 && (!want || errno == EINVAL))
        s->fd = open(path, flags, 0666);
    if (s->fd < 0) {
        msp_err rc = msp_fail(MSP_ERR_IO, "cannot create %s: %s", path, strerror(errno));
        free(s->buf);
        free(s);
        return rc;
    }
    cookie_io_functions_t io = {.write = msp_seq_write, .close = msp_seq_close};
    if (!(*f = fopencookie(s, "w", io))) {
        close(s->fd);
        free(s->buf);
        free(s);
        return msp_fail(MSP_ERR_NOMEM, "out of memory opening %s", path);
    }
    return MSP_OK;
}
