/* merge_result's config (msprobe-merge_result(1)): the subset of msprobe's
 * YAML it takes, the APIs whose rows to merge and the compare indexes. */
#include "mrg_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CMP_MERGE_MAX_LIST 4096

void cmp_strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void cmp_merge_cfg_free(cmp_merge_cfg_t *c)
{
    cmp_strv_free(c->api, c->n_api);
    cmp_strv_free(c->index, c->n_index);
    memset(c, 0, sizeof *c);
}

static char *cmp_trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* A scalar, its quotes taken off; NULL (rc set) when the quotes do not close. */
static char *cmp_yaml_scalar(const char *path, int line, char *s, msp_err *rc)
{
    s = cmp_trim(s);
    size_t n = strlen(s);
    if (n && (s[0] == '"' || s[0] == '\'')) {
        if (n < 2 || s[n - 1] != s[0]) {
            *rc = msp_fail(MSP_ERR_USAGE, "config %s line %d: a quoted value does not end", path,
                           line);
            return NULL;
        }
        s[n - 1] = '\0';
        s++;
    }
    if (!*s) {
        *rc = msp_fail(MSP_ERR_USAGE, "config %s line %d: an empty list item", path, line);
        return NULL;
    }
    char *d = strdup(s);
    if (!d)
        *rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
    return d;
}

static msp_err cmp_yaml_push(const char *path, int line, char ***v, size_t *n, char *item)
{
    if (*n >= CMP_MERGE_MAX_LIST) {
        free(item);
        return msp_fail(MSP_ERR_USAGE, "config %s line %d: more than %d items in a list", path,
                        line, CMP_MERGE_MAX_LIST);
    }
    char **nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv) {
        free(item);
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    *v = nv;
    nv[(*n)++] = item;
    return MSP_OK;
}

/* The subset of YAML the config uses: top-level keys "api" and
 * "compare_index", each a list, as a block ("- item" lines) or in flow
 * ("[a, b]"); comments from '#'; quotes optional. Anything else is an error
 * naming the line. */
msp_err cmp_merge_cfg_load(const char *path, cmp_merge_cfg_t *c)
{
    memset(c, 0, sizeof *c);
    FILE *f;
    msp_err orc = msp_fopen_regular(path, "r", &f);
    if (orc)
        return orc;
    char buf[4096];
    int line = 0, in = 0; /* in: 1 api, 2 compare_index */
    int seen_api = 0, seen_index = 0;
    msp_err rc = MSP_OK;
    while (!rc && fgets(buf, sizeof buf, f)) {
        line++;
        if (!strchr(buf, '\n') && !feof(f)) {
            rc = msp_fail(MSP_ERR_USAGE, "config %s line %d: longer than %zu bytes", path, line,
                          sizeof buf - 1);
            break;
        }
        buf[strcspn(buf, "\n")] = '\0';
        /* a comment: '#' at the start or after a blank, outside quotes */
        char quote = 0;
        for (char *p = buf; *p; p++) {
            if (quote) {
                quote = *p == quote ? 0 : quote;
            } else if (*p == '"' || *p == '\'') {
                quote = *p;
            } else if (*p == '#' && (p == buf || p[-1] == ' ' || p[-1] == '\t')) {
                *p = '\0';
                break;
            }
        }
        char *s = cmp_trim(buf);
        if (!*s || !strcmp(s, "---"))
            continue;
        int indented = buf[0] == ' ' || buf[0] == '\t';
        if (s[0] == '-' && (s[1] == ' ' || s[1] == '\0')) {
            if (!in) {
                rc = msp_fail(MSP_ERR_USAGE, "config %s line %d: a list item outside 'api' or "
                              "'compare_index'", path, line);
                break;
            }
            char *item = cmp_yaml_scalar(path, line, s + 1, &rc);
            if (item)
                rc = in == 1 ? cmp_yaml_push(path, line, &c->api, &c->n_api, item)
                             : cmp_yaml_push(path, line, &c->index, &c->n_index, item);
            continue;
        }
        char *colon = strchr(s, ':');
        if (indented || !colon) {
            rc = msp_fail(MSP_ERR_USAGE, "config %s line %d: expected 'api:' or "
                          "'compare_index:' and their lists", path, line);
            break;
        }
        *colon = '\0';
        char *key = cmp_trim(s), *val = cmp_trim(colon + 1);
        if (!strcmp(key, "api")) {
            in = 1;
            if (seen_api++)
                rc = msp_fail(MSP_ERR_USAGE, "config %s line %d: 'api' given twice", path, line);
        } else if (!strcmp(key, "compare_index")) {
            in = 2;
            if (seen_index++)
                rc = msp_fail(MSP_ERR_USAGE, "config %s line %d: 'compare_index' given twice",
                              path, line);
        } else {
            rc = msp_fail(MSP_ERR_USAGE, "config %s line %d: unknown key '%s' (merge_result "
                          "takes 'api' and 'compare_index')", path, line, key);
            break;
        }
        if (rc || !*val)
            continue;
        size_t n = strlen(val);
        if (val[0] != '[' || val[n - 1] != ']') {
            rc = msp_fail(MSP_ERR_USAGE, "config %s line %d: '%s' must be a list", path, line,
                          key);
            break;
        }
        val[n - 1] = '\0';
        for (char *item = val + 1; !rc && item;) {
            char *comma = strchr(item, ',');
            if (comma)
                *comma = '\0';
            if (*cmp_trim(item) || comma) {
                char *v = cmp_yaml_scalar(path, line, item, &rc);
                if (v)
                    rc = in == 1 ? cmp_yaml_push(path, line, &c->api, &c->n_api, v)
                                 : cmp_yaml_push(path, line, &c->index, &c->n_index, v);
            }
            item = comma ? comma + 1 : NULL;
        }
        in = 0; /* a flow list is the whole value */
    }
    if (!rc && ferror(f))
        rc = msp_fail(MSP_ERR_IO, "config %s: cannot read: %s", path, strerror(errno));
    fclose(f);
    if (!rc && !c->n_api)
        rc = msp_fail(MSP_ERR_USAGE, "config %s: 'api' names no API: the APIs whose rows to "
                      "merge are required", path);
    if (rc)
        cmp_merge_cfg_free(c);
    return rc;
}
