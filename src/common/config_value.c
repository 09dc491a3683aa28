/* One JSON value of msprobe.json checked against what its key takes (a
 * string, an integer, one of a list of names, a step set) and the messages
 * that say so: each names the file, the key path and what was expected. The
 * step-set syntax ("10|20", "5-8", "all") is parsed here too; which key takes
 * which kind is config.c's tables. */
#include "config_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bounds the memory a hostile "1|2|3|..." can claim. */
#define MSP_STEP_SET_MAX_RANGES 65536u
/* Largest integer a JSON number (a double in cJSON) carries exactly. */
#define MSP_JSON_INT_MAX 9007199254740992.0

static const char msp_step_set_hint[] =
    "expected a step set like \"10|20\", \"5-8\", \"1|3-5\" or \"all\"";

/* Quote user text for a message: bounded, control characters shown as '?',
 * so a binary file or a huge string cannot wreck the terminal. */
void msp_cfg_quote(char *dst, size_t cap, const char *s)
{
    msp_excerpt(dst, cap, s, cap > 8 ? cap - 6 : 0, MSP_EXCERPT_MARK);
}

msp_err msp_cfg_fail(const msp_cfg_walk_t *w, const char *path, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return msp_fail(MSP_ERR_CONFIG, "%s: %s: %s", w->source, path, msg);
}

/* "got ..." part of a type error: the JSON type, or the value when it is short. */
void msp_cfg_describe(const cJSON *it, char *buf, size_t cap)
{
    if (cJSON_IsString(it)) {
        char q[64];
        msp_cfg_quote(q, sizeof q, it->valuestring);
        snprintf(buf, cap, "\"%s\"", q);
    } else if (cJSON_IsNumber(it)) {
        char num[MSP_DTOA_SIZE];
        msp_dtoa(it->valuedouble, num);
        snprintf(buf, cap, "number %s", num);
    } else if (cJSON_IsArray(it)) {
        snprintf(buf, cap, "an array");
    } else if (cJSON_IsObject(it)) {
        snprintf(buf, cap, "an object");
    } else if (cJSON_IsTrue(it)) {
        snprintf(buf, cap, "true");
    } else if (cJSON_IsFalse(it)) {
        snprintf(buf, cap, "false");
    } else if (cJSON_IsNull(it)) {
        snprintf(buf, cap, "null");
    } else {
        snprintf(buf, cap, "an invalid value");
    }
}

msp_err msp_cfg_expected(const msp_cfg_walk_t *w, const char *path, const char *what,
                         const cJSON *got)
{
    char desc[96];
    msp_cfg_describe(got, desc, sizeof desc);
    return msp_cfg_fail(w, path, "expected %s, got %s", what, desc);
}

msp_err msp_cfg_object(const msp_cfg_walk_t *w, const cJSON *it, const char *path)
{
    return cJSON_IsObject(it) ? MSP_OK : msp_cfg_expected(w, path, "an object { ... }", it);
}

/* One of `names` (index into *out); message lists the choices. */
msp_err msp_cfg_enum(const msp_cfg_walk_t *w, const cJSON *it, const char *path,
                     const char *const *names, size_t n, int *out)
{
    *out = 0; /* defined on the error path too (gcc -O2 cannot see that one returns non-zero) */
    if (cJSON_IsString(it)) {
        for (size_t i = 0; i < n; i++) {
            if (strcmp(it->valuestring, names[i]) == 0) {
                *out = (int)i;
                return MSP_OK;
            }
        }
    }
    char what[256];
    size_t used = 0;
    for (size_t i = 0; i < n && used < sizeof what; i++) {
        int k = snprintf(what + used, sizeof what - used, "%s\"%s\"",
                         i == 0 ? "" : (i + 1 == n ? " or " : ", "), names[i]);
        if (k < 0)
            break;
        used += (size_t)k;
    }
    return msp_cfg_expected(w, path, what, it);
}

/* A non-empty string; *out is a fresh copy. */
msp_err msp_cfg_string(const msp_cfg_walk_t *w, const cJSON *it, const char *path, const char *what,
                       char **out)
{
    if (!cJSON_IsString(it) || it->valuestring[0] == '\0')
        return msp_cfg_expected(w, path, what, it);
    char *s = strdup(it->valuestring);
    if (!s)
        return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", w->source);
    free(*out);
    *out = s;
    return MSP_OK;
}

/* An integer in [min, 2^53 - 1]: from 2^53 on a double no longer holds
 * every integer, so 9007199254740993 would arrive as ...992, silently. */
msp_err msp_cfg_int(const msp_cfg_walk_t *w, const cJSON *it, const char *path, const char *what,
                    int64_t min, int64_t *out)
{
    *out = min; /* defined on the error path too, as for msp_cfg_enum */
    /* 2^53 .. 2^63: an integer the writer meant, perhaps rounded already */
    if (cJSON_IsNumber(it) && it->valuedouble >= MSP_JSON_INT_MAX && it->valuedouble < 0x1p63) {
        char desc[96];
        msp_cfg_describe(it, desc, sizeof desc);
        return msp_cfg_fail(w, path,
                            "expected %s, got %s (JSON numbers are exact only up to "
                            "9007199254740991: a larger one may already be rounded; a step "
                            "may be written as a string, \"9007199254740993\")",
                            what, desc);
    }
    if (cJSON_IsNumber(it)) {
        double v = it->valuedouble;
        if (isfinite(v) && v >= (double)min && v <= MSP_JSON_INT_MAX) {
            int64_t i = (int64_t)v;
            double frac = v - (double)i;
            if (!(frac > 0.0) && !(frac < 0.0)) {
                *out = i;
                return MSP_OK;
            }
        }
    }
    return msp_cfg_expected(w, path, what, it);
}

/* ---- step sets ---------------------------------------------------------- */

static msp_err msp_step_set_add(msp_step_set_t *s, int64_t first, int64_t last, size_t *cap)
{
    if (s->n_ranges == *cap) {
        if (*cap >= MSP_STEP_SET_MAX_RANGES)
            return msp_fail(MSP_ERR_LIMIT, "more than %u steps or ranges in one step set",
                            MSP_STEP_SET_MAX_RANGES);
        msp_step_range_t *r = msp_grow(s->ranges, cap, s->n_ranges, sizeof *r, 4);
        if (!r)
            return msp_fail(MSP_ERR_NOMEM, "out of memory parsing a step set");
        s->ranges = r;
    }
    s->ranges[s->n_ranges].first = first;
    s->ranges[s->n_ranges].last = last;
    s->n_ranges++;
    return MSP_OK;
}

/* Digits only (no sign, no spaces inside); advances *p. */
static int msp_step_number(const char **p, int64_t *out)
{
    const char *s = *p;
    if (!isdigit((unsigned char)*s))
        return 0;
    int64_t v = 0;
    for (; isdigit((unsigned char)*s); s++) {
        int d = *s - '0';
        if (v > (INT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *p = s;
    *out = v;
    return 1;
}

static const char *msp_skip_blank(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

msp_err msp_step_set_parse(const char *text, msp_step_set_t *out)
{
    msp_step_set_t s = {0};
    size_t cap = 0;
    msp_err rc = MSP_OK;
    char quoted[64];
    msp_cfg_quote(quoted, sizeof quoted, text ? text : "");
    *out = s;
    const char *p = msp_skip_blank(text ? text : "");
    if (*p == '\0' || (strncmp(p, "all", 3) == 0 && *msp_skip_blank(p + 3) == '\0')) {
        out->all = 1;
        return MSP_OK;
    }
    for (;;) {
        int64_t first, last;
        p = msp_skip_blank(p);
        const char *tok = p;
        int got = msp_step_number(&p, &first);
        if (got == 0) {
            const char *why = *tok == '-'                     ? "a negative step"
                              : (*tok == '|' || *tok == '\0') ? "an empty entry"
                                                              : "not a step number";
            rc = msp_fail(MSP_ERR_CONFIG, "%s, got \"%s\" (%s at offset %zu)", msp_step_set_hint,
                          quoted, why, (size_t)(tok - text));
            goto cleanup;
        }
        if (got < 0) {
            rc = msp_fail(MSP_ERR_CONFIG, "%s, got \"%s\" (step number too large)",
                          msp_step_set_hint, quoted);
            goto cleanup;
        }
        last = first;
        p = msp_skip_blank(p);
        if (*p == '-') {
            p = msp_skip_blank(p + 1);
            got = msp_step_number(&p, &last);
            if (got <= 0) {
                rc = msp_fail(MSP_ERR_CONFIG, "%s, got \"%s\" (%s)", msp_step_set_hint, quoted,
                              got < 0 ? "step number too large"
                                      : "a range needs an end step, as in \"5-8\"");
                goto cleanup;
            }
            if (last < first) {
                rc = msp_fail(MSP_ERR_CONFIG,
                              "%s, got \"%s\" (range %lld-%lld ends before it starts)",
                              msp_step_set_hint, quoted, (long long)first, (long long)last);
                goto cleanup;
            }
            p = msp_skip_blank(p);
        }
        rc = msp_step_set_add(&s, first, last, &cap);
        if (rc != MSP_OK)
            goto cleanup;
        if (*p == '\0')
            break;
        if (*p != '|') {
            rc = msp_fail(MSP_ERR_CONFIG, "%s, got \"%s\" (unexpected '%c' at offset %zu)",
                          msp_step_set_hint, quoted, isprint((unsigned char)*p) ? *p : '?',
                          (size_t)(p - text));
            goto cleanup;
        }
        p++;
    }
    *out = s;
    return MSP_OK;
cleanup:
    msp_step_set_free(&s);
    return rc;
}

int msp_step_set_contains(const msp_step_set_t *s, int64_t step)
{
    if (!s)
        return 0;
    if (s->all)
        return 1;
    for (size_t i = 0; i < s->n_ranges; i++)
        if (step >= s->ranges[i].first && step <= s->ranges[i].last)
            return 1;
    return 0;
}

void msp_step_set_free(msp_step_set_t *s)
{
    if (!s)
        return;
    free(s->ranges);
    s->ranges = NULL;
    s->n_ranges = 0;
    s->all = 0;
}

msp_err msp_cfg_steps(const msp_cfg_walk_t *w, const cJSON *it, const char *path,
                      msp_step_set_t *out)
{
    msp_step_set_t s = {0};
    msp_err rc = MSP_OK;
    if (cJSON_IsString(it)) {
        rc = msp_step_set_parse(it->valuestring, &s);
        if (rc != MSP_OK) {
            /* msp_fail writes the buffer msp_last_error() points into. */
            char detail[512];
            snprintf(detail, sizeof detail, "%s", msp_last_error());
            return rc == MSP_ERR_CONFIG || rc == MSP_ERR_LIMIT ? msp_cfg_fail(w, path, "%s", detail)
                                                               : rc;
        }
    } else if (cJSON_IsNumber(it)) {
        int64_t v;
        size_t cap = 0;
        rc = msp_cfg_int(w, it, path,
                         "a step set like \"10|20\", \"5-8\", \"all\" or a step number >= 0", 0,
                         &v);
        if (rc == MSP_OK)
            rc = msp_step_set_add(&s, v, v, &cap);
    } else if (cJSON_IsArray(it) && it->child) {
        size_t cap = 0, i = 0;
        for (const cJSON *e = it->child; e && rc == MSP_OK; e = e->next, i++) {
            int64_t v;
            char sub[300];
            snprintf(sub, sizeof sub, "%s[%zu]", path, i);
            rc = msp_cfg_int(w, e, sub, "a step number >= 0", 0, &v);
            if (rc == MSP_OK)
                rc = msp_step_set_add(&s, v, v, &cap);
        }
    } else {
        return msp_cfg_expected(w, path,
                                "a step set like \"10|20\", \"5-8\", \"1|3-5\" or \"all\", a step "
                                "number, or a non-empty array of step numbers",
                                it);
    }
    if (rc != MSP_OK) {
        msp_step_set_free(&s);
        if (rc != MSP_ERR_LIMIT)
            return rc;
        char detail[512];
        snprintf(detail, sizeof detail, "%s", msp_last_error());
        return msp_cfg_fail(w, path, "%s", detail);
    }
    msp_step_set_free(out);
    *out = s;
    return MSP_OK;
}

/* msprobe's rank / step lists: [1, "0", "4-6"]; [] = all. */
msp_err msp_cfg_ms_steps(const msp_cfg_walk_t *w, const cJSON *it, const char *path,
                         msp_step_set_t *out)
{
    static const char what[] = "a list of numbers >= 0, numeric strings or ranges like "
                               "[0, \"2\", \"4-6\"] ([] = all)";
    if (!cJSON_IsArray(it))
        return msp_cfg_expected(w, path, what, it);
    msp_step_set_t s = {0};
    size_t cap = 0, i = 0;
    msp_err rc = MSP_OK;
    if (!it->child)
        s.all = 1;
    for (const cJSON *e = it->child; e && rc == MSP_OK; e = e->next, i++) {
        char sub[300];
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        int64_t v;
        if (cJSON_IsNumber(e)) {
            if ((rc = msp_cfg_int(w, e, sub, "a number >= 0", 0, &v)) == MSP_OK)
                rc = msp_step_set_add(&s, v, v, &cap);
        } else if (cJSON_IsString(e) && e->valuestring[0] && !strchr(e->valuestring, '|') &&
                   strcmp(e->valuestring, "all") != 0) {
            msp_step_set_t one = {0};
            if (msp_step_set_parse(e->valuestring, &one) != MSP_OK || one.all) {
                msp_step_set_free(&one);
                rc = msp_cfg_expected(w, sub, "a number or a range like \"4-6\"", e);
                break;
            }
            for (size_t k = 0; k < one.n_ranges && rc == MSP_OK; k++)
                rc = msp_step_set_add(&s, one.ranges[k].first, one.ranges[k].last, &cap);
            msp_step_set_free(&one);
        } else {
            rc = msp_cfg_expected(w, sub, "a number or a range like \"4-6\"", e);
        }
    }
    if (rc != MSP_OK) {
        msp_step_set_free(&s);
        return rc;
    }
    msp_step_set_free(out);
    *out = s;
    return MSP_OK;
}

msp_err msp_cfg_strings(const msp_cfg_walk_t *w, const cJSON *it, const char *path)
{
    if (!cJSON_IsArray(it))
        return msp_cfg_expected(w, path, "a list of strings", it);
    size_t i = 0;
    for (const cJSON *e = it->child; e; e = e->next, i++)
        if (!cJSON_IsString(e)) {
            char sub[340]; /* a path of up to 300 bytes and an index */
            snprintf(sub, sizeof sub, "%.300s[%zu]", path, i);
            return msp_cfg_expected(w, sub, "a string", e);
        }
    return MSP_OK;
}
