/* The files that pair records whose names differ (msprobe-compare(1),
 * --mapping and --cell-mapping): our lines of two names "bench cmp", and
 * msprobe's data_mapping.yaml ("npu_tensor: bench_tensor") and
 * cell_mapping.yaml ("npu_name.Class: bench_name.Class"), read by libyaml.
 * A --mapping file that is a YAML mapping is a data_mapping; any other is
 * read as lines of name pairs. Every error names the file and line. */
#include "cmp_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define CMP_MAPPING_MAX ((size_t)64 << 20)

void cmp_mapping_free(cmp_mapping_t *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++) {
        free(m->e[i].bench);
        free(m->e[i].cmp);
        free(m->e[i].bench_role);
        free(m->e[i].cmp_role);
    }
    free(m->e);
    m->e = NULL;
    m->n = 0;
}

/* msprobe's tensor name into our record and role: the record ends at its
 * direction (".forward", ".backward", a module's call index after it), the
 * rest is the role; msprobe's "input.<name>" of a keyword argument is our
 * "kwarg.<name>". *role NULL: the name is a record's. */
static msp_err cmp_split_tensor(const char *name, char **rec, char **role)
{
    *rec = *role = NULL;
    const char *end = NULL;
    for (const char *p = name; (p = strchr(p, '.')) != NULL; p++) {
        size_t l = !strncmp(p, ".forward", 8) ? 8 : !strncmp(p, ".backward", 9) ? 9 : 0;
        if (l && (p[l] == '.' || p[l] == '\0'))
            end = p + l;
    }
    if (end && *end == '.' && isdigit((unsigned char)end[1])) { /* Module...forward.0 */
        const char *q = end + 1;
        while (isdigit((unsigned char)*q))
            q++;
        if (*q == '.' || *q == '\0')
            end = q;
    }
    if (!end || !*end || end == name || !end[1]) {
        *rec = strdup(name);
        return *rec ? MSP_OK : msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    *rec = strndup(name, (size_t)(end - name));
    const char *r = end + 1;
    if (!strncmp(r, "input.", 6) && r[6] && !isdigit((unsigned char)r[6]))
        *role = msp_asprintf("kwarg.%s", r + 6);
    else
        *role = strdup(r);
    if (!*rec || !*role) {
        free(*rec);
        free(*role);
        *rec = *role = NULL;
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    return MSP_OK;
}

/* A new zeroed entry of out, from line; NULL when out of memory. */
static cmp_map_entry_t *cmp_map_add(cmp_mapping_t *out, size_t *cap, size_t line)
{
    cmp_map_entry_t *ne = msp_grow(out->e, cap, out->n, sizeof *ne, 16);
    if (!ne)
        return NULL;
    out->e = ne;
    cmp_map_entry_t *e = &out->e[out->n++];
    memset(e, 0, sizeof *e);
    e->line = line;
    return e;
}

/* ---- YAML: data_mapping.yaml, cell_mapping.yaml ---------------------------- */

/* A scalar node's text if it is a name: not empty, no blank, '#' or NUL. */
static const char *cmp_yaml_name(const yaml_node_t *n)
{
    if (!n || n->type != YAML_SCALAR_NODE || !n->data.scalar.length)
        return NULL;
    const char *s = (const char *)n->data.scalar.value;
    if (strlen(s) != n->data.scalar.length || strpbrk(s, " \t\r\n#"))
        return NULL;
    return s;
}

/* The pairs of a mapping root into out: msprobe's data_mapping (cell 0:
 * tensor or record names, the compare side first) or cell_mapping (cell 1). */
static msp_err cmp_yaml_pairs(const char *what, const char *path, yaml_document_t *doc,
                              const yaml_node_t *root, int cell, cmp_mapping_t *out, size_t *cap)
{
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        const char *a = cmp_yaml_name(k);
        const char *b = cmp_yaml_name(yaml_document_get_node(doc, p->value));
        size_t line = k->start_mark.line + 1;
        if (!a || !b)
            return msp_fail(MSP_ERR_USAGE,
                            "%s %s:%zu: expected \"%s: %s\", each one name "
                            "without blanks",
                            what, path, line, cell ? "npu_name.Class" : "npu_name",
                            cell ? "bench_name.Class" : "bench_name");
        cmp_map_entry_t *e = cmp_map_add(out, cap, line);
        if (!e)
            return msp_fail(MSP_ERR_NOMEM, "%s %s: out of memory", what, path);
        if (cell) {
            e->cell = 1;
            if (!(e->cmp = strdup(a)) || !(e->bench = strdup(b)))
                return msp_fail(MSP_ERR_NOMEM, "%s %s: out of memory", what, path);
            continue;
        }
        msp_err rc = cmp_split_tensor(a, &e->cmp, &e->cmp_role);
        if (!rc)
            rc = cmp_split_tensor(b, &e->bench, &e->bench_role);
        if (!rc && !e->cmp_role != !e->bench_role)
            rc = msp_fail(MSP_ERR_USAGE,
                          "%s %s:%zu: one side names a tensor, the other a "
                          "record",
                          what, path, line);
        if (rc)
            return rc;
    }
    return MSP_OK;
}

/* ---- our lines of name pairs ------------------------------------------------ */

/* The next line of a mapping file read into memory, cut off at its newline
 * and at a '#' comment; *rest moves past it (NULL after the last). */
static char *cmp_cut_line(char **rest)
{
    char *line = *rest;
    if (!line)
        return NULL;
    char *nl = strchr(line, '\n');
    *rest = nl ? nl + 1 : NULL;
    if (nl)
        *nl = '\0';
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';
    return line;
}

/* Lines "bench_record cmp_record" into out. A line "npu_name: bench_name"
 * among them is an error naming why the file is not YAML (at yaml_line). */
static msp_err cmp_mapping_lines(const char *path, char *text, const char *why, size_t yaml_line,
                                 cmp_mapping_t *out, size_t *cap)
{
    size_t lineno = 0;
    char *rest = text;
    for (char *line; (line = cmp_cut_line(&rest));) {
        lineno++;
        char *tok[3] = {NULL, NULL, NULL};
        int nt = 0;
        char *sp = NULL;
        for (char *t = strtok_r(line, " \t\r", &sp); t; t = strtok_r(NULL, " \t\r", &sp)) {
            if (nt < 3)
                tok[nt] = t;
            nt++;
        }
        if (nt == 0)
            continue;
        if (nt <= 2 && tok[0][strlen(tok[0]) - 1] == ':')
            return msp_fail(MSP_ERR_USAGE,
                            "mapping file %s:%zu: not YAML (%s), and line %zu is "
                            "\"npu_name: bench_name\", not two names: a file holds lines of name "
                            "pairs or is msprobe's data_mapping.yaml",
                            path, yaml_line, why, lineno);
        if (nt != 2)
            return msp_fail(MSP_ERR_USAGE,
                            "mapping file %s:%zu: expected two names \"bench_name cmp_name\" "
                            "(or msprobe's data_mapping \"npu_name: bench_name\"), found %d "
                            "field%s",
                            path, lineno, nt, nt == 1 ? "" : "s");
        cmp_map_entry_t *e = cmp_map_add(out, cap, lineno);
        if (!e || !(e->bench = strdup(tok[0])) || !(e->cmp = strdup(tok[1])))
            return msp_fail(MSP_ERR_NOMEM, "mapping file %s: out of memory", path);
    }
    return MSP_OK;
}

msp_err cmp_mapping_load(const char *path, cmp_mapping_t *out)
{
    out->e = NULL;
    out->n = 0;
    char *text = NULL;
    size_t len = 0, cap = 0, yaml_line;
    msp_err rc = msp_read_file(path, CMP_MAPPING_MAX, &text, &len);
    if (rc)
        return rc;
    yaml_document_t doc;
    char why[160];
    if (!msp_yaml_doc(text, len, &doc, why, sizeof why, &yaml_line)) {
        yaml_node_t *root = yaml_document_get_root_node(&doc);
        int is_map = root && root->type == YAML_MAPPING_NODE;
        if (is_map)
            rc = cmp_yaml_pairs("mapping file", path, &doc, root, 0, out, &cap);
        snprintf(why, sizeof why, "its document is not a mapping");
        yaml_line = root ? root->start_mark.line + 1 : 1;
        yaml_document_delete(&doc);
        if (is_map)
            goto cleanup;
    }
    rc = cmp_mapping_lines(path, text, why, yaml_line, out, &cap);
cleanup:
    free(text);
    if (rc)
        cmp_mapping_free(out);
    return rc;
}

msp_err cmp_mapping_load_cell(const char *path, cmp_mapping_t *out)
{
    char *text = NULL;
    size_t len = 0, cap = out->n, line;
    msp_err rc = msp_read_file(path, CMP_MAPPING_MAX, &text, &len);
    if (rc)
        return rc;
    yaml_document_t doc;
    char why[160];
    if (msp_yaml_doc(text, len, &doc, why, sizeof why, &line)) {
        free(text);
        return msp_fail(MSP_ERR_USAGE, "cell mapping file %s:%zu: not YAML: %s", path, line, why);
    }
    free(text);
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root && root->type == YAML_MAPPING_NODE)
        rc = cmp_yaml_pairs("cell mapping file", path, &doc, root, 1, out, &cap);
    else if (root && !(root->type == YAML_SCALAR_NODE && !root->data.scalar.length))
        rc = msp_fail(MSP_ERR_USAGE,
                      "cell mapping file %s:%zu: expected \"npu_name.Class: "
                      "bench_name.Class\"",
                      path, root->start_mark.line + 1);
    yaml_document_delete(&doc);
    return rc;
}
