/* Record attributes both sides share, put on a record row: the compare
 * side's call site, the module it ran in, autocast, a Distributed call's
 * group and peer, order_begin, and the arguments and hyperparameters that
 * differ between the sides (arg_diff; msprobe 26's scalar check), each
 * side's arguments completed first with the API's signature from the
 * dumps' /defaults (msprobe-dump(5)). */
#include "cmp_internal.h"
#include "cmp_job.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A record attribute that is a call argument (input.*, kwarg.*) or an
 * optimizer's hyperparameter (group.*, class), the ones a changed value of
 * which changes what the call computes. */
static int cmp_is_arg_key(const char *k)
{
    return !strncmp(k, "input", 5) || !strncmp(k, "kwarg", 5) || !strncmp(k, "group.", 6) ||
           !strcmp(k, "class");
}

/* A repr with a memory address in it (<function f at 0x7f...>) differs from
 * run to run: compare them without the address. */
static int cmp_arg_equal(const char *a, const char *b)
{
    for (;;) {
        const char *pa = strstr(a, " at 0x"), *pb = strstr(b, " at 0x");
        size_t la = pa ? (size_t)(pa - a) : strlen(a), lb = pb ? (size_t)(pb - b) : strlen(b);
        if (la != lb || strncmp(a, b, la) != 0 || !pa != !pb)
            return 0;
        if (!pa)
            return 1;
        a = pa + 6;
        b = pb + 6;
        while (isxdigit((unsigned char)*a))
            a++;
        while (isxdigit((unsigned char)*b))
            b++;
    }
}

static const char *cmp_attr_get(char **k, char **v, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k[i], key))
            return v[i];
    return NULL;
}

/* The "stack" attribute of a record: msprobe's stack.json, or the call site
 * our shim recorded, where "@RECORD" names the record of the same file that
 * carries the text (msprobe-dump(5)); NULL when none. byname: f's records
 * sorted by name (cmp_name_index), for the reference. */
static char *cmp_record_stack(msp_dump_file_t *f, const msp_record_info_t **byname,
                              const char *text)
{
    if (!text || text[0] != '@')
        return text ? strdup(text) : NULL;
    const msp_record_info_t *hit = cmp_name_find(f, byname, text + 1);
    char **k = NULL, **v = NULL, *out = NULL;
    size_t n = 0;
    if (!hit || msp_dump_record_attrs(f, hit, &k, &v, &n) != MSP_OK) {
        msp_clear_error();
        return NULL;
    }
    const char *to = cmp_attr_get(k, v, n, "stack");
    if (to && to[0] != '@') /* the shim never refers to a reference */
        out = strdup(to);
    msp_free_strings(k, n);
    msp_free_strings(v, n);
    return out;
}

/* A Python scalar argument as msprobe 26 checks them: a number, a bool, or
 * a tuple or list of those ("2", "True", "(2, 2)", "[1, 1]"); its values
 * into v (at most max). -1 for anything else (a string, a dtype, None). */
int cmp_scalars(const char *s, double *v, int max)
{
    int n = 0, open = 0;
    while (*s == ' ')
        s++;
    if (*s == '(' || *s == '[') {
        open = *s == '(' ? ')' : ']';
        s++;
    }
    for (;;) {
        while (*s == ' ')
            s++;
        if (open && *s == open && s[1] == '\0')
            return n;
        char *end;
        double x;
        if (!strncasecmp(s, "true", 4) || !strncasecmp(s, "false", 5)) {
            x = (*s == 't' || *s == 'T');
            end = (char *)s + (x > 0.5 ? 4 : 5);
        } else {
            x = strtod(s, &end);
            if (end == s)
                return -1;
        }
        if (n == max)
            return -1;
        v[n++] = x;
        s = end;
        while (*s == ' ')
            s++;
        if (!open)
            return *s ? -1 : n;
        if (*s == ',')
            s++;
        else if (*s != open)
            return -1;
    }
}

/* Whether two spellings of an argument differ as msprobe's check sees them:
 * both scalars (or lists of them) with other values; anything else is not
 * compared (1e-05 and 0.00001, True and true are the same). */
static int cmp_args_differ(const char *a, const char *b)
{
    double x[16], y[16];
    int n = cmp_scalars(a, x, 16), m = cmp_scalars(b, y, 16);
    if (n < 0 || m < 0)
        return 0;
    if (n != m)
        return 1;
    for (int i = 0; i < n; i++)
        if (!(isnan(x[i]) && isnan(y[i])) && (x[i] < y[i] || x[i] > y[i]))
            return 1;
    return 0;
}

/* The running arg_reldiff (see compare.h) with one more differing argument:
 * a and b its texts on the two sides (a NULL when absent on one). */
static double cmp_arg_reldiff(double acc, const char *a, const char *b)
{
    double x, y;
    if (acc < 0.0 || !a || cmp_scalars(a, &x, 1) != 1 || cmp_scalars(b, &y, 1) != 1 ||
        !isfinite(x) || !isfinite(y))
        return -1.0;
    double m = fmax(fabs(x), fabs(y));
    return fmax(acc, m > 0.0 ? fabs(x - y) / m : 0.0);
}

/* The record's inputs that are a model's parameters or buffers, "ROLE=NAME"
 * lines: attributes param.ROLE of one side (the compare side's, else the
 * bench's), and a module record's parameters.NAME roles, whose names come
 * from the module's path in the record name ("Module.fc1.Linear.forward.0"
 * -> fc1.NAME) where no attribute says, as in msprobe's own dumps. */
static char *cmp_record_params(const msp_record_info_t *rec, char **k, char **v, size_t n, int *oom)
{
    msp_buf_t b = {0};
    for (size_t i = 0; i < n; i++)
        if (!strncmp(k[i], "param.", 6) && k[i][6] && v[i][0])
            msp_buf_printf(&b, "%s=%s\n", k[i] + 6, v[i]);
    /* "Module.<path>.<Class>.forward.<n>": the path, "" for the root */
    const char *name = rec ? rec->name : "";
    const char *fw = strstr(name, ".forward.");
    const char *cls_dot = NULL;
    for (const char *p = name + 7; fw && p < fw; p++)
        if (*p == '.')
            cls_dot = p;
    for (size_t i = 0; rec && fw && !strncmp(name, "Module.", 7) && i < rec->n_tensors; i++) {
        const char *role = rec->tensors[i].role;
        char key[200];
        snprintf(key, sizeof key, "param.%s", role);
        if (strncmp(role, "parameters.", 11) || cmp_attr_get(k, v, n, key))
            continue;
        int plen = cls_dot ? (int)(cls_dot - (name + 7)) : 0;
        msp_buf_printf(&b, "%s=%.*s%s%s\n", role, plen, name + 7, plen ? "." : "", role + 11);
    }
    if (b.oom || b.too_big)
        *oom = 1;
    if (!b.len || *oom) {
        msp_buf_free(&b);
        return NULL;
    }
    return b.data;
}

/* A record's arguments completed with its API's signature: input.K that is
 * not a tensor named by the K-th parameter ("kwarg.eps"), other keys as
 * they are; the values the record's own (borrowed). */
typedef struct cmp_args {
    char **k;
    const char **v;
    size_t n;
} cmp_args_t;

static void cmp_args_free(cmp_args_t *a)
{
    msp_free_strings(a->k, a->n);
    free(a->v);
}

/* The API of a forward API record ("Functional.gelu" of
 * "Functional.gelu.0.forward") into buf; 0 for any other record. */
static int cmp_api_of(const char *name, char *buf, size_t size)
{
    size_t len = strlen(name), suf = strlen(".forward");
    if (len <= suf || strcmp(name + len - suf, ".forward") != 0 || !strncmp(name, "Module.", 7))
        return 0;
    size_t end = len - suf, d = end;
    while (d > 0 && isdigit((unsigned char)name[d - 1]))
        d--;
    if (d == end || d < 2 || name[d - 1] != '.' || d - 1 >= size)
        return 0;
    snprintf(buf, size, "%.*s", (int)(d - 1), name);
    return 1;
}

/* The signature of rec's API: the bench dump's /defaults rows for it, else
 * the compare dump's (a file without the table has none: *n 0). */
static void cmp_api_defaults(cmp_ctx_t *cx, const char *name, char ***k, char ***v, size_t *n)
{
    char api[256];
    *k = *v = NULL;
    *n = 0;
    if (!cmp_api_of(name, api, sizeof api))
        return;
    if (msp_dump_api_defaults(cx->bf, api, k, v, n) != MSP_OK || !*n) {
        msp_free_strings(*k, *n);
        msp_free_strings(*v, *n);
        *k = *v = NULL;
        *n = 0;
        if (msp_dump_api_defaults(cx->cf, api, k, v, n) != MSP_OK) {
            *k = *v = NULL;
            *n = 0;
        }
    }
    msp_clear_error();
}

char *cmp_sig_param(cmp_ctx_t *cx, const char *fwd_name, unsigned long pos)
{
    char **k, **v, key[32];
    size_t n;
    cmp_api_defaults(cx, fwd_name, &k, &v, &n);
    snprintf(key, sizeof key, "#%lu", pos);
    const char *name = cmp_attr_get(k, v, n, key);
    char *r = name ? strdup(name) : NULL;
    msp_free_strings(k, n);
    msp_free_strings(v, n);
    return r;
}

/* The argument keys of one side (cmp_is_arg_key), positional ones named
 * where the signature (dk, dv, dn) knows their parameter. */
static msp_err cmp_args_complete(char **k, char **v, size_t n, char **dk, char **dv, size_t dn,
                                 cmp_args_t *out)
{
    memset(out, 0, sizeof *out);
    out->k = calloc(n ? n : 1, sizeof *out->k);
    out->v = calloc(n ? n : 1, sizeof *out->v);
    if (!out->k || !out->v)
        return MSP_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        if (!cmp_is_arg_key(k[i]))
            continue;
        const char *name = NULL;
        char pos[32];
        size_t dig = strncmp(k[i], "input.", 6) ? 0 : strspn(k[i] + 6, "0123456789");
        if (dig && !k[i][6 + dig] && dig < 20) {
            snprintf(pos, sizeof pos, "#%s", k[i] + 6);
            name = cmp_attr_get(dk, dv, dn, pos);
        }
        out->k[out->n] = name ? msp_asprintf("kwarg.%s", name) : strdup(k[i]);
        out->v[out->n] = v[i];
        if (!out->k[out->n])
            return MSP_ERR_NOMEM;
        out->n++;
    }
    return MSP_OK;
}

static const char *cmp_args_get(const cmp_args_t *a, const char *key)
{
    for (size_t i = 0; i < a->n; i++)
        if (!strcmp(a->k[i], key))
            return a->v[i];
    return NULL;
}

/* Whether two spellings of one argument say the same; *scalar set when
 * both are Python scalars (msprobe 26's check). */
static int cmp_arg_same(const char *a, const char *b, int *scalar)
{
    double x[16];
    *scalar = cmp_scalars(a, x, 16) >= 0 && cmp_scalars(b, x, 16) >= 0;
    return *scalar ? !cmp_args_differ(a, b) : cmp_arg_equal(a, b);
}

/* arg_diff of rec: the compare side's arguments, then those only the bench
 * has; an argument one side left out takes the API's default (dk, dv, dn),
 * and is no difference when the other side gave that very value. */
static msp_err cmp_arg_diff(msp_record_cmp_t *rec, const cmp_args_t *ca, const cmp_args_t *ba,
                            char **dk, char **dv, size_t dn)
{
    char *acc = NULL;
    for (int side = 0; side < 2; side++) {
        const cmp_args_t *a = side ? ba : ca, *o = side ? ca : ba;
        for (size_t i = 0; i < a->n; i++) {
            const char *other = cmp_args_get(o, a->k[i]);
            if (side && other)
                continue;
            /* absent on the other side: that side ran with the default */
            const char *dflt = !other && !strncmp(a->k[i], "kwarg.", 6)
                                   ? cmp_attr_get(dk, dv, dn, a->k[i] + 6)
                                   : NULL;
            const char *ov = other ? other : dflt;
            int scalar = 0;
            if (ov && cmp_arg_same(a->v[i], ov, &scalar))
                continue;
            rec->args_scalar_differ |= scalar;
            rec->arg_reldiff = cmp_arg_reldiff(rec->arg_reldiff, other, a->v[i]);
            char *no = NULL, *bo = NULL, *od = NULL;
            const char *absent = dflt ? (od = msp_asprintf("%s (default)", dflt)) : "<absent>";
            if (!absent) {
                free(acc);
                return MSP_ERR_NOMEM;
            }
            const char *nt = msp_utf8_clean(side ? absent : a->v[i], 120, &no);
            const char *bt = msp_utf8_clean(side ? a->v[i] : (other ? other : absent), 120, &bo);
            char *next = msp_asprintf("%s%s%s: NPU %s, bench %s", acc ? acc : "", acc ? "; " : "",
                                      a->k[i], nt ? nt : "?", bt ? bt : "?");
            free(no);
            free(bo);
            free(od);
            free(acc);
            if (!(acc = next))
                return MSP_ERR_NOMEM;
        }
    }
    rec->arg_diff = acc;
    return MSP_OK;
}

/* Record attributes both sides share: the compare side's call site
 * ("stack"), "order_begin" (module forward records), the autocast dtype
 * (either side's), and the arguments and optimizer hyperparameters that
 * differ between the sides: arg_diff lists them ("kwarg.stride: NPU (2, 2),
 * bench (1, 1)", joined by "; "), numbers compared as numbers (1e-05 is
 * 0.00001) and other text without memory addresses, after both sides are
 * completed with the API's signature (a positional argument named, one left
 * out taking its default: "kwarg.approximate: NPU 'tanh', bench 'none'
 * (default)"; without /defaults, "<absent>"); args_scalar_differ when
 * one of them is a Python scalar (or a tuple of them), msprobe 26's check. */
msp_err cmp_record_attrs(cmp_ctx_t *cx, msp_record_cmp_t *rec, const msp_record_info_t *brec,
                         const msp_record_info_t *crec)
{
    char **bk = NULL, **bv = NULL, **ck = NULL, **cv = NULL;
    size_t bn = 0, cn = 0;
    msp_err rc = MSP_OK;
    rec->order_begin = -1;
    rec->arg_reldiff = 0.0;
    if (crec && msp_dump_record_attrs(cx->cf, crec, &ck, &cv, &cn) != MSP_OK)
        msp_clear_error();
    if (brec && msp_dump_record_attrs(cx->bf, brec, &bk, &bv, &bn) != MSP_OK)
        msp_clear_error();
    const char *st = cmp_attr_get(ck, cv, cn, "stack");
    if (st && !(rec->npu_stack = cmp_record_stack(cx->cf, cx->cnames, st)) && st[0] != '@')
        rc = MSP_ERR_NOMEM;
    /* the module it ran in (msprobe's construct.json, our module and mix dumps) */
    const char *pa = cmp_attr_get(ck, cv, cn, "parent");
    if (pa && !(rec->parent = strdup(pa)))
        rc = MSP_ERR_NOMEM;
    /* autocast on either side: the record computed at that dtype's precision */
    for (int side = 0; side < 2; side++) {
        const char *ac = side ? cmp_attr_get(bk, bv, bn, "autocast")
                              : cmp_attr_get(ck, cv, cn, "autocast");
        while (ac && *ac) {
            const char *colon = strchr(ac, ':'), *comma = strchr(ac, ',');
            if (colon && (!comma || colon < comma)) {
                char dt[48];
                size_t len = comma ? (size_t)(comma - colon - 1) : strlen(colon + 1);
                snprintf(dt, sizeof dt, "%.*s", (int)(len < sizeof dt ? len : sizeof dt - 1),
                         colon + 1);
                rec->autocast_u = fmax(rec->autocast_u, cmp_unit_roundoff(dt));
            }
            ac = comma ? comma + 1 : NULL;
        }
    }
    /* where a Distributed call ran (the cross-rank pass, cmp_ranks.c) */
    const char *grp = crec ? cmp_attr_get(ck, cv, cn, "group") : cmp_attr_get(bk, bv, bn, "group");
    if (grp && !strncmp(rec->name, "Distributed.", 12) && !(rec->comm_group = strdup(grp)))
        rc = MSP_ERR_NOMEM;
    const char *peer = crec ? cmp_attr_get(ck, cv, cn, "peer") : cmp_attr_get(bk, bv, bn, "peer");
    if (peer && !strncmp(rec->name, "Distributed.", 12)) {
        char *end;
        long long v = strtoll(peer, &end, 10);
        if (end != peer && !*end && v >= 0)
            rec->comm_peer = v;
    }
    int oom = 0;
    rec->params = crec ? cmp_record_params(crec, ck, cv, cn, &oom) : NULL;
    if (!rec->params && brec && !oom)
        rec->params = cmp_record_params(brec, bk, bv, bn, &oom);
    if (oom)
        rc = MSP_ERR_NOMEM;
    const char *ob = crec ? cmp_attr_get(ck, cv, cn, "order_begin")
                          : cmp_attr_get(bk, bv, bn, "order_begin");
    if (ob) {
        char *end;
        long long v = strtoll(ob, &end, 10);
        if (end != ob && !*end && v >= 0)
            rec->order_begin = v;
    }
    if (brec && crec && !rc) {
        char **dk = NULL, **dv = NULL;
        size_t dn = 0;
        cmp_args_t ca, ba;
        cmp_api_defaults(cx, rec->name, &dk, &dv, &dn);
        rc = cmp_args_complete(ck, cv, cn, dk, dv, dn, &ca);
        msp_err rc2 = cmp_args_complete(bk, bv, bn, dk, dv, dn, &ba);
        if (!rc)
            rc = rc2;
        if (!rc)
            rc = cmp_arg_diff(rec, &ca, &ba, dk, dv, dn);
        cmp_args_free(&ca);
        cmp_args_free(&ba);
        msp_free_strings(dk, dn);
        msp_free_strings(dv, dn);
    }
    msp_free_strings(bk, bn);
    msp_free_strings(bv, bn);
    msp_free_strings(ck, cn);
    msp_free_strings(cv, cn);
    return rc ? msp_fail(rc, "compare: out of memory") : MSP_OK;
}
