/* The one walk both layouts of msprobe.json are read by: an object's member
 * names against the table's keys under its path, then each value as its
 * entry's kind says, into the place its entry names. What the keys are is
 * config.c's tables; what one value may be is config_value.c. */
#include "config_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where obj's keys are in the table. */
static const char *msp_cfg_under(const msp_cfg_key_t *obj)
{
    return obj->keys ? obj->keys : obj->path;
}

/* k's name when it is a key of the object whose entries are under `under`
 * (one level down: "dump.api_list" is a key of "dump", "dump.api_list[]" is not). */
static const char *msp_cfg_key_name(const msp_cfg_key_t *k, const char *under)
{
    size_t n = strlen(under);
    const char *name = k->path;
    if (n) {
        if (strncmp(name, under, n) != 0 || name[n] != '.')
            return NULL;
        name += n + 1;
    }
    return *name && !strpbrk(name, ".[") ? name : NULL;
}

/* path.name, or name at the top. */
static void msp_cfg_sub(char *dst, size_t cap, const char *path, const char *name)
{
    if (*path)
        snprintf(dst, cap, "%s.%s", path, name);
    else
        snprintf(dst, cap, "%s", name);
}

/* "unknown key (expected a, b or c)", the keys of obj in the table's order,
 * or obj's own note. */
static msp_err msp_cfg_unknown(const msp_cfg_walk_t *w, const msp_cfg_key_t *obj, const char *path)
{
    if (obj->note)
        return msp_cfg_fail(w, path, "unknown key (%s)", obj->note);
    const char *names[MSP_CFG_MAX_KEYS];
    size_t n = 0;
    for (size_t i = 0; i < w->n_keys; i++)
        if ((names[n] = msp_cfg_key_name(&w->keys[i], msp_cfg_under(obj))) != NULL)
            n++;
    char list[256] = "";
    size_t used = 0;
    for (size_t j = 0; j < n && used < sizeof list; j++) {
        int len = snprintf(list + used, sizeof list - used, "%s%s",
                           j == 0 ? "" : (j + 1 == n ? " or " : ", "), names[j]);
        if (len < 0)
            break;
        used += (size_t)len;
    }
    return msp_cfg_fail(w, path, "unknown key (expected %s)", list);
}

/* A key accepted that changes nothing, for the one notice that names them. */
static msp_err msp_cfg_ignore(const msp_cfg_walk_t *w, const char *path)
{
    msp_config_t *cfg = w->cfg;
    char **nv = realloc(cfg->ignored, (cfg->n_ignored + 1) * sizeof *nv);
    if (!nv)
        return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", w->source);
    cfg->ignored = nv;
    if (!(nv[cfg->n_ignored] = strdup(path)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", w->source);
    cfg->n_ignored++;
    return MSP_OK;
}

static msp_err msp_cfg_value(const msp_cfg_walk_t *w, const msp_cfg_key_t *k, const cJSON *it,
                             const char *path, void *dst);

/* Whether k, present, is left unread and named as ignored. */
static int msp_cfg_passed_over(const msp_cfg_walk_t *w, const msp_cfg_key_t *k)
{
    return k->kind == MSP_CFG_IGNORED || (k->only && !k->only_why && !k->only(w->cfg));
}

/* A present key: its value read, then refused if it does not apply. */
static msp_err msp_cfg_member(const msp_cfg_walk_t *w, const msp_cfg_key_t *k, const cJSON *it,
                              const char *path, void *dst)
{
    if (msp_cfg_passed_over(w, k))
        return msp_cfg_ignore(w, path);
    msp_err rc = msp_cfg_value(w, k, it, path, dst);
    if (rc == MSP_OK && k->only_why && !k->only(w->cfg))
        rc = msp_cfg_fail(w, path, "%s", k->only_why);
    return rc;
}

/* Every member's name is checked first (an unknown or repeated one is an
 * error: cJSON keeps repeats as siblings, and the later one would otherwise
 * be ignored; an IGNORED key is named as met), then the values, in the
 * table's order; keys that do not apply are named last. An AS_MET object
 * reads each member as it meets it instead. */
static msp_err msp_cfg_walk_object(const msp_cfg_walk_t *w, const msp_cfg_key_t *obj,
                                   const cJSON *it, const char *path, void *dst)
{
    const char *under = msp_cfg_under(obj);
    const cJSON *found[MSP_CFG_MAX_KEYS] = {0};
    unsigned char later[MSP_CFG_MAX_KEYS] = {0};
    char sub[MSP_CFG_PATH_MAX];
    msp_err rc = msp_cfg_object(w, it, path);
    if (rc != MSP_OK)
        return rc;
    if (obj->init)
        obj->init(dst);
    for (const cJSON *m = it->child; m && rc == MSP_OK; m = m->next) {
        size_t i = 0;
        for (const char *name; i < w->n_keys; i++)
            if ((name = msp_cfg_key_name(&w->keys[i], under)) && strcmp(name, m->string) == 0)
                break;
        char key[80];
        msp_cfg_quote(key, sizeof key, m->string);
        msp_cfg_sub(sub, sizeof sub, path, key);
        if (i == w->n_keys)
            rc = msp_cfg_unknown(w, obj, sub);
        else if ((obj->flags & MSP_CFG_AS_MET) || w->keys[i].kind == MSP_CFG_IGNORED)
            rc = msp_cfg_member(w, &w->keys[i], m, sub, dst);
        else if (found[i])
            rc = msp_cfg_fail(w, sub, "duplicate key (each key may appear once)");
        else
            found[i] = m;
    }
    for (size_t i = 0; i < w->n_keys && rc == MSP_OK; i++) {
        const msp_cfg_key_t *k = &w->keys[i];
        const char *name = msp_cfg_key_name(k, under);
        if (!name)
            continue;
        msp_cfg_sub(sub, sizeof sub, path, name);
        if (!found[i]) {
            if (k->flags & MSP_CFG_REQUIRED)
                rc = msp_cfg_fail(w, sub, "missing (%s)", k->note);
        } else if (msp_cfg_passed_over(w, k)) {
            later[i] = 1;
        } else {
            rc = msp_cfg_member(w, k, found[i], sub, dst);
        }
    }
    for (size_t i = 0; i < w->n_keys && rc == MSP_OK; i++) {
        if (later[i]) {
            msp_cfg_sub(sub, sizeof sub, path, msp_cfg_key_name(&w->keys[i], under));
            rc = msp_cfg_ignore(w, sub);
        }
    }
    return rc;
}

/* The elements, each as the entry PATH[], into a fresh array. */
static msp_err msp_cfg_walk_list(const msp_cfg_walk_t *w, const msp_cfg_key_t *k, const cJSON *it,
                                 const char *path, void *dst)
{
    if (!cJSON_IsArray(it))
        return msp_cfg_expected(w, path, k->what, it);
    if (k->flags & MSP_CFG_STRINGS) {
        msp_err rc = msp_cfg_strings(w, it, path);
        if (rc != MSP_OK)
            return rc;
    }
    const msp_cfg_key_t *elem = NULL;
    size_t plen = strlen(k->path);
    for (size_t i = 0; i < w->n_keys && !elem; i++)
        if (strncmp(w->keys[i].path, k->path, plen) == 0 &&
            strcmp(w->keys[i].path + plen, "[]") == 0)
            elem = &w->keys[i];
    if (!elem)
        return msp_fail(MSP_ERR_INTERNAL, "%s: %s: no entry for its elements", w->source, path);
    size_t n = (size_t)cJSON_GetArraySize(it), i = 0;
    if (n == 0)
        return MSP_OK;
    char *items = calloc(n, k->elem_size);
    if (!items)
        return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", w->source);
    memcpy((char *)dst + k->off, &items, sizeof items);
    for (const cJSON *e = it->child; e; e = e->next, i++) {
        char sub[MSP_CFG_PATH_MAX];
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        *(size_t *)((char *)dst + k->count) = i + 1; /* so msp_config_free releases a partial
                                                        element */
        msp_err rc = msp_cfg_value(w, elem, e, sub, items + i * k->elem_size);
        if (rc != MSP_OK)
            return rc;
    }
    return MSP_OK;
}

/* One value as its entry says, into dst (what the enclosing object fills). */
static msp_err msp_cfg_value(const msp_cfg_walk_t *w, const msp_cfg_key_t *k, const cJSON *it,
                             const char *path, void *dst)
{
    char *at = (char *)dst + k->off;
    msp_err rc = MSP_OK;
    switch (k->kind) {
    case MSP_CFG_OBJECT:
        return msp_cfg_walk_object(w, k, it, path, dst);
    case MSP_CFG_LIST:
        return msp_cfg_walk_list(w, k, it, path, dst);
    case MSP_CFG_STRING: {
        char **s = (char **)(void *)at;
        rc = msp_cfg_string(w, it, path, k->what, s);
        if (rc == MSP_OK && (k->flags & MSP_CFG_FILE) && (*s)[strlen(*s) - 1] == '/')
            rc = msp_cfg_expected(w, path, "a file path, not a directory (ending in '/')", it);
        return rc;
    }
    case MSP_CFG_BOOL:
        if (!cJSON_IsBool(it))
            return msp_cfg_expected(w, path, "true or false", it);
        *(int *)(void *)at = cJSON_IsTrue(it);
        return MSP_OK;
    case MSP_CFG_INT: {
        int64_t v;
        rc = msp_cfg_int(w, it, path, k->what, k->min, &v);
        if (rc == MSP_OK && (k->flags & MSP_CFG_NONZERO) && v == 0)
            rc = msp_cfg_expected(w, path, k->what, it);
        if (rc == MSP_OK)
            *(int64_t *)(void *)at = v;
        return rc;
    }
    case MSP_CFG_ENUM: {
        int i;
        rc = msp_cfg_enum(w, it, path, k->names, k->n_names, &i);
        if (rc == MSP_OK) {
            int v = k->values ? k->values[i] : i;
            memcpy(at, &v, sizeof v);
        }
        return rc;
    }
    case MSP_CFG_STEPS:
        return msp_cfg_steps(w, it, path, (msp_step_set_t *)(void *)at);
    case MSP_CFG_MS_STEPS:
        return msp_cfg_ms_steps(w, it, path, (msp_step_set_t *)(void *)at);
    case MSP_CFG_IGNORED:
        return msp_cfg_ignore(w, path);
    case MSP_CFG_CUSTOM:
        return k->set(w, k, it, path, dst);
    }
    return msp_fail(MSP_ERR_INTERNAL, "%s: %s: no such kind of key", w->source, path);
}

int msp_cfg_tells(const msp_cfg_key_t *keys, size_t n, const cJSON *root)
{
    for (const cJSON *m = root->child; m; m = m->next)
        for (size_t i = 0; i < n; i++)
            if ((keys[i].flags & MSP_CFG_TELLS) && msp_cfg_key_name(&keys[i], "") &&
                strcmp(keys[i].path, m->string) == 0)
                return 1;
    return 0;
}

msp_err msp_cfg_walk(const msp_cfg_walk_t *w, const cJSON *root, void *dst)
{
    if (w->n_keys == 0 || w->n_keys > MSP_CFG_MAX_KEYS || w->keys[0].path[0])
        return msp_fail(MSP_ERR_INTERNAL,
                        "%s: a table of keys without its root first, or "
                        "longer than %d",
                        w->source, MSP_CFG_MAX_KEYS);
    return msp_cfg_walk_object(w, &w->keys[0], root, "", dst);
}
