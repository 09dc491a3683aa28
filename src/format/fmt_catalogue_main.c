/* msprobe-catalogue: the reader helper (fmt_contain.c). Parses one dump file
 * with libhdf5 in this short-lived process and writes its verified catalogue
 * to stdout, or with --read the bytes of one tensor. Whatever libhdf5 does
 * with a corrupt file (crash, endless loop, huge allocation) ends here.
 *
 *   msprobe-catalogue -- FILE
 *   msprobe-catalogue --read FILE RECORD ROLE
 *   msprobe-catalogue --serve
 *
 * --serve answers catalogue requests on its stdin/stdout (a socket) one at a
 * time, each in a child forked for that file alone: the child is what
 * `-- FILE` would be, so a file's crash or hang still ends in a process of
 * its own, while the program start and libhdf5's initialisation (most of a
 * helper's few ms) are paid once per server, not once per file. The server
 * itself never opens a dump file.
 *
 * Not for people: msprobe runs it. Exit 0 with an answer on stdout, or 2
 * with an error message in the wire form. */
#include "fmt_backend.h" /* msp_dump_open_local, msp_dump_open_tables */
#include "fmt_compact.h"
#include "fmt_internal.h"

#include "msprobe/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The address space a parse may use (MSPROBE_READER_MEMORY_MB, default
 * 4096); its CPU time is limited per file (msp_limit_file). Under a
 * sanitizer the address space is the sanitizer's own business. */
static void msp_limit_self(void)
{
#if !defined(__SANITIZE_ADDRESS__) && !defined(MSP_HAS_ASAN)
    const char *e = getenv("MSPROBE_READER_MEMORY_MB");
    long mb = e ? strtol(e, NULL, 10) : 0;
    rlim_t bytes = (rlim_t)(mb >= 64 ? mb : 4096) << 20;
    struct rlimit as = {bytes, bytes};
    setrlimit(RLIMIT_AS, &as);
#endif
}

/* The limit of work for one file (read: for streaming one of its tensors),
 * as the caller works it out for the same file (fmt_contain_limit.c):
 * SIGXCPU when it is spent. */
static void msp_limit_file(const char *path, int read)
{
    struct stat sb;
    int64_t size = stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0;
    msp_helper_limit_work(read ? msp_helper_read_work(size) : msp_helper_timeout(size));
}

static int msp_answer_error(msp_err rc)
{
    msp_wire_put_error(stdout, rc, msp_last_error());
    return 2;
}

/* One frame of the --read answer: a type byte, a 4-byte little-endian
 * length, the bytes (fmt_contain.c, msp_contained_stream_read). */
static int msp_frame(char type, const void *p, size_t n)
{
    unsigned char hd[5] = {(unsigned char)type, (unsigned char)n, (unsigned char)(n >> 8),
                           (unsigned char)(n >> 16), (unsigned char)(n >> 24)};
    return fwrite(hd, 1, sizeof hd, stdout) == sizeof hd && fwrite(p, 1, n, stdout) == n;
}

static int msp_frame_error(msp_err rc)
{
    char *ans = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&ans, &n);
    if (m) {
        msp_wire_put_error(m, rc, msp_last_error());
        fclose(m);
    }
    if (ans && n <= 64 * 1024)
        msp_frame('X', ans, n);
    free(ans);
    fflush(stdout);
    return 2;
}

/* --read FILE RECORD ROLE: the tensor's bytes as read, a block at a time, so
 * neither this process nor the caller holds more than a block of a chunked
 * or compressed tensor. */
static int msp_send_tensor(const char *path, const char *record, const char *role)
{
    msp_dump_file_t *f;
    msp_err rc = msp_dump_open_local(path, &f);
    if (rc)
        return msp_frame_error(rc);
    const msp_record_info_t *r = NULL;
    const msp_tensor_info_t *t = NULL;
    for (size_t i = 0; i < f->n_records && !t; i++) {
        if (strcmp(f->records[i].name, record) != 0)
            continue;
        r = &f->records[i];
        for (size_t j = 0; j < r->n_tensors && !t; j++)
            if (strcmp(r->tensors[j].role, role) == 0)
                t = &r->tensors[j];
    }
    msp_tensor_stream_t *s = NULL;
    if (!t)
        rc = msp_fail(MSP_ERR_NOT_FOUND, "file %s: no tensor %s/%s", path, record, role);
    else
        rc = msp_tensor_stream_open(f, r, t, &s);
    size_t block = (size_t)1 << 20;
    unsigned char *buf = rc ? NULL : malloc(block);
    if (!rc && !buf)
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", path);
    int bad = 0;
    for (uint64_t left = rc ? 0 : (uint64_t)t->nbytes; left && !rc && !bad;) {
        size_t k = left < block ? (size_t)left : block;
        if (!(rc = msp_tensor_stream_read(s, buf, k))) {
            bad = !msp_frame('D', buf, k);
            left -= k;
        }
    }
    free(buf);
    msp_tensor_stream_close(s);
    msp_dump_close(f);
    if (rc)
        return msp_frame_error(rc);
    return !bad && fflush(stdout) == 0 ? 0 : 2;
}

/* Whether a process about to end may leave its memory and libhdf5 as they
 * are: not under a sanitizer, whose leak check at exit covers the parse. */
#if defined(__SANITIZE_ADDRESS__) || defined(MSP_HAS_ASAN)
#define MSP_END_TIDY 1
#else
#define MSP_END_TIDY 0
#endif

/* -- FILE: the verified catalogue (a statistics file in the compact layout:
 * its tables, whose catalogue msprobe builds), or an error answer (exit
 * 2). Both callers end the process with it, so once the answer is sent it
 * ends here, skipping the catalogue's frees and libhdf5's own teardown at
 * exit: they touched every page the parse had used, a copy of each of the
 * server's pages libhdf5 had kept, a tenth of a server child's page faults
 * (issue 42). */
static int msp_send_catalogue(const char *path)
{
    msp_dump_file_t *f;
    struct msp_ctables t;
    msp_err rc = msp_dump_open_tables(path, &f, &t);
    if (rc) {
        msp_ctables_free(&t);
        return msp_answer_error(rc);
    }
    int bad = t.present ? msp_wire_put_tables(stdout, f, &t) : msp_wire_put_file(stdout, f);
    bad = bad || fflush(stdout) != 0;
    if (!MSP_END_TIDY)
        _exit(bad ? 2 : 0);
    msp_ctables_free(&t);
    msp_dump_close(f);
    return bad ? 2 : 0;
}

/* ---- --serve ------------------------------------------------------------------ */

/* The size of a transparent huge page where the kernel can back the heap
 * with them (the server reads it once, before its first child); 0 where it
 * cannot, or where the page is too large to skip (arm64's 512 MiB). */
static uintptr_t msp_thp_size;

static void msp_thp_probe(void)
{
#if !defined(__SANITIZE_ADDRESS__) && !defined(MSP_HAS_ASAN)
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char mode[128] = "";
    int on = f && fgets(mode, sizeof mode, f) && !strstr(mode, "[never]");
    if (f)
        fclose(f);
    unsigned long size = 0;
    f = on ? fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "r") : NULL;
    if (f && fscanf(f, "%lu", &size) == 1 && size >= 4096 && size <= (32UL << 20) &&
        (size & (size - 1)) == 0)
        msp_thp_size = size;
    if (f)
        fclose(f);
#endif
}

/* A child's heap from the next huge-page boundary on. The server's heap
 * ends inside a huge page's span that holds the server's own pages, and
 * the kernel maps no huge page over a span that has small ones: each page
 * of a child's first two MiB or so was a fault of its own, often a copy of
 * the server's page (its span had become one huge page the child shared).
 * That was 500 to 700 of a child's faults for a statistics file of 5,000
 * records, and faults are most of a child's cost (issue 42). Here the
 * child takes the heap's top chunk up to the boundary, a block it never
 * touches and never frees (address space only, ended with the child), so
 * that its parse begins on a fresh span: one fault a huge page. glibc
 * carves a block of this size from the top chunk's start, as the probe
 * shows; where it did not, the pad is merely unused. */
static void *volatile msp_heap_pad;

static void msp_heap_fresh(void)
{
    if (!msp_thp_size)
        return;
    char *probe = malloc((size_t)1 << 20); /* larger than any free block: the top's start */
    if (!probe)
        return;
    uintptr_t at = (uintptr_t)probe;
    free(probe);
    uintptr_t to = (at + msp_thp_size - 1) & ~(msp_thp_size - 1);
    /* a block of n bytes spans n plus its size word, so the next block's
     * header ends at the boundary */
    if (to - at > 4 * sizeof(size_t))
        msp_heap_pad = malloc(to - at - sizeof(size_t));
}

/* The child for one request: `-- FILE` with stdout on the answer's memfd
 * (no larger than cap bytes: a write past them fails, EFBIG, and the
 * server finds cap bytes, too big; SIGXFSZ is ignored, so that a write to a
 * large log file on stderr fails rather than ending the parse), limited to
 * timeout seconds of work. The write end of the server's pipe, inherited,
 * stays open until it exits. It dies with the server (a killed server
 * leaves no parse running). */
static void msp_serve_child(int answer, const char *path, pid_t server, uint64_t cap,
                            double timeout)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != server)
        _exit(2);
    int null = open("/dev/null", O_RDONLY);
    if (dup2(answer, 1) < 0 || null < 0 || dup2(null, 0) < 0)
        _exit(2);
    struct rlimit fs = {(rlim_t)cap, (rlim_t)cap};
    if (setrlimit(RLIMIT_FSIZE, &fs) != 0)
        _exit(2);
    signal(SIGXFSZ, SIG_IGN);
    setvbuf(stdout, NULL, _IOFBF, (size_t)64 << 10);
    msp_helper_limit_work(timeout); /* its own CPU time starts at zero */
    msp_heap_fresh();
    exit(msp_send_catalogue(path));
}

/* The n bytes of the answer, from fd's start to the caller (the kernel
 * copies them: no buffer of ours); 0, or -1 when it could not. */
static int msp_send_answer(int fd, size_t n)
{
    off_t at = 0;
    while ((size_t)at < n) {
        ssize_t k = sendfile(1, fd, &at, n - (size_t)at);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
    }
    return 0;
}

/* One request: the child's answer (at most cap bytes; timeout seconds of
 * work, waited for here up to that limit's wall-clock backstop) and how it
 * ended, as fmt_contain.c's msp_server_run reads it:
 *   "MSPR" u32 kind (MSP_CHILD_*), i32 wait status, u64 n, n bytes.
 * The child writes its answer into a memfd that the server seals once the
 * child has ended and sends as it is. Read through a pipe, each answer
 * (2.6 MB for a 5,000-record statistics file) was copied out of the pipe
 * into fresh pages and again into the socket: a sixth of the page faults of
 * a statistics compare and most of the server's CPU (issue 42). */
static int msp_serve_one(const char *path, uint64_t cap, double timeout)
{
    uint32_t kind = MSP_CHILD_ENDED;
    int32_t status = 0;
    size_t n = 0;
    int p[2] = {-1, -1};
    int answer = memfd_create("msprobe-answer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    pid_t child = -1;
    if (answer < 0 || pipe2(p, O_CLOEXEC) != 0 || (child = fork()) < 0) {
        kind = MSP_CHILD_FAILED;
        status = errno;
    } else if (child == 0) {
        msp_serve_child(answer, path, getppid(), cap, timeout);
    } else {
        close(p[1]);
        p[1] = -1;
        /* The pipe says when the child has ended (nothing is written to
         * it: a byte is a child that is not ours, refused as too big). The
         * caller gone (our stdout's other end closed: POLLERR on a pipe,
         * POLLHUP on a socket) means nothing will read an answer: no parse
         * may outlive it, however long its time limit
         * (MSPROBE_READER_TIMEOUT=inf); the child dies with us. */
        unsigned char *none = NULL;
        size_t got = 0;
        int k = msp_fd_collect(p[0], 1, 1, msp_monotonic() + msp_helper_wall(timeout), &none, &got);
        free(none);
        if (k == MSP_CHILD_WATCH_GONE)
            _exit(2);
        int st = msp_child_end(child, &k);
        struct stat sb;
        if (k == MSP_CHILD_ENDED &&
            (fcntl(answer, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) !=
                 0 ||
             fstat(answer, &sb) != 0)) {
            k = MSP_CHILD_FAILED;
            st = errno;
        } else if (k == MSP_CHILD_ENDED && (uint64_t)sb.st_size >= cap) {
            k = MSP_CHILD_TOO_BIG; /* it wrote cap bytes, and failed past them */
        } else if (k == MSP_CHILD_ENDED) {
            n = (size_t)sb.st_size;
        }
        kind = (uint32_t)k;
        if (kind == MSP_CHILD_ENDED || kind == MSP_CHILD_FAILED)
            status = st;
    }
    for (int i = 0; i < 2; i++)
        if (p[i] >= 0)
            close(p[i]);
    unsigned char hd[20] = "MSPR";
    uint64_t n64 = n;
    memcpy(hd + 4, &kind, 4);
    memcpy(hd + 8, &status, 4);
    memcpy(hd + 12, &n64, 8);
    int bad = msp_fd_exact(1, hd, sizeof hd, 1, 0) || (n && msp_send_answer(answer, n));
    if (answer >= 0)
        close(answer);
    return bad ? -1 : 0;
}

/* Requests until the caller closes the socket:
 *   "MSPQ" u64 cap, f64 timeout (s of work), u32 path length, path bytes. */
static int msp_serve(void)
{
    signal(SIGPIPE, SIG_IGN); /* a caller gone mid-answer: a write error, then exit */
    H5open();                 /* once, here: each child inherits it initialised */
    msp_thp_probe();
    for (;;) {
        unsigned char hd[24];
        if (msp_fd_exact(0, hd, sizeof hd, 0, 0))
            return 0;
        uint64_t cap;
        double timeout;
        uint32_t len;
        memcpy(&cap, hd + 4, 8);
        memcpy(&timeout, hd + 12, 8);
        memcpy(&len, hd + 20, 4);
        if (memcmp(hd, "MSPQ", 4) != 0 || len == 0 || len >= 65536 || !(timeout > 0))
            return 2;
        char path[65536];
        if (msp_fd_exact(0, path, len, 0, 0))
            return 2;
        path[len] = '\0';
        if (msp_serve_one(path, cap, timeout))
            return 2;
    }
}

/* The caller gone (our stdout's other end closed: POLLERR on a pipe, POLLHUP
 * on a socket) means nothing will read an answer: no parse may outlive it,
 * however long its time limit (MSPROBE_READER_TIMEOUT=inf). A one-file
 * helper watches from a thread; a server watches in its own wait for a
 * child's answer instead and stays single-threaded, because it forks: a
 * child forked while another thread held a lock (AddressSanitizer's
 * allocator, at that thread's start) would hang on it. */
static void *msp_watch_caller(void *arg)
{
    (void)arg;
    for (;;) {
        struct pollfd p = {1, 0, 0};
        int r = poll(&p, 1, -1);
        if (r > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL)))
            _exit(2);
        if (r < 0 && errno != EINTR)
            return NULL;
    }
}

static void msp_start_watch(void)
{
    pthread_attr_t at;
    pthread_t th;
    if (pthread_attr_init(&at) != 0)
        return;
    pthread_attr_setstacksize(&at, (size_t)256 << 10);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    (void)pthread_create(&th, &at, msp_watch_caller, NULL);
    pthread_attr_destroy(&at);
}

/* The heap grows 32 MiB at a time and keeps allocations of up to 32 MiB:
 * a parse's memory is then mostly whole huge pages (glibc.malloc.hugetlb=1,
 * fmt_contain.c) instead of 132 KiB steps and separate mappings faulted in
 * 4 KiB at a time. Set before a server forks, so each child inherits it; it
 * halved the page faults of a child that parses a statistics file (issue
 * 42). Address space only: pages are not touched until used. A value the
 * user gave in GLIBC_TUNABLES is left as it is, as fmt_contain.c leaves
 * glibc.malloc.hugetlb. */
static void msp_heap_steps(void)
{
    const char *t = getenv("GLIBC_TUNABLES");
    if (!t || !strstr(t, "glibc.malloc.top_pad="))
        mallopt(M_TOP_PAD, 32 << 20);
    if (!t || !strstr(t, "glibc.malloc.mmap_threshold="))
        mallopt(M_MMAP_THRESHOLD, 32 << 20);
}

int main(int argc, char **argv)
{
    msp_limit_self();
    msp_heap_steps();
    if (!(argc == 2 && strcmp(argv[1], "--serve") == 0))
        msp_start_watch();
    if (argc >= 3 && (strcmp(argv[1], "--") == 0 || strcmp(argv[1], "--read") == 0))
        msp_limit_file(argv[2], strcmp(argv[1], "--read") == 0);
    if (argc == 3 && strcmp(argv[1], "--") == 0)
        return msp_send_catalogue(argv[2]);
    if (argc == 5 && strcmp(argv[1], "--read") == 0)
        return msp_send_tensor(argv[2], argv[3], argv[4]);
    if (argc == 2 && strcmp(argv[1], "--serve") == 0)
        return msp_serve();
    fprintf(stderr, "msprobe-catalogue: the reader helper msprobe runs; not for direct use\n"
                    "usage: msprobe-catalogue -- FILE | --read FILE RECORD ROLE | --serve\n");
    return 2;
}
