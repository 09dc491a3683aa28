/* SHA-256 (FIPS 180-4), with the CPU's SHA extensions where it has them:
 * hashes secret env values and tensor bytes for config_check's packs. Our
 * own code, though libzip already loads libcrypto into every process that
 * holds this file (msprobe, and the Python side of the shim,
 * libmsprobe_py.so; the preload stub holds neither). */
#include "cc_internal.h"

#include "msprobe/cpu.h"

#include <stdlib.h>
#include <string.h>

#ifdef MSP_CPU_X86
#include <immintrin.h>
#define MSP_SHA_X86 1
#endif

static const uint32_t msp_sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define MSP_ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void msp_sha_block(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
               (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = MSP_ROR(w[i - 15], 7) ^ MSP_ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = MSP_ROR(w[i - 2], 17) ^ MSP_ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t s1 = MSP_ROR(e, 6) ^ MSP_ROR(e, 11) ^ MSP_ROR(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = hh + s1 + ch + msp_sha_k[i] + w[i];
        uint32_t s0 = MSP_ROR(a, 2) ^ MSP_ROR(a, 13) ^ MSP_ROR(a, 22);
        uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = s0 + maj;
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
}

#ifdef MSP_SHA_X86
/* The SHA extensions hash 5-10x faster than portable C: weights of a large
 * model are hashed at the first forward, inside the training process. */
__attribute__((target("sha,sse4.1,ssse3"))) static void msp_sha_blocks_ni(uint32_t h[8], const unsigned char *p,
                                                                          size_t nblocks)
{
    const __m128i mask = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i tmp = _mm_loadu_si128((const __m128i *)&h[0]);
    __m128i st1 = _mm_loadu_si128((const __m128i *)&h[4]);
    tmp = _mm_shuffle_epi32(tmp, 0xB1);           /* CDAB */
    st1 = _mm_shuffle_epi32(st1, 0x1B);           /* EFGH */
    __m128i st0 = _mm_alignr_epi8(tmp, st1, 8);   /* ABEF */
    st1 = _mm_blend_epi16(st1, tmp, 0xF0);        /* CDGH */
    while (nblocks--) {
        __m128i abef = st0, cdgh = st1, w[4], msg;
#pragma GCC unroll 16
        for (int g = 0; g < 16; g++) {
            if (g < 4)
                w[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), mask);
            msg = _mm_add_epi32(w[g & 3], _mm_loadu_si128((const __m128i *)&msp_sha_k[4 * g]));
            st1 = _mm_sha256rnds2_epu32(st1, st0, msg);
            if (g >= 3 && g <= 14) {
                tmp = _mm_alignr_epi8(w[g & 3], w[(g + 3) & 3], 4);
                w[(g + 1) & 3] = _mm_add_epi32(w[(g + 1) & 3], tmp);
                w[(g + 1) & 3] = _mm_sha256msg2_epu32(w[(g + 1) & 3], w[g & 3]);
            }
            msg = _mm_shuffle_epi32(msg, 0x0E);
            st0 = _mm_sha256rnds2_epu32(st0, st1, msg);
            if (g >= 1 && g <= 12)
                w[(g + 3) & 3] = _mm_sha256msg1_epu32(w[(g + 3) & 3], w[g & 3]);
        }
        st0 = _mm_add_epi32(st0, abef);
        st1 = _mm_add_epi32(st1, cdgh);
        p += 64;
    }
    tmp = _mm_shuffle_epi32(st0, 0x1B);           /* FEBA */
    st1 = _mm_shuffle_epi32(st1, 0xB1);           /* DCHG */
    st0 = _mm_blend_epi16(tmp, st1, 0xF0);        /* DCBA */
    st1 = _mm_alignr_epi8(st1, tmp, 8);           /* ABEF */
    _mm_storeu_si128((__m128i *)&h[0], st0);
    _mm_storeu_si128((__m128i *)&h[4], st1);
}

#endif

static void msp_sha_blocks(uint32_t h[8], const unsigned char *p, size_t nblocks)
{
#ifdef MSP_SHA_X86
    if (msp_cpu_use(MSP_CPU_SHA_NI)) {
        msp_sha_blocks_ni(h, p, nblocks);
        return;
    }
#endif
    for (; nblocks; nblocks--, p += 64)
        msp_sha_block(h, p);
}

void msp_cc_sha256_init(msp_cc_sha256_t *s)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof iv);
    s->len = 0;
    s->nbuf = 0;
}

void msp_cc_sha256_update(msp_cc_sha256_t *s, const void *data, size_t len)
{
    const unsigned char *p = data;
    s->len += len;
    if (s->nbuf) {
        size_t take = 64 - s->nbuf < len ? 64 - s->nbuf : len;
        memcpy(s->buf + s->nbuf, p, take);
        s->nbuf += take;
        p += take;
        len -= take;
        if (s->nbuf < 64)
            return;
        msp_sha_blocks(s->h, s->buf, 1);
        s->nbuf = 0;
    }
    if (len >= 64) {
        msp_sha_blocks(s->h, p, len / 64);
        p += len & ~(size_t)63;
        len &= 63;
    }
    memcpy(s->buf, p, len);
    s->nbuf = len;
}

void msp_cc_sha256_hex(msp_cc_sha256_t *s, char hex[65])
{
    uint64_t bits = s->len * 8;
    unsigned char pad = 0x80;
    msp_cc_sha256_update(s, &pad, 1);
    unsigned char zero = 0;
    while (s->nbuf != 56)
        msp_cc_sha256_update(s, &zero, 1);
    unsigned char lenb[8];
    for (int i = 0; i < 8; i++)
        lenb[i] = (unsigned char)(bits >> (56 - 8 * i));
    msp_cc_sha256_update(s, lenb, 8);
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++) {
            unsigned v = (s->h[i] >> (24 - 8 * j)) & 0xff;
            hex[8 * i + 2 * j] = digits[v >> 4];
            hex[8 * i + 2 * j + 1] = digits[v & 15];
        }
    hex[64] = '\0';
}
