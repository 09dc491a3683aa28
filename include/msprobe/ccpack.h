/* Building config_check packs: what the collectors inside the training
 * process (the dump shim's py_cc*.c) and `msprobe config_check -d` use from
 * the config_check library (msp_cc_core): SHA-256, secrets in their stored
 * form, the env and manifest members, writing a pack atomically, and the
 * statistics of a tensor's raw bytes. Reading and comparing packs stays
 * inside the library. */
#ifndef MSPROBE_CCPACK_H
#define MSPROBE_CCPACK_H

#include "msprobe/common.h"
#include "msprobe/format.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* ---- SHA-256 (cc_sha256.c, libcrypto) ---------------------------------- */
/* Write the SHA-256 of data[0..len) as 64 lowercase hex digits and a NUL
 * into hex[65]; 0, or -1 (hex empty) when libcrypto fails. */
int msp_cc_sha256_hex(const void *data, size_t len, char hex[65]);
/* The same for HMAC-SHA-256 keyed by key[0..klen) over msg[0..mlen). */
int msp_cc_hmac_sha256_hex(const void *key, size_t klen, const void *msg, size_t mlen,
                           char hex[65]);

/* ---- secrets (cc_secret.c; the name rules: cc_secret_name.c) --------- */

/* 1 if a name (env key, option such as --db-url, namespace field) looks like
 * it holds a secret: TOKEN, SECRET, PASSWORD, KEY, CREDENTIAL, AUTH, DSN,
 * WEBHOOK, DB_URL, ... anywhere, or PASS, PAT, PW, PIN, CRED as a whole word. */
int msp_cc_key_is_secret(const char *key);
/* 1 if a value holds a secret whatever its name (msprobe-config_check(1),
 * SECRETS): a URL with a password or a token as userinfo, a credential query
 * parameter or a webhook path; user:password@host; a name=value pair whose
 * name says secret; "password x", "login user / x"; Authorization, Bearer and
 * Basic credentials; a known token prefix (ghp_, github_pat_, glpat-, xox?-,
 * AKIA, sk-, hf_, ...); a JWT; a private key; a run of >= 20 mixed-case
 * letters and digits with near-random entropy or of >= 32 hex digits; the
 * argument an option of a command line hides; a value argv made secret. */
int msp_cc_value_is_secret(const char *val);

#define MSP_CC_SECRET_UNSTORED "<secret: not stored>"
#define MSP_CC_SECRET_HMAC "hmac-sha256:"
/* A secret inside free text: "<secret hmac-sha256:" 16 hex digits ">", or
 * MSP_CC_SECRET_UNSTORED without a salt, in its place. */
#define MSP_CC_SECRET_TAG_HMAC "<secret hmac-sha256:"
enum { MSP_CC_SECRET_NONE = 0, MSP_CC_SECRET_NOT_STORED = 1, MSP_CC_SECRET_HASHED = 2 };

/* What a pack stores for a secret value (malloc'd): MSP_CC_SECRET_UNSTORED,
 * or with MSPROBE_SECRET_SALT set "hmac-sha256:<hex of HMAC(salt, value)>". */
char *msp_cc_secret_stored(const char *val);
/* What a pack stores for a value (malloc'd), or NULL to store it as it is:
 * msp_cc_secret_stored(val) when key looks secret, or when the secrets found
 * in val cover all of it; else, when val holds secrets (msp_cc_value_is_secret),
 * val with each one replaced by its tag (MSP_CC_SECRET_TAG_HMAC) and the rest
 * kept, so that "login admin / hunter2 on the cluster" is packed as "login
 * admin / <secret hmac-sha256:...> on the cluster". A value already in a
 * stored form, or whose only secrets are tags, gives NULL (never masked
 * twice). key may be NULL; a key naming an identifier (GIT_COMMIT, MODEL_SHA)
 * keeps its hex and random-looking runs. */
char *msp_cc_redact_value(const char *key, const char *val);
/* For a stored text: MSP_CC_SECRET_NONE when it holds no tag (or is a whole
 * stored form: msp_cc_secret_kind), _HASHED when every tag is a keyed hash,
 * _NOT_STORED when one is not. */
int msp_cc_secret_masked(const char *s);
/* A stored value as a report shows it (malloc'd; NULL for NULL): "<secret>"
 * for a whole stored form, the text with each tag as "<secret>", or the text
 * itself. Never a hash. */
char *msp_cc_secret_shown(const char *s);
/* "none", or a keyed fingerprint of MSPROBE_SECRET_SALT (16 hex digits of
 * HMAC(salt, "msprobe salt id")) so two packs tell whether their salts agree. */
char *msp_cc_salt_id(void);
/* A salt is set and strong enough: secrets are stored as keyed hashes (see
 * msp_cc_salt_refused in msprobe/configcheck.h). */
int msp_cc_salt_in_use(void);
/* MSP_CC_SECRET_NONE, _NOT_STORED (also the old "<hidden>") or _HASHED
 * (also an old pack's "sha256:" value). */
int msp_cc_secret_kind(const char *stored);
/* For two stored values (NULL = unset) of which one is a secret or holds a
 * tag: "same", "differs" or "not compared"; NULL when neither does. Texts
 * with tags differ when their readable parts differ, are the same when all
 * of them, tags included, are equal keyed hashes, else are not compared. */
const char *msp_cc_secret_verdict(const char *b, const char *c);
/* In place: every string whose key (object member) or value looks secret,
 * and every number under a secret-looking key, becomes its stored form. */
void msp_cc_redact_json(cJSON *node, int depth);
/* argv[0..n) as a JSON array of strings, secrets in stored form: values of
 * --name=V and the argument after --name where name looks secret, and every
 * argument whose value looks secret. */
cJSON *msp_cc_redact_argv(const char *const *argv, size_t n);

/* The env member for `envp` (a NULL-terminated "K=V" array, e.g. environ):
 * {"salt": "none"|"MSPROBE_SECRET_SALT", "salt_id": ..., "hashed_keys": [...],
 * "vars": {K: V}}. Values are stored as msp_cc_redact_value gives them
 * (whole, or with the secrets inside replaced by tags), and their keys listed
 * in hashed_keys; MSPROBE_SECRET_SALT itself is never stored.
 * Returns NULL on OOM. */
cJSON *msp_cc_env_json(char *const *envp);

/* The manifest member: format, version, tool version, host, UTC time, rank,
 * world size, kind ("run" or "static") and the list of items present. */
cJSON *msp_cc_manifest_json(const char *kind, int64_t rank, int64_t world_size,
                            const char *const *items, size_t n_items);

/* One member of a pack being written. */
typedef struct msp_cc_member {
    const char *name; /* "env.json" */
    cJSON *json;      /* borrowed; printed when written */
} msp_cc_member_t;

/* Write members into zip_path atomically (zip_path.tmp.<pid>, then rename).
 * The parent directory is created when missing. */
msp_err msp_cc_pack_write(const char *zip_path, const msp_cc_member_t *members, size_t n);
/* The same under a name no other pack has: want, else want's stem with -1,
 * -2, ... (up to -999) before its extension; the name is taken atomically
 * (rename without replace, or a hard link), so processes writing at once
 * each keep their own pack. *chosen receives the name taken (malloc'd). */
msp_err msp_cc_pack_write_new(const char *want, const msp_cc_member_t *members, size_t n,
                              char **chosen);

/* "a/b.zip" + rank 3 -> "a/b_rank3.zip"; no ".zip" suffix -> "a/b_rank3". */
char *msp_cc_rank_path(const char *zip_path, int64_t rank);

/* ---- tensor statistics over raw host bytes ----------------------------- */

/* dtypes are format's (msprobe/format.h): one table for the whole tree. The
 * msp_cc_ names stay as aliases for the collectors that call them. */
typedef msp_dtype_t msp_cc_dtype_t;
#define msp_cc_dtype_from_name msp_dtype_from_name
#define msp_cc_dtype_size msp_dtype_size

typedef struct msp_cc_stats {
    int valid;                   /* 0: dtype without statistics or no elements */
    double max, min, mean, norm; /* NaN propagates into max/min/mean/norm */
    char hash[65];               /* sha256 of the raw bytes (always set) */
} msp_cc_stats_t;

/* Statistics (format's msp_stats_compute: NaN makes max/min/mean/norm NaN) and
 * hash of n elements of elem_size bytes stored contiguously at data. Statistics
 * only for known dtypes and n > 0; the hash covers the raw bytes always. */
void msp_cc_tensor_stats(const void *data, size_t n, size_t elem_size, msp_cc_dtype_t dt,
                         msp_cc_stats_t *out);

/* JSON number, or the string "nan"/"inf"/"-inf" (JSON has no non-finite numbers). */
cJSON *msp_cc_json_double(double v);
/* Reverse of msp_cc_json_double; 0 if the item is neither. */
int msp_cc_json_get_double(const cJSON *item, double *out);

/* cc_pip.py, embedded: lists importlib.metadata.distributions() (first of
 * each normalised name, as import would resolve it) into a JSON string
 * `result`. Run in-process by the collectors and by `msprobe config_check -d`
 * through MSPROBE_PYTHON -c (with a print of result after it). */
extern const char msp_cc_pip_py[];

#endif
