/* config_check: pack what makes two runs differ, and diff two packs.
 *
 * Two halves:
 *  - in-process collection, called by the dump shim's Python side (GIL held),
 *    writes a pack zip atomically at exit (and optionally at a step);
 *  - packs read back and compared by the msprobe CLI into result.xlsx.
 */
#ifndef MSPROBE_CONFIGCHECK_H
#define MSPROBE_CONFIGCHECK_H

#include "msprobe/common.h"
#include "msprobe/config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- packs: static packing, reading, comparing (msp_configcheck library) ----
 * A pack is a zip of JSON members: manifest.json plus one member per item,
 * env.json, pip.json, random.json, weights.json, dataset.json,
 * hyperparameters.json (see man/msprobe-config_check.1 for their fields). */

#define MSP_CC_FORMAT "msprobe-config-check"
#define MSP_CC_FORMAT_VERSION 1
/* Default cap on a pack's uncompressed members, one and all together, when
 * reading it; a pack may also hold at most one JSON value per
 * MSP_CC_BYTES_PER_VALUE bytes of that cap (1 Mi values by default), so that
 * its parsed form stays within a small multiple of the cap. */
#define MSP_CC_DEFAULT_MAX_MEMBER ((size_t)64 << 20)
#define MSP_CC_BYTES_PER_VALUE 64

/* Items in report order: their names in msp_cc_item_names, their pack
 * members in cc_pack_read.c, their diffs in cc_diff.c's driver. */
enum {
    MSP_CC_ITEM_ENV,
    MSP_CC_ITEM_PIP,
    MSP_CC_ITEM_DATASET,
    MSP_CC_ITEM_WEIGHTS,
    MSP_CC_ITEM_RANDOM,
    MSP_CC_ITEM_HYPER
};
#define MSP_CC_N_ITEMS 6
extern const char *const msp_cc_item_names[MSP_CC_N_ITEMS];

/* Write a static pack (manifest, env, pip) for the current environment:
 * env from this process's environment, pip by running `python` (an
 * interpreter path, e.g. MSPROBE_PYTHON) with a short -c script that lists
 * importlib.metadata.distributions() as JSON. Atomic write of zip_path. */
msp_err msp_cc_static_pack(const char *python, const char *zip_path);

/* 1 when MSPROBE_SECRET_SALT is set but too weak to key anything (under 16
 * characters, fewer than 10 distinct, under 64 bits by its own character
 * frequencies): a guess would find it from what a pack stores (a salt_id, or
 * the keyed hash of any value an attacker knows), and then every short
 * password hashed with it. Such a salt is not used: secrets are not stored,
 * as without a salt, and the caller warns (MSP_CC_SALT_WEAK_WARNING). */
int msp_cc_salt_refused(void);
#define MSP_CC_SALT_WEAK_WARNING                                                                   \
    "MSPROBE_SECRET_SALT is too weak to key hashes (a guess would find it from the pack; "         \
    "use 16 or more random characters, e.g. $(openssl rand -hex 32)): secret values are not "      \
    "stored"

typedef struct msp_cc_options {
    /* Env keys compared: NULL for the built-in list, else a comma-separated
     * list ("K1,K2,NCCL_*") or the path of a file with one key per line
     * (# comments). A trailing '*' matches a prefix; "*" alone matches all. */
    const char *env_keys;
    size_t max_member_bytes; /* 0 = MSP_CC_DEFAULT_MAX_MEMBER */
    /* Extra hyperparameter aliases: NULL, or the path of a JSON file
     * {"canonical": ["alias", ...], ...} merged over the built-in table
     * (see msprobe-config_check(1)). */
    const char *aliases_file;
} msp_cc_options_t;

typedef enum msp_cc_status {
    MSP_CC_PASS = 0,
    MSP_CC_FAIL = 1,
    MSP_CC_NA = 2 /* item in neither pack: nothing to compare */
} msp_cc_status_t;

typedef struct msp_cc_table msp_cc_table_t; /* one report sheet; opaque */

typedef struct msp_cc_item_result {
    const char *name; /* static: "env", "pip", ... */
    msp_cc_status_t status;
    char *note; /* why N/A or failed as a whole (missing item), or NULL */
    char **
        failed; /* one line per failing entry, e.g. "CUBLAS_WORKSPACE_CONFIG: ':4096:8' vs ':16:8'" */
    size_t n_failed;
    size_t n_warnings; /* warnings (e.g. non-framework pip versions); do not fail */
    msp_cc_table_t *table;
    char **info; /* differences that do not fail: paths, one-platform env vars */
    size_t n_info;
} msp_cc_item_result_t;

typedef struct msp_cc_result {
    char *bench_path, *cmp_path;
    msp_cc_item_result_t items[MSP_CC_N_ITEMS];
    int salt_mismatch; /* the packs hashed secrets with different salts */
} msp_cc_result_t;

/* Read two packs (never extracting to disk; hostile members are refused with
 * an error naming pack and member) and compare every item. *out is
 * caller-owned (msp_cc_result_free). */
msp_err msp_cc_compare(const char *bench_zip, const char *cmp_zip, const msp_cc_options_t *opt,
                       msp_cc_result_t **out);
/* 1 if any item failed. */
int msp_cc_result_failed(const msp_cc_result_t *r);
/* Write out_dir/result.xlsx atomically (out_dir is created when missing). */
msp_err msp_cc_report_write(const msp_cc_result_t *r, const char *out_dir);
/* Write out_dir/result.html atomically: the same items, pass/fail and
 * differences as one page that opens offline (msprobe-config_check(1)). */
msp_err msp_cc_report_write_html(const msp_cc_result_t *r, const char *out_dir);
void msp_cc_result_free(msp_cc_result_t *r); /* NULL-safe */

#ifdef __cplusplus
}
#endif
#endif
