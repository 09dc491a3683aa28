/* A pair's result through the spool (src/compare/cmp_spool.c) and back,
 * read both ways: each string malloc'd on its own (cmp_spool_get, for the
 * compare's own passes, which change them) and every string in one block
 * (cmp_spool_get_shared, for the reports, issue 42). Both must give each
 * record's, tensor's and suspect's strings as the part had them: absent
 * ones absent, an absent error message or suspect reason as "", a bench
 * name the same as the NPU name or its own, empty, long and UTF-8 texts;
 * and free without a leak or a double free (the sanitizer build checks). */
#include "cmp_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit_check.h"

#define NREC 40
#define TPR 3 /* tensors a record */

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* the texts the part holds, by index: some absent, some empty, a long one */
static const char *text_of(size_t i, const char *what, char *buf, size_t size)
{
    switch (i % 6) {
    case 0:
        return NULL;
    case 1:
        return "";
    case 2:
        snprintf(buf, size, "%s %zu caf\xc3\xa9 \xe2\x82\xac", what, i);
        return buf;
    case 3: {
        size_t n = snprintf(buf, size, "%s %zu ", what, i);
        for (; n + 1 < size && n < 900; n++)
            buf[n] = (char)('a' + n % 26);
        buf[n] = '\0';
        return buf;
    }
    default:
        snprintf(buf, size, "%s.%zu", what, i);
        return buf;
    }
}

static msp_compare_result_t *build(void)
{
    msp_compare_result_t *p = calloc(1, sizeof *p);
    p->root_record = p->root_tensor = p->first_rank = -1;
    p->records = calloc(NREC, sizeof *p->records);
    p->tensors = calloc(NREC * TPR, sizeof *p->tensors);
    p->suspects = calloc(NREC, sizeof *p->suspects);
    char buf[1024];
    for (size_t i = 0; i < NREC; i++) {
        msp_record_cmp_t *r = &p->records[p->n_records++];
        snprintf(buf, sizeof buf, "Functional.linear.%zu.forward", i);
        r->name = strdup(buf);
        r->bench_name = i % 3 ? strdup(buf) : NULL;
        r->npu_stack = dup_or_null(text_of(i, "stack", buf, sizeof buf));
        r->arg_diff = dup_or_null(text_of(i + 1, "arg", buf, sizeof buf));
        r->replay_note = dup_or_null(text_of(i + 2, "note", buf, sizeof buf));
        r->parent = dup_or_null(text_of(i + 3, "Module.layer", buf, sizeof buf));
        r->comm_group = dup_or_null(text_of(i + 4, "group", buf, sizeof buf));
        r->params = dup_or_null(text_of(i + 5, "weight", buf, sizeof buf));
        r->first_tensor = p->n_tensors;
        r->n_tensors = TPR;
        r->order = (int64_t)i;
        for (size_t k = 0; k < TPR; k++) {
            msp_tensor_cmp_t *t = &p->tensors[p->n_tensors++];
            snprintf(buf, sizeof buf, "Functional.linear.%zu.forward.input.%zu", i, k);
            t->npu_name = strdup(buf);
            if (k == 1)
                snprintf(buf, sizeof buf, "Functional.linear.%zu.forward.bench.%zu", i, k);
            t->bench_name = strdup(buf); /* the same as the NPU's but for k 1 */
            t->err_message = dup_or_null(text_of(i + k, "message", buf, sizeof buf));
            t->producer = dup_or_null(text_of(i + k + 1, "producer", buf, sizeof buf));
            t->npu_data_name = dup_or_null(text_of(i + k + 2, "npu.pt", buf, sizeof buf));
            t->bench_data_name = dup_or_null(text_of(i + k + 3, "bench.pt", buf, sizeof buf));
            strcpy(t->npu_dtype, "torch.bfloat16");
            strcpy(t->bench_dtype, k ? "torch.float32" : "torch.bfloat16");
            strcpy(t->npu_shape, "[4, 8]");
            strcpy(t->bench_shape, "[4, 8]");
            t->cosine = 1.0 - (double)i / 1000.0;
        }
        if (i % 4 == 0) {
            msp_suspect_t *s = &p->suspects[p->n_suspects++];
            s->record = (long)i;
            s->tensor = (long)(i * TPR);
            s->reason = dup_or_null(text_of(i / 4, "reason", buf, sizeof buf));
        }
    }
    return p;
}

static size_t wrong;

static void same_text(const char *got, const char *want, const char *field, size_t i)
{
    int ok = (!got && !want) || (got && want && strcmp(got, want) == 0);
    if (!ok && wrong++ < 10)
        fprintf(stderr, "%s %zu: got %s%s%s, want %s%s%s\n", field, i, got ? "'" : "",
                got ? got : "NULL", got ? "'" : "", want ? "'" : "", want ? want : "NULL",
                want ? "'" : "");
}

/* q read back against p as built: absent error messages and reasons read as "" */
static void check(const msp_compare_result_t *q, const msp_compare_result_t *p)
{
    CHECK(q->n_records == p->n_records);
    CHECK(q->n_tensors == p->n_tensors);
    CHECK(q->n_suspects == p->n_suspects);
    for (size_t i = 0; i < q->n_records && i < p->n_records; i++) {
        const msp_record_cmp_t *a = &q->records[i], *b = &p->records[i];
        same_text(a->name, b->name, "name", i);
        same_text(a->bench_name, b->bench_name, "bench_name", i);
        same_text(a->npu_stack, b->npu_stack, "npu_stack", i);
        same_text(a->arg_diff, b->arg_diff, "arg_diff", i);
        same_text(a->replay_note, b->replay_note, "replay_note", i);
        same_text(a->parent, b->parent, "parent", i);
        same_text(a->comm_group, b->comm_group, "comm_group", i);
        same_text(a->params, b->params, "params", i);
        CHECK(a->first_tensor == b->first_tensor && a->n_tensors == b->n_tensors);
    }
    for (size_t i = 0; i < q->n_tensors && i < p->n_tensors; i++) {
        const msp_tensor_cmp_t *a = &q->tensors[i], *b = &p->tensors[i];
        same_text(a->npu_name, b->npu_name, "npu_name", i);
        same_text(a->bench_name, b->bench_name, "tensor bench_name", i);
        same_text(a->err_message, b->err_message ? b->err_message : "", "err_message", i);
        same_text(a->producer, b->producer, "producer", i);
        same_text(a->npu_data_name, b->npu_data_name, "npu_data_name", i);
        same_text(a->bench_data_name, b->bench_data_name, "bench_data_name", i);
        same_text(a->bench_dtype, b->bench_dtype, "bench_dtype", i);
        CHECK(!(a->cosine < b->cosine) && !(a->cosine > b->cosine));
    }
    for (size_t i = 0; i < q->n_suspects && i < p->n_suspects; i++)
        same_text(q->suspects[i].reason, p->suspects[i].reason ? p->suspects[i].reason : "",
                  "reason", i);
}

int main(void)
{
    msp_compare_result_t *want = build();
    cmp_spool_t *s = NULL;
    CHECK(cmp_spool_open(cmp_spool_memory, &s) == MSP_OK);
    for (int k = 0; k < 3; k++)
        CHECK(cmp_spool_give(s, build()) == MSP_OK); /* the spool's from here on */
    for (size_t i = 0; i < 3; i++) {
        msp_compare_result_t *own = NULL, *shared = NULL;
        CHECK(cmp_spool_get(s, i, &own) == MSP_OK);
        CHECK(cmp_spool_get_shared(s, i, &shared) == MSP_OK);
        if (own) {
            CHECK(own->strs == NULL);
            check(own, want);
        }
        if (shared) {
            CHECK(shared->strs != NULL);
            check(shared, want);
        }
        msp_compare_result_free(own);
        msp_compare_result_free(shared);
    }
    CHECK(wrong == 0);
    cmp_spool_close(s);
    msp_compare_result_free(want);
    printf("%zu strings wrong\n", wrong);
    return failures ? 1 : 0;
}
