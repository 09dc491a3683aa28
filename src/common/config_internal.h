/* Private to the msprobe.json loader, four files, each calling only the
 * ones below it:
 *   config.c        the two layouts (ours and msprobe's config.json) as
 *                   tables of keys with their setters; parse, load, free
 *   config_walk.c   the walk that reads a tree as a table says (one for both)
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
#include <stdint.h>

typedef struct msp_cfg_key msp_cfg_key_t;

/* A walk over one file's tree: what the messages name, the config being
 * filled and the layout's table of keys. */
typedef struct msp_cfg_walk {
    const char *source; /* file name in messages */
    msp_config_t *cfg;
    const msp_cfg_key_t *keys;
    size_t n_keys;
} msp_cfg_walk_t;

/* ---- config_walk.c: a layout's table, and the walk over it ---------------- */

/* What a key takes. */
typedef enum msp_cfg_kind {
    MSP_CFG_OBJECT,   /* an object; its keys are the entries one level under its path */
    MSP_CFG_LIST,     /* an array, stored as `count` elements of `elem_size` bytes; each
                       element is the entry PATH[] */
    MSP_CFG_STRING,   /* a non-empty string, copied (char *) */
    MSP_CFG_BOOL,     /* true or false (int) */
    MSP_CFG_INT,      /* an integer from `min` to 2^53 - 1 (int64_t) */
    MSP_CFG_ENUM,     /* one of `names`, stored as values[i], or i without values (an int,
                       or an enum or unsigned of its size) */
    MSP_CFG_STEPS,    /* a step set: "10|20", "5-8", "all", 7, [1, 5] (msp_step_set_t) */
    MSP_CFG_MS_STEPS, /* msprobe's rank/step list: [1, "0", "4-6"], [] = all (msp_step_set_t) */
    MSP_CFG_IGNORED,  /* accepted, changes nothing: named in cfg->ignored */
    MSP_CFG_CUSTOM    /* `set` checks the value and stores it */
} msp_cfg_kind_t;

#define MSP_CFG_REQUIRED 1u /* absent is an error: "missing (note)" */
#define MSP_CFG_NONZERO 2u  /* INT: 0 is refused too */
#define MSP_CFG_FILE 4u     /* STRING: a file's path, so not one ending in '/' */
#define MSP_CFG_STRINGS 8u  /* LIST: every element a string, checked before any is read */
#define MSP_CFG_AS_MET                                                                             \
    16u                   /* OBJECT: each member read when met, in the file's order, and
                               a key may repeat (msprobe's overflow_check section) */
#define MSP_CFG_TELLS 32u /* a top-level key that tells this layout from the other */

/* One key of a layout. A layout is one table of these; the walk reads an
 * object's keys in the table's order, whatever the file's, so one key may
 * depend on another read before it (overflow_nums on task, a task's section
 * on task). */
struct msp_cfg_key {
    const char *path; /* "dump.common_dump_settings.task"; the elements of the list
                               at P are the entry "P[]", their keys "P[].name"; the root
                               object is "" */
    msp_cfg_kind_t kind;
    size_t off;               /* where the value goes: an offset into what the enclosing
                               object fills (msp_config_t, or an element of a list) */
    const char *what;         /* "expected WHAT, got ..." */
    unsigned flags;           /* MSP_CFG_REQUIRED, ... */
    int64_t min;              /* INT */
    const char *const *names; /* ENUM */
    size_t n_names;
    const int *values; /* ENUM: what each name stores; NULL: its index */
    const char *note;  /* the message's "(...)": REQUIRED: why, in "missing (...)";
                               OBJECT: in "unknown key (...)" instead of the list of its
                               keys */
    /* the key applies only when only(config read so far) holds; where it does
     * not, its value is checked, then refused with only_why, or, without
     * only_why, left unread and named as ignored after the object's other keys
     * (only_why needs only) */
    int (*only)(const msp_config_t *cfg);
    const char *only_why;
    void (*init)(void *dst); /* OBJECT: when present, the defaults of what it fills */
    const char *keys;        /* OBJECT: the path its keys are under, when not its own
                               (two sections taking the same keys) */
    size_t count;            /* LIST: offset of the element count (size_t) */
    size_t elem_size;        /* LIST: size of one element */
    /* CUSTOM: check it and store it in dst, what the enclosing object fills */
    msp_err (*set)(const msp_cfg_walk_t *w, const msp_cfg_key_t *k, const cJSON *it,
                   const char *path, void *dst);
};

/* offsetof(S, f), refused at compile time unless f has type T. */
#define MSP_CFG_AT(S, f, T) (offsetof(S, f) + 0 * sizeof(_Generic(((S *)0)->f, T : 1)))
/* offsetof(S, f) for an ENUM entry, refused unless f has the size of an int. */
#define MSP_CFG_ENUM_AT(S, f)                                                                      \
    (offsetof(S, f) + 0 * sizeof(char[sizeof(((S *)0)->f) == sizeof(int) ? 1 : -1]))

/* The most entries a table may have (the walk keeps one slot for each). */
#define MSP_CFG_MAX_KEYS 64

/* A path: a key's quoted name (under 80 bytes) below at most a few known keys
 * and indexes. */
#define MSP_CFG_PATH_MAX 320

/* Reads root, an object, into dst (the config) as w->keys says: the table's
 * first entry is the root object (path ""). Every error names the file and
 * the key path; on error dst holds what was read so far (msp_config_free
 * releases it). */
msp_err msp_cfg_walk(const msp_cfg_walk_t *w, const cJSON *root, void *dst);
/* Whether root has a top-level key that tells the layout of keys[0..n) (TELLS). */
int msp_cfg_tells(const msp_cfg_key_t *keys, size_t n, const cJSON *root);

/* ---- config_value.c ------------------------------------------------------ */

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
msp_err msp_cfg_string(const msp_cfg_walk_t *w, const cJSON *it, const char *path, const char *what,
                       char **out);
/* An integer in [min, 2^53 - 1]. */
msp_err msp_cfg_int(const msp_cfg_walk_t *w, const cJSON *it, const char *path, const char *what,
                    int64_t min, int64_t *out);
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
