/* Matching (src/compare/cmp_match.c) on catalogues built in memory: exact
 * names, --fuzzy (the call index dropped, execution order, equal shapes of
 * the roles both hold, a backward record by its forward's partner, strays),
 * --mapping lines (ours and msprobe's data_mapping.yaml), --level,
 * the name helpers (fuzzy key, forward name, direction, uninitialized
 * allocators) and format's one role order (msp_role_cmp). Wanted pairs and
 * names from msprobe-compare(1) (MATCHING, OPTIONS, Uninitialized memory)
 * and format.h, by hand. */
#include "cmp_internal.h"
#include "cmp_job.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit_check.h"

/* A record of one output tensor of shape [n] (n 0: also an input.0 of
 * shape [1], so the roles differ from a record with n > 0). */
typedef struct spec {
    const char *name;
    int64_t n;
} spec_t;

typedef struct side {
    msp_dump_file_t f;
    msp_record_info_t rec[16];
    msp_tensor_info_t ten[32];
} side_t;

/* Records in execution order: order = position. */
static void side_make(side_t *s, const char *path, const spec_t *sp, size_t n)
{
    memset(s, 0, sizeof *s);
    s->f.path = (char *)path;
    s->f.records = s->rec;
    s->f.n_records = n;
    size_t nt = 0;
    for (size_t i = 0; i < n; i++) {
        msp_record_info_t *r = &s->rec[i];
        r->name = (char *)sp[i].name;
        r->order = (int64_t)i;
        r->tensors = &s->ten[nt];
        if (sp[i].n == 0) {
            s->ten[nt].role = "input.0";
            s->ten[nt].ndim = 1;
            s->ten[nt++].shape[0] = 1;
            r->n_tensors++;
        }
        s->ten[nt].role = "output.0";
        s->ten[nt].ndim = 1;
        s->ten[nt++].shape[0] = sp[i].n ? sp[i].n : 1;
        r->n_tensors++;
    }
}

/* pairs as a string: for each compare record in order its bench index
 * ("-" when none), then "|" and the bench records left over, e.g.
 * "0 2 -|1". */
static void pairs_str(const cmp_pair_t *p, size_t n, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++)
        if (p[i].c >= 0) {
            char one[24];
            if (p[i].b >= 0)
                snprintf(one, sizeof one, "%s%ld", at ? " " : "", p[i].b);
            else
                snprintf(one, sizeof one, "%s-", at ? " " : "");
            msp_str_add(buf, cap, &at, one);
        }
    msp_str_add(buf, cap, &at, "|");
    int first = 1;
    for (size_t i = 0; i < n; i++)
        if (p[i].c < 0) {
            char one[24];
            snprintf(one, sizeof one, "%s%ld", first ? "" : " ", p[i].b);
            msp_str_add(buf, cap, &at, one);
            first = 0;
        }
}

/* The pairs of bench against cmp under opts (fuzzy, level) and map. */
static void match(const spec_t *b, size_t nb, const spec_t *c, size_t nc, int fuzzy,
                  msp_level_t level, const cmp_mapping_t *map, char *buf, size_t cap)
{
    side_t bs, cs;
    side_make(&bs, "bench.h5", b, nb);
    side_make(&cs, "cmp.h5", c, nc);
    msp_compare_opts_t o;
    msp_compare_opts_default(&o);
    o.fuzzy = fuzzy;
    o.level = level;
    cmp_pair_t *p = NULL;
    size_t n = 0;
    CHECK_INT(cmp_match_records(&bs.f, &cs.f, NULL, NULL, &o, map, &p, &n), MSP_OK);
    pairs_str(p, n, buf, cap);
    free(p);
    /* the same pairs from the sides' records by name, as compare passes them */
    const msp_record_info_t **bi = cmp_name_index(&bs.f), **ci = cmp_name_index(&cs.f);
    char again[1024];
    p = NULL;
    n = 0;
    CHECK_INT(cmp_match_records(&bs.f, &cs.f, bi, ci, &o, map, &p, &n), MSP_OK);
    pairs_str(p, n, again, cap < sizeof again ? cap : sizeof again);
    CHECK_STR(again, buf);
    free(p);
    free(bi);
    free(ci);
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void test_exact(void)
{
    char got[256];
    static const spec_t b[] = {{"Functional.relu.0.forward", 4},
                               {"Functional.gelu.0.forward", 4},
                               {"Torch.matmul.0.forward", 4}};
    static const spec_t c[] = {{"Functional.relu.0.forward", 4},
                               {"Torch.matmul.0.forward", 4},
                               {"Torch.add.0.forward", 4}};
    match(b, N(b), c, N(c), 0, MSP_LEVEL_ALL, NULL, got, sizeof got);
    CHECK_STR(got, "0 2 -|1");
    /* exact names pair whatever their shapes (a shape mismatch is a row's No) */
    static const spec_t b2[] = {{"Torch.relu.0.forward", 2}, {"Torch.relu.1.forward", 3}};
    static const spec_t c2[] = {
        {"Torch.relu.0.forward", 5}, {"Torch.relu.1.forward", 2}, {"Torch.relu.2.forward", 3}};
    match(b2, N(b2), c2, N(c2), 0, MSP_LEVEL_ALL, NULL, got, sizeof got);
    CHECK_STR(got, "0 1 -|");
    /* the same names, the call index shifted: fuzzy pairs by shape in order */
    match(b2, N(b2), c2, N(c2), 1, MSP_LEVEL_ALL, NULL, got, sizeof got);
    CHECK_STR(got, "- 0 1|");
    /* without --fuzzy a different call index never pairs */
    static const spec_t b3[] = {{"Torch.relu.0.forward", 2}};
    static const spec_t c3[] = {{"Torch.relu.1.forward", 2}};
    match(b3, 1, c3, 1, 0, MSP_LEVEL_ALL, NULL, got, sizeof got);
    CHECK_STR(got, "-|0");
    match(b3, 1, c3, 1, 1, MSP_LEVEL_ALL, NULL, got, sizeof got);
    CHECK_STR(got, "0|");
}

static void test_fuzzy(void)
{
    char got[256];
    /* each takes the first of its key after the one last taken */
    static const spec_t b[] = {
        {"Torch.relu.0.forward", 2}, {"Torch.relu.1.forward", 3}, {"Torch.relu.2.forward", 2}};
    static const spec_t c[] = {{"Torch.relu.0.forward", 2}, {"Torch.relu.1.forward", 2}};
    match(b, N(b), c, N(c), 1, MSP_LEVEL_ALL, NULL, got, sizeof got);
    CHECK_STR(got, "0 2|1");
    /* after the last taken, not the first unused: relu.0 of bench is behind */
    static const spec_t b2[] = {
        {"Torch.relu.0.forward", 2}, {"Torch.relu.1.forward", 3}, {"Torch.relu.2.forward", 3}};
    static const spec_t c2[] = {{"Torch.relu.0.forward", 3}, {"Torch.relu.1.forward", 2}};
    match(b2, N(b2), c2, N(c2), 1, MSP_LEVEL_ALL, NULL, got, sizeof got);
    CHECK_STR(got, "1 -|0 2");
    /* keys: API and direction, module path and class; roles must agree */
    static const spec_t b3[] = {{"Module.fc.Linear.forward.0", 4},
                                {"Functional.conv2d.0.backward", 4},
                                {"Torch.gelu.0.forward", 4},
                                {"Torch.add.0.forward", 4}};
    static const spec_t c3[] = {{"Module.fc.Linear.forward.1", 4},
                                {"Functional.conv2d.3.backward", 4},
                                {"Functional.conv2d.4.forward", 4},
                                {"Torch.relu.0.forward", 4},
                                {"Torch.add.1.forward", 0}};
    match(b3, N(b3), c3, N(c3), 1, MSP_LEVEL_ALL, NULL, got, sizeof got);
    CHECK_STR(got, "0 1 - - -|2 3");
}

/* --fuzzy: a backward record takes the backward of its forward's partner
 * whatever its tensors; a role one side lacks does not stop a pair; and a
 * record left over beside a left-over one of the same key on the other side
 * is stray (msprobe-compare(1), MATCHING). */
static void test_fuzzy_backward_and_strays(void)
{
    char got[256];
    static const spec_t b[] = {{"Functional.linear.0.forward", 4},
                               {"Functional.linear.0.backward", 3},
                               {"Torch.add.0.forward", 1}};
    static const spec_t c[] = {{"Functional.linear.5.forward", 4},
                               {"Functional.linear.5.backward", 7},
                               {"Torch.add.3.forward", 0}};
    match(b, N(b), c, N(c), 1, MSP_LEVEL_ALL, NULL, got, sizeof got);
    CHECK_STR(got, "0 1 2|");
    /* relu.1 of the compare side has no bench partner of its shape: it and
     * bench relu.0 are strays; gelu, on one side only, is not */
    static const spec_t b2[] = {{"Torch.relu.0.forward", 2}, {"Torch.gelu.0.forward", 2}};
    static const spec_t c2[] = {{"Torch.relu.1.forward", 5}};
    side_t bs, cs;
    side_make(&bs, "bench.h5", b2, N(b2));
    side_make(&cs, "cmp.h5", c2, N(c2));
    msp_compare_opts_t o;
    msp_compare_opts_default(&o);
    o.fuzzy = 1;
    cmp_pair_t *p = NULL;
    size_t n = 0;
    CHECK_INT(cmp_match_records(&bs.f, &cs.f, NULL, NULL, &o, NULL, &p, &n), MSP_OK);
    pairs_str(p, n, got, sizeof got);
    CHECK_STR(got, "-|0 1");
    for (size_t i = 0; p && i < n; i++) {
        int relu = p[i].c == 0 || p[i].b == 0;
        CHECK_INT(p[i].stray, relu);
    }
    free(p);
}

static void test_level(void)
{
    char got[256];
    static const spec_t b[] = {{"Functional.linear.0.forward", 4},
                               {"Module.fc.Linear.forward.0", 4},
                               {"Optimizer.Adam.0.step", 4}};
    match(b, N(b), b, N(b), 0, MSP_LEVEL_ALL, NULL, got, sizeof got);
    CHECK_STR(got, "0 1 2|");
    match(b, N(b), b, N(b), 0, MSP_LEVEL_API, NULL, got, sizeof got);
    CHECK_STR(got, "0 2|"); /* the module record is not compared at all */
    match(b, N(b), b, N(b), 0, MSP_LEVEL_MODULE, NULL, got, sizeof got);
    CHECK_STR(got, "1 2|");
    CHECK(cmp_level_keeps(MSP_LEVEL_API, "Optimizer.SGD.0.step"));
    CHECK(cmp_level_keeps(MSP_LEVEL_MODULE, "Optimizer.SGD.0.step"));
    CHECK(!cmp_level_keeps(MSP_LEVEL_MODULE, "Tensor.add.0.forward"));
    CHECK(!cmp_level_keeps(MSP_LEVEL_API, "Module.fc.Linear.forward.0"));
}

/* path of a new temporary file holding text (the caller unlinks it). */
static char *tmp_file(const char *text)
{
    const char *dir = getenv("TMPDIR");
    char *path = msp_asprintf("%s/unit_match_XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = path ? mkstemp(path) : -1;
    CHECK(fd >= 0);
    if (fd < 0)
        return path;
    size_t n = strlen(text);
    CHECK(write(fd, text, n) == (ssize_t)n);
    close(fd);
    return path;
}

/* cmp_mapping_load of text: its code; *m filled on success. */
static msp_err load_map(const char *text, cmp_mapping_t *m, char *detail, size_t cap)
{
    char *path = tmp_file(text);
    msp_err rc = cmp_mapping_load(path, m);
    snprintf(detail, cap, "%s", rc ? msp_last_error() : "");
    if (rc) {
        /* the message names the file (its line is checked by the caller) */
        CHECK_HAS(detail, path);
    }
    unlink(path);
    free(path);
    return rc;
}

static void test_mapping_file(void)
{
    cmp_mapping_t m;
    char d[1024];
    /* ours: one "bench_name cmp_name" pair a line */
    CHECK_INT(load_map("# ours: bench first, then compare\n"
                       "Functional.gelu.0.forward   Functional.relu.0.forward\n"
                       "\n"
                       "  # indented comment\n",
                       &m, d, sizeof d),
              MSP_OK);
    CHECK_INT(m.n, 1);
    if (m.n == 1) {
        CHECK_STR(m.e[0].bench, "Functional.gelu.0.forward");
        CHECK_STR(m.e[0].cmp, "Functional.relu.0.forward");
        CHECK_STR(m.e[0].bench_role, NULL);
        CHECK_INT(m.e[0].line, 2);
    }
    cmp_mapping_free(&m);
    /* msprobe's data_mapping.yaml: the compare side first; input.NAME is kwarg.NAME */
    CHECK_INT(load_map("# data_mapping\n"
                       "Functional.linear.0.forward.input.weight: "
                       "\"Functional.linear.1.forward.input.1\"\n"
                       "'Module.fc.Linear.forward.0.output.0': Module.fc.Dense.forward.0.output.0\n"
                       "Torch.add.0.forward: Torch.add.1.forward # a record line\n",
                       &m, d, sizeof d),
              MSP_OK);
    CHECK_INT(m.n, 3);
    if (m.n == 3) {
        CHECK_STR(m.e[0].cmp, "Functional.linear.0.forward");
        CHECK_STR(m.e[0].cmp_role, "kwarg.weight");
        CHECK_STR(m.e[0].bench, "Functional.linear.1.forward");
        CHECK_STR(m.e[0].bench_role, "input.1");
        CHECK_INT(m.e[0].line, 2);
        CHECK_STR(m.e[1].cmp, "Module.fc.Linear.forward.0");
        CHECK_STR(m.e[1].cmp_role, "output.0");
        CHECK_STR(m.e[1].bench, "Module.fc.Dense.forward.0");
        CHECK_STR(m.e[2].cmp, "Torch.add.0.forward");
        CHECK_STR(m.e[2].bench, "Torch.add.1.forward");
        CHECK_STR(m.e[2].cmp_role, NULL);
    }
    cmp_mapping_free(&m);
    /* one file is one kind: the two list the sides in opposite orders */
    CHECK_INT(load_map("Functional.gelu.0.forward Functional.relu.0.forward\n"
                       "Torch.add.0.forward: Torch.add.1.forward\n",
                       &m, d, sizeof d),
              MSP_ERR_USAGE);
    cmp_mapping_free(&m);
    /* one name or three is an error naming FILE:LINE */
    CHECK_INT(load_map("A.0.forward B.0.forward\nA.1.forward\n", &m, d, sizeof d), MSP_ERR_USAGE);
    CHECK_HAS(d, ":2: expected two names");
    CHECK_INT(load_map("\n\nA.0.forward B.0.forward C.0.forward\n", &m, d, sizeof d),
              MSP_ERR_USAGE);
    CHECK_HAS(d, ":3: expected two names");
    CHECK_INT(load_map("Functional.a.0.forward.input.0: Functional.b.0.forward\n", &m, d, sizeof d),
              MSP_ERR_USAGE);
    CHECK_HAS(d, ":1: one side names a tensor, the other a record");
    CHECK_INT(m.n, 0);
}

static void test_mapping_pairs(void)
{
    cmp_mapping_t m;
    char d[512], got[256];
    /* a mapping line first, then exact names for what is left */
    CHECK_INT(load_map("Functional.gelu.0.forward Functional.relu.0.forward\n"
                       "Functional.tanh.0.forward Functional.sigmoid.0.forward\n",
                       &m, d, sizeof d),
              MSP_OK);
    static const spec_t b[] = {{"Functional.relu.0.forward", 4}, {"Functional.gelu.0.forward", 4}};
    match(b, N(b), b, N(b), 0, MSP_LEVEL_ALL, &m, got, sizeof got);
    CHECK_STR(got, "1 -|0"); /* compare relu takes bench gelu; bench relu is left */
    if (m.n == 2) {
        CHECK(m.e[0].bench_seen && m.e[0].cmp_seen);
        CHECK(!m.e[1].bench_seen && !m.e[1].cmp_seen); /* a line that matched nothing */
    }
    /* and before --fuzzy */
    match(b, N(b), b, N(b), 1, MSP_LEVEL_ALL, &m, got, sizeof got);
    CHECK_STR(got, "1 -|0");
    cmp_mapping_free(&m);
}

static void test_names(void)
{
    static const char *const fuzzy[][2] = {
        {"Torch.matmul.3.forward", "Torch.matmul.forward"},
        {"Module.fc.Linear.forward.0", "Module.fc.Linear.forward"},
        {"Module.layer1.0.conv1.Conv2d.forward.0", "Module.layer1.0.conv1.Conv2d.forward"},
        {"Functional.conv2d.12.backward", "Functional.conv2d.backward"},
        {"Optimizer.Adam.0.step", "Optimizer.Adam.0.step"}, /* no direction: kept */
    };
    for (size_t i = 0; i < N(fuzzy); i++) {
        char *k = cmp_fuzzy_key(fuzzy[i][0]);
        CHECK_STR(k, fuzzy[i][1]);
        free(k);
    }
    static const struct {
        const char *name;
        int fwd;
        const char *forward; /* cmp_forward_name */
    } dir[] = {
        {"Functional.relu.0.forward", 1, NULL},
        {"Functional.relu.0.backward", 0, "Functional.relu.0.forward"},
        {"Module.fc.Linear.forward.0", 1, NULL},
        {"Module.fc.Linear.backward.0", 0, "Module.fc.Linear.forward.0"},
        /* a token only: a module named forward_net or backward */
        {"Module.forward_net.Linear.backward.0", 0, "Module.forward_net.Linear.forward.0"},
        {"Module.backward.Linear.backward.0", 0, "Module.backward.Linear.forward.0"},
        {"Optimizer.Adam.0.step", 0, NULL},
    };
    for (size_t i = 0; i < N(dir); i++) {
        CHECK_INT(cmp_is_forward(dir[i].name), dir[i].fwd);
        char *f = cmp_forward_name(dir[i].name);
        CHECK_STR(f, dir[i].forward);
        free(f);
    }
    /* msprobe-compare(1), Uninitialized memory */
    CHECK_STR(cmp_uninit_api("Torch.empty.0.forward"), "Torch.empty");
    CHECK_STR(cmp_uninit_api("Torch.empty_like.1.forward"), "Torch.empty_like");
    CHECK_STR(cmp_uninit_api("Torch.empty_strided.0.forward"), "Torch.empty_strided");
    CHECK_STR(cmp_uninit_api("Tensor.new_empty.2.forward/output.0"), "Tensor.new_empty");
    CHECK_STR(cmp_uninit_api("Tensor.new_empty_strided.0.forward"), "Tensor.new_empty_strided");
    CHECK_STR(cmp_uninit_api("Torch.empty_likeX.0.forward"), NULL);
    CHECK_STR(cmp_uninit_api("Torch.zeros.0.forward"), NULL);
}

static int by_role(const void *a, const void *b)
{
    return msp_role_cmp(*(const char *const *)a, *(const char *const *)b);
}

/* format.h: input.*, kwarg.*, output.*, anything else; digit runs by value;
 * leading zeros are other roles, ordered by strcmp. */
static void test_role_order(void)
{
    const char *v[] = {"output.10", "grad_fn.0", "kwarg.x10", "input.10", "output.2", "input.9",
                       "kwarg.a",   "input.01",  "kwarg.x9",  "input.1",  "output.0", "input.0"};
    static const char *const want[] = {"input.0",  "input.01", "input.1",   "input.9",
                                       "input.10", "kwarg.a",  "kwarg.x9",  "kwarg.x10",
                                       "output.0", "output.2", "output.10", "grad_fn.0"};
    qsort(v, N(v), sizeof v[0], by_role);
    for (size_t i = 0; i < N(v); i++)
        CHECK_STR(v[i], want[i]);
    CHECK(msp_role_cmp("input.01", "input.1") < 0);
    CHECK(msp_role_cmp("input.1", "input.01") > 0);
    CHECK_INT(msp_natural_cmp("input.01", "input.1"), 0);
    CHECK_INT(msp_role_cmp("kwarg.weight", "kwarg.weight"), 0);
    CHECK(msp_role_cmp("output.0", "kwarg.zzz") > 0);
    CHECK(msp_role_cmp("kwarg.a", "input.99") > 0);
}

int main(void)
{
    test_exact();
    test_fuzzy();
    test_fuzzy_backward_and_strays();
    test_level();
    test_mapping_file();
    test_mapping_pairs();
    test_names();
    test_role_order();
    return unit_done("matching");
}
