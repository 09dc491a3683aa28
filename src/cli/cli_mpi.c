/* msprobe compare under mpirun or srun (msprobe-compare(1), MPI): the
 * network msp_compare_stream shares the work over, made of MPI calls.
 *
 * Built with MPI only when CMake finds it (MSP_HAVE_MPI); without it, or when
 * no MPI launcher started this process, compare runs alone. MPI is started
 * only when the launcher's environment says so, so a plain `msprobe compare`
 * never touches MPI even in a build that has it.
 *
 * No exchange waits forever (--mpi-timeout): a blocking MPI call on a process
 * that was stopped (SIGSTOP, a debugger) or cut off never returns, and every
 * other process of the launch would wait in it with no word. So every
 * exchange is posted non-blocking and tested in a loop, and a thread sends
 * signs of life in a star (process 0 to each process, each to process 0)
 * whatever the process is doing, so a process busy comparing for hours is
 * never taken for a dead one: a waiting process that has heard nothing from
 * a process it needs for the whole timeout names it and ends the launch
 * (MPI_Abort). Process 0, which hears from everyone, tells the others which
 * process fell silent before it ends the launch, so each can say so. */
#include "cli.h"

#include "msprobe/compare.h"
#include "msprobe/proc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef MSP_HAVE_MPI
#include <mpi.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

/* Set by mpirun/mpiexec (Open MPI, MPICH's hydra) and by srun's PMI/PMIx
 * plugins: a process of a parallel launch. */
static int msp_launched_by_mpi(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK",
                                       "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return 1;
    }
    return 0;
}

/* Large messages go in pieces: MPI counts are ints. */
#define MSP_MPI_PIECE ((size_t)1 << 30)
#define MSP_MPI_TAG 2705
#define MSP_MPI_BEAT_TAG 2706

/* The watch over the other processes. mu guards every MPI call once the beat
 * thread runs (MPI_THREAD_SERIALIZED asks no more) and the fields below it. */
static struct {
    int rank, size;
    double timeout; /* seconds of silence that end the launch; 0: wait forever */
    int watch;      /* the beat thread runs (the MPI library allows threads) */
    pthread_mutex_t mu;
    pthread_t thread;
    int stop;            /* atomic: the beat thread ends */
    double beat;         /* seconds between signs of life */
    double *last_seen;   /* msp_monotonic() of each process's last message */
    int silent, seen_by; /* the silent process and who found it (-1: none) */
    double silent_for;
    int broken;    /* a process is silent: MPI is not called again but to end */
    char msg[512]; /* what every exchange then fails with */
} msp_w = {.mu = PTHREAD_MUTEX_INITIALIZER, .silent = -1, .seen_by = -1};

static void msp_lock(void)
{
    if (msp_w.watch)
        pthread_mutex_lock(&msp_w.mu);
}

static void msp_unlock(void)
{
    if (msp_w.watch)
        pthread_mutex_unlock(&msp_w.mu);
}

static msp_err msp_mpi_fail(int code, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(code, msg, &len);
    return msp_fail(MSP_ERR_IO, "MPI: %s failed: %s", what, msg);
}

/* From now on every exchange fails with msg at once (under mu). */
static msp_err msp_mpi_break(void)
{
    msp_w.broken = 1;
    return msp_fail(MSP_ERR_IO, "%s", msp_w.msg);
}

static void msp_sleep(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* The beat thread: a sign of life to the processes of the star, and every
 * sign or word received noted. A sign is {0, 0}; process 0's word that a
 * process fell silent is {silent + 1, seconds}. */
static void *msp_mpi_beat(void *arg)
{
    (void)arg;
    static const int alive[2] = {0, 0};
    int n = msp_w.size;
    MPI_Request *out = malloc((size_t)n * sizeof *out);
    for (int p = 0; out && p < n; p++)
        out[p] = MPI_REQUEST_NULL;
    while (out && !__atomic_load_n(&msp_w.stop, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&msp_w.mu);
        if (!msp_w.broken) {
            double now = msp_monotonic();
            for (int p = 0; p < n; p++) {
                int done = 1;
                if (p == msp_w.rank || (msp_w.rank != 0 && p != 0))
                    continue;
                /* a sign still on its way (the process does not read) is not
                 * doubled: signs never pile up behind a stopped process */
                if (out[p] != MPI_REQUEST_NULL)
                    MPI_Test(&out[p], &done, MPI_STATUS_IGNORE);
                if (done)
                    MPI_Isend(alive, 2, MPI_INT, p, MSP_MPI_BEAT_TAG, MPI_COMM_WORLD, &out[p]);
            }
            for (;;) {
                int flag = 0, msg[2];
                MPI_Status st;
                if (MPI_Iprobe(MPI_ANY_SOURCE, MSP_MPI_BEAT_TAG, MPI_COMM_WORLD, &flag, &st) !=
                        MPI_SUCCESS ||
                    !flag)
                    break;
                if (MPI_Recv(msg, 2, MPI_INT, st.MPI_SOURCE, MSP_MPI_BEAT_TAG, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE) != MPI_SUCCESS)
                    break;
                if (st.MPI_SOURCE >= 0 && st.MPI_SOURCE < n)
                    msp_w.last_seen[st.MPI_SOURCE] = now;
                if (msg[0] > 0 && msp_w.silent < 0 && msg[0] - 1 < n) {
                    msp_w.silent = msg[0] - 1;
                    msp_w.seen_by = st.MPI_SOURCE;
                    msp_w.silent_for = msg[1];
                    msp_cli_stop_peer_silent(msp_w.silent, msp_w.seen_by, msg[1]);
                }
            }
        }
        pthread_mutex_unlock(&msp_w.mu);
        for (double slept = 0;
             slept < msp_w.beat && !__atomic_load_n(&msp_w.stop, __ATOMIC_ACQUIRE); slept += 0.01)
            msp_sleep(0.01);
    }
    /* signs still on their way are small, sent eagerly: they complete here
     * unless their process is gone, and then they are left (we end anyway) */
    double until = msp_monotonic() + 1.0;
    for (int p = 0; out && p < n; p++) {
        while (out[p] != MPI_REQUEST_NULL && !msp_w.broken && msp_monotonic() < until) {
            int done = 0;
            pthread_mutex_lock(&msp_w.mu);
            MPI_Test(&out[p], &done, MPI_STATUS_IGNORE);
            pthread_mutex_unlock(&msp_w.mu);
            if (!done)
                msp_sleep(0.001);
        }
    }
    free(out);
    return NULL;
}

/* The process this one waits for that has been silent past the timeout, or
 * the one process 0 said was (-1: none). Process 0 watches every process;
 * the others watch process 0, which watches for them. Under mu. */
static int msp_mpi_silent(double now)
{
    if (msp_w.silent >= 0)
        return msp_w.silent;
    for (int p = 0; p < msp_w.size; p++) {
        if (p == msp_w.rank || (msp_w.rank != 0 && p != 0))
            continue;
        if (now - msp_w.last_seen[p] > msp_w.timeout) {
            msp_w.silent = p;
            msp_w.seen_by = msp_w.rank;
            msp_w.silent_for = now - msp_w.last_seen[p];
            msp_cli_stop_peer_silent(p, msp_w.rank, (int)msp_w.silent_for);
            return p;
        }
    }
    return -1;
}

/* Waits for req to complete, testing it, while every process it needs
 * keeps giving signs of life (or, when the MPI library allows no thread, for
 * the timeout from now). what names the exchange in messages. On failure the
 * request is left pending, and its buffers must be left alone too: MPI may
 * still write into them (the caller leaks them; the launch ends). */
static msp_err msp_mpi_wait(MPI_Request *req, const char *what)
{
    double t0 = msp_monotonic();
    for (long spins = 0;; spins++) {
        int done = 0, silent = -1, rc;
        double now = msp_monotonic();
        msp_lock();
        if (msp_w.broken) {
            msp_err e = msp_mpi_break();
            msp_unlock();
            return e;
        }
        rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && !done && msp_w.watch)
            silent = msp_mpi_silent(now);
        if (silent >= 0) {
            if (msp_w.seen_by == msp_w.rank)
                snprintf(msp_w.msg, sizeof msp_w.msg,
                         "MPI: process %d of %d sent no sign of life for %.1f s (--mpi-timeout "
                         "%g) while process %d was %s: it is stopped (SIGSTOP, a debugger), hung "
                         "or cut off; ending the launch",
                         silent, msp_w.size, msp_w.silent_for, msp_w.timeout, msp_w.rank, what);
            else
                snprintf(msp_w.msg, sizeof msp_w.msg,
                         "MPI: process %d of %d sent no sign of life for %.1f s (--mpi-timeout "
                         "%g), as process %d found, while process %d was %s; ending the launch",
                         silent, msp_w.size, msp_w.silent_for, msp_w.timeout, msp_w.seen_by,
                         msp_w.rank, what);
        } else if (rc == MPI_SUCCESS && !done && !msp_w.watch && msp_w.timeout > 0 &&
                   now - t0 > msp_w.timeout) {
            snprintf(msp_w.msg, sizeof msp_w.msg,
                     "MPI: no answer within %g s (--mpi-timeout) while process %d of %d was %s "
                     "(this MPI library allows no thread to watch for signs of life, so each "
                     "exchange is timed from its start); ending the launch",
                     msp_w.timeout, msp_w.rank, msp_w.size, what);
            silent = msp_w.size; /* someone, not known */
        }
        msp_err e = silent >= 0 ? msp_mpi_break() : MSP_OK;
        msp_unlock();
        if (rc != MPI_SUCCESS)
            return msp_mpi_fail(rc, what);
        if (done || e)
            return e;
        /* the first thousand tests back to back (a message on its way),
         * then a pause that costs no CPU worth naming */
        if (spins < 1000)
            sched_yield();
        else
            msp_sleep(now - t0 < 1.0 ? 0.0002 : 0.001);
    }
}

/* Posts an operation (under mu) and waits for it. */
#define MSP_MPI_POST(call, what)                                                                   \
    do {                                                                                           \
        MPI_Request req_ = MPI_REQUEST_NULL;                                                       \
        msp_lock();                                                                                \
        int rc_ = msp_w.broken ? MPI_SUCCESS : (call);                                             \
        msp_unlock();                                                                              \
        if (rc_ != MPI_SUCCESS) {                                                                  \
            err = msp_mpi_fail(rc_, what);                                                         \
            break;                                                                                 \
        }                                                                                          \
        err = msp_mpi_wait(&req_, what);                                                           \
    } while (0)

static msp_err msp_mpi_allgather(void *ud, const void *mine, size_t len, void **all, size_t *lens)
{
    (void)ud;
    int size = msp_w.size;
    msp_err err = MSP_OK;
    *all = NULL;
    if (len > INT32_MAX)
        return msp_fail(MSP_ERR_USAGE, "MPI: %zu bytes to share is too much", len);
    /* static: a failed exchange leaves MPI holding them (msp_mpi_wait) */
    static int mine_n;
    mine_n = (int)len;
    int *counts = calloc((size_t)size, sizeof *counts);
    int *displs = calloc((size_t)size, sizeof *displs);
    char *buf = NULL;
    if (!counts || !displs) {
        err = msp_fail(MSP_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    MSP_MPI_POST(MPI_Iallgather(&mine_n, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD, &req_),
                 "sharing message sizes (MPI_Iallgather)");
    if (err)
        goto leak;
    size_t total = 0;
    for (int p = 0; p < size; p++) {
        displs[p] = (int)total;
        lens[p] = (size_t)counts[p];
        total += (size_t)counts[p];
    }
    if (total > INT32_MAX || !(buf = malloc(total + 1))) {
        err = msp_fail(MSP_ERR_NOMEM, "out of memory for %zu shared bytes", total);
        goto cleanup;
    }
    MSP_MPI_POST(MPI_Iallgatherv(mine, mine_n, MPI_BYTE, buf, counts, displs, MPI_BYTE,
                                 MPI_COMM_WORLD, &req_),
                 "sharing what each process holds (MPI_Iallgatherv)");
    if (err)
        goto leak;
    buf[total] = '\0';
    *all = buf;
    buf = NULL;
cleanup:
    free(counts);
    free(displs);
    free(buf);
    return err;
leak:
    return err; /* counts, displs and buf stay MPI's: see msp_mpi_wait */
}

static msp_err msp_mpi_send(void *ud, int to, const void *buf, size_t len)
{
    (void)ud;
    static uint64_t n; /* static: see msp_mpi_wait */
    msp_err err = MSP_OK;
    char what[96];
    snprintf(what, sizeof what, "sending its results to process %d (MPI_Isend)", to);
    n = len;
    MSP_MPI_POST(MPI_Isend(&n, 1, MPI_UINT64_T, to, MSP_MPI_TAG, MPI_COMM_WORLD, &req_), what);
    for (size_t at = 0; !err && at < len; at += MSP_MPI_PIECE) {
        size_t k = len - at < MSP_MPI_PIECE ? len - at : MSP_MPI_PIECE;
        MSP_MPI_POST(MPI_Isend((const char *)buf + at, (int)k, MPI_BYTE, to, MSP_MPI_TAG,
                               MPI_COMM_WORLD, &req_),
                     what);
    }
    return err;
}

static msp_err msp_mpi_recv(void *ud, int from, void **out, size_t *len)
{
    (void)ud;
    static uint64_t n; /* static: see msp_mpi_wait */
    msp_err err = MSP_OK;
    char what[96];
    snprintf(what, sizeof what, "receiving the results of process %d (MPI_Irecv)", from);
    *out = NULL;
    *len = 0;
    n = 0;
    MSP_MPI_POST(MPI_Irecv(&n, 1, MPI_UINT64_T, from, MSP_MPI_TAG, MPI_COMM_WORLD, &req_), what);
    if (err)
        return err;
    char *buf = malloc(n ? (size_t)n : 1);
    if (!buf)
        return msp_fail(MSP_ERR_NOMEM, "out of memory receiving %llu bytes from process %d",
                        (unsigned long long)n, from);
    for (size_t at = 0; !err && at < n; at += MSP_MPI_PIECE) {
        size_t k = n - at < MSP_MPI_PIECE ? n - at : MSP_MPI_PIECE;
        MSP_MPI_POST(MPI_Irecv(buf + at, (int)k, MPI_BYTE, from, MSP_MPI_TAG, MPI_COMM_WORLD,
                               &req_),
                     what);
    }
    if (err)
        return err; /* buf stays MPI's: see msp_mpi_wait */
    *out = buf;
    *len = (size_t)n;
    return MSP_OK;
}

static msp_compare_net_t msp_net;
static int msp_net_on;

/* Open MPI binds each process to one core when it launches two or fewer (to
 * a socket past that) unless told otherwise, and a compare's threads (the
 * workbooks', the deflating and spool threads, the reader helpers) then
 * share that core: `mpirun -np 2` on two cores took twice one process's
 * time, most of it process 0 writing the reports alone on one core. Where
 * the binding is Open MPI's default, not asked for
 * (OMPI_MCA_orte_bound_at_launch set, no OMPI_MCA_hwloc_base_binding_policy
 * from --bind-to), the process takes back the CPUs of the launcher that
 * started it (its parent: orted, or mpirun on one node, which Open MPI
 * leaves unbound) and as many threads, unless OMP_NUM_THREADS says: as
 * --bind-to none would. Called on the main thread before any other starts. */
static void msp_mpi_unbind(int rank)
{
    const char *bound = getenv("OMPI_MCA_orte_bound_at_launch"),
               *policy = getenv("OMPI_MCA_hwloc_base_binding_policy");
    cpu_set_t was, all, now;
    /* the launcher's own CPUs (orted's or mpirun's, which Open MPI leaves
     * unbound): what the user gave the launch, taskset included */
    if (!bound || strcmp(bound, "1") != 0 || (policy && *policy) ||
        sched_getaffinity(0, sizeof was, &was) != 0 ||
        sched_getaffinity(getppid(), sizeof all, &all) != 0 || CPU_COUNT(&all) <= CPU_COUNT(&was))
        return;
    if (sched_setaffinity(0, sizeof all, &all) != 0 || sched_getaffinity(0, sizeof now, &now) != 0)
        return;
    const char *omp = getenv("OMP_NUM_THREADS");
    if (!omp || !*omp)
        omp_set_num_threads(CPU_COUNT(&now));
    msp_log(MSP_LOG_INFO,
            "MPI: process %d was bound to %d CPU%s by Open MPI's default (not --bind-to): "
            "it runs on %d CPUs, %d threads",
            rank, CPU_COUNT(&was), CPU_COUNT(&was) == 1 ? "" : "s", CPU_COUNT(&now),
            omp_get_max_threads());
}

const msp_compare_net_t *msp_cli_mpi_start(int *argc, char ***argv, double timeout)
{
    if (msp_net_on)
        return &msp_net;
    if (!msp_launched_by_mpi())
        return NULL;
    int inited = 0, provided = MPI_THREAD_SINGLE;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
        return NULL;
    if (inited)
        MPI_Query_thread(&provided);
    /* errors come back as codes, reported our way, instead of aborting the job */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &msp_net.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &msp_net.size);
    msp_mpi_unbind(msp_net.rank);
    msp_net.allgather = msp_mpi_allgather;
    msp_net.send = msp_mpi_send;
    msp_net.recv = msp_mpi_recv;
    msp_net_on = 1;
    msp_w.rank = msp_net.rank;
    msp_w.size = msp_net.size;
    msp_w.timeout = timeout;
    msp_cli_stop_where(msp_net.rank, msp_net.size);
    /* a sign of life every eighth of the timeout, at most every second */
    msp_w.beat = timeout / 8 < 1.0 ? (timeout / 8 > 0.01 ? timeout / 8 : 0.01) : 1.0;
    if (timeout > 0 && msp_net.size > 1 && provided >= MPI_THREAD_SERIALIZED &&
        (msp_w.last_seen = malloc((size_t)msp_net.size * sizeof *msp_w.last_seen))) {
        double now = msp_monotonic();
        for (int p = 0; p < msp_net.size; p++)
            msp_w.last_seen[p] = now;
        msp_w.watch = pthread_create(&msp_w.thread, NULL, msp_mpi_beat, NULL) == 0;
    }
    return &msp_net;
}

static void msp_mpi_stop_beats(void)
{
    if (!msp_w.watch)
        return;
    __atomic_store_n(&msp_w.stop, 1, __ATOMIC_RELEASE);
    pthread_join(msp_w.thread, NULL);
    msp_w.watch = 0;
}

int msp_cli_mpi_broken(void)
{
    return msp_net_on && msp_w.broken;
}

/* A process fell silent: process 0, which found it, tells the others (so
 * each can say which before mpirun stops it), then the launch ends with
 * code. Never returns. */
static void msp_mpi_end_launch(int code)
{
    if (msp_w.watch && msp_w.rank == 0 && msp_w.seen_by == 0 && msp_w.silent >= 0) {
        static int word[2];
        word[0] = msp_w.silent + 1;
        word[1] = (int)msp_w.silent_for;
        MPI_Request *req = calloc((size_t)msp_w.size, sizeof *req);
        pthread_mutex_lock(&msp_w.mu);
        for (int p = 1; req && p < msp_w.size; p++) {
            req[p] = MPI_REQUEST_NULL;
            if (p != msp_w.silent)
                MPI_Isend(word, 2, MPI_INT, p, MSP_MPI_BEAT_TAG, MPI_COMM_WORLD, &req[p]);
        }
        pthread_mutex_unlock(&msp_w.mu);
        /* a second for the word to arrive and be said (never waiting on the
         * silent process: its sends are not tested) */
        double until = msp_monotonic() + (msp_w.timeout < 1.0 ? msp_w.timeout : 1.0);
        while (req && msp_monotonic() < until) {
            int pending = 0;
            pthread_mutex_lock(&msp_w.mu);
            for (int p = 1; p < msp_w.size; p++) {
                int done = 1;
                if (req[p] != MPI_REQUEST_NULL)
                    MPI_Test(&req[p], &done, MPI_STATUS_IGNORE);
                pending += !done;
            }
            pthread_mutex_unlock(&msp_w.mu);
            msp_sleep(pending ? 0.001 : 0.05);
        }
    }
    /* the beat thread makes no MPI call once broken, and none at all while
     * this holds mu; it is not joined (it may be sleeping) */
    if (msp_w.watch)
        pthread_mutex_lock(&msp_w.mu);
    MPI_Abort(MPI_COMM_WORLD, code);
    _exit(code);
}

int msp_cli_mpi_finish(int code)
{
    if (!msp_net_on)
        return code;
    if (!msp_w.broken) {
        /* every process leaves with process 0's status, so mpirun's is that
         * too; then all meet before MPI_Finalize, which would wait for a
         * silent process forever */
        static int all;
        msp_err err = MSP_OK;
        all = code;
        do {
            MSP_MPI_POST(MPI_Ibcast(&all, 1, MPI_INT, 0, MPI_COMM_WORLD, &req_),
                         "sharing the exit status (MPI_Ibcast)");
        } while (0);
        if (!err) {
            do {
                MSP_MPI_POST(MPI_Ibarrier(MPI_COMM_WORLD, &req_),
                             "meeting the others before the end (MPI_Ibarrier)");
            } while (0);
        }
        if (!err) {
            msp_mpi_stop_beats();
            MPI_Finalize();
            msp_net_on = 0;
            return all;
        }
        msp_report_error(err);
        if (!msp_w.broken) { /* an MPI error, not a silence */
            msp_mpi_stop_beats();
            MPI_Abort(MPI_COMM_WORLD, MSP_EXIT_USAGE);
            _exit(MSP_EXIT_USAGE);
        }
    }
    msp_mpi_end_launch(MSP_EXIT_PEER);
    return MSP_EXIT_PEER;
}

int msp_cli_mpi_built(void)
{
    return 1;
}

#else

const msp_compare_net_t *msp_cli_mpi_start(int *argc, char ***argv, double timeout)
{
    (void)argc;
    (void)argv;
    (void)timeout;
    return NULL;
}

int msp_cli_mpi_broken(void)
{
    return 0;
}

int msp_cli_mpi_finish(int code)
{
    return code;
}

int msp_cli_mpi_built(void)
{
    return 0;
}

#endif
