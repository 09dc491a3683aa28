/* merge_result's config (msprobe-merge_result(1)): msprobe's YAML, read by
 * libyaml, naming the APIs whose rows to merge and the compare indexes. */
#include "mrg_internal.h"

#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define CMP_MERGE_MAX_CFG ((size_t)16 << 20)
#define CMP_MERGE_MAX_LIST 4096
#define CMP_MERGE_MAX_ITEM 4095

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

static size_t cmp_yaml_line(const yaml_node_t *n)
{
    return n->start_mark.line + 1;
}

/* One list item of key's list into *v. */
static msp_err cmp_yaml_item(const char *path, const yaml_node_t *it, char ***v, size_t *n)
{
    if (it->type != YAML_SCALAR_NODE)
        return msp_fail(MSP_ERR_USAGE, "config %s line %zu: a list item that is not a name", path,
                        cmp_yaml_line(it));
    size_t len = it->data.scalar.length;
    if (!len)
        return msp_fail(MSP_ERR_USAGE, "config %s line %zu: an empty list item", path,
                        cmp_yaml_line(it));
    if (len > CMP_MERGE_MAX_ITEM || memchr(it->data.scalar.value, '\0', len))
        return msp_fail(MSP_ERR_USAGE,
                        "config %s line %zu: a list item over %d bytes or "
                        "holding a NUL",
                        path, cmp_yaml_line(it), CMP_MERGE_MAX_ITEM);
    if (*n >= CMP_MERGE_MAX_LIST)
        return msp_fail(MSP_ERR_USAGE, "config %s line %zu: more than %d items in a list", path,
                        cmp_yaml_line(it), CMP_MERGE_MAX_LIST);
    char **nv = realloc(*v, (*n + 1) * sizeof *nv);
    char *d = nv ? strndup((const char *)it->data.scalar.value, len) : NULL;
    if (nv)
        *v = nv;
    if (!d)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    nv[(*n)++] = d;
    return MSP_OK;
}

/* key's value: a list, block or flow; nothing at all is an empty one. */
static msp_err cmp_yaml_list(const char *path, yaml_document_t *doc, const char *key,
                             const yaml_node_t *val, char ***v, size_t *n)
{
    if (val->type == YAML_SCALAR_NODE && val->data.scalar.length == 0 &&
        val->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
        return MSP_OK;
    if (val->type != YAML_SEQUENCE_NODE)
        return msp_fail(MSP_ERR_USAGE, "config %s line %zu: '%s' must be a list", path,
                        cmp_yaml_line(val), key);
    msp_err rc = MSP_OK;
    for (yaml_node_item_t *i = val->data.sequence.items.start;
         !rc && i < val->data.sequence.items.top; i++)
        rc = cmp_yaml_item(path, yaml_document_get_node(doc, *i), v, n);
    return rc;
}

/* The document's keys "api" and "compare_index", each once. */
static msp_err cmp_merge_cfg_doc(const char *path, yaml_document_t *doc, cmp_merge_cfg_t *c)
{
    yaml_node_t *root = yaml_document_get_root_node(doc);
    if (!root || (root->type == YAML_SCALAR_NODE && !root->data.scalar.length))
        return MSP_OK; /* empty: 'api' is missing, said by the caller */
    if (root->type != YAML_MAPPING_NODE)
        return msp_fail(MSP_ERR_USAGE,
                        "config %s line %zu: expected 'api:' or "
                        "'compare_index:' and their lists",
                        path, cmp_yaml_line(root));
    int seen_api = 0, seen_index = 0;
    msp_err rc = MSP_OK;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start;
         !rc && p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        const char *key = k->type == YAML_SCALAR_NODE ? (const char *)k->data.scalar.value : "";
        if (!strcmp(key, "api") && !seen_api++)
            rc = cmp_yaml_list(path, doc, key, v, &c->api, &c->n_api);
        else if (!strcmp(key, "compare_index") && !seen_index++)
            rc = cmp_yaml_list(path, doc, key, v, &c->index, &c->n_index);
        else if (!strcmp(key, "api") || !strcmp(key, "compare_index"))
            rc = msp_fail(MSP_ERR_USAGE, "config %s line %zu: '%s' given twice", path,
                          cmp_yaml_line(k), key);
        else {
            char shown[80];
            msp_excerpt(shown, sizeof shown, key, 72, MSP_EXCERPT_BLANKS | MSP_EXCERPT_MARK);
            rc = msp_fail(MSP_ERR_USAGE,
                          "config %s line %zu: unknown key '%s' (merge_result "
                          "takes 'api' and 'compare_index')",
                          path, cmp_yaml_line(k), shown);
        }
    }
    return rc;
}

msp_err cmp_merge_cfg_load(const char *path, cmp_merge_cfg_t *c)
{
    memset(c, 0, sizeof *c);
    char *text = NULL;
    size_t len = 0;
    msp_err rc = msp_read_file(path, CMP_MERGE_MAX_CFG, &text, &len);
    if (rc)
        return rc;
    yaml_document_t doc;
    char why[160];
    size_t line;
    int bad = msp_yaml_doc(text, len, &doc, why, sizeof why, &line);
    free(text);
    if (bad)
        return msp_fail(MSP_ERR_USAGE, "config %s line %zu: not YAML: %s", path, line, why);
    rc = cmp_merge_cfg_doc(path, &doc, c);
    yaml_document_delete(&doc);
    if (!rc && !c->n_api)
        rc = msp_fail(MSP_ERR_USAGE,
                      "config %s: 'api' names no API: the APIs whose rows to "
                      "merge are required",
                      path);
    if (rc)
        cmp_merge_cfg_free(c);
    return rc;
}
