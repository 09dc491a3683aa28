/* Small file-system and environment helpers shared by every module. */
#include "msprobe/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int msp_is_dir(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

msp_err msp_mkdirs(const char *path)
{
    if (!path || !*path)
        return msp_fail(MSP_ERR_USAGE, "empty directory path");
    char *p = strdup(path);
    if (!p)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    msp_err rc = MSP_OK;
    for (char *s = p + 1;; s++) {
        int last = (*s == '\0');
        if (*s == '/' || last) {
            char saved = *s;
            *s = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                rc = msp_fail(MSP_ERR_IO, "cannot create directory %s: %s", p, strerror(errno));
                goto cleanup;
            }
            if (!msp_is_dir(p)) {
                rc = msp_fail(MSP_ERR_IO, "cannot create directory %s: a file of that name exists",
                              p);
                goto cleanup;
            }
            *s = saved;
        }
        if (last)
            break;
    }
cleanup:
    free(p);
    return rc;
}

char *msp_parent_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    return strndup(path, slash == path ? 1 : (size_t)(slash - path));
}

int msp_env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

msp_err msp_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return msp_fail(MSP_ERR_IO, "cannot open directory %s to sync it: %s", dir,
                        strerror(errno));
    msp_err rc = MSP_OK;
    if (fsync(fd) != 0 && errno != EINVAL) /* EINVAL: a filesystem that cannot */
        rc = msp_fail(MSP_ERR_IO, "cannot sync directory %s: %s", dir, strerror(errno));
    close(fd);
    return rc;
}

/* path's type, st from stat or fstat: MSP_OK for a regular file. */
static msp_err msp_regular_verdict(const char *path, const struct stat *st)
{
    if (S_ISREG(st->st_mode))
        return MSP_OK;
    /* a directory: IO, as reading one fails (EISDIR) */
    return msp_fail(S_ISDIR(st->st_mode) ? MSP_ERR_IO : MSP_ERR_USAGE,
                    "%s: not a regular file (a %s): refused", path,
                    S_ISDIR(st->st_mode)    ? "directory"
                    : S_ISFIFO(st->st_mode) ? "FIFO, which would block"
                    : S_ISSOCK(st->st_mode) ? "socket"
                                            : "device, which may never end");
}

msp_err msp_check_regular(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return msp_fail(errno == ENOENT || errno == ENOTDIR ? MSP_ERR_NOT_FOUND : MSP_ERR_IO,
                        "cannot open %s: %s", path, strerror(errno));
    return msp_regular_verdict(path, &st);
}

msp_err msp_open_regular(const char *path, int *fd)
{
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (*fd < 0)
        return msp_fail(errno == ENOENT || errno == ENOTDIR ? MSP_ERR_NOT_FOUND : MSP_ERR_IO,
                        "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    msp_err rc = MSP_OK;
    if (fstat(*fd, &st) != 0)
        rc = msp_fail(MSP_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    else
        rc = msp_regular_verdict(path, &st);
    if (!rc && fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) & ~O_NONBLOCK) != 0)
        rc = msp_fail(MSP_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    if (rc) {
        close(*fd);
        *fd = -1;
    }
    return rc;
}

msp_err msp_fopen_regular(const char *path, const char *mode, FILE **f)
{
    int fd;
    msp_err rc = msp_open_regular(path, &fd);
    *f = NULL;
    if (rc)
        return rc;
    if (!(*f = fdopen(fd, mode))) {
        rc = msp_fail(MSP_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        close(fd);
    }
    return rc;
}

msp_err msp_read_file(const char *path, size_t max_bytes, char **out, size_t *len)
{
    *out = NULL;
    if (len)
        *len = 0;
    FILE *f;
    msp_err rc = msp_fopen_regular(path, "rb", &f);
    if (rc)
        return rc;
    /* At most max_bytes + 1: reading one byte past the limit is how a
     * file of exactly max_bytes is told from a larger one. */
    msp_buf_t b = {.max = max_bytes < SIZE_MAX ? max_bytes + 1 : 0, .first = 4097};
    for (;;) {
        size_t room;
        char *at = msp_buf_room(&b, 4096, &room);
        if (!at) {
            rc = b.too_big ? msp_fail(MSP_ERR_LIMIT, "%s is larger than %zu bytes", path, max_bytes)
                           : msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", path);
            goto cleanup;
        }
        size_t got = fread(at, 1, room, f);
        msp_buf_grew(&b, got);
        if (got == 0) {
            if (ferror(f))
                rc = msp_fail(MSP_ERR_IO, "cannot read %s: %s", path, strerror(errno));
            break;
        }
    }
    if (rc == MSP_OK) {
        *out = b.data;
        if (len)
            *len = b.len;
        b.data = NULL;
    }
cleanup:
    msp_buf_free(&b);
    fclose(f);
    return rc;
}

/* The temp names handed out and not yet committed or discarded, for
 * msp_atomic_unlink_pending: a signal handler may read them at any moment,
 * so a slot is claimed (FREE -> BUSY), filled, and only then marked FULL;
 * the handler unlinks FULL slots alone. A name that finds no free slot is
 * simply not removed on a signal. */
#define MSP_PENDING_SLOTS 16
enum { MSP_SLOT_FREE = 0, MSP_SLOT_BUSY = 1, MSP_SLOT_FULL = 2 };
static struct {
    int state;
    char path[4096];
} msp_pending[MSP_PENDING_SLOTS];

static void msp_pending_add(const char *tmp)
{
    if (strlen(tmp) >= sizeof msp_pending[0].path)
        return;
    for (int i = 0; i < MSP_PENDING_SLOTS; i++) {
        int want = MSP_SLOT_FREE;
        if (!__atomic_compare_exchange_n(&msp_pending[i].state, &want, MSP_SLOT_BUSY, 0,
                                         __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            continue;
        strcpy(msp_pending[i].path, tmp);
        __atomic_store_n(&msp_pending[i].state, MSP_SLOT_FULL, __ATOMIC_RELEASE);
        return;
    }
}

static void msp_pending_drop(const char *tmp)
{
    for (int i = 0; tmp && i < MSP_PENDING_SLOTS; i++) {
        int want = MSP_SLOT_FULL;
        if (__atomic_load_n(&msp_pending[i].state, __ATOMIC_ACQUIRE) != MSP_SLOT_FULL ||
            strcmp(msp_pending[i].path, tmp) != 0 ||
            !__atomic_compare_exchange_n(&msp_pending[i].state, &want, MSP_SLOT_BUSY, 0,
                                         __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            continue;
        __atomic_store_n(&msp_pending[i].state, MSP_SLOT_FREE, __ATOMIC_RELEASE);
        return;
    }
}

void msp_atomic_unlink_pending(void)
{
    for (int i = 0; i < MSP_PENDING_SLOTS; i++)
        if (__atomic_load_n(&msp_pending[i].state, __ATOMIC_ACQUIRE) == MSP_SLOT_FULL)
            unlink(msp_pending[i].path);
}

char *msp_atomic_tmp_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *tmp = slash ? msp_asprintf("%.*s/.%s.tmp.%ld", (int)(slash - path), path, slash + 1,
                                     (long)getpid())
                      : msp_asprintf(".%s.tmp.%ld", path, (long)getpid());
    if (tmp)
        msp_pending_add(tmp);
    return tmp;
}

msp_err msp_atomic_commit(const char *tmp, const char *path)
{
    if (rename(tmp, path) == 0) {
        msp_pending_drop(tmp);
        return MSP_OK;
    }
    msp_err rc = msp_fail(MSP_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    unlink(tmp);
    msp_pending_drop(tmp);
    return rc;
}

void msp_atomic_discard(const char *tmp)
{
    if (tmp) {
        unlink(tmp);
        msp_pending_drop(tmp);
    }
}

msp_err msp_write_file_atomic(const char *path, const void *data, size_t len)
{
    msp_err rc = MSP_OK;
    int fd = -1;
    char *tmp = msp_atomic_tmp_name(path);
    if (!tmp)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        rc = msp_fail(MSP_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
        goto cleanup;
    }
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            rc = msp_fail(MSP_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
            goto cleanup;
        }
        p += w;
        len -= (size_t)w;
    }
    int closed = close(fd);
    fd = -1;
    if (closed != 0) {
        rc = msp_fail(MSP_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
        goto cleanup;
    }
    rc = msp_atomic_commit(tmp, path);
    free(tmp);
    return rc;
cleanup:
    if (fd >= 0)
        close(fd);
    msp_atomic_discard(tmp);
    free(tmp);
    return rc;
}

/* "00".."99": two digits a division by 100 (issue 42: a digit a division,
 * then a reversed copy, were 2.6 % of a statistics compare) */
static const char msp_digit_pairs[] = "00010203040506070809101112131415161718192021222324"
                                      "25262728293031323334353637383940414243444546474849"
                                      "50515253545556575859606162636465666768697071727374"
                                      "75767778798081828384858687888990919293949596979899";

size_t msp_u64_digits(char *p, uint64_t v)
{
    size_t n = 1;
    for (uint64_t ten = 10; n < 20 && v >= ten; ten *= 10)
        n++;
    size_t i = n;
    while (v >= 100) {
        unsigned r = (unsigned)(v % 100);
        v /= 100;
        p[--i] = msp_digit_pairs[2 * r + 1];
        p[--i] = msp_digit_pairs[2 * r];
    }
    if (v >= 10) {
        p[--i] = msp_digit_pairs[2 * v + 1];
        p[--i] = msp_digit_pairs[2 * v];
    } else {
        p[--i] = (char)('0' + v);
    }
    return n;
}

size_t msp_i64_digits(char *p, int64_t v)
{
    if (v >= 0)
        return msp_u64_digits(p, (uint64_t)v);
    p[0] = '-';
    return 1 + msp_u64_digits(p + 1, 0ULL - (uint64_t)v);
}

size_t msp_copy_str(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (!size)
        return n;
    size_t k = n < size ? n : size - 1;
    memcpy(dst, src, k);
    dst[k] = '\0';
    return n;
}

char *msp_asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}
