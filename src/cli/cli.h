/* Shared by the msprobe front end's subcommands. The CLI owns stdout/stderr:
 * help goes to stdout, errors to stderr as "msprobe: ...". Exit codes:
 *   0  success (compare/config_check: everything passed)
 *   1  compare or config_check found a failing record or item
 *   2  usage error, or bad input (missing path, malformed file, bad config)
 *   3  compare: the report is written but incomplete or contradicted (a step
 *      could not be read, or tensor data fails its stored CRC-32)
 *   4  compare under MPI: a process of the launch sent no sign of life for
 *      --mpi-timeout seconds; the launch is ended
 *   128+N  ended by signal N (SIGTERM, SIGINT, SIGHUP): cli_signal.c
 */
#ifndef MSPROBE_CLI_H
#define MSPROBE_CLI_H

#include "msprobe/common.h"

#include <stdarg.h>
#include <stdio.h>

#define MSP_EXIT_OK 0
#define MSP_EXIT_FAIL 1
#define MSP_EXIT_USAGE 2
#define MSP_EXIT_INCOMPLETE 3
#define MSP_EXIT_PEER 4

typedef struct msp_cli_ctx {
    const char *framework; /* from -f; "pytorch" */
    int verbosity;         /* 0 quiet, 1 normal, 2 verbose (-v), 3 debug (-vv) */
} msp_cli_ctx_t;

typedef int (*msp_cmd_fn)(msp_cli_ctx_t *ctx, int argc, char **argv);

int msp_cmd_compare(msp_cli_ctx_t *ctx, int argc, char **argv);

/* ---- MPI (cli_mpi.c; msprobe-compare(1), MPI) ----------------------------- */

struct msp_compare_net;
/* The network of this MPI launch (MPI started here), or NULL when no MPI
 * launcher started this process or msprobe was built without MPI. Its
 * exchanges end, naming the process, once a process they need has sent no
 * sign of life for timeout seconds (0: they wait forever). */
const struct msp_compare_net *msp_cli_mpi_start(int *argc, char ***argv, double timeout);
/* 1 once an exchange found a process silent: the error says which, every
 * process that found it prints it, and msp_cli_mpi_finish ends the launch. */
int msp_cli_mpi_broken(void);
/* Ends MPI if started; returns process 0's exit status on every process. If
 * a process fell silent it ends the launch instead (MPI_Abort with
 * MSP_EXIT_PEER) and does not return. */
int msp_cli_mpi_finish(int code);
/* 1 when built with MPI. */
int msp_cli_mpi_built(void);
/* ---- stopped by a signal (cli_signal.c) ------------------------------------ */

/* What became of the report when a signal ends the command. */
enum {
    MSP_STOP_NO_REPORT = 0, /* nothing written yet */
    MSP_STOP_WRITING,       /* reports being written: some may be there, the rest not */
    MSP_STOP_WRITTEN,       /* every report written */
    MSP_STOP_OTHERS_WRITE   /* under MPI, a process other than 0: it writes none */
};
/* From now on SIGTERM, SIGINT and SIGHUP (those not ignored) end the process
 * with one line on stderr, "msprobe: CMD: stopped by SIGTERM (signal 15)[ on
 * process R of N]: no report written" (or what msp_cli_stop_stage says), the
 * pending temp files removed (msp_atomic_unlink_pending), and then by the
 * signal itself (status 128+N). cmd and out_dir must outlive the process. */
void msp_cli_stop_arm(const char *cmd, const char *out_dir);
void msp_cli_stop_stage(int stage);
/* This process is rank of size (size > 1 adds "on process R of N"). */
void msp_cli_stop_where(int rank, int size);
/* Under MPI, process seen_by found process silent for seconds: the line says
 * so (mpirun's SIGTERM that follows then explains itself). */
void msp_cli_stop_peer_silent(int silent, int seen_by, int seconds);

int msp_cmd_ls(msp_cli_ctx_t *ctx, int argc, char **argv);
int msp_cmd_dump(msp_cli_ctx_t *ctx, int argc, char **argv);
int msp_cmd_monitor(msp_cli_ctx_t *ctx, int argc, char **argv);
/* The shim to preload (cmd_dump.c): $MSPROBE_PRELOAD_LIB, else beside this
 * executable; an absolute path (malloc'd), or NULL after an error naming cmd. */
char *msp_cli_find_preload(const char *cmd);
/* LD_PRELOAD old with lib appended (kept as is when lib is there); malloc'd. */
char *msp_cli_ld_preload(const char *old, const char *lib);
int msp_cmd_config_check(msp_cli_ctx_t *ctx, int argc, char **argv);
int msp_cmd_export(msp_cli_ctx_t *ctx, int argc, char **argv);
int msp_cmd_overflow_check(msp_cli_ctx_t *ctx, int argc, char **argv);
int msp_cmd_acc_check(msp_cli_ctx_t *ctx, int argc, char **argv);
int msp_cmd_api_precision_compare(msp_cli_ctx_t *ctx, int argc, char **argv);
int msp_cmd_merge_result(msp_cli_ctx_t *ctx, int argc, char **argv);
int msp_cmd_locate(msp_cli_ctx_t *ctx, int argc, char **argv);

/* ---- compare on monitor outputs (cmd_compare_monitor.c) ------------------- */

/* 1 when bench or cmp is a monitor output (msprobe-compare(1), MONITOR
 * OUTPUTS): msp_compare_monitor then compares them, or says one is not. */
int msp_compare_is_monitor(const char *bench, const char *cmp);
/* The compare of two monitor outputs: reports in out_dir (result.html unless
 * html is 0), the verdict line on stdout; the exit status (0 no divergent
 * step, 1 one found, 2 bad input). */
int msp_compare_monitor(const char *bench, const char *cmp, const char *out_dir, int quiet,
                        int html);
/* Its lines (msprobe-compare(1), MONITOR OUTPUTS), for locate too: how the
 * runs differ from the start, and the first divergent step or why none; and
 * a run's first NaN or Inf ("first NaN/Inf (SIDE): step N rank R ..."). */
struct msp_mon_cmp;
struct msp_mon_nan;
void msp_mon_print_verdict(FILE *out, const struct msp_mon_cmp *c);
void msp_mon_print_nan(FILE *out, const char *side, const struct msp_mon_nan *n);

/* ---- option tables ------------------------------------------------------ */

/* One option of a command. getopt_long's table, the optstring, the option
 * lines of --help and the usage errors all come from an array of these
 * ending in {0}; tests/docs checks each man page lists the same options. */
/* How msp_opt_next stores an option bound to a variable (git's OPT_STRING,
 * OPT_BOOL): such an option is never returned to the caller's switch, which
 * keeps only the options that need more than storing. */
enum {
    MSP_OPT_CALLER = 0, /* returned: the caller handles it */
    MSP_OPT_STRING,     /* const char **: the value (optarg) */
    MSP_OPT_TRUE,       /* int *: 1 */
    MSP_OPT_FALSE,      /* int *: 0 */
    MSP_OPT_DOUBLE,     /* double *: a finite number, else "--NAME: 'V' is not a number" */
    MSP_OPT_INT,        /* int *: a whole number from lo to hi, else "OPT: 'V' is not a
                           whole number from LO to HI" */
    MSP_OPT_ENUM,       /* an int or enum variable: the value of one of names, else
                           "OPT: 'V' is not A, B or C" */
};
/* An MSP_OPT_ENUM option's words and the value each stores; ends with {NULL}. */
typedef struct msp_opt_word {
    const char *word;
    int value;
} msp_opt_word_t;
/* A table row: MSP_OPT(ID, NAME, ARG, HELP) for an option the caller handles,
 * MSP_OPT(ID, NAME, ARG, HELP, MSP_BIND(STRING, &args.bench)) for one stored
 * into its variable (static storage) as it comes, and MSP_BIND_INT(&v, LO, HI)
 * or MSP_BIND_ENUM(&v, words) for a number in a range or one of some words.
 * Errors name the option as it was typed (-l or --level). The variable's type
 * is checked at compile time (an int for INT; an int-sized int or enum for
 * ENUM). The table ends with {.id = 0}. */
#define MSP_OPT(id_, name_, arg_, ...)                                                             \
    {                                                                                              \
        .id = (id_), .name = (name_), .arg = (arg_), .help = __VA_ARGS__                           \
    }
#define MSP_BIND(kind, ptr) .bind = MSP_OPT_##kind, .to = (void *)(ptr)
#define MSP_BIND_INT(ptr, lo_, hi_)                                                                \
    .bind = MSP_OPT_INT, .to = (void *)(1 ? (ptr) : (int *)0), .lo = (lo_), .hi = (hi_)
#define MSP_BIND_ENUM(ptr, words_)                                                                 \
    .bind = MSP_OPT_ENUM, .to = (void *)(ptr), .words = (words_), .lo = MSP_INT_SIZED(ptr)
/* 1, or a compile error (an array of -1 chars) when *ptr is not int-sized. */
#define MSP_INT_SIZED(ptr) (long)sizeof(char[sizeof *(ptr) == sizeof(int) ? 1 : -1])

typedef struct msp_opt {
    int id;           /* what msp_opt_next returns: the short letter, or >= 256 for
                         an option with a long name only */
    const char *name; /* long name, without "--" */
    const char *arg;  /* the value's placeholder in --help ("PATH"); NULL: a flag */
    const char *help; /* help text; '\n' continues it on an indented line */
    int bind;         /* MSP_OPT_CALLER, or how the option is stored into `to` */
    void *to;
    long lo, hi;                 /* MSP_OPT_INT: the range */
    const msp_opt_word_t *words; /* MSP_OPT_ENUM: the words */
} msp_opt_t;

typedef struct msp_cmd_doc {
    const char *cmd;           /* "compare"; NULL for the global options */
    const char *usage;         /* first lines of --help, "Usage: ..." */
    const char *about;         /* paragraphs between usage and options, or NULL */
    const char *tail;          /* paragraphs after the options, or NULL */
    const char *options_title; /* heading of the option lines (NULL: "Options") */
    const msp_opt_t *opts;
    int help_width;      /* width of the option column in --help (0: 20) */
    int stop_at_operand; /* the first operand ends the options (msprobe dump CMD) */
} msp_cmd_doc_t;

#define MSP_OPT_ERROR (-2)
/* The next option's id that is not bound (bound ones are stored as they come);
 * -1 at the end of the options (optind is then the first operand);
 * MSP_OPT_ERROR after printing the usage error for an unknown option, a
 * missing value or a bound value that is not of its kind. */
int msp_opt_next(const msp_cmd_doc_t *d, int argc, char **argv);
/* A finite number from value into *out: MSP_EXIT_OK, or MSP_EXIT_USAGE after
 * "OPT: 'VALUE' is not a number" (what a DOUBLE-bound option says). */
int msp_opt_double(const msp_cmd_doc_t *d, const char *opt, const char *value, double *out);
/* The file the option opt names (path), which the command will read: MSP_EXIT_OK
 * when it is a regular file, else MSP_EXIT_USAGE after "msprobe: CMD: OPT: PATH:
 * not a regular file (a FIFO, which would block): refused" (or why it cannot
 * be opened). Only stat(2): nothing is opened, so a FIFO or device never
 * blocks the command and no device sees an open. The readers check again
 * as they open (msp_open_regular), for a file swapped meanwhile. */
int msp_opt_file(const msp_cmd_doc_t *d, const char *opt, const char *path);
/* --help from the table, on out. */
void msp_cmd_help(const msp_cmd_doc_t *d, FILE *out);
/* "msprobe: CMD: <formatted> (try 'msprobe CMD --help')" on stderr; returns
 * MSP_EXIT_USAGE. */
int msp_cmd_usage_error(const msp_cmd_doc_t *d, const char *fmt, ...) MSP_PRINTF(2, 3);

/* ---- msprobe's own compare flags (cmd_compare_msprobe.c) --------------- */

typedef struct msp_compare_argv {
    int argc;
    char **argv; /* NULL-terminated; its strings are the caller's argv's */
} msp_compare_argv_t;
/* argv with msprobe 26's and 8.x's compare flags rewritten to ours (-tp ->
 * -c, -gp -> -b, -fm/-f -> --fuzzy, -dm -> --mapping, -i -> --input-json,
 * -da -> --diff-analyze, ...); flags whose request is always met (-s, -hl)
 * dropped, those meaningless for PyTorch dumps (-am, -lm) dropped with a note
 * on stderr. msprobe's own spelling of the dumps (-tp/-gp, or 8.x's -i, which
 * also means --xlsx) adds --msprobe-outputs: a script written for msprobe
 * finds msprobe's files and exit status. MSP_EXIT_OK, or MSP_EXIT_USAGE after
 * printing the error. */
int msp_compare_argv(const msp_cli_ctx_t *ctx, int argc, char **argv, msp_compare_argv_t *out);
void msp_compare_argv_free(msp_compare_argv_t *a);
/* Read msprobe 8.x's compare.json: *bench and *cmp (malloc'd) from
 * bench_path and npu_path; is_print_compare_log ORed into *print_log. */
int msp_compare_input_json(const char *path, char **bench, char **cmp, int *print_log);

/* What compare --msprobe-outputs and --diff-analyze write (msprobe-compare(1),
 * MSPROBE'S OUTPUTS). */
struct msp_compare_tree;
typedef struct msp_msprobe_reports {
    const char *bench, *cmp, *out_dir;
    int msprobe;      /* msprobe's compare_result files instead of result.xlsx */
    int xlsx, csv;    /* their kind; csv: result.csv as well */
    int diff_analyze; /* diff_analyze_{ns}.json */
    char stamp[16];   /* YYYYMMDDhhmmss when compare started, local time */
} msp_msprobe_reports_t;
/* Stamp r->stamp with the time now, as msprobe stamps its file names. */
void msp_msprobe_stamp(msp_msprobe_reports_t *r);
/* Every report of tree: those set names (msp_report_tree_write), with
 * msprobe's own files instead of result.xlsx when r asks for them, then -da's
 * file; *said gets "report: PATH" lines for msprobe's files, their
 * result.csv and -da's (malloc'd, NULL when none), *whole the whole result
 * when one was made (msp_report_tree_write). MSP_OK or the error, recorded. */
struct msp_report_set;
struct msp_compare_result;
msp_err msp_msprobe_reports_write(const struct msp_compare_tree *tree,
                                  const msp_msprobe_reports_t *r, struct msp_report_set *set,
                                  char **said, struct msp_compare_result **whole);

/* "msprobe: <formatted>\n" on stderr. */
void msp_errorf(const char *fmt, ...) MSP_PRINTF(1, 2);
/* printf to out with everything printed made fit for a terminal
 * (msp_term_clean, newlines kept): names and values from a dump or a pack
 * can hold escape sequences (ESC ] 0; ... BEL retitles a terminal, ESC [ 2 J
 * clears it). Every line that carries such text is printed through it. */
int msp_tprintf(FILE *out, const char *fmt, ...) MSP_PRINTF(2, 3);
int msp_tvprintf(FILE *out, const char *fmt, va_list ap) MSP_PRINTF(2, 0);
/* pre, the formatted text made fit for a terminal as msp_tvprintf's, and
 * post, in one write when out is unbuffered (stderr): a line in pieces can
 * be cut by another writer's text, as mpirun's banner of MPI_Abort cut
 * "msprobe: " from the rest of the line it forwarded. Returns the length of
 * the formatted text. */
int msp_tvline(FILE *out, const char *pre, const char *fmt, va_list ap, const char *post)
    MSP_PRINTF(3, 0);
/* "msprobe: warning: <formatted>\n" on stderr unless quiet. */
void msp_warnf(const msp_cli_ctx_t *ctx, const char *fmt, ...) MSP_PRINTF(2, 3);
/* Print msp_last_error() (or msp_strerror(rc)) as an error; returns MSP_EXIT_USAGE. */
int msp_report_error(msp_err rc);
/* Install a log sink honouring ctx->verbosity. */
void msp_cli_install_log(const msp_cli_ctx_t *ctx);

#endif
