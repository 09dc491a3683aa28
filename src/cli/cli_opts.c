/* One option table per command (git's parse-options): the getopt_long table
 * and optstring, the option lines of --help and the usage errors are all made
 * from it, so an option cannot be parsed but undocumented, or documented but
 * unknown. An option that is only stored (a path, a flag, a number, a whole
 * number in a range, one of some words) is bound to its variable in the table
 * and parsed, checked and stored here, its errors naming it as typed; the
 * command's switch keeps the options that need checks of their own. tests/docs checks each man page
 * against the same tables. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>

#define MSP_OPT_MAX 32

static size_t msp_opt_count(const msp_opt_t *o)
{
    size_t n = 0;
    while (o && o[n].name)
        n++;
    return n;
}

static void msp_opt_left(const msp_opt_t *o, char *buf, size_t size)
{
    if (o->id > 0 && o->id < 256)
        snprintf(buf, size, "-%c, --%s%s%s", o->id, o->name, o->arg ? " " : "",
                 o->arg ? o->arg : "");
    else
        snprintf(buf, size, "    --%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
}

void msp_cmd_help(const msp_cmd_doc_t *d, FILE *out)
{
    if (d->usage)
        fprintf(out, "%s\n", d->usage);
    if (d->about)
        fprintf(out, "\n%s", d->about);
    fprintf(out, "\n%s:\n", d->options_title ? d->options_title : "Options");
    for (const msp_opt_t *o = d->opts; o && o->name; o++) {
        char left[96];
        msp_opt_left(o, left, sizeof left);
        int width = d->help_width ? d->help_width : 20;
        /* Continuation lines of a help text start under its first line. */
        const char *h = o->help, *nl;
        fprintf(out, "  %-*s  ", width, left);
        while ((nl = strchr(h, '\n')) != NULL) {
            fprintf(out, "%.*s\n%*s", (int)(nl - h), h, width + 4, "");
            h = nl + 1;
        }
        fprintf(out, "%s\n", h);
    }
    if (d->tail)
        fprintf(out, "\n%s", d->tail);
}

int msp_cmd_usage_error(const msp_cmd_doc_t *d, const char *fmt, ...)
{
    char pre[96], post[96];
    snprintf(pre, sizeof pre, "msprobe: %s%s", d->cmd ? d->cmd : "", d->cmd ? ": " : "");
    snprintf(post, sizeof post, " (try 'msprobe%s%s --help')\n", d->cmd ? " " : "",
             d->cmd ? d->cmd : "");
    va_list ap;
    va_start(ap, fmt);
    msp_tvline(stderr, pre, fmt, ap, post);
    va_end(ap);
    return MSP_EXIT_USAGE;
}

int msp_opt_file(const msp_cmd_doc_t *d, const char *opt, const char *path)
{
    if (msp_check_regular(path) == MSP_OK)
        return MSP_EXIT_OK;
    msp_errorf("%s%s%s: %s", d->cmd ? d->cmd : "", d->cmd ? ": " : "", opt, msp_last_error());
    return MSP_EXIT_USAGE;
}

static const msp_opt_t *msp_opt_of(const msp_cmd_doc_t *d, int id)
{
    for (const msp_opt_t *o = d->opts; o && o->name; o++)
        if (o->id == id)
            return o;
    return NULL;
}

int msp_opt_double(const msp_cmd_doc_t *d, const char *opt, const char *value, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(value, &end);
    if (end == value || *end != '\0' || errno == ERANGE || !isfinite(v))
        return msp_cmd_usage_error(d, "%s: '%s' is not a number", opt, value);
    *out = v;
    return MSP_EXIT_OK;
}

/* The option getopt_long just returned as it was typed ("-l" or "--level"),
 * for its errors: its value is the next argument or part of the same one. */
static void msp_opt_typed(const msp_opt_t *o, char **argv, char *buf, size_t n)
{
    const char *a = optind >= 2 && optarg == argv[optind - 1] ? argv[optind - 2] : argv[optind - 1];
    if (o->id > 0 && o->id < 256 && a[0] == '-' && a[1] != '-')
        snprintf(buf, n, "-%c", o->id);
    else
        snprintf(buf, n, "--%s", o->name);
}

static int msp_opt_int(const msp_cmd_doc_t *d, const msp_opt_t *o, const char *opt,
                       const char *value)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (!*value || *end || errno == ERANGE || v < o->lo || v > o->hi)
        return msp_cmd_usage_error(d, "%s: '%s' is not a whole number from %ld to %ld", opt, value,
                                   o->lo, o->hi);
    *(int *)o->to = (int)v;
    return MSP_EXIT_OK;
}

static int msp_opt_enum(const msp_cmd_doc_t *d, const msp_opt_t *o, const char *opt,
                        const char *value)
{
    char list[256] = "";
    size_t at = 0, n = 0;
    while (o->words[n].word)
        n++;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(value, o->words[i].word)) {
            memcpy(o->to, &o->words[i].value, sizeof(int)); /* an int or an int-sized enum */
            return MSP_EXIT_OK;
        }
        msp_str_add(list, sizeof list, &at, i == 0 ? "" : i + 1 == n ? " or " : ", ");
        msp_str_add(list, sizeof list, &at, o->words[i].word);
    }
    return msp_cmd_usage_error(d, "%s: '%s' is not %s", opt, value, list);
}

/* A bound option's value into its variable; -1 after the usage error. */
static int msp_opt_store(const msp_cmd_doc_t *d, const msp_opt_t *o, char **argv, const char *value)
{
    char opt[72];
    msp_opt_typed(o, argv, opt, sizeof opt);
    switch (o->bind) {
    case MSP_OPT_STRING:
        *(const char **)o->to = value;
        return 0;
    case MSP_OPT_TRUE:
    case MSP_OPT_FALSE:
        *(int *)o->to = o->bind == MSP_OPT_TRUE;
        return 0;
    case MSP_OPT_DOUBLE:
        return msp_opt_double(d, opt, value, (double *)o->to) == MSP_EXIT_OK ? 0 : -1;
    case MSP_OPT_INT:
        return msp_opt_int(d, o, opt, value) == MSP_EXIT_OK ? 0 : -1;
    case MSP_OPT_ENUM:
        return msp_opt_enum(d, o, opt, value) == MSP_EXIT_OK ? 0 : -1;
    default:
        return 0;
    }
}

int msp_opt_next(const msp_cmd_doc_t *d, int argc, char **argv)
{
    struct option lo[MSP_OPT_MAX + 1];
    char shorts[3 * MSP_OPT_MAX + 3];
    size_t n = msp_opt_count(d->opts), k = 0;
    if (n > MSP_OPT_MAX)
        n = MSP_OPT_MAX;
    if (d->stop_at_operand)
        shorts[k++] = '+'; /* the first operand starts a command with its own options */
    shorts[k++] = ':';     /* a missing value is ':', told apart from an unknown option */
    for (size_t i = 0; i < n; i++) {
        const msp_opt_t *o = &d->opts[i];
        lo[i] = (struct option){o->name, o->arg ? required_argument : no_argument, NULL, o->id};
        if (o->id > 0 && o->id < 256) {
            shorts[k++] = (char)o->id;
            if (o->arg)
                shorts[k++] = ':';
        }
    }
    lo[n] = (struct option){NULL, 0, NULL, 0};
    shorts[k] = '\0';
    opterr = 0; /* our one-line "msprobe: " messages, not getopt's */
    int c;
    const msp_opt_t *o;
    while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1 && (o = msp_opt_of(d, c)) &&
           o->bind != MSP_OPT_CALLER)
        if (msp_opt_store(d, o, argv, optarg) != 0)
            return MSP_OPT_ERROR;
    if (c == ':') {
        if (optopt > 0 && optopt < 256)
            msp_cmd_usage_error(d, "option -%c needs a value", optopt);
        else
            msp_cmd_usage_error(d, "option %s needs a value", argv[optind - 1]);
        return MSP_OPT_ERROR;
    }
    if (c == '?') {
        if (optopt > 0 && optopt < 256)
            msp_cmd_usage_error(d, "unknown option '-%c'", optopt);
        else
            msp_cmd_usage_error(d, "unknown option '%s'", argv[optind - 1]);
        return MSP_OPT_ERROR;
    }
    return c;
}
