/* Private to the msprobe.json loader, three files, each calling only the
 * ones below it:
 *   config.c        what the tree means: the keys of both layouts, load, free
 *   config_value.c  one value against what its key takes (string, integer,
 *                   name from a list, step set), and the messages naming
 *                   file, key and what was expected
 *   config_json.c   text to a cJSON tree: comments blanked, syntax errors
 *                   placed at line:column of the user's file */
#ifndef MSP_CONFIG_INTERNAL_H
#define MSP_CONFIG_INTERNAL_H

#include "msprobe/config.h"

#include <cjson/cJSON.h>
#include <stddef.h>

/* ---- config_value.c ------------------------------------------------------ */

/* A walk over one file's tree: what the messages name, and (for config.c)
 * the config being filled and the layout's table of keys. */
typedef struct msp_cfg_walk {
    const char *source;             /* file name in messages */
    msp_config_t *cfg;
    const struct msp_cfg_key *keys; /* config.c */
    size_t n_keys;
} msp_cfg_walk_t;

/* Quote user text for a message: bounded, control characters shown as '?',
 * so a binary file or a huge string cannot wreck the terminal. */
void msp_cfg_quote(char *dst, size_t cap, const char *s);
/* MSP_ERR_CONFIG, detail "SOURCE: PATH: message". */
msp_err msp_cfg_fail(const msp_cfg_walk_t *w, const char *path, const char *fmt, ...)
    MSP_PRINTF(3, 4);
/* What a value is, for "got ...": "\"text\"", "number 1.5", "an array", "null". */
void msp_cfg_describe(const cJSON *it, char *buf, size_t cap);
/* MSP_ERR_CONFIG, detail "SOURCE: PATH: expected WHAT, got DESCRIPTION". */
msp_err msp_cfg_expected(const msp_cfg_walk_t *w, const char *path, const char *what,
                         const cJSON *got);

/* Each of these returns MSP_OK with the value stored, or MSP_ERR_CONFIG with
 * the detail naming path (MSP_ERR_NOMEM when a copy fails). */
/* An object. */
msp_err msp_cfg_object(const msp_cfg_walk_t *w, const cJSON *it, const char *path);
/* One of names[0..n): *out its index; the message lists the choices. */
msp_err msp_cfg_enum(const msp_cfg_walk_t *w, const cJSON *it, const char *path,
                     const char *const *names, size_t n, int *out);
/* A non-empty string: *out (freed first) a fresh copy. */
msp_err msp_cfg_string(const msp_cfg_walk_t *w, const cJSON *it, const char *path,
                       const char *what, char **out);
/* An integer in [min, 2^53 - 1]. */
msp_err msp_cfg_int(const msp_cfg_walk_t *w, const cJSON *it, const char *path,
                    const char *what, int64_t min, int64_t *out);
/* A step set as msprobe.json writes it: "10|20", "5-8", "all", 7 or [1, 5, 9];
 * *out (freed first) receives it. */
msp_err msp_cfg_steps(const msp_cfg_walk_t *w, const cJSON *it, const char *path,
                      msp_step_set_t *out);
/* A rank or step list as msprobe's config.json writes it: [1, "0", "4-6"],
 * [] = all; *out (freed first) receives it. */
msp_err msp_cfg_ms_steps(const msp_cfg_walk_t *w, const cJSON *it, const char *path,
                         msp_step_set_t *out);
/* An array of strings (each element checked, none stored). */
msp_err msp_cfg_strings(const msp_cfg_walk_t *w, const cJSON *it, const char *path);

/* ---- config_json.c ------------------------------------------------------- */

/* Line and column (from 1) of byte `off` of text. */
void msp_cfg_line_col(const char *text, size_t off, size_t *line, size_t *col);

/* Parses buf, a private copy of the file's text (its comments are blanked in
 * place), into *root, which the caller deletes. On error *root is NULL and the
 * detail is "SOURCE:LINE:COL: invalid JSON: why, near '...'" or names an empty
 * file; MSP_ERR_CONFIG. Any JSON value is accepted: an object is not required. */
msp_err msp_cfg_json_parse(char *buf, const char *source, cJSON **root);

#endif
