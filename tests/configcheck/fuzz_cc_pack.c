/* libFuzzer target for the pack reader and the diff. Input starting with
 * "PK": a whole pack, read and compared with itself. Otherwise: byte 0 picks
 * an item, the rest is two JSON documents split at the first NUL, compared as
 * that item of a bench and a cmp pack (the zip's CRCs would keep mutations
 * away from the diff). Built with clang and -DMSPROBE_FUZZ=ON:
 *   CC=clang cmake -S . -B build-fuzz -DMSPROBE_FUZZ=ON -DMSPROBE_SANITIZE=ON
 *   cmake --build build-fuzz --target fuzz_cc_pack
 *   mkdir -p corpus && cp tests/fuzz/seeds/cc_pack/[a-z]* corpus/
 *   build-fuzz/tests/configcheck/fuzz_cc_pack corpus
 * ctest replays the committed seeds with any compiler (tests/fuzz). */
#include "cc_internal.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void msp_fuzz_diff(const msp_cc_pack_t *a, const msp_cc_pack_t *b)
{
    msp_cc_result_t *r = NULL;
    msp_cc_options_t opt = {.env_keys = "*"};
    if (msp_cc_compare_packs(a, b, &opt, &r) == MSP_OK)
        msp_cc_result_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size >= 2 && data[0] == 'P' && data[1] == 'K') {
        msp_cc_pack_t p;
        if (msp_cc_pack_read_mem(data, size, "fuzz.zip", (size_t)1 << 20, &p) != MSP_OK)
            return 0;
        msp_fuzz_diff(&p, &p);
        msp_cc_pack_free(&p);
        return 0;
    }
    if (size < 1)
        return 0;
    int item = data[0] % MSP_CC_N_ITEMS;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    const char *nul = memchr(text, '\0', len);
    size_t la = nul ? (size_t)(nul - text) : len;
    msp_cc_pack_t a = {.path = (char *)"bench.zip"}, b = {.path = (char *)"cmp.zip"};
    a.items[item] = cJSON_ParseWithLength(text, la);
    b.items[item] = nul ? cJSON_ParseWithLength(nul + 1, len - la - 1)
                        : cJSON_Duplicate(a.items[item], 1);
    /* The reader lets only objects through as items. */
    if (cJSON_IsObject(a.items[item]) && cJSON_IsObject(b.items[item]))
        msp_fuzz_diff(&a, &b);
    cJSON_Delete(a.items[item]);
    cJSON_Delete(b.items[item]);
    return 0;
}
