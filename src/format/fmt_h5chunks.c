/* A statistics dump's tables read chunk by chunk (fmt_h5chunks.h,
 * msp_table_inflate): each chunk as stored (H5Dread_chunk), inflated by
 * ISA-L, about three times as fast as libhdf5's pipeline through zlib, and
 * its rows copied member by member into the memory type, where libhdf5's
 * conversion of the packed rows copied each member through memcpy (the two
 * were two fifths of a reader helper's work on a 5,000-record file, issue
 * 42). Anything else is left to H5Dread. */
#include "fmt_h5chunks.h"
#include "fmt_internal.h" /* msp_h5_member_pair */

#include <isa-l/igzip_lib.h>
#include <stdlib.h>
#include <string.h>

#define MSP_MEMBERS_MAX 16

/* Where a member of a memory row comes from in a file row. */
struct msp_member_copy {
    size_t from, to, size;
};

/* The copies that convert rows of file type ft into memory type mt: every
 * member of mt that ft has under its name with the very same type (its
 * conversion a copy); a member ft lacks keeps its zeros, as H5Dread leaves
 * the background. -1 when a member's types differ, or there are too many. */
static int msp_member_copies(hid_t ft, hid_t mt, struct msp_member_copy *c)
{
    int nm = H5Tget_nmembers(mt), n = 0, ok = nm > 0 && nm <= MSP_MEMBERS_MAX;
    for (int i = 0; ok && i < nm; i++) {
        hid_t a, b;
        int j = msp_h5_member_pair(ft, mt, (unsigned)i, &a, &b);
        if (j < 0)
            continue;
        ok = a >= 0 && b >= 0 && H5Tequal(a, b) > 0;
        if (ok)
            c[n++] = (struct msp_member_copy){H5Tget_member_offset(ft, (unsigned)j),
                                              H5Tget_member_offset(mt, (unsigned)i),
                                              H5Tget_size(a)};
        if (a >= 0)
            H5Tclose(a);
        if (b >= 0)
            H5Tclose(b);
    }
    if (!ok)
        return -1;
    /* members next to each other in both rows: one copy (a /values row is
     * one, a /stats row six) */
    for (int i = 1; i < n; i++) /* by where they come from: a few, insertion */
        for (int k = i; k > 0 && c[k].from < c[k - 1].from; k--) {
            struct msp_member_copy t = c[k];
            c[k] = c[k - 1];
            c[k - 1] = t;
        }
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m && c[m - 1].from + c[m - 1].size == c[i].from &&
            c[m - 1].to + c[m - 1].size == c[i].to)
            c[m - 1].size += c[i].size;
        else
            c[m++] = c[i];
    }
    return m;
}

/* rows rows of fsize bytes at from into rows of size bytes at to. */
static void msp_rows_copy(unsigned char *to, size_t size, const unsigned char *from, size_t fsize,
                          size_t rows, const struct msp_member_copy *c, int nc)
{
    for (size_t r = 0; r < rows; r++, to += size, from += fsize)
        for (int k = 0; k < nc; k++) {
            unsigned char *t = to + c[k].to;
            const unsigned char *f = from + c[k].from;
            switch (c[k].size) { /* the sizes the rows have, each one move */
            case 1:
                *t = *f;
                break;
            case 4:
                memcpy(t, f, 4);
                break;
            case 8:
                memcpy(t, f, 8);
                break;
            default:
                memcpy(t, f, c[k].size);
            }
        }
}

/* The chunk at row `at` of d, stored bytes into *packed (grown, *cap its
 * size), inflated into cb bytes at plain: 1, or 0 when the chunk is not
 * there, was stored without its filter or is not one zlib stream of
 * exactly cb bytes. */
static int msp_chunk_inflate(hid_t d, hsize_t at, struct inflate_state *z, unsigned char **packed,
                             size_t *cap, unsigned char *plain, size_t cb)
{
    hsize_t stored = 0;
    uint32_t mask = 0;
    if (H5Dget_chunk_storage_size(d, &at, &stored) < 0 || stored == 0 || stored > UINT32_MAX)
        return 0;
    if (stored > *cap) {
        unsigned char *p = realloc(*packed, (size_t)stored);
        if (!p)
            return 0;
        *packed = p;
        *cap = (size_t)stored;
    }
    if (H5Dread_chunk(d, H5P_DEFAULT, &at, &mask, *packed) < 0 || mask != 0)
        return 0;
    isal_inflate_init(z);
    z->crc_flag = ISAL_ZLIB;
    z->next_in = *packed;
    z->avail_in = (uint32_t)stored;
    z->next_out = plain;
    z->avail_out = (uint32_t)cb;
    return isal_inflate(z) == ISAL_DECOMP_OK && z->block_state == ISAL_BLOCK_FINISH &&
           z->avail_out == 0 && z->avail_in == 0;
}

int msp_table_inflate(hid_t d, hid_t mt, size_t size, size_t n, void *out)
{
    hid_t dcpl = H5Dget_create_plist(d), ft = H5Dget_type(d);
    hsize_t chunk = 0;
    unsigned flags = 0, conf[4];
    size_t nconf = 4, fsize = ft >= 0 ? H5Tget_size(ft) : 0;
    int ok = dcpl >= 0 && fsize > 0 && H5Pget_layout(dcpl) == H5D_CHUNKED &&
             H5Pget_chunk(dcpl, 1, &chunk) == 1 && H5Pget_nfilters(dcpl) == 1 &&
             H5Pget_filter2(dcpl, 0, &flags, &nconf, conf, 0, NULL, NULL) == H5Z_FILTER_DEFLATE;
    /* rows as they are (same), copied member by member (nc >= 0), or
     * converted by libhdf5 */
    int same = ok && H5Tequal(ft, mt) > 0;
    struct msp_member_copy c[MSP_MEMBERS_MAX];
    int nc = ok && !same && H5Tget_class(ft) == H5T_COMPOUND && H5Tget_class(mt) == H5T_COMPOUND
                 ? msp_member_copies(ft, mt, c)
                 : -1;
    /* a chunk of no more rows than the table's, or than 1 MiB holds */
    size_t wide = fsize > size ? fsize : size, most = ((size_t)1 << 20) / wide;
    size_t cb = ok && chunk >= 1 && chunk <= (n > most ? n : most) ? (size_t)chunk * fsize : 0;
    unsigned char *packed = NULL, *plain = cb ? malloc((size_t)chunk * wide) : NULL;
    struct inflate_state *z = plain ? malloc(sizeof *z) : NULL;
    size_t cap = 0;
    ok = z != NULL;
    for (hsize_t at = 0; ok && at < n; at += chunk) {
        size_t rows = n - (size_t)at < (size_t)chunk ? n - (size_t)at : (size_t)chunk;
        unsigned char *to = (unsigned char *)out + (size_t)at * size;
        /* a whole chunk of the very rows inflates where they go */
        unsigned char *into = same && rows == chunk ? to : plain;
        ok = msp_chunk_inflate(d, at, z, &packed, &cap, into, cb);
        if (ok && into == plain && same)
            memcpy(to, plain, rows * size);
        else if (ok && nc >= 0)
            msp_rows_copy(to, size, plain, fsize, rows, c, nc);
        else if (ok && !same && (ok = H5Tconvert(ft, mt, rows, plain, to, H5P_DEFAULT) >= 0))
            memcpy(to, plain, rows * size);
    }
    free(z);
    free(plain);
    free(packed);
    if (ft >= 0)
        H5Tclose(ft);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (!ok) { /* libhdf5 starts again on the zeros it would have found */
        memset(out, 0, n * size);
        H5Eclear2(H5E_DEFAULT);
    }
    return ok;
}
