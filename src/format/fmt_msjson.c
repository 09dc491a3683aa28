/* The files of a msprobe dump directory (fmt_msprobe.c), opened as every one
 * of them is (no link, a regular file, a cap on its size), and the scanner
 * that walks their JSON text member by member without building the whole
 * tree, each member parsed alone. Calls nothing of the reader's. */
#include "fmt_msjson.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MSP_MS_DEPTH_MAX 512

/* Python's json writes NaN, Infinity and -Infinity bare; cJSON refuses
 * them, so they become the strings "NaN", "Infinity", "-Infinity". */
static char *msp_ms_quote_specials(const char *in, size_t len)
{
    char *out = malloc(len * 2 + 16), *o = out;
    if (!out)
        return NULL;
    int in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = in[i];
        if (in_str) {
            *o++ = c;
            if (c == '\\' && i + 1 < len)
                *o++ = in[++i];
            else if (c == '"')
                in_str = 0;
            continue;
        }
        if (c == '"') {
            in_str = 1;
        } else {
            static const char *const tok[] = {"NaN", "Infinity", "-Infinity"};
            size_t t = 0;
            while (t < 3 && strncmp(in + i, tok[t], strlen(tok[t])) != 0)
                t++;
            if (t < 3) {
                size_t tl = strlen(tok[t]);
                *o++ = '"';
                memcpy(o, tok[t], tl);
                o += tl;
                *o++ = '"';
                i += tl - 1;
                continue;
            }
        }
        *o++ = c;
    }
    *o = '\0';
    return out;
}

/* ---- caps ------------------------------------------------------------------ */

/* A positive whole number from the environment variable name, else dflt. */
static uint64_t msp_ms_env_cap(const char *name, uint64_t dflt, uint64_t most)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end = NULL;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || *end || n == 0 || v[0] == '-')
        return dflt;
    return n > most ? most : (uint64_t)n;
}

uint64_t msp_ms_json_max_bytes(void)
{
    return msp_ms_env_cap("MSPROBE_DUMP_JSON_MAX_MB", MSP_MS_JSON_MAX_MB, (uint64_t)1 << 24) << 20;
}

size_t msp_ms_max_records(void)
{
    return (size_t)msp_ms_env_cap("MSPROBE_DUMP_JSON_MAX_RECORDS", MSP_MS_MAX_RECORDS,
                                  (uint64_t)SIZE_MAX / 1024);
}

/* ---- the files of a rank directory --------------------------------------- */

/* name under dirfd (or a path with AT_FDCWD) opened for reading, checked as
 * every file of a msprobe dump is: no link, a regular file, at most cap
 * bytes. shown names it in messages. */
msp_err msp_ms_open_file(int dirfd, const char *name, const char *shown, uint64_t cap, int *fd_out,
                         uint64_t *size)
{
    *fd_out = -1;
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ELOOP)
        return msp_fail(MSP_ERR_FORMAT,
                        "file %s: a symbolic link: refused (a dump's files "
                        "must lie inside its directory)",
                        shown);
    if (fd < 0)
        return msp_fail(errno == ENOENT || errno == ENOTDIR ? MSP_ERR_NOT_FOUND : MSP_ERR_IO,
                        "file %s: %s", shown, strerror(errno));
    struct stat st;
    msp_err rc = MSP_OK;
    if (fstat(fd, &st) != 0)
        rc = msp_fail(MSP_ERR_IO, "file %s: %s", shown, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = msp_fail(MSP_ERR_FORMAT,
                      "file %s: not a regular file (a FIFO, socket, device or "
                      "directory): refused",
                      shown);
    else if ((uint64_t)st.st_size > cap)
        rc = msp_fail(MSP_ERR_LIMIT,
                      "file %s: %lld bytes, more than the %llu such a file may "
                      "take: refused",
                      shown, (long long)st.st_size, (unsigned long long)cap);
    if (rc) {
        close(fd);
        return rc;
    }
    *fd_out = fd;
    *size = (uint64_t)st.st_size;
    return MSP_OK;
}

/* A JSON file of the dump (path) read whole, checked as above. */
msp_err msp_ms_slurp(const char *path, char **text, size_t *len)
{
    int fd;
    uint64_t size = 0;
    *text = NULL;
    *len = 0;
    uint64_t cap = msp_ms_json_max_bytes();
    msp_err rc = msp_ms_open_file(AT_FDCWD, path, path, UINT64_MAX, &fd, &size);
    if (rc)
        return rc;
    if (size > cap) { /* said before a byte is read: the size alone decides */
        close(fd);
        return msp_fail(MSP_ERR_LIMIT,
                        "file %s: %llu bytes, more than the %llu MiB a JSON file "
                        "of a msprobe dump may take: refused (MSPROBE_DUMP_JSON_MAX_MB raises "
                        "the limit)",
                        path, (unsigned long long)size, (unsigned long long)(cap >> 20));
    }
    char *buf = malloc((size_t)size + 1);
    size_t n = 0;
    if (!buf)
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for %llu bytes", path,
                      (unsigned long long)size);
    while (!rc && n < size) { /* a file that shrinks meanwhile is read as it now is */
        ssize_t k = read(fd, buf + n, (size_t)size - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            rc = msp_fail(MSP_ERR_IO, "file %s: %s", path, strerror(errno));
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    close(fd);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return MSP_OK;
}

/* ---- a scanner for the structure of a JSON text ---------------------------- */

void msp_js_ws(struct msp_js *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static int msp_js_string(struct msp_js *s)
{
    if (s->p >= s->end || *s->p != '"')
        return -1;
    for (s->p++; s->p < s->end;) {
        unsigned char c = (unsigned char)*s->p++;
        if (c == '"')
            return 0;
        if (c == '\\') {
            if (s->p >= s->end)
                return -1;
            s->p++;
        } else if (c < 0x20) {
            return -1;
        }
    }
    return -1;
}

static int msp_js_value(struct msp_js *s)
{
    msp_js_ws(s);
    if (s->p >= s->end)
        return -1;
    char open = *s->p;
    if (open == '"')
        return msp_js_string(s);
    if (open != '{' && open != '[') {
        const char *start = s->p;
        while (s->p < s->end &&
               (isalnum((unsigned char)*s->p) || *s->p == '+' || *s->p == '-' || *s->p == '.'))
            s->p++;
        return s->p > start ? 0 : -1;
    }
    if (++s->depth > MSP_MS_DEPTH_MAX)
        return -1;
    char close = open == '{' ? '}' : ']';
    s->p++;
    msp_js_ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        s->depth--;
        return 0;
    }
    for (;;) {
        if (open == '{') {
            msp_js_ws(s);
            if (msp_js_string(s))
                return -1;
            msp_js_ws(s);
            if (s->p >= s->end || *s->p != ':')
                return -1;
            s->p++;
        }
        if (msp_js_value(s))
            return -1;
        msp_js_ws(s);
        if (s->p >= s->end)
            return -1;
        if (*s->p == ',') {
            s->p++;
            continue;
        }
        if (*s->p != close)
            return -1;
        s->p++;
        s->depth--;
        return 0;
    }
}

int msp_js_members(struct msp_js *s, msp_js_member_fn fn, void *ud, msp_err *rc)
{
    *rc = MSP_OK;
    msp_js_ws(s);
    if (s->p >= s->end || *s->p != '{')
        return 1;
    s->p++;
    msp_js_ws(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return 0;
    }
    s->depth++;
    for (;;) {
        msp_js_ws(s);
        const char *key = s->p;
        if (msp_js_string(s))
            return 1;
        msp_js_ws(s);
        if (s->p >= s->end || *s->p != ':')
            return 1;
        s->p++;
        msp_js_ws(s);
        const char *value = s->p;
        if (msp_js_value(s))
            return 1;
        if ((*rc = fn(key, s->p, value, ud)))
            return 0;
        msp_js_ws(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            continue;
        }
        if (s->p < s->end && *s->p == '}') {
            s->p++;
            s->depth--;
            return 0;
        }
        return 1;
    }
}

static msp_err msp_js_count_one(const char *key, const char *end, const char *value, void *ud)
{
    (void)key;
    (void)end;
    (void)value;
    ++*(long long *)ud;
    return MSP_OK;
}

long long msp_js_count_members(struct msp_js *s)
{
    long long n = 0;
    msp_err rc;
    return msp_js_members(s, msp_js_count_one, &n, &rc) ? -1 : n;
}

/* The member key..end as an object of its own, {"key": value}, parsed (NaN
 * and friends quoted first): the tree of one member only. NULL when it does
 * not parse or is over MSP_MS_ENTRY_MAX (*too_big). */
cJSON *msp_js_member_tree(const char *key, const char *end, int *too_big)
{
    size_t n = (size_t)(end - key);
    *too_big = n > MSP_MS_ENTRY_MAX;
    if (*too_big)
        return NULL;
    char *wrapped = malloc(n + 3);
    if (!wrapped)
        return NULL;
    wrapped[0] = '{';
    memcpy(wrapped + 1, key, n);
    wrapped[n + 1] = '}';
    wrapped[n + 2] = '\0';
    char *q = msp_ms_quote_specials(wrapped, n + 2);
    free(wrapped);
    cJSON *o = q ? cJSON_Parse(q) : NULL;
    free(q);
    if (o && (!o->child || o->child->next || !o->child->string)) {
        cJSON_Delete(o);
        o = NULL;
    }
    return o;
}
