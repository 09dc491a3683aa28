/* libFuzzer target for the secret detector (cc_secret.c), which reads every
 * environment value and argument of a training run. Input: a name, a NUL,
 * then a value; the value is also split at newlines into an argv. Checked:
 * a redacted value never contains the value it replaced, redacting twice
 * changes nothing, and a redacted argv never holds a value judged secret.
 * Built with clang and -DMSPROBE_FUZZ=ON (see fuzz_cc_pack.c):
 *   build-fuzz/tests/configcheck/fuzz_cc_secret tests/fuzz/seeds/cc_secret
 * ctest replays the committed seeds with any compiler (tests/fuzz). */
#include "cc_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *buf = malloc(size + 2);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = buf[size + 1] = '\0';
    const char *name = buf;
    const char *val = buf + strlen(buf) + (strlen(buf) < size ? 1 : 0);
    char *r = msp_cc_redact_value(name, val);
    if (r) {
        if (strlen(val) >= 4 && strstr(r, val))
            abort();
        char *again = msp_cc_redact_value(name, r);
        if (again)
            abort();
        (void)msp_cc_secret_verdict(r, val);
        free(r);
    }
    (void)msp_cc_secret_verdict(val, name);
    /* The value as an argv, one argument per line. */
    char *copy = strdup(val);
    const char *argv[64];
    size_t n = 0;
    for (char *save = NULL, *t = copy ? strtok_r(copy, "\n", &save) : NULL; t && n < 64; t = strtok_r(NULL, "\n", &save))
        argv[n++] = t;
    cJSON *arr = msp_cc_redact_argv(argv, n);
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        if (cJSON_IsString(e) && msp_cc_value_is_secret(e->valuestring) &&
            msp_cc_secret_kind(e->valuestring) == MSP_CC_SECRET_NONE && !strchr(e->valuestring, '='))
            abort();
    }
    cJSON_Delete(arr);
    free(copy);
    free(buf);
    return 0;
}
