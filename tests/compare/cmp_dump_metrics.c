/* Test driver: run msp_compare_run on two paths and print every tensor row as
 * one JSON object per line, then one summary line. NaN metrics print as null.
 * Usage: cmp_dump_metrics [--threads N] [--chunk BYTES] [--fuzzy] [--mapping F]
 *        [--level all|api|module] [--cos-warn X] [--abs-warn X] [--cos-fail X]
 *        [--abs-fail X] [--stats-warn X] [--io pread|mmap] BENCH CMP
 * Exit 0 on success, 2 with {"error": ...} on failure. */
#include "msprobe/compare.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put_str(const char *key, const char *s)
{
    printf("\"%s\": ", key);
    if (!s) {
        printf("null");
        return;
    }
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 0x20)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

static void put_num(const char *key, double v)
{
    if (isnan(v))
        printf(", \"%s\": null", key);
    else if (isinf(v))
        printf(", \"%s\": \"%s\"", key, v > 0 ? "inf" : "-inf");
    else
        printf(", \"%s\": %.17g", key, v);
}

static const char *verdict_name(msp_verdict_t v)
{
    return v == MSP_VERDICT_YES ? "Yes" : (v == MSP_VERDICT_NO ? "No" : "Warning");
}

static const char *cause_name(msp_cause_t c)
{
    return c == MSP_CAUSE_INTRODUCED ? "introduced"
                                     : (c == MSP_CAUSE_INHERITED ? "inherited" : "none");
}

static const char *hl_name(msp_highlight_t h)
{
    return h == MSP_HL_RED ? "red" : (h == MSP_HL_YELLOW ? "yellow" : "none");
}

static void count_progress(uint64_t done, void *ud)
{
    *(uint64_t *)ud += done;
}

static void log_sink(msp_log_level_t level, const char *msg, void *ud)
{
    (void)ud;
    fprintf(stderr, "log[%d]: %s\n", (int)level, msg);
}

/* One compared tensor t of record rec, as one JSON line. */
static void print_tensor(const msp_record_cmp_t *rec, const msp_tensor_cmp_t *t)
{
    printf("{");
    put_str("record", rec->name);
    printf(", ");
    put_str("bench_record", rec->bench_name);
    printf(", \"step\": %lld, \"rank\": %lld, \"order\": %lld", (long long)rec->step,
           (long long)rec->rank, (long long)rec->order);
    printf(", ");
    put_str("npu_name", t->npu_name);
    printf(", ");
    put_str("bench_name", t->bench_name);
    printf(", ");
    put_str("npu_dtype", t->npu_dtype);
    printf(", ");
    put_str("bench_dtype", t->bench_dtype);
    printf(", ");
    put_str("npu_shape", t->npu_shape);
    printf(", ");
    put_str("bench_shape", t->bench_shape);
    printf(", \"is_output\": %d", t->is_output);
    put_num("cosine", t->cosine);
    put_num("euc_dist", t->euc_dist);
    put_num("max_abs_err", t->max_abs_err);
    put_num("max_rel_err", t->max_rel_err);
    put_num("one_thousandth_ratio", t->one_thousandth_ratio);
    put_num("five_thousandths_ratio", t->five_thousandths_ratio);
    put_num("npu_max", t->npu_max);
    put_num("npu_min", t->npu_min);
    put_num("npu_mean", t->npu_mean);
    put_num("npu_norm", t->npu_norm);
    put_num("bench_max", t->bench_max);
    put_num("bench_min", t->bench_min);
    put_num("bench_mean", t->bench_mean);
    put_num("bench_norm", t->bench_norm);
    put_num("max_diff", t->max_diff);
    put_num("min_diff", t->min_diff);
    put_num("mean_diff", t->mean_diff);
    put_num("norm_diff", t->norm_diff);
    put_num("max_rel_diff", t->max_rel_diff);
    put_num("min_rel_diff", t->min_rel_diff);
    put_num("mean_rel_diff", t->mean_rel_diff);
    put_num("norm_rel_diff", t->norm_rel_diff);
    printf(", \"verdict\": \"%s\", \"agree\": %d, \"highlight\": \"%s\"", verdict_name(t->verdict),
           t->agree, hl_name(t->highlight));
    printf(", ");
    put_str("err_message", t->err_message);
    printf(", \"bytes\": %llu", (unsigned long long)t->bytes);
    printf(", \"cause\": \"%s\", \"is_root_cause\": %d, \"record_verdict\": \"%s\"",
           cause_name(rec->cause), rec->is_root_cause, verdict_name(rec->verdict));
    printf(", \"record_highlight\": \"%s\"", hl_name(rec->highlight));
    put_num("worst_cosine", rec->worst_cosine);
    put_num("worst_max_abs", rec->worst_max_abs);
    put_num("rel_err", t->rel_err);
    printf(", \"gap\": %d, ", t->gap);
    put_str("producer", t->producer);
    printf("}\n");
}

int main(int argc, char **argv)
{
    msp_compare_opts_t o;
    msp_compare_opts_default(&o);
    static const struct option longopts[] = {{"threads", required_argument, NULL, 't'},
                                             {"chunk", required_argument, NULL, 'k'},
                                             {"fuzzy", no_argument, NULL, 'z'},
                                             {"mapping", required_argument, NULL, 'm'},
                                             {"level", required_argument, NULL, 'l'},
                                             {"cos-warn", required_argument, NULL, 1},
                                             {"abs-warn", required_argument, NULL, 2},
                                             {"cos-fail", required_argument, NULL, 3},
                                             {"abs-fail", required_argument, NULL, 4},
                                             {"stats-warn", required_argument, NULL, 5},
                                             {"io", required_argument, NULL, 6},
                                             {"replay", required_argument, NULL, 7},
                                             {NULL, 0, NULL, 0}};
    /* the engine's rules on hand-made data: replay only when a test asks */
    o.replay = MSP_REPLAY_OFF;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 't':
            o.threads = atoi(optarg);
            break;
        case 'k':
            o.chunk_bytes = strtoull(optarg, NULL, 10);
            break;
        case 'z':
            o.fuzzy = 1;
            break;
        case 'm':
            o.mapping_path = optarg;
            break;
        case 'l':
            o.level = !strcmp(optarg, "api")      ? MSP_LEVEL_API
                      : !strcmp(optarg, "module") ? MSP_LEVEL_MODULE
                                                  : MSP_LEVEL_ALL;
            break;
        case 1:
            o.cos_warn = atof(optarg);
            break;
        case 2:
            o.abs_warn = atof(optarg);
            break;
        case 3:
            o.cos_fail = atof(optarg);
            break;
        case 4:
            o.abs_fail = atof(optarg);
            break;
        case 5:
            o.stats_warn = atof(optarg);
            break;
        case 6:
            o.io_mode = !strcmp(optarg, "pread") ? MSP_IO_PREAD : MSP_IO_MMAP;
            break;
        case 7:
            o.replay = !strcmp(optarg, "auto")  ? MSP_REPLAY_AUTO
                       : !strcmp(optarg, "all") ? MSP_REPLAY_ALL
                                                : MSP_REPLAY_OFF;
            break;
        default:
            return 2;
        }
    }
    if (argc - optind != 2) {
        fprintf(stderr, "usage: %s [options] BENCH CMP\n", argv[0]);
        return 2;
    }
    msp_log_set_sink(log_sink, NULL, MSP_LOG_WARN);
    uint64_t progress_bytes = 0;
    o.progress = count_progress;
    o.progress_ud = &progress_bytes;
    msp_compare_result_t *r = NULL;
    msp_err rc = msp_compare_run(argv[optind], argv[optind + 1], &o, &r);
    if (rc) {
        printf("{\"error\": %d, ", (int)rc);
        put_str("message", msp_last_error());
        printf("}\n");
        return 2;
    }
    for (size_t i = 0; i < r->n_records; i++) {
        const msp_record_cmp_t *rec = &r->records[i];
        for (size_t k = 0; k < rec->n_tensors; k++) {
            const msp_tensor_cmp_t *t = &r->tensors[rec->first_tensor + k];
            print_tensor(rec, t);
        }
    }
    printf("{\"summary\": 1, \"n_records\": %zu, \"n_tensors\": %zu, \"n_failed\": %zu, "
           "\"n_pairs\": %zu, \"stats_mode\": %d, \"bytes_compared\": %llu, "
           "\"progress_bytes\": %llu, ",
           r->n_records, r->n_tensors, r->n_failed, r->n_pairs, r->stats_mode,
           (unsigned long long)r->bytes_compared, (unsigned long long)progress_bytes);
    put_str("root_record", r->root_record >= 0 ? r->records[r->root_record].name : NULL);
    printf(", ");
    put_str("root_tensor", r->root_tensor >= 0 ? r->tensors[r->root_tensor].npu_name : NULL);
    printf(", \"unpaired\": [");
    for (size_t i = 0; i < r->n_unpaired; i++) {
        printf(i ? ", \"" : "\"");
        for (const char *p = r->unpaired[i]; *p; p++)
            if (*p != '"' && *p != '\\')
                putchar(*p);
        printf("\"");
    }
    printf("], \"records\": [");
    for (size_t i = 0; i < r->n_records; i++) {
        printf("%s{", i ? ", " : "");
        put_str("name", r->records[i].name);
        printf(", ");
        put_str("bench_name", r->records[i].bench_name);
        printf(", \"step\": %lld, \"rank\": %lld, \"order\": %lld, \"first_tensor\": %zu, "
               "\"n_tensors\": %zu, \"cause\": \"%s\", \"verdict\": \"%s\", \"highlight\": \"%s\", "
               "\"is_root_cause\": %d}",
               (long long)r->records[i].step, (long long)r->records[i].rank,
               (long long)r->records[i].order, r->records[i].first_tensor, r->records[i].n_tensors,
               cause_name(r->records[i].cause), verdict_name(r->records[i].verdict),
               hl_name(r->records[i].highlight), r->records[i].is_root_cause);
    }
    printf("], \"suspects\": [");
    for (size_t i = 0; i < r->n_suspects; i++) {
        const msp_suspect_t *su = &r->suspects[i];
        printf("%s{", i ? ", " : "");
        put_str("record", r->records[su->record].name);
        printf(", ");
        put_str("tensor", su->tensor >= 0 ? r->tensors[su->tensor].npu_name : NULL);
        printf(", \"gap\": %d, \"from_stats\": %d", su->is_gap, su->from_stats);
        put_num("in_err", su->in_err);
        put_num("out_err", su->out_err);
        printf(", ");
        put_str("reason", su->reason);
        printf("}");
    }
    printf("]}\n");
    msp_compare_result_free(r);
    return 0;
}
