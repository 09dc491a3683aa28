/* Fuzz target: the catalogue message msprobe-catalogue sends back
 * (fmt_contain_get.c). The caller parses it with bounds checks at every field;
 * no input may crash it, leak, or make it allocate more than the message
 * can describe. Seeds: tests/fuzz/seeds/reader_wire (real answers for the
 * committed fixtures, made by make_seeds.py). libFuzzer:
 *   clang -fsanitize=fuzzer,address ... fuzz_reader_wire tests/fuzz/seeds/reader_wire */
#include "fmt_backend.h" /* msp_dump_from_wire */

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    msp_dump_file_t *f = NULL;
    if (msp_dump_from_wire("fuzz.h5", data, size, &f) == MSP_OK) {
        size_t total = 0;
        for (size_t i = 0; i < f->n_records; i++) {
            char **k, **v;
            size_t n;
            if (msp_dump_record_attrs(f, &f->records[i], &k, &v, &n) == MSP_OK) {
                total += n;
                msp_free_strings(k, n);
                msp_free_strings(v, n);
            }
        }
        (void)total;
        msp_dump_close(f);
    }
    return 0;
}
