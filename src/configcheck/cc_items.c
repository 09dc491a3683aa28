/* An item's result lines (failed, info, a difference shown whole) and the
 * on/off words of hyperparameters, key patterns and JSON string fields:
 * what the diff of every item (cc_env.c, cc_diff.c, cc_hyper.c) writes and
 * reads with. Calls none of them. */
#include "cc_internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void msp_cc_push_line(char ***lines, size_t *n, char *line)
{
    if (!line)
        return;
    char **nl = realloc(*lines, (*n + 1) * sizeof *nl);
    if (!nl) {
        free(line);
        return;
    }
    *lines = nl;
    (*lines)[(*n)++] = line;
}

static char *msp_cc_vasprintf(const char *fmt, va_list ap) MSP_PRINTF(1, 0);
static char *msp_cc_vasprintf(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    char *out = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (out)
        vsnprintf(out, (size_t)n + 1, fmt, ap);
    return out;
}

/* Lines are built whole: a difference past a fixed width would be hidden. */
void msp_cc_add_failed(msp_cc_item_result_t *it, const char *fmt, ...)
{
    it->status = MSP_CC_FAIL;
    va_list ap;
    va_start(ap, fmt);
    msp_cc_push_line(&it->failed, &it->n_failed, msp_cc_vasprintf(fmt, ap));
    va_end(ap);
}

void msp_cc_add_info(msp_cc_item_result_t *it, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    msp_cc_push_line(&it->info, &it->n_info, msp_cc_vasprintf(fmt, ap));
    va_end(ap);
}

/* Terminal width the one-line form must fit in; longer values go on lines of
 * their own, aligned, with a caret under the first character that differs. */
#define MSP_CC_LINE_FIT 100

/* "NAME: bench B vs cmp C", or when that is long:
 *   NAME:
 *     bench B
 *     cmp   C
 *           ^ first difference at character K
 * q wraps both values (e.g. "'"); values are never cut. */
static char *msp_cc_diff_text(const char *name, const char *bv, const char *cv, const char *q)
{
    size_t lb = strlen(bv), lc = strlen(cv);
    if (strlen(name) + lb + lc + 4 * strlen(q) + 16 <= MSP_CC_LINE_FIT && !strchr(bv, '\n') &&
        !strchr(cv, '\n'))
        return msp_asprintf("%s: bench %s%s%s vs cmp %s%s%s", name, q, bv, q, q, cv, q);
    size_t k = 0;
    while (k < lb && k < lc && bv[k] == cv[k])
        k++;
    size_t col = 8 + strlen(q) + k; /* "  bench " or "  cmp   " is 8 wide */
    char *pad = malloc(col + 1);
    if (!pad)
        return NULL;
    memset(pad, ' ', col);
    pad[col] = '\0';
    char *out =
        msp_asprintf("%s:\n  bench %s%s%s\n  cmp   %s%s%s\n%s^ first difference at character %zu",
                     name, q, bv, q, q, cv, q, pad, k + 1);
    free(pad);
    return out;
}

void msp_cc_add_diff(msp_cc_item_result_t *it, const char *name, const char *bv, const char *cv,
                     const char *q)
{
    it->status = MSP_CC_FAIL;
    msp_cc_push_line(&it->failed, &it->n_failed, msp_cc_diff_text(name, bv, cv, q));
}

int msp_cc_bool_word(const char *s)
{
    static const char *const t[] = {"1", "true", "yes", "on", "enable", "enabled"};
    static const char *const f[] = {"0", "false", "no", "off", "disable", "disabled", ""};
    for (size_t i = 0; i < MSP_CC_N(t); i++)
        if (strcasecmp(s, t[i]) == 0)
            return 1;
    for (size_t i = 0; i < MSP_CC_N(f); i++)
        if (strcasecmp(s, f[i]) == 0)
            return 0;
    return -1;
}

int msp_cc_pattern_match(const char *const *pats, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(pats[i]);
        if (len && pats[i][len - 1] == '*') {
            if (strncmp(key, pats[i], len - 1) == 0)
                return 1;
        } else if (strcmp(key, pats[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

const char *msp_cc_str(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int msp_cc_streq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}
