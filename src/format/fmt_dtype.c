/* dtype names and sizes, half/bfloat16 conversions, per-tensor statistics
 * and CRC-32: plain C, no HDF5, safe from any thread. */
#include "msprobe/format.h"

#include "msprobe/cpu.h"

#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

struct msp_dtype_desc {
    const char *name;  /* torch name */
    size_t len;        /* its strlen */
    const char *alias; /* torch's other spelling, without "torch." */
    size_t size;
    int is_float;
};

#define MSP_DT_NAME(n) n, sizeof(n) - 1
static const struct msp_dtype_desc msp_dtypes[MSP_DTYPE_COUNT_] = {
    [MSP_DTYPE_INVALID] = {MSP_DT_NAME("unknown"), NULL, 0, 0},
    [MSP_DTYPE_FLOAT32] = {MSP_DT_NAME("torch.float32"), "float", 4, 1},
    [MSP_DTYPE_FLOAT16] = {MSP_DT_NAME("torch.float16"), "half", 2, 1},
    [MSP_DTYPE_BFLOAT16] = {MSP_DT_NAME("torch.bfloat16"), "bf16", 2, 1},
    [MSP_DTYPE_FLOAT64] = {MSP_DT_NAME("torch.float64"), "double", 8, 1},
    [MSP_DTYPE_INT8] = {MSP_DT_NAME("torch.int8"), NULL, 1, 0},
    [MSP_DTYPE_INT16] = {MSP_DT_NAME("torch.int16"), "short", 2, 0},
    [MSP_DTYPE_INT32] = {MSP_DT_NAME("torch.int32"), "int", 4, 0},
    [MSP_DTYPE_INT64] = {MSP_DT_NAME("torch.int64"), "long", 8, 0},
    [MSP_DTYPE_UINT8] = {MSP_DT_NAME("torch.uint8"), NULL, 1, 0},
    [MSP_DTYPE_BOOL] = {MSP_DT_NAME("torch.bool"), NULL, 1, 0},
};

static int msp_dtype_valid(msp_dtype_t dt)
{
    return (int)dt > MSP_DTYPE_INVALID && dt < MSP_DTYPE_COUNT_;
}

const char *msp_dtype_name(msp_dtype_t dt)
{
    return msp_dtype_valid(dt) ? msp_dtypes[dt].name : "unknown";
}

msp_dtype_t msp_dtype_from_name(const char *name)
{
    if (!name)
        return MSP_DTYPE_INVALID;
    /* the spelling msprobe writes, "torch.<name>" as it is: by its length,
     * then its bytes (the case-blind scan below was 2.5 % of a statistics
     * compare's instructions, issue 42) */
    size_t len = strlen(name);
    for (int i = 1; i < MSP_DTYPE_COUNT_; i++)
        if (msp_dtypes[i].len == len && memcmp(name, msp_dtypes[i].name, len) == 0)
            return (msp_dtype_t)i;
    const char *bare = strncmp(name, "torch.", 6) == 0 ? name + 6 : name;
    for (int i = 1; i < MSP_DTYPE_COUNT_; i++) {
        const struct msp_dtype_desc *d = &msp_dtypes[i];
        if (strcasecmp(bare, d->name + 6) == 0 || (d->alias && strcasecmp(bare, d->alias) == 0))
            return (msp_dtype_t)i;
    }
    return MSP_DTYPE_INVALID;
}

size_t msp_dtype_size(msp_dtype_t dt)
{
    return msp_dtype_valid(dt) ? msp_dtypes[dt].size : 0;
}

int msp_dtype_is_float(msp_dtype_t dt)
{
    return msp_dtype_valid(dt) ? msp_dtypes[dt].is_float : 0;
}

/* ---- small floats ------------------------------------------------------ */

/* Round a double straight to the small format, to nearest, ties to even.
 * Going through float first would round twice and can differ by one ulp. */
static uint32_t msp_double_to_small(double v, int ebits, int mbits)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    uint32_t sign = (uint32_t)(u >> 63) << (ebits + mbits);
    uint32_t emax = (1u << ebits) - 1;
    int bias = (1 << (ebits - 1)) - 1;
    int dexp = (int)((u >> 52) & 0x7ff);
    uint64_t dman = u & ((UINT64_C(1) << 52) - 1);

    if (dexp == 0x7ff) /* inf or NaN (quiet, payload dropped) */
        return sign | (emax << mbits) | (dman ? 1u << (mbits - 1) : 0);
    if (dexp == 0) /* double subnormals are far below any small subnormal */
        return sign;

    uint64_t sig = dman | (UINT64_C(1) << 52); /* 53 significant bits */
    int e = dexp - 1023 + bias;                /* biased target exponent */
    int drop = 52 - mbits + (e < 1 ? 1 - e : 0);
    if (drop > 54)
        return sign; /* below half the smallest subnormal */
    uint64_t q = sig >> drop;
    uint64_t rem = sig & ((UINT64_C(1) << drop) - 1);
    uint64_t half = UINT64_C(1) << (drop - 1);
    if (rem > half || (rem == half && (q & 1)))
        q++;
    uint64_t r;
    if (e < 1)
        r = q; /* subnormal; q == 1<<mbits rounds up into the smallest normal */
    else
        r = ((uint64_t)(e - 1) << mbits) + q; /* q carries the implicit bit */
    if (r >= ((uint64_t)emax << mbits))
        r = (uint64_t)emax << mbits; /* overflow to infinity */
    return sign | (uint32_t)r;
}

uint16_t msp_double_to_bf16(double v)
{
    return (uint16_t)msp_double_to_small(v, 8, 7);
}

uint16_t msp_double_to_half(double v)
{
    return (uint16_t)msp_double_to_small(v, 5, 10);
}

/* Half decoding is on the statistics hot path: one 256 KiB table. */
static float msp_half_table[65536];
static pthread_once_t msp_half_once = PTHREAD_ONCE_INIT;

static void msp_half_table_init(void)
{
    for (uint32_t i = 0; i < 65536; i++)
        msp_half_table[i] = msp_half_to_float((uint16_t)i);
}

static const float *msp_half_lut(void)
{
    pthread_once(&msp_half_once, msp_half_table_init);
    return msp_half_table;
}

void msp_shape_str(const int64_t *shape, int ndim, char *buf, size_t size)
{
    if (!size)
        return;
    /* "[2, 3]" as printf would write it (cut to size), without printf:
     * every compared row formats two */
    char tmp[MSP_SHAPE_STR_MAX];
    size_t k = 0;
    tmp[k++] = '[';
    for (int i = 0; i < ndim && i < MSP_MAX_NDIM; i++) {
        if (i) {
            tmp[k++] = ',';
            tmp[k++] = ' ';
        }
        k += msp_i64_digits(tmp + k, shape[i]);
    }
    tmp[k++] = ']';
    tmp[k] = '\0';
    msp_copy_str(buf, size, tmp);
}

/* ---- statistics ---------------------------------------------------------- */

/* CRC-32 by carry-less multiplication (Intel, "Fast CRC Computation for
 * Generic Polynomials Using PCLMULQDQ Instruction", 2009): fold 64 bytes at a
 * time with four 128-bit accumulators, reduce to 128, then 64 bits, then a
 * Barrett reduction to 32. Constants are the paper's bit-reflected k1..k5
 * and mu/P for the gzip polynomial 0x04C11DB7. About 3x zlib's table code;
 * every result is checked against zlib in the tests. */
#ifdef MSP_CPU_X86
#include <immintrin.h>
#define MSP_HAVE_CLMUL 1 /* x86-64: PCLMUL CRC and AVX2 statistics, chosen at run time */

/* state: the CRC register (pre-inverted, as inside zlib); len >= 64 and a
 * multiple of 16. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t
msp_crc32_clmul(uint32_t state, const unsigned char *p, size_t len)
{
    const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);
    const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124);
    const __m128i poly = _mm_set_epi64x(0x01f7011641, 0x01db710641);
    const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);

    __m128i a = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(p + 32));
    __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(p + 48));
    a = _mm_xor_si128(a, _mm_cvtsi32_si128((int)state));
    p += 64;
    len -= 64;
#define MSP_FOLD(acc, k, next)                                                                     \
    acc = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(acc, k, 0x00),                          \
                                      _mm_clmulepi64_si128(acc, k, 0x11)),                         \
                        next)
    while (len >= 64) {
        MSP_FOLD(a, k1k2, _mm_loadu_si128((const __m128i *)(const void *)p));
        MSP_FOLD(b, k1k2, _mm_loadu_si128((const __m128i *)(const void *)(p + 16)));
        MSP_FOLD(c, k1k2, _mm_loadu_si128((const __m128i *)(const void *)(p + 32)));
        MSP_FOLD(d, k1k2, _mm_loadu_si128((const __m128i *)(const void *)(p + 48)));
        p += 64;
        len -= 64;
    }
    MSP_FOLD(a, k3k4, b);
    MSP_FOLD(a, k3k4, c);
    MSP_FOLD(a, k3k4, d);
    while (len >= 16) {
        MSP_FOLD(a, k3k4, _mm_loadu_si128((const __m128i *)(const void *)p));
        p += 16;
        len -= 16;
    }
#undef MSP_FOLD
    /* 128 -> 64 bits */
    __m128i t = _mm_clmulepi64_si128(a, k3k4, 0x10);
    a = _mm_xor_si128(_mm_srli_si128(a, 8), t);
    /* 64 -> 32 bits */
    t = _mm_srli_si128(a, 4);
    a = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(a, low32), k5, 0x00), t);
    /* Barrett reduction */
    t = _mm_clmulepi64_si128(_mm_and_si128(a, low32), poly, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), poly, 0x00);
    a = _mm_xor_si128(a, t);
    return (uint32_t)_mm_extract_epi32(a, 1);
}

/* The same folding four 512-bit lanes wide (VPCLMULQDQ on AVX-512): four
 * accumulators of 64 bytes fold 256 bytes a round, over 2048 bits, with
 * k = x^(2048+32) and x^(2048-32) mod P, bit-reflected (computed as the
 * 512-bit constants above are). The accumulators then stand for the data
 * they folded (congruent modulo P at the same end), so their 256 bytes go
 * through the 128-bit code above with a zero register. len >= 256; returns
 * the register after the bytes consumed, *used of them (a multiple of 64). */
__attribute__((target("avx512f,avx512bw,vpclmulqdq,pclmul,sse4.1"))) static uint32_t
msp_crc32_vclmul(uint32_t state, const unsigned char *p, size_t len, size_t *used)
{
    const __m512i k = _mm512_broadcast_i32x4(_mm_set_epi64x(0x01322d1430, 0x011542778a));
    __m512i a = _mm512_loadu_si512((const void *)p);
    __m512i b = _mm512_loadu_si512((const void *)(p + 64));
    __m512i c = _mm512_loadu_si512((const void *)(p + 128));
    __m512i d = _mm512_loadu_si512((const void *)(p + 192));
    a = _mm512_xor_si512(a, _mm512_castsi128_si512(_mm_cvtsi32_si128((int)state)));
    size_t done = 256;
#define MSP_VFOLD(acc, next)                                                                       \
    acc = _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(acc, k, 0x00),                        \
                                    _mm512_clmulepi64_epi128(acc, k, 0x11), next, 0x96)
    while (len - done >= 256) {
        const unsigned char *q = p + done;
        MSP_VFOLD(a, _mm512_loadu_si512((const void *)q));
        MSP_VFOLD(b, _mm512_loadu_si512((const void *)(q + 64)));
        MSP_VFOLD(c, _mm512_loadu_si512((const void *)(q + 128)));
        MSP_VFOLD(d, _mm512_loadu_si512((const void *)(q + 192)));
        done += 256;
    }
#undef MSP_VFOLD
    unsigned char folded[256];
    _mm512_storeu_si512((void *)folded, a);
    _mm512_storeu_si512((void *)(folded + 64), b);
    _mm512_storeu_si512((void *)(folded + 128), c);
    _mm512_storeu_si512((void *)(folded + 192), d);
    *used = done;
    return msp_crc32_clmul(0, folded, sizeof folded);
}

#endif

uint32_t msp_crc32(uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
#ifdef MSP_HAVE_CLMUL
    if (len >= 512 && msp_cpu_use(MSP_CPU_CRC_VCLMUL)) {
        size_t used;
        crc = ~msp_crc32_vclmul(~crc, p, len, &used);
        p += used;
        len -= used;
    }
    if (len >= 64 && msp_cpu_use(MSP_CPU_CRC_CLMUL)) {
        size_t chunk = len & ~(size_t)15;
        crc = ~msp_crc32_clmul(~crc, p, chunk);
        p += chunk;
        len -= chunk;
    }
#endif
    return len ? (uint32_t)crc32_z(crc, p, len) : crc;
}

struct msp_acc {
    double max, min, sum, sq;
    int64_t nan, inf;
};

/* Floating types: four independent partial sums so the adds pipeline. The
 * NaN test is x != x written as !(x == x) on the float itself; max/min
 * ignore NaN here and are forced to NaN at the end, as torch returns. */
#define MSP_FLOAT_STATS(fname, T, LOAD)                                                            \
    static void fname(const unsigned char *p, size_t n, struct msp_acc *a, const float *lut)       \
    {                                                                                              \
        (void)lut;                                                                                 \
        double mx = -INFINITY, mn = INFINITY;                                                      \
        double s0 = 0, s1 = 0, q0 = 0, q1 = 0;                                                     \
        int64_t nan = 0, inf = 0;                                                                  \
        size_t i = 0;                                                                              \
        for (; i + 2 <= n; i += 2) {                                                               \
            T r0, r1;                                                                              \
            memcpy(&r0, p + i * sizeof(T), sizeof(T));                                             \
            memcpy(&r1, p + (i + 1) * sizeof(T), sizeof(T));                                       \
            double x0 = LOAD(r0), x1 = LOAD(r1);                                                   \
            nan += (isnan(x0) != 0) + (isnan(x1) != 0);                                            \
            inf += (isinf(x0) != 0) + (isinf(x1) != 0);                                            \
            mx = x0 > mx ? x0 : mx;                                                                \
            mn = x0 < mn ? x0 : mn;                                                                \
            mx = x1 > mx ? x1 : mx;                                                                \
            mn = x1 < mn ? x1 : mn;                                                                \
            s0 += x0;                                                                              \
            s1 += x1;                                                                              \
            q0 += x0 * x0;                                                                         \
            q1 += x1 * x1;                                                                         \
        }                                                                                          \
        for (; i < n; i++) {                                                                       \
            T r0;                                                                                  \
            memcpy(&r0, p + i * sizeof(T), sizeof(T));                                             \
            double x0 = LOAD(r0);                                                                  \
            nan += isnan(x0) != 0;                                                                 \
            inf += isinf(x0) != 0;                                                                 \
            mx = x0 > mx ? x0 : mx;                                                                \
            mn = x0 < mn ? x0 : mn;                                                                \
            s0 += x0;                                                                              \
            q0 += x0 * x0;                                                                         \
        }                                                                                          \
        a->max = mx;                                                                               \
        a->min = mn;                                                                               \
        a->sum = s0 + s1;                                                                          \
        a->sq = q0 + q1;                                                                           \
        a->nan = nan;                                                                              \
        a->inf = inf;                                                                              \
    }

#define MSP_LOAD_F64(r) (r)
MSP_FLOAT_STATS(msp_stats_f64, double, MSP_LOAD_F64)

/* float32 (and bf16/fp16 widened to float32) is the hot path of a dump:
 * 4-lane SSE vectors via GCC vector extensions, sums in float64 lanes.
 * NaN and Inf are recognised on the bit pattern, max/min skip NaN (a NaN
 * compares false) and are forced to NaN at the end as for the scalar path. */
typedef float msp_v4f __attribute__((vector_size(16)));
typedef int32_t msp_v4i __attribute__((vector_size(16)));
typedef double msp_v2d __attribute__((vector_size(16)));

static void msp_acc_merge(struct msp_acc *a, const struct msp_acc *b)
{
    a->max = b->max > a->max ? b->max : a->max;
    a->min = b->min < a->min ? b->min : a->min;
    a->sum += b->sum;
    a->sq += b->sq;
    a->nan += b->nan;
    a->inf += b->inf;
}

/* The elements after the last full vector, shared by the SSE and AVX2 blocks. */
static void msp_acc_tail(const float *p, size_t i, size_t n, struct msp_acc *r)
{
    for (; i < n; i++) {
        double x = p[i];
        r->nan += isnan(x) != 0;
        r->inf += isinf(x) != 0;
        r->max = x > r->max ? x : r->max;
        r->min = x < r->min ? x : r->min;
        r->sum += x;
        r->sq += x * x;
    }
}

/* n <= 2^30 so the int32 lane counters cannot overflow. */
static void msp_f32_block_sse(const float *p, size_t n, struct msp_acc *a)
{
    const msp_v4i absmask = {0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff};
    const msp_v4i infbits = {0x7f800000, 0x7f800000, 0x7f800000, 0x7f800000};
    msp_v4f mx = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    msp_v4f mn = {INFINITY, INFINITY, INFINITY, INFINITY};
    msp_v2d s0 = {0, 0}, s1 = {0, 0}, q0 = {0, 0}, q1 = {0, 0};
    msp_v4i nanc = {0, 0, 0, 0}, infc = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        msp_v4f x;
        memcpy(&x, p + i, sizeof x);
        msp_v4i xi = (msp_v4i)x, ax = xi & absmask;
        nanc -= ax > infbits;
        infc -= ax == infbits;
        msp_v4i gt = x > mx, lt = x < mn;
        mx = (msp_v4f)((gt & xi) | (~gt & (msp_v4i)mx));
        mn = (msp_v4f)((lt & xi) | (~lt & (msp_v4i)mn));
        msp_v2d lo = __builtin_convertvector(__builtin_shufflevector(x, x, 0, 1), msp_v2d);
        msp_v2d hi = __builtin_convertvector(__builtin_shufflevector(x, x, 2, 3), msp_v2d);
        s0 += lo;
        s1 += hi;
        q0 += lo * lo;
        q1 += hi * hi;
    }
    struct msp_acc r = {-INFINITY, INFINITY, 0, 0, 0, 0};
    for (int k = 0; k < 4; k++) {
        r.max = mx[k] > r.max ? mx[k] : r.max;
        r.min = mn[k] < r.min ? mn[k] : r.min;
        r.nan += nanc[k];
        r.inf += infc[k];
    }
    r.sum = (s0[0] + s0[1]) + (s1[0] + s1[1]);
    r.sq = (q0[0] + q0[1]) + (q1[0] + q1[1]);
    msp_acc_tail(p, i, n, &r);
    msp_acc_merge(a, &r);
}

#ifdef MSP_HAVE_CLMUL
/* The same with 8 lanes (AVX2 + FMA), about twice the speed where the CPU
 * has it. maxps/minps return their second operand when the first is NaN,
 * which is exactly "skip NaN". */
__attribute__((target("avx2,fma"))) static void msp_f32_block_avx2(const float *p, size_t n,
                                                                   struct msp_acc *a)
{
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
    const __m256i infbits = _mm256_set1_epi32(0x7f800000);
    __m256 mx = _mm256_set1_ps(-INFINITY), mn = _mm256_set1_ps(INFINITY);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    __m256d q0 = _mm256_setzero_pd(), q1 = _mm256_setzero_pd();
    __m256i nanc = _mm256_setzero_si256(), infc = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(p + i);
        __m256i ax = _mm256_and_si256(_mm256_castps_si256(x), absmask);
        nanc = _mm256_sub_epi32(nanc, _mm256_cmpgt_epi32(ax, infbits));
        infc = _mm256_sub_epi32(infc, _mm256_cmpeq_epi32(ax, infbits));
        mx = _mm256_max_ps(x, mx);
        mn = _mm256_min_ps(x, mn);
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
        __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
        s0 = _mm256_add_pd(s0, lo);
        s1 = _mm256_add_pd(s1, hi);
        q0 = _mm256_fmadd_pd(lo, lo, q0);
        q1 = _mm256_fmadd_pd(hi, hi, q1);
    }
    float fmx[8], fmn[8];
    double ds[4], dq[4];
    int32_t cn[8], ci[8];
    _mm256_storeu_ps(fmx, mx);
    _mm256_storeu_ps(fmn, mn);
    _mm256_storeu_pd(ds, _mm256_add_pd(s0, s1));
    _mm256_storeu_pd(dq, _mm256_add_pd(q0, q1));
    _mm256_storeu_si256((__m256i *)(void *)cn, nanc);
    _mm256_storeu_si256((__m256i *)(void *)ci, infc);
    struct msp_acc r = {-INFINITY, INFINITY, 0, 0, 0, 0};
    for (int k = 0; k < 8; k++) {
        r.max = fmx[k] > r.max ? fmx[k] : r.max;
        r.min = fmn[k] < r.min ? fmn[k] : r.min;
        r.nan += cn[k];
        r.inf += ci[k];
    }
    r.sum = (ds[0] + ds[1]) + (ds[2] + ds[3]);
    r.sq = (dq[0] + dq[1]) + (dq[2] + dq[3]);
    msp_acc_tail(p, i, n, &r);
    msp_acc_merge(a, &r);
}

#endif

static void msp_f32_block(const float *p, size_t n, struct msp_acc *a)
{
#ifdef MSP_HAVE_CLMUL
    if (msp_cpu_use(MSP_CPU_STATS_AVX2)) {
        msp_f32_block_avx2(p, n, a);
        return;
    }
#endif
    msp_f32_block_sse(p, n, a);
}

static void msp_acc_init(struct msp_acc *a)
{
    a->max = -INFINITY;
    a->min = INFINITY;
    a->sum = a->sq = 0;
    a->nan = a->inf = 0;
}

static void msp_stats_f32(const unsigned char *p, size_t n, struct msp_acc *a, const float *lut)
{
    (void)lut;
    msp_acc_init(a);
    float buf[1024];
    int aligned = ((uintptr_t)p % sizeof(float)) == 0;
    for (size_t i = 0; i < n;) {
        size_t k = aligned ? n - i : sizeof buf / sizeof buf[0];
        if (k > n - i)
            k = n - i;
        if (k > ((size_t)1 << 30))
            k = (size_t)1 << 30;
        if (aligned) {
            msp_f32_block((const float *)(const void *)(p + i * 4), k, a);
        } else {
            memcpy(buf, p + i * 4, k * 4);
            msp_f32_block(buf, k, a);
        }
        i += k;
    }
}

/* Widen 16-bit floats to float32 in cache-sized pieces, then reuse the
 * float32 kernel: both conversions are exact. */
static void msp_stats_half16(const unsigned char *p, size_t n, struct msp_acc *a, const float *lut)
{
    msp_acc_init(a);
    float buf[1024];
    for (size_t i = 0; i < n;) {
        size_t k = n - i < 1024 ? n - i : 1024;
        for (size_t j = 0; j < k; j++) {
            uint16_t h;
            memcpy(&h, p + (i + j) * 2, 2);
            buf[j] = lut ? lut[h] : msp_bf16_to_float(h);
        }
        msp_f32_block(buf, k, a);
        i += k;
    }
}

#define MSP_INT_STATS(fname, T, LOAD)                                                              \
    static void fname(const unsigned char *p, size_t n, struct msp_acc *a, const float *lut)       \
    {                                                                                              \
        (void)lut;                                                                                 \
        int64_t mx = INT64_MIN, mn = INT64_MAX;                                                    \
        double s = 0, q = 0;                                                                       \
        for (size_t i = 0; i < n; i++) {                                                           \
            T r;                                                                                   \
            memcpy(&r, p + i * sizeof(T), sizeof(T));                                              \
            int64_t x = LOAD(r);                                                                   \
            mx = x > mx ? x : mx;                                                                  \
            mn = x < mn ? x : mn;                                                                  \
            double d = (double)x;                                                                  \
            s += d;                                                                                \
            q += d * d;                                                                            \
        }                                                                                          \
        a->max = (double)mx;                                                                       \
        a->min = (double)mn;                                                                       \
        a->sum = s;                                                                                \
        a->sq = q;                                                                                 \
        a->nan = a->inf = 0;                                                                       \
    }

#define MSP_LOAD_INT(r) ((int64_t)(r))
#define MSP_LOAD_BOOL(r) ((int64_t)((r) != 0))
MSP_INT_STATS(msp_stats_i8, int8_t, MSP_LOAD_INT)
MSP_INT_STATS(msp_stats_i16, int16_t, MSP_LOAD_INT)
MSP_INT_STATS(msp_stats_i32, int32_t, MSP_LOAD_INT)
MSP_INT_STATS(msp_stats_i64, int64_t, MSP_LOAD_INT)
MSP_INT_STATS(msp_stats_u8, uint8_t, MSP_LOAD_INT)
MSP_INT_STATS(msp_stats_bool, uint8_t, MSP_LOAD_BOOL)

/* Statistics and CRC run block by block over the same bytes, so each block
 * is read from memory once and then hit in cache by the second pass. */
#define MSP_STATS_BLOCK (128 * 1024)

void msp_stats_compute(msp_dtype_t dt, const void *data, size_t n, msp_stats_t *out)
{
    static void (*const fns[MSP_DTYPE_COUNT_])(const unsigned char *, size_t, struct msp_acc *,
                                               const float *) = {
        [MSP_DTYPE_FLOAT32] = msp_stats_f32,    [MSP_DTYPE_FLOAT64] = msp_stats_f64,
        [MSP_DTYPE_FLOAT16] = msp_stats_half16, [MSP_DTYPE_BFLOAT16] = msp_stats_half16,
        [MSP_DTYPE_INT8] = msp_stats_i8,        [MSP_DTYPE_INT16] = msp_stats_i16,
        [MSP_DTYPE_INT32] = msp_stats_i32,      [MSP_DTYPE_INT64] = msp_stats_i64,
        [MSP_DTYPE_UINT8] = msp_stats_u8,       [MSP_DTYPE_BOOL] = msp_stats_bool,
    };
    memset(out, 0, sizeof *out);
    if (!msp_dtype_valid(dt) || n == 0 || !data) {
        out->max = out->min = out->mean = NAN;
        out->norm = msp_dtype_valid(dt) && n == 0 ? 0.0 : NAN;
        return;
    }
    const unsigned char *p = data;
    size_t esize = msp_dtype_size(dt), per_block = MSP_STATS_BLOCK / esize;
    const float *lut = dt == MSP_DTYPE_FLOAT16 ? msp_half_lut() : NULL;
    struct msp_acc tot;
    msp_acc_init(&tot);
    uint32_t crc = 0;
    for (size_t i = 0; i < n; i += per_block) {
        size_t k = n - i < per_block ? n - i : per_block;
        struct msp_acc a;
        fns[dt](p + i * esize, k, &a, lut);
        msp_acc_merge(&tot, &a);
        crc = msp_crc32(crc, p + i * esize, k * esize);
    }
    if (tot.nan > 0) {
        out->max = out->min = out->mean = out->norm = NAN;
    } else {
        out->max = tot.max;
        out->min = tot.min;
        out->mean = tot.sum / (double)n;
        out->norm = sqrt(tot.sq);
    }
    out->nan_count = tot.nan;
    out->inf_count = tot.inf;
    out->crc32 = crc;
}
