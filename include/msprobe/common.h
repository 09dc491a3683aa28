/* msprobe common: error codes, error detail, logging, progress.
 *
 * Library code never prints and never exits. Functions return an msp_err;
 * on failure they also record a human-readable detail (naming the file, key
 * or record and what is wrong) retrievable with msp_last_error() on the same
 * thread. The front end decides what reaches the terminal.
 */
#ifndef MSPROBE_COMMON_H
#define MSPROBE_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "msprobe/version.h" /* MSP_VERSION, generated from CMakeLists.txt */

#if defined(__GNUC__)
#define MSP_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define MSP_PRINTF(fmt_idx, arg_idx)
#endif

/* Fixed error codes. Values are only ever appended, never renumbered. */
typedef enum msp_err {
    MSP_OK = 0,
    MSP_ERR_NOMEM = 1,       /* out of memory */
    MSP_ERR_IO = 2,          /* read/write/open failed (errno in detail) */
    MSP_ERR_NOT_FOUND = 3,   /* path, key or record does not exist */
    MSP_ERR_FORMAT = 4,      /* input file is malformed or not the expected format */
    MSP_ERR_CONFIG = 5,      /* msprobe.json invalid: unknown key, wrong type, bad value */
    MSP_ERR_USAGE = 6,       /* invalid argument from the caller or the command line */
    MSP_ERR_UNSUPPORTED = 7, /* valid but not supported (dtype, rank, version) */
    MSP_ERR_MISMATCH = 8,    /* two inputs cannot be paired (shape, dtype, layout) */
    MSP_ERR_HDF5 = 9,        /* the HDF5 library reported an error */
    MSP_ERR_ZIP = 10,        /* libzip reported an error or a pack member is hostile */
    MSP_ERR_XLSX = 11,       /* libxlsxwriter reported an error */
    MSP_ERR_PYTHON = 12,     /* a Python-side call failed inside the shim */
    MSP_ERR_LIMIT = 13,      /* a size or count limit was exceeded */
    MSP_ERR_INTERNAL = 14,   /* a bug: an invariant does not hold */
    MSP_ERR_COUNT_           /* number of codes; keep last */
} msp_err;

/* Static English text for a code; never NULL. */
const char *msp_strerror(msp_err code);

/* Record detail for the calling thread and return `code`, so callers can write
 * `return msp_fail(MSP_ERR_IO, "cannot open %s: %s", path, strerror(errno));`. */
msp_err msp_fail(msp_err code, const char *fmt, ...) MSP_PRINTF(2, 3);

/* Detail text of the last msp_fail() on this thread, or msp_strerror of the
 * last code when no detail was given, or "" if none. Valid until the next
 * msp_fail() on this thread. */
const char *msp_last_error(void);

/* Forget the last error of this thread. */
void msp_clear_error(void);

/* ---- logging ---------------------------------------------------------- */

typedef enum msp_log_level {
    MSP_LOG_ERROR = 0,
    MSP_LOG_WARN = 1,
    MSP_LOG_INFO = 2,
    MSP_LOG_DEBUG = 3
} msp_log_level_t;

/* The front end installs a sink; with none installed, library logging is dropped.
 * The sink may be called from any thread; it must be thread-safe. */
typedef void (*msp_log_fn)(msp_log_level_t level, const char *msg, void *ud);
void msp_log_set_sink(msp_log_fn fn, void *ud, msp_log_level_t max_level);
void msp_log(msp_log_level_t level, const char *fmt, ...) MSP_PRINTF(2, 3);
/* What a sink puts before a message of `level`: "error: ", "warning: ", "", "debug: ". */
const char *msp_log_prefix(msp_log_level_t level);

/* ---- progress --------------------------------------------------------- */

/* A progress bar drawn on `out` only if it is a terminal; otherwise silent.
 * Thread-safe updates; redraws at most ~10 times a second. */
typedef struct msp_progress msp_progress_t;
msp_progress_t *msp_progress_new(FILE *out, const char *label, uint64_t total);
void msp_progress_add(msp_progress_t *p, uint64_t done); /* NULL-safe */
void msp_progress_finish(msp_progress_t *p);             /* NULL-safe; frees */

/* Library code reports progress through this callback (may be NULL). */
typedef void (*msp_progress_cb)(uint64_t done_increment, void *ud);

/* ---- small utilities shared by modules -------------------------------- */

/* mkdir -p; returns MSP_ERR_IO with the failing component in the detail. */
msp_err msp_mkdirs(const char *path);
/* path opened read-only (close-on-exec) into *fd, only if it is a regular
 * file: a FIFO would block the reader, a device never end. The open itself
 * cannot block (O_NONBLOCK, cleared once the file is known to be regular).
 * MSP_ERR_NOT_FOUND when missing; "PATH: not a regular file (...): refused",
 * MSP_ERR_IO for a directory (reading one fails), MSP_ERR_USAGE for a FIFO,
 * socket or device; *fd is -1 on every error. */
msp_err msp_open_regular(const char *path, int *fd);
/* msp_open_regular as a stdio stream opened with mode ("r", "rb") into *f;
 * *f is NULL on every error (the open's, or MSP_ERR_IO naming path). */
msp_err msp_fopen_regular(const char *path, const char *mode, FILE **f);
/* path created (or truncated) as a stdio stream for one long sequential
 * write into *f, close-on-exec: whole 1 MiB blocks go straight to the device
 * (O_DIRECT) where the file system allows it, so a 6 GB report costs no
 * cache-page copies; plainly where it does not, or with MSPROBE_DIRECT_IO=0.
 * Write only (no seeks); fclose writes the tail and reports its failure with
 * errno set. *f is NULL on every error (MSP_ERR_IO naming path, NOMEM). */
msp_err msp_fopen_seq(const char *path, FILE **f);
/* The same verdict from stat(2), nothing opened: for a front end that checks
 * the files its options name before any work starts. */
msp_err msp_check_regular(const char *path);
/* Read a whole regular file (msp_open_regular; NUL-terminated) up to
 * max_bytes. Caller frees *out. */
msp_err msp_read_file(const char *path, size_t max_bytes, char **out, size_t *len);
/* Every file msprobe hands a user (reports, packs) is written under a temp
 * name and renamed into place, so a reader never sees half a file:
 * msp_atomic_tmp_name gives the name to write, ".<name>.tmp.<pid>" beside
 * path (hidden, and on the same filesystem so the rename is atomic; malloc'd,
 * NULL on out of memory); msp_atomic_commit renames it over path, removing
 * it if that fails; msp_atomic_discard removes it after a failed write
 * (NULL-safe), or forgets it once it was moved into place another way.
 * Every name ends in exactly one commit or discard. */
char *msp_atomic_tmp_name(const char *path);
msp_err msp_atomic_commit(const char *tmp, const char *path);
void msp_atomic_discard(const char *tmp);
/* Removes every temp file of a name msp_atomic_tmp_name gave that is not
 * committed or discarded yet (up to 16 at once). Async-signal-safe (it only
 * calls unlink): for a handler that ends the process on SIGTERM, so a stopped
 * command leaves no ".<name>.tmp.<pid>" behind. */
void msp_atomic_unlink_pending(void);
/* The whole of data written to path that way. */
msp_err msp_write_file_atomic(const char *path, const void *data, size_t len);
/* 1 if path is a directory, 0 otherwise. */
int msp_is_dir(const char *path);
/* The directory part of path, malloc'ed: "." when it has no '/', "/" for
 * "/name"; NULL when out of memory. */
char *msp_parent_dir(const char *path);
/* 1 when environment variable name is set to something other than "" or "0". */
int msp_env_flag(const char *name);
/* fsync a directory, so the entries made in it survive a machine crash. */
msp_err msp_sync_dir(const char *dir);
/* Room for element n (0-based) of a doubling array of elem-byte items: returns
 * the (possibly moved) array with *cap updated and the new slots zeroed, or
 * NULL on out of memory or size overflow, the array then left as it was. */
void *msp_grow(void *items, size_t *cap, size_t n, size_t elem, size_t first_cap);
/* Appends src to the text in dst (size bytes; *at its length, < size), cut
 * to fit with its NUL; *at becomes the new length. 0, or -1 when src was cut.
 * What snprintf(dst, size, "%s%s", ...) does on hot paths, without parsing
 * a format (about 1000 instructions a call in glibc). */
int msp_str_add(char *dst, size_t size, size_t *at, const char *src);
/* A 64-bit mixer for in-memory hash tables (addresses or words into slots). */
static inline uint64_t msp_mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}
/* A 64-bit hash of the text s for in-memory tables (never stored), eight
 * bytes a round (msp_mix64); seed tells apart keys that share a text. */
uint64_t msp_str_hash(const char *s, uint64_t seed);
/* Where key is, or would go, in a sorted array (lookup.c): the first i in
 * [0, n) for which before(ctx, i) is 0, or n when it holds for all; before
 * must hold for a prefix of the indexes (C++'s partition_point). The array,
 * its layout and the key are the caller's, in ctx. */
typedef int (*msp_before_fn)(const void *ctx, size_t i);
size_t msp_lower_bound(size_t n, msp_before_fn before, const void *ctx);
/* qsort(base, n, size, cmp), unless base is in cmp's order already (n - 1
 * comparisons: glibc's merge sort spends n log n / 2 on a sorted array, and
 * a dump's roles and records mostly come sorted). */
void msp_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));
/* qsort's comparison of two size_t, ascending. */
int msp_size_cmp(const void *a, const void *b);
/* A hash index (lookup.c): indexes into an array the caller owns, found by a
 * 64-bit hash of the item's key (msp_str_hash, msp_mix64) and the caller's
 * equality on an index. Open addressing, linear probing, at most half full.
 * {0} is an empty index; msp_index_free releases it. */
struct msp_index_slot {
    uint64_t hash;
    size_t idx1; /* index + 1; 0: a free slot */
};
typedef struct {
    struct msp_index_slot *slot;
    size_t cap, n;
} msp_index_t;
/* 1 when item i's key is the one ctx holds. */
typedef int (*msp_index_eq_fn)(const void *ctx, size_t i);
/* The index stored under hash h whose item eq accepts, or SIZE_MAX. */
size_t msp_index_find(const msp_index_t *t, uint64_t h, msp_index_eq_fn eq, const void *ctx);
/* Stores idx under hash h without looking for the key (the caller looked
 * first, or lets eq tell stale entries apart): 0, or -1 when out of memory,
 * the index then as it was. */
int msp_index_put(msp_index_t *t, uint64_t h, size_t idx);
/* Stores idx under hash h in place of the index eq accepts there, if any
 * (a later item with the same key wins): 0, or -1 when out of memory. */
int msp_index_set(msp_index_t *t, uint64_t h, msp_index_eq_fn eq, const void *ctx, size_t idx);
/* Room for n entries without growing: 0, or -1 when out of memory. */
int msp_index_reserve(msp_index_t *t, size_t n);
/* Empty, its memory kept; msp_index_free: its memory released, {0} again. */
void msp_index_clear(msp_index_t *t);
void msp_index_free(msp_index_t *t);
/* The decimal digits of v at p (at most 20 bytes, not terminated), as
 * printf's %llu writes them; their count. */
size_t msp_u64_digits(char *p, uint64_t v);
/* The same for a signed v, '-' first when negative (%lld's text). */
size_t msp_i64_digits(char *p, int64_t v);
/* src into dst (size bytes), cut to fit and always terminated, as
 * snprintf(dst, size, "%s", src) does without parsing a format; returns
 * strlen(src). */
size_t msp_copy_str(char *dst, size_t size, const char *src);
/* malloc'd printf. Returns NULL on OOM. */
char *msp_asprintf(const char *fmt, ...) MSP_PRINTF(1, 2);

/* v as the reports print a number: the shortest of 15 or 17 significant
 * digits that strtod reads back as v, in printf's %g form ("0.1",
 * "1.0000000000000002", "1e-05"; NaN and Inf as %g spells them). buf holds
 * MSP_DTOA_SIZE bytes; returns the text's length. Several times faster
 * than printing with printf and checking (src/common/dtoa.c). */
#define MSP_DTOA_SIZE 32
size_t msp_dtoa(double v, char *buf);
/* printf's "%.15g" of v, the same text, at buf (MSP_DTOA_SIZE bytes); its
 * length. msp_fmt_g: printf's "%.*g" with prec digits (1 to 17; others
 * clamped to them), likewise. */
size_t msp_fmt_g15(double v, char *buf);
size_t msp_fmt_g(double v, int prec, char *buf);
/* The texts of numbers printed lately, by the double's bits: a small
 * direct-mapped table for one formatter and one thread. A report prints
 * the same statistic again a row or a few later (a tensor is one record's
 * output and the next one's input; a bfloat16 max is one of few values):
 * about half of a statistics compare's numbers (issue 42). msp_dtoa_memo
 * and msp_fmt_g15_memo give msp_dtoa's and msp_fmt_g15's text, the same
 * bytes, from memo m where it holds v's (m NULL: no table; a table holds
 * one of the two formatters' texts, never both). */
typedef struct msp_num_memo msp_num_memo_t;
msp_num_memo_t *msp_num_memo_new(void); /* NULL when out of memory */
void msp_num_memo_free(msp_num_memo_t *m);
size_t msp_dtoa_memo(msp_num_memo_t *m, double v, char *buf);
size_t msp_fmt_g15_memo(msp_num_memo_t *m, double v, char *buf);

/* Text fit for an xlsx or csv cell: valid UTF-8 (strict: no overlong forms,
 * surrogates or code points past U+10FFFF), each invalid sequence and each
 * character XML 1.0 forbids (C0 controls but tab, LF and CR; U+FFFE, U+FFFF)
 * replaced by U+FFFD, and cut to at most max_bytes bytes (0: no cap) on a
 * character boundary. Returns s itself when it is fit already (the common
 * case: no copy), else a malloc'd copy that is also stored in *owned for the
 * caller to free; *owned is NULL when s is returned. NULL s reads as "".
 * NULL on out of memory. */
const char *msp_utf8_clean(const char *s, size_t max_bytes, char **owned);

/* One RFC 4180 field of a csv (result.csv, acc_check's csvs): a comma before it
 * unless first; quoted when it holds a comma, quote or line break; invalid
 * UTF-8 cleaned; NULL is empty. The FILE is one thread's (unlocked writes). */
void msp_csv_field(FILE *f, const char *s, int first);
/* The records of a csv read back (csv.c, by libcsv): each handed to cb as n
 * NUL-terminated fields, row counting from 0 (the header). RFC 4180, strict:
 * a stray quote (inside a field not quoted, or text after a closing quote)
 * and a quoted field never closed are MSP_ERR_FORMAT naming the file and
 * line. Fields keep their blanks; a line break inside quotes is kept; blank
 * lines are skipped; CRLF, LF and CR end a record; a UTF-8 byte order mark
 * is skipped. A field over MSP_CSV_MAX_FIELD bytes, or a file over max_bytes
 * (0: no cap; read as a stream, one record held at a time), is MSP_ERR_LIMIT.
 * A non-zero return of cb stops the reading and is returned. */
#define MSP_CSV_MAX_FIELD (16 << 20)
typedef msp_err (*msp_csv_row_cb)(void *ud, size_t row, size_t n, const char *const *fields);
msp_err msp_csv_read(const char *path, size_t max_bytes, msp_csv_row_cb cb, void *ud);
/* Parse text[0..len) as one YAML document into *doc, libyaml's
 * yaml_document_t (yaml.c; the caller deletes it): 0, or -1 with why (n
 * bytes: libyaml's problem and context) and *line, 1-based, where the
 * trouble began. More than one document is an error too. */
struct yaml_document_s;
int msp_yaml_doc(const char *text, size_t len, struct yaml_document_s *doc, char *why, size_t n,
                 size_t *line);
/* Text fit for a terminal: anything a terminal would take as a command (C0
 * controls but tab, and newline when newlines is set; DEL; the C1 controls
 * U+0080..U+009F) and every byte that is not UTF-8 becomes "\xNN"; the rest
 * is kept. Returns s itself when it is fit, else a malloc'd copy also stored
 * in *owned (the caller frees *owned); "?" when out of memory. Names and
 * values from a dump or a pack pass through it before they are printed. */
const char *msp_term_clean(const char *s, int newlines, char **owned);

/* A piece of outside text (a config value, the tail of a child's stderr) fit
 * for a one-line message, copied into dst (cap bytes, always NUL-ended): at
 * most max bytes of s, up to its end or, with MSP_EXCERPT_LINE, its first
 * newline; each control character and DEL shown as '?' (with
 * MSP_EXCERPT_BLANKS, tab, CR and newline as ' '); "..." after it when
 * MSP_EXCERPT_MARK is set and s went on (then at most cap - 4 bytes of s, to
 * leave room for it). dst may be s itself. */
#define MSP_EXCERPT_LINE 1u
#define MSP_EXCERPT_BLANKS 2u
#define MSP_EXCERPT_MARK 4u
void msp_excerpt(char *dst, size_t cap, const char *s, size_t max, unsigned flags);

/* ---- text buffers and self-contained HTML pages (html.c) ---------------- */

/* A growable text or byte buffer. Appends never fail loudly: out of memory
 * sets oom, later appends do nothing, and the writer checks oom once at the
 * end. With max set (curl's dynbuf: a size that comes from outside always
 * gets a cap), growing past max bytes sets too_big as well as oom. */
typedef struct msp_buf {
    char *data; /* NUL-terminated once anything was appended; NULL before */
    size_t len, cap;
    int oom;
    int too_big;  /* an append would have passed max */
    size_t max;   /* 0: no cap */
    size_t first; /* the first allocation (0: 4 KiB) */
} msp_buf_t;
/* Free room at the end of b for a read into it: a pointer to at least one
 * byte (up to want, or more) with *room the bytes free (never past max), or
 * NULL with oom (and too_big at max) set. msp_buf_grew then counts the n
 * bytes written there and keeps the NUL. */
char *msp_buf_room(msp_buf_t *b, size_t want, size_t *room);
void msp_buf_grew(msp_buf_t *b, size_t n);
void msp_buf_put(msp_buf_t *b, const char *s, size_t n);
void msp_buf_puts(msp_buf_t *b, const char *s);
void msp_buf_printf(msp_buf_t *b, const char *fmt, ...) MSP_PRINTF(2, 3);
/* s (NULL reads as "") as a JSON string literal, cleaned as msp_utf8_clean
 * does, with '<', '>' and '&' escaped so that it is safe inside <script>. */
void msp_buf_json_str(msp_buf_t *b, const char *s);
/* v as a JSON number with digits significant digits (17: the exact double);
 * NaN as null, +-Inf as +-1e999 (JSON.parse reads them as +-Infinity). */
void msp_buf_json_num(msp_buf_t *b, double v, int digits);
/* v as a JSON integer, as printf's %lld writes it, without parsing a format. */
void msp_buf_json_int(msp_buf_t *b, long long v);
void msp_buf_free(msp_buf_t *b); /* NULL-safe; leaves b empty */
/* msp_csv_field's text appended to b: what a writer that formats its rows
 * in memory uses (result.csv's threads). */
void msp_csv_field_buf(msp_buf_t *b, const char *s, int first);
/* s's length when it goes into a csv as it is: printable ASCII without a
 * comma or a quote (valid UTF-8, nothing to quote); SIZE_MAX at the first
 * byte that is not. One pass where cleaning, strpbrk and fputs made three:
 * most fields (names, dtypes, shapes, numbers as text) are such. */
static inline size_t msp_csv_plain_len(const char *s)
{
    size_t i = 0;
    for (unsigned char c; (c = (unsigned char)s[i]) != 0; i++)
        if (c < 0x20 || c > 0x7e || c == ',' || c == '"')
            return SIZE_MAX;
    return i;
}

/* Binary messages between processes of one msprobe build on one machine
 * (wire.c): the reader helper's catalogue, compare parts in the spool and
 * between MPI ranks. Fixed-size fields in the machine's byte order (u64,
 * i64, f64: 8 bytes); a string is a u64 length + 1 (0 for NULL), then its
 * bytes without the NUL. msp_wput_* append to an msp_buf_t (its oom tells);
 * msp_wget_* read from an msp_wire_rd_t, {bytes, length, 0}: every field
 * is checked against what is left, a short or impossible one sets bad (and
 * reads as 0 or NULL), a string that cannot be allocated sets oom. */
void msp_wput(msp_buf_t *b, const void *src, size_t n);
void msp_wput_u64(msp_buf_t *b, uint64_t v);
void msp_wput_i64(msp_buf_t *b, int64_t v);
void msp_wput_f64(msp_buf_t *b, double v);
void msp_wput_str(msp_buf_t *b, const char *s);
typedef struct msp_wire_rd {
    const unsigned char *p;
    size_t n, at;
    int bad, oom;
} msp_wire_rd_t;
void msp_wget(msp_wire_rd_t *r, void *dst, size_t n);
uint64_t msp_wget_u64(msp_wire_rd_t *r);
int64_t msp_wget_i64(msp_wire_rd_t *r);
double msp_wget_f64(msp_wire_rd_t *r);
/* malloc'd; NULL for a NULL string (or when bad or oom is set). */
char *msp_wget_str(msp_wire_rd_t *r);
/* A string's bytes where they lie in the message (no NUL after them), *n
 * their count; NULL for a NULL string (or when bad is set). */
const char *msp_wget_view(msp_wire_rd_t *r, size_t *n);
/* A string copied, NUL-ended, into block at *used (then moved past it);
 * NULL for a NULL string, or when it does not fit in the block's cap bytes
 * (bad is then set). For readers that keep a message's strings in one
 * block rather than a malloc each. */
char *msp_wget_str_in(msp_wire_rd_t *r, char *block, size_t *used, size_t cap);
/* A string into a field of cap bytes, NUL-padded; one that does not fit
 * with its NUL is bad. */
void msp_wget_fixed(msp_wire_rd_t *r, char *dst, size_t cap);
/* A count of items of at least min_bytes each, no more than the rest of
 * the message can hold (else bad): no allocation follows a lie. */
size_t msp_wget_count(msp_wire_rd_t *r, size_t min_bytes);

/* Write path atomically as one HTML page that opens offline, with no file
 * beside it: title, the shared style (html_base.css) then css in <style>,
 * data (JSON text, made with msp_buf_json_* so that it holds no '<') in
 * <script type="application/json" id="msp-data">, Chart.js (Debian's
 * libjs-chart.js, embedded into msprobe at build time), then the shared
 * script (html_base.js: MSP.el, MSP.data, MSP.done) and js. The directory of
 * path must exist. */
msp_err msp_html_write_page(const char *path, const char *title, const char *css, const char *data,
                            size_t data_len, const char *js);
/* The Chart.js version embedded, e.g. "3.9.1" ("" if its banner lacks one). */
const char *msp_html_chartjs_version(void);

#ifdef __cplusplus
}
#endif
#endif
