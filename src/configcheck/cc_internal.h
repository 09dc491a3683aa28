/* config_check internals shared by the pack writer (core), the CLI-side diff
 * and report, and the in-process collectors. Not installed. */
#ifndef MSPROBE_CC_INTERNAL_H
#define MSPROBE_CC_INTERNAL_H

#include "msprobe/ccpack.h"
#include "msprobe/configcheck.h"
#include "msprobe/format.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* SHA-256, secrets, pack building and tensor statistics: msprobe/ccpack.h. */

/* ---- secrets inside a value (cc_secret.c, cc_secret_store.c; spans: cc_secret_name.c) */

/* Byte ranges [a, b) of a value. Past MSP_CC_SPANS_MAX ranges, overflow is
 * set and the whole value counts as one secret. */
#define MSP_CC_SPANS_MAX 64
typedef struct msp_cc_span {
    size_t a, b;
} msp_cc_span_t;
typedef struct msp_cc_spans {
    msp_cc_span_t v[MSP_CC_SPANS_MAX];
    size_t n;
    int overflow;
} msp_cc_spans_t;
void msp_cc_span_add(msp_cc_spans_t *s, size_t a, size_t b);
/* The tags already in s (a value masked before): never masked again. */
void msp_cc_secret_tags(const char *s, msp_cc_spans_t *out);
/* What stands in a text for the secret s[0..n): "<secret: not stored>", or
 * "<secret hmac-sha256:HEX16>" with the first 16 hex digits of
 * HMAC-SHA256(salt, s[0..n)) (malloc'd; NULL on OOM). */
char *msp_cc_secret_tag(const char *s, size_t n);
/* msp_cc_redact_value, with *secret set when val holds a secret (by key or
 * by value): NULL with *secret set is out of memory, never "keep it". */
char *msp_cc_redact_checked(const char *key, const char *val, int *secret);
/* Forget the values msp_cc_redact_argv found secret (each is otherwise
 * hidden wherever it appears for the life of the process): a fuzz target
 * starts each input from nothing. */
void msp_cc_secret_forget(void);
/* Shannon entropy, bits per character, of s[0..n). */
double msp_cc_entropy(const char *s, size_t n);

/* ---- span finders (cc_secret_find.c) and the name rules (cc_secret_name.c) */

/* Names that say identifier (commit, digest, run id), not key; numbers
 * under a name that says password, PIN, secret or token (cc_secret_name.c). */
int msp_cc_name_is_id(const char *name);
int msp_cc_number_name_is_secret(const char *key);
/* Each adds to out the byte ranges of the secrets it finds in v: URL
 * passwords and credential parameters, user:password@host, secret
 * name=value pairs, secret command-line arguments, PEM blocks, tokens
 * (id_name: v stands under a name that says identifier). */
void msp_cc_url_spans(const char *v, msp_cc_spans_t *out);
void msp_cc_userinfo_spans(const char *v, msp_cc_spans_t *out);
void msp_cc_pair_spans(const char *v, msp_cc_spans_t *out);
void msp_cc_cmdline_spans(const char *v, msp_cc_spans_t *out);
void msp_cc_pem_spans(const char *v, msp_cc_spans_t *out);
void msp_cc_token_spans(const char *v, int id_name, msp_cc_spans_t *out);
/* The length of the word of v starting at i ([A-Za-z0-9]+ not preceded by
 * a letter or digit), 0 if none; the finders run on the word v[i..i+n):
 * password words, login words, Authorization/Bearer. */
size_t msp_cc_word_at(const char *v, size_t i);
void msp_cc_pw_word_spans(const char *v, size_t i, size_t n, msp_cc_spans_t *out);
void msp_cc_login_spans(const char *v, size_t i, size_t n, msp_cc_spans_t *out);
void msp_cc_auth_spans(const char *v, size_t i, size_t n, msp_cc_spans_t *out);
/* A character of a token piece (base64url and the separators tokens use). */
int msp_cc_is_piecech(char c);
/* Whether the argument next[0..nl) after option flag[0..fl) is secret. */
int msp_cc_flag_hides(const char *flag, size_t fl, const char *next, size_t nl);

/* ---- pack reading ------------------------------------------------------ */

/* Member names of the items, in msp_cc_item_names order. */
extern const char *const msp_cc_item_members[MSP_CC_N_ITEMS];

typedef struct msp_cc_pack {
    char *path;
    cJSON *manifest;
    cJSON *items[MSP_CC_N_ITEMS]; /* NULL when the pack lacks that member */
} msp_cc_pack_t;

/* Read every member into memory with caps (never to disk) and refuse hostile
 * archives: traversal or absolute names, symlinks, encrypted, duplicate,
 * oversized or highly compressed members, malformed JSON, unknown format
 * version. The error names the pack and the member. */
msp_err msp_cc_pack_read(const char *path, size_t max_member, msp_cc_pack_t *out);
/* The same on a zip held in memory; label names it in messages. */
msp_err msp_cc_pack_read_mem(const void *data, size_t len, const char *label, size_t max_member,
                             msp_cc_pack_t *out);
void msp_cc_pack_free(msp_cc_pack_t *p);

/* Compare two packs already read (msp_cc_compare without the reading). */
msp_err msp_cc_compare_packs(const msp_cc_pack_t *b, const msp_cc_pack_t *c,
                             const msp_cc_options_t *opt, msp_cc_result_t **out);

/* ---- report tables ----------------------------------------------------- */

enum { MSP_CC_LEVEL_OK = 0, MSP_CC_LEVEL_WARN = 1, MSP_CC_LEVEL_ERROR = 2 };

msp_cc_table_t *msp_cc_table_new(const char *const *cols, size_t ncols);
void msp_cc_table_free(msp_cc_table_t *t);
/* Appends an empty row; returns its index or (size_t)-1 on OOM. */
size_t msp_cc_table_add_row(msp_cc_table_t *t, int level);
void msp_cc_table_set_str(msp_cc_table_t *t, size_t row, size_t col, const char *s);
void msp_cc_table_set_num(msp_cc_table_t *t, size_t row, size_t col, double v);
void msp_cc_table_set_bool(msp_cc_table_t *t, size_t row, size_t col, int b);

typedef enum {
    MSP_CC_CELL_EMPTY = 0,
    MSP_CC_CELL_STR,
    MSP_CC_CELL_NUM,
    MSP_CC_CELL_BOOL
} msp_cc_cell_kind_t;
typedef struct msp_cc_cell {
    msp_cc_cell_kind_t kind;
    char *s;
    double d;
} msp_cc_cell_t;

struct msp_cc_table {
    size_t ncols;
    char **cols;
    size_t nrows, cap;
    msp_cc_cell_t *cells; /* nrows * ncols */
    int *levels;
};

/* ---- diff helpers shared by cc_diff.c and cc_hyper.c ------------------ */

#define MSP_CC_N(a) (sizeof(a) / sizeof(a)[0])

/* A failing entry (the item fails), built whole: never cut at a width. */
void msp_cc_add_failed(msp_cc_item_result_t *it, const char *fmt, ...) MSP_PRINTF(2, 3);
/* A difference that does not fail (a path, one platform's variable). */
void msp_cc_add_info(msp_cc_item_result_t *it, const char *fmt, ...) MSP_PRINTF(2, 3);
/* A failing "NAME: bench B vs cmp C", or for long values NAME then both values
 * on lines of their own, aligned, with a caret under the first difference;
 * q wraps each value ("'" or ""). */
void msp_cc_add_diff(msp_cc_item_result_t *it, const char *name, const char *bv, const char *cv,
                     const char *q);
/* 1 for true/1/yes/on/enable(d), 0 for false/0/no/off/disable(d)/"", -1 otherwise (any case). */
int msp_cc_bool_word(const char *s);
/* A pattern list ("KEY" or "PREFIX*") holds key. */
int msp_cc_pattern_match(const char *const *pats, size_t n, const char *key);
/* obj's string field key, or NULL; two strings both there and equal. */
const char *msp_cc_str(const cJSON *obj, const char *key);
int msp_cc_streq(const char *a, const char *b);
/* The items' diffs (cc_diff.c's table calls them): b against c into it, for
 * item `item` of r; opt may be NULL. The env item (cc_env.c): */
msp_err msp_cc_diff_env(const msp_cc_pack_t *b, const msp_cc_pack_t *c, int item,
                        const msp_cc_options_t *opt, msp_cc_result_t *r, msp_cc_item_result_t *it);
/* Whether one pack comes from an NPU and the other not (env, else pip). */
int msp_cc_cross_platform(const msp_cc_pack_t *b, const msp_cc_pack_t *c);
/* The hyperparameters item (cc_hyper.c). */
msp_err msp_cc_diff_hyper(const msp_cc_pack_t *b, const msp_cc_pack_t *c, int item,
                          const msp_cc_options_t *opt, msp_cc_result_t *r,
                          msp_cc_item_result_t *it);

#endif
