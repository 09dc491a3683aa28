/* Where the secrets of a value lie (msprobe-config_check(1), SECRETS): the
 * span finders that cc_secret.c's msp_cc_find runs on a value. Each detector
 * here (URLs and their userinfo, name=value pairs and credential words,
 * known-prefix, JWT, random-looking and hex tokens, PEM blocks, secret
 * arguments of command lines) adds the byte range of only what it found,
 * so that the rest of the text is still compared and read; the key-name
 * rules are cc_secret_name.c's, masking and redaction cc_secret.c's. */
#include "cc_internal.h"

#include <math.h>
#include <string.h>
#include <strings.h>

static int msp_cc_is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static int msp_cc_is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int msp_cc_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int msp_cc_is_hex(char c)
{
    return msp_cc_is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int msp_cc_is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Characters of a token: base64/base64url and the separators tokens use. */
static int msp_cc_is_tokch(char c)
{
    return msp_cc_is_alnum(c) || c == '_' || c == '-' || c == '+' || c == '=';
}

static int msp_cc_ieq_prefix(const char *s, size_t n, const char *pre)
{
    size_t k = strlen(pre);
    return n >= k && strncasecmp(s, pre, k) == 0;
}

static int msp_cc_word_is(const char *w, size_t n, const char *word)
{
    return strlen(word) == n && strncasecmp(w, word, n) == 0;
}

static int msp_cc_all_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!msp_cc_is_digit(s[i]))
            return 0;
    return n > 0;
}

/* ---- URLs ------------------------------------------------------------------ */

/* The values of credential parameters in a query string q[0..n). */
static void msp_cc_query_spans(const char *v, const char *q, size_t n, msp_cc_spans_t *out)
{
    static const char *const names[] = {
        "token",           "access_token",     "api_key",       "apikey", "key",    "sig",
        "signature",       "password",         "pass",          "pwd",    "secret", "auth",
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
                    msp_cc_span_add(out, (size_t)(eq + 1 - v), (size_t)(q + e - v));
        }
        i = e + 1;
    }
}

/* Every URL in v: a password or a long token as userinfo (postgres://u:pw@h/db,
 * Sentry's https://KEY@host/1), a credential in the query string, or the
 * path of a webhook address (the path is the key). */
void msp_cc_url_spans(const char *v, msp_cc_spans_t *out)
{
    for (const char *p = strstr(v, "://"); p; p = strstr(p + 3, "://")) {
        const char *a = p + 3;
        size_t alen = strcspn(a, "/?# \t\r\n\"'<>");
        const char *at = NULL;
        for (size_t i = 0; i < alen; i++)
            if (a[i] == '@')
                at = a + i;
        if (at) {
            const char *colon = memchr(a, ':', (size_t)(at - a));
            if (colon && at - colon > 1)
                msp_cc_span_add(out, (size_t)(colon + 1 - v), (size_t)(at - v));
            else if (!colon && at - a >= 16)
                msp_cc_span_add(out, (size_t)(a - v), (size_t)(at - v));
        }
        const char *host = at ? at + 1 : a;
        size_t hlen = (size_t)(a + alen - host);
        const char *rest = a + alen;
        size_t rlen = strcspn(rest, " \t\r\n\"'<>");
        int hook = msp_cc_ieq_prefix(host, hlen, "hooks.slack.com") ||
                   msp_cc_ieq_prefix(host, hlen, "discord.com") ||
                   msp_cc_ieq_prefix(host, hlen, "discordapp.com");
        for (size_t i = 0; !hook && i + 7 <= rlen; i++)
            hook = msp_cc_ieq_prefix(rest + i, rlen - i, "webhook");
        if (hook && rlen > 1) {
            msp_cc_span_add(out, (size_t)(rest + 1 - v), (size_t)(rest + rlen - v));
            continue;
        }
        const char *q = memchr(rest, '?', rlen);
        if (q)
            msp_cc_query_spans(v, q + 1, (size_t)(rest + rlen - q - 1), out);
    }
}

/* user:password@host outside a URL (a scp or git remote, a broker address):
 * the password, unless it reads as a version or port ("nginx:1.25@sha256:"). */
void msp_cc_userinfo_spans(const char *v, msp_cc_spans_t *out)
{
    for (const char *at = strchr(v, '@'); at; at = strchr(at + 1, '@')) {
        const char *h = at + 1;
        size_t hl = 0;
        int dot = 0;
        while (msp_cc_is_alnum(h[hl]) || h[hl] == '.' || h[hl] == '-')
            dot |= h[hl++] == '.';
        if (!hl || !(dot || (h[hl] == ':' && msp_cc_is_digit(h[hl + 1])) ||
                     (hl == 9 && strncasecmp(h, "localhost", 9) == 0)))
            continue;
        const char *pe = at, *ps = at;
        while (ps > v && !msp_cc_is_blank(ps[-1]) && ps[-1] != ':' && ps[-1] != '@' &&
               ps[-1] != '/' && ps[-1] != '\n' && ps[-1] != '"' && ps[-1] != '\'')
            ps--;
        if (ps == pe || ps == v || ps[-1] != ':')
            continue;
        const char *us = ps - 1;
        while (us > v && (msp_cc_is_alnum(us[-1]) || strchr("._%+-", us[-1])))
            us--;
        if (us == ps - 1 || (us > v && us[-1] == '/')) /* scheme://: msp_cc_url_spans */
            continue;
        size_t pl = (size_t)(pe - ps);
        size_t num = 0;
        while (num < pl && (msp_cc_is_digit(ps[num]) || ps[num] == '.'))
            num++;
        if (num == pl)
            continue;
        msp_cc_span_add(out, (size_t)(ps - v), (size_t)(pe - v));
    }
}

/* ---- name=value pairs and credential words --------------------------------- */

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

/* The extent of a value starting at v[i]: to its closing quote when it opens
 * with one (password="a b"), else to the first of stop (a blank and the
 * separators of its kind of text). Sets *at to where it starts. */
static size_t msp_cc_value_end(const char *v, size_t i, const char *stop, size_t *at)
{
    char q = v[i] == '"' || v[i] == '\'' ? v[i] : 0;
    size_t s = i + (q != 0), e = s;
    if (q)
        while (v[e] && v[e] != q && v[e] != '\n')
            e++;
    else
        e = s + strcspn(v + s, stop);
    *at = s;
    return e;
}

/* StrictHostKeyChecking=no, use_auth_token=true: a switch, not a secret. */
static int msp_cc_is_switch(const char *s, size_t n)
{
    static const char *const words[] = {"true", "false", "yes",  "no",  "on",      "off",
                                        "none", "null",  "auto", "ask", "enabled", "disabled"};
    for (size_t i = 0; i < MSP_CC_N(words); i++)
        if (msp_cc_word_is(s, n, words[i]))
            return 1;
    return 0;
}

/* name=value (or "name: value") pairs anywhere in v whose name says secret:
 * a libpq conninfo ("host=db password=x"), an ODBC or ADO string
 * ("...;Password=x;"), JVM options (-Djavax.net.ssl.keyStorePassword=x), a
 * JAAS line, an option glued to its value (--token=x). A number under a name
 * that only says key or token (max_tokens=100) is a count, not a secret. */
void msp_cc_pair_spans(const char *v, msp_cc_spans_t *out)
{
    for (const char *p = v; *p; p++) {
        int colon = *p == ':' && p[1] == ' ';
        if (*p != '=' && !colon)
            continue;
        const char *e = p;
        while (e > v && (msp_cc_is_alnum(e[-1]) || e[-1] == '_' || e[-1] == '.' || e[-1] == '-'))
            e--;
        size_t nl = (size_t)(p - e), i = (size_t)(p + 1 - v), at;
        while (colon && msp_cc_is_blank(v[i]))
            i++;
        size_t end = msp_cc_value_end(v, i, " \t\r\n;&,\"'", &at);
        /* "Authorization: Bearer X" keeps its scheme: msp_cc_auth_spans */
        if (!nl || end == at || !msp_cc_pair_name_is_secret(e, nl) ||
            (nl == 13 && strncasecmp(e, "authorization", 13) == 0) ||
            (nl == 19 && strncasecmp(e, "proxy-authorization", 19) == 0))
            continue;
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(nl < sizeof name ? nl : sizeof name - 1), e);
        if (msp_cc_all_digits(v + at, end - at) && !msp_cc_number_name_is_secret(name))
            continue;
        if (msp_cc_is_switch(v + at, end - at))
            continue;
        msp_cc_span_add(out, at, end);
    }
}

/* A word that announces a password, and whether a blank alone may separate
 * it from the password ("password hunter2"; "pass" and "pw" need '=' or ':'). */
static const struct {
    const char *word;
    int blank;
} msp_cc_pw_words[] = {
    {"password", 1}, {"passwd", 1}, {"passw0rd", 1}, {"passwort", 1}, {"passphrase", 1},
    {"passcode", 1}, {"pwd", 1},    {"pass", 0},     {"pw", 0},
};

/* What follows a blank after a password word reads as one: 4 characters or
 * more with a digit, a symbol or an upper-case letter past the first, and no
 * path ("password reset", "pwd /home" are not). */
static int msp_cc_looks_like_password(const char *s, size_t n)
{
    if (n < 4 || s[0] == '/' || s[0] == '~' || s[0] == '.' || s[0] == '<')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!msp_cc_is_alpha(s[i]) || (i && s[i] >= 'A' && s[i] <= 'Z'))
            return 1;
    return 0;
}

/* Trailing sentence punctuation is not part of a password at the end of a
 * sentence ("the password is hunter2."). */
static size_t msp_cc_trim_punct(const char *v, size_t a, size_t b)
{
    while (b > a + 1 && strchr(".,;:!?)]}", v[b - 1]))
        b--;
    return b;
}

/* A word of v starting at i: [A-Za-z0-9]+ not preceded by a letter or digit;
 * its length, 0 if none starts there. */
size_t msp_cc_word_at(const char *v, size_t i)
{
    if (!msp_cc_is_alpha(v[i]) || (i && msp_cc_is_alnum(v[i - 1])))
        return 0;
    size_t n = 0;
    while (msp_cc_is_alnum(v[i + n]))
        n++;
    return n;
}

/* "password hunter2", "password: hunter2", "passw0rd=x", "the password is x". */
void msp_cc_pw_word_spans(const char *v, size_t i, size_t n, msp_cc_spans_t *out)
{
    int blank_ok = -1;
    for (size_t k = 0; k < MSP_CC_N(msp_cc_pw_words); k++)
        if (msp_cc_word_is(v + i, n, msp_cc_pw_words[k].word))
            blank_ok = msp_cc_pw_words[k].blank;
    if (blank_ok < 0)
        return;
    size_t j = i + n, at;
    while (msp_cc_is_blank(v[j]))
        j++;
    int sep = v[j] == '=' || v[j] == ':';
    if (sep) {
        j++;
        while (msp_cc_is_blank(v[j]))
            j++;
    } else if (!blank_ok || j == i + n) {
        return;
    } else if ((v[j] == 'i' && v[j + 1] == 's' && msp_cc_is_blank(v[j + 2])) ||
               (v[j] == 'w' && v[j + 1] == 'a' && v[j + 2] == 's' && msp_cc_is_blank(v[j + 3]))) {
        j += v[j] == 'i' ? 3 : 4;
        while (msp_cc_is_blank(v[j]))
            j++;
    }
    size_t end = msp_cc_value_end(v, j, " \t\r\n,;&\"'", &at);
    if (v[j] != '"' && v[j] != '\'')
        end = msp_cc_trim_punct(v, at, end);
    if (end == at || (!sep && !msp_cc_looks_like_password(v + at, end - at)))
        return;
    msp_cc_span_add(out, at, end);
}

/* "login admin / hunter2", "user: svc:Pw0rd", "credentials root/toor": the
 * part after the user name's '/' or ':'. */
void msp_cc_login_spans(const char *v, size_t i, size_t n, msp_cc_spans_t *out)
{
    /* after login or credentials any second part; after user or account
     * one that reads as a password ("user alice / team nlp" is not) */
    static const struct {
        const char *word;
        int strict;
    } words[] = {{"login", 0}, {"creds", 0},    {"credentials", 0}, {"credential", 0},
                 {"user", 1},  {"username", 1}, {"account", 1}};
    int hit = -1;
    for (size_t k = 0; k < MSP_CC_N(words); k++)
        if (msp_cc_word_is(v + i, n, words[k].word))
            hit = words[k].strict;
    if (hit < 0)
        return;
    size_t j = i + n;
    while (msp_cc_is_blank(v[j]))
        j++;
    if (v[j] == ':' || v[j] == '=') {
        j++;
        while (msp_cc_is_blank(v[j]))
            j++;
    }
    size_t us = j;
    while (v[j] && !msp_cc_is_blank(v[j]) && !strchr("/:@\"'\r\n", v[j]))
        j++;
    if (j == us)
        return;
    while (msp_cc_is_blank(v[j]))
        j++;
    if (v[j] != '/' && v[j] != ':')
        return;
    j++;
    while (msp_cc_is_blank(v[j]))
        j++;
    size_t ps = j;
    while (v[j] && !msp_cc_is_blank(v[j]) && !strchr("\"'\r\n", v[j]))
        j++;
    size_t pe = msp_cc_trim_punct(v, ps, j);
    size_t num = 0;
    while (ps + num < pe && (msp_cc_is_digit(v[ps + num]) || v[ps + num] == '.'))
        num++;
    if (pe == ps || num == pe - ps || memchr(v + ps, '/', pe - ps) || v[ps] == '<' ||
        (hit && !msp_cc_looks_like_password(v + ps, pe - ps)))
        return;
    msp_cc_span_add(out, ps, pe);
}

/* "Authorization: <scheme> X" (to the end of its line), "Bearer X" and
 * "Basic X" (X base64 that is not a plain word). */
void msp_cc_auth_spans(const char *v, size_t i, size_t n, msp_cc_spans_t *out)
{
    size_t j = i + n;
    if (msp_cc_word_is(v + i, n, "authorization") ||
        msp_cc_word_is(v + i, n, "proxy-authorization")) {
        while (msp_cc_is_blank(v[j]))
            j++;
        if (v[j] != ':' && v[j] != '=')
            return;
        j++;
        while (msp_cc_is_blank(v[j]))
            j++;
        size_t w = 0;
        while (msp_cc_is_alpha(v[j + w]))
            w++;
        if (w && w <= 12 && msp_cc_is_blank(v[j + w])) { /* the scheme stays readable */
            j += w;
            while (msp_cc_is_blank(v[j]))
                j++;
        }
        size_t end = j + strcspn(v + j, "\r\n\"'");
        if (v[j] != '<')
            msp_cc_span_add(out, j, end);
        return;
    }
    int bearer = msp_cc_word_is(v + i, n, "bearer"), basic = msp_cc_word_is(v + i, n, "basic");
    if ((!bearer && !basic) || !msp_cc_is_blank(v[j]))
        return;
    while (msp_cc_is_blank(v[j]))
        j++;
    size_t s = j;
    int up = 0, lo = 0, dg = 0, eq = 0;
    while (msp_cc_is_alnum(v[j]) || (v[j] && strchr("-._~+/=", v[j]))) {
        up |= v[j] >= 'A' && v[j] <= 'Z';
        lo |= v[j] >= 'a' && v[j] <= 'z';
        dg |= msp_cc_is_digit(v[j]);
        eq |= v[j] == '=';
        j++;
    }
    if (j - s >= 8 && (bearer || dg || eq || (up && lo)))
        msp_cc_span_add(out, s, j);
}

/* ---- tokens ---------------------------------------------------------------- */

/* Known token prefixes and the least length of what follows. */
static const struct {
    const char *pre;
    size_t min_rest;
} msp_cc_token_prefixes[] = {
    {"ghp_", 20},        {"gho_", 20},     {"ghu_", 20},     {"ghs_", 20},     {"ghr_", 20},
    {"github_pat_", 20}, {"glpat-", 16},   {"glrt-", 16},    {"gldt-", 16},    {"xoxb-", 10},
    {"xoxa-", 10},       {"xoxp-", 10},    {"xoxr-", 10},    {"xoxs-", 10},    {"xapp-", 10},
    {"sk-", 20},         {"sk_live_", 10}, {"sk_test_", 10}, {"rk_live_", 10}, {"hf_", 20},
    {"npm_", 20},        {"pypi-", 20},    {"AIza", 30},     {"SG.", 20},      {"shpat_", 20},
    {"dop_v1_", 20},     {"AKIA", 16},     {"ASIA", 16},
};

/* A random-looking run: at least 20 characters mixing upper case, lower case
 * and digits, with entropy near that of random text of its length. */
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

/* header.payload.signature, base64url, header starting {" (eyJ): its length,
 * 0 if s starts no JWT. */
static size_t msp_cc_jwt_at(const char *s)
{
    if (strncmp(s, "eyJ", 3) != 0)
        return 0;
    size_t seg[3] = {0}, k = 0;
    const char *p = s;
    for (; k < 3; p++) {
        if (msp_cc_is_alnum(*p) || *p == '_' || *p == '-')
            seg[k]++;
        else if (*p == '.' && k < 2)
            k++;
        else
            break;
    }
    return k == 2 && seg[0] >= 10 && seg[1] >= 10 ? (size_t)(p - s) : 0;
}

/* A run of 32 or more hex digits with both letters and digits at v[a..b)
 * that is not labelled a digest ("sha256:", "md5=", "@sha256:"). */
static int msp_cc_hex_key_at(const char *v, size_t a, size_t b)
{
    static const char *const labels[] = {"sha1", "sha224",  "sha256", "sha384", "sha512",
                                         "md5",  "blake2b", "blake3", "xxh64",  "crc32"};
    int dg = 0, al = 0;
    if (b - a < 32)
        return 0;
    for (size_t i = a; i < b; i++) {
        if (!msp_cc_is_hex(v[i]))
            return 0;
        dg |= msp_cc_is_digit(v[i]);
        al |= !msp_cc_is_digit(v[i]);
    }
    if (!(dg && al))
        return 0;
    if (a && (v[a - 1] == ':' || v[a - 1] == '=' || v[a - 1] == '-')) {
        size_t e = a - 1, s = e;
        while (s && msp_cc_is_alnum(v[s - 1]))
            s--;
        for (size_t k = 0; k < MSP_CC_N(labels); k++)
            if (msp_cc_word_is(v + s, e - s, labels[k]))
                return 0;
    }
    return 1;
}

/* Characters of a token piece: base64url and the separators tokens use;
 * '=' separates pieces (name=value, base64's padding). */
int msp_cc_is_piecech(char c)
{
    return msp_cc_is_alnum(c) || c == '_' || c == '-' || c == '+';
}

/* Known prefixes, JWTs, random-looking runs and long hex keys, each judged
 * on a piece of text between other characters and '=': in name=value the
 * value alone (password=x, --secret-key=x), so that the name stays readable
 * and a value replaced by its tag leaves the name judged as before. Under a
 * name that says identifier, random-looking and hex runs are kept (a commit,
 * a run id); prefixes and JWTs never are. */
void msp_cc_token_spans(const char *v, int id_name, msp_cc_spans_t *out)
{
    for (size_t i = 0; v[i];) {
        if (!msp_cc_is_piecech(v[i])) {
            i++;
            continue;
        }
        size_t s = i;
        while (msp_cc_is_piecech(v[i]))
            i++;
        size_t n = i - s, jwt = msp_cc_jwt_at(v + s);
        if (jwt) {
            msp_cc_span_add(out, s, s + jwt);
            if (s + jwt > i)
                i = s + jwt;
            continue;
        }
        int hit = 0;
        for (size_t k = 0; k < MSP_CC_N(msp_cc_token_prefixes) && !hit; k++) {
            size_t kl = strlen(msp_cc_token_prefixes[k].pre), m = n;
            /* SG. tokens have dots: measure from the prefix to the end of the word. */
            if (strcmp(msp_cc_token_prefixes[k].pre, "SG.") == 0)
                m = strcspn(v + s, " \t\r\n\"',;=");
            if (m >= kl + msp_cc_token_prefixes[k].min_rest &&
                strncmp(v + s, msp_cc_token_prefixes[k].pre, kl) == 0) {
                msp_cc_span_add(out, s, s + m);
                if (s + m > i)
                    i = s + m;
                hit = 1;
            }
        }
        if (hit || id_name)
            continue;
        if (msp_cc_run_is_random(v + s, n)) {
            msp_cc_span_add(out, s, i);
            continue;
        }
        /* hex keys inside the piece (an API key after "key_", a hex secret) */
        for (size_t a = s; a < i;) {
            size_t b = a;
            while (b < i && msp_cc_is_alnum(v[b]))
                b++;
            if (msp_cc_hex_key_at(v, a, b))
                msp_cc_span_add(out, a, b);
            a = b + 1;
        }
    }
}

/* A PEM block, from -----BEGIN to its -----END ...----- (or the end). */
void msp_cc_pem_spans(const char *v, msp_cc_spans_t *out)
{
    for (const char *b = strstr(v, "-----BEGIN"); b;) {
        const char *e = strstr(b + 10, "-----END");
        const char *close = e ? strstr(e + 8, "-----") : NULL;
        size_t end = close ? (size_t)(close + 5 - v) : strlen(v);
        msp_cc_span_add(out, (size_t)(b - v), end);
        if (!close)
            return;
        b = strstr(close + 5, "-----BEGIN"); /* the next block, after this one's end */
    }
    if (strstr(v, "PRIVATE KEY") && !strstr(v, "-----BEGIN"))
        msp_cc_span_add(out, 0, strlen(v));
}

/* ---- command lines ----------------------------------------------------------- */

/* A long key after a flag: 32 or more hex digits (a W&B or API key, an
 * HMAC secret) or a random-looking run. */
static int msp_cc_looks_like_key(const char *s, size_t n)
{
    size_t hex = 0;
    while (hex < n && msp_cc_is_hex(s[hex]))
        hex++;
    return (hex == n && n >= 32) || msp_cc_run_is_random(s, n);
}

/* Whether the argument after option flag[0..fl) is secret: the option's name
 * says so (--password X, unless X is the next long option); -p X, as
 * sshpass, mysql and most tools take a password (X no number: -p 8080 is a
 * port); or X looks like a key and the option names no identifier
 * (--wandb 0123...cdef). */
int msp_cc_flag_hides(const char *flag, size_t fl, const char *next, size_t nl)
{
    char f[128];
    if (!fl || flag[0] != '-' || fl < 2 || memchr(flag, '=', fl) || !nl || fl >= sizeof f)
        return 0;
    if (next[0] == '-' && nl > 2 && next[1] == '-' && next[2] >= 'a' && next[2] <= 'z')
        return 0;
    memcpy(f, flag, fl);
    f[fl] = '\0';
    if (msp_cc_key_is_secret(f))
        return 1;
    if (strcmp(f, "-p") == 0 && next[0] != '-' && !msp_cc_all_digits(next, nl))
        return 1;
    /* a key is one token: -Dfile.encoding=UTF-8 after -Xmx4g is another option */
    for (size_t i = 0; i < nl; i++)
        if (!msp_cc_is_tokch(next[i]))
            return 0;
    return next[0] != '-' && !msp_cc_name_is_id(f) && msp_cc_looks_like_key(next, nl);
}

/* A command line inside a value (RUN_CMD="sshpass -p X ssh ...",
 * NB="jupyter notebook --NotebookApp.token X"), split at blanks. */
void msp_cc_cmdline_spans(const char *v, msp_cc_spans_t *out)
{
    size_t ws[256], we[256], n = 0;
    for (size_t i = 0; v[i] && n < MSP_CC_N(ws);) {
        while (v[i] && strchr(" \t\r\n", v[i]))
            i++;
        if (!v[i])
            break;
        ws[n] = i;
        while (v[i] && !strchr(" \t\r\n", v[i]))
            i++;
        we[n++] = i;
    }
    if (n < 2)
        return;
    int pw_tool = 0; /* after sshpass or mysql*, -pX is a password glued to -p */
    for (size_t i = 0; i < n; i++) {
        const char *w = v + ws[i];
        size_t wl = we[i] - ws[i], b = wl;
        while (b && w[b - 1] != '/')
            b--;
        if ((wl - b == 7 && strncmp(w + b, "sshpass", 7) == 0) ||
            (wl - b >= 5 && strncmp(w + b, "mysql", 5) == 0))
            pw_tool = 1;
        else if (pw_tool && wl > 2 && w[0] == '-' && w[1] == 'p')
            msp_cc_span_add(out, ws[i] + 2, we[i]);
        if (i + 1 < n && msp_cc_flag_hides(w, wl, v + ws[i + 1], we[i + 1] - ws[i + 1]))
            msp_cc_span_add(out, ws[i + 1], we[i + 1]);
    }
}
