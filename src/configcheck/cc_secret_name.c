/* What the secret finders stand on (msprobe-config_check(1), SECRETS): which
 * names say that their value is secret, or an identifier, or a secret number;
 * and the list of byte ranges every finder adds to. Below cc_secret_store.c,
 * cc_secret_find.c and cc_secret.c, which all call it. */
#include "cc_internal.h"

#include <string.h>

/* Substrings (upper case, '-' read as '_') marking a name whose value must
 * not be stored in clear. Over-matching costs a comparison, never a leak. */
static const char *const msp_cc_secret_words[] = {
    "TOKEN",        "SECRET",
    "PASSWORD",     "PASSWD",
    "PASSPHRASE",   "KEY",
    "CREDENTIAL",   "CREDS",
    "AUTH",         "PRIVATE",
    "SALT",         "COOKIE",
    "SESSION",      "SIGNATURE",
    "CERT_PASS",    "PWD_",
    "_PWD",         "JWT",
    "WEBHOOK",      "DB_URL",
    "DB_URI",       "DATABASE_URL",
    "DATABASE_URI", "DSN",
    "CONN_STR",     "CONNECTION_STRING",
    "PASSW0RD",     "PASSCODE",
};
/* Whole words of a name (split at '_', '-', '.'): too short to match inside
 * other words (PASS in COMPASS, PAT in PATH). */
static const char *const msp_cc_secret_tokens[] = {"PASS", "PAT", "PW", "PIN", "OTP", "CRED"};

/* name in upper case into up (cap bytes, cut there, NUL-terminated), '-'
 * as '_' when dash is set; its length (0 for NULL). */
static size_t msp_cc_upper(const char *name, char *up, size_t cap, int dash)
{
    size_t n = name ? strlen(name) : 0;
    if (n >= cap)
        n = cap - 1;
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        up[i] = (char)((ch >= 'a' && ch <= 'z') ? ch - 32 : dash && ch == '-' ? '_' : ch);
    }
    up[n] = '\0';
    return n;
}

int msp_cc_key_is_secret(const char *key)
{
    if (!key)
        return 0;
    char up[256];
    msp_cc_upper(key, up, sizeof up, 1);
    for (size_t i = 0; i < MSP_CC_N(msp_cc_secret_words); i++) {
        /* AUTH, but not in AUTHOR (GIT_AUTHOR_NAME names a person; AUTHORIZATION
         * and AUTHORITY still count) */
        const char *w = msp_cc_secret_words[i];
        for (const char *p = strstr(up, w); p; p = strstr(p + 1, w))
            if (strcmp(w, "AUTH") != 0 || strncmp(p, "AUTHOR", 6) != 0 || p[6] == 'I')
                return 1;
    }
    for (const char *p = up; *p;) {
        size_t w = strcspn(p, "_.");
        for (size_t i = 0; i < MSP_CC_N(msp_cc_secret_tokens); i++)
            if (strlen(msp_cc_secret_tokens[i]) == w && strncmp(p, msp_cc_secret_tokens[i], w) == 0)
                return 1;
        p += w;
        while (*p == '_' || *p == '.')
            p++;
    }
    return 0;
}

/* Names whose value is an identifier a config compare needs (a commit, a
 * run id, a digest), not a key, however random it looks: an option
 * (--commit), an env key (GIT_COMMIT, MODEL_SHA256) or a namespace field. */
int msp_cc_name_is_id(const char *name)
{
    static const char *const ids[] = {"COMMIT",  "SHA",    "REV",        "HASH", "UUID", "ID",
                                      "VERSION", "CKPT",   "CHECKPOINT", "RUN",  "SEED", "TAG",
                                      "BRANCH",  "DIGEST", "CHECKSUM",   "MD5",  "BUILD"};
    char up[64];
    size_t n = msp_cc_upper(name, up, sizeof up, 0);
    for (size_t i = 0; n && i < MSP_CC_N(ids); i++)
        if (strstr(up, ids[i]))
            return 1;
    return 0;
}

void msp_cc_span_add(msp_cc_spans_t *s, size_t a, size_t b)
{
    if (b <= a)
        return;
    if (s->n == MSP_CC_SPANS_MAX) {
        s->overflow = 1;
        return;
    }
    s->v[s->n++] = (msp_cc_span_t){a, b};
}

/* Numbers are hyperparameters (num_key_value_heads, key_dim) unless their
 * name says password, PIN, secret or token. */
int msp_cc_number_name_is_secret(const char *key)
{
    static const char *const words[] = {"PASS", "PIN", "SECRET", "TOKEN", "PWD", "OTP"};
    char up[128];
    msp_cc_upper(key, up, sizeof up, 0);
    for (size_t i = 0; i < MSP_CC_N(words); i++)
        if (strstr(up, words[i]) && !strstr(up, "TOKENS") && !strstr(up, "SPINE"))
            return 1;
    return 0;
}
