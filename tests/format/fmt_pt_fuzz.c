/* Fuzz target: the torch.save reader (fmt_pt.c: libzip, then a pickle
 * opcode walker that runs nothing). An input starting with "PK" is a whole
 * .pt file; any other input is a data.pkl, zipped here with a 4 KiB storage
 * archive/data/0 (byte flips in a whole file mostly meet the zip's CRC-32
 * check, so this is how mutations reach the walker). Either way the file is
 * written into a private directory and loaded; a load yields a tensor whose
 * shape, element count and data agree (every element is read back), or
 * refuses naming the file. Seeds: tests/fuzz/seeds/pt (torch.save files,
 * their data.pkl alone, hand-made broken zips and pickles; make_seeds.py).
 * libFuzzer:
 *   clang -fsanitize=fuzzer,address,undefined -DMSP_LIBFUZZER ... fuzz_pt tests/fuzz/seeds/pt
 * ctest replays the seeds with any compiler (tests/fuzz). */
#include "fmt_fuzz_tmp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static unsigned char storage[4096];
    char path[600];
    if (size >= 2 && data[0] == 'P' && data[1] == 'K') {
        msp_fuzz_put(path, sizeof path, "t.pt", data, size);
    } else {
        for (size_t i = 0; i < sizeof storage; i++)
            storage[i] = (unsigned char)(i * 37 + 11);
        msp_fuzz_put_pt(path, sizeof path, "p.pt", data, size, storage, sizeof storage);
    }
    msp_raw_tensor_t r;
    msp_err rc = msp_pt_load(path, &r);
    msp_fuzz_check_raw(rc, &r, path);
    msp_raw_free(&r);
    return 0;
}
