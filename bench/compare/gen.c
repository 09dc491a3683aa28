/* msprobe-gen: write a bench/compare pair of dump roots for a synthetic network.
 *
 * Each step runs a chain of L forward ops on an activation of E elements:
 * op k takes input.0 = x_k and input.1 = w_k (an elementwise weight) and
 * returns output.0 = y_k = x_k * w_k, which is the next op's input. The bench
 * side computes and dumps float32; the compare side computes in float32 too
 * but dumps in its dtype (fp32, fp16 or bf16), like autocast outputs, so
 * until a planted error every dumped tensor is within one rounding of the
 * bench and agrees at that dtype's allclose tolerance. With --plant K the compare side's output
 * of forward op K (in --plant-step / --plant-rank) gets a relative error of
 * about --magnitude, and every later op inherits it through its input.
 * Backward ops (grad_in = grad_out * w, in reverse order) follow the forwards
 * unless --no-backward; --modules adds a Module.* record around each op.
 * Everything is deterministic from --seed.
 *
 *   msprobe-gen --out DIR [--steps N] [--ranks R] [--layers L] [--numel E |
 *               --size-mb MB] [--dtype fp32|fp16|bf16] [--plant K] [--magnitude M]
 *               [--plant-step S] [--plant-rank R] [--seed S] [--no-backward] [--modules]
 *               [--task tensor|statistics] [--pack-kib K]
 *
 * writes DIR/bench/step{N}/rank{R}/dump.h5 and DIR/npu/step{N}/rank{R}/dump.h5;
 * --task statistics writes what a statistics dump holds (each tensor's
 * max, min, mean, norm and CRC-32 as attributes, no data). */
#include "msprobe/format.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gen_opts {
    const char *out;
    int steps, ranks, layers;
    int64_t numel;
    double size_mb;
    msp_dtype_t dtype;
    long plant;
    int plant_step, plant_rank;
    double magnitude;
    uint64_t seed;
    int backward, modules;
    int stats_only;   /* --task statistics */
    int64_t pack_kib; /* --pack-kib: tensors below this many KiB packed (format_version 4) */
} gen_opts_t;

/* splitmix64: fast, and a pure function of (seed, stream, index) */
static uint64_t gen_mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static float gen_uniform(uint64_t stream, int64_t i)
{
    uint64_t r = gen_mix(stream ^ gen_mix((uint64_t)i));
    return (float)((double)(r >> 11) * 0x1p-52 - 1.0);
}

static uint64_t gen_stream(uint64_t seed, int step, int rank, int what, int k)
{
    return gen_mix(seed * 0x100000001b3ull ^ ((uint64_t)step << 48) ^ ((uint64_t)rank << 36) ^
                   ((uint64_t)what << 28) ^ (uint64_t)k);
}

/* Round float32 values to the compare dtype and back, and pack them. */
static void gen_round(msp_dtype_t dt, const float *src, int64_t n, float *vals, void *packed)
{
    for (int64_t i = 0; i < n; i++) {
        if (dt == MSP_DTYPE_BFLOAT16) {
            uint16_t h = msp_double_to_bf16(src[i]);
            ((uint16_t *)packed)[i] = h;
            vals[i] = msp_bf16_to_float(h);
        } else if (dt == MSP_DTYPE_FLOAT16) {
            uint16_t h = msp_double_to_half(src[i]);
            ((uint16_t *)packed)[i] = h;
            vals[i] = msp_half_to_float(h);
        } else {
            ((float *)packed)[i] = src[i];
            vals[i] = src[i];
        }
    }
}

/* Layer k's weights, the same for every step and rank (forward and backward
 * regenerate them rather than keep all layers): |w| log-uniform in
 * [0.8, 1.25], so E[log|w|] = 0 and a deep chain of products neither
 * overflows nor vanishes. w in float32, wc/packed as the npu side stores them. */
static void gen_weights(uint64_t seed, int k, msp_dtype_t dt, int64_t n, float *w, float *wc,
                        void *packed)
{
    uint64_t sw = gen_stream(seed, 0, 0, 2, k);
    for (int64_t i = 0; i < n; i++) {
        float u = gen_uniform(sw, i);
        w[i] = (u < 0 ? -1.0f : 1.0f) * expf(0.2231436f * gen_uniform(sw ^ 0x5bd1e995u, i));
    }
    gen_round(dt, w, n, wc, packed);
}

typedef struct gen_side {
    msp_writer_t *w;
    msp_dtype_t dt;
    const char *path;
    int stats_only;
} gen_side_t;

static int gen_add(gen_side_t *s, const char *role, const void *data, int64_t n)
{
    msp_tensor_in_t t = {0};
    msp_stats_t st;
    t.role = role;
    t.dtype = s->dt;
    t.ndim = 1;
    t.shape = &n;
    t.data = data;
    t.device = "cpu";
    if (s->stats_only) {
        msp_stats_compute(s->dt, data, (size_t)n, &st);
        t.data = NULL;
        t.stats = &st;
    }
    if (msp_writer_add_tensor(s->w, &t)) {
        fprintf(stderr, "msprobe-gen: %s: %s\n", s->path, msp_last_error());
        return -1;
    }
    return 0;
}

static int gen_begin(gen_side_t *s, const char *name, int64_t order)
{
    if (msp_writer_begin_record(s->w, name, order)) {
        fprintf(stderr, "msprobe-gen: %s: %s\n", s->path, msp_last_error());
        return -1;
    }
    return 0;
}

static int gen_end(gen_side_t *s)
{
    if (msp_writer_end_record(s->w)) {
        fprintf(stderr, "msprobe-gen: %s: %s\n", s->path, msp_last_error());
        return -1;
    }
    return 0;
}

static const char *gen_api[] = {"Functional.linear", "Torch.mul", "Tensor.mul", "Functional.gelu"};

static int gen_one(const gen_opts_t *o, int step, int rank)
{
    int rc = -1;
    int64_t E = o->numel;
    size_t cs = msp_dtype_size(o->dtype);
    float *xb = malloc((size_t)E * 4), *xc = malloc((size_t)E * 4), *w = malloc((size_t)E * 4);
    float *wc = malloc((size_t)E * 4), *tmp = malloc((size_t)E * 4), *yb = malloc((size_t)E * 4);
    float *yc = malloc((size_t)E * 4);
    void *pxc = malloc((size_t)E * cs), *pwc = malloc((size_t)E * cs),
         *pyc = malloc((size_t)E * cs);
    gen_side_t b = {NULL, MSP_DTYPE_FLOAT32, NULL, o->stats_only},
               c = {NULL, o->dtype, NULL, o->stats_only};
    char *bp = NULL, *cp = NULL;
    if (!xb || !xc || !w || !wc || !tmp || !yb || !yc || !pxc || !pwc || !pyc) {
        fprintf(stderr, "msprobe-gen: out of memory for %lld elements\n", (long long)E);
        goto cleanup;
    }
    for (int side = 0; side < 2; side++) {
        char *dir = msp_asprintf("%s/%s/step%d/rank%d", o->out, side ? "npu" : "bench", step, rank);
        if (!dir || msp_mkdirs(dir)) {
            fprintf(stderr, "msprobe-gen: %s\n", msp_last_error());
            free(dir);
            goto cleanup;
        }
        char *p = msp_asprintf("%s/dump.h5", dir);
        free(dir);
        if (side)
            cp = p;
        else
            bp = p;
    }
    b.path = bp;
    c.path = cp;
    msp_dump_meta_t meta = {
        "pytorch", "1.13.1",         o->stats_only ? "statistics" : "tensor", "mix", step, rank,
        o->ranks,  o->pack_kib << 10};
    if (msp_writer_open(bp, &meta, &b.w) || msp_writer_open(cp, &meta, &c.w)) {
        fprintf(stderr, "msprobe-gen: %s\n", msp_last_error());
        goto cleanup;
    }
    uint64_t sx = gen_stream(o->seed, step, rank, 1, 0);
    for (int64_t i = 0; i < E; i++)
        xb[i] = gen_uniform(sx, i) * 1.7320508f;
    gen_round(o->dtype, xb, E, xc, pxc);
    memcpy(xc, xb, (size_t)E * 4);
    int64_t order = 0;
    int calls[4] = {0, 0, 0, 0};
    for (int k = 0; k < o->layers; k++) {
        gen_weights(o->seed, k, o->dtype, E, w, wc, pwc);
        for (int64_t i = 0; i < E; i++) {
            yb[i] = xb[i] * w[i];
            tmp[i] = xc[i] * w[i];
        }
        if (k == o->plant && step == o->plant_step && rank == o->plant_rank) {
            uint64_t sp = gen_stream(o->seed, step, rank, 3, k);
            for (int64_t i = 0; i < E; i++)
                tmp[i] *= 1.0f + (float)o->magnitude * gen_uniform(sp, i);
        }
        gen_round(o->dtype, tmp, E, yc, pyc);
        memcpy(yc, tmp, (size_t)E * 4); /* the chain goes on in float32 */
        char name[160];
        int a = k % 4;
        snprintf(name, sizeof name, "%s.%d.forward", gen_api[a], calls[a]++);
        if (o->modules) {
            char mod[160];
            snprintf(mod, sizeof mod, "Module.layers.%d.Layer.forward.0", k);
            if (gen_begin(&b, mod, order) || gen_add(&b, "input.0", xb, E) ||
                gen_add(&b, "output.0", yb, E) || gen_end(&b) || gen_begin(&c, mod, order) ||
                gen_add(&c, "input.0", pxc, E) || gen_add(&c, "output.0", pyc, E) || gen_end(&c))
                goto cleanup;
            order++;
        }
        if (gen_begin(&b, name, order) || gen_add(&b, "input.0", xb, E) ||
            gen_add(&b, "input.1", w, E) || gen_add(&b, "output.0", yb, E) || gen_end(&b) ||
            gen_begin(&c, name, order) || gen_add(&c, "input.0", pxc, E) ||
            gen_add(&c, "input.1", pwc, E) || gen_add(&c, "output.0", pyc, E) || gen_end(&c))
            goto cleanup;
        order++;
        /* the output is the next op's input */
        memcpy(xb, yb, (size_t)E * 4);
        memcpy(xc, yc, (size_t)E * 4);
        memcpy(pxc, pyc, (size_t)E * cs);
    }
    if (o->backward) {
        uint64_t sg = gen_stream(o->seed, step, rank, 4, 0);
        for (int64_t i = 0; i < E; i++)
            xb[i] = gen_uniform(sg, i) * 0.01f; /* grad of the loss w.r.t. the last output */
        gen_round(o->dtype, xb, E, xc, pxc);
        memcpy(xc, xb, (size_t)E * 4);
        int bcalls[4];
        memcpy(bcalls, calls, sizeof bcalls);
        for (int k = o->layers - 1; k >= 0; k--) {
            gen_weights(o->seed, k, o->dtype, E, w, wc, pwc);
            for (int64_t i = 0; i < E; i++) {
                yb[i] = xb[i] * w[i];
                tmp[i] = xc[i] * w[i];
            }
            gen_round(o->dtype, tmp, E, yc, pyc);
            memcpy(yc, tmp, (size_t)E * 4);
            int a = k % 4;
            char name[160];
            snprintf(name, sizeof name, "%s.%d.backward", gen_api[a], --bcalls[a]);
            if (gen_begin(&b, name, order) || gen_add(&b, "input.0", xb, E) ||
                gen_add(&b, "output.0", yb, E) || gen_end(&b) || gen_begin(&c, name, order) ||
                gen_add(&c, "input.0", pxc, E) || gen_add(&c, "output.0", pyc, E) || gen_end(&c))
                goto cleanup;
            order++;
            memcpy(xb, yb, (size_t)E * 4);
            memcpy(xc, yc, (size_t)E * 4);
            memcpy(pxc, pyc, (size_t)E * cs);
        }
    }
    msp_writer_t *bw = b.w, *cw = c.w;
    b.w = c.w = NULL;
    if (msp_writer_close(bw) || msp_writer_close(cw)) {
        fprintf(stderr, "msprobe-gen: %s\n", msp_last_error());
        goto cleanup;
    }
    rc = 0;
cleanup:
    msp_writer_abort(b.w);
    msp_writer_abort(c.w);
    free(bp);
    free(cp);
    free(xb);
    free(xc);
    free(w);
    free(wc);
    free(tmp);
    free(yb);
    free(yc);
    free(pxc);
    free(pwc);
    free(pyc);
    return rc;
}

static void gen_usage(FILE *f)
{
    fprintf(f,
            "usage: msprobe-gen --out DIR [--steps N] [--ranks R] [--layers L]\n"
            "                   [--numel E | --size-mb MB] [--dtype fp32|fp16|bf16]\n"
            "                   [--plant K] [--magnitude M] [--plant-step S] [--plant-rank R]\n"
            "                   [--seed S] [--no-backward] [--modules] [--task tensor|statistics]\n"
            "                   [--pack-kib K]\n"
            "Writes DIR/bench/step{N}/rank{R}/dump.h5 (float32) and DIR/npu/... (--dtype).\n"
            "--pack-kib packs tensors of fewer than K KiB into /packed (MSPROBE_PACK_KIB).\n"
            "--size-mb sets E so that the smaller side holds at least MB megabytes.\n");
}

int main(int argc, char **argv)
{
    gen_opts_t o = {NULL, 1, 1, 8, 4096, 0.0, MSP_DTYPE_BFLOAT16, -1, 0, 0, 0.05, 1, 1, 0, 0, 0};
    static const struct option lo[] = {{"out", required_argument, NULL, 'o'},
                                       {"steps", required_argument, NULL, 's'},
                                       {"ranks", required_argument, NULL, 'r'},
                                       {"layers", required_argument, NULL, 'L'},
                                       {"numel", required_argument, NULL, 'e'},
                                       {"size-mb", required_argument, NULL, 'S'},
                                       {"dtype", required_argument, NULL, 'd'},
                                       {"plant", required_argument, NULL, 'p'},
                                       {"magnitude", required_argument, NULL, 'm'},
                                       {"plant-step", required_argument, NULL, 'P'},
                                       {"plant-rank", required_argument, NULL, 'R'},
                                       {"seed", required_argument, NULL, 'x'},
                                       {"no-backward", no_argument, NULL, 'B'},
                                       {"modules", no_argument, NULL, 'M'},
                                       {"task", required_argument, NULL, 'T'},
                                       {"pack-kib", required_argument, NULL, 'K'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (ch) {
        case 'o':
            o.out = optarg;
            break;
        case 's':
            o.steps = atoi(optarg);
            break;
        case 'r':
            o.ranks = atoi(optarg);
            break;
        case 'L':
            o.layers = atoi(optarg);
            break;
        case 'e':
            o.numel = strtoll(optarg, NULL, 10);
            break;
        case 'S':
            o.size_mb = atof(optarg);
            break;
        case 'd':
            o.dtype = !strcmp(optarg, "fp32")   ? MSP_DTYPE_FLOAT32
                      : !strcmp(optarg, "fp16") ? MSP_DTYPE_FLOAT16
                      : !strcmp(optarg, "bf16") ? MSP_DTYPE_BFLOAT16
                                                : MSP_DTYPE_INVALID;
            if (!o.dtype) {
                fprintf(stderr, "msprobe-gen: --dtype %s: use fp32, fp16 or bf16\n", optarg);
                return 2;
            }
            break;
        case 'p':
            o.plant = atol(optarg);
            break;
        case 'm':
            o.magnitude = atof(optarg);
            break;
        case 'P':
            o.plant_step = atoi(optarg);
            break;
        case 'R':
            o.plant_rank = atoi(optarg);
            break;
        case 'x':
            o.seed = strtoull(optarg, NULL, 10);
            break;
        case 'B':
            o.backward = 0;
            break;
        case 'M':
            o.modules = 1;
            break;
        case 'T':
            if (strcmp(optarg, "tensor") && strcmp(optarg, "statistics")) {
                fprintf(stderr, "msprobe-gen: --task %s: use tensor or statistics\n", optarg);
                return 2;
            }
            o.stats_only = !strcmp(optarg, "statistics");
            break;
        case 'K':
            o.pack_kib = strtoll(optarg, NULL, 10);
            if (o.pack_kib < 0 || o.pack_kib > 1024) {
                fprintf(stderr, "msprobe-gen: --pack-kib %s: use 0 to 1024\n", optarg);
                return 2;
            }
            break;
        case 'h':
            gen_usage(stdout);
            return 0;
        default:
            gen_usage(stderr);
            return 2;
        }
    }
    if (!o.out || o.steps < 1 || o.ranks < 1 || o.layers < 1 || o.numel < 1 || optind != argc) {
        gen_usage(stderr);
        return 2;
    }
    if (o.size_mb > 0) {
        /* tensors per step and rank: 3 per forward, 2 per module, 2 per backward */
        double per = (double)o.layers * (3 + (o.modules ? 2 : 0) + (o.backward ? 2 : 0));
        double bytes = o.size_mb * 1024 * 1024 / (o.steps * (double)o.ranks * per);
        o.numel = (int64_t)ceil(bytes / (double)msp_dtype_size(o.dtype));
    }
    for (int s = 0; s < o.steps; s++)
        for (int r = 0; r < o.ranks; r++)
            if (gen_one(&o, s, r))
                return 1;
    return 0;
}
