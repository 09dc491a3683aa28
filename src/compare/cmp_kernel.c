/* The metric kernel: one fused pass over a pair of native arrays computes every
 * column of the details sheet plus the allclose test. Elements are converted to
 * double inside the loop; nothing larger than a small block is materialised.
 *
 * Speed: each block first runs a branch-free loop that ignores NaN/Inf. A
 * non-finite element always makes the sum of squares of its side non-finite,
 * so a block whose sums come out non-finite is redone by the careful scalar
 * loop; finite blocks (nearly all) never pay for the NaN/Inf rules. The hot
 * loops are compiled for AVX-512, AVX2 and baseline x86-64 and picked at load
 * time (target_clones), so the default build needs no -march flag. */
#include "cmp_internal.h"

#include "msprobe/cpu.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CMP_BLOCK 4096 /* elements per fast/slow decision */

#if defined(MSP_CPU_X86) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) &&               \
    !defined(__SANITIZE_THREAD__)
#define CMP_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CMP_CLONES
#endif

void msp_tolerance(msp_dtype_t a, msp_dtype_t b, double *rtol, double *atol)
{
    /* rank = how coarse the dtype is; the coarser side sets the tolerance */
    static const struct {
        msp_dtype_t dt;
        double rtol, atol;
    } tab[] = {
        {MSP_DTYPE_BFLOAT16, 1.6e-2, 1e-5},
        {MSP_DTYPE_FLOAT16, 1e-3, 1e-5},
        {MSP_DTYPE_FLOAT32, 1.3e-6, 1e-5},
        {MSP_DTYPE_FLOAT64, 1e-7, 1e-7},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        if (a == tab[i].dt || b == tab[i].dt) {
            *rtol = tab[i].rtol;
            *atol = tab[i].atol;
            return;
        }
    }
    *rtol = 0.0; /* integers and bool: exact */
    *atol = 0.0;
}

void cmp_acc_init(cmp_acc_t *a)
{
    memset(a, 0, sizeof *a);
    a->n_max = a->b_max = -INFINITY;
    a->n_min = a->b_min = INFINITY;
}

void cmp_acc_merge(cmp_acc_t *o, const cmp_acc_t *p)
{
    o->count += p->count;
    o->dot += p->dot;
    o->nn += p->nn;
    o->bb += p->bb;
    o->dd += p->dd;
    o->max_abs = fmax(o->max_abs, p->max_abs);
    o->max_rel = fmax(o->max_rel, p->max_rel);
    o->cnt_1e3 += p->cnt_1e3;
    o->cnt_5e3 += p->cnt_5e3;
    o->viol += p->viol;
    o->n_max = fmax(o->n_max, p->n_max);
    o->n_min = fmin(o->n_min, p->n_min);
    o->b_max = fmax(o->b_max, p->b_max);
    o->b_min = fmin(o->b_min, p->b_min);
    o->n_sum += p->n_sum;
    o->b_sum += p->b_sum;
    o->n_sq += p->n_sq;
    o->b_sq += p->b_sq;
    o->n_nan += p->n_nan;
    o->b_nan += p->b_nan;
    o->n_inf += p->n_inf;
    o->b_inf += p->b_inf;
    o->pos_mismatch |= p->pos_mismatch;
    o->inf_sign_mismatch |= p->inf_sign_mismatch;
}

/* ---- element loads: unaligned-safe, branch-free, vectorisable ------------ */

static inline __attribute__((always_inline)) double cmp_load(msp_dtype_t dt, const unsigned char *p,
                                                             size_t i)
{
    switch (dt) {
    case MSP_DTYPE_FLOAT32: {
        float v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    case MSP_DTYPE_FLOAT64: {
        double v;
        memcpy(&v, p + 8 * i, 8);
        return v;
    }
    case MSP_DTYPE_FLOAT16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return msp_half_to_float(h);
    }
    case MSP_DTYPE_BFLOAT16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return msp_bf16_to_float(h);
    }
    case MSP_DTYPE_INT8:
        return (double)(int8_t)p[i];
    case MSP_DTYPE_UINT8:
        return (double)p[i];
    case MSP_DTYPE_BOOL:
        return p[i] ? 1.0 : 0.0;
    case MSP_DTYPE_INT16: {
        int16_t v;
        memcpy(&v, p + 2 * i, 2);
        return v;
    }
    case MSP_DTYPE_INT32: {
        int32_t v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    case MSP_DTYPE_INT64: {
        int64_t v;
        memcpy(&v, p + 8 * i, 8);
        return (double)v;
    }
    default:
        return NAN;
    }
}

double cmp_load_at(msp_dtype_t dt, const void *p, size_t i)
{
    return cmp_load(dt, p, i);
}

/* ---- the two loops ------------------------------------------------------ */

/* The simd pragma below is a hint shared by every dtype pair; clang reports the
 * pairs it cannot vectorise (integer loads) as -Wpass-failed, which -Werror
 * would turn into a build failure. gcc is silent; both compile correct code. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

/* The epsilon msprobe 26 adds at bench zeros: numpy's eps of
 * result_type(npu, bench, float32) after integers become float64, i.e.
 * float32's eps when both sides are float16/bfloat16/float32 (bfloat16 is
 * float32 once in numpy), float64's otherwise. */
static inline double cmp_rel_eps(msp_dtype_t ndt, msp_dtype_t bdt)
{
    int n32 = ndt == MSP_DTYPE_FLOAT32 || ndt == MSP_DTYPE_FLOAT16 || ndt == MSP_DTYPE_BFLOAT16;
    int b32 = bdt == MSP_DTYPE_FLOAT32 || bdt == MSP_DTYPE_FLOAT16 || bdt == MSP_DTYPE_BFLOAT16;
    return n32 && b32 ? (double)FLT_EPSILON : DBL_EPSILON;
}

/* Branch-free pass assuming every element is finite. Returns 0 (and leaves a
 * untouched) when the block holds NaN/Inf or overflows, so the caller redoes it
 * with cmp_slow_block. */
static inline __attribute__((always_inline)) int
cmp_fast_block(msp_dtype_t ndt, const unsigned char *np, msp_dtype_t bdt, const unsigned char *bp,
               size_t cnt, double rtol, double atol, int side, cmp_acc_t *a)
{
    double dot = 0, nn = 0, bb = 0, dd = 0, mabs = 0, mrel = 0;
    double c1 = 0, c5 = 0, viol = 0, ns = 0, bs = 0;
    double nmax = -INFINITY, nmin = INFINITY, bmax = -INFINITY, bmin = INFINITY;
    const double eps = cmp_rel_eps(ndt, bdt);
#pragma omp simd reduction(+ : dot, nn, bb, dd, c1, c5, viol, ns, bs) \
    reduction(max : mabs, mrel, nmax, bmax) reduction(min : nmin, bmin)
    for (size_t i = 0; i < cnt; i++) {
        double n = cmp_load(ndt, np, i), b = cmp_load(bdt, bp, i);
        double diff = n - b;
        double d = fabs(diff);
        double ab = fabs(b);
        /* msprobe 26: where b == 0 add the eps of the pair's numpy result
         * type to both before |n-b|/|b| (see cmp_rel_eps) */
        double z = ab > 0.0 ? 0.0 : eps;
        double rel = fabs((n + z) - (b + z)) / (ab + z);
        dot += n * b;
        nn += n * n;
        bb += b * b;
        dd += diff * diff;
        mabs = mabs > d ? mabs : d;
        mrel = mrel > rel ? mrel : rel;
        c1 += rel < 0.001 ? 1.0 : 0.0;
        c5 += rel < 0.005 ? 1.0 : 0.0;
        viol += d > atol + rtol * ab ? 1.0 : 0.0;
        if (side) {
            ns += n;
            bs += b;
            nmax = nmax > n ? nmax : n;
            nmin = nmin < n ? nmin : n;
            bmax = bmax > b ? bmax : b;
            bmin = bmin < b ? bmin : b;
        }
    }
    if (!isfinite(nn) || !isfinite(bb) || !isfinite(dd) || !isfinite(mrel))
        return 0;
    cmp_acc_t p;
    p.count = cnt;
    p.dot = dot;
    p.nn = nn;
    p.bb = bb;
    p.dd = dd;
    p.max_abs = mabs;
    p.max_rel = mrel;
    p.cnt_1e3 = (uint64_t)c1;
    p.cnt_5e3 = (uint64_t)c5;
    p.viol = (uint64_t)viol;
    p.n_max = nmax;
    p.n_min = nmin;
    p.b_max = bmax;
    p.b_min = bmin;
    p.n_sum = ns;
    p.b_sum = bs;
    p.n_sq = nn;
    p.b_sq = bb;
    p.n_nan = p.b_nan = p.n_inf = p.b_inf = 0;
    p.pos_mismatch = p.inf_sign_mismatch = 0;
    cmp_acc_merge(a, &p);
    return 1;
}

#if defined(MSP_CPU_X86) && !defined(__SANITIZE_ADDRESS__)
#include <immintrin.h>
#define CMP_HAVE_F32_AVX512 1
/* float32, bfloat16 and float16 against each other, in any pairing (nearly
 * every real pair: the same dtype on both sides, or a low precision against
 * float32), written for AVX-512: each side's 16 elements made float32
 * (exactly: a bfloat16 is the top half of its float32), then each
 * element's arithmetic is the loop above's, in the same double
 * operations (no FMA), so max_abs, max_rel and the three counts are the same
 * bits; the counts are taken from the compare masks with popcount on the
 * integer units instead of double adds on the vector units, which the
 * compiler's version spent a third of its vector instructions on, and its
 * spilled accumulators are gone. 16 elements a round in two independent
 * halves; the sums differ from the generic loop's only in their order. */
#define CMP_F32_HALF(NB, BB, LM)                                                                   \
    do {                                                                                           \
        __m512d n_ = _mm512_cvtps_pd(NB), b_ = _mm512_cvtps_pd(BB);                                \
        __m512d diff_ = _mm512_sub_pd(n_, b_);                                                     \
        __m512d d_ = _mm512_and_pd(diff_, absm), ab_ = _mm512_and_pd(b_, absm);                    \
        __mmask8 pos_ = _mm512_cmp_pd_mask(ab_, zero, _CMP_GT_OQ);                                 \
        __m512d z_ = _mm512_mask_mov_pd(eps, pos_, zero);                                          \
        __m512d num_ = _mm512_and_pd(_mm512_sub_pd(_mm512_add_pd(n_, z_), _mm512_add_pd(b_, z_)),  \
                                     absm);                                                        \
        __m512d rel_ = _mm512_div_pd(num_, _mm512_add_pd(ab_, z_));                                \
        dot = _mm512_add_pd(dot, _mm512_mul_pd(n_, b_));                                           \
        nn = _mm512_add_pd(nn, _mm512_mul_pd(n_, n_));                                             \
        bb = _mm512_add_pd(bb, _mm512_mul_pd(b_, b_));                                             \
        dd = _mm512_add_pd(dd, _mm512_mul_pd(diff_, diff_));                                       \
        mabs = _mm512_max_pd(mabs, d_);                                                            \
        mrel = _mm512_max_pd(mrel, rel_);                                                          \
        c1 += (uint64_t)__builtin_popcount(_mm512_mask_cmp_pd_mask(LM, rel_, t1, _CMP_LT_OQ));     \
        c5 += (uint64_t)__builtin_popcount(_mm512_mask_cmp_pd_mask(LM, rel_, t5, _CMP_LT_OQ));     \
        __m512d lim_ = _mm512_add_pd(va, _mm512_mul_pd(vr, ab_));                                  \
        viol += (uint64_t)__builtin_popcount(_mm512_mask_cmp_pd_mask(LM, d_, lim_, _CMP_GT_OQ));   \
        if (side) {                                                                                \
            ns = _mm512_add_pd(ns, n_);                                                            \
            bs = _mm512_add_pd(bs, b_);                                                            \
        }                                                                                          \
    } while (0)

/* 16 elements from p of a 32-bit float, bfloat16 or float16 (each exact in
 * float32) as float32. */
__attribute__((target("avx512f,avx512dq,avx512vl,popcnt"), always_inline)) static inline __m512
cmp_load16(msp_dtype_t dt, const unsigned char *p)
{
    if (dt == MSP_DTYPE_FLOAT32)
        return _mm512_loadu_ps(p);
    __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)p);
    if (dt == MSP_DTYPE_FLOAT16)
        return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

__attribute__((target("avx512f,avx512dq,avx512vl,popcnt"))) static int
cmp_low_block_avx512(msp_dtype_t ndt, const unsigned char *np, msp_dtype_t bdt,
                     const unsigned char *bp, size_t cnt, double rtol, double atol, int side,
                     cmp_acc_t *a)
{
    size_t nsz = msp_dtype_size(ndt), bsz = msp_dtype_size(bdt);
    const __m512d absm = _mm512_castsi512_pd(_mm512_set1_epi64(0x7fffffffffffffffLL));
    const __m512d zero = _mm512_setzero_pd(), eps = _mm512_set1_pd((double)FLT_EPSILON);
    const __m512d t1 = _mm512_set1_pd(0.001), t5 = _mm512_set1_pd(0.005);
    const __m512d va = _mm512_set1_pd(atol), vr = _mm512_set1_pd(rtol);
    __m512d dot = zero, nn = zero, bb = zero, dd = zero, mabs = zero, mrel = zero;
    __m512d ns = zero, bs = zero;
    __m512 nmax = _mm512_set1_ps(-INFINITY), nmin = _mm512_set1_ps(INFINITY);
    __m512 bmax = nmax, bmin = nmin;
    uint64_t c1 = 0, c5 = 0, viol = 0;
    size_t i = 0;
    for (; i + 16 <= cnt; i += 16) {
        __m512 nv = cmp_load16(ndt, np + i * nsz), bv = cmp_load16(bdt, bp + i * bsz);
        if (side) {
            nmax = _mm512_max_ps(nmax, nv);
            nmin = _mm512_min_ps(nmin, nv);
            bmax = _mm512_max_ps(bmax, bv);
            bmin = _mm512_min_ps(bmin, bv);
        }
        CMP_F32_HALF(_mm512_castps512_ps256(nv), _mm512_castps512_ps256(bv), 0xff);
        CMP_F32_HALF(_mm512_extractf32x8_ps(nv, 1), _mm512_extractf32x8_ps(bv, 1), 0xff);
    }
    if (i < cnt) { /* the tail: zeros past the end, masked out of the counts */
        __mmask16 m = (__mmask16)((1u << (cnt - i)) - 1u);
        unsigned char nt[64] = {0}, bt[64] = {0};
        memcpy(nt, np + i * nsz, (cnt - i) * nsz);
        memcpy(bt, bp + i * bsz, (cnt - i) * bsz);
        __m512 nv = cmp_load16(ndt, nt), bv = cmp_load16(bdt, bt);
        if (side) {
            nmax = _mm512_mask_max_ps(nmax, m, nmax, nv);
            nmin = _mm512_mask_min_ps(nmin, m, nmin, nv);
            bmax = _mm512_mask_max_ps(bmax, m, bmax, bv);
            bmin = _mm512_mask_min_ps(bmin, m, bmin, bv);
        }
        CMP_F32_HALF(_mm512_castps512_ps256(nv), _mm512_castps512_ps256(bv), (__mmask8)m);
        CMP_F32_HALF(_mm512_extractf32x8_ps(nv, 1), _mm512_extractf32x8_ps(bv, 1),
                     (__mmask8)(m >> 8));
    }
    double snn = _mm512_reduce_add_pd(nn), sbb = _mm512_reduce_add_pd(bb);
    double sdd = _mm512_reduce_add_pd(dd), smrel = _mm512_reduce_max_pd(mrel);
    if (!isfinite(snn) || !isfinite(sbb) || !isfinite(sdd) || !isfinite(smrel))
        return 0;
    cmp_acc_t p;
    memset(&p, 0, sizeof p);
    p.count = cnt;
    p.dot = _mm512_reduce_add_pd(dot);
    p.nn = p.n_sq = snn;
    p.bb = p.b_sq = sbb;
    p.dd = sdd;
    p.max_abs = _mm512_reduce_max_pd(mabs);
    p.max_rel = smrel;
    p.cnt_1e3 = c1;
    p.cnt_5e3 = c5;
    p.viol = viol;
    if (side) {
        p.n_max = (double)_mm512_reduce_max_ps(nmax);
        p.n_min = (double)_mm512_reduce_min_ps(nmin);
        p.b_max = (double)_mm512_reduce_max_ps(bmax);
        p.b_min = (double)_mm512_reduce_min_ps(bmin);
        p.n_sum = _mm512_reduce_add_pd(ns);
        p.b_sum = _mm512_reduce_add_pd(bs);
    } else {
        p.n_max = p.b_max = -INFINITY;
        p.n_min = p.b_min = INFINITY;
    }
    cmp_acc_merge(a, &p);
    return 1;
}
#undef CMP_F32_HALF

#endif

/* Every rule, element by element: side statistics see the raw values; NaN/Inf
 * at the same places are zeroed for the metrics (msprobe), at different places
 * they mark the pair as not comparable. */
static void cmp_slow_block(msp_dtype_t ndt, const unsigned char *np, msp_dtype_t bdt,
                           const unsigned char *bp, size_t cnt, double rtol, double atol,
                           cmp_acc_t *a)
{
    cmp_acc_t p;
    cmp_acc_init(&p);
    p.count = cnt;
    const double eps = cmp_rel_eps(ndt, bdt);
    for (size_t i = 0; i < cnt; i++) {
        double n = cmp_load(ndt, np, i), b = cmp_load(bdt, bp, i);
        int n_nan = !!isnan(n), b_nan = !!isnan(b), n_inf = !!isinf(n), b_inf = !!isinf(b);
        p.n_sum += n;
        p.b_sum += b;
        p.n_sq += n * n;
        p.b_sq += b * b;
        if (n_nan) {
            p.n_nan++;
        } else {
            p.n_inf += (uint64_t)n_inf;
            p.n_max = fmax(p.n_max, n);
            p.n_min = fmin(p.n_min, n);
        }
        if (b_nan) {
            p.b_nan++;
        } else {
            p.b_inf += (uint64_t)b_inf;
            p.b_max = fmax(p.b_max, b);
            p.b_min = fmin(p.b_min, b);
        }
        if (n_nan || b_nan || n_inf || b_inf) {
            if (n_nan != b_nan || n_inf != b_inf) {
                p.pos_mismatch = 1;
                continue;
            }
            if (n_inf && ((n > 0) != (b > 0)))
                p.inf_sign_mismatch = 1;
            n = 0.0;
            b = 0.0;
        }
        double diff = n - b;
        double d = fabs(diff);
        double ab = fabs(b);
        double z = ab > 0.0 ? 0.0 : eps;
        double rel = fabs((n + z) - (b + z)) / (ab + z);
        p.dot += n * b;
        p.nn += n * n;
        p.bb += b * b;
        p.dd += diff * diff;
        p.max_abs = fmax(p.max_abs, d);
        p.max_rel = fmax(p.max_rel, rel);
        p.cnt_1e3 += rel < 0.001;
        p.cnt_5e3 += rel < 0.005;
        p.viol += d > atol + rtol * ab;
    }
    cmp_acc_merge(a, &p);
}

#define CMP_FAST_CASE(NDT, BDT)                                                                    \
    if (ndt == NDT && bdt == BDT) {                                                                \
        for (size_t off = 0; off < count; off += CMP_BLOCK) {                                      \
            size_t m = count - off < CMP_BLOCK ? count - off : CMP_BLOCK;                          \
            const unsigned char *nb = n + off * nsz, *bb_ = b + off * bsz;                         \
            int ok_ = side ? cmp_fast_block(NDT, nb, BDT, bb_, m, rtol, atol, 1, a)                \
                           : cmp_fast_block(NDT, nb, BDT, bb_, m, rtol, atol, 0, a);               \
            if (!ok_)                                                                              \
                cmp_slow_block(NDT, nb, BDT, bb_, m, rtol, atol, a);                               \
        }                                                                                          \
        return 1;                                                                                  \
    }

#define CMP_FAST_ROW(NDT)                                                                          \
    CMP_FAST_CASE(NDT, MSP_DTYPE_FLOAT32)                                                          \
    CMP_FAST_CASE(NDT, MSP_DTYPE_FLOAT16)                                                          \
    CMP_FAST_CASE(NDT, MSP_DTYPE_BFLOAT16)                                                         \
    CMP_FAST_CASE(NDT, MSP_DTYPE_FLOAT64)

/* float32, bfloat16 and float16: the dtypes the AVX-512 loop reads, each
 * exact in float32 */
static inline int cmp_low_float(msp_dtype_t dt)
{
    return dt == MSP_DTYPE_FLOAT32 || dt == MSP_DTYPE_BFLOAT16 || dt == MSP_DTYPE_FLOAT16;
}

/* Specialised loops for every pair of float dtypes; returns 0 for other pairs. */
CMP_CLONES static int cmp_run_float(msp_dtype_t ndt, const unsigned char *n, msp_dtype_t bdt,
                                    const unsigned char *b, size_t count, double rtol, double atol,
                                    int side, cmp_acc_t *a)
{
    size_t nsz = msp_dtype_size(ndt), bsz = msp_dtype_size(bdt);
#ifdef CMP_HAVE_F32_AVX512
    if (cmp_low_float(ndt) && cmp_low_float(bdt) && msp_cpu_use(MSP_CPU_CMP_AVX512)) {
        for (size_t off = 0; off < count; off += CMP_BLOCK) {
            size_t m = count - off < CMP_BLOCK ? count - off : CMP_BLOCK;
            const unsigned char *nb = n + off * nsz, *bb_ = b + off * bsz;
            /* unaligned bytes are fine: every load is a loadu */
            if (!cmp_low_block_avx512(ndt, nb, bdt, bb_, m, rtol, atol, side, a))
                cmp_slow_block(ndt, nb, bdt, bb_, m, rtol, atol, a);
        }
        return 1;
    }
#endif
    CMP_FAST_ROW(MSP_DTYPE_FLOAT32)
    CMP_FAST_ROW(MSP_DTYPE_FLOAT16)
    CMP_FAST_ROW(MSP_DTYPE_BFLOAT16)
    CMP_FAST_ROW(MSP_DTYPE_FLOAT64)
    return 0;
}

/* Integers, bool and mixed pairs: convert a small block to double, then run the
 * float64 loop on it. */
static void cmp_run_generic(msp_dtype_t ndt, const unsigned char *n, msp_dtype_t bdt,
                            const unsigned char *b, size_t count, double rtol, double atol,
                            cmp_acc_t *a)
{
    enum { G = 1024 };
    double nd[G], bd[G];
    size_t nsz = msp_dtype_size(ndt), bsz = msp_dtype_size(bdt);
    for (size_t off = 0; off < count; off += G) {
        size_t m = count - off < G ? count - off : G;
        for (size_t i = 0; i < m; i++) {
            nd[i] = cmp_load(ndt, n + off * nsz, i);
            bd[i] = cmp_load(bdt, b + off * bsz, i);
        }
        cmp_run_float(MSP_DTYPE_FLOAT64, (const unsigned char *)nd, MSP_DTYPE_FLOAT64,
                      (const unsigned char *)bd, m, rtol, atol, 1, a);
    }
}

void cmp_acc_run(msp_dtype_t ndt, const void *n, msp_dtype_t bdt, const void *b, size_t count,
                 double rtol, double atol, int side, cmp_acc_t *a)
{
    if (!cmp_run_float(ndt, n, bdt, b, count, rtol, atol, side, a))
        cmp_run_generic(ndt, n, bdt, b, count, rtol, atol, a);
}

void cmp_acc_finish(const cmp_acc_t *a, int is_scalar, msp_metrics_t *m)
{
    memset(m, 0, sizeof *m);
    double cnt = (double)a->count;
    m->n_max = a->n_nan ? NAN : a->n_max;
    m->n_min = a->n_nan ? NAN : a->n_min;
    m->b_max = a->b_nan ? NAN : a->b_max;
    m->b_min = a->b_nan ? NAN : a->b_min;
    m->n_mean = a->count ? a->n_sum / cnt : NAN;
    m->b_mean = a->count ? a->b_sum / cnt : NAN;
    m->n_norm = sqrt(a->n_sq);
    m->b_norm = sqrt(a->b_sq);
    if (!a->count) {
        m->n_max = m->n_min = m->b_max = m->b_min = NAN;
        m->cosine = m->euc_dist = m->max_abs_err = m->max_rel_err = NAN;
        m->one_thousandth_ratio = m->five_thousandths_ratio = NAN;
        m->agree = 1;
        m->message = "empty tensor";
        return;
    }
    if (a->pos_mismatch) {
        m->cosine = m->euc_dist = m->max_abs_err = m->max_rel_err = NAN;
        m->one_thousandth_ratio = m->five_thousandths_ratio = NAN;
        m->agree = 0;
        m->nan_inf_mismatch = 1;
        m->message = "NaN/Inf at different positions in NPU and bench tensors";
        return;
    }
    m->euc_dist = sqrt(a->dd);
    m->max_abs_err = a->max_abs;
    m->max_rel_err = a->max_rel;
    m->one_thousandth_ratio = (double)a->cnt_1e3 / cnt;
    m->five_thousandths_ratio = (double)a->cnt_5e3 / cnt;
    m->agree = a->viol == 0 && !a->inf_sign_mismatch;
    double nz = sqrt(a->nn), bz = sqrt(a->bb);
    if (is_scalar) {
        m->cosine = NAN;
        m->message = "one element: Cosine is not defined";
    } else if (nz <= DBL_EPSILON && bz <= DBL_EPSILON) {
        m->cosine = 1.0;
    } else if (nz <= DBL_EPSILON) {
        m->cosine = NAN;
        m->message = "Cosine not defined: all NPU data is zero";
    } else if (bz <= DBL_EPSILON) {
        m->cosine = NAN;
        m->message = "Cosine not defined: all bench data is zero";
    } else {
        m->cosine = a->dot / (nz * bz);
    }
    /* checked first: a sign mismatch always comes with Infs, so after the
     * same-positions message it could never show */
    if (a->inf_sign_mismatch)
        m->message = "+Inf against -Inf at the same position (zeroed for the metrics)";
    if (!m->message && (a->n_nan || a->n_inf))
        m->message = "NaN/Inf at the same positions on both sides: zeroed for the metrics";
}

size_t cmp_unit_elems(msp_dtype_t ndt, msp_dtype_t bdt, size_t chunk_bytes)
{
    size_t es = msp_dtype_size(ndt) > msp_dtype_size(bdt) ? msp_dtype_size(ndt)
                                                          : msp_dtype_size(bdt);
    if (!es)
        es = 1;
    size_t u = chunk_bytes / es;
    u -= u % CMP_BLOCK;
    return u ? u : CMP_BLOCK;
}

msp_err msp_metrics_compute(msp_dtype_t ndt, const void *n, msp_dtype_t bdt, const void *b,
                            size_t count, double rtol, double atol, msp_metrics_t *out)
{
    if (!out)
        return msp_fail(MSP_ERR_USAGE, "msp_metrics_compute: out is NULL");
    if (!msp_dtype_size(ndt) || !msp_dtype_size(bdt))
        return msp_fail(MSP_ERR_UNSUPPORTED, "msp_metrics_compute: unsupported dtype %d or %d",
                        (int)ndt, (int)bdt);
    if (count && (!n || !b))
        return msp_fail(MSP_ERR_USAGE, "msp_metrics_compute: NULL data for %zu elements", count);
    size_t unit = cmp_unit_elems(ndt, bdt, CMP_DEFAULT_CHUNK);
    size_t n_units = (count + unit - 1) / unit;
    cmp_acc_t total;
    cmp_acc_init(&total);
    if (n_units <= 1) {
        cmp_acc_run(ndt, n, bdt, b, count, rtol, atol, 1, &total);
    } else {
        cmp_acc_t *parts = malloc(n_units * sizeof *parts);
        if (!parts)
            return msp_fail(MSP_ERR_NOMEM, "msp_metrics_compute: out of memory");
        size_t nsz = msp_dtype_size(ndt), bsz = msp_dtype_size(bdt);
#pragma omp parallel for schedule(dynamic, 1)
        for (size_t u = 0; u < n_units; u++) {
            size_t off = u * unit, m = count - off < unit ? count - off : unit;
            cmp_acc_init(&parts[u]);
            cmp_acc_run(ndt, (const unsigned char *)n + off * nsz, bdt,
                        (const unsigned char *)b + off * bsz, m, rtol, atol, 1, &parts[u]);
        }
        for (size_t u = 0; u < n_units; u++)
            cmp_acc_merge(&total, &parts[u]);
        free(parts);
    }
    cmp_acc_finish(&total, count == 1, out);
    return MSP_OK;
}
