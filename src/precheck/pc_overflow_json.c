/* overflow_check's output: an anomaly node as msprobe's node JSON (op_name,
 * data_info, construct_info, stack_info), and the anomaly_analyze file
 * holding each rank's first node. */
#include "pc_internal.h"
#include "msprobe/precheck.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- msprobe's node JSON ------------------------------------------------------------------- */

static cJSON *ov_num(double v)
{
    if (isnan(v))
        return cJSON_CreateString("nan");
    if (isinf(v))
        return cJSON_CreateString(v > 0 ? "inf" : "-inf");
    return cJSON_CreateNumber(v);
}

static cJSON *ov_tensor_json(const msp_tensor_info_t *t)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *sh = cJSON_CreateArray();
    if (!o || !sh) {
        cJSON_Delete(o);
        cJSON_Delete(sh);
        return NULL;
    }
    cJSON_AddStringToObject(o, "type", "torch.Tensor");
    cJSON_AddStringToObject(o, "dtype", t->dtype_name);
    for (int d = 0; d < t->ndim; d++)
        cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[d]));
    cJSON_AddItemToObject(o, "shape", sh);
    if (t->has_stats) {
        cJSON_AddItemToObject(o, "Max", ov_num(t->stats.max));
        cJSON_AddItemToObject(o, "Min", ov_num(t->stats.min));
        cJSON_AddItemToObject(o, "Mean", ov_num(t->stats.mean));
        cJSON_AddItemToObject(o, "Norm", ov_num(t->stats.norm));
        cJSON_AddNumberToObject(o, "nan_count", (double)t->stats.nan_count);
        cJSON_AddNumberToObject(o, "inf_count", (double)t->stats.inf_count);
    }
    cJSON_AddBoolToObject(o, "requires_grad", t->requires_grad != 0);
    return o;
}

/* A non-tensor argument as msprobe writes one: {"type": "int", "value": 3}. */
static cJSON *ov_value_json(const char *text)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    char *end = NULL;
    errno = 0;
    long long iv = strtoll(text, &end, 10);
    if (*text && !*end && !errno) {
        cJSON_AddStringToObject(o, "type", "int");
        cJSON_AddNumberToObject(o, "value", (double)iv);
        return o;
    }
    double dv = strtod(text, &end);
    if (*text && !*end) {
        cJSON_AddStringToObject(o, "type", "float");
        cJSON_AddItemToObject(o, "value", ov_num(dv));
        return o;
    }
    if (!strcmp(text, "True") || !strcmp(text, "False")) {
        cJSON_AddStringToObject(o, "type", "bool");
        cJSON_AddBoolToObject(o, "value", text[0] == 'T');
        return o;
    }
    if (!strcmp(text, "None")) {
        cJSON_AddStringToObject(o, "type", "NoneType");
        cJSON_AddNullToObject(o, "value");
        return o;
    }
    cJSON_AddStringToObject(o, "type", "str");
    cJSON_AddStringToObject(o, "value", text);
    return o;
}

/* Put v at path (the role's tokens after its first) under container: digits
 * index nested lists (filled with null), anything else keys an object. */
static void ov_put(cJSON *container, const char *path, cJSON *v)
{
    char tok[128];
    const char *dot = strchr(path, '.');
    size_t n = dot ? (size_t)(dot - path) : strlen(path);
    if (n >= sizeof tok)
        n = sizeof tok - 1;
    memcpy(tok, path, n);
    tok[n] = '\0';
    int digits = n > 0;
    for (size_t i = 0; i < n; i++)
        digits &= isdigit((unsigned char)tok[i]) != 0;
    if (cJSON_IsArray(container) && digits && n < 7) {
        int idx = atoi(tok);
        while (cJSON_GetArraySize(container) <= idx)
            cJSON_AddItemToArray(container, cJSON_CreateNull());
        if (!dot) {
            cJSON_ReplaceItemInArray(container, idx, v);
            return;
        }
        cJSON *cur = cJSON_GetArrayItem(container, idx);
        if (!cJSON_IsArray(cur) && !cJSON_IsObject(cur)) {
            const char *next = dot + 1;
            cJSON *fresh = isdigit((unsigned char)*next) ? cJSON_CreateArray()
                                                         : cJSON_CreateObject();
            cJSON_ReplaceItemInArray(container, idx, fresh);
            cur = fresh;
        }
        ov_put(cur, dot + 1, v);
        return;
    }
    if (!cJSON_IsObject(container)) {
        cJSON_Delete(v);
        return;
    }
    if (!dot) {
        cJSON_DeleteItemFromObjectCaseSensitive(container, tok);
        cJSON_AddItemToObject(container, tok, v);
        return;
    }
    cJSON *cur = cJSON_GetObjectItemCaseSensitive(container, tok);
    if (!cJSON_IsArray(cur) && !cJSON_IsObject(cur)) {
        cJSON_DeleteItemFromObjectCaseSensitive(container, tok);
        cur = isdigit((unsigned char)dot[1]) ? cJSON_AddArrayToObject(container, tok)
                                             : cJSON_AddObjectToObject(container, tok);
    }
    ov_put(cur, dot + 1, v);
}

/* role -> (section of data_info, path inside it) */
static void ov_place(cJSON *info, int backward, const char *role, cJSON *v)
{
    const char *sec, *rest;
    if (!strncmp(role, "kwarg.", 6)) {
        sec = backward ? "input" : "input_kwargs";
        rest = role + 6;
    } else if (!strncmp(role, "input.", 6)) {
        sec = backward ? "input" : "input_args";
        rest = role + 6;
        if (!backward && !isdigit((unsigned char)*rest)) /* optimizer: input.param.0 */
            sec = "input_kwargs";
    } else if (!strncmp(role, "output.", 7)) {
        sec = "output";
        rest = role + 7;
    } else {
        cJSON_Delete(v);
        return;
    }
    cJSON *s = cJSON_GetObjectItemCaseSensitive(info, sec);
    if (!isdigit((unsigned char)*rest) && cJSON_IsArray(s) && cJSON_GetArraySize(s) == 0) {
        cJSON_DeleteItemFromObjectCaseSensitive(info, sec);
        s = cJSON_AddObjectToObject(info, sec);
    }
    ov_put(s, rest, v);
}

/* msprobe's construct.json beside its dump.json ({record: parent}), or NULL. */
static cJSON *ov_construct_json(const msp_dump_file_t *f)
{
    size_t n = strlen(f->path);
    char *p = n >= 9 && !strcmp(f->path + n - 9, "dump.json")
                  ? msp_asprintf("%.*sconstruct.json", (int)(n - 9), f->path)
                  : msp_asprintf("%s/construct.json", f->path);
    char *text = NULL;
    size_t len = 0;
    cJSON *j = NULL;
    if (p && msp_read_file(p, (size_t)1 << 30, &text, &len) == MSP_OK)
        j = cJSON_Parse(text);
    msp_clear_error();
    free(text);
    free(p);
    return j;
}

/* construct_info, msprobe's way: the module path from the root down to the
 * record itself. From construct.json's parents ("parent" attribute) when the
 * dump has them, else from the module forward records whose
 * [order_begin, order) holds this record. */
static cJSON *ov_construct(msp_dump_file_t *f, const msp_record_info_t *r, const cJSON *attrs)
{
    cJSON *arr = cJSON_CreateArray();
    if (!arr)
        return NULL;
    cJSON_AddItemToArray(arr, cJSON_CreateString(r->name));
    const char *parent = ov_attr(attrs, "parent");
    if (parent) {
        /* the modules above are in construct.json, not in the dump's records */
        cJSON *cons = ov_construct_json(f);
        char *cur = strdup(parent);
        for (int depth = 0; cur && depth < 64; depth++) {
            cJSON_InsertItemInArray(arr, 0, cJSON_CreateString(cur));
            const cJSON *up = cJSON_GetObjectItemCaseSensitive(cons, cur);
            if (cJSON_IsArray(up)) /* msprobe writes a list for some records */
                up = cJSON_GetArrayItem(up, 0);
            char *next = cJSON_IsString(up) ? strdup(up->valuestring) : NULL;
            free(cur);
            cur = next;
        }
        free(cur);
        cJSON_Delete(cons);
        return arr;
    }
    if (!strncmp(r->name, "Module.", 7) && !cmp_is_forward(r->name))
        return arr;
    /* enclosing module forwards, innermost first, each inserted at the front */
    typedef struct {
        const msp_record_info_t *m;
        int64_t span;
    } ov_mod_t;
    ov_mod_t mods[64];
    size_t nm = 0;
    for (size_t i = 0; i < f->n_records && nm < 64; i++) {
        const msp_record_info_t *m = &f->records[i];
        if (m == r || strncmp(m->name, "Module.", 7) || !cmp_is_forward(m->name) ||
            m->order <= r->order)
            continue;
        cJSON *ma = ov_attrs(f, m);
        const char *ob = ov_attr(ma, "order_begin");
        char *end = NULL;
        long long b = ob ? strtoll(ob, &end, 10) : -1;
        if (ob && end != ob && b <= r->order)
            mods[nm++] = (ov_mod_t){m, m->order - b};
        cJSON_Delete(ma);
    }
    for (size_t i = 1; i < nm; i++) /* innermost (shortest span) first */
        for (size_t k = i; k > 0 && mods[k].span < mods[k - 1].span; k--) {
            ov_mod_t tmp = mods[k];
            mods[k] = mods[k - 1];
            mods[k - 1] = tmp;
        }
    for (size_t i = 0; i < nm; i++)
        cJSON_InsertItemInArray(arr, 0, cJSON_CreateString(mods[i].m->name));
    return arr;
}

static const char *const ov_role_names[] = {"origin", "sent", "received"};

char *ov_node_json(msp_dump_file_t *f, const msp_record_info_t *r, int64_t step,
                   const msp_anomaly_node_t *node)
{
    cJSON *attrs = ov_attrs(f, r);
    cJSON *o = cJSON_CreateObject();
    cJSON *info = cJSON_CreateObject();
    char *text = NULL;
    if (!o || !info)
        goto done;
    int backward = !cmp_is_forward(r->name) && strstr(r->name, ".backward") != NULL;
    cJSON_AddStringToObject(o, "op_name", r->name);
    if (backward) {
        cJSON_AddArrayToObject(info, "input");
    } else {
        cJSON_AddArrayToObject(info, "input_args");
        cJSON_AddObjectToObject(info, "input_kwargs");
    }
    cJSON_AddArrayToObject(info, "output");
    for (size_t i = 0; i < r->n_tensors; i++)
        ov_place(info, backward, r->tensors[i].role, ov_tensor_json(&r->tensors[i]));
    const cJSON *a;
    cJSON_ArrayForEach(a, attrs)
    {
        if (cJSON_IsString(a) && (ov_is_input(a->string) || ov_is_output(a->string)))
            ov_place(info, backward, a->string, ov_value_json(a->valuestring));
    }
    cJSON_AddItemToObject(o, "data_info", info);
    info = NULL;
    cJSON_AddItemToObject(o, "construct_info", ov_construct(f, r, attrs));
    const char *stack = ov_attr(attrs, "stack");
    if (stack) {
        cJSON *st = cJSON_AddArrayToObject(o, "stack_info");
        const char *p = stack;
        while (st && *p) {
            const char *nl = strchr(p, '\n');
            size_t n = nl ? (size_t)(nl - p) : strlen(p);
            char *line = malloc(n + 1);
            if (line) {
                memcpy(line, p, n);
                line[n] = '\0';
                cJSON_AddItemToArray(st, cJSON_CreateString(line));
                free(line);
            }
            p += n + (nl ? 1 : 0);
        }
    } else {
        cJSON_AddObjectToObject(o, "stack_info");
    }
    cJSON_AddStringToObject(o, "role", ov_role_names[node->role]);
    cJSON_AddStringToObject(o, "reason", node->reason);
    cJSON_AddNumberToObject(o, "step", (double)step);
    cJSON_AddNumberToObject(o, "order", (double)r->order);
    if (node->from_rank >= 0)
        cJSON_AddNumberToObject(o, "from_rank", (double)node->from_rank);
    text = cJSON_PrintUnformatted(o);
done:
    cJSON_Delete(attrs);
    cJSON_Delete(o);
    cJSON_Delete(info);
    return text;
}

msp_err msp_overflow_write_json(const msp_overflow_result_t *res, const char *out_dir,
                                char **written)
{
    if (written)
        *written = NULL;
    if (!res->found)
        return msp_fail(MSP_ERR_USAGE, "overflow_check: no anomaly node to write");
    msp_err rc = msp_mkdirs(out_dir);
    if (rc != MSP_OK)
        return rc;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char *path = msp_asprintf("%s/anomaly_analyze_%lld%09ld.json", out_dir, (long long)ts.tv_sec,
                              (long)ts.tv_nsec);
    cJSON *root = cJSON_CreateObject();
    char *text = NULL;
    if (!path || !root) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < res->n_ranks; i++) {
        char key[40];
        snprintf(key, sizeof key, "rank_%" PRId64, res->ranks[i].rank);
        cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, key);
        if (!arr)
            arr = cJSON_AddArrayToObject(root, key);
        cJSON *node = cJSON_Parse(res->ranks[i].json);
        if (!arr || !node) {
            cJSON_Delete(node);
            rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
            goto done;
        }
        cJSON_AddItemToArray(arr, node);
    }
    if (!(text = cJSON_Print(root))) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
        goto done;
    }
    rc = msp_write_file_atomic(path, text, strlen(text));
    if (rc == MSP_OK && written) {
        *written = path;
        path = NULL;
    }
done:
    free(text);
    free(path);
    cJSON_Delete(root);
    return rc;
}

/* ---- the result's ownership ------------------------------------------------ */

void cmp_ov_node_free(msp_anomaly_node_t *n)
{
    free(n->record);
    free(n->reason);
    free(n->json);
    memset(n, 0, sizeof *n);
}

void msp_overflow_result_free(msp_overflow_result_t *res)
{
    if (!res)
        return;
    cmp_ov_node_free(&res->origin);
    for (size_t i = 0; i < res->n_chain; i++)
        cmp_ov_node_free(&res->chain[i]);
    for (size_t i = 0; i < res->n_ranks; i++)
        cmp_ov_node_free(&res->ranks[i]);
    free(res->chain);
    free(res->ranks);
    free(res->abnormal_input);
    for (size_t i = 0; i < res->n_skipped; i++)
        free(res->skipped[i]);
    free(res->skipped);
    free(res);
}
