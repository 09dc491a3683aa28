/* NumPy .npy reader (the format documented in numpy.lib.format): magic
 * "\x93NUMPY", version byte pair, header length (2 bytes in v1, 4 in v2/v3),
 * then a Python dict literal with 'descr', 'fortran_order' and 'shape'. */
#include "fmt_foreign.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

void msp_raw_free(msp_raw_tensor_t *r)
{
    if (!r)
        return;
    free(r->data);
    memset(r, 0, sizeof *r);
}

static msp_dtype_t msp_npy_descr(const char *d)
{
    static const struct {
        const char *descr;
        msp_dtype_t dt;
    } map[] = {
        {"<f4", MSP_DTYPE_FLOAT32}, {"<f2", MSP_DTYPE_FLOAT16}, {"<f8", MSP_DTYPE_FLOAT64},
        {"|i1", MSP_DTYPE_INT8},    {"<i2", MSP_DTYPE_INT16},   {"<i4", MSP_DTYPE_INT32},
        {"<i8", MSP_DTYPE_INT64},   {"|u1", MSP_DTYPE_UINT8},   {"|b1", MSP_DTYPE_BOOL},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(d, map[i].descr) == 0)
            return map[i].dt;
    return MSP_DTYPE_INVALID;
}

/* The value text after 'key': in the header dict, or NULL. */
static const char *msp_npy_key(const char *h, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(h, pat);
    if (!p)
        return NULL;
    p += strlen(pat);
    while (*p == ' ' || *p == ':')
        p++;
    return p;
}

msp_err msp_foreign_open(const char *path, int *fd)
{
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    if (*fd < 0)
        return msp_fail(errno == ENOENT ? MSP_ERR_NOT_FOUND : MSP_ERR_IO, "file %s: %s", path,
                        strerror(errno));
    return MSP_OK;
}

msp_err msp_npy_load(const char *path, msp_raw_tensor_t *out)
{
    memset(out, 0, sizeof *out);
    int fd;
    msp_err rc = msp_foreign_open(path, &fd);
    return rc ? rc : msp_npy_load_fd(fd, path, out);
}

msp_err msp_npy_load_fd(int fd, const char *path, msp_raw_tensor_t *out)
{
    memset(out, 0, sizeof *out);
    msp_err rc = MSP_OK;
    char *hdr = NULL;
    FILE *fp = fdopen(fd, "rb");
    if (!fp) {
        rc = msp_fail(MSP_ERR_IO, "file %s: %s", path, strerror(errno));
        close(fd);
        return rc;
    }
    unsigned char pre[12];
    if (fread(pre, 1, 10, fp) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        rc = msp_fail(MSP_ERR_FORMAT, "file %s: not a .npy file (no \\x93NUMPY magic)", path);
        goto cleanup;
    }
    unsigned major = pre[6];
    size_t hlen;
    if (major == 1) {
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    } else if (major == 2 || major == 3) {
        if (fread(pre + 10, 1, 2, fp) != 2) {
            rc = msp_fail(MSP_ERR_FORMAT, "file %s: truncated .npy header", path);
            goto cleanup;
        }
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    } else {
        rc = msp_fail(MSP_ERR_UNSUPPORTED,
                      "file %s: .npy format version %u is not supported "
                      "(1, 2 and 3 are)",
                      path, major);
        goto cleanup;
    }
    if (hlen > (1u << 20) || !(hdr = malloc(hlen + 1)) || fread(hdr, 1, hlen, fp) != hlen) {
        rc = msp_fail(MSP_ERR_FORMAT, "file %s: truncated or oversized .npy header", path);
        goto cleanup;
    }
    hdr[hlen] = '\0';
    const char *d = msp_npy_key(hdr, "descr"), *fo = msp_npy_key(hdr, "fortran_order"),
               *sh = msp_npy_key(hdr, "shape");
    char descr[16] = "";
    if (d && *d == '\'') {
        size_t n = strcspn(d + 1, "'");
        if (n < sizeof descr)
            memcpy(descr, d + 1, n), descr[n] = '\0';
    }
    if (!d || !fo || !sh || *sh != '(') {
        rc = msp_fail(MSP_ERR_FORMAT, "file %s: .npy header lacks descr, fortran_order or shape",
                      path);
        goto cleanup;
    }
    int fortran = strncmp(fo, "True", 4) == 0;
    if (!fortran && strncmp(fo, "False", 5) != 0) {
        rc = msp_fail(MSP_ERR_FORMAT, "file %s: bad fortran_order in the .npy header", path);
        goto cleanup;
    }
    /* numpy writes '<' for little-endian, '=' never; '|' for single bytes */
    if (descr[0] == '=')
        descr[0] = '<';
    if ((out->dtype = msp_npy_descr(descr)) == MSP_DTYPE_INVALID) {
        char shown[sizeof descr];
        msp_fg_clean(shown, sizeof shown, descr);
        rc = msp_fail(MSP_ERR_UNSUPPORTED,
                      "file %s: .npy element type '%s' is not supported "
                      "(little-endian float16/32/64, int8/16/32/64, uint8, bool are)",
                      path, shown);
        goto cleanup;
    }
    out->numel = 1;
    for (const char *p = sh + 1; *p && *p != ')';) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ')')
            break;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || errno || out->ndim >= MSP_MAX_NDIM) {
            rc = msp_fail(MSP_ERR_FORMAT, "file %s: bad .npy shape", path);
            goto cleanup;
        }
        out->shape[out->ndim++] = v;
        if (v && out->numel > INT64_MAX / v) {
            rc = msp_fail(MSP_ERR_FORMAT, "file %s: .npy shape too large", path);
            goto cleanup;
        }
        out->numel *= v;
        p = end;
    }
    /* The header is not trusted with the allocation: the elements it
     * declares must be in the file (which also keeps the byte count from
     * overflowing). */
    struct stat st;
    off_t here = ftello(fp);
    size_t es = msp_dtype_size(out->dtype);
    if (fstat(fileno(fp), &st) != 0 || here < 0 || st.st_size < here ||
        (uint64_t)out->numel > (uint64_t)(st.st_size - here) / es) {
        rc = msp_fail(MSP_ERR_FORMAT,
                      "file %s: the .npy header promises %lld elements of %zu "
                      "bytes, more than the file holds (truncated?)",
                      path, (long long)out->numel, es);
        goto cleanup;
    }
    size_t nbytes = (size_t)out->numel * es;
    if (!(out->data = malloc(nbytes ? nbytes : 1))) {
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", path);
        goto cleanup;
    }
    if (fread(out->data, 1, nbytes, fp) != nbytes)
        rc = msp_fail(MSP_ERR_FORMAT,
                      "file %s: data ends before the %zu bytes its header "
                      "promises (truncated?)",
                      path, nbytes);
    if (!rc && fortran && out->ndim > 1) {
        /* numpy.save of a transposed array: column-major; gather into C order */
        unsigned char *c = malloc(nbytes ? nbytes : 1);
        if (!c) {
            rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", path);
            goto cleanup;
        }
        int64_t idx[MSP_MAX_NDIM] = {0}, fstride[MSP_MAX_NDIM];
        for (int i = 0; i < out->ndim; i++)
            fstride[i] = i == 0 ? 1 : fstride[i - 1] * out->shape[i - 1];
        for (int64_t e = 0; e < out->numel; e++) {
            int64_t off = 0;
            for (int i = 0; i < out->ndim; i++)
                off += idx[i] * fstride[i];
            memcpy(c + (size_t)e * es, (unsigned char *)out->data + (size_t)off * es, es);
            for (int i = out->ndim; i-- > 0;) {
                if (++idx[i] < out->shape[i])
                    break;
                idx[i] = 0;
            }
        }
        free(out->data);
        out->data = c;
    }
cleanup:
    free(hdr);
    fclose(fp);
    if (rc)
        msp_raw_free(out);
    return rc;
}
