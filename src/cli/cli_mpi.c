/* msprobe compare under mpirun or srun (msprobe-compare(1), MPI): the
 * network msp_compare_stream shares the work over, made of MPI calls.
 *
 * Built with MPI only when CMake finds it (MSP_HAVE_MPI); without it, or when
 * no MPI launcher started this process, compare runs alone. MPI is started
 * only when the launcher's environment says so, so a plain `msprobe compare`
 * never touches MPI even in a build that has it. */
#include "cli.h"

#include "msprobe/compare.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef MSP_HAVE_MPI
#include <mpi.h>

/* Set by mpirun/mpiexec (Open MPI, MPICH's hydra) and by srun's PMI/PMIx
 * plugins: a process of a parallel launch. */
static int msp_launched_by_mpi(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE",
                                       "PMI_RANK", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return 1;
    }
    return 0;
}

static msp_err msp_mpi_fail(int code, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(code, msg, &len);
    return msp_fail(MSP_ERR_IO, "MPI: %s failed: %s", what, msg);
}

static msp_err msp_mpi_allgather(void *ud, const void *mine, size_t len, void **all, size_t *lens)
{
    (void)ud;
    int size = 0, rc;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    *all = NULL;
    if (len > INT32_MAX)
        return msp_fail(MSP_ERR_USAGE, "MPI: %zu bytes to share is too much", len);
    int mine_n = (int)len;
    int *counts = calloc((size_t)size, sizeof *counts);
    int *displs = calloc((size_t)size, sizeof *displs);
    if (!counts || !displs) {
        free(counts);
        free(displs);
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    if ((rc = MPI_Allgather(&mine_n, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD)) !=
        MPI_SUCCESS) {
        free(counts);
        free(displs);
        return msp_mpi_fail(rc, "MPI_Allgather");
    }
    size_t total = 0;
    for (int p = 0; p < size; p++) {
        displs[p] = (int)total;
        lens[p] = (size_t)counts[p];
        total += (size_t)counts[p];
    }
    char *buf = malloc(total + 1);
    if (!buf || total > INT32_MAX) {
        free(buf);
        free(counts);
        free(displs);
        return msp_fail(MSP_ERR_NOMEM, "out of memory for %zu shared bytes", total);
    }
    rc = MPI_Allgatherv(mine, mine_n, MPI_BYTE, buf, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
    free(counts);
    free(displs);
    if (rc != MPI_SUCCESS) {
        free(buf);
        return msp_mpi_fail(rc, "MPI_Allgatherv");
    }
    buf[total] = '\0';
    *all = buf;
    return MSP_OK;
}

/* Large messages go in pieces: MPI counts are ints. */
#define MSP_MPI_PIECE ((size_t)1 << 30)
#define MSP_MPI_TAG 2705

static msp_err msp_mpi_send(void *ud, int to, const void *buf, size_t len)
{
    (void)ud;
    uint64_t n = len;
    int rc = MPI_Send(&n, 1, MPI_UINT64_T, to, MSP_MPI_TAG, MPI_COMM_WORLD);
    for (size_t at = 0; rc == MPI_SUCCESS && at < len; at += MSP_MPI_PIECE) {
        size_t k = len - at < MSP_MPI_PIECE ? len - at : MSP_MPI_PIECE;
        rc = MPI_Send((const char *)buf + at, (int)k, MPI_BYTE, to, MSP_MPI_TAG, MPI_COMM_WORLD);
    }
    return rc == MPI_SUCCESS ? MSP_OK : msp_mpi_fail(rc, "MPI_Send");
}

static msp_err msp_mpi_recv(void *ud, int from, void **out, size_t *len)
{
    (void)ud;
    uint64_t n = 0;
    *out = NULL;
    *len = 0;
    int rc = MPI_Recv(&n, 1, MPI_UINT64_T, from, MSP_MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
        return msp_mpi_fail(rc, "MPI_Recv");
    char *buf = malloc(n ? (size_t)n : 1);
    if (!buf)
        return msp_fail(MSP_ERR_NOMEM, "out of memory receiving %llu bytes from process %d",
                        (unsigned long long)n, from);
    for (size_t at = 0; rc == MPI_SUCCESS && at < n; at += MSP_MPI_PIECE) {
        size_t k = n - at < MSP_MPI_PIECE ? n - at : MSP_MPI_PIECE;
        rc = MPI_Recv(buf + at, (int)k, MPI_BYTE, from, MSP_MPI_TAG, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE);
    }
    if (rc != MPI_SUCCESS) {
        free(buf);
        return msp_mpi_fail(rc, "MPI_Recv");
    }
    *out = buf;
    *len = (size_t)n;
    return MSP_OK;
}

static msp_compare_net_t msp_net;
static int msp_net_on;

const msp_compare_net_t *msp_cli_mpi_start(int *argc, char ***argv)
{
    if (msp_net_on)
        return &msp_net;
    if (!msp_launched_by_mpi())
        return NULL;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init(argc, argv) != MPI_SUCCESS)
        return NULL;
    /* errors come back as codes, reported our way, instead of aborting the job */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &msp_net.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &msp_net.size);
    msp_net.allgather = msp_mpi_allgather;
    msp_net.send = msp_mpi_send;
    msp_net.recv = msp_mpi_recv;
    msp_net_on = 1;
    return &msp_net;
}

int msp_cli_mpi_finish(int code)
{
    if (!msp_net_on)
        return code;
    /* every process leaves with process 0's status, so mpirun's is that too */
    int all = code;
    MPI_Bcast(&all, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    msp_net_on = 0;
    return all;
}

int msp_cli_mpi_built(void)
{
    return 1;
}

#else

const msp_compare_net_t *msp_cli_mpi_start(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return NULL;
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
