/* acc_check's --save_error_data (msprobe's -save_error_data): the tensors of
 * each API whose forward or backward missed its standard (error or warning),
 * saved as torch.save files in one directory, named as msprobe names them:
 *   API.PASS.input.I.pt            the record's inputs, from the dump
 *   API.PASS.output.device.I.pt    its recorded outputs, from the dump
 *   API.PASS.output.bench.I.pt     the float64 replay's, from the worker's answer
 * (PASS forward or backward; I counts the record's tensors of that kind in
 * role order). The check itself is pc_acc.c. */
#include "pc_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int acc_b64(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* s decoded into exactly want bytes (malloc'd), or NULL when it is not. */
static unsigned char *acc_b64_decode(const char *s, size_t want)
{
    size_t len = strlen(s);
    if (len % 4 || len / 4 * 3 < want || len / 4 * 3 > want + 2)
        return NULL;
    unsigned char *out = malloc(want ? want : 1);
    size_t n = 0;
    for (size_t i = 0; out && i < len; i += 4) {
        int v[4];
        for (int k = 0; k < 4; k++)
            v[k] = s[i + k] == '=' ? 0 : acc_b64(s[i + k]);
        if (v[0] < 0 || v[1] < 0 || v[2] < 0 || v[3] < 0) {
            free(out);
            return NULL;
        }
        unsigned long w = (unsigned long)v[0] << 18 | (unsigned long)v[1] << 12 |
                          (unsigned long)v[2] << 6 | (unsigned long)v[3];
        for (int k = 0; k < 3 && n < want; k++)
            out[n++] = (unsigned char)(w >> (16 - 8 * k));
    }
    return out;
}

static msp_err acc_save(int dfd, const char *dir, const char *name, const msp_tensor_info_t *t,
                        const void *data, size_t *n_files)
{
    char *shown = msp_asprintf("%s/%s", dir, name);
    if (!shown)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    msp_tensor_info_t plain = *t; /* detached, as msprobe saves it */
    plain.requires_grad = 0;
    msp_err rc = msp_pt_save(dfd, name, shown, &plain, data);
    free(shown);
    *n_files += rc == MSP_OK;
    return rc;
}

/* The float64 benchmark of output role of record r (answer's "bench"), saved
 * as output.bench.I where I is the place of role among r's outputs. */
static msp_err acc_save_bench(int dfd, const char *dir, const msp_record_info_t *r,
                              const char *prefix, const cJSON *o, size_t *n_files)
{
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(o, "role");
    const cJSON *acc = cJSON_GetObjectItemCaseSensitive(o, "acc");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(acc, "bench");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(b, "shape");
    const cJSON *b64 = cJSON_GetObjectItemCaseSensitive(b, "b64");
    if (!cJSON_IsString(role) || !cJSON_IsArray(sh) || !cJSON_IsString(b64))
        return MSP_OK; /* not kept (over the answer's budget): nothing to save */
    long at = -1, k = 0;
    for (size_t i = 0; i < r->n_tensors && at < 0; i++) {
        if (strncmp(r->tensors[i].role, "output", 6))
            continue;
        if (!strcmp(r->tensors[i].role, role->valuestring))
            at = k;
        k++;
    }
    msp_tensor_info_t t;
    memset(&t, 0, sizeof t);
    t.dtype = MSP_DTYPE_FLOAT64;
    t.numel = 1;
    const cJSON *d;
    cJSON_ArrayForEach(d, sh)
    {
        if (t.ndim == MSP_MAX_NDIM || !cJSON_IsNumber(d) || d->valuedouble < 0 ||
            d->valuedouble > 0x1p40)
            return msp_fail(MSP_ERR_FORMAT, "%s: the replay's benchmark has a bad shape", r->name);
        t.shape[t.ndim++] = (int64_t)d->valuedouble;
        t.numel *= (int64_t)d->valuedouble;
    }
    t.nbytes = t.numel * 8;
    unsigned char *data = acc_b64_decode(b64->valuestring, (size_t)t.nbytes);
    if (!data)
        return msp_fail(MSP_ERR_FORMAT, "%s: the replay's benchmark of %s does not decode", r->name,
                        role->valuestring);
    char name[600];
    snprintf(name, sizeof name, "%s.output.bench.%ld.pt", prefix, at < 0 ? 0 : at);
    msp_err rc = acc_save(dfd, dir, name, &t, data, n_files);
    free(data);
    return rc;
}

/* Record r's inputs and recorded outputs from the dump, and the benchmark
 * outputs of its answer. */
static msp_err acc_save_record(int dfd, const char *dir, msp_dump_file_t *f,
                               const msp_record_info_t *r, const char *answer, size_t *n_files)
{
    char prefix[520];
    snprintf(prefix, sizeof prefix, "%s", r->name); /* API.PASS */
    size_t ni = 0, no = 0;
    msp_err rc = MSP_OK;
    for (size_t i = 0; i < r->n_tensors && rc == MSP_OK; i++) {
        const msp_tensor_info_t *t = &r->tensors[i];
        int out = !strncmp(t->role, "output", 6);
        size_t idx = out ? no++ : ni++;
        if (!t->has_data || t->dtype == MSP_DTYPE_INVALID)
            continue;
        void *buf = malloc(t->nbytes ? (size_t)t->nbytes : 1);
        if (!buf)
            return msp_fail(MSP_ERR_NOMEM, "out of memory");
        char name[600];
        snprintf(name, sizeof name, out ? "%s.output.device.%zu.pt" : "%s.input.%zu.pt", prefix,
                 idx);
        rc = msp_dump_read_tensor(f, r, t, buf, (size_t)t->nbytes);
        if (rc == MSP_OK)
            rc = acc_save(dfd, dir, name, t, buf, n_files);
        free(buf);
    }
    cJSON *ans = answer ? cJSON_Parse(answer) : NULL;
    const cJSON *o;
    cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(ans, "outputs"))
    {
        if (rc != MSP_OK)
            break;
        rc = acc_save_bench(dfd, dir, r, prefix, o, n_files);
    }
    cJSON_Delete(ans);
    return rc;
}

msp_err acc_save_error_data(const char *dir, msp_dump_file_t *f, const msp_acc_result_t *res,
                            const size_t *recs, char *const *answers, size_t n, size_t *n_files)
{
    *n_files = 0;
    int dfd = -1;
    msp_err rc = MSP_OK;
    for (size_t i = 0; i < n && rc == MSP_OK; i++) {
        const msp_record_info_t *r = &f->records[recs[i]];
        const char *last = strrchr(r->name, '.');
        size_t al = last ? (size_t)(last - r->name) : strlen(r->name);
        const msp_acc_api_t *a = NULL;
        for (size_t k = 0; k < res->n_apis && !a; k++)
            if (strlen(res->apis[k].name) == al && !strncmp(res->apis[k].name, r->name, al))
                a = &res->apis[k];
        if (!a || !(a->forward == MSP_ACC_ERROR || a->forward == MSP_ACC_WARNING ||
                    a->backward == MSP_ACC_ERROR || a->backward == MSP_ACC_WARNING))
            continue;
        if (dfd < 0) { /* made only when there is something to put in it */
            if ((rc = msp_mkdirs(dir)) != MSP_OK)
                break;
            if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
                rc = msp_fail(MSP_ERR_IO, "cannot open %s: %s", dir, strerror(errno));
                break;
            }
        }
        rc = acc_save_record(dfd, dir, f, r, answers[i], n_files);
    }
    if (dfd >= 0)
        close(dfd);
    return rc;
}
