/* Fuzz target: the .npy reader (fmt_npy.c), which reads the tensor files of
 * msprobe's own dump directories. The input is written to a file of a
 * private directory and loaded; a load either yields a tensor whose shape,
 * element count and data agree and whose bytes all came from the file, or
 * refuses naming the file. Seeds: tests/fuzz/seeds/npy (numpy.save output
 * and hand-made broken headers, by make_seeds.py). libFuzzer:
 *   clang -fsanitize=fuzzer,address,undefined -DMSP_LIBFUZZER ... fuzz_npy tests/fuzz/seeds/npy
 * ctest replays the seeds with any compiler (tests/fuzz). */
#include "fmt_fuzz_tmp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[600];
    msp_fuzz_put(path, sizeof path, "t.npy", data, size);
    msp_raw_tensor_t r;
    msp_err rc = msp_npy_load(path, &r);
    msp_fuzz_check_raw(rc, &r, path);
    if (!rc && (uint64_t)r.numel * msp_dtype_size(r.dtype) > size)
        msp_fuzz_die("more data than the file holds from", path);
    msp_raw_free(&r);
    return 0;
}
