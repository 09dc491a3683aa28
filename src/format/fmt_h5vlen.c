/* A table with variable-length members read from the mapped file
 * (fmt_h5vlen.h, msp_table_vlen_read), for /index and its producer column.
 *
 * libhdf5 converts each string of such a table on its own: it finds the
 * string's global heap collection in its metadata cache, copies the object
 * out and mallocs the string, then frees every one again in
 * H5Dvlen_reclaim. On a file of small packed tensors that was a third of a
 * reader helper's work (issue 42). Here the table's bytes and the heap
 * collections are read where they lie in the mapped file, each collection
 * parsed once, and every string and sequence copied into one block.
 *
 * The layouts (HDF5 file format specification, "Global Heap" and
 * "Variable-length" datatype): a reference is the sequence's length (u32),
 * the collection's address (8 bytes, from the base address, the user
 * block's size) and the object's index (u32); an address of 0 is a null
 * reference. A collection is "GCOL", version 1, three reserved bytes and its
 * size (8 bytes, header included), then objects: index (u16, 0 for the free
 * space that ends them), reference count (u16), four reserved bytes, size
 * (8 bytes), then the data, padded to a multiple of 8. Anything that is not
 * exactly so (another layout, a reference outside a collection, an object
 * of another length than its reference says) is left to H5Dread. */
#include "fmt_h5vlen.h"
#include "fmt_internal.h"   /* msp_h5_member_pair, msp_h5_rd64 */
#include "msprobe/common.h" /* msp_index_t */

#include <endian.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MSP_VCOLS_MAX 24
#define MSP_VREF 16      /* a reference on disk */
#define MSP_GCOL_HEAD 16 /* a collection's header */
#define MSP_GOBJ_HEAD 16 /* an object's header */

enum { MSP_COL_FIXED, MSP_COL_STR, MSP_COL_SEQ };

/* A member of the memory row and where it comes from in a file row. */
struct msp_vcol {
    int kind;
    size_t from, to, size; /* size: of a fixed member, of a sequence's element */
};

/* A global heap collection: its objects by index (at[i] 0: no object i). */
struct msp_gcol {
    uint64_t addr;
    uint32_t nobj;
    uint64_t *at, *len; /* offset in the map, bytes */
};

/* The collections met so far, found by address through common's hash
 * index. */
struct msp_heaps {
    const unsigned char *map;
    uint64_t map_len, base;
    struct msp_gcol *c;
    size_t n, cap;
    msp_index_t ix;
};

/* The objects of the collection at p (size bytes, header checked) into g:
 * 0, or -1 when an object runs past the collection, an index repeats, or
 * the indices are so sparse that a table of them would outgrow the file. */
static int msp_gcol_parse(const unsigned char *p, uint64_t size, uint64_t at0, struct msp_gcol *g)
{
    uint32_t count = 0, most = 0;
    for (uint64_t off = MSP_GCOL_HEAD; off <= size && size - off >= MSP_GOBJ_HEAD;) {
        uint16_t idx = msp_h5_rd16(p + off);
        uint64_t osz = msp_h5_rd64(p + off + 8);
        if (!idx)
            break; /* the free space, last */
        if (osz > size - off - MSP_GOBJ_HEAD)
            return -1;
        count++;
        most = idx > most ? idx : most;
        off += MSP_GOBJ_HEAD + ((osz + 7) & ~(uint64_t)7);
    }
    if (most > 2 * count + 16)
        return -1;
    g->nobj = most + 1;
    g->at = calloc(g->nobj, sizeof *g->at);
    g->len = calloc(g->nobj, sizeof *g->len);
    if (!g->at || !g->len)
        return -1;
    for (uint64_t off = MSP_GCOL_HEAD; off <= size && size - off >= MSP_GOBJ_HEAD;) {
        uint16_t idx = msp_h5_rd16(p + off);
        uint64_t osz = msp_h5_rd64(p + off + 8);
        if (!idx)
            break;
        if (g->at[idx])
            return -1;
        g->at[idx] = at0 + off + MSP_GOBJ_HEAD;
        g->len[idx] = osz;
        off += MSP_GOBJ_HEAD + ((osz + 7) & ~(uint64_t)7);
    }
    return 0;
}

/* msp_index's equality: collection i is at the address ctx points to. */
static int msp_gcol_is(const void *ctx, size_t i)
{
    const struct msp_heaps *h = ((const void *const *)ctx)[0];
    return h->c[i].addr == *(const uint64_t *)((const void *const *)ctx)[1];
}

/* The collection at address addr (from the base), parsed on first use:
 * NULL when there is none such. */
static const struct msp_gcol *msp_gcol_get(struct msp_heaps *h, uint64_t addr)
{
    const void *key[2] = {h, &addr};
    size_t i = msp_index_find(&h->ix, msp_mix64(addr), msp_gcol_is, key);
    if (i != SIZE_MAX)
        return &h->c[i];
    if (addr > h->map_len || h->base > h->map_len - addr)
        return NULL;
    uint64_t a = h->base + addr;
    const unsigned char *p = h->map + a;
    if (h->map_len - a < MSP_GCOL_HEAD || memcmp(p, "GCOL", 4) != 0 || p[4] != 1)
        return NULL;
    uint64_t size = msp_h5_rd64(p + 8);
    if (size < MSP_GCOL_HEAD || size > h->map_len - a)
        return NULL;
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 64;
        struct msp_gcol *c = realloc(h->c, nc * sizeof *c);
        if (!c)
            return NULL;
        h->c = c;
        h->cap = nc;
    }
    struct msp_gcol *g = &h->c[h->n];
    memset(g, 0, sizeof *g);
    g->addr = addr;
    if (msp_gcol_parse(p, size, a, g)) {
        free(g->at);
        free(g->len);
        return NULL;
    }
    h->n++;
    return msp_index_put(&h->ix, msp_mix64(addr), h->n - 1) ? NULL : g;
}

static void msp_heaps_free(struct msp_heaps *h)
{
    for (size_t i = 0; i < h->n; i++) {
        free(h->c[i].at);
        free(h->c[i].len);
    }
    free(h->c);
    msp_index_free(&h->ix);
}

/* A reference's bytes: 1 with *at, *len (elements) set; 2 for a null
 * reference; 0 when it points at nothing whole of es-byte elements. *last:
 * the column's collection found last, +1 (libhdf5 writes a table's strings
 * column by column, so a column's next string is mostly in the same one). */
static int msp_vref(struct msp_heaps *h, const unsigned char *ref, size_t es, size_t *last,
                    uint64_t *at, uint64_t *len)
{
    uint32_t n = msp_h5_rd32(ref), idx = msp_h5_rd32(ref + 12);
    uint64_t addr = msp_h5_rd64(ref + 4);
    if (!addr)
        return 2;
    const struct msp_gcol *g = *last && h->c[*last - 1].addr == addr ? &h->c[*last - 1]
                                                                     : msp_gcol_get(h, addr);
    if (g)
        *last = (size_t)(g - h->c) + 1;
    if (!g || idx >= g->nobj || !g->at[idx] || g->len[idx] != (uint64_t)n * es)
        return 0;
    *at = g->at[idx];
    *len = n;
    return 1;
}

/* Whether member type t is stored as a reference (a variable-length
 * sequence or string); -1 for a type that holds one deeper down or is a
 * reference of another kind (its size on disk is not its size here). */
static int msp_is_vref(hid_t t)
{
    H5T_class_t cls = H5Tget_class(t);
    if (cls == H5T_VLEN || (cls == H5T_STRING && H5Tis_variable_str(t) > 0))
        return 1;
    if (cls == H5T_REFERENCE || cls < 0)
        return -1;
    if ((cls == H5T_COMPOUND || cls == H5T_ARRAY) && H5Tdetect_class(t, H5T_VLEN) != 0)
        return -1;
    if ((cls == H5T_COMPOUND || cls == H5T_ARRAY) && H5Tdetect_class(t, H5T_STRING) != 0)
        return -1;
    return 0;
}

/* The offset of each of ft's members in a row on disk, and the row's size
 * there: ft (from H5Dget_type) has the memory layout, where a reference
 * takes the size of a pointer or an hvl_t and every member after it moves
 * by the difference (libhdf5's H5T_set_loc). 0, or -1 for a type this does
 * not read. */
static int msp_disk_layout(hid_t ft, size_t *doff, int nf, size_t *drow)
{
    size_t moff[MSP_VCOLS_MAX], msz[MSP_VCOLS_MAX];
    int var[MSP_VCOLS_MAX], order[MSP_VCOLS_MAX];
    for (int j = 0; j < nf; j++) {
        hid_t t = H5Tget_member_type(ft, (unsigned)j);
        var[j] = t >= 0 ? msp_is_vref(t) : -1;
        msz[j] = t >= 0 ? H5Tget_size(t) : 0;
        moff[j] = H5Tget_member_offset(ft, (unsigned)j);
        if (t >= 0)
            H5Tclose(t);
        if (var[j] < 0 || !msz[j])
            return -1;
        order[j] = j;
        for (int k = j; k > 0 && moff[order[k]] < moff[order[k - 1]]; k--) {
            int x = order[k];
            order[k] = order[k - 1];
            order[k - 1] = x;
        }
    }
    int64_t shift = 0; /* memory minus disk, so far */
    for (int i = 0; i < nf; i++) {
        int j = order[i];
        if ((int64_t)moff[j] < shift)
            return -1;
        doff[j] = (size_t)((int64_t)moff[j] - shift);
        if (var[j])
            shift += (int64_t)msz[j] - MSP_VREF;
    }
    size_t size = H5Tget_size(ft);
    if (!size || (int64_t)size < shift)
        return -1;
    *drow = (size_t)((int64_t)size - shift);
    return 0;
}

/* The columns that fill mt's members from ft's rows (laid out as doff
 * says): their count, or -1 when a member's types differ. A member ft
 * lacks keeps its zeros, as H5Dread leaves the background. */
static int msp_vcols(hid_t ft, const size_t *doff, hid_t mt, struct msp_vcol *c)
{
    int nm = H5Tget_nmembers(mt), n = 0, ok = nm > 0 && nm <= MSP_VCOLS_MAX;
    for (int i = 0; ok && i < nm; i++) {
        hid_t a, b;
        int j = msp_h5_member_pair(ft, mt, (unsigned)i, &a, &b);
        if (j < 0)
            continue;
        H5T_class_t ca = a >= 0 ? H5Tget_class(a) : H5T_NO_CLASS;
        struct msp_vcol v = {MSP_COL_FIXED, doff[j], H5Tget_member_offset(mt, (unsigned)i), 0};
        if (ca == H5T_STRING && H5Tis_variable_str(a) > 0) {
            v.kind = MSP_COL_STR;
            v.size = 1;
            ok = H5Tget_class(b) == H5T_STRING && H5Tis_variable_str(b) > 0;
        } else if (ca == H5T_VLEN) {
            hid_t ba = H5Tget_super(a), bb = H5Tget_class(b) == H5T_VLEN ? H5Tget_super(b) : -1;
            v.kind = MSP_COL_SEQ;
            v.size = ba >= 0 ? H5Tget_size(ba) : 0;
            ok = ba >= 0 && bb >= 0 && v.size && H5Tequal(ba, bb) > 0 && msp_is_vref(ba) == 0;
            if (ba >= 0)
                H5Tclose(ba);
            if (bb >= 0)
                H5Tclose(bb);
        } else {
            v.size = a >= 0 ? H5Tget_size(a) : 0;
            ok = a >= 0 && b >= 0 && v.size && msp_is_vref(a) == 0 && H5Tequal(a, b) > 0;
        }
        if (ok)
            c[n++] = v;
        if (a >= 0)
            H5Tclose(a);
        if (b >= 0)
            H5Tclose(b);
    }
    return ok ? n : -1;
}

/* Where the table's rows lie in the map: their offset, or 0 when d is not
 * stored as one unfiltered run of n rows of drow bytes inside it. */
static uint64_t msp_rows_at(hid_t d, size_t n, size_t drow, uint64_t map_len)
{
    hid_t dcpl = H5Dget_create_plist(d);
    int ok = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CONTIGUOUS && H5Pget_nfilters(dcpl) == 0 &&
             H5Pget_external_count(dcpl) == 0;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    haddr_t off = ok ? H5Dget_offset(d) : HADDR_UNDEF;
    hsize_t st = ok ? H5Dget_storage_size(d) : 0;
    if (off == HADDR_UNDEF || !off || !n || drow > UINT64_MAX / n || st != (hsize_t)n * drow ||
        off > map_len || st > map_len - off)
        return 0;
    return (uint64_t)off;
}

/* Every reference of the rows found, and the block's size for them all:
 * (size_t)-1 when one is not there whole, or when the block would outgrow
 * twice the file and 16 bytes a reference (libhdf5 writes each string once:
 * only a hostile table points many rows at one large object). */
static size_t msp_block_size(struct msp_heaps *h, const unsigned char *rows, size_t drow, size_t n,
                             const struct msp_vcol *c, int nc)
{
    size_t total = 0, last[MSP_VCOLS_MAX] = {0};
    uint64_t most = 2 * h->map_len + 16 * (uint64_t)n * (uint64_t)nc;
    for (size_t r = 0; r < n; r++, rows += drow)
        for (int k = 0; k < nc; k++) {
            if (total > most)
                return (size_t)-1;
            uint64_t at, len;
            int got = c[k].kind == MSP_COL_FIXED
                          ? 2
                          : msp_vref(h, rows + c[k].from, c[k].size, &last[k], &at, &len);
            if (!got)
                return (size_t)-1;
            if (got == 2)
                continue;
            if (c[k].kind == MSP_COL_STR)
                total += (size_t)len + 1;
            else /* each sequence on an 8-byte boundary */
                total = ((total + 7) & ~(size_t)7) + (size_t)len * c[k].size;
        }
    return total > most ? (size_t)-1 : total;
}

/* The rows into out, their strings and sequences into block (every
 * reference known good). */
static void msp_rows_fill(struct msp_heaps *h, const unsigned char *rows, size_t drow, size_t n,
                          const struct msp_vcol *c, int nc, unsigned char *out, size_t size,
                          char *block)
{
    size_t used = 0, last[MSP_VCOLS_MAX] = {0};
    for (size_t r = 0; r < n; r++, rows += drow, out += size)
        for (int k = 0; k < nc; k++) {
            unsigned char *to = out + c[k].to;
            const unsigned char *from = rows + c[k].from;
            uint64_t at = 0, len = 0;
            if (c[k].kind == MSP_COL_FIXED) {
                memcpy(to, from, c[k].size);
                continue;
            }
            if (msp_vref(h, from, c[k].size, &last[k], &at, &len) != 1)
                continue; /* null: NULL, or an empty hvl_t, as out holds */
            if (c[k].kind == MSP_COL_STR) {
                char *s = block + used;
                memcpy(s, h->map + at, (size_t)len);
                s[len] = '\0';
                used += (size_t)len + 1;
                memcpy(to, &s, sizeof s);
                continue;
            }
            used = (used + 7) & ~(size_t)7;
            hvl_t v = {(size_t)len, len ? block + used : NULL};
            memcpy(block + used, h->map + at, (size_t)len * c[k].size);
            used += (size_t)len * c[k].size;
            memcpy(to, &v, sizeof v);
        }
}

int msp_table_vlen_read(hid_t file, hid_t d, const unsigned char *map, size_t map_len, hid_t mt,
                        size_t n, void *out, char **block)
{
    *block = NULL;
    hid_t fcpl = map ? H5Fget_create_plist(file) : -1, ft = fcpl >= 0 ? H5Dget_type(d) : -1;
    hsize_t ub = 0;
    size_t sa = 0, ss = 0, drow = 0, doff[MSP_VCOLS_MAX];
    int nf = ft >= 0 && H5Tget_class(ft) == H5T_COMPOUND ? H5Tget_nmembers(ft) : -1;
    int ok = fcpl >= 0 && H5Pget_userblock(fcpl, &ub) >= 0 && H5Pget_sizes(fcpl, &sa, &ss) >= 0 &&
             sa == 8 && ss == 8 && nf > 0 && nf <= MSP_VCOLS_MAX &&
             !msp_disk_layout(ft, doff, nf, &drow);
    struct msp_vcol c[MSP_VCOLS_MAX];
    int nc = ok ? msp_vcols(ft, doff, mt, c) : -1;
    uint64_t at = nc > 0 ? msp_rows_at(d, n, drow, map_len) : 0;
    struct msp_heaps h = {map, map_len, ub, NULL, 0, 0, {0}};
    size_t total = at ? msp_block_size(&h, map + at, drow, n, c, nc) : (size_t)-1;
    char *b = total != (size_t)-1 ? malloc(total ? total : 1) : NULL;
    if (b) {
        msp_rows_fill(&h, map + at, drow, n, c, nc, out, H5Tget_size(mt), b);
        *block = b;
    }
    msp_heaps_free(&h);
    if (ft >= 0)
        H5Tclose(ft);
    if (fcpl >= 0)
        H5Pclose(fcpl);
    H5Eclear2(H5E_DEFAULT);
    return b != NULL;
}
