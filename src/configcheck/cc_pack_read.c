/* Reading packs that may come from anywhere: every member is checked before
 * any is parsed, read into memory with a cap, and nothing touches the disk. */
#include "cc_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

const char *const msp_cc_item_names[MSP_CC_N_ITEMS] = {"env",     "pip",    "dataset",
                                                       "weights", "random", "hyperparameters"};
const char *const msp_cc_item_members[MSP_CC_N_ITEMS] = {
    "env.json", "pip.json", "dataset.json", "weights.json", "random.json", "hyperparameters.json"};

#define MSP_CC_MAX_ENTRIES 256
/* Our members are JSON; real ones compress 5-30x. Far beyond that is a bomb. */
#define MSP_CC_MAX_RATIO 200
#define MSP_CC_RATIO_FLOOR ((zip_uint64_t)1 << 20)

static int msp_cc_name_is_hostile(const char *name)
{
    if (!*name || name[0] == '/' || name[0] == '\\' || strchr(name, '\\'))
        return 1;
    if (((name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z')) &&
        name[1] == ':')
        return 1;
    for (const char *p = name; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return 1;
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

static msp_err msp_cc_read_member(zip_t *za, zip_uint64_t idx, const char *pack, const char *name,
                                  zip_uint64_t size, size_t max_member, char **out, size_t *outlen)
{
    *out = NULL;
    msp_err rc = MSP_OK;
    zip_file_t *zf = zip_fopen_index(za, idx, 0);
    if (!zf)
        return msp_fail(MSP_ERR_ZIP, "pack %s: member %s: cannot open: %s", pack, name,
                        zip_strerror(za));
    /* The declared size is only a hint: read at most max_member + 1 bytes. */
    msp_buf_t b = {.max = max_member + 1,
                   .first = (size_t)(size < max_member ? size : max_member) + 2};
    for (;;) {
        size_t room;
        char *at = msp_buf_room(&b, b.first, &room);
        if (!at) {
            rc = b.too_big
                     ? msp_fail(MSP_ERR_LIMIT,
                                "pack %s: member %s: larger than the "
                                "%zu-byte limit",
                                pack, name, max_member)
                     : msp_fail(MSP_ERR_NOMEM, "pack %s: member %s: out of memory", pack, name);
            goto cleanup;
        }
        zip_int64_t got = zip_fread(zf, at, room);
        if (got < 0) {
            rc = msp_fail(MSP_ERR_ZIP, "pack %s: member %s: cannot read: %s", pack, name,
                          zip_file_strerror(zf));
            goto cleanup;
        }
        if (got == 0)
            break;
        msp_buf_grew(&b, (size_t)got);
    }
    *out = b.data;
    *outlen = b.len;
    b.data = NULL;
cleanup:
    msp_buf_free(&b);
    zip_fclose(zf);
    return rc;
}

/* An upper bound on the JSON values in text (one per ',', '[' and '{' outside
 * strings, plus one), found before parsing: cJSON spends about 100 bytes on a
 * value, so "[0,0,0,...]" would cost 50 times its size. */
static size_t msp_cc_count_values(const char *text, size_t len)
{
    size_t n = 1;
    int in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == ',' || c == '[' || c == '{') {
            n++;
        }
    }
    return n;
}

static msp_err msp_cc_parse_member(const char *pack, const char *name, const char *text, size_t len,
                                   cJSON **out)
{
    *out = cJSON_ParseWithLength(text, len);
    if (!*out) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= text && at <= text + len ? (size_t)(at - text) : 0;
        return msp_fail(MSP_ERR_FORMAT, "pack %s: member %s: malformed JSON near byte %zu", pack,
                        name, off);
    }
    if (!cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        return msp_fail(MSP_ERR_FORMAT, "pack %s: member %s: expected a JSON object", pack, name);
    }
    return MSP_OK;
}

/* Python msprobe's config_check writes its items as members named after
 * them, without extension (env, pip) or as directories (dataset/...), and no
 * manifest.json: every member is one of those. */
static int msp_cc_is_python_msprobe_pack(zip_t *za, zip_int64_t n)
{
    static const char *const items[] = {"env",     "pip",     "random",
                                        "dataset", "weights", "hyperparameters"};
    int seen = 0;
    for (zip_int64_t i = 0; i < n; i++) {
        const char *name = zip_get_name(za, (zip_uint64_t)i, 0);
        if (!name)
            return 0;
        size_t k = 0, len = strcspn(name, "/");
        while (k < sizeof items / sizeof items[0] &&
               !(strlen(items[k]) == len && strncmp(name, items[k], len) == 0))
            k++;
        if (k == sizeof items / sizeof items[0])
            return 0;
        seen = 1;
    }
    return seen;
}

static msp_err msp_cc_check_manifest(const char *pack, const cJSON *m)
{
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(m, "format");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(m, "format_version");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, MSP_CC_FORMAT) != 0)
        return msp_fail(MSP_ERR_FORMAT,
                        "pack %s: member manifest.json: \"format\" is not \"%s\"; not a "
                        "config_check pack",
                        pack, MSP_CC_FORMAT);
    if (!cJSON_IsNumber(ver))
        return msp_fail(MSP_ERR_FORMAT,
                        "pack %s: member manifest.json: \"format_version\" missing or not a number",
                        pack);
    if (ver->valuedouble > MSP_CC_FORMAT_VERSION)
        return msp_fail(MSP_ERR_UNSUPPORTED,
                        "pack %s: member manifest.json: format_version %g is newer than this "
                        "msprobe reads (%d); "
                        "compare with the msprobe version that wrote the pack",
                        pack, ver->valuedouble, MSP_CC_FORMAT_VERSION);
    if (ver->valuedouble < MSP_CC_FORMAT_VERSION)
        return msp_fail(MSP_ERR_UNSUPPORTED,
                        "pack %s: member manifest.json: format_version %g is not one msprobe wrote "
                        "(it reads %d)",
                        pack, ver->valuedouble, MSP_CC_FORMAT_VERSION);
    return MSP_OK;
}

/* Judges and reads an opened archive; takes ownership of za. */
static msp_err msp_cc_pack_read_za(zip_t *za, const char *path, size_t max_member,
                                   msp_cc_pack_t *out)
{
    msp_err rc = MSP_OK;
    char *text = NULL;
    if (max_member == 0)
        max_member = MSP_CC_DEFAULT_MAX_MEMBER;
    /* The whole pack is held by the same caps as one member: bytes read, and
     * JSON values parsed, so memory is bounded by the cap, not by the input. */
    size_t left_bytes = max_member, left_values = max_member / MSP_CC_BYTES_PER_VALUE;
    if (!(out->path = strdup(path))) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    zip_int64_t n = zip_get_num_entries(za, 0);
    if (n < 0 || n > MSP_CC_MAX_ENTRIES) {
        rc = msp_fail(MSP_ERR_LIMIT, "pack %s: %lld members; a pack has at most %d", path,
                      (long long)n, MSP_CC_MAX_ENTRIES);
        goto cleanup;
    }
    zip_int64_t found[MSP_CC_N_ITEMS + 1];
    for (int i = 0; i <= MSP_CC_N_ITEMS; i++)
        found[i] = -1;
    /* Pass 1: judge every member before reading any. */
    for (zip_int64_t i = 0; i < n; i++) {
        zip_stat_t st;
        zip_stat_init(&st);
        if (zip_stat_index(za, (zip_uint64_t)i, 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME)) {
            rc = msp_fail(MSP_ERR_ZIP, "pack %s: member #%lld: cannot stat: %s", path, (long long)i,
                          zip_strerror(za));
            goto cleanup;
        }
        const char *name = st.name;
        if (msp_cc_name_is_hostile(name)) {
            rc =
                msp_fail(MSP_ERR_ZIP,
                         "pack %s: member %s: absolute path or '..' in the name; refusing the pack",
                         path, name);
            goto cleanup;
        }
        zip_uint8_t opsys = 0;
        zip_uint32_t attr = 0;
        if (zip_file_get_external_attributes(za, (zip_uint64_t)i, 0, &opsys, &attr) == 0 &&
            opsys == ZIP_OPSYS_UNIX && ((attr >> 16) & S_IFMT) == S_IFLNK) {
            rc = msp_fail(MSP_ERR_ZIP, "pack %s: member %s: is a symbolic link; refusing the pack",
                          path, name);
            goto cleanup;
        }
        if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE) {
            rc = msp_fail(MSP_ERR_ZIP, "pack %s: member %s: is encrypted; refusing the pack", path,
                          name);
            goto cleanup;
        }
        if ((st.valid & ZIP_STAT_SIZE) && st.size > max_member) {
            rc = msp_fail(MSP_ERR_LIMIT,
                          "pack %s: member %s: %llu bytes uncompressed, over the %zu-byte limit",
                          path, name, (unsigned long long)st.size, max_member);
            goto cleanup;
        }
        if ((st.valid & ZIP_STAT_SIZE) && (st.valid & ZIP_STAT_COMP_SIZE) &&
            st.size > MSP_CC_RATIO_FLOOR &&
            (st.comp_size == 0 || st.size / st.comp_size > MSP_CC_MAX_RATIO)) {
            rc = msp_fail(MSP_ERR_LIMIT,
                          "pack %s: member %s: compression ratio over %d:1 (%llu bytes from %llu); "
                          "refusing a "
                          "likely zip bomb",
                          path, name, MSP_CC_MAX_RATIO, (unsigned long long)st.size,
                          (unsigned long long)st.comp_size);
            goto cleanup;
        }
        int slot = -1;
        if (strcmp(name, "manifest.json") == 0)
            slot = MSP_CC_N_ITEMS;
        for (int k = 0; k < MSP_CC_N_ITEMS && slot < 0; k++)
            if (strcmp(name, msp_cc_item_members[k]) == 0)
                slot = k;
        if (slot >= 0) {
            if (found[slot] >= 0) {
                rc = msp_fail(MSP_ERR_ZIP, "pack %s: member %s: appears twice; refusing the pack",
                              path, name);
                goto cleanup;
            }
            found[slot] = i;
        }
    }
    if (found[MSP_CC_N_ITEMS] < 0 && msp_cc_is_python_msprobe_pack(za, n)) {
        rc = msp_fail(MSP_ERR_FORMAT,
                      "pack %s: a pack of Huawei's Python msprobe config_check (members env, pip, "
                      "...; no manifest.json), not one of msprobe-c's: compare two such packs with "
                      "Python msprobe's own config_check -c, or make both packs here (msprobe "
                      "config_check -d, or msprobe.json's config_check section)",
                      path);
        goto cleanup;
    }
    if (found[MSP_CC_N_ITEMS] < 0) {
        rc = msp_fail(MSP_ERR_FORMAT,
                      "pack %s: member manifest.json: missing; not a config_check pack", path);
        goto cleanup;
    }
    /* Pass 2: manifest first (an unknown version stops here), then the items. */
    for (int k = MSP_CC_N_ITEMS; k >= 0; k--) {
        if (found[k] < 0)
            continue;
        const char *name = k == MSP_CC_N_ITEMS ? "manifest.json" : msp_cc_item_members[k];
        zip_stat_t st;
        zip_stat_init(&st);
        zip_stat_index(za, (zip_uint64_t)found[k], 0, &st);
        size_t len = 0;
        if ((rc = msp_cc_read_member(za, (zip_uint64_t)found[k], path, name, st.size, left_bytes,
                                     &text, &len)) != MSP_OK) {
            if (rc == MSP_ERR_LIMIT && left_bytes < max_member)
                rc = msp_fail(MSP_ERR_LIMIT,
                              "pack %s: member %s: the members together exceed the %zu-byte limit",
                              path, name, max_member);
            goto cleanup;
        }
        left_bytes -= len;
        size_t values = msp_cc_count_values(text, len);
        if (values > left_values) {
            rc = msp_fail(MSP_ERR_LIMIT,
                          "pack %s: member %s: over %zu JSON values in the pack (one per %d bytes "
                          "of the %zu-byte "
                          "limit); refusing it (--max-member-mib raises both)",
                          path, name, max_member / MSP_CC_BYTES_PER_VALUE, MSP_CC_BYTES_PER_VALUE,
                          max_member);
            goto cleanup;
        }
        left_values -= values;
        cJSON *doc = NULL;
        rc = msp_cc_parse_member(path, name, text, len, &doc);
        free(text);
        text = NULL;
        if (rc != MSP_OK)
            goto cleanup;
        if (k == MSP_CC_N_ITEMS) {
            out->manifest = doc;
            if ((rc = msp_cc_check_manifest(path, doc)) != MSP_OK)
                goto cleanup;
        } else {
            out->items[k] = doc;
        }
    }
cleanup:
    free(text);
    if (za)
        zip_discard(za);
    if (rc != MSP_OK)
        msp_cc_pack_free(out);
    return rc;
}

static msp_err msp_cc_open_error(const char *path, int zerr)
{
    zip_error_t ze;
    zip_error_init_with_code(&ze, zerr);
    msp_err rc;
    if (zerr == ZIP_ER_EXISTS)
        rc = msp_fail(MSP_ERR_ZIP, "pack %s: two members have the same name; refusing the pack",
                      path);
    else
        rc = msp_fail(zerr == ZIP_ER_NOENT ? MSP_ERR_NOT_FOUND : MSP_ERR_ZIP,
                      "pack %s: cannot open: %s", path, zip_error_strerror(&ze));
    zip_error_fini(&ze);
    return rc;
}

msp_err msp_cc_pack_read(const char *path, size_t max_member, msp_cc_pack_t *out)
{
    memset(out, 0, sizeof *out);
    int zerr = 0, fd = -1;
    msp_err rc = msp_open_regular(path, &fd); /* a FIFO or device is no pack */
    if (rc) {
        char why[600];
        snprintf(why, sizeof why, "%s", msp_last_error());
        return msp_fail(rc, "pack: %s", why);
    }
    zip_t *za = zip_fdopen(fd, ZIP_RDONLY | ZIP_CHECKCONS, &zerr); /* owns fd once open */
    if (!za) {
        close(fd);
        return msp_cc_open_error(path, zerr);
    }
    return msp_cc_pack_read_za(za, path, max_member, out);
}

msp_err msp_cc_pack_read_mem(const void *data, size_t len, const char *label, size_t max_member,
                             msp_cc_pack_t *out)
{
    memset(out, 0, sizeof *out);
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *src = zip_source_buffer_create(data, len, 0, &ze);
    zip_t *za = src ? zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze) : NULL;
    if (!za) {
        int code = zip_error_code_zip(&ze);
        zip_error_fini(&ze);
        zip_source_free(src);
        return msp_cc_open_error(label, code);
    }
    zip_error_fini(&ze);
    return msp_cc_pack_read_za(za, label, max_member, out);
}

void msp_cc_pack_free(msp_cc_pack_t *p)
{
    if (!p)
        return;
    free(p->path);
    cJSON_Delete(p->manifest);
    for (int i = 0; i < MSP_CC_N_ITEMS; i++)
        cJSON_Delete(p->items[i]);
    memset(p, 0, sizeof *p);
}
