/* A monitored step's rows, written as msprobe's monitor writes them
 * (msprobe-monitor(1), OUTPUT), so that readers of msprobe's output read ours:
 *
 *   $MONITOR_OUTPUT_DIR/<Mon DD_HH-MM-SS>-rank<R>-<8 hex>/<task>_<a>-<b>.csv
 *
 * (the time is msprobe's, Asia/Shanghai's clock, UTC+8; a..b the steps the
 * file holds, step_count_per_record of them), a header "vpp_stage,name,step
 * [,micro_step],<ops>,shape,dtype" and one row per tensor: "0,fc1.weight,3,
 * ...". Numbers are rounded to ndigits as pandas' DataFrame.round does
 * (numpy: rint(x * 10^n) / 10^n) and printed as Python prints a float.
 *
 * The alert rules run over every (tag, op) of the step as msprobe's writer
 * runs them: the first rule that fires is printed at once, and with
 * alert.dump the anomalies go to anomaly_detected/rank<R>/anomaly.json. The
 * first step whose statistics hold a NaN or an Inf is said once, rules or
 * not. */
#include "py_monitor_out.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const g_task_file[MSP_MT_NTASKS] = {
    "actv",    "actv_grad",  "grad_unreduced", "grad_reduced",
    "exp_avg", "exp_avg_sq", "param_origin",   "param_updated"};
static const char *const g_task_tag[MSP_MT_NTASKS] = {"actv",         "actv_grad",    "acc_grad",
                                                      "post_grad",    "exp_avg",      "exp_avg_sq",
                                                      "param_origin", "param_updated"};

typedef struct mon_row {
    msp_mon_task_t task;
    char *name;
    int64_t micro;   /* < 0: no micro_step column */
    int64_t call_id; /* msprobe's order of the step's tags; -1 for parameters */
    msp_mon_stat_t st;
} mon_row_t;

static const msp_mon_config_t *g_cfg;
static mon_row_t *g_rows;
static size_t g_nrows, g_caprows;
static int64_t g_call_id;
static char g_time[32], g_uid[12];
static char *g_dir, *g_anomaly_path; /* once the first step is written */
static int64_t g_rank = -1;
static PyObject *g_history;   /* (tag, op) -> [avg]: AnomalyTurbulence's mean */
static PyObject *g_anomalies; /* key -> JSON text, in msprobe's dict order */
static int g_said_nonfinite;

int msp_mon_out_init(const msp_mon_config_t *cfg)
{
    g_cfg = cfg;
    time_t now = time(NULL) + 8 * 3600; /* msprobe's clock: Asia/Shanghai */
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(g_time, sizeof g_time, "%b%d_%H-%M-%S", &tm);
    unsigned char r[4] = {0};
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(r, 1, sizeof r, f) != sizeof r) {
        unsigned v = (unsigned)getpid() ^ (unsigned)time(NULL);
        memcpy(r, &v, sizeof r);
    }
    if (f)
        fclose(f);
    snprintf(g_uid, sizeof g_uid, "%02x%02x%02x%02x", r[0], r[1], r[2], r[3]);
    g_history = PyDict_New();
    g_anomalies = PyDict_New();
    return g_history && g_anomalies ? 0 : -1;
}

static msp_mon_stat_t *stat_at(size_t i)
{
    return &g_rows[i].st;
}

static mon_row_t *new_row(msp_mon_task_t task, const char *name, int64_t micro)
{
    if (g_nrows == g_caprows) {
        size_t cap = g_caprows ? 2 * g_caprows : 256;
        mon_row_t *nr = realloc(g_rows, cap * sizeof *nr);
        if (!nr)
            return NULL;
        g_rows = nr;
        g_caprows = cap;
    }
    mon_row_t *r = &g_rows[g_nrows];
    if (!(r->name = strdup(name)))
        return NULL;
    r->task = task;
    r->micro = micro;
    r->call_id = task == MSP_MT_PARAM_ORIGIN || task == MSP_MT_PARAM_UPDATED ? -1 : g_call_id++;
    return r;
}

int64_t msp_mon_row_later(msp_mon_task_t task, const char *name, int64_t micro)
{
    mon_row_t *r = new_row(task, name, micro);
    if (!r)
        return -1;
    memset(&r->st, 0, sizeof r->st); /* a row of nan unless filled */
    return (int64_t)g_nrows++;
}

void msp_mon_row_fill(int64_t row, const msp_mon_stat_t *st)
{
    if (row >= 0 && (size_t)row < g_nrows)
        g_rows[row].st = *st;
}

const msp_mon_stat_t *msp_mon_row(msp_mon_task_t task, const char *name, int64_t micro, PyObject *t)
{
    mon_row_t *r = new_row(task, name, micro);
    if (!r)
        return NULL;
    int seen = task == MSP_MT_ACTV        ? MSP_MON_SEEN_ACTV
               : task == MSP_MT_ACTV_GRAD ? MSP_MON_SEEN_GRAD
                                          : -1;
    msp_mon_stats_take(t, g_cfg->eps, &r->st, g_nrows, seen);
    g_nrows++;
    return &r->st;
}

void msp_mon_row_with(msp_mon_task_t task, const char *name, int64_t micro,
                      const msp_mon_stat_t *st)
{
    mon_row_t *r = new_row(task, name, micro);
    if (r) {
        r->st = *st;
        g_nrows++;
    }
}

static int g_profile = -1;
static int64_t g_spent[MSP_MON_T_N], g_steps_written;

int64_t msp_mon_clock(void)
{
    if (g_profile < 0)
        g_profile = msp_env_flag("MSPROBE_MONITOR_PROFILE");
    struct timespec ts;
    if (!g_profile || clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void msp_mon_spent(int part, int64_t since)
{
    if (since)
        g_spent[part] += msp_mon_clock() - since;
}

void msp_mon_profile_report(int64_t copies)
{
    if (g_profile <= 0 || !g_steps_written)
        return;
    double n = (double)g_steps_written;
    msp_shim_msg("monitor: %lld steps written; the training thread's CPU time a step in the "
                 "monitor: %.2f ms in hooks, %.2f ms at the optimizer's step, %.2f ms writing",
                 (long long)g_steps_written, g_spent[MSP_MON_T_HOOKS] / n / 1e6,
                 g_spent[MSP_MON_T_STEP] / n / 1e6, g_spent[MSP_MON_T_WRITE] / n / 1e6);
    int64_t passes, reused, pieced;
    msp_mon_stats_counts(&passes, &reused, &pieced);
    msp_shim_msg("monitor: %lld tensors reduced (%lld read in pieces by two threads), %lld rows "
                 "took the numbers of the same memory just seen, %lld activations copied for an "
                 "in-place change",
                 (long long)passes, (long long)pieced, (long long)reused, (long long)copies);
}

void msp_mon_rows_end(void)
{
    msp_mon_stats_launch();
}

void msp_mon_out_discard(void)
{
    msp_mon_stats_reset();
    for (size_t i = 0; i < g_nrows; i++)
        free(g_rows[i].name);
    g_nrows = 0;
    g_call_id = 0;
}

/* ---- numbers as Python prints them ---------------------------------------- */

/* repr(float(x)): the shortest digits that read back as x; fixed notation
 * for exponents from -4 to 15, else d.ddde+XX. */
static void py_float(double x, char *buf, size_t n)
{
    if (isnan(x)) {
        snprintf(buf, n, "nan");
        return;
    }
    if (isinf(x)) {
        snprintf(buf, n, x < 0 ? "-inf" : "inf");
        return;
    }
    char e[40];
    int p = 1;
    for (; p < 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, x);
        double back = strtod(e, NULL);
        if (!(back < x) && !(back > x))
            break;
    }
    snprintf(e, sizeof e, "%.*e", p - 1, x);
    int neg = e[0] == '-';
    char digits[24];
    size_t nd = 0;
    const char *q = e + neg;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9')
            digits[nd++] = *q;
    digits[nd] = '\0';
    int ex = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        digits[--nd] = '\0';
    size_t at = 0;
    if (neg)
        buf[at++] = '-';
    if (ex >= -4 && ex < 16) {
        if (ex < 0) {
            at += (size_t)snprintf(buf + at, n - at, "0.");
            for (int k = -1; k > ex && at < n - 1; k--)
                buf[at++] = '0';
            snprintf(buf + at, n - at, "%s", digits);
        } else {
            for (int k = 0; k <= ex && at < n - 1; k++)
                buf[at++] = (size_t)k < nd ? digits[k] : '0';
            buf[at++] = '.';
            if ((size_t)ex + 1 < nd)
                snprintf(buf + at, n - at, "%s", digits + ex + 1);
            else
                snprintf(buf + at, n - at, "0");
        }
    } else {
        buf[at++] = digits[0];
        if (nd > 1)
            at += (size_t)snprintf(buf + at, n - at, ".%s", digits + 1);
        snprintf(buf + at, n - at, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
    }
}

/* numpy's round (pandas' DataFrame.round). */
static double np_round(double x, int nd)
{
    double f = pow(10.0, nd);
    double y = rint(x * f) / f;
    return isfinite(y) ? y : x;
}

/* A CSV field as Python's csv module writes it (QUOTE_MINIMAL). */
static void csv_field(FILE *f, const char *s)
{
    if (!s[strcspn(s, ",\"\r\n")]) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* ---- the CSV files ----------------------------------------------------------- */

static void find_group(void);

static int ensure_dirs(void)
{
    if (g_dir)
        return 0;
    const char *base = getenv("MONITOR_OUTPUT_DIR");
    if (!base || !*base)
        base = "./monitor_output";
    g_rank = msp_current_rank();
    if (g_rank < 0)
        g_rank = 0;
    find_group();
    g_dir = msp_asprintf("%s/%s-rank%lld-%s", base, g_time, (long long)g_rank, g_uid);
    if (!g_dir || msp_mkdirs(g_dir) != MSP_OK) {
        msp_shim_msg("warning: monitor: cannot create %s (%s): nothing is written",
                     g_dir ? g_dir : base, msp_last_error());
        return -1;
    }
    if (g_cfg->alert_dump) {
        char *d = msp_asprintf("%s/anomaly_detected/rank%lld", base, (long long)g_rank);
        g_anomaly_path = d ? msp_asprintf("%s/anomaly.json", d) : NULL;
        FILE *f = d && msp_mkdirs(d) == MSP_OK && g_anomaly_path ? fopen(g_anomaly_path, "w")
                                                                 : NULL;
        if (f) {
            fputs("{}", f);
            fclose(f);
        } else
            msp_shim_msg("warning: monitor: cannot write %s: anomalies are only printed",
                         g_anomaly_path ? g_anomaly_path : base);
        free(d);
    }
    msp_shim_msg("monitor: writing to %s", g_dir);
    return 0;
}

/* repr of y = np_round(v, nd): y is the double nearest to k / 10^nd, so
 * its nd decimals, trailing zeros cut, are its shortest digits whenever they
 * are 15 or fewer and Python prints it in fixed notation (1e-4 <= |y| <
 * 1e16): one snprintf where py_float would try up to 17. Checked by reading
 * it back; anything else goes to py_float. */
static void rounded_float(double y, int nd, char *b, size_t n)
{
    double a = fabs(y);
    if (isfinite(y) && (a >= 1e-4 || !(a > 0)) && a < 1e15) {
        int w = snprintf(b, n, "%.*f%s", nd, y, nd ? "" : ".0");
        if (w > 0 && (size_t)w < n && strlen(b) - (b[0] == '-') - 1 <= 16) {
            char *end = b + w;
            while (end[-1] == '0' && end[-2] != '.')
                *--end = '\0';
            double back = strtod(b, NULL);
            if (!(back < y) && !(back > y))
                return;
        }
    }
    py_float(y, b, n);
}

static void write_value(FILE *f, double v, int as_int)
{
    char b[48];
    if (as_int && isfinite(v))
        snprintf(b, sizeof b, "%lld", (long long)v);
    else
        rounded_float(np_round(v, g_cfg->ndigits), g_cfg->ndigits, b, sizeof b);
    fputs(b, f);
}

static void write_task(const mon_row_t *rows, size_t nrows, msp_mon_task_t task, int64_t step)
{
    int64_t k = g_cfg->step_count_per_record, a = step / k * k;
    int any = 0, micro = 0, missing = 0;
    for (size_t i = 0; i < nrows; i++)
        if (rows[i].task == task) {
            any = 1;
            micro |= rows[i].micro >= 0;
            missing |= rows[i].st.have != 1;
        }
    if (!any)
        return;
    char *path = msp_asprintf("%s/%s_%lld-%lld.csv", g_dir, g_task_file[task], (long long)a,
                              (long long)(a + k - 1));
    struct stat st;
    int fresh = path && stat(path, &st) != 0;
    FILE *f = path ? fopen(path, "a") : NULL;
    if (!f) {
        msp_shim_msg("warning: monitor: cannot write %s: %s", path ? path : g_dir, strerror(errno));
        free(path);
        return;
    }
    if (fresh) {
        fputs(micro ? "vpp_stage,name,step,micro_step" : "vpp_stage,name,step", f);
        for (size_t o = 0; o < g_cfg->n_ops; o++)
            fprintf(f, ",%s", msp_mon_op_names[g_cfg->ops[o]]);
        fputs(",shape,dtype\n", f);
    }
    for (size_t i = 0; i < nrows; i++) {
        const mon_row_t *r = &rows[i];
        if (r->task != task)
            continue;
        fputs("0,", f);
        csv_field(f, r->name);
        fprintf(f, ",%lld", (long long)step);
        if (micro)
            fprintf(f, ",%lld", (long long)(r->micro < 0 ? 0 : r->micro));
        for (size_t o = 0; o < g_cfg->n_ops; o++) {
            fputc(',', f);
            /* pandas: a column of counts stays integral unless a row lacks it */
            write_value(f, r->st.have == 1 ? r->st.v[g_cfg->ops[o]] : NAN,
                        g_cfg->ops[o] == MSP_MON_NANS && !missing);
        }
        if (r->st.have == 1) {
            fputc(',', f);
            csv_field(f, r->st.shape);
            fprintf(f, ",%s\n", r->st.dtype);
        } else
            fputs(",nan,nan\n", f);
    }
    if (fclose(f) != 0)
        msp_shim_msg("warning: monitor: cannot write %s: %s", path, strerror(errno));
    free(path);
}

/* ---- alerts ------------------------------------------------------------------ */

/* msprobe's tag of a row: "0:NAME[:MICRO]/rank<R>/<task>". */
static void row_tag(const mon_row_t *r, char *buf, size_t n)
{
    if (r->micro >= 0)
        snprintf(buf, n, "0:%s:%lld/rank%lld/%s", r->name, (long long)r->micro, (long long)g_rank,
                 g_task_tag[r->task]);
    else
        snprintf(buf, n, "0:%s/rank%lld/%s", r->name, (long long)g_rank, g_task_tag[r->task]);
}

/* AnomalyTurbulence's history: the mean before this value, then updated
 * (beta 0.99), as msprobe's _update_tag2scalars keeps it. */
static double history(const char *tag, const char *op, double v)
{
    PyObject *key = Py_BuildValue("(ss)", tag, op);
    PyObject *cell = key ? PyDict_GetItem(g_history, key) : NULL;
    double avg = fabs(v);
    if (cell)
        avg = PyFloat_AsDouble(cell);
    PyObject *nv = PyFloat_FromDouble(0.99 * avg + 0.01 * fabs(v));
    if (key && nv)
        PyDict_SetItem(g_history, key, nv);
    Py_XDECREF(nv);
    Py_XDECREF(key);
    if (PyErr_Occurred())
        PyErr_Clear();
    return avg;
}

static void json_str(char *out, size_t n, const char *s)
{
    size_t at = 0;
    out[at++] = '"';
    for (; *s && at + 8 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            at += (size_t)snprintf(out + at, n - at, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            at += (size_t)snprintf(out + at, n - at, "\\u%04x", c);
        else
            out[at++] = (char)c;
    }
    snprintf(out + at, n - at, "\"");
}

/* msprobe's group_mates (the ranks of the world group when torch.distributed
 * is initialised, else [0]) as JSON lines, and its pp_stage (the rank in
 * that group): found when the first step is written. */
static char g_mates[4096] = "[\n   0\n  ]";
static int64_t g_pp_stage;

static void find_group(void)
{
    PyObject *d = PyImport_ImportModule("torch.distributed");
    PyObject *on = d ? PyObject_CallMethod(d, "is_initialized", NULL) : NULL;
    PyObject *ws = on == Py_True ? PyObject_CallMethod(d, "get_world_size", NULL) : NULL;
    long n = ws ? PyLong_AsLong(ws) : 0;
    if (n > 0) {
        size_t at = (size_t)snprintf(g_mates, sizeof g_mates, "[");
        for (long r = 0; r < n && at + 24 < sizeof g_mates; r++)
            at += (size_t)snprintf(g_mates + at, sizeof g_mates - at, "%s\n   %ld", r ? "," : "",
                                   r);
        snprintf(g_mates + at, sizeof g_mates - at, "\n  ]");
        g_pp_stage = g_rank;
    }
    Py_XDECREF(ws);
    Py_XDECREF(on);
    Py_XDECREF(d);
    PyErr_Clear();
}

static void anomaly_note(const mon_row_t *r, const char *tag, const char *msg, int64_t step)
{
    char key[700], jtag[800], jmsg[1400], text[8192];
    snprintf(key, sizeof key, "%s_step_%lld_call_%lld", tag, (long long)step,
             (long long)r->call_id);
    json_str(jtag, sizeof jtag, tag);
    json_str(jmsg, sizeof jmsg, msg);
    snprintf(text, sizeof text,
             "{\n  \"rank\": %lld,\n  \"step\": %lld,\n  \"micro_step\": 0,\n  \"pp_stage\": "
             "%lld,\n  \"vpp_stage\": 0,\n  \"call_id\": %lld,\n  \"tag_name\": %s,\n  "
             "\"message\": %s,\n  \"group_mates\": %s\n }",
             (long long)g_rank, (long long)step, (long long)g_pp_stage, (long long)r->call_id, jtag,
             jmsg, g_mates);
    PyObject *v = PyUnicode_FromString(text);
    if (v)
        PyDict_SetItemString(g_anomalies, key, v);
    Py_XDECREF(v);
}

/* The rules over one row; returns how many anomalies were printed. */
static int scan_row(const mon_row_t *r, int64_t step, int quiet)
{
    char tag[600], msg[1200], cur[40], avg_s[40];
    int said = 0;
    row_tag(r, tag, sizeof tag);
    for (size_t o = 0; o < g_cfg->n_ops; o++) {
        msp_mon_op_t op = g_cfg->ops[o];
        double v = r->st.have == 1 ? r->st.v[op] : NAN;
        double avg = history(tag, msp_mon_op_names[op], v);
        const char *fired = NULL;
        for (size_t k = 0; k < g_cfg->n_rules && !fired; k++) {
            const msp_mon_rule_t *rule = &g_cfg->rules[k];
            if (rule->kind == MSP_MON_NAN &&
                (isnan(v) || (rule->has_threshold && fabs(v) > rule->threshold)))
                fired = "AnomalyNan";
            else if (rule->kind == MSP_MON_TURBULENCE && fabs(v) > avg * (1 + rule->threshold))
                fired = "AnomalyTurbulence";
        }
        if (!fired ||
            (!strcmp(fired, "AnomalyTurbulence") && op != MSP_MON_NORM && op != MSP_MON_MEAN))
            continue;
        py_float(v, cur, sizeof cur);
        py_float(avg, avg_s, sizeof avg_s);
        snprintf(msg, sizeof msg,
                 "Rule %s reports anomaly signal in ('%s', '%s') at step %lld, current value %s, "
                 "history mean %s.",
                 fired, tag, msp_mon_op_names[op], (long long)step, cur, avg_s);
        if (!quiet)
            msp_shim_msg("monitor: > %s", msg);
        said++;
        if (g_anomaly_path)
            anomaly_note(r, tag, msg, step);
    }
    return said;
}

static void write_anomalies(void)
{
    if (!g_anomaly_path || PyDict_Size(g_anomalies) == 0)
        return;
    char *tmp = msp_atomic_tmp_name(g_anomaly_path);
    FILE *f = tmp ? fopen(tmp, "w") : NULL;
    if (!f) {
        free(tmp);
        return;
    }
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    int first = 1;
    fputs("{\n", f);
    while (PyDict_Next(g_anomalies, &pos, &k, &v)) {
        PyObject *kb = PyUnicode_AsUTF8String(k), *vb = PyUnicode_AsUTF8String(v);
        char jk[800];
        if (kb && vb) {
            json_str(jk, sizeof jk, PyBytes_AsString(kb));
            fprintf(f, "%s %s: %s", first ? "" : ",\n", jk, PyBytes_AsString(vb));
            first = 0;
        }
        Py_XDECREF(kb);
        Py_XDECREF(vb);
    }
    fputs("\n}", f);
    if (fclose(f) == 0)
        msp_atomic_commit(tmp, g_anomaly_path);
    else
        msp_atomic_discard(tmp);
    free(tmp);
    if (PyErr_Occurred())
        PyErr_Clear();
}

/* The first step whose statistics hold a NaN or an Inf, said once. */
static void say_nonfinite(int64_t step)
{
    for (size_t i = 0; i < g_nrows && !g_said_nonfinite; i++) {
        const mon_row_t *r = &g_rows[i];
        if (r->st.have != 1)
            continue;
        int bad = r->st.v[MSP_MON_NANS] > 0;
        for (int k = 0; k < MSP_MON_NOPS; k++)
            bad |= !isfinite(r->st.v[k]);
        if (!bad)
            continue;
        char tag[600];
        row_tag(r, tag, sizeof tag);
        msp_shim_msg("monitor: step %lld is the first with NaN or Inf: %s (%s_%lld-%lld.csv "
                     "in %s)",
                     (long long)step, tag, g_task_file[r->task],
                     (long long)(step / g_cfg->step_count_per_record *
                                 g_cfg->step_count_per_record),
                     (long long)(step / g_cfg->step_count_per_record *
                                     g_cfg->step_count_per_record +
                                 g_cfg->step_count_per_record - 1),
                     g_dir);
        g_said_nonfinite = 1;
    }
}

/* A step's rows on their way to the CSV files (msp_mon_out_write). */
typedef struct mon_batch {
    mon_row_t *rows;
    size_t n;
    int64_t step;
} mon_batch_t;

void msp_mon_out_write(void *arg)
{
    mon_batch_t *b = arg;
    for (int t = 0; t < MSP_MT_NTASKS; t++)
        write_task(b->rows, b->n, (msp_mon_task_t)t, b->step);
    for (size_t i = 0; i < b->n; i++)
        free(b->rows[i].name);
    free(b->rows);
    free(b);
}

void *msp_mon_out_step(int64_t step)
{
    int64_t t0 = msp_mon_clock();
    mon_batch_t *b = NULL;
    g_steps_written++;
    msp_mon_stats_flush(stat_at);
    if (ensure_dirs() == 0) {
        if (!g_said_nonfinite)
            say_nonfinite(step);
        int said = 0;
        for (size_t i = 0; g_cfg->n_rules && i < g_nrows; i++)
            said += scan_row(&g_rows[i], step, said >= 20);
        if (said > 20)
            msp_shim_msg("monitor: > ... %d more anomalies at step %lld%s", said - 20,
                         (long long)step, g_anomaly_path ? " (all in anomaly.json)" : "");
        write_anomalies();
        /* the rows go with the batch; the next step starts a new array */
        if (g_nrows && (b = malloc(sizeof *b))) {
            *b = (mon_batch_t){g_rows, g_nrows, step};
            g_rows = NULL;
            g_nrows = g_caprows = 0;
        }
    }
    msp_mon_out_discard();
    msp_mon_spent(MSP_MON_T_WRITE, t0);
    return b;
}
