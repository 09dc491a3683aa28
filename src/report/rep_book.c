/* A workbook made whole: libxlsxwriter wrote it with placeholders for the big
 * sheets (their header row, columns, frozen pane and autofilter), rep_sheet.c
 * deflated their rows; here each placeholder's entry is rewritten as its own
 * XML with the rows and their hyperlinks spliced in, and every other entry
 * is copied as it is compressed, into a new zip archive.
 *
 * A spliced entry is three deflate pieces, concatenated: the placeholder's
 * XML up to </sheetData> (ended by a sync flush), the rows (rep_sheet.c
 * ends them so too) and the rest (the final block). Its CRC-32 is the three
 * pieces' combined. ZIP64 records are written when an entry or offset needs
 * them, or when asked for (as libxlsxwriter's use_zip64). */
#include "rep_internal.h"

#include <errno.h>
#include <isa-l/igzip_lib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

#define RB_DOS_DATE 0x21 /* 1980-01-01, as libxlsxwriter dates its entries */
#define RB_U32_MAX 0xFFFFFFFFu

typedef struct rb_entry {
    char *name;
    uint16_t method;
    uint32_t crc;
    uint64_t comp, raw, offset;
} rb_entry_t;

typedef struct rb_out {
    FILE *f;
    uint64_t at;
    int err;
    int zip64; /* every entry's records in ZIP64 form */
} rb_out_t;

static void rb_write(rb_out_t *o, const void *p, size_t n)
{
    if (o->err || !n)
        return;
    if (fwrite(p, 1, n, o->f) != n)
        o->err = errno ? errno : EIO;
    o->at += n;
}

static void rb_u16(rb_out_t *o, uint32_t v)
{
    unsigned char b[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    rb_write(o, b, 2);
}

static void rb_u32(rb_out_t *o, uint64_t v)
{
    unsigned char b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    rb_write(o, b, 4);
}

static void rb_u64(rb_out_t *o, uint64_t v)
{
    rb_u32(o, v & RB_U32_MAX);
    rb_u32(o, v >> 32);
}

static int rb_big(const rb_out_t *o, const rb_entry_t *e)
{
    return o->zip64 || e->comp >= RB_U32_MAX || e->raw >= RB_U32_MAX || e->offset >= RB_U32_MAX;
}

/* The fields the local and the central header share, from the flags to the
 * name's length. */
static void rb_fields(rb_out_t *o, const rb_entry_t *e, int big)
{
    rb_u16(o, 0); /* flags */
    rb_u16(o, e->method);
    rb_u16(o, 0); /* time */
    rb_u16(o, RB_DOS_DATE);
    rb_u32(o, e->crc);
    rb_u32(o, big ? RB_U32_MAX : e->comp);
    rb_u32(o, big ? RB_U32_MAX : e->raw);
    rb_u16(o, (uint32_t)strlen(e->name));
}

/* The local header of e, whose sizes and CRC are known before its data. */
static void rb_local(rb_out_t *o, const rb_entry_t *e)
{
    int big = rb_big(o, e);
    rb_u32(o, 0x04034b50);
    rb_u16(o, big ? 45 : 20);
    rb_fields(o, e, big);
    rb_u16(o, big ? 20 : 0);
    rb_write(o, e->name, strlen(e->name));
    if (big) {
        rb_u16(o, 1);
        rb_u16(o, 16);
        rb_u64(o, e->raw);
        rb_u64(o, e->comp);
    }
}

static void rb_central(rb_out_t *o, const rb_entry_t *e)
{
    int big = rb_big(o, e);
    rb_u32(o, 0x02014b50);
    rb_u16(o, big ? 45 : 20); /* made by */
    rb_u16(o, big ? 45 : 20); /* needed */
    rb_fields(o, e, big);
    rb_u16(o, big ? 28 : 0);
    rb_u16(o, 0); /* comment */
    rb_u16(o, 0); /* disk */
    rb_u16(o, 0); /* internal attributes */
    rb_u32(o, 0); /* external attributes */
    rb_u32(o, big ? RB_U32_MAX : e->offset);
    rb_write(o, e->name, strlen(e->name));
    if (big) {
        rb_u16(o, 1);
        rb_u16(o, 24);
        rb_u64(o, e->raw);
        rb_u64(o, e->comp);
        rb_u64(o, e->offset);
    }
}

static void rb_directory(rb_out_t *o, const rb_entry_t *v, size_t n)
{
    uint64_t start = o->at;
    for (size_t i = 0; i < n; i++)
        rb_central(o, &v[i]);
    uint64_t size = o->at - start;
    if (o->zip64 || n >= 0xFFFF || start >= RB_U32_MAX || size >= RB_U32_MAX) {
        uint64_t end64 = o->at;
        rb_u32(o, 0x06064b50);
        rb_u64(o, 44);
        rb_u16(o, 45);
        rb_u16(o, 45);
        rb_u32(o, 0);
        rb_u32(o, 0);
        rb_u64(o, n);
        rb_u64(o, n);
        rb_u64(o, size);
        rb_u64(o, start);
        rb_u32(o, 0x07064b50);
        rb_u32(o, 0);
        rb_u64(o, end64);
        rb_u32(o, 1);
    }
    rb_u32(o, 0x06054b50);
    rb_u16(o, 0);
    rb_u16(o, 0);
    rb_u16(o, n >= 0xFFFF ? 0xFFFF : (uint32_t)n);
    rb_u16(o, n >= 0xFFFF ? 0xFFFF : (uint32_t)n);
    rb_u32(o, size >= RB_U32_MAX ? RB_U32_MAX : size);
    rb_u32(o, start >= RB_U32_MAX ? RB_U32_MAX : start);
    rb_u16(o, 0);
}

/* text deflated raw at level 1 into *out: ended by a sync flush, or final.
 * ISA-L's level 1, as the rows' (rep_sheet.c): the pieces around a summary
 * sheet's rows carry its <hyperlinks>, one a record (360 KB a rank of
 * 5,000 records), and zlib's level 1 took four times the CPU for them that
 * ISA-L does, a twentieth of a 1,024-rank statistics compare (issue 42). */
static int rb_deflate(const char *text, size_t n, int final, unsigned char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    if (n > UINT32_MAX / 2)
        return -1;
    /* stored blocks at worst: 5 bytes a 64 KiB block, a header, a flush */
    size_t cap = n + n / 16 + ISAL_DEF_MAX_HDR_SIZE + 64;
    struct isal_zstream z;
    unsigned char *lb = malloc(ISAL_DEF_LVL1_SMALL);
    *out = malloc(cap);
    if (!lb || !*out) {
        free(lb);
        free(*out);
        *out = NULL;
        return -1;
    }
    rep_deflate_start(&z, lb, ISAL_DEF_LVL1_SMALL);
    z.next_in = (uint8_t *)text;
    z.avail_in = (uint32_t)n;
    z.next_out = *out;
    z.avail_out = (uint32_t)cap;
    z.flush = final ? NO_FLUSH : SYNC_FLUSH;
    z.end_of_stream = final != 0;
    int rc = isal_deflate(&z);
    int done = rc == COMP_OK && z.avail_in == 0 &&
               (final ? z.internal_state.state == ZSTATE_END : z.avail_out > 0);
    free(lb);
    if (!done) {
        free(*out);
        *out = NULL;
        return -1;
    }
    *len = cap - z.avail_out;
    return 0;
}

/* The placeholder's XML cut around its rows: *pre up to the end of its own
 * rows (the dimension set to the rows'), *post from </sheetData> on, the
 * hyperlinks put where the schema wants them. NULL: not a sheet of ours. */
static int rb_cut(const char *xml, const rep_sheet_t *rows, char **pre, char **post)
{
    *pre = *post = NULL;
    const char *end = strstr(xml, "</sheetData>");
    const char *empty = end ? NULL : strstr(xml, "<sheetData/>");
    const char *dim = strstr(xml, "<dimension ref=\"");
    const char *dim_end = dim ? strstr(dim, "\"/>") : NULL;
    if ((!end && !empty) || !dim || !dim_end || dim_end > (end ? end : empty))
        return -1;
    char last[32]; /* the last column of the last row */
    last[rep_cell_ref(last, rows->ncols > 0 ? rows->ncols - 1 : 0,
                      rows->last_row1 ? rows->last_row1 : 1)] = '\0';
    const char *cut = end ? end : empty;
    *pre = msp_asprintf("%.*sA1:%s%.*s%s", (int)(dim - xml) + 16, xml, last, (int)(cut - dim_end),
                        dim_end, end ? "" : "<sheetData>");
    const char *rest = end ? end + strlen("</sheetData>") : empty + strlen("<sheetData/>");
    const char *at = strstr(rest, "<printOptions");
    if (!at)
        at = strstr(rest, "<pageMargins");
    if (!at)
        at = strstr(rest, "</worksheet>");
    if (!at) {
        free(*pre);
        *pre = NULL;
        return -1;
    }
    if (rows->links_len) {
        /* joined by copies: vsnprintf's %.*s of a summary sheet's links
         * (megabytes) took longer than writing them (issue 42) */
        msp_buf_t b = {0};
        msp_buf_puts(&b, "</sheetData>");
        msp_buf_put(&b, rest, (size_t)(at - rest));
        msp_buf_puts(&b, "<hyperlinks>");
        msp_buf_put(&b, rows->links, rows->links_len);
        msp_buf_puts(&b, "</hyperlinks>");
        msp_buf_puts(&b, at);
        if (b.oom)
            msp_buf_free(&b);
        *post = b.data;
    } else {
        *post = msp_asprintf("</sheetData>%s", rest);
    }
    return *pre && *post ? 0 : -1;
}

/* Read entry i of za whole (decompressed): NUL-terminated. */
static char *rb_read_entry(zip_t *za, zip_uint64_t i, zip_uint64_t size)
{
    zip_file_t *zf = zip_fopen_index(za, i, 0);
    char *buf = zf ? malloc(size + 1) : NULL;
    if (buf && zip_fread(zf, buf, size) != (zip_int64_t)size) {
        free(buf);
        buf = NULL;
    }
    if (buf)
        buf[size] = '\0';
    if (zf)
        zip_fclose(zf);
    return buf;
}

/* Copy n bytes from a stdio file or a zip entry to o. */
static int rb_copy(rb_out_t *o, FILE *f, zip_file_t *zf, uint64_t n)
{
    static const size_t cap = (size_t)1 << 20;
    char *buf = malloc(cap);
    if (!buf)
        return -1;
    while (n && !o->err) {
        size_t want = n < cap ? (size_t)n : cap;
        size_t got = f ? fread(buf, 1, want, f) : (size_t)zip_fread(zf, buf, want);
        if (got != want) {
            free(buf);
            return -1;
        }
        rb_write(o, buf, got);
        n -= got;
    }
    free(buf);
    return o->err ? -1 : 0;
}

/* The rows' deflated bytes (n) from their temp file to o: in the kernel when
 * it can (one copy instead of a read and a write), else through rb_copy. */
static int rb_copy_rows(rb_out_t *o, FILE *rows, uint64_t n)
{
    if (o->err || fflush(o->f) != 0)
        return -1;
    int in = fileno(rows), out = fileno(o->f);
    off_t off = 0;
    uint64_t left = n;
    while (left) {
        ssize_t k = copy_file_range(in, &off, out, NULL,
                                    left < ((size_t)1 << 30) ? left : (size_t)1 << 30, 0);
        if (k <= 0)
            break;
        left -= (uint64_t)k;
    }
    o->at += n - left;
    if (!left)
        return fseeko(o->f, 0, SEEK_END) == 0 ? 0 : -1;
    /* a file system without it: the rest the plain way */
    if (fseeko(rows, off, SEEK_SET) != 0 || fseeko(o->f, 0, SEEK_END) != 0)
        return -1;
    return rb_copy(o, rows, NULL, left);
}

/* Entry i, one of ours: the placeholder's pieces around rows. */
static int rb_splice_entry(rb_out_t *o, zip_t *za, zip_uint64_t i, zip_uint64_t size,
                           rep_sheet_t *rows, rb_entry_t *e)
{
    char *xml = rb_read_entry(za, i, size), *pre = NULL, *post = NULL;
    unsigned char *zpre = NULL, *zpost = NULL;
    size_t lpre = 0, lpost = 0;
    int rc = -1;
    if (!xml || rb_cut(xml, rows, &pre, &post) != 0)
        goto cleanup;
    if (rb_deflate(pre, strlen(pre), 0, &zpre, &lpre) ||
        rb_deflate(post, strlen(post), 1, &zpost, &lpost))
        goto cleanup;
    size_t npre = strlen(pre), npost = strlen(post);
    uLong crc = crc32(0L, (const Bytef *)pre, (uInt)npre);
    crc = crc32_combine(crc, rows->crc, (z_off_t)rows->raw);
    crc = crc32_combine(crc, crc32(0L, (const Bytef *)post, (uInt)npost), (z_off_t)npost);
    e->method = ZIP_CM_DEFLATE;
    e->crc = (uint32_t)crc;
    e->comp = lpre + rows->comp + lpost;
    e->raw = npre + rows->raw + npost;
    rb_local(o, e);
    rb_write(o, zpre, lpre);
    if (rb_copy_rows(o, rows->file, rows->comp) != 0)
        goto cleanup;
    rb_write(o, zpost, lpost);
    rc = o->err ? -1 : 0;
cleanup:
    free(xml);
    free(pre);
    free(post);
    free(zpre);
    free(zpost);
    return rc;
}

/* An entry of the given text, deflated whole. */
static int rb_text_entry(rb_out_t *o, const char *text, size_t n, rb_entry_t *e)
{
    unsigned char *z = NULL;
    size_t lz = 0;
    if (rb_deflate(text, n, 1, &z, &lz) != 0) {
        free(z);
        return -1;
    }
    e->method = ZIP_CM_DEFLATE;
    e->crc = (uint32_t)crc32(0L, (const Bytef *)text, (uInt)n);
    e->comp = lz;
    e->raw = n;
    rb_local(o, e);
    rb_write(o, z, lz);
    free(z);
    return o->err ? -1 : 0;
}

/* [Content_Types].xml or the workbook's relationships, naming the shared
 * strings too: what goes before the closing tag. NULL for other entries. */
static const char *rb_sst_addition(const char *name, const char **close)
{
    if (!strcmp(name, "[Content_Types].xml")) {
        *close = "</Types>";
        return "<Override PartName=\"/xl/sharedStrings.xml\" ContentType=\"application/"
               "vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml\"/>";
    }
    if (!strcmp(name, "xl/_rels/workbook.xml.rels")) {
        *close = "</Relationships>";
        return "<Relationship Id=\"rIdMsprobeSst\" Type=\"http://schemas.openxmlformats.org/"
               "officeDocument/2006/relationships/sharedStrings\" Target=\"sharedStrings.xml\"/>";
    }
    return NULL;
}

/* Entry i, which names the parts, with the shared strings added. */
static int rb_sst_entry(rb_out_t *o, zip_t *za, zip_uint64_t i, zip_uint64_t size, const char *add,
                        const char *close, rb_entry_t *e)
{
    char *xml = rb_read_entry(za, i, size);
    char *at = xml ? strstr(xml, close) : NULL;
    int rc = -1;
    if (at) {
        size_t head = (size_t)(at - xml), la = strlen(add), lt = strlen(at);
        char *out = malloc(head + la + lt + 1);
        if (out) {
            memcpy(out, xml, head);
            memcpy(out + head, add, la);
            memcpy(out + head + la, at, lt + 1);
            rc = rb_text_entry(o, out, head + la + lt, e);
            free(out);
        }
    }
    free(xml);
    return rc;
}

msp_err rep_book_splice(const char *from, const char *to, const rep_splice_t *sp, size_t n_sp,
                        int zip64, const rep_sst_t *sst)
{
    int zerr = 0;
    zip_t *za = zip_open(from, ZIP_RDONLY, &zerr);
    rb_out_t o = {0};
    o.zip64 = zip64;
    rb_entry_t *v = NULL;
    zip_int64_t n = za ? zip_get_num_entries(za, 0) : -1;
    msp_err rc = MSP_OK;
    const char *what = "cannot read the workbook libxlsxwriter wrote";
    int shared = rep_sst_used(sst); /* one more entry: xl/sharedStrings.xml */
    if (n < 0 || !(v = calloc((size_t)n + 2, sizeof *v)) || !(o.f = fopen(to, "wb"))) {
        rc = msp_fail(MSP_ERR_XLSX, "cannot write %s: %s", to, n < 0 ? what : strerror(errno));
        goto cleanup;
    }
    setvbuf(o.f, NULL, _IOFBF, (size_t)1 << 20);
    size_t done = 0;
    for (zip_int64_t i = 0; i < n && !rc; i++, done++) {
        zip_stat_t st;
        rb_entry_t *e = &v[i];
        if (zip_stat_index(za, (zip_uint64_t)i, 0, &st) != 0 || !st.name ||
            !(e->name = strdup(st.name))) {
            rc = msp_fail(MSP_ERR_XLSX, "cannot write %s: %s", to, what);
            break;
        }
        e->offset = o.at;
        const rep_splice_t *mine = NULL;
        for (size_t k = 0; k < n_sp && !mine; k++)
            if (!strcmp(sp[k].entry, st.name))
                mine = &sp[k];
        int bad;
        const char *close = NULL, *add = shared ? rb_sst_addition(st.name, &close) : NULL;
        if (mine) {
            bad = rb_splice_entry(&o, za, (zip_uint64_t)i, st.size, mine->rows, e);
        } else if (add) {
            bad = rb_sst_entry(&o, za, (zip_uint64_t)i, st.size, add, close, e);
        } else {
            zip_file_t *zf = zip_fopen_index(za, (zip_uint64_t)i, ZIP_FL_COMPRESSED);
            e->method = st.comp_method;
            e->crc = st.crc;
            e->comp = st.comp_size;
            e->raw = st.size;
            rb_local(&o, e);
            bad = !zf || rb_copy(&o, NULL, zf, st.comp_size) != 0;
            if (zf)
                zip_fclose(zf);
        }
        if (bad)
            rc = msp_fail(o.err ? MSP_ERR_IO : MSP_ERR_XLSX, "cannot write %s: entry %s: %s", to,
                          st.name, o.err ? strerror(o.err) : "cannot splice its rows");
    }
    if (!rc && shared) {
        size_t len = 0;
        char *xml = rep_sst_xml(sst, &len);
        rb_entry_t *e = &v[done];
        e->offset = o.at;
        if (!xml || !(e->name = strdup("xl/sharedStrings.xml")) ||
            rb_text_entry(&o, xml, len, e) != 0)
            rc = msp_fail(o.err ? MSP_ERR_IO : MSP_ERR_NOMEM,
                          "cannot write %s: entry xl/sharedStrings.xml: %s", to,
                          o.err ? strerror(o.err) : "out of memory");
        else
            done++;
        free(xml);
    }
    if (!rc) {
        rb_directory(&o, v, done);
        if (fflush(o.f) != 0 && !o.err)
            o.err = errno ? errno : EIO;
        if (o.err)
            rc = msp_fail(MSP_ERR_IO, "cannot write %s: %s", to, strerror(o.err));
    }
cleanup:
    if (o.f && fclose(o.f) != 0 && !rc)
        rc = msp_fail(MSP_ERR_IO, "cannot write %s: %s", to, strerror(errno));
    for (zip_int64_t i = 0; v && i <= n; i++)
        free(v[i].name);
    free(v);
    if (za)
        zip_discard(za);
    return rc;
}
