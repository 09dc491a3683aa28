/* The numbers of a details row as text, made once for the workbook and
 * result.csv together. Both print the same sixteen numbers of each tensor
 * row the same way (msp_dtoa, cmp_percent_text), each on a thread of its
 * own: at 1,024 ranks with --csv that was 11 s of CPU, 6.7 of it the csv's
 * second go at what the workbook had printed (issue 42). A part that both
 * read (rep_write.c marks it) carries a table of its rows' texts, made a
 * chunk of rows at a time by whichever report comes to the chunk first; the
 * other copies them. A report that finds a chunk being made by the other
 * makes its own texts for the row rather than wait. */
#include "rep_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RT_CHUNK 256 /* rows made at once: a reader a chunk, seldom both */

struct rep_texts {
    size_t n_rows;
    unsigned char *state; /* a chunk's: 0 not made, 1 being made, 2 made (atomic) */
    rep_row_texts_t *rows;
};

static void rt_put(char *slot, const char *text, size_t n, int flag)
{
    if (n > REP_TEXT_SLOT - 2)
        n = REP_TEXT_SLOT - 2; /* never: 24 characters is the longest */
    memcpy(slot, text, n);
    slot[n] = '\0';
    slot[REP_TEXT_SLOT - 1] = (char)(n | (size_t)flag);
}

/* a number as both print it: the shortest text that reads back; NaN "N/A",
 * +-Inf "inf" and "-inf", which the workbook writes as text cells */
static void rt_num(char *slot, msp_num_memo_t *m, double v)
{
    char buf[MSP_DTOA_SIZE];
    if (isnan(v))
        rt_put(slot, "N/A", 3, REP_TEXT_CELL);
    else if (isinf(v))
        rt_put(slot, v > 0 ? "inf" : "-inf", 3 + (v < 0), REP_TEXT_CELL);
    else
        rt_put(slot, buf, msp_dtoa_memo(m, v, buf), 0);
}

int rep_row_numbers(const msp_tensor_cmp_t *t, int stats, double v[16])
{
    int k = 0;
    if (stats) {
        const double d[] = {t->max_diff,     t->min_diff,     t->mean_diff,     t->norm_diff,
                            t->max_rel_diff, t->min_rel_diff, t->mean_rel_diff, t->norm_rel_diff};
        for (size_t i = 0; i < 8; i++)
            v[k++] = d[i];
    } else {
        const double m[] = {t->cosine,
                            t->euc_dist,
                            t->max_abs_err,
                            t->max_rel_err,
                            t->one_thousandth_ratio,
                            t->five_thousandths_ratio};
        for (size_t i = 0; i < 6; i++)
            v[k++] = m[i];
    }
    const double side[] = {t->npu_max,   t->npu_min,   t->npu_mean,   t->npu_norm,
                           t->bench_max, t->bench_min, t->bench_mean, t->bench_norm};
    for (size_t i = 0; i < 8; i++)
        v[k++] = side[i];
    return k;
}

static void rt_make(const msp_tensor_cmp_t *t, int stats, msp_num_memo_t *nums,
                    msp_num_memo_t *pcts, rep_row_texts_t *out)
{
    double v[16];
    int n = rep_row_numbers(t, stats, v);
    for (int i = 0; i < n; i++) {
        if (rep_row_is_pct(stats, i)) {
            char pct[48];
            cmp_percent_text(pcts, v[i], pct, sizeof pct);
            rt_put(out->s[i], pct, strlen(pct), REP_TEXT_CELL);
        } else {
            rt_num(out->s[i], nums, v[i]);
        }
    }
}

static void rt_free(void *p)
{
    struct rep_texts *t = p;
    if (!t)
        return;
    free(t->state);
    free(t->rows);
    free(t);
}

/* part's table, made by the first report to ask; NULL when out of memory */
static struct rep_texts *rt_table(msp_compare_result_t *part)
{
    struct rep_texts *t = __atomic_load_n(&part->texts, __ATOMIC_ACQUIRE);
    if (t)
        return t;
    struct rep_texts *mine = calloc(1, sizeof *mine);
    if (mine) {
        mine->n_rows = part->n_tensors;
        mine->state = calloc(part->n_tensors / RT_CHUNK + 1, 1);
        mine->rows = malloc((part->n_tensors ? part->n_tensors : 1) * sizeof *mine->rows);
    }
    if (!mine || !mine->state || !mine->rows) {
        rt_free(mine);
        return NULL;
    }
    void *none = NULL;
    if (__atomic_compare_exchange_n(&part->texts, &none, mine, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        return mine;
    rt_free(mine); /* the other report's came first */
    return none;
}

const rep_row_texts_t *rep_texts_row(const msp_compare_result_t *part, size_t i, int stats,
                                     msp_num_memo_t *nums, msp_num_memo_t *pcts,
                                     rep_row_texts_t *local)
{
    msp_compare_result_t *p = (msp_compare_result_t *)part; /* the table is a cache of it */
    if (!local && !p->share_texts)
        return NULL;
    struct rep_texts *t = p->share_texts && i < part->n_tensors ? rt_table(p) : NULL;
    if (t) {
        size_t c = i / RT_CHUNK;
        unsigned char st = __atomic_load_n(&t->state[c], __ATOMIC_ACQUIRE), zero = 0;
        if (st == 2)
            return &t->rows[i];
        if (st == 0 && __atomic_compare_exchange_n(&t->state[c], &zero, 1, 0, __ATOMIC_ACQ_REL,
                                                   __ATOMIC_ACQUIRE)) {
            size_t end = (c + 1) * RT_CHUNK < t->n_rows ? (c + 1) * RT_CHUNK : t->n_rows;
            for (size_t r = c * RT_CHUNK; r < end; r++)
                rt_make(&part->tensors[r], stats, nums, pcts, &t->rows[r]);
            __atomic_store_n(&t->state[c], 2, __ATOMIC_RELEASE);
            return &t->rows[i];
        }
    }
    if (!local)
        return NULL;
    rt_make(&part->tensors[i], stats, nums, pcts, local);
    return local;
}

void rep_texts_share(msp_compare_result_t *part)
{
    part->share_texts = 1;
    part->texts_free = rt_free;
}
