/* What a pack may keep of a value that looks secret: nothing, or a keyed hash.
 *
 * A secret is recognised by its name (env key, option, namespace field) and by
 * its value (credentials inside a URL, tokens by prefix and shape, JWTs, long
 * high-entropy runs), because a leaked DATABASE_URL or a --db-url argument does
 * not say "password" in its name. Without MSPROBE_SECRET_SALT nothing of the
 * value is stored; with it, HMAC-SHA256 keyed by the salt: an unkeyed or
 * public-salt hash of a short password is recovered by dictionary. */
#include "cc_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Substrings (upper case, '-' read as '_') marking a name whose value must
 * not be stored in clear. Over-matching costs a comparison, never a leak. */
static const char *const msp_cc_secret_words[] = {
    "TOKEN",  "SECRET",  "PASSWORD", "PASSWD", "PASSPHRASE", "KEY",     "CREDENTIAL", "CREDS", "AUTH",
    "PRIVATE", "SALT",   "COOKIE",   "SESSION", "SIGNATURE", "CERT_PASS", "PWD_",    "_PWD",  "JWT",
    "WEBHOOK", "DB_URL", "DB_URI",   "DATABASE_URL", "DATABASE_URI", "DSN", "CONN_STR", "CONNECTION_STRING",
};
/* Whole words of a name (split at '_', '-', '.'): too short to match inside
 * other words (PASS in COMPASS, PAT in PATH). */
static const char *const msp_cc_secret_tokens[] = {"PASS", "PAT", "PW", "PIN", "OTP", "CRED"};

int msp_cc_key_is_secret(const char *key)
{
    if (!key)
        return 0;
    size_t n = strlen(key);
    char up[256];
    if (n >= sizeof up)
        n = sizeof up - 1;
    for (size_t i = 0; i < n; i++) {
        char ch = key[i];
        up[i] = (char)((ch >= 'a' && ch <= 'z') ? ch - 32 : ch == '-' ? '_' : ch);
    }
    up[n] = '\0';
    for (size_t i = 0; i < MSP_CC_N(msp_cc_secret_words); i++)
        if (strstr(up, msp_cc_secret_words[i]))
            return 1;
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

static int msp_cc_is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Characters of a token: base64/base64url and the separators tokens use. */
static int msp_cc_is_tokch(char c)
{
    return msp_cc_is_alnum(c) || c == '_' || c == '-' || c == '+' || c == '=';
}

static int msp_cc_ieq_prefix(const char *s, size_t n, const char *pre)
{
    size_t k = strlen(pre);
    if (n < k)
        return 0;
    for (size_t i = 0; i < k; i++) {
        char a = s[i], b = pre[i];
        if (a >= 'A' && a <= 'Z')
            a = (char)(a + 32);
        if (b >= 'A' && b <= 'Z')
            b = (char)(b + 32);
        if (a != b)
            return 0;
    }
    return 1;
}

/* Query parameters whose value is a credential. */
static int msp_cc_query_is_secret(const char *q, size_t n)
{
    static const char *const names[] = {"token", "access_token", "api_key", "apikey", "key", "sig",
                                        "signature", "password", "pass", "pwd", "secret", "auth",
                                        "x-amz-signature", "x-amz-credential", "client_secret", "code"};
    size_t i = 0;
    while (i < n) {
        size_t e = i;
        while (e < n && q[e] != '&' && q[e] != ';')
            e++;
        const char *eq = memchr(q + i, '=', e - i);
        if (eq && (size_t)(q + e - eq) > 1) {
            size_t kl = (size_t)(eq - (q + i));
            for (size_t k = 0; k < MSP_CC_N(names); k++)
                if (strlen(names[k]) == kl && msp_cc_ieq_prefix(q + i, kl, names[k]))
                    return 1;
        }
        i = e + 1;
    }
    return 0;
}

/* Every URL in s: a password or a long token as userinfo
 * (postgres://u:pw@h/db, https://user:pw@proxy, Sentry's https://KEY@host/1),
 * a credential in the query string, or a webhook address (the path is the key). */
static int msp_cc_url_is_secret(const char *s)
{
    for (const char *p = strstr(s, "://"); p; p = strstr(p + 3, "://")) {
        const char *a = p + 3;
        size_t alen = strcspn(a, "/?# \t\r\n\"'<>");
        const char *at = NULL;
        for (size_t i = 0; i < alen; i++)
            if (a[i] == '@')
                at = a + i;
        if (at) {
            const char *colon = memchr(a, ':', (size_t)(at - a));
            if ((colon && at - colon > 1) || at - a >= 16)
                return 1;
        }
        const char *host = at ? at + 1 : a;
        size_t hlen = (size_t)(a + alen - host);
        const char *rest = a + alen;
        size_t rlen = strcspn(rest, " \t\r\n\"'<>");
        if ((hlen >= 15 && msp_cc_ieq_prefix(host, hlen, "hooks.slack.com")) ||
            (hlen >= 15 && msp_cc_ieq_prefix(host, hlen, "discord.com")))
            return 1;
        for (size_t i = 0; i + 8 <= rlen; i++)
            if (msp_cc_ieq_prefix(rest + i, rlen - i, "webhook"))
                return 1;
        const char *q = memchr(rest, '?', rlen);
        if (q && msp_cc_query_is_secret(q + 1, (size_t)(rest + rlen - q - 1)))
            return 1;
    }
    return 0;
}

/* Known token prefixes and the least length of what follows. */
static const struct {
    const char *pre;
    size_t min_rest;
} msp_cc_token_prefixes[] = {
    {"ghp_", 20}, {"gho_", 20}, {"ghu_", 20}, {"ghs_", 20}, {"ghr_", 20}, {"github_pat_", 20},
    {"glpat-", 16}, {"glrt-", 16}, {"gldt-", 16}, {"xoxb-", 10}, {"xoxa-", 10}, {"xoxp-", 10},
    {"xoxr-", 10}, {"xoxs-", 10}, {"xapp-", 10}, {"sk-", 20}, {"sk_live_", 10}, {"sk_test_", 10},
    {"rk_live_", 10}, {"hf_", 20}, {"npm_", 20}, {"pypi-", 20}, {"AIza", 30}, {"SG.", 20},
    {"shpat_", 20}, {"dop_v1_", 20}, {"AKIA", 16}, {"ASIA", 16},
};

/* Shannon entropy (bits per character) of n bytes. */
static double msp_cc_entropy(const char *s, size_t n)
{
    unsigned cnt[256] = {0};
    for (size_t i = 0; i < n; i++)
        cnt[(unsigned char)s[i]]++;
    double h = 0;
    for (size_t i = 0; i < 256; i++)
        if (cnt[i]) {
            double f = (double)cnt[i] / (double)n;
            h -= f * log2(f);
        }
    return h;
}

/* A random-looking run: at least 20 characters mixing upper case, lower case
 * and digits, with entropy near that of random text of its length. Hex-only
 * identifiers (commit ids, UUIDs) stay below the bar: they are rarely secrets
 * and a config compare needs them. */
static int msp_cc_run_is_random(const char *s, size_t n)
{
    if (n < 20)
        return 0;
    int up = 0, lo = 0, dg = 0;
    for (size_t i = 0; i < n; i++) {
        up |= s[i] >= 'A' && s[i] <= 'Z';
        lo |= s[i] >= 'a' && s[i] <= 'z';
        dg |= s[i] >= '0' && s[i] <= '9';
    }
    if (!(up && lo && dg))
        return 0;
    double bar = 0.85 * log2((double)n);
    if (bar > 4.5)
        bar = 4.5;
    return msp_cc_entropy(s, n) >= bar;
}

/* header.payload.signature, base64url, header starting {" (eyJ). */
static int msp_cc_is_jwt_at(const char *s)
{
    if (strncmp(s, "eyJ", 3) != 0)
        return 0;
    size_t seg[3] = {0}, k = 0;
    for (const char *p = s; k < 3; p++) {
        if (msp_cc_is_alnum(*p) || *p == '_' || *p == '-')
            seg[k]++;
        else if (*p == '.' && k < 2)
            k++;
        else
            break;
    }
    return k == 2 && seg[0] >= 10 && seg[1] >= 10;
}

static int msp_cc_number_name_is_secret(const char *key);

/* Values already found secret in one place (the argument after --password),
 * so that the same text elsewhere (argparse's namespace field "password",
 * or "p" for -p) is found too, whatever its name there. */
#define MSP_CC_REMEMBER_MAX 256
static pthread_mutex_t msp_cc_known_mu = PTHREAD_MUTEX_INITIALIZER;
static char *msp_cc_known[MSP_CC_REMEMBER_MAX];
static size_t msp_cc_n_known;

static void msp_cc_secret_remember(const char *v)
{
    if (!v || strlen(v) < 4) /* "1", "yes": too common to hide everywhere */
        return;
    pthread_mutex_lock(&msp_cc_known_mu);
    int have = 0;
    for (size_t i = 0; i < msp_cc_n_known && !have; i++)
        have = strcmp(msp_cc_known[i], v) == 0;
    if (!have && msp_cc_n_known < MSP_CC_REMEMBER_MAX &&
        (msp_cc_known[msp_cc_n_known] = strdup(v)))
        msp_cc_n_known++;
    pthread_mutex_unlock(&msp_cc_known_mu);
}

static int msp_cc_is_remembered(const char *v)
{
    pthread_mutex_lock(&msp_cc_known_mu);
    int have = 0;
    for (size_t i = 0; i < msp_cc_n_known && !have; i++)
        have = strcmp(msp_cc_known[i], v) == 0;
    pthread_mutex_unlock(&msp_cc_known_mu);
    return have;
}

/* A name of a key=value pair inside a value that says its value is secret:
 * what msp_cc_key_is_secret says, and PWD (ODBC's Pwd=; as a variable's own
 * name it is the shell's working directory, so only here). */
static int msp_cc_pair_name_is_secret(const char *name, size_t n)
{
    char buf[128];
    while (n && *name == '-') { /* -Dx.keyStorePassword, --token */
        name++;
        n--;
    }
    if (!n || n >= sizeof buf)
        return 0;
    memcpy(buf, name, n);
    buf[n] = '\0';
    return msp_cc_key_is_secret(buf) || strcasecmp(buf, "pwd") == 0;
}

static int msp_cc_all_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return n > 0;
}

/* name=value (or "name: value") pairs anywhere in v whose name says secret:
 * a libpq conninfo ("host=db password=x"), an ODBC or ADO string
 * ("...;Password=x;"), JVM options (-Djavax.net.ssl.keyStorePassword=x), a
 * JAAS line, an option glued to its value (--token=x). A number under a name
 * that only says key or token (max_tokens=100) is a count, not a secret. */
static int msp_cc_has_secret_pair(const char *v)
{
    for (const char *p = v; *p; p++) {
        int colon = *p == ':' && p[1] == ' ';
        if (*p != '=' && !colon)
            continue;
        const char *e = p;
        while (e > v && (msp_cc_is_alnum(e[-1]) || e[-1] == '_' || e[-1] == '.' || e[-1] == '-'))
            e--;
        size_t nl = (size_t)(p - e);
        const char *val = p + 1 + colon;
        while (*val == '"' || *val == '\'' || (colon && *val == ' '))
            val++;
        size_t vl = strcspn(val, " \t\r\n;&,\"'");
        if (!nl || !vl || !msp_cc_pair_name_is_secret(e, nl))
            continue;
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(nl < sizeof name ? nl : sizeof name - 1), e);
        if (msp_cc_all_digits(val, vl) && !msp_cc_number_name_is_secret(name))
            continue;
        return 1;
    }
    return 0;
}

/* Names of options whose value is an identifier a config compare needs
 * (a commit, a run id), not a key, however random it looks. */
static int msp_cc_flag_is_id(const char *flag)
{
    static const char *const ids[] = {"COMMIT", "SHA", "REV", "HASH", "UUID", "ID", "VERSION",
                                      "CKPT", "CHECKPOINT", "RUN", "SEED", "TAG", "BRANCH"};
    char up[64];
    size_t n = strlen(flag);
    if (n >= sizeof up)
        n = sizeof up - 1;
    for (size_t i = 0; i < n; i++)
        up[i] = (char)((flag[i] >= 'a' && flag[i] <= 'z') ? flag[i] - 32 : flag[i]);
    up[n] = '\0';
    for (size_t i = 0; i < MSP_CC_N(ids); i++)
        if (strstr(up, ids[i]))
            return 1;
    return 0;
}

/* A long key after a flag: 32 or more hex digits (a W&B or API key, an
 * HMAC secret) or a random-looking run. */
static int msp_cc_looks_like_key(const char *s)
{
    size_t n = strlen(s), hex = 0;
    while (hex < n && ((s[hex] >= '0' && s[hex] <= '9') || (s[hex] >= 'a' && s[hex] <= 'f') ||
                       (s[hex] >= 'A' && s[hex] <= 'F')))
        hex++;
    return (hex == n && n >= 32) || msp_cc_run_is_random(s, n);
}

/* Whether the argument after option `flag` is secret: the option's name
 * says so (--password X, unless X is the next long option); -p X, as
 * sshpass, mysql and most tools take a password (X no number: -p 8080 is a
 * port); or X looks like a key and the option names no identifier
 * (--wandb 0123...cdef). */
static int msp_cc_flag_hides(const char *flag, const char *next)
{
    if (!flag || flag[0] != '-' || !flag[1] || strchr(flag, '=') || !next)
        return 0;
    if (next[0] == '-' && next[1] == '-' && next[2] >= 'a' && next[2] <= 'z')
        return 0;
    if (msp_cc_key_is_secret(flag))
        return 1;
    if (strcmp(flag, "-p") == 0 && next[0] && next[0] != '-' &&
        !msp_cc_all_digits(next, strlen(next)))
        return 1;
    return !msp_cc_flag_is_id(flag) && msp_cc_looks_like_key(next);
}

/* A command line inside a value (RUN_CMD="sshpass -p X ssh ...",
 * NB="jupyter notebook --NotebookApp.token X"), split at blanks. */
static int msp_cc_cmdline_is_secret(const char *v)
{
    char buf[4096];
    if (!strchr(v, ' ') || strlen(v) >= sizeof buf)
        return 0;
    strcpy(buf, v);
    char *words[256];
    size_t n = 0;
    for (char *s = strtok(buf, " \t\r\n"); s && n < MSP_CC_N(words); s = strtok(NULL, " \t\r\n"))
        words[n++] = s;
    int pw_tool = 0; /* after sshpass or mysql*, -pX is a password glued to -p */
    for (size_t i = 0; i < n; i++) {
        const char *w = words[i], *base = strrchr(w, '/');
        base = base ? base + 1 : w;
        if (!strcmp(base, "sshpass") || !strncmp(base, "mysql", 5))
            pw_tool = 1;
        else if (pw_tool && w[0] == '-' && w[1] == 'p' && w[2])
            return 1;
        if (i + 1 < n && msp_cc_flag_hides(w, words[i + 1]))
            return 1;
    }
    return 0;
}

int msp_cc_value_is_secret(const char *v)
{
    if (!v || !*v)
        return 0;
    if (msp_cc_url_is_secret(v) || msp_cc_has_secret_pair(v) || msp_cc_cmdline_is_secret(v) ||
        msp_cc_is_remembered(v))
        return 1;
    if (strstr(v, "-----BEGIN") || strstr(v, "PRIVATE KEY"))
        return 1;
    for (const char *p = v; *p;) {
        if (!msp_cc_is_tokch(*p)) {
            p++;
            continue;
        }
        const char *start = p;
        while (msp_cc_is_tokch(*p))
            p++;
        size_t n = (size_t)(p - start);
        if (msp_cc_is_jwt_at(start))
            return 1;
        for (size_t i = 0; i < MSP_CC_N(msp_cc_token_prefixes); i++) {
            size_t k = strlen(msp_cc_token_prefixes[i].pre);
            /* SG. tokens have dots: measure from the prefix to the end of the word. */
            size_t m = n;
            if (strcmp(msp_cc_token_prefixes[i].pre, "SG.") == 0)
                m = strcspn(start, " \t\r\n\"',;");
            if (m >= k + msp_cc_token_prefixes[i].min_rest && strncmp(start, msp_cc_token_prefixes[i].pre, k) == 0)
                return 1;
        }
        if (msp_cc_run_is_random(start, n))
            return 1;
        /* Authorization: Bearer X / Basic X */
        if ((n == 6 && strncmp(start, "Bearer", 6) == 0) || (n == 5 && strncmp(start, "Basic", 5) == 0)) {
            const char *q = p;
            while (*q == ' ')
                q++;
            if (strlen(q) >= 8 && q > p)
                return 1;
        }
    }
    return 0;
}

static void msp_cc_hmac_sha256(const char *key, size_t klen, const char *msg, size_t mlen, char hex[65])
{
    unsigned char k[64] = {0}, pad[64], inner[32];
    char ihex[65];
    msp_cc_sha256_t s;
    if (klen > 64) {
        char khex[65];
        msp_cc_sha256_init(&s);
        msp_cc_sha256_update(&s, key, klen);
        msp_cc_sha256_hex(&s, khex);
        for (int i = 0; i < 32; i++)
            k[i] = (unsigned char)strtoul((char[3]){khex[2 * i], khex[2 * i + 1], 0}, NULL, 16);
    } else {
        memcpy(k, key, klen);
    }
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x36;
    msp_cc_sha256_init(&s);
    msp_cc_sha256_update(&s, pad, 64);
    msp_cc_sha256_update(&s, msg, mlen);
    msp_cc_sha256_hex(&s, ihex);
    for (int i = 0; i < 32; i++)
        inner[i] = (unsigned char)strtoul((char[3]){ihex[2 * i], ihex[2 * i + 1], 0}, NULL, 16);
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x5c;
    msp_cc_sha256_init(&s);
    msp_cc_sha256_update(&s, pad, 64);
    msp_cc_sha256_update(&s, inner, 32);
    msp_cc_sha256_hex(&s, hex);
}

/* A salt no guess finds. Whatever a pack stores that depends on the salt
 * (salt_id, and the keyed hash of any value an attacker knows, such as
 * TOKENIZERS_PARALLELISM=false) lets anyone holding the pack test guesses
 * offline; a guessed salt then gives away every short password hashed with
 * it. So a salt is used only when guessing is hopeless: at least 16
 * characters, 10 of them distinct, and 64 bits by its own character
 * frequencies ("msprobe", "password123", "msprobe-msprobe-msprobe" are
 * not). */
static int msp_cc_salt_strong(const char *s)
{
    size_t n = strlen(s), distinct = 0;
    unsigned char seen[256] = {0};
    for (size_t i = 0; i < n; i++)
        if (!seen[(unsigned char)s[i]]++)
            distinct++;
    return n >= 16 && distinct >= 10 && msp_cc_entropy(s, n) * (double)n >= 64.0;
}

static const char *msp_cc_salt(void)
{
    const char *s = getenv("MSPROBE_SECRET_SALT");
    return s && *s && msp_cc_salt_strong(s) ? s : NULL;
}

int msp_cc_salt_refused(void)
{
    const char *s = getenv("MSPROBE_SECRET_SALT");
    return s && *s && !msp_cc_salt_strong(s);
}

int msp_cc_salt_in_use(void)
{
    return msp_cc_salt() != NULL;
}

char *msp_cc_secret_stored(const char *val)
{
    const char *salt = msp_cc_salt();
    if (!salt)
        return strdup(MSP_CC_SECRET_UNSTORED);
    char hex[65];
    msp_cc_hmac_sha256(salt, strlen(salt), val ? val : "", val ? strlen(val) : 0, hex);
    return msp_asprintf("%s%s", MSP_CC_SECRET_HMAC, hex);
}

char *msp_cc_salt_id(void)
{
    const char *salt = msp_cc_salt();
    if (!salt)
        return strdup("none");
    char hex[65];
    msp_cc_hmac_sha256(salt, strlen(salt), "msprobe salt id", 15, hex);
    return msp_asprintf("hmac-sha256:%.16s", hex);
}

int msp_cc_secret_kind(const char *stored)
{
    if (!stored)
        return MSP_CC_SECRET_NONE;
    if (strcmp(stored, MSP_CC_SECRET_UNSTORED) == 0 || strcmp(stored, "<hidden>") == 0)
        return MSP_CC_SECRET_NOT_STORED;
    if (strncmp(stored, MSP_CC_SECRET_HMAC, strlen(MSP_CC_SECRET_HMAC)) == 0 ||
        (strncmp(stored, "sha256:", 7) == 0 && strlen(stored) == 71))
        return MSP_CC_SECRET_HASHED;
    return MSP_CC_SECRET_NONE;
}

const char *msp_cc_secret_verdict(const char *b, const char *c)
{
    int kb = msp_cc_secret_kind(b), kc = msp_cc_secret_kind(c);
    if (kb == MSP_CC_SECRET_HASHED && kc == MSP_CC_SECRET_HASHED)
        return strcmp(b, c) == 0 ? "same" : "differs";
    if (kb == MSP_CC_SECRET_NONE && kc == MSP_CC_SECRET_NONE)
        return NULL;
    /* One side missing and the other set: that much is known without the value. */
    if (!b || !c)
        return "differs";
    return "not compared";
}

char *msp_cc_redact_value(const char *key, const char *val)
{
    if (msp_cc_secret_kind(val) != MSP_CC_SECRET_NONE)
        return NULL; /* stored form already: redacting twice would hash the hash */
    if (msp_cc_key_is_secret(key) || msp_cc_value_is_secret(val))
        return msp_cc_secret_stored(val);
    return NULL;
}

/* Numbers are hyperparameters (num_key_value_heads, key_dim) unless their
 * name says password, PIN, secret or token. */
static int msp_cc_number_name_is_secret(const char *key)
{
    static const char *const words[] = {"PASS", "PIN", "SECRET", "TOKEN", "PWD", "OTP"};
    char up[128];
    size_t n = key ? strlen(key) : 0;
    if (n >= sizeof up)
        n = sizeof up - 1;
    for (size_t i = 0; i < n; i++)
        up[i] = (char)((key[i] >= 'a' && key[i] <= 'z') ? key[i] - 32 : key[i]);
    up[n] = '\0';
    for (size_t i = 0; i < MSP_CC_N(words); i++)
        if (strstr(up, words[i]) && !strstr(up, "TOKENS") && !strstr(up, "SPINE"))
            return 1;
    return 0;
}

void msp_cc_redact_json(cJSON *node, int depth)
{
    if (!node || depth > 64)
        return;
    for (cJSON *e = node->child, *next; e; e = next) {
        next = e->next;
        if (cJSON_IsString(e)) {
            const char *key = cJSON_IsObject(node) ? e->string : NULL;
            char *r = msp_cc_redact_value(key, e->valuestring);
            if (r) {
                cJSON_SetValuestring(e, r);
                free(r);
            }
        } else if (cJSON_IsNumber(e) && cJSON_IsObject(node) && msp_cc_number_name_is_secret(e->string)) {
            /* A numeric PIN or key is a secret too: store its text the same way. */
            char buf[64];
            snprintf(buf, sizeof buf, "%.17g", e->valuedouble);
            char *r = msp_cc_secret_stored(buf);
            cJSON *s = r ? cJSON_CreateString(r) : NULL;
            free(r);
            if (s)
                cJSON_ReplaceItemViaPointer(node, e, s);
        } else if (cJSON_IsObject(e) || cJSON_IsArray(e)) {
            msp_cc_redact_json(e, depth + 1);
        }
    }
}

cJSON *msp_cc_redact_argv(const char *const *argv, size_t n)
{
    cJSON *args = cJSON_CreateArray();
    int hide_next = 0;
    for (size_t i = 0; args && i < n; i++) {
        const char *t = argv[i];
        char *out = NULL;
        const char *eq = t[0] == '-' ? strchr(t, '=') : NULL;
        if (eq) {
            /* --token=X, --db-url=postgres://u:pw@h/db */
            char *name = strndup(t, (size_t)(eq - t));
            char *r = name ? msp_cc_redact_value(name, eq + 1) : NULL;
            if (r) {
                out = msp_asprintf("%s=%s", name, r);
                msp_cc_secret_remember(eq + 1);
            }
            free(r);
            free(name);
        } else if (hide_next || msp_cc_value_is_secret(t)) {
            /* After --password any value is hidden, unless it is the next long option. */
            out = msp_cc_secret_stored(t);
            msp_cc_secret_remember(t);
        }
        cJSON_AddItemToArray(args, cJSON_CreateString(out ? out : t));
        free(out);
        hide_next = i + 1 < n && !eq && msp_cc_flag_hides(t, argv[i + 1]);
    }
    return args;
}
