/* What a pack keeps of a secret, and how two kept forms compare: nothing
 * ("<secret: not stored>") without MSPROBE_SECRET_SALT, else HMAC-SHA256
 * keyed by the salt; a whole value as "hmac-sha256:HEX", a secret inside
 * free text as a tag "<secret hmac-sha256:HEX16>" in its place, the rest of
 * the text kept (cc_secret.c finds the secrets). An unkeyed or public-salt
 * hash of a short password is recovered by dictionary, hence the key. */
#include "cc_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double msp_cc_entropy(const char *s, size_t n)
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
    if (msp_cc_hmac_sha256_hex(salt, strlen(salt), val ? val : "", val ? strlen(val) : 0, hex))
        return strdup(MSP_CC_SECRET_UNSTORED); /* libcrypto failed: keep nothing */
    return msp_asprintf("%s%s", MSP_CC_SECRET_HMAC, hex);
}

char *msp_cc_secret_tag(const char *s, size_t n)
{
    const char *salt = msp_cc_salt();
    if (!salt)
        return strdup(MSP_CC_SECRET_UNSTORED);
    char hex[65];
    if (msp_cc_hmac_sha256_hex(salt, strlen(salt), s, n, hex))
        return strdup(MSP_CC_SECRET_UNSTORED);
    return msp_asprintf("%s%.16s>", MSP_CC_SECRET_TAG_HMAC, hex);
}

char *msp_cc_salt_id(void)
{
    const char *salt = msp_cc_salt();
    if (!salt)
        return strdup("none");
    char hex[65];
    if (msp_cc_hmac_sha256_hex(salt, strlen(salt), "msprobe salt id", 15, hex))
        return strdup("none");
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

/* The length of the tag at p ("<secret: not stored>" or
 * "<secret hmac-sha256:" 16 lowercase hex digits ">"), 0 if none;
 * *hashed tells which. */
static size_t msp_cc_tag_at(const char *p, int *hashed)
{
    size_t u = strlen(MSP_CC_SECRET_UNSTORED), h = strlen(MSP_CC_SECRET_TAG_HMAC);
    if (p[0] != '<')
        return 0;
    if (strncmp(p, MSP_CC_SECRET_UNSTORED, u) == 0) {
        *hashed = 0;
        return u;
    }
    if (strncmp(p, MSP_CC_SECRET_TAG_HMAC, h) != 0)
        return 0;
    for (size_t i = 0; i < 16; i++)
        if (!((p[h + i] >= '0' && p[h + i] <= '9') || (p[h + i] >= 'a' && p[h + i] <= 'f')))
            return 0;
    if (p[h + 16] != '>')
        return 0;
    *hashed = 1;
    return h + 17;
}

void msp_cc_secret_tags(const char *s, msp_cc_spans_t *out)
{
    for (size_t i = 0; s && s[i]; i++) {
        int hashed = 0;
        size_t n = msp_cc_tag_at(s + i, &hashed);
        if (!n)
            continue;
        msp_cc_span_add(out, i, i + n);
        i += n - 1;
    }
}

int msp_cc_secret_masked(const char *s)
{
    int any = 0, unstored = 0;
    if (!s || msp_cc_secret_kind(s) != MSP_CC_SECRET_NONE)
        return MSP_CC_SECRET_NONE;
    for (size_t i = 0; s[i]; i++) {
        int hashed = 0;
        size_t n = msp_cc_tag_at(s + i, &hashed);
        if (!n)
            continue;
        any = 1;
        unstored |= !hashed;
        i += n - 1;
    }
    return !any ? MSP_CC_SECRET_NONE : unstored ? MSP_CC_SECRET_NOT_STORED : MSP_CC_SECRET_HASHED;
}

/* Two texts equal once every tag is read as "a secret": the readable parts
 * of two masked values agree. */
static int msp_cc_skeleton_eq(const char *a, const char *b)
{
    for (;;) {
        int ha = 0, hb = 0;
        size_t ta = msp_cc_tag_at(a, &ha), tb = msp_cc_tag_at(b, &hb);
        if (ta || tb) {
            if (!ta || !tb)
                return 0;
            a += ta;
            b += tb;
            continue;
        }
        if (*a != *b)
            return 0;
        if (!*a)
            return 1;
        a++;
        b++;
    }
}

const char *msp_cc_secret_verdict(const char *b, const char *c)
{
    int kb = msp_cc_secret_kind(b), kc = msp_cc_secret_kind(c);
    if (kb == MSP_CC_SECRET_HASHED && kc == MSP_CC_SECRET_HASHED)
        return strcmp(b, c) == 0 ? "same" : "differs";
    int mb = msp_cc_secret_masked(b), mc = msp_cc_secret_masked(c);
    if (!kb && !kc && !mb && !mc)
        return NULL;
    /* One side missing and the other set: that much is known without the value. */
    if (!b || !c)
        return "differs";
    if (!kb && !kc) {
        /* text with secrets in it: the readable parts first, then the tags */
        if (!msp_cc_skeleton_eq(b, c))
            return "differs";
        if (mb == MSP_CC_SECRET_HASHED && mc == MSP_CC_SECRET_HASHED)
            return strcmp(b, c) == 0 ? "same" : "differs";
    }
    return "not compared";
}

char *msp_cc_secret_shown(const char *s)
{
    if (!s)
        return NULL;
    if (msp_cc_secret_kind(s) != MSP_CC_SECRET_NONE)
        return strdup("<secret>");
    msp_buf_t b = {0};
    msp_buf_put(&b, "", 0); /* "" for "" */
    for (const char *p = s; *p;) {
        int hashed = 0;
        size_t n = msp_cc_tag_at(p, &hashed);
        if (n)
            msp_buf_puts(&b, "<secret>");
        else
            msp_buf_put(&b, p, 1);
        p += n ? n : 1;
    }
    if (b.oom || !b.data) {
        msp_buf_free(&b);
        return NULL;
    }
    return b.data;
}
