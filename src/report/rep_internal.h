/* Private to src/report, the writers of a compare's reports (result.xlsx and
 * its books, result.csv, result.html and its samples), and to their tests
 * (tests/cli/report_from_json.c). They read a finished compare (the tree of
 * cmp_internal.h); nothing in src/compare calls them. */
#ifndef MSPROBE_REP_INTERNAL_H
#define MSPROBE_REP_INTERNAL_H

#include "msprobe/compare.h"
#include "cmp_internal.h"
#include "msprobe/report.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <zlib.h>

struct isal_zstream;

/* Details columns: msprobe's names (8.x's "Accuracy Reached or Not" with 26's
 * "Result" beside it), then Error Origin, Step, Rank, then msprobe 26's
 * three Requires_grad columns and NPU_Stack_Info (filled on a record's first
 * row, as msprobe does), then 8.x's Data_name and 26's NPU MD5, BENCH MD5. The sizes are part of the
 * declaration so a list that drifts fails to compile. */
#define CMP_DETAILS_NCOLS_TENSOR 33
#define CMP_DETAILS_NCOLS_STATS 35
extern const char *const cmp_details_cols_tensor[CMP_DETAILS_NCOLS_TENSOR];
extern const char *const cmp_details_cols_stats[CMP_DETAILS_NCOLS_STATS];

/* "Yes" / "No" / "Warning", and "introduced" / "inherited" / "". */
const char *cmp_verdict_text(msp_verdict_t v);
const char *cmp_cause_text(msp_cause_t c);
/* msprobe 26's "pass" / "warning" / "error". */
const char *cmp_result_text(msp_result_t r);
/* "['npu', 'bench']" data names ("-1": no data); a CRC-32 as 8 hex digits ("N/A": 0). */
void cmp_data_name_text(const msp_tensor_cmp_t *t, char *buf, size_t size);
void cmp_md5_text(uint32_t crc, char *buf, size_t size);
/* "True" / "False" / "N/A" (v < 0), and whether both sides agree on requires_grad. */
const char *cmp_bool_text(int v);
const char *cmp_rg_consistent_text(const msp_tensor_cmp_t *t);
/* A statistics-mode relative error (a percentage) as "x%", NaN as "N/A";
 * m: the caller's table of the texts it printed lately (or NULL). */
void cmp_percent_text(msp_num_memo_t *m, double v, char *buf, size_t size);

/* What a report is written from: a whole result (one part), or a streamed
 * compare's parts, loaded one at a time (rows of records in (step, rank,
 * order) order either way). */
typedef struct cmp_source {
    const msp_compare_result_t *head; /* stats_mode (and the rest but its rows) */
    size_t n_records, n_tensors;      /* rows over the parts written */
    size_t n_parts;
    /* part i and the global index of its first record and tensor row */
    msp_err (*load)(const struct cmp_source *src, size_t i, msp_compare_result_t **part,
                    size_t *rec_base, size_t *ten_base);
    void (*unload)(const struct cmp_source *src, msp_compare_result_t *part);
    /* the summary's Reason of a global record, NULL for none */
    const char *(*reason)(const struct cmp_source *src, size_t record);
    long root_tensor; /* global row of the root cause, -1 */
    const void *ud;
} cmp_source_t;

/* Every details row of src, as the details sheets hold them, into
 * out_dir/file (result.csv's format: rep_csv.c), atomically. */
msp_err cmp_csv_write(const cmp_source_t *src, const char *out_dir, const char *file);

/* The unload of a source whose parts are loaded from a compare's spool: the
 * part is freed (rep_common.c). */
void cmp_source_free_part(const cmp_source_t *src, msp_compare_result_t *part);
/* A source over the parts of one rank of a streamed tree (rank < 0: every
 * part), in order, with their records and rows counted and the tree's
 * reasons (rep_common.c): *src is set and ts holds what it reads; free
 * ts->parts when done. MSP_ERR_NOMEM (recorded) when out of memory. */
typedef struct cmp_tree_src {
    const msp_compare_tree_t *t;
    size_t *parts;    /* the parts read, in order */
    cmp_feed_t *feed; /* NULL: each part loaded from the spool */
    int reader;
} cmp_tree_src_t;
msp_err cmp_tree_source(const msp_compare_tree_t *t, int64_t rank, cmp_tree_src_t *ts,
                        cmp_source_t *src);
/* The same, each part taken from the feed f as its reader (the parts are
 * shared: a writer reads them only); f NULL: cmp_tree_source's. */
msp_err cmp_tree_feed_source(const msp_compare_tree_t *t, int64_t rank, cmp_feed_t *f, int reader,
                             cmp_tree_src_t *ts, cmp_source_t *src);
/* MSP_ERR_INTERNAL if a record's tensor range lies outside res->tensors. */
msp_err cmp_report_check_ranges(const msp_compare_result_t *res);
/* What every writer of a whole result checks first: a result and a folder
 * given, the folder made, the result's ranges sound (MSP_ERR_USAGE or the
 * failure, already recorded). */
msp_err cmp_report_begin(const msp_compare_result_t *res, const char *out_dir);

/* Data rows per sheet before "details" continues in "details_2" (and
 * "summary" in "summary_2"). 0 restores Excel's limit, 1,048,575. Only tests
 * lower it, to reach the overflow path without writing a million rows; not
 * thread-safe, set it before writing. */
void cmp_report_set_rows_per_sheet(size_t rows);
/* Details rows past which a workbook is written with ZIP64 records; 0
 * restores 1,000,000. Only tests lower it; not thread-safe either. */
void cmp_report_set_zip64_rows(size_t rows);

/* Sheets "error_flow" (a native chart) and "error_flow_data" (its rows: the
 * first step and rank's records by execution order), rep_xlsx_chart.c.
 * Takes an lxw_workbook; declared without its header so that only the xlsx
 * writers include libxlsxwriter. */
struct lxw_workbook;
int cmp_xlsx_error_flow(struct lxw_workbook *wb, const msp_compare_result_t *res);

/* The reports of a tree, each reading its parts from the feed f as its
 * reader (f NULL: from the spool); each leaves f when done (rep_write.c runs
 * them together). The workbooks take from f as `reader` (-1: none) when the
 * tree makes one book (rep_tree_one_book: every part) or per-rank books of
 * one part a rank (rep_tree_books_fed: the parts with records); per-rank
 * books of several steps read their own ranks' parts, as a rank's parts
 * lie a step apart in the feed's order. Per-rank books' chart takes part 0
 * as reader `chart` (-1: from the spool). */
msp_err rep_tree_xlsx(const msp_compare_tree_t *t, const char *out_dir, cmp_feed_t *f, int reader,
                      int chart);
msp_err rep_tree_csv(const msp_compare_tree_t *t, const char *out_dir, cmp_feed_t *f, int reader);
int rep_tree_one_book(const msp_compare_tree_t *t);
int rep_tree_books_fed(const msp_compare_tree_t *t);
/* Whether each rank has one part at most (then the tree's order is rank
 * order, and a writer of a file a rank can take them from the feed). */
int rep_tree_rank_parts(const msp_compare_tree_t *t);
/* msp_report_tree_msprobe, the files' parts from f as `reader` when f is
 * set: possible when rep_tree_msprobe_fed (one file of every part, or one
 * part a rank; the parts with records). */
msp_err rep_tree_msprobe(const msp_compare_tree_t *t, const char *out_dir,
                         const msp_msprobe_outputs_t *o, char ***names, size_t *n, cmp_feed_t *f,
                         int reader);
int rep_tree_msprobe_fed(const msp_compare_tree_t *t, const msp_msprobe_outputs_t *o);
/* -da's file (msp_report_diff_analyze) in two steps: the records it names
 * and the parts that hold them (parts: sorted, distinct), then the file,
 * those parts read from f as `reader` when f is set (rep_msprobe.c). */
typedef struct rep_da_plan {
    struct rep_da_target *v;
    size_t n;
    size_t *parts, n_parts;
} rep_da_plan_t;
msp_err rep_da_plan(const msp_compare_tree_t *t, rep_da_plan_t *p);
int rep_da_wants(const rep_da_plan_t *p, size_t part);
msp_err rep_da_write(const msp_compare_tree_t *t, rep_da_plan_t *p, const char *out_dir,
                     const char *file, int *written, cmp_feed_t *f, int reader);
void rep_da_plan_free(rep_da_plan_t *p); /* the plan's nodes and lists */
/* Threads that write per-rank books at once (1..8). */
int rep_tree_book_threads(const msp_compare_tree_t *t);

/* ---- workbooks (rep_xlsx.c writes them, rep_xlsx_books.c
 * chooses them) ---------------------------------------------------------- */

/* Data rows per sheet (cmp_report_set_rows_per_sheet). */
extern size_t cmp_xlsx_data_rows;
/* "details", "details_2", ...: the name of sheet index of base, at buf (n
 * bytes); its length. */
size_t cmp_sheet_name(char *buf, size_t n, const char *base, size_t index);

/* What goes into one workbook. */
typedef struct cmp_book {
    const cmp_source_t *rows; /* summary and details; NULL: none */
    int ranks_sheet;          /* the ranks sheet first */
    int suspects_sheet;       /* the suspects sheet after it */
    const msp_compare_result_t *head;
    const msp_compare_result_t *chart; /* the first step's records for the error-flow
                                          chart sheet, or NULL: no chart */
    void (*link)(const void *ud, int64_t rank, char *buf, size_t n);
    const void *link_ud;
    size_t zip64_rows; /* details rows the workbook holds */
    int details_only;  /* the details sheets alone, first (msprobe's own workbooks) */
    int chart_rows;    /* the chart from the rows' first part (chart NULL): no
                          second read of it */
} cmp_book_t;
/* Write b as out_dir/file (a temp file, then renamed): the error names the
 * sheet and row where libxlsxwriter failed. */
msp_err cmp_write_book(const char *out_dir, const char *file, const cmp_book_t *b);
/* A details row's numbers as text (rep_texts.c), in the order both the
 * workbook and result.csv print them: statistics, the four differences,
 * the four relative ones as percentages, then the eight sides' statistics;
 * tensors, the six metrics, then the eight sides'. A slot is the text,
 * NUL-terminated, its length and whether it is a number (else a text cell:
 * a percentage, "N/A", "inf") in its last byte. */
#define REP_TEXT_SLOT 32
#define REP_TEXT_LEN 0x3f  /* the last byte: the length */
#define REP_TEXT_CELL 0x40 /* and a text cell, not a number */
typedef struct rep_row_texts {
    char s[16][REP_TEXT_SLOT];
} rep_row_texts_t;
static inline size_t rep_text_len(const char *slot)
{
    return (size_t)(slot[REP_TEXT_SLOT - 1] & REP_TEXT_LEN);
}
static inline int rep_text_is_num(const char *slot)
{
    return !(slot[REP_TEXT_SLOT - 1] & REP_TEXT_CELL);
}
/* A details row's numbers in that order into v; how many (16 or 14) */
int rep_row_numbers(const msp_tensor_cmp_t *t, int stats, double v[16]);
/* whether number i of a row is a relative difference, printed as a percentage */
static inline int rep_row_is_pct(int stats, int i)
{
    return stats && i >= 4 && i < 8;
}
/* part's row i: from the table the part shares between its reports (made
 * here a chunk of rows at a time when no one has yet), else made into
 * *local, with the caller's memos either way; NULL without local where
 * the table cannot serve (the caller prints the numbers itself). */
const rep_row_texts_t *rep_texts_row(const msp_compare_result_t *part, size_t i, int stats,
                                     msp_num_memo_t *nums, msp_num_memo_t *pcts,
                                     rep_row_texts_t *local);
/* part is read by two reports that print its numbers: they share them */
void rep_texts_share(msp_compare_result_t *part);

/* Temp files (rep_tmpfile.c): while on, this thread's are anonymous memory
 * files (memfd), no inode of the output's file system; else, or where one
 * cannot be made, unlinked files in dir (NULL: tmpfile's). Also what
 * libxlsxwriter gets for its own temp files. NULL on failure, errno set. */
void rep_tmpfile_in_memory(int on);
FILE *rep_tmpfile(const char *dir);
/* An unlinked temp file dir/name.XXXXXX (never a memory file: the rows'
 * temp files may be gigabytes); NULL with errno set on failure. */
FILE *rep_tmpfile_named(const char *dir, const char *name);

/* ---- the rows of the big sheets, written by us (rep_sheet.c) and spliced
 * into the workbook libxlsxwriter wrote around them (rep_book.c) ---------- */

typedef struct rep_sheet {
    struct isal_zstream *z; /* ISA-L's deflate (igzip), raw, level 1 */
    FILE *file;             /* the deflated rows, an unlinked temp file */
    char *xml, *out;        /* XML waiting to be deflated; deflate's output */
    size_t xml_len, xml_cap;
    uint32_t crc;           /* of the rows' XML */
    uint64_t raw, comp;     /* the rows' XML bytes, and deflated */
    size_t row1, last_row1; /* the open row (1-based, 0: none), the last one */
    int next_col;           /* the open row's column after its last cell */
    const char *dir;        /* where the temp file is (the caller's string) */
    struct rep_sst *sst;    /* the workbook's shared strings (NULL: all inline) */
    struct rs_memo *memo;   /* per column: its last shared string, to skip the lookup */
    msp_num_memo_t *nums;   /* numbers printed lately (rep_sheet_num) */
    msp_num_memo_t *pcts;   /* percentages printed lately (cmp_percent_text_memo) */
    int ncols;
    char *links; /* <hyperlink> elements */
    size_t links_len, links_cap;
    int err;                /* the first errno */
    struct rs_async *async; /* the deflating thread, once the rows fill a buffer */
} rep_sheet_t;

/* text (len bytes) escaped as libxlsxwriter escapes a cell's: &, <, > as
 * entities, control characters but tab and newline as _xHHHH_; at out,
 * which has room for 7 x len bytes; the escaped length. */
size_t rep_xml_escape(char *out, const char *text, size_t len);
/* Excel's characters a cell: longer text is cut (on a character boundary). */
#define CMP_XLSX_MAX_STR 32767
/* A cell reference ("AB12"), 0-based col, 1-based row, at p (at most 24
 * bytes, not terminated); its length. */
size_t rep_cell_ref(char *p, int col, size_t row1);

/* A sheet of ncols columns whose rows go to a temp file in dir. */
/* z made a raw deflate stream (a zip entry's format) at ISA-L's level 1,
 * level_buf (size bytes, ISAL_DEF_LVL1_*) its work space: the rows'
 * (rep_sheet.c) and the pieces around them (rep_book.c). */
void rep_deflate_start(struct isal_zstream *z, void *level_buf, uint32_t size);
msp_err rep_sheet_open(rep_sheet_t *s, const char *dir, int ncols);
/* Start row row0 (0-based, the header is row 0; increasing), then its cells
 * in increasing col with libxlsxwriter's xf index (0: none). A string is
 * cleaned to valid UTF-8 of at most 32,767 bytes; "" is a blank, which is no
 * cell unless xf is given. A link's text is its location ("details!A2"). */
void rep_sheet_row(rep_sheet_t *s, size_t row0);
void rep_sheet_num(rep_sheet_t *s, int col, double v, int xf);
/* a number cell of the given text (the shortest that reads back, rep_texts.c) */
void rep_sheet_num_text(rep_sheet_t *s, int col, const char *text, size_t len, int xf);
void rep_sheet_str(rep_sheet_t *s, int col, const char *text, int xf);
/* A text that repeats from row to row: a shared string when the sheet has a
 * table (s->sst) and the text fits it, else as rep_sheet_str. */
void rep_sheet_str_shared(rep_sheet_t *s, int col, const char *text, int xf);
void rep_sheet_blank(rep_sheet_t *s, int col, int xf);
void rep_sheet_link(rep_sheet_t *s, int col, const char *location, int xf);
void rep_sheet_formula_str(rep_sheet_t *s, int col, const char *formula, const char *value, int xf);
/* The rows done: their stream flushed (not final). The first failure of any
 * call above, recorded ("its rows' temp file in DIR: ...", for the caller to
 * name the workbook), or MSP_OK. */
msp_err rep_sheet_end(rep_sheet_t *s);
void rep_sheet_free(rep_sheet_t *s);

/* ---- a workbook's shared strings (rep_sst.c) ----------------------------- */

typedef struct rep_sst rep_sst_t;
rep_sst_t *rep_sst_new(void); /* NULL when out of memory */
void rep_sst_free(rep_sst_t *t);
/* The index of text (len bytes, valid UTF-8, NUL-terminated), added when
 * new; -1 when it is not to be shared (empty, long, or the table full). */
long rep_sst_id(rep_sst_t *t, const char *text, size_t len);
/* Another cell naming a string rep_sst_id gave: counted as it counts them. */
void rep_sst_again(rep_sst_t *t);
int rep_sst_used(const rep_sst_t *t);
/* xl/sharedStrings.xml (malloc'd, *len bytes), or NULL when out of memory. */
char *rep_sst_xml(const rep_sst_t *t, size_t *len);

/* Which zip entry (libxlsxwriter's "xl/worksheets/sheetN.xml") gets which rows. */
typedef struct rep_splice {
    char entry[48];
    rep_sheet_t *rows;
} rep_splice_t;
/* Write to the workbook from with each splice's rows in its placeholder
 * (every other entry copied compressed), and sst's strings, when the rows
 * used any, as xl/sharedStrings.xml (named in [Content_Types].xml and the
 * workbook's relationships); ZIP64 records throughout when zip64. The error
 * names the file and the entry. */
msp_err rep_book_splice(const char *from, const char *to, const rep_splice_t *sp, size_t n,
                        int zip64, const rep_sst_t *sst);

#endif
