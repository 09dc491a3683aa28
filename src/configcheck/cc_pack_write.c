/* Building and writing packs: env with secrets hashed, the manifest, the
 * atomic zip write, and the static pack (-d). No Python is linked here. */
#include "cc_internal.h"
#include "msprobe/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zip.h>

extern char **environ;

static int msp_cc_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

cJSON *msp_cc_env_json(char *const *envp)
{
    int custom = msp_cc_salt_in_use(); /* a weak salt is refused: as none */
    char *salt_id = msp_cc_salt_id();
    size_t n = 0;
    while (envp && envp[n])
        n++;
    /* Sorted so two packs of the same environment are byte-identical. */
    char **sorted = malloc((n + 1) * sizeof *sorted);
    cJSON *root = cJSON_CreateObject();
    cJSON *hashed = cJSON_CreateArray();
    cJSON *vars = cJSON_CreateObject();
    if (!sorted || !root || !hashed || !vars || !salt_id)
        goto fail;
    memcpy(sorted, envp, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, msp_cc_cmp_str);
    cJSON_AddItemToObject(root, "salt",
                          cJSON_CreateString(custom ? "MSPROBE_SECRET_SALT" : "none"));
    cJSON_AddItemToObject(root, "salt_id", cJSON_CreateString(salt_id));
    cJSON_AddItemToObject(root, "hashed_keys", hashed);
    cJSON_AddItemToObject(root, "vars", vars);
    hashed = vars = NULL;
    cJSON *hk = cJSON_GetObjectItemCaseSensitive(root, "hashed_keys");
    cJSON *vv = cJSON_GetObjectItemCaseSensitive(root, "vars");
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(sorted[i], '=');
        if (!eq || eq == sorted[i])
            continue;
        size_t klen = (size_t)(eq - sorted[i]);
        char *key = strndup(sorted[i], klen);
        if (!key)
            goto fail;
        const char *val = eq + 1;
        if (strcmp(key, "MSPROBE_SECRET_SALT") == 0 || cJSON_GetObjectItemCaseSensitive(vv, key)) {
            free(key);
            continue;
        }
        cJSON *item;
        int secret = 0;
        /* whole (by key, or when secrets are all of it) or the secrets inside
         * replaced by tags, the rest kept (msp_cc_redact_value) */
        char *stored = msp_cc_redact_checked(key, val, &secret);
        if (secret) {
            if (!stored) {
                free(key);
                goto fail;
            }
            item = cJSON_CreateString(stored);
            cJSON_AddItemToArray(hk, cJSON_CreateString(key));
            free(stored);
        } else {
            item = cJSON_CreateString(val);
        }
        if (!item) {
            free(key);
            goto fail;
        }
        cJSON_AddItemToObject(vv, key, item);
        free(key);
    }
    free(sorted);
    free(salt_id);
    return root;
fail:
    free(sorted);
    free(salt_id);
    cJSON_Delete(root);
    cJSON_Delete(hashed);
    cJSON_Delete(vars);
    return NULL;
}

cJSON *msp_cc_manifest_json(const char *kind, int64_t rank, int64_t world_size,
                            const char *const *items, size_t n_items)
{
    cJSON *m = cJSON_CreateObject();
    if (!m)
        return NULL;
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0)
        strcpy(host, "unknown");
    char when[32] = "";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    cJSON_AddStringToObject(m, "format", MSP_CC_FORMAT);
    cJSON_AddNumberToObject(m, "format_version", MSP_CC_FORMAT_VERSION);
    cJSON_AddStringToObject(m, "tool", "msprobe");
    cJSON_AddStringToObject(m, "tool_version", MSP_VERSION);
    cJSON_AddStringToObject(m, "kind", kind);
    cJSON_AddStringToObject(m, "host", host);
    cJSON_AddStringToObject(m, "time", when);
    cJSON_AddNumberToObject(m, "rank", (double)rank);
    cJSON_AddNumberToObject(m, "world_size", (double)world_size);
    cJSON_AddNumberToObject(m, "pid", (double)getpid());
    cJSON *arr = cJSON_AddArrayToObject(m, "items");
    for (size_t i = 0; arr && i < n_items; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateString(items[i]));
    return m;
}

char *msp_cc_rank_path(const char *zip_path, int64_t rank)
{
    size_t n = strlen(zip_path);
    if (n >= 4 && strcasecmp(zip_path + n - 4, ".zip") == 0)
        return msp_asprintf("%.*s_rank%lld%s", (int)(n - 4), zip_path, (long long)rank,
                            zip_path + n - 4);
    return msp_asprintf("%s_rank%lld", zip_path, (long long)rank);
}

static msp_err msp_cc_make_parent(const char *path)
{
    char *dir = msp_parent_dir(path); /* ".", "/": there already */
    if (!dir)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    msp_err rc = msp_is_dir(dir) ? MSP_OK : msp_mkdirs(dir);
    free(dir);
    return rc;
}

/* The members zipped into tmp (a fresh file). */
static msp_err msp_cc_zip_members(const char *zip_path, const char *tmp,
                                  const msp_cc_member_t *members, size_t n)
{
    msp_err rc = MSP_OK;
    zip_t *za = NULL;
    int zerr = 0;
    za = zip_open(tmp, ZIP_CREATE | ZIP_TRUNCATE, &zerr);
    if (!za) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, zerr);
        rc = msp_fail(MSP_ERR_ZIP, "cannot create %s: %s", tmp, zip_error_strerror(&ze));
        zip_error_fini(&ze);
        goto cleanup;
    }
    for (size_t i = 0; i < n; i++) {
        char *text = cJSON_Print(members[i].json);
        if (!text) {
            rc = msp_fail(MSP_ERR_NOMEM, "%s: out of memory printing %s", zip_path,
                          members[i].name);
            goto cleanup;
        }
        zip_source_t *src = zip_source_buffer(za, text, strlen(text), 1);
        if (!src) {
            free(text);
            rc = msp_fail(MSP_ERR_ZIP, "%s: member %s: %s", zip_path, members[i].name,
                          zip_strerror(za));
            goto cleanup;
        }
        if (zip_file_add(za, members[i].name, src, ZIP_FL_ENC_UTF_8 | ZIP_FL_OVERWRITE) < 0) {
            zip_source_free(src);
            rc = msp_fail(MSP_ERR_ZIP, "%s: member %s: %s", zip_path, members[i].name,
                          zip_strerror(za));
            goto cleanup;
        }
    }
    if (zip_close(za) != 0) {
        rc = msp_fail(MSP_ERR_ZIP, "cannot write %s: %s", tmp, zip_strerror(za));
        goto cleanup;
    }
    za = NULL;
cleanup:
    if (za)
        zip_discard(za);
    if (rc)
        unlink(tmp);
    return rc;
}

msp_err msp_cc_pack_write(const char *zip_path, const msp_cc_member_t *members, size_t n)
{
    msp_err rc = msp_cc_make_parent(zip_path);
    if (rc != MSP_OK)
        return rc;
    char *tmp = msp_atomic_tmp_name(zip_path);
    if (!tmp)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if (!(rc = msp_cc_zip_members(zip_path, tmp, members, n)))
        rc = msp_atomic_commit(tmp, zip_path);
    else
        msp_atomic_discard(tmp);
    free(tmp);
    return rc;
}

/* tmp moved to path unless path exists: 0, 1 when it exists, -1 (errno). */
static int msp_cc_claim(const char *tmp, const char *path)
{
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno == EEXIST)
        return 1;
    if (errno != EINVAL && errno != ENOSYS)
        return -1;
    /* a filesystem without RENAME_NOREPLACE: link() never replaces either */
    if (link(tmp, path) == 0) {
        unlink(tmp);
        return 0;
    }
    return errno == EEXIST ? 1 : -1;
}

msp_err msp_cc_pack_write_new(const char *want, const msp_cc_member_t *members, size_t n,
                              char **chosen)
{
    *chosen = NULL;
    msp_err rc = msp_cc_make_parent(want);
    if (rc != MSP_OK)
        return rc;
    char *tmp = msp_atomic_tmp_name(want);
    if (!tmp)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if ((rc = msp_cc_zip_members(want, tmp, members, n))) {
        msp_atomic_discard(tmp);
        free(tmp);
        return rc;
    }
    const char *dot = strrchr(want, '.'), *slash = strrchr(want, '/');
    size_t stem = dot && (!slash || dot > slash) ? (size_t)(dot - want) : strlen(want);
    for (int k = 0; k < 1000 && !rc; k++) {
        char *path = k ? msp_asprintf("%.*s-%d%s", (int)stem, want, k, want + stem) : strdup(want);
        int c = path ? msp_cc_claim(tmp, path) : -1;
        if (c == 0) {
            *chosen = path;
            break;
        }
        if (c < 0)
            rc = path ? msp_fail(MSP_ERR_IO, "cannot write %s: %s", path, strerror(errno))
                      : msp_fail(MSP_ERR_NOMEM, "out of memory");
        free(path);
    }
    if (!rc && !*chosen)
        rc = msp_fail(MSP_ERR_IO, "cannot write %s: it and %.*s-1 to -999 exist already", want,
                      (int)stem, want);
    msp_atomic_discard(tmp); /* removed on failure; once claimed, gone already */
    free(tmp);
    return rc;
}

/* ---- static pack -------------------------------------------------------- */

static msp_err msp_cc_run_python(const char *python, char **out)
{
    *out = NULL;
    msp_err rc = MSP_OK;
    int fds[2] = {-1, -1};
    unsigned char *buf = NULL;
    size_t len = 0;
    const size_t limit = (size_t)64 << 20;
    if (pipe2(fds, O_CLOEXEC) != 0)
        return msp_fail(MSP_ERR_IO, "pipe: %s", strerror(errno));
    char *script = msp_asprintf("%sprint(result)\n", msp_cc_pip_py);
    char *argv[] = {(char *)python, (char *)"-c", script, NULL};
    msp_child_t c = {
        .argv = argv, .in = MSP_CHILD_INHERIT, .out = fds[1], .err = MSP_CHILD_INHERIT};
    int err = script ? msp_child_start(&c) : ENOMEM;
    free(script);
    close(fds[1]);
    if (err != 0) {
        close(fds[0]);
        return msp_fail(err == ENOENT ? MSP_ERR_NOT_FOUND : MSP_ERR_IO,
                        "cannot run %s: %s (set MSPROBE_PYTHON to a Python interpreter)", python,
                        strerror(err));
    }
    /* no deadline: pip's listing takes what it takes (the user waits for it) */
    int kind = msp_fd_collect(fds[0], -1, limit + 1, INFINITY, &buf, &len);
    if (kind == MSP_CHILD_TOO_BIG)
        rc = msp_fail(MSP_ERR_LIMIT, "%s printed more than %zu bytes listing packages", python,
                      limit);
    else if (kind != MSP_CHILD_ENDED)
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory reading %s output", python);
    close(fds[0]);
    int status = msp_child_end(c.pid, &kind);
    if (rc == MSP_OK && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        rc = msp_fail(MSP_ERR_PYTHON, "%s failed listing installed packages (exit status %d)",
                      python, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    if (rc != MSP_OK) {
        free(buf);
        return rc;
    }
    *out = (char *)buf;
    return MSP_OK;
}

msp_err msp_cc_static_pack(const char *python, const char *zip_path)
{
    msp_err rc = MSP_OK;
    char *text = NULL;
    cJSON *pip = NULL, *env = NULL, *manifest = NULL;
    if (!python || !*python)
        python = "/usr/bin/python3";
    if ((rc = msp_cc_run_python(python, &text)) != MSP_OK)
        goto cleanup;
    pip = cJSON_Parse(text);
    if (!pip || !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(pip, "packages"))) {
        rc = msp_fail(MSP_ERR_FORMAT, "%s: unexpected package list output (not the expected JSON)",
                      python);
        goto cleanup;
    }
    env = msp_cc_env_json(environ);
    static const char *const items[] = {"env", "pip"};
    manifest = msp_cc_manifest_json("static", getenv("RANK") ? atoll(getenv("RANK")) : 0,
                                    getenv("WORLD_SIZE") ? atoll(getenv("WORLD_SIZE")) : 1, items,
                                    2);
    if (!env || !manifest) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory building %s", zip_path);
        goto cleanup;
    }
    msp_cc_member_t members[] = {{"manifest.json", manifest}, {"env.json", env}, {"pip.json", pip}};
    rc = msp_cc_pack_write(zip_path, members, 3);
cleanup:
    free(text);
    cJSON_Delete(pip);
    cJSON_Delete(env);
    cJSON_Delete(manifest);
    return rc;
}
