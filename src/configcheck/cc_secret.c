/* Which values, or which parts of a value, are secret (msprobe-config_check(1),
 * SECRETS), and the pack's form of them (cc_secret_store.c).
 *
 * A secret is recognised by its name (env key, option, namespace field) and by
 * its value, because a leaked DATABASE_URL, a --db-url argument or a note
 * saying "login admin / hunter2" does not say "password" in its name. A name
 * that says secret hides the whole value. Found by value, only the secret
 * itself is replaced (the password of a URL, the argument of sshpass -p, a
 * token in a sentence), so that the rest of the text is still compared and
 * read: every detector (cc_secret_find.c) gives the byte range of what it
 * found. The rules on names are cc_secret_name.c's. */
#include "cc_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- values found secret elsewhere ------------------------------------------- */

/* Values already found secret in one place (the argument after --password),
 * so that the same text elsewhere (argparse's namespace field "password",
 * or "p" for -p) is found too, whatever its name there. */
#define MSP_CC_REMEMBER_MAX 256
static pthread_mutex_t msp_cc_known_mu = PTHREAD_MUTEX_INITIALIZER;
static char *msp_cc_known[MSP_CC_REMEMBER_MAX];
static size_t msp_cc_n_known;

static void msp_cc_secret_remember(const char *v, size_t n)
{
    if (!v || n < 4) /* "1", "yes": too common to hide everywhere */
        return;
    pthread_mutex_lock(&msp_cc_known_mu);
    int have = 0;
    for (size_t i = 0; i < msp_cc_n_known && !have; i++)
        have = strlen(msp_cc_known[i]) == n && strncmp(msp_cc_known[i], v, n) == 0;
    if (!have && msp_cc_n_known < MSP_CC_REMEMBER_MAX &&
        (msp_cc_known[msp_cc_n_known] = strndup(v, n)))
        msp_cc_n_known++;
    pthread_mutex_unlock(&msp_cc_known_mu);
}

/* A range found by its text alone (a remembered or repeated secret) grown
 * to the whole token pieces it cuts into, so that what is left of a piece
 * ("4b82...4904" before a secret glued to it) is never judged anew. */
static void msp_cc_span_add_pieces(msp_cc_spans_t *out, const char *v, size_t a, size_t b)
{
    while (a && msp_cc_is_piecech(v[a - 1]) && msp_cc_is_piecech(v[a]))
        a--;
    while (b > a && v[b] && msp_cc_is_piecech(v[b - 1]) && msp_cc_is_piecech(v[b]))
        b++;
    msp_cc_span_add(out, a, b);
}

void msp_cc_secret_forget(void)
{
    pthread_mutex_lock(&msp_cc_known_mu);
    for (size_t i = 0; i < msp_cc_n_known; i++)
        free(msp_cc_known[i]);
    msp_cc_n_known = 0;
    pthread_mutex_unlock(&msp_cc_known_mu);
}

static void msp_cc_known_spans(const char *v, msp_cc_spans_t *out)
{
    pthread_mutex_lock(&msp_cc_known_mu);
    for (size_t i = 0; i < msp_cc_n_known; i++) {
        size_t kl = strlen(msp_cc_known[i]);
        for (const char *p = strstr(v, msp_cc_known[i]); p; p = strstr(p + kl, msp_cc_known[i]))
            msp_cc_span_add_pieces(out, v, (size_t)(p - v), (size_t)(p - v) + kl);
    }
    pthread_mutex_unlock(&msp_cc_known_mu);
}

/* ---- every secret of a value ---------------------------------------------- */

static int msp_cc_cmp_span(const void *x, const void *y)
{
    const msp_cc_span_t *a = x, *b = y;
    return (a->a > b->a) - (a->a < b->a);
}

/* Sorts out's ranges and merges those that overlap, dropping every range
 * that touches one of tags. */
static void msp_cc_spans_settle(msp_cc_spans_t *out, const msp_cc_spans_t *tags)
{
    size_t k = 0;
    for (size_t i = 0; i < out->n; i++) {
        int touches = 0;
        for (size_t t = 0; t < tags->n && !touches; t++)
            touches = out->v[i].a < tags->v[t].b && tags->v[t].a < out->v[i].b;
        if (!touches)
            out->v[k++] = out->v[i];
    }
    out->n = k;
    qsort(out->v, out->n, sizeof out->v[0], msp_cc_cmp_span);
    k = 0;
    for (size_t i = 0; i < out->n; i++) {
        if (k && out->v[i].a <= out->v[k - 1].b) {
            if (out->v[i].b > out->v[k - 1].b)
                out->v[k - 1].b = out->v[i].b;
        } else {
            out->v[k++] = out->v[i];
        }
    }
    out->n = k;
}

/* The secrets of v (under name key, which may be NULL), sorted and merged;
 * none that touches a tag already there (a value masked before). A secret
 * found once is a secret wherever else it stands in v, even where no
 * detector would find it (a hex key repeated after "sha256:"). */
static void msp_cc_find(const char *key, const char *v, msp_cc_spans_t *out)
{
    memset(out, 0, sizeof *out);
    if (!v || !*v || msp_cc_secret_kind(v) != MSP_CC_SECRET_NONE)
        return;
    msp_cc_url_spans(v, out);
    msp_cc_userinfo_spans(v, out);
    msp_cc_pair_spans(v, out);
    msp_cc_cmdline_spans(v, out);
    msp_cc_pem_spans(v, out);
    msp_cc_token_spans(v, key && msp_cc_name_is_id(key), out);
    msp_cc_known_spans(v, out);
    for (size_t i = 0; v[i]; i++) {
        size_t n = msp_cc_word_at(v, i);
        if (!n)
            continue;
        msp_cc_pw_word_spans(v, i, n, out);
        msp_cc_login_spans(v, i, n, out);
        msp_cc_auth_spans(v, i, n + (v[i + n] == '-' ? 1 + msp_cc_word_at(v, i + n + 1) : 0), out);
        i += n - 1;
    }
    msp_cc_spans_t tags = {0};
    msp_cc_secret_tags(v, &tags);
    msp_cc_spans_settle(out, &tags);
    size_t found = out->n;
    for (size_t i = 0; i < found; i++) {
        size_t a = out->v[i].a, n = out->v[i].b - a;
        if (n < 4)
            continue;
        for (const char *p = v; (p = memmem(p, strlen(p), v + a, n)); p++)
            if ((size_t)(p - v) != a)
                msp_cc_span_add_pieces(out, v, (size_t)(p - v), (size_t)(p - v) + n);
    }
    if (out->n != found)
        msp_cc_spans_settle(out, &tags);
}

int msp_cc_value_is_secret(const char *v)
{
    msp_cc_spans_t sp;
    msp_cc_find(NULL, v, &sp);
    return sp.n > 0 || sp.overflow;
}

/* v with its secrets (sp) replaced by tags, or the whole stored form of
 * whole (the value v was made from) when they cover all of v; each secret
 * remembered when remember is set. */
static char *msp_cc_mask(const char *v, const msp_cc_spans_t *sp, int remember, const char *whole)
{
    size_t len = strlen(v);
    if (sp->overflow || (sp->n == 1 && sp->v[0].a == 0 && sp->v[0].b == len)) {
        if (remember)
            msp_cc_secret_remember(whole, strlen(whole));
        return msp_cc_secret_stored(whole);
    }
    msp_buf_t b = {0};
    size_t at = 0;
    for (size_t i = 0; i < sp->n; i++) {
        char *tag = msp_cc_secret_tag(v + sp->v[i].a, sp->v[i].b - sp->v[i].a);
        if (!tag) {
            msp_buf_free(&b);
            return NULL;
        }
        if (remember)
            msp_cc_secret_remember(v + sp->v[i].a, sp->v[i].b - sp->v[i].a);
        msp_buf_put(&b, v + at, sp->v[i].a - at);
        msp_buf_puts(&b, tag);
        free(tag);
        at = sp->v[i].b;
    }
    msp_buf_puts(&b, v + at);
    if (b.oom) {
        msp_buf_free(&b);
        return NULL;
    }
    return b.data;
}

/* msp_cc_redact_value, remembering what it hides when remember is set;
 * *secret (may be NULL) says whether val holds a secret, so that NULL for
 * out of memory is told from NULL for "store it as it is". */
static char *msp_cc_redact(const char *key, const char *val, int remember, int *secret)
{
    int dummy;
    secret = secret ? secret : &dummy;
    *secret = 0;
    if (!val || msp_cc_secret_kind(val) != MSP_CC_SECRET_NONE)
        return NULL; /* stored form already: redacting twice would hash the hash */
    if (msp_cc_key_is_secret(key)) {
        *secret = 1;
        if (remember)
            msp_cc_secret_remember(val, strlen(val));
        return msp_cc_secret_stored(val);
    }
    msp_cc_spans_t sp;
    msp_cc_find(key, val, &sp);
    *secret = sp.n || sp.overflow;
    if (!*secret)
        return NULL;
    /* Replacing a secret can change how the text around it reads (a URL's
     * user part once its '@' is gone): the text is searched again until
     * nothing more is found, so the stored form is final (redacting it
     * again changes nothing), or, past a few rounds, stored whole. */
    char *cur = msp_cc_mask(val, &sp, remember, val);
    for (int round = 0; cur && msp_cc_secret_kind(cur) == MSP_CC_SECRET_NONE; round++) {
        msp_cc_find(key, cur, &sp);
        if (!sp.n && !sp.overflow)
            return cur;
        char *next = round < 4 ? msp_cc_mask(cur, &sp, remember, val) : msp_cc_secret_stored(val);
        free(cur);
        cur = next;
    }
    return cur;
}

char *msp_cc_redact_value(const char *key, const char *val)
{
    return msp_cc_redact(key, val, 0, NULL);
}

char *msp_cc_redact_checked(const char *key, const char *val, int *secret)
{
    return msp_cc_redact(key, val, 0, secret);
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
        } else if (cJSON_IsNumber(e) && cJSON_IsObject(node) &&
                   msp_cc_number_name_is_secret(e->string)) {
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

/* argv[i] as the pack keeps it (malloc'd), or NULL to keep it as it is;
 * what it hides is remembered. hide: the option before it hides it. */
static char *msp_cc_redact_arg(const char *t, int hide)
{
    char *out = NULL;
    const char *eq = t[0] == '-' ? strchr(t, '=') : NULL;
    if (eq) {
        /* --token=X, --db-url=postgres://u:pw@h/db */
        char *name = strndup(t, (size_t)(eq - t));
        char *r = name ? msp_cc_redact(name, eq + 1, 1, NULL) : NULL;
        if (r)
            out = msp_asprintf("%s=%s", name, r);
        free(r);
        free(name);
    } else if (hide) {
        /* After --password any value is hidden, unless it is the next long option. */
        out = msp_cc_secret_stored(t);
        msp_cc_secret_remember(t, strlen(t));
    } else {
        out = msp_cc_redact(NULL, t, 1, NULL);
    }
    return out;
}

static int msp_cc_arg_hides_next(const char *const *argv, size_t n, size_t i)
{
    return i + 1 < n && !(argv[i][0] == '-' && strchr(argv[i], '=')) &&
           msp_cc_flag_hides(argv[i], strlen(argv[i]), argv[i + 1], strlen(argv[i + 1]));
}

cJSON *msp_cc_redact_argv(const char *const *argv, size_t n)
{
    /* Every secret of the line is found first, so that one found in a later
     * argument is hidden in an earlier one too (its text is remembered):
     * until no new one is found, or a few rounds. */
    for (int round = 0, grew = 1; grew && round < 4; round++) {
        pthread_mutex_lock(&msp_cc_known_mu);
        size_t known = msp_cc_n_known;
        pthread_mutex_unlock(&msp_cc_known_mu);
        for (size_t i = 0; i < n; i++)
            free(msp_cc_redact_arg(argv[i], i && msp_cc_arg_hides_next(argv, n, i - 1)));
        pthread_mutex_lock(&msp_cc_known_mu);
        grew = msp_cc_n_known != known;
        pthread_mutex_unlock(&msp_cc_known_mu);
    }
    cJSON *args = cJSON_CreateArray();
    for (size_t i = 0; args && i < n; i++) {
        char *out = msp_cc_redact_arg(argv[i], i && msp_cc_arg_hides_next(argv, n, i - 1));
        cJSON_AddItemToArray(args, cJSON_CreateString(out ? out : argv[i]));
        free(out);
    }
    return args;
}
