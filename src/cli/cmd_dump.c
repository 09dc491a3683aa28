/* msprobe dump -- cmd: the faketime pattern. Validate the config and the dump
 * directory first (a bad config must stop the run before any training time is
 * spent), then set MSPROBE_PATH, append the shim to LD_PRELOAD and exec the
 * command in place, so its exit status, signals and pid are the command's own. */
#include "cli.h"

#include "msprobe/config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MSP_PRELOAD_NAME "libmsprobe_preload.so"
#define MSP_EXIT_NOEXEC 126
#define MSP_EXIT_NOTFOUND 127

/* The options as parsed (bound in the table below). */
static struct {
    const char *config;
    int list_apis;
    int pack_kib; /* -1: not given */
} msp_da;

static const msp_opt_t msp_dump_opts[] = {
    MSP_OPT('c', "config", "FILE",
            "msprobe.json to use (default: $MSPROBE_PATH,\nelse ./msprobe.json)",
            MSP_BIND(STRING, &msp_da.config)),
    MSP_OPT(256, "list-apis", NULL,
            "print the APIs the shim dumps under this torch\n(runs PYTHON, default python3, with "
            "the shim)",
            MSP_BIND(TRUE, &msp_da.list_apis)),
    MSP_OPT(257, "pack-kib", "K",
            "write tensors of fewer than K KiB (1 to 1024)\ninto /packed, as MSPROBE_PACK_KIB "
            "does\n(format_version 4; 0: a dataset each)",
            MSP_BIND_INT(&msp_da.pack_kib, 0, 1024)),
    MSP_OPT('h', "help", NULL, "this help"),
    {.id = 0},
};

static const msp_cmd_doc_t msp_dump_doc = {
    .cmd = "dump",
    .usage = "Usage: msprobe dump [-c msprobe.json] [--] COMMAND [ARGS...]\n"
             "       msprobe dump --list-apis [--] [PYTHON [ARGS...]]",
    .about = "Run COMMAND (e.g. python train.py) with the msprobe shim preloaded: every\n"
             "Python process it starts dumps the APIs and modules msprobe.json selects to\n"
             "dump_path/step{N}/rank{R}/dump.h5, and collects the config_check pack.\n"
             "The config is checked, and dump_path created, before COMMAND starts.\n",
    .tail = "Environment: MSPROBE_PATH (config), MSPROBE_PRELOAD_LIB (shim to preload\n"
            "instead of the one installed with msprobe), MSPROBE_LOG_FILE (where the\n"
            "shim's messages go; default stderr), MSPROBE_PACK_KIB (--pack-kib).\n"
            "\n"
            "--list-apis runs PYTHON [ARGS...] -c 'import torch' with the shim, which\n"
            "lists the APIs it discovers in that torch: one \"NAME<TAB>RECORD\" line each\n"
            "(RECORD: the dump record's prefix), after '#' lines saying which torch and\n"
            "how the list was made. Exit status 0, or 1 when PYTHON cannot import torch.\n"
            "\n"
            "Exit status: COMMAND's own (msprobe replaces itself with it); 2 when the\n"
            "config is invalid or the shim cannot be found (COMMAND does not run);\n"
            "126 when COMMAND cannot be executed; 127 when it is not found.\n"
            "See msprobe-dump(1) and msprobe.json(5).\n",
    .opts = msp_dump_opts,
    .help_width = 17,
    .stop_at_operand = 1, /* the first operand starts COMMAND; its options stay its own */
};

/* Which config to use, and where we looked when there is none. */
static int msp_dump_pick_config(const char *opt, char **out)
{
    const char *env = getenv("MSPROBE_PATH");
    *out = NULL;
    if (opt) {
        if (access(opt, F_OK) != 0 && (errno == ENOENT || errno == ENOTDIR)) {
            msp_errorf("dump: config file %s (from -c) not found", opt);
            return MSP_EXIT_USAGE;
        }
        *out = strdup(opt);
    } else if (env && *env) {
        if (access(env, F_OK) != 0 && (errno == ENOENT || errno == ENOTDIR)) {
            msp_errorf("dump: config file %s (from MSPROBE_PATH) not found", env);
            return MSP_EXIT_USAGE;
        }
        *out = strdup(env);
    } else {
        if (access("msprobe.json", F_OK) != 0) {
            msp_errorf("dump: no config: MSPROBE_PATH is not set and ./msprobe.json does not "
                       "exist; give one with -c FILE");
            return MSP_EXIT_USAGE;
        }
        *out = strdup("msprobe.json");
    }
    if (!*out) {
        msp_errorf("dump: out of memory");
        return MSP_EXIT_USAGE;
    }
    /* a FIFO would block here and in every process the shim starts */
    if (msp_opt_file(&msp_dump_doc,
                     opt           ? "-c"
                     : env && *env ? "MSPROBE_PATH"
                                   : "msprobe.json",
                     *out)) {
        free(*out);
        *out = NULL;
        return MSP_EXIT_USAGE;
    }
    return MSP_EXIT_OK;
}

/* Create `dir` and check we may write into it, so a typo in dump_path fails now
 * rather than as a warning deep inside training. */
static int msp_dump_check_dir(const char *dir, const char *what, const char *cfgname)
{
    msp_err rc = msp_mkdirs(dir);
    if (rc != MSP_OK) {
        msp_errorf("dump: %s: %s %s cannot be created: %s", cfgname, what, dir, msp_last_error());
        return MSP_EXIT_USAGE;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        msp_errorf("dump: %s: %s %s is not writable: %s", cfgname, what, dir, strerror(errno));
        return MSP_EXIT_USAGE;
    }
    return MSP_EXIT_OK;
}

static int msp_dump_check_outputs(const msp_cli_ctx_t *ctx, const msp_config_t *cfg,
                                  const char *cmd)
{
    int ex = MSP_EXIT_OK;
    if (cfg->has_dump)
        ex = msp_dump_check_dir(cfg->dump_path, "dump_path", cfg->source);
    /* A bare file name goes to the working directory: not checked here. */
    if (ex == MSP_EXIT_OK && cfg->has_config_check && strchr(cfg->cc_output_zip_path, '/')) {
        char *dir = msp_parent_dir(cfg->cc_output_zip_path);
        if (!dir) {
            msp_errorf("dump: out of memory");
            return MSP_EXIT_USAGE;
        }
        ex = msp_dump_check_dir(dir, "the directory of config_check.output_zip_path", cfg->source);
        free(dir);
    }
    if (!cfg->has_dump && !cfg->has_config_check)
        msp_warnf(ctx,
                  "dump: %s has neither \"dump\" nor \"config_check\": %s runs without "
                  "recording anything",
                  cfg->source, cmd);
    return ex;
}

/* ld.so splits LD_PRELOAD on spaces and colons; a path holding either would be
 * cut in two, so it is refused rather than silently not loaded. */
static int msp_dump_usable(const char *path)
{
    return path[strcspn(path, " :")] == '\0' && access(path, R_OK) == 0;
}

/* The shim: $MSPROBE_PRELOAD_LIB, else beside this executable, in the
 * installed layout (bin/ and lib/, lib64/ or a Debian multiarch lib/) or
 * the build tree's (src/cli/ and src/dump/). */
char *msp_cli_find_preload(const char *cmd)
{
    static const char *const rel[] = {
        "../lib/" MSP_PRELOAD_NAME,
        "../lib64/" MSP_PRELOAD_NAME,
#if defined(__x86_64__)
        "../lib/x86_64-linux-gnu/" MSP_PRELOAD_NAME,
#elif defined(__aarch64__)
        "../lib/aarch64-linux-gnu/" MSP_PRELOAD_NAME,
#endif
        "../dump/" MSP_PRELOAD_NAME,
    };
    const char *env = getenv("MSPROBE_PRELOAD_LIB");
    if (env && *env) {
        if (access(env, R_OK) != 0) {
            msp_errorf("%s: MSPROBE_PRELOAD_LIB=%s: %s", cmd, env, strerror(errno));
            return NULL;
        }
        /* Absolute, so the child may chdir; symlinks kept as the user named them. */
        char cwd[PATH_MAX];
        char *abs = env[0] == '/'             ? strdup(env)
                    : getcwd(cwd, sizeof cwd) ? msp_asprintf("%s/%s", cwd, env)
                                              : NULL;
        if (!abs || !msp_dump_usable(abs)) {
            msp_errorf("%s: MSPROBE_PRELOAD_LIB=%s: cannot be preloaded (the path may not "
                       "contain spaces or colons)",
                       cmd, env);
            free(abs);
            return NULL;
        }
        return abs;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        msp_errorf("%s: cannot find the msprobe executable (/proc/self/exe: %s); set "
                   "MSPROBE_PRELOAD_LIB to the path of " MSP_PRELOAD_NAME,
                   cmd, strerror(errno));
        return NULL;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char *cand = msp_asprintf("%s/%s", self, rel[i]);
        char *abs = cand ? realpath(cand, NULL) : NULL;
        free(cand);
        if (abs && msp_dump_usable(abs))
            return abs;
        free(abs);
    }
    msp_errorf("%s: " MSP_PRELOAD_NAME " not found beside %s (looked in ../lib, ../lib64, "
               "../lib/<multiarch> and ../dump); set MSPROBE_PRELOAD_LIB to its path",
               cmd, self);
    return NULL;
}

/* Keep whatever the user preloads (ASan, jemalloc, ...) and add ours last;
 * already present (a nested msprobe dump) → unchanged. */
char *msp_cli_ld_preload(const char *old, const char *lib)
{
    if (!old || old[strspn(old, " :")] == '\0')
        return strdup(lib);
    size_t len = strlen(lib);
    for (const char *p = old; *p;) {
        p += strspn(p, " :");
        size_t tok = strcspn(p, " :");
        if (tok == len && strncmp(p, lib, len) == 0)
            return strdup(old);
        p += tok;
    }
    size_t olen = strlen(old);
    int sep = strchr(" :", old[olen - 1]) == NULL;
    return msp_asprintf("%s%s%s", old, sep ? ":" : "", lib);
}

/* --list-apis: run `PYTHON [ARGS] -c "import torch"` with the shim told to
 * write its API list to a temp file (MSPROBE_LIST_APIS), then print it. */
static int msp_dump_list_apis(char **py)
{
    static char *const dflt[] = {"python3", NULL};
    char tmpl[] = "/tmp/msprobe-apis-XXXXXX";
    char *lib = NULL, *preload = NULL, **argv = NULL;
    int ex = MSP_EXIT_USAGE, fd = -1, made = 0;
    FILE *f = NULL;
    if (!py || !py[0])
        py = (char **)dflt;
    size_t n = 0;
    while (py[n])
        n++;
    if (!(lib = msp_cli_find_preload("dump")))
        goto cleanup;
    preload = msp_cli_ld_preload(getenv("LD_PRELOAD"), lib);
    argv = calloc(n + 3, sizeof *argv);
    if (!preload || !argv || (fd = mkstemp(tmpl)) < 0) {
        msp_errorf("dump: --list-apis: %s", preload && argv ? strerror(errno) : "out of memory");
        goto cleanup;
    }
    made = 1;
    memcpy(argv, py, n * sizeof *argv);
    argv[n] = "-c";
    argv[n + 1] = "import torch";
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        unsetenv("MSPROBE_PATH");
        unsetenv("MSPROBE_CONFIG_CHECK");
        if (setenv("MSPROBE_LIST_APIS", tmpl, 1) == 0 && setenv("LD_PRELOAD", preload, 1) == 0)
            execvp(argv[0], argv);
        msp_errorf("dump: --list-apis: cannot run %s: %s", argv[0], strerror(errno));
        _exit(MSP_EXIT_FAIL);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0) {
        msp_errorf("dump: --list-apis: cannot run %s: %s", argv[0], strerror(errno));
        goto cleanup;
    }
    ex = MSP_EXIT_FAIL;
    f = fdopen(fd, "r");
    if (f)
        fd = -1;
    char line[512];
    int any = 0;
    while (f && fgets(line, sizeof line, f)) {
        fputs(line, stdout);
        any = 1;
    }
    if (!any) {
        msp_errorf("dump: --list-apis: %s found no torch to list (%s %d)", argv[0],
                   WIFEXITED(st) ? "exit status" : "signal",
                   WIFEXITED(st)     ? WEXITSTATUS(st)
                   : WIFSIGNALED(st) ? WTERMSIG(st)
                                     : -1);
        goto cleanup;
    }
    ex = fflush(stdout) == 0 ? MSP_EXIT_OK : MSP_EXIT_FAIL;
cleanup:
    if (f)
        fclose(f);
    if (fd >= 0)
        close(fd);
    if (made)
        unlink(tmpl);
    free(argv);
    free(lib);
    free(preload);
    return ex;
}

int msp_cmd_dump(msp_cli_ctx_t *ctx, int argc, char **argv)
{
    msp_da.config = NULL;
    msp_da.list_apis = 0;
    msp_da.pack_kib = -1;
    char *cfgpath = NULL, *abscfg = NULL, *lib = NULL, *preload = NULL;
    msp_config_t cfg = {0};
    int ex = MSP_EXIT_USAGE, c;

    while ((c = msp_opt_next(&msp_dump_doc, argc, argv)) != -1) {
        switch (c) {
        case 'h':
            msp_cmd_help(&msp_dump_doc, stdout);
            return MSP_EXIT_OK;
        default:
            return MSP_EXIT_USAGE;
        }
    }
    const char *opt_config = msp_da.config;
    if (msp_da.list_apis)
        return msp_dump_list_apis(argv + optind);
    if (optind >= argc) {
        msp_errorf("dump: no command to run (e.g. msprobe dump -- python train.py)");
        return MSP_EXIT_USAGE;
    }
    char **cmd = argv + optind;

    if ((ex = msp_dump_pick_config(opt_config, &cfgpath)) != MSP_EXIT_OK)
        goto cleanup;
    ex = MSP_EXIT_USAGE;
    msp_err rc = msp_config_load(cfgpath, &cfg);
    if (rc != MSP_OK) {
        msp_report_error(rc);
        goto cleanup;
    }
    /* The shim before the directories: a failed start leaves nothing behind. */
    if (!(lib = msp_cli_find_preload("dump")))
        goto cleanup;
    if ((ex = msp_dump_check_outputs(ctx, &cfg, cmd[0])) != MSP_EXIT_OK)
        goto cleanup;
    ex = MSP_EXIT_USAGE;
    abscfg = realpath(cfgpath, NULL);
    preload = msp_cli_ld_preload(getenv("LD_PRELOAD"), lib);
    if (!abscfg || !preload) {
        msp_errorf("dump: %s: %s", cfgpath, abscfg ? "out of memory" : strerror(errno));
        goto cleanup;
    }
    /* -q and -v reach the shim: its library messages at the same level. */
    const char verbose[2] = {(char)('0' + (ctx->verbosity > 3 ? 3 : ctx->verbosity)), '\0'};
    char pack[8];
    snprintf(pack, sizeof pack, "%d", msp_da.pack_kib);
    if (setenv("MSPROBE_PATH", abscfg, 1) != 0 || setenv("LD_PRELOAD", preload, 1) != 0 ||
        (ctx->verbosity != 1 && setenv("MSPROBE_VERBOSE", verbose, 1) != 0) ||
        (msp_da.pack_kib >= 0 && setenv("MSPROBE_PACK_KIB", pack, 1) != 0)) {
        msp_errorf("dump: cannot set the environment: %s", strerror(errno));
        goto cleanup;
    }
    msp_log(MSP_LOG_INFO, "dump: MSPROBE_PATH=%s LD_PRELOAD=%s", abscfg, preload);
    fflush(NULL);
    execvp(cmd[0], cmd);
    /* Only reached when exec failed; the shell's codes: 127 not found, 126 not runnable. */
    int err = errno;
    ex = (err == ENOENT || err == ENOTDIR) ? MSP_EXIT_NOTFOUND : MSP_EXIT_NOEXEC;
    /* "msprobe dump -- train.py": a script named without its interpreter. */
    size_t cl = strlen(cmd[0]);
    const char *hint = cl > 3 && strcmp(cmd[0] + cl - 3, ".py") == 0
                           ? "; run a Python script through its interpreter: msprobe dump -- "
                             "python "
                           : NULL;
    if (err == ENOENT && !strchr(cmd[0], '/'))
        msp_errorf("dump: %s: command not found (not in PATH)%s%s", cmd[0], hint ? hint : "",
                   hint ? cmd[0] : "");
    else
        msp_errorf("dump: cannot run %s: %s%s%s", cmd[0], strerror(err), hint ? hint : "",
                   hint ? cmd[0] : "");
cleanup:
    msp_config_free(&cfg);
    free(cfgpath);
    free(abscfg);
    free(lib);
    free(preload);
    return ex;
}
