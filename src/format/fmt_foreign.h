/* Private to src/format: reading msprobe's (the Python tool's) own dump
 * directories, stepN/rankN/dump.json with dump_tensor_data/ holding .npy or .pt files:
 * what fmt_msprobe.c and the .npy / .pt loaders share. The reader reaches
 * that backend through its table (fmt_backend.h) only. */
#ifndef MSP_FMT_FOREIGN_H
#define MSP_FMT_FOREIGN_H

#include "msprobe/format.h"

/* Text from a foreign file, made safe for a message: printable ASCII only
 * (anything else becomes '?'), cut to fit dst. */
static inline void msp_fg_clean(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; cap && src[i] && i + 1 < cap; i++)
        dst[i] = (src[i] >= 0x20 && src[i] < 0x7f) ? src[i] : '?';
    if (cap)
        dst[i] = '\0';
}

/* A tensor file decoded to C-contiguous native elements of `dtype`. */
typedef struct msp_raw_tensor {
    msp_dtype_t dtype;
    int ndim;
    int64_t shape[MSP_MAX_NDIM];
    int64_t numel;
    void *data; /* malloc'd, numel * msp_dtype_size(dtype) bytes */
} msp_raw_tensor_t;

/* path opened for reading by one of the loaders below (their path forms,
 * for tools and fuzzing; a dump's files are opened by msp_msprobe_*). */
msp_err msp_foreign_open(const char *path, int *fd);
/* NumPy .npy, format versions 1, 2 and 3: little-endian or single-byte
 * element types numpy shares with torch, C order. */
msp_err msp_npy_load(const char *path, msp_raw_tensor_t *out);
/* The same from fd, already open on path (closed here, whatever happens). */
msp_err msp_npy_load_fd(int fd, const char *path, msp_raw_tensor_t *out);
/* torch.save of one plain tensor (zip: data.pkl + data/<key>): the pickle is
 * read by a small interpreter of the opcodes torch emits for
 * torch._utils._rebuild_tensor_v2; nothing in it is ever executed, and
 * anything outside that subset is refused with an error naming the file. */
msp_err msp_pt_load(const char *path, msp_raw_tensor_t *out);
/* The same from fd, already open on path (closed here, whatever happens). */
msp_err msp_pt_load_fd(int fd, const char *path, msp_raw_tensor_t *out);
void msp_raw_free(msp_raw_tensor_t *r);

/* The msprobe backend's open (msp_reader_msprobe, fmt_backend.h) for the
 * fuzz target: json_path is the dump.json itself. Everything else on the
 * file goes through msp_dump_read_tensor, msp_dump_close and the rest. */
msp_err msp_msprobe_open(const char *json_path, msp_dump_file_t **out);
/* The call stack msprobe recorded for a record (stack.json), one frame per
 * line, or NULL (malloc'd). */
char *msp_msprobe_stack(const msp_dump_file_t *f, const char *record);

#endif
