/* The rows of a big sheet (result.xlsx's summary and details), written as
 * sheet XML straight into a raw deflate stream, kept compressed in an
 * unlinked temp file until rep_book.c splices it into the workbook that
 * libxlsxwriter wrote around it.
 *
 * Why not libxlsxwriter's own rows: in constant_memory mode it writes each
 * sheet's XML to a temp file 4 KiB at a time, formats every number with
 * printf and allocates every cell, then reads the file back and deflates it
 * at zlib's default level. On a statistics tree that was most of compare's
 * time (issue 42: 88 MB of XML for 50,000 rows, the page-cache copies alone
 * 13 % of the profile). Here the XML never touches a file uncompressed,
 * integers skip printf, and the deflate is ISA-L's at level 1 (igzip:
 * zlib's level 1 was a fifth of a statistics compare's CPU, 225 MB of XML
 * in 1.2 s against 0.22 s, and zlib's output 4 % larger).
 *
 * The XML is what libxlsxwriter writes for the same cells (inline strings,
 * _xHHHH_ for control characters, xml:space="preserve" on an edge space),
 * so a reader sees the same workbook, with three differences:
 *  - texts that repeat row after row (dtypes, shapes, verdicts) are shared
 *    strings (rep_sst.c), as Excel itself writes every text;
 *  - numbers read back exactly (the shortest of 15 or 17 digits that does,
 *    msp_dtoa), where libxlsxwriter's "%.16G" may lose the last bit;
 *  - a cell right after the one before it in its row has no reference (r,
 *    optional in ECMA-376: readers place it in the next column, as
 *    openpyxl, LibreOffice, Excel and msprobe merge_result's reader do).
 *    The references were a fifth of the XML and, counting up from row to
 *    row, what deflate could not match: without them a statistics tree's
 *    rows deflate more than three times faster and 40 % smaller.
 * The stream ends with a sync flush, not a final block: the pieces around
 * it are deflated apart and the three concatenate into one deflate stream. */
#include "rep_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__SSE2__) && !defined(__SANITIZE_ADDRESS__)
#include <emmintrin.h>
#endif

#define RS_XML_CAP ((size_t)1 << 18)
#define RS_OUT_CAP ((size_t)1 << 18)

static void rs_fail(rep_sheet_t *s, int err)
{
    if (!s->err)
        s->err = err ? err : EIO;
}

/* A column's last shared string: its text (a short one), length and id.
 * A dtype, a shape or a verdict often repeats the row above; comparing it
 * with the last one skips the table's hash and lookup, an eighth of a
 * statistics workbook's rows (issue 42). */
#define RS_MEMO_LEN 47
struct rs_memo {
    long id; /* -1: none */
    size_t len;
    char text[RS_MEMO_LEN + 1];
};

void rep_deflate_start(struct isal_zstream *z, void *level_buf, uint32_t size)
{
    isal_deflate_init(z);
    z->level = 1;
    z->level_buf = level_buf;
    z->level_buf_size = size;
    z->gzip_flag = IGZIP_DEFLATE;
}

msp_err rep_sheet_open(rep_sheet_t *s, const char *dir, int ncols)
{
    memset(s, 0, sizeof *s);
    s->ncols = ncols;
    s->dir = dir;
    s->xml = malloc(RS_XML_CAP);
    s->out = malloc(RS_OUT_CAP);
    s->xml_cap = RS_XML_CAP;
    s->memo = malloc((ncols > 0 ? (size_t)ncols : 1) * sizeof *s->memo);
    s->nums = msp_num_memo_new();
    s->pcts = msp_num_memo_new();
    for (int i = 0; s->memo && i < ncols; i++)
        s->memo[i].id = -1;
    if (!s->xml || !s->out || !s->memo || !s->nums || !s->pcts) {
        rep_sheet_free(s);
        return msp_fail(MSP_ERR_NOMEM, "out of memory writing the report in %s", dir);
    }
    if (!(s->file = rep_tmpfile_named(dir, ".msprobe-rows"))) {
        msp_err rc = errno == ENOMEM
                         ? msp_fail(MSP_ERR_NOMEM, "out of memory writing the report in %s", dir)
                         : msp_fail(MSP_ERR_IO, "cannot write a temp file in %s: %s", dir,
                                    strerror(errno));
        rep_sheet_free(s);
        return rc;
    }
    /* level 1: level 6 (libxlsxwriter's) made a statistics tree's workbook a
     * fifth smaller (12.7 against 15.5 MB) for several times the CPU; raw
     * deflate, the zip entry's format */
    if (!(s->z = malloc(sizeof *s->z)) || !(s->z->level_buf = malloc(ISAL_DEF_LVL1_DEFAULT))) {
        rep_sheet_free(s);
        return msp_fail(MSP_ERR_NOMEM, "out of memory writing the report in %s", dir);
    }
    rep_deflate_start(s->z, s->z->level_buf, ISAL_DEF_LVL1_DEFAULT);
    s->crc = 0; /* zlib's crc32 of nothing, which crc32_gzip_refl continues */
    return MSP_OK;
}

/* Deflate len bytes of XML at xml into the temp file (flush: ISA-L's
 * NO_FLUSH or SYNC_FLUSH, which ends byte-aligned on an empty stored block,
 * as zlib's, so that the pieces around it concatenate); 0 or an errno. Only
 * one thread at a time runs it: the deflating thread while there is one,
 * else the writer. */
static int rs_deflate_buf(rep_sheet_t *s, const char *xml, size_t len, int flush)
{
    s->crc = crc32_gzip_refl(s->crc, (const unsigned char *)xml, (uint64_t)len);
    s->raw += len;
    struct isal_zstream *z = s->z;
    z->next_in = (uint8_t *)xml;
    z->avail_in = (uint32_t)len;
    z->flush = (uint16_t)flush;
    z->end_of_stream = 0;
    do {
        z->next_out = (uint8_t *)s->out;
        z->avail_out = (uint32_t)RS_OUT_CAP;
        if (isal_deflate(z) != COMP_OK)
            return EIO;
        size_t got = RS_OUT_CAP - z->avail_out;
        if (got && fwrite(s->out, 1, got, s->file) != got)
            return errno ? errno : EIO;
        s->comp += got;
    } while (z->avail_out == 0 || z->avail_in > 0);
    return 0;
}

/* Deflate what the XML buffer holds, on this thread. */
static void rs_deflate(rep_sheet_t *s, int flush)
{
    if (s->err)
        return;
    int err = rs_deflate_buf(s, s->xml, s->xml_len, flush);
    if (err)
        rs_fail(s, err);
    s->xml_len = 0;
}

/* ---- the deflating thread ----------------------------------------------------
 * A sheet past its first buffer of XML hands each full buffer to a thread of
 * its own, which deflates them in order while the rows go on being written:
 * deflate was a third of the workbook's time, on the thread the whole
 * report waited for (issue 42). The stream is the same one, in the same
 * order, so the bytes are those the writer would have made itself. */

#define RS_SPARES 3 /* buffers beside the writer's: at most this many wait */

struct rs_async {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t to_worker, to_writer;
    struct rs_xbuf {
        char *p;
        size_t len, cap;
    } queue[RS_SPARES], spare[RS_SPARES];
    size_t q_head, q_n, n_spare;
    int closing, err;
};

static void *rs_worker(void *arg)
{
    rep_sheet_t *s = arg;
    struct rs_async *a = s->async;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!a->q_n && !a->closing)
            pthread_cond_wait(&a->to_worker, &a->mu);
        if (!a->q_n)
            break;
        struct rs_xbuf b = a->queue[a->q_head];
        a->q_head = (a->q_head + 1) % RS_SPARES;
        a->q_n--;
        int failed = a->err;
        pthread_mutex_unlock(&a->mu);
        int err = failed ? 0 : rs_deflate_buf(s, b.p, b.len, NO_FLUSH);
        pthread_mutex_lock(&a->mu);
        if (err && !a->err)
            a->err = err;
        a->spare[a->n_spare++] = b;
        pthread_cond_signal(&a->to_writer);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

static void rs_async_free(struct rs_async *a)
{
    for (size_t i = 0; i < a->n_spare; i++)
        free(a->spare[i].p);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->to_worker);
    pthread_cond_destroy(&a->to_writer);
    free(a);
}

/* The thread and its spare buffers; 0, or -1 when the sheet deflates on
 * the writer's thread instead. */
static int rs_async_start(rep_sheet_t *s)
{
    struct rs_async *a = calloc(1, sizeof *a);
    if (!a)
        return -1;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->to_worker, NULL);
    pthread_cond_init(&a->to_writer, NULL);
    for (; a->n_spare < RS_SPARES; a->n_spare++) {
        a->spare[a->n_spare] = (struct rs_xbuf){malloc(RS_XML_CAP), 0, RS_XML_CAP};
        if (!a->spare[a->n_spare].p)
            break;
    }
    s->async = a;
    if (a->n_spare < RS_SPARES || pthread_create(&a->th, NULL, rs_worker, s) != 0) {
        s->async = NULL;
        rs_async_free(a);
        return -1;
    }
    return 0;
}

/* The full buffer to the deflating thread, a spare one back. */
static void rs_hand_off(rep_sheet_t *s)
{
    if (s->err)
        return;
    if (!s->async && rs_async_start(s) != 0) {
        rs_deflate(s, NO_FLUSH);
        return;
    }
    struct rs_async *a = s->async;
    pthread_mutex_lock(&a->mu);
    while (!a->n_spare)
        pthread_cond_wait(&a->to_writer, &a->mu);
    a->queue[(a->q_head + a->q_n++) % RS_SPARES] = (struct rs_xbuf){s->xml, s->xml_len, s->xml_cap};
    struct rs_xbuf b = a->spare[--a->n_spare];
    if (a->err)
        rs_fail(s, a->err);
    pthread_cond_signal(&a->to_worker);
    pthread_mutex_unlock(&a->mu);
    s->xml = b.p;
    s->xml_cap = b.cap;
    s->xml_len = 0;
}

/* Every handed buffer deflated, the thread gone. */
static void rs_async_stop(rep_sheet_t *s)
{
    struct rs_async *a = s->async;
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    a->closing = 1;
    pthread_cond_signal(&a->to_worker);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->th, NULL);
    if (a->err)
        rs_fail(s, a->err);
    s->async = NULL;
    rs_async_free(a);
}

/* Room for n more bytes of XML once the buffer is full or n is large: out
 * of line, so that the check every cell makes inlines (issue 42: a call
 * that saved the hand-off's registers was 3.6 % of a statistics compare). */
static __attribute__((noinline)) char *rs_room_slow(rep_sheet_t *s, size_t n)
{
    if (s->xml_len + n > s->xml_cap)
        rs_hand_off(s);
    if (n > s->xml_cap) {
        char *nv = realloc(s->xml, n);
        if (!nv) {
            rs_fail(s, ENOMEM);
            return NULL;
        }
        s->xml = nv;
        s->xml_cap = n;
    }
    return s->err ? NULL : s->xml + s->xml_len;
}

/* Room for n more bytes of XML. */
static inline char *rs_room(rep_sheet_t *s, size_t n)
{
    if (__builtin_expect(s->xml_len + n <= s->xml_cap && !s->err, 1))
        return s->xml + s->xml_len;
    return rs_room_slow(s, n);
}

static void rs_put(rep_sheet_t *s, const char *text, size_t n)
{
    char *p = rs_room(s, n);
    if (p) {
        memcpy(p, text, n);
        s->xml_len += n;
    }
}

#define RS_LIT(s, lit) rs_put((s), (lit), sizeof(lit) - 1)

size_t rep_cell_ref(char *p, int col, size_t row1)
{
    char tmp[8];
    size_t n = 0;
    unsigned c = (unsigned)col + 1;
    while (c) {
        tmp[n++] = (char)('A' + (c - 1) % 26);
        c = (c - 1) / 26;
    }
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n + msp_u64_digits(p + n, row1);
}

void rep_sheet_row(rep_sheet_t *s, size_t row0)
{
    if (s->row1)
        RS_LIT(s, "</row>");
    s->row1 = row0 + 1;
    s->next_col = 0;
    if (s->row1 > s->last_row1)
        s->last_row1 = s->row1;
    char *p = rs_room(s, 40);
    if (!p)
        return;
    size_t n = 0;
    memcpy(p, "<row r=\"", 8);
    n = 8 + msp_u64_digits(p + 8, s->row1);
    memcpy(p + n, "\">", 2);
    s->xml_len += n + 2;
}

/* '<c', ' r="REF"' unless the cell follows the row's last, and ' s="XF"'
 * when xf is not 0, at most 48 bytes. */
static size_t rs_cell_open(rep_sheet_t *s, char *p, int col, int xf)
{
    size_t n = 2;
    memcpy(p, "<c", 2);
    if (col != s->next_col) {
        memcpy(p + n, " r=\"", 4);
        n += 4 + rep_cell_ref(p + n + 4, col, s->row1);
        p[n++] = '"';
    }
    s->next_col = col + 1;
    if (xf > 0) {
        memcpy(p + n, " s=\"", 4);
        n += 4 + msp_u64_digits(p + n + 4, (uint64_t)xf);
        p[n++] = '"';
    }
    return n;
}

/* Room for a cell's opening and extra bytes after it: where it starts, its
 * opening written and *n its length; NULL after a failure. */
static char *rs_cell(rep_sheet_t *s, int col, int xf, size_t extra, size_t *n)
{
    char *p = rs_room(s, 48 + extra);
    if (p)
        *n = rs_cell_open(s, p, col, xf);
    return p;
}

void rep_sheet_num(rep_sheet_t *s, int col, double v, int xf)
{
    size_t n = 0;
    char *p = rs_cell(s, col, xf, 16 + MSP_DTOA_SIZE, &n);
    if (!p)
        return;
    memcpy(p + n, "><v>", 4);
    n += 4;
    /* an integer below 10^15 as its digits; else the shortest of 15 or 17
     * digits that reads back (msp_dtoa), where libxlsxwriter wrote 16 that
     * may not */
    int small = v > -1e15 && v < 1e15;
    int64_t iv = small ? (int64_t)v : 0;
    if (small && !((double)iv < v) && !((double)iv > v) && (iv || !signbit(v))) {
        if (iv < 0)
            p[n++] = '-';
        n += msp_u64_digits(p + n, iv < 0 ? (uint64_t)-iv : (uint64_t)iv);
    } else {
        n += msp_dtoa_memo(s->nums, v, p + n);
    }
    memcpy(p + n, "</v></c>", 8);
    s->xml_len += n + 8;
}

void rep_sheet_num_text(rep_sheet_t *s, int col, const char *text, size_t len, int xf)
{
    size_t n = 0;
    char *p = rs_cell(s, col, xf, 16 + len, &n);
    if (!p)
        return;
    memcpy(p + n, "><v>", 4);
    memcpy(p + n + 4, text, len);
    memcpy(p + n + 4 + len, "</v></c>", 8);
    s->xml_len += n + 12 + len;
}

void rep_sheet_blank(rep_sheet_t *s, int col, int xf)
{
    if (xf <= 0)
        return; /* an unformatted blank is no cell at all */
    size_t n = 0;
    char *p = rs_cell(s, col, xf, 2, &n);
    if (!p)
        return;
    memcpy(p + n, "/>", 2);
    s->xml_len += n + 2;
}

/* text (len bytes), escaped (rep_xml_escape) unless plain, into the
 * sheet's XML. */
static void rs_text(rep_sheet_t *s, const char *text, size_t len, int plain)
{
    if (plain) {
        rs_put(s, text, len);
        return;
    }
    char *p = rs_room(s, len * 7);
    if (p)
        s->xml_len += rep_xml_escape(p, text, len);
}

/* isspace's bytes in the C locale, without its table lookup a call */
static int rs_space(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

static void rs_str(rep_sheet_t *s, int col, const char *text, size_t len, int plain, int xf)
{
    if (!len) {
        rep_sheet_blank(s, col, xf);
        return;
    }
    size_t n = 0;
    char *p = rs_cell(s, col, xf, 48, &n);
    if (!p)
        return;
    int keep = rs_space(text[0]) || rs_space(text[len - 1]);
    const char *mid = keep ? " t=\"inlineStr\"><is><t xml:space=\"preserve\">"
                           : " t=\"inlineStr\"><is><t>";
    size_t ml = strlen(mid);
    memcpy(p + n, mid, ml);
    s->xml_len += n + ml;
    rs_text(s, text, len, plain);
    RS_LIT(s, "</t></is></c>");
}

/* text's length when every byte of it is plain (valid UTF-8 that needs
 * no escape); SIZE_MAX at the first byte that is not. With SSE2, sixteen
 * bytes at a time (a byte at a time was 2.7 % of a statistics compare,
 * issue 42), each load aligned, so never across a page past the NUL; not
 * under AddressSanitizer, which would see the bytes around the string. */
#if defined(__SSE2__) && !defined(__SANITIZE_ADDRESS__)
static size_t rs_plain_len(const char *text)
{
    uintptr_t at = (uintptr_t)text & ~(uintptr_t)15;
    unsigned skip = (unsigned)((uintptr_t)text - at);
    const __m128i low = _mm_set1_epi8(0x20), del = _mm_set1_epi8(0x7f);
    const __m128i amp = _mm_set1_epi8('&'), lt = _mm_set1_epi8('<'), gt = _mm_set1_epi8('>');
    for (unsigned drop = ~0u << skip;; at += 16, drop = ~0u) {
        __m128i x = _mm_load_si128((const __m128i *)at);
        /* signed: below 0x20 is the controls, NUL, and every byte >= 0x80 */
        __m128i bad = _mm_or_si128(_mm_cmplt_epi8(x, low), _mm_cmpeq_epi8(x, del));
        bad = _mm_or_si128(bad, _mm_or_si128(_mm_cmpeq_epi8(x, amp),
                                             _mm_or_si128(_mm_cmpeq_epi8(x, lt),
                                                          _mm_cmpeq_epi8(x, gt))));
        unsigned m = (unsigned)_mm_movemask_epi8(bad) & drop;
        if (m) {
            const char *stop = (const char *)at + __builtin_ctz(m);
            return *stop ? SIZE_MAX : (size_t)(stop - text);
        }
    }
}
#else
/* The bytes a cell holds as they are: printable ASCII but for the three
 * that XML escapes. Names, dtypes, shapes and numbers are nothing else. */
static const unsigned char rs_plain_byte[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0,
    /* 0x80.. */
};

static size_t rs_plain_len(const char *text)
{
    const unsigned char *p = (const unsigned char *)text;
    size_t i = 0;
    while (rs_plain_byte[p[i]])
        i++;
    return p[i] ? SIZE_MAX : i;
}
#endif

/* text in a cell: valid UTF-8, cut on a character boundary (Excel refuses
 * longer cells and an invalid byte makes the whole workbook unreadable); a
 * shared string when shared and the sheet's table takes it, else inline.
 * Plain text (most cells: one pass over it) skips the cleaning and the
 * escape, which would leave it as it is. */
static long rs_shared_id(rep_sheet_t *s, int col, const char *text, size_t len)
{
    struct rs_memo *m = col >= 0 && col < s->ncols ? &s->memo[col] : NULL;
    if (m && m->id >= 0 && m->len == len && !memcmp(m->text, text, len)) {
        rep_sst_again(s->sst);
        return m->id;
    }
    long id = rep_sst_id(s->sst, text, len);
    if (m && id >= 0 && len <= RS_MEMO_LEN) {
        m->id = id;
        m->len = len;
        memcpy(m->text, text, len);
    }
    return id;
}

static void rs_text_cell(rep_sheet_t *s, int col, const char *text, int xf, int shared)
{
    char *cut = NULL;
    text = text ? text : "";
    size_t len = rs_plain_len(text);
    int plain = len <= CMP_XLSX_MAX_STR;
    if (!plain) {
        text = msp_utf8_clean(text, CMP_XLSX_MAX_STR, &cut);
        if (!text) {
            rs_fail(s, ENOMEM);
            return;
        }
        len = strlen(text);
    }
    long id = shared && s->sst ? rs_shared_id(s, col, text, len) : -1;
    size_t n = 0;
    char *p = id < 0 ? NULL : rs_cell(s, col, xf, 48, &n);
    if (id < 0) {
        rs_str(s, col, text, len, plain, xf);
    } else if (p) {
        memcpy(p + n, " t=\"s\"><v>", 10);
        n += 10;
        n += msp_u64_digits(p + n, (uint64_t)id);
        memcpy(p + n, "</v></c>", 8);
        s->xml_len += n + 8;
    }
    if (cut)
        free(cut);
}

void rep_sheet_str(rep_sheet_t *s, int col, const char *text, int xf)
{
    rs_text_cell(s, col, text, xf, 0);
}

void rep_sheet_str_shared(rep_sheet_t *s, int col, const char *text, int xf)
{
    rs_text_cell(s, col, text, xf, 1);
}

void rep_sheet_formula_str(rep_sheet_t *s, int col, const char *formula, const char *value, int xf)
{
    size_t n = 0;
    char *p = rs_cell(s, col, xf, 48, &n);
    if (!p)
        return;
    memcpy(p + n, " t=\"str\"><f>", 12);
    s->xml_len += n + 12;
    /* libxlsxwriter drops a formula's leading '=' */
    rs_text(s, formula + (formula[0] == '='), strlen(formula + (formula[0] == '=')), 0);
    RS_LIT(s, "</f><v>");
    rs_text(s, value, strlen(value), 0);
    RS_LIT(s, "</v></c>");
}

void rep_sheet_link(rep_sheet_t *s, int col, const char *location, int xf)
{
    rep_sheet_str(s, col, location, xf);
    if (s->err)
        return;
    /* The <hyperlinks> element after the rows, kept as XML. A location is
     * ours ("details_2!A5"): a name that would need escaping gets no link. */
    if (location[strspn(location, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                  "0123456789_!$")])
        return;
    size_t need = 2 * strlen(location) + 96;
    if (s->links_len + need > s->links_cap) {
        size_t cap = (s->links_cap ? s->links_cap * 2 : 4096) + need;
        char *nv = realloc(s->links, cap);
        if (!nv) {
            rs_fail(s, ENOMEM);
            return;
        }
        s->links = nv;
        s->links_cap = cap;
    }
    /* <hyperlink ref="REF" location="LOC" display="LOC"/>, joined by hand:
     * snprintf was most of a summary row's link (issue 42) */
    char ref[32];
    size_t rl = rep_cell_ref(ref, col, s->row1), ll = strlen(location);
    char *p = s->links + s->links_len;
#define RS_PUT(text, len) (memcpy(p, text, len), p += (len))
    RS_PUT("<hyperlink ref=\"", 16);
    RS_PUT(ref, rl);
    RS_PUT("\" location=\"", 12);
    RS_PUT(location, ll);
    RS_PUT("\" display=\"", 11);
    RS_PUT(location, ll);
    RS_PUT("\"/>", 3);
#undef RS_PUT
    *p = '\0';
    s->links_len = (size_t)(p - s->links);
}

static void rs_z_free(rep_sheet_t *s)
{
    if (s->z)
        free(s->z->level_buf);
    free(s->z);
    s->z = NULL;
}

msp_err rep_sheet_end(rep_sheet_t *s)
{
    if (s->row1)
        RS_LIT(s, "</row>");
    s->row1 = 0;
    rs_async_stop(s);
    rs_deflate(s, SYNC_FLUSH); /* byte-aligned and not final: more follows */
    if (!s->err && fflush(s->file) != 0)
        rs_fail(s, errno);
    rs_z_free(s);
    if (s->err)
        return msp_fail(s->err == ENOMEM ? MSP_ERR_NOMEM : MSP_ERR_IO,
                        "its rows' temp file in %s: %s", s->dir, strerror(s->err));
    return MSP_OK;
}

void rep_sheet_free(rep_sheet_t *s)
{
    rs_async_stop(s);
    rs_z_free(s);
    if (s->file)
        fclose(s->file);
    free(s->xml);
    free(s->out);
    free(s->links);
    free(s->memo);
    msp_num_memo_free(s->nums);
    msp_num_memo_free(s->pcts);
    memset(s, 0, sizeof *s);
}
