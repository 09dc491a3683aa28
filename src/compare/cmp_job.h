/* The pieces of a replay job (cmp_job.c), private to src/compare and to
 * src/precheck's acc_check: its limits, the records by name, its kind,
 * attributes and tensors, the sample a large elementwise job is sent as, and
 * the streaming of its tensors to the worker (cmp_worker.h). */
#ifndef MSPROBE_CMP_JOB_H
#define MSPROBE_CMP_JOB_H

#include "cmp_worker.h"

/* Memory a job may take beyond what the worker maps, before 16 bytes for
 * each byte of its tensors (replay.py's job_limits sets it as RLIMIT_AS). */
#define CMP_JOB_MEM_BASE ((uint64_t)1 << 30)
/* A job's limits into its header: "limit_s", the wall time it may run (the
 * sooner of per_record seconds and the deadline; none when both are <= 0),
 * and "mem", the bytes it may map for tensors of `bytes` bytes. */
void cmp_job_limits(cJSON *job, uint64_t bytes, double deadline, double per_record);
/* A file's records sorted by name (n_records + 1 slots), for cmp_name_find;
 * NULL on out of memory. */
const msp_record_info_t **cmp_name_index(const msp_dump_file_t *f);
const msp_record_info_t *cmp_name_find(const msp_dump_file_t *f, const msp_record_info_t **idx,
                                       const char *name);

/* The job a record of an API makes: "optimizer" (Optimizer.*), "forward",
 * "backward"; NULL with *why (static) for a name that is none of them. */
const char *cmp_job_kind(const char *name, const char **why);

/* One tensor a job sends: which record and which tensor of it. */
typedef struct cmp_job_tensor {
    const msp_record_info_t *rec;
    const msp_tensor_info_t *t;
    uint64_t every; /* > 1: only every k-th block (cmp_job_sample_numel) is sent */
} cmp_job_tensor_t;

/* Why a record whose compare side holds no tensor data is not replayed. */
#define CMP_JOB_STATS_ONLY "the compare side holds statistics only for it"

/* A record's attributes into args (those not there yet), except the call's
 * context (autocast, alias.*), which goes to ctx (may be NULL: dropped).
 * 0, or -1 when they cannot be read. */
int cmp_job_add_attrs(cJSON *args, cJSON *ctx, msp_dump_file_t *f, const msp_record_info_t *r);
/* List rec's tensors (which: CMP_JOB_ALL, CMP_JOB_INPUTS, CMP_JOB_OUTPUTS)
 * in the header array arr, tagged tag, and in *v; NULL, or why the record
 * cannot be sent (static). */
enum { CMP_JOB_ALL = 0, CMP_JOB_INPUTS = 1, CMP_JOB_OUTPUTS = 2 };
const char *cmp_job_add_tensors(cJSON *arr, cmp_job_tensor_t **v, size_t *n, size_t *cap,
                                const msp_record_info_t *rec, const char *tag, int which,
                                uint64_t *bytes);
/* Replay on a sample (msprobe-compare(1), REPLAY): for a job of kind
 * (forward, backward, optimizer) of record name (the forward's, for a
 * backward), optimizer class cls (NULL for a call) and the tensors in v,
 * the k such that sending a sample of one block in k of each is the same
 * job on fewer elements; 1 when it is not. An elementwise API's tensors must all
 * have one shape; an elementwise optimizer's parameters, gradients and
 * states are sampled alike, each by its parameter's number of elements
 * (scalars are sent whole). cmp_job_sample: each tensor's every, and its
 * shape and nbytes in the header array arr (parallel to v), and *bytes,
 * set for k. */
uint64_t cmp_job_every(const cmp_worker_t *w, const char *kind, const char *name, const char *cls,
                       const cmp_job_tensor_t *v, size_t n);
/* The k v[i] is sent with under the job's k: 1 for what goes whole (a
 * scalar, an optimizer's parameter of at most CMP_JOB_WHOLE_NUMEL elements
 * and its gradient and states). */
#define CMP_JOB_WHOLE_NUMEL 4096
uint64_t cmp_job_tensor_every(uint64_t k, const char *kind, const cmp_job_tensor_t *v, size_t n,
                              size_t i);
void cmp_job_sample(uint64_t k, const char *kind, cmp_job_tensor_t *v, size_t n, cJSON *arr,
                    uint64_t *bytes);
/* A sample of one in k (k > 1) of a flattened tensor's m elements: every
 * k-th block of CMP_JOB_BLOCK elements (elements i with i mod (k * block) <
 * block), so that reading it passes over the blocks between unread instead
 * of reading the whole tensor for one element in k; how many elements it
 * holds. */
#define CMP_JOB_BLOCK ((uint64_t)1024)
uint64_t cmp_job_sample_numel(uint64_t m, uint64_t k);
/* ||c - b|| / ||b|| over the sample of one in k (cmp_job_sample_numel) of tensor ct of crec in cf and
 * bt of brec in bf (flattened; any float dtypes), streamed; NaN when it
 * cannot be computed (not floats, sizes differ, statistics only). */
double cmp_sampled_err(msp_dump_file_t *cf, const msp_record_info_t *crec,
                       const msp_tensor_info_t *ct, msp_dump_file_t *bf,
                       const msp_record_info_t *brec, const msp_tensor_info_t *bt, uint64_t k);
/* Stream one tensor's bytes (its sample of one in x->every) to the worker: 0, -1
 * gone, -2 time up, -3 read error. */
int cmp_worker_send_tensor(cmp_worker_t *w, msp_dump_file_t *f, const cmp_job_tensor_t *x,
                           void *buf, size_t bufsz, double deadline);

#endif
