/* The dump writer's file as a file (fmt_writer.c writes the HDF5 in it):
 * blocks reserved ahead of the tensor data and given back at close, durable
 * mode's write-behind and syncs, and the tables (/index, /attrs, /defaults)
 * written once each at close. */
#include "fmt_internal.h"
#include "fmt_writer_disk.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reserve file blocks (without changing the file size) before HDF5 writes
 * [off, off + n): on ext4 a buffered write into reserved blocks skips the
 * per-block delayed-allocation bookkeeping, which took a quarter of the
 * writer's time in the kernel (raw 4 MiB writes: 2.9 -> 4.2 GB/s of CPU).
 * Reservations past the final size are released at close. Best effort: a
 * filesystem without fallocate, or a full disk, just writes as before. */
void msp_writer_prealloc(msp_writer_t *w, int64_t off, int64_t n)
{
    if (w->fd < 0 || w->no_prealloc || off < 0 || n <= 0 || off + n <= w->prealloc_end)
        return;
    int64_t start = off > w->prealloc_end ? off : w->prealloc_end;
    int64_t len = off + n - start;
    if (len < MSP_PREALLOC_STEP)
        len = MSP_PREALLOC_STEP;
    if (fallocate(w->fd, FALLOC_FL_KEEP_SIZE, (off_t)start, (off_t)len) == 0)
        w->prealloc_end = start + len;
    else if (errno == EOPNOTSUPP || errno == ENOSYS)
        w->no_prealloc = 1; /* never again for this file */
}

void msp_writer_set_durable(msp_writer_t *w, int on)
{
    if (w)
        w->durable = on != 0;
}

/* Durable mode: start the disk on [off, off + n) now, without waiting for it,
 * so that the fdatasync at close finds most of the file already written. */
void msp_writer_write_behind(msp_writer_t *w, int64_t off, int64_t n)
{
    if (w->durable && w->fd >= 0 && off >= 0 && n > 0 &&
        sync_file_range(w->fd, (off_t)off, (off_t)n, SYNC_FILE_RANGE_WRITE) != 0)
        errno = 0; /* best effort: the fdatasync at close still makes it durable */
}

/* After HDF5 has closed the file: give back the blocks reserved past its end
 * (ext4 and XFS drop them on a truncate to the unchanged size, tmpfs, which
 * ignores that, on a punched hole), and in durable mode put the file and its
 * directory entry on stable storage. Only the syncs can fail. */
msp_err msp_writer_finish_file(const char *path, int64_t prealloc_end, int durable)
{
    if (prealloc_end <= 0 && !durable)
        return MSP_OK;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return durable ? msp_fail(MSP_ERR_IO, "file %s: cannot reopen it to sync: %s", path,
                                  strerror(errno))
                       : MSP_OK;
    msp_err rc = MSP_OK;
    struct stat st;
    if (prealloc_end > 0 && fstat(fd, &st) == 0) {
        if (ftruncate(fd, st.st_size) != 0)
            errno = 0;
        if (prealloc_end > (int64_t)st.st_size &&
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, st.st_size,
                      (off_t)prealloc_end - st.st_size) != 0)
            errno = 0;
    }
    if (durable && fdatasync(fd) != 0)
        rc = msp_fail(MSP_ERR_IO, "file %s: cannot put it on disk (fdatasync): %s", path,
                      strerror(errno));
    close(fd);
    if (durable && !rc) { /* and its name: the directory entry of a new file */
        char *dir = msp_parent_dir(path);
        if (!dir)
            return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", path);
        rc = msp_sync_dir(dir);
        free(dir);
    }
    return rc;
}

/* The shared /index columns at their place inside struct msp_wrow, then
 * "producer"; packed = 1 for the file. Caller closes. */
hid_t msp_wrow_type(int packed)
{
    return msp_h5_index_type_at(sizeof(struct msp_wrow), offsetof(struct msp_wrow, r),
                                (long)offsetof(struct msp_wrow, producer), packed);
}

/* Writes the table name of n rows of row_size bytes (mt in memory, ft in
 * the file) with one H5Dwrite; takes ft and mt (either may be -1: failed).
 * deflate > 0: chunked (MSP_TABLE_CHUNK_ROWS rows a chunk) and deflated at
 * that level, when it has rows (HDF5 wants a chunk of at least one row). */
msp_err msp_writer_table(msp_writer_t *w, const char *name, hid_t ft, hid_t mt, const void *rows,
                         size_t n_rows, size_t row_size, int deflate)
{
    msp_err rc = MSP_OK;
    hid_t s = -1, d = -1, dcpl = -1, dxpl = -1;
    hsize_t n = n_rows;
    if (ft < 0 || mt < 0) {
        rc = msp_h5_fail(MSP_ERR_HDF5, "file %s: cannot build the /%s type", w->path, name);
        goto cleanup;
    }
    s = H5Screate_simple(1, &n, NULL);
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    dxpl = H5Pcreate(H5P_DATASET_XFER);
    /* Conversion and background buffers sized for the rows (HDF5 wants some
     * slack above one row): the default 1 MiB pair is mapped, zeroed and
     * unmapped at every close, 4/5 of the time of a small step's /index. */
    size_t buf = n_rows * row_size * 2;
    if (buf < MSP_INDEX_XFER_MIN)
        buf = MSP_INDEX_XFER_MIN;
    if (buf > MSP_INDEX_XFER_MAX)
        buf = MSP_INDEX_XFER_MAX;
    hsize_t chunk = n < MSP_TABLE_CHUNK_ROWS ? n : MSP_TABLE_CHUNK_ROWS;
    if (s < 0 || dcpl < 0 || dxpl < 0 || H5Pset_obj_track_times(dcpl, 0) < 0 ||
        H5Pset_buffer(dxpl, buf, NULL, NULL) < 0 ||
        (deflate > 0 && n &&
         (H5Pset_chunk(dcpl, 1, &chunk) < 0 || H5Pset_deflate(dcpl, (unsigned)deflate) < 0))) {
        rc = msp_h5_fail(MSP_ERR_HDF5, "file %s: cannot set up /%s", w->path, name);
        goto cleanup;
    }
    d = H5Dcreate2(w->file, name, ft, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (d < 0 || (n > 0 && H5Dwrite(d, mt, H5S_ALL, H5S_ALL, dxpl, rows) < 0))
        rc = msp_h5_fail(MSP_ERR_IO, "file %s: cannot write /%s (%llu rows; disk full?)", w->path,
                         name, (unsigned long long)n);
cleanup:
    if (d >= 0)
        H5Dclose(d);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (dxpl >= 0)
        H5Pclose(dxpl);
    if (s >= 0)
        H5Sclose(s);
    if (ft >= 0)
        H5Tclose(ft);
    if (mt >= 0)
        H5Tclose(mt);
    return rc;
}
