/* The kept replay worker (cmp_worker_keep.h): a worker that outlives the compare
 * that started it by MSPROBE_REPLAY_KEEP seconds and serves the compares
 * that follow, so that torch is imported once for a run of compares instead
 * of once each (its import is longer than a small compare's whole metric
 * pass). Found by a unix socket in a directory only this user may enter,
 * named by a hash of everything that makes one worker differ from another:
 * the Python, the worker's source, its sandbox settings and the environment
 * that changes what torch computes. A compare that finds no server binds
 * the socket itself and hands it to the worker it starts. */
#include "cmp_worker_keep.h"

#include "msprobe/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

extern char **environ;

/* Seconds a worker stays for the next compare unless MSPROBE_REPLAY_KEEP
 * says otherwise. */
#define CMP_KEEP_DEFAULT 60.0

double cmp_keep_seconds(void)
{
    const char *v = getenv("MSPROBE_REPLAY_KEEP");
    if (!v || !*v)
        return CMP_KEEP_DEFAULT;
    char *end = NULL;
    double s = strtod(v, &end);
    if (end == v || *end || !(s >= 0) || s > 86400) {
        msp_log(MSP_LOG_WARN,
                "MSPROBE_REPLAY_KEEP=%s is not seconds from 0 to 86400; "
                "using %g",
                v, CMP_KEEP_DEFAULT);
        return CMP_KEEP_DEFAULT;
    }
    return s;
}

/* Variables that change what torch computes or how a worker runs; two
 * compares whose values differ get two workers. */
static int cmp_keep_env_counts(const char *kv)
{
    static const char *const pre[] = {
        "OMP_",  "KMP_",     "GOMP_",     "MKL",    "DNNL_",   "ONEDNN_",        "ATEN_",
        "TORCH", "PYTORCH_", "OPENBLAS_", "LD_",    "MALLOC_", "GLIBC_TUNABLES", "CUDA",
        "HIP_",  "ASAN_",    "LSAN_",     "UBSAN_", "HOME=",   "LANG=",          "LC_"};
    for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++)
        if (!strncmp(kv, pre[i], strlen(pre[i])))
            return 1;
    return 0;
}

static int cmp_keep_str_order(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* FNV-1a, 64 bits: a name, not a secret (the directory keeps others out). */
static uint64_t cmp_keep_fnv(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return (h ^ 0xff) * 0x100000001b3ULL; /* a separator: "ab","c" is not "a","bc" */
}

/* This user's directory for kept workers: $XDG_RUNTIME_DIR/msprobe, else
 * ${TMPDIR:-/tmp}/msprobe-UID; made 0700 when absent and refused unless it
 * is a directory of ours that nobody else may enter. NULL with *why. */
static char *cmp_keep_dir(const char **why)
{
    const char *run = getenv("XDG_RUNTIME_DIR"), *tmp = getenv("TMPDIR");
    char *d = run && run[0] == '/'
                  ? msp_asprintf("%s/msprobe", run)
                  : msp_asprintf("%s/msprobe-%lu", tmp && tmp[0] == '/' ? tmp : "/tmp",
                                 (unsigned long)geteuid());
    if (!d) {
        *why = "out of memory";
        return NULL;
    }
    (void)mkdir(d, 0700);
    struct stat st;
    if (lstat(d, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 077)) {
        *why = "its directory is not a private one of this user";
        free(d);
        return NULL;
    }
    return d;
}

char *cmp_keep_place(const char *python, const char *src, const char *cfg, char **dir, int say)
{
    *dir = NULL;
    const char *why = NULL;
    char *base = cmp_keep_dir(&why);
    size_t n = 0;
    for (char **e = environ; *e; e++)
        n += cmp_keep_env_counts(*e);
    const char **env = base ? calloc(n + 1, sizeof *env) : NULL;
    char *sock = NULL;
    if (base && !env)
        why = "out of memory";
    if (env) {
        size_t k = 0;
        for (char **e = environ; *e; e++)
            if (cmp_keep_env_counts(*e))
                env[k++] = *e;
        qsort(env, k, sizeof *env, cmp_keep_str_order);
        uint64_t h = 0xcbf29ce484222325ULL;
        h = cmp_keep_fnv(cmp_keep_fnv(cmp_keep_fnv(h, python), src), cfg);
        for (size_t i = 0; i < k; i++)
            h = cmp_keep_fnv(h, env[i]);
        sock = msp_asprintf("%s/replay-%016llx.sock", base, (unsigned long long)h);
        *dir = msp_asprintf("%s/replay-%016llx.d", base, (unsigned long long)h);
        struct sockaddr_un sa;
        if (!sock || !*dir)
            why = "out of memory";
        else if (strlen(sock) >= sizeof sa.sun_path)
            why = "its socket's path is too long for a unix socket";
        else if (mkdir(*dir, 0700) != 0 && errno != EEXIST)
            why = "its working directory cannot be made";
    }
    if (why) {
        if (say)
            msp_log(MSP_LOG_INFO, "replay: no kept worker (%s%s%s): one for this compare alone",
                    why, base ? ": " : "", base ? base : "");
        free(sock);
        free(*dir);
        sock = *dir = NULL;
    }
    free(env);
    free(base);
    return sock;
}

/* A unix stream socket and path's address in *sa: the descriptor, or -1
 * (errno set; a path too long for an address: ENAMETOOLONG). */
static int cmp_keep_socket(struct sockaddr_un *sa, const char *path)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof sa->sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(sa->sun_path, path, strlen(path) + 1);
    return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
}

/* Close fd and give -1, errno kept. */
static int cmp_keep_drop(int fd)
{
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}

int cmp_keep_connect(const char *path)
{
    struct sockaddr_un sa;
    int fd = cmp_keep_socket(&sa, path);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        return cmp_keep_drop(fd);
    return fd;
}

/* cmp_keep_listen under the lock. */
static int cmp_keep_bind(const char *path)
{
    struct sockaddr_un sa;
    int fd = cmp_keep_socket(&sa, path);
    if (fd < 0)
        return -1;
    struct stat st;
    /* a socket nobody answers on is a worker that is gone */
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
        int probe = cmp_keep_connect(path);
        if (probe >= 0) {
            close(probe);
            close(fd);
            errno = EADDRINUSE;
            return -1;
        }
        if (errno == ECONNREFUSED)
            (void)unlink(path);
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 64) != 0)
        return cmp_keep_drop(fd);
    /* above 3: the worker gets it as descriptor 3 (msp_child_t.fd3) */
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    close(fd);
    return hi;
}

/* An exclusive lock on path.lock, held while a compare looks for a live
 * worker at path and binds its own there: two compares that find the
 * socket dead at once must not both bind (the second would unlink the
 * first's socket and leave its worker unreachable). -1 when none can be
 * had (then no worker is kept). */
static int cmp_keep_lock(const char *path)
{
    char *lk = msp_asprintf("%s.lock", path);
    int fd = lk ? open(lk, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600) : -1;
    free(lk);
    if (fd >= 0 && flock(fd, LOCK_EX) != 0)
        fd = cmp_keep_drop(fd);
    return fd;
}

int cmp_keep_listen(const char *path)
{
    int lock = cmp_keep_lock(path);
    if (lock < 0)
        return -1;
    int fd = cmp_keep_bind(path);
    int e = errno;
    close(lock);
    errno = e;
    return fd;
}

int cmp_keep_hello(int fd, int err_fd)
{
    char byte = 'h';
    struct iovec iov = {&byte, 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (err_fd >= 0) { /* the session writes its stderr where this compare reads it */
        m.msg_control = ctl.buf;
        m.msg_controllen = sizeof ctl.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &err_fd, sizeof(int));
    }
    return sendmsg(fd, &m, MSG_NOSIGNAL) == 1 ? 0 : -1;
}
