/* CPU features, detected once, and the kernel paths they allow (msprobe/cpu.h).
 * Every environment switch of a kernel is in the table below. */
#include "msprobe/cpu.h"

#include "msprobe/common.h"

#ifdef MSP_CPU_X86
static int msp_cpu_has(msp_cpu_path_t path)
{
    switch (path) {
    case MSP_CPU_CRC_CLMUL:
        return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    case MSP_CPU_CRC_VCLMUL:
        return msp_cpu_has(MSP_CPU_CRC_CLMUL) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("vpclmulqdq");
    case MSP_CPU_STATS_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case MSP_CPU_CMP_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("popcnt");
    default:
        return 0;
    }
}
#endif

/* The switches that turn each path off (NULL: none). */
static const struct {
    const char *off[2];
} msp_cpu_switches[MSP_CPU_PATH_COUNT_] = {
    [MSP_CPU_CRC_CLMUL] = {{"MSPROBE_FORMAT_PORTABLE", NULL}},
    [MSP_CPU_CRC_VCLMUL] = {{"MSPROBE_FORMAT_PORTABLE", "MSPROBE_FORMAT_NO_AVX512"}},
    [MSP_CPU_STATS_AVX2] = {{"MSPROBE_FORMAT_PORTABLE", NULL}},
    [MSP_CPU_CMP_AVX512] = {{"MSPROBE_COMPARE_NO_AVX512", NULL}},
};

int msp_cpu_use(msp_cpu_path_t path)
{
#ifdef MSP_CPU_X86
    /* 0 not known yet, 1 no, 2 yes; a benign race: every thread computes
     * the same value */
    static int use[MSP_CPU_PATH_COUNT_];
    if ((unsigned)path >= MSP_CPU_PATH_COUNT_)
        return 0;
    if (!use[path]) {
        int ok = msp_cpu_has(path);
        for (int i = 0; i < 2 && ok; i++)
            if (msp_cpu_switches[path].off[i] && msp_env_flag(msp_cpu_switches[path].off[i]))
                ok = 0;
        use[path] = ok ? 2 : 1;
    }
    return use[path] == 2;
#else
    (void)path;
    (void)msp_cpu_switches;
    return 0;
#endif
}
