/* msprobe cpu: the CPU features msprobe's kernels use, detected once, and
 * the one place a kernel is chosen (src/common/cpu.c; after zstd's cpu.h).
 *
 * One binary runs on every x86-64: a fast kernel is compiled for its
 * instructions with a target attribute (MSP_CPU_X86 says the compiler can)
 * and called only when msp_cpu_use(path) says the CPU has them and the
 * environment does not switch the path off. Each path's result is the same
 * bits as the portable code's; the switches let the tests check both on a
 * CPU that has more:
 *
 *   MSPROBE_FORMAT_PORTABLE=1    CRC-32 through zlib and 4-lane SSE statistics
 *                                (no PCLMUL, VPCLMULQDQ or AVX2 in src/format)
 *   MSPROBE_FORMAT_NO_AVX512=1   CRC-32 folded 128 bits wide, not 512 (VPCLMULQDQ)
 *   MSPROBE_COMPARE_NO_AVX512=1  compare's float32/bf16/fp16 kernel compiler-vectorised,
 *                                not written for AVX-512
 *
 * A switch is on when set to anything but "" or "0" (msp_env_flag); it is
 * read once per process, at the first call that needs it. */
#ifndef MSPROBE_CPU_H
#define MSPROBE_CPU_H

#ifdef __cplusplus
extern "C" {
#endif

/* x86-64 with GCC or clang: target attributes, <immintrin.h> and
 * __builtin_cpu_supports are there. */
#if defined(__x86_64__) && defined(__GNUC__)
#define MSP_CPU_X86 1
#endif

/* The kernels chosen at run time, each with the features it needs. */
typedef enum msp_cpu_path {
    MSP_CPU_CRC_CLMUL,  /* CRC-32, 128-bit folding: PCLMUL, SSE4.1 */
    MSP_CPU_CRC_VCLMUL, /* CRC-32, 512-bit folding: the above, AVX-512F/BW, VPCLMULQDQ */
    MSP_CPU_STATS_AVX2, /* float32 statistics, 8 lanes: AVX2, FMA */
    MSP_CPU_CMP_AVX512, /* compare's float32/bf16/fp16 pair kernel: AVX-512F/DQ/VL, POPCNT */
    MSP_CPU_PATH_COUNT_
} msp_cpu_path_t;

/* 1 when path's kernel may run: the CPU has its features and no switch
 * above turns it off; always 0 where MSP_CPU_X86 is not defined. Cheap
 * after the first call (a cached value; any thread may call it). */
int msp_cpu_use(msp_cpu_path_t path);

#ifdef __cplusplus
}
#endif
#endif
