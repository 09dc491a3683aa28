/* libFuzzer target for the secret detector (cc_secret.c), which reads every
 * environment value and argument of a training run. Input: a name, a NUL,
 * then a value; the value is also split at newlines into an argv. Checked,
 * without a salt and with one: a redacted value never contains the value it
 * replaced, redacting twice changes nothing (the secrets found are all
 * replaced), a value with its secrets replaced by tags compares with itself
 * as same or not compared (never differs) and is shown without a hash, and
 * a redacted argv never holds a value judged secret.
 * Built with clang and -DMSPROBE_FUZZ=ON (see fuzz_cc_pack.c):
 *   build-fuzz/tests/configcheck/fuzz_cc_secret tests/fuzz/seeds/cc_secret
 * ctest replays the committed seeds with any compiler (tests/fuzz). */
#include "cc_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void msp_fuzz_value(const char *name, const char *val)
{
    char *r = msp_cc_redact_value(name, val);
    if (!r)
        return;
    /* what a report shows of it (tags as <secret>: a tag's own text or a
     * hash's hex may hold any short value; a value with '<' may end as
     * "<secret>" begins) */
    char *seen = msp_cc_secret_shown(r);
    if (seen && strlen(val) >= 4 && !strchr(val, '<') && strstr(seen, val))
        abort();
    free(seen);
    /* nothing secret left under its name (another name may judge it
     * otherwise: a commit kept under GIT_COMMIT is a key elsewhere) */
    char *again = msp_cc_redact_value(name, r);
    if (again)
        abort();
    if (msp_cc_secret_kind(r) == MSP_CC_SECRET_NONE) {
        /* text with tags: equal to itself, no hash shown */
        if (msp_cc_secret_masked(r) == MSP_CC_SECRET_NONE)
            abort();
        const char *sv = msp_cc_secret_verdict(r, r);
        if (!sv || strcmp(sv, "differs") == 0)
            abort();
        char *shown = msp_cc_secret_shown(r); /* every tag as <secret> */
        if (shown && msp_cc_secret_masked(shown) != MSP_CC_SECRET_NONE)
            abort();
        free(shown);
    }
    (void)msp_cc_secret_verdict(r, val);
    free(r);
}

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
    /* each input on its own: no value an earlier argv made secret */
    msp_cc_secret_forget();
    /* tags without a salt ("<secret: not stored>"), then keyed ones */
    unsetenv("MSPROBE_SECRET_SALT");
    msp_fuzz_value(name, val);
    setenv("MSPROBE_SECRET_SALT", "fuzz-Salt-7Qx9#kLm2Vb8", 1);
    msp_fuzz_value(name, val);
    (void)msp_cc_secret_verdict(val, name);
    /* The value as an argv, one argument per line. */
    char *copy = strdup(val);
    const char *argv[64];
    size_t n = 0;
    for (char *save = NULL, *t = copy ? strtok_r(copy, "\n", &save) : NULL; t && n < 64;
         t = strtok_r(NULL, "\n", &save))
        argv[n++] = t;
    cJSON *arr = msp_cc_redact_argv(argv, n);
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        if (cJSON_IsString(e) && msp_cc_value_is_secret(e->valuestring) &&
            msp_cc_secret_kind(e->valuestring) == MSP_CC_SECRET_NONE &&
            !strchr(e->valuestring, '='))
            abort();
    }
    cJSON_Delete(arr);
    free(copy);
    free(buf);
    return 0;
}
