/* Fuzz target: the reader of msprobe's own dump directories (fmt_msprobe.c).
 * The input is dump.json, optionally followed by a NUL and stack.json, and
 * another NUL and construct.json; they are written into a private directory
 * (a part that is absent is removed), whose dump_tensor_data/ holds, made
 * once, f32.npy (float32 [2, 3]), i64.npy (int64 [4]), short.npy (a header
 * promising more than follows) and f32.pt (float32 [2, 3], torch.save's
 * layout), so the records' data_name can reach the .npy and .pt readers.
 * An open either fails naming dump.json, or gives a catalogue that is walked
 * whole: every record's attributes and stack, and up to 16 tensor reads a
 * file, each also tried with a buffer one byte short (which must be
 * refused). Seeds: tests/fuzz/seeds/msprobe_json (dump.json texts in
 * msprobe's layout, by make_seeds.py). libFuzzer:
 *   clang -fsanitize=fuzzer,address,undefined -DMSP_LIBFUZZER ... fuzz_msprobe_json \
 *         tests/fuzz/seeds/msprobe_json
 * ctest replays the seeds with any compiler (tests/fuzz). */
#include "fmt_fuzz_tmp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* numpy.save's v1 layout: magic, version, header length, then the dict
 * padded with spaces to a multiple of 64 bytes and ended by '\n'. */
static void msp_fuzz_npy(const char *name, const char *descr, const char *shape, const void *body,
                         size_t body_len)
{
    char hdr[128], file[640], path[600];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                     descr, shape);
    size_t hlen = ((size_t)n + 1 + 10 + 63) / 64 * 64 - 10;
    memcpy(file, "\x93NUMPY\x01\x00", 8);
    file[8] = (char)(hlen & 0xff);
    file[9] = (char)(hlen >> 8);
    memcpy(file + 10, hdr, (size_t)n);
    memset(file + 10 + n, ' ', hlen - (size_t)n - 1);
    file[10 + hlen - 1] = '\n';
    memcpy(file + 10 + hlen, body, body_len);
    msp_fuzz_put(path, sizeof path, name, file, 10 + hlen + body_len);
}

static void msp_fuzz_tensor_files(void)
{
    static const float f32[6] = {0.5f, -1.0f, 2.0f, 3.25f, -4.0f, 5.0f};
    static const int64_t i64[4] = {1, -2, 3, 1LL << 40};
    /* torch.save(torch.tensor([[...]] float32 2x3)): _rebuild_tensor_v2 of
     * ('storage', FloatStorage, '0', 'cpu', 6), offset 0, size (2, 3),
     * stride (3, 1), requires_grad False, OrderedDict() */
    static const char pkl[] = "\x80\x02"
                              "ctorch._utils\n_rebuild_tensor_v2\n"
                              "((X\x07\x00\x00\x00"
                              "storage"
                              "ctorch\nFloatStorage\n"
                              "X\x01\x00\x00\x00"
                              "0"
                              "X\x03\x00\x00\x00"
                              "cpu"
                              "K\x06"
                              "tQ"
                              "K\x00"
                              "K\x02K\x03\x86"
                              "K\x03K\x01\x86"
                              "\x89"
                              "ccollections\nOrderedDict\n)RtR.";
    char path[600];
    msp_fuzz_npy("dump_tensor_data/f32.npy", "<f4", "(2, 3)", f32, sizeof f32);
    msp_fuzz_npy("dump_tensor_data/i64.npy", "<i8", "(4,)", i64, sizeof i64);
    msp_fuzz_npy("dump_tensor_data/short.npy", "<f8", "(3,)", f32, 12);
    msp_fuzz_put_pt(path, sizeof path, "dump_tensor_data/f32.pt", pkl, sizeof pkl - 1, f32,
                    sizeof f32);
}

static void msp_fuzz_read(msp_dump_file_t *f, const msp_record_info_t *r,
                          const msp_tensor_info_t *t)
{
    static unsigned char buf[1 << 16];
    if (t->nbytes > 0 && t->nbytes <= (int64_t)sizeof buf &&
        msp_dump_read_tensor(f, r, t, buf, (size_t)t->nbytes - 1) == MSP_OK)
        msp_fuzz_die("a one-byte-short buffer accepted for", f->path);
    msp_err rc = msp_dump_read_tensor(f, r, t, buf, sizeof buf);
    msp_fuzz_note(rc);
    if (rc && !strstr(msp_last_error(), f->path) && !strstr(msp_last_error(), "dump_tensor_data"))
        msp_fuzz_die("a read refused without naming the file, for", f->path);
}

static void msp_fuzz_walk(msp_dump_file_t *f)
{
    int reads = 0;
    for (size_t i = 0; i < f->n_records; i++) {
        const msp_record_info_t *r = &f->records[i];
        char **k, **v;
        size_t n;
        if (!r->name || (r->n_tensors && !r->tensors))
            msp_fuzz_die("a broken record in the catalogue of", f->path);
        if (msp_dump_record_attrs(f, r, &k, &v, &n) == MSP_OK) {
            for (size_t j = 0; j < n; j++)
                if (!k[j] || !v[j])
                    msp_fuzz_die("a NULL attribute from", f->path);
            msp_free_strings(k, n);
            msp_free_strings(v, n);
        }
        free(msp_msprobe_stack(f, r->name));
        for (size_t j = 0; j < r->n_tensors; j++) {
            const msp_tensor_info_t *t = &r->tensors[j];
            if (!t->role || t->ndim < 0 || t->ndim > MSP_MAX_NDIM)
                msp_fuzz_die("a broken tensor in the catalogue of", f->path);
            if (t->has_data && reads < 16) {
                reads++;
                msp_fuzz_read(f, r, t);
            }
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[3] = {"dump.json", "stack.json", "construct.json"};
    static int ready;
    if (!ready) {
        msp_fuzz_tensor_files();
        ready = 1;
    }
    char path[600], json[600];
    const uint8_t *p = data ? data : (const uint8_t *)"", *end = p + size;
    for (int i = 0; i < 3; i++) {
        if (!p) {
            snprintf(path, sizeof path, "%s/%s", msp_fuzz_dir(), names[i]);
            remove(path);
            continue;
        }
        const uint8_t *nul = memchr(p, '\0', (size_t)(end - p));
        msp_fuzz_put(i ? path : json, sizeof path, names[i], p, (size_t)((nul ? nul : end) - p));
        p = nul ? nul + 1 : NULL;
    }
    msp_dump_file_t *f = NULL;
    msp_err rc = msp_msprobe_open(json, &f);
    msp_fuzz_note(rc);
    if (rc) {
        if (f || !strstr(msp_last_error(), json))
            msp_fuzz_die("a refusal without a detail naming", json);
        return 0;
    }
    msp_fuzz_walk(f);
    msp_dump_close(f);
    return 0;
}
