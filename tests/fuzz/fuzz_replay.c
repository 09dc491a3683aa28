/* Replays a fuzz target's seed corpus through its LLVMFuzzerTestOneInput,
 * for builds without libFuzzer (gcc, the ASan pass): every file given, and
 * every file of every directory given, in name order. The targets abort on a
 * broken invariant, and the sanitizer builds catch memory errors, so a seed
 * that once found a bug keeps guarding against it. Exit 0 after at least
 * one input, 2 when there was nothing to replay or a file cannot be read. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 4096, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        unsigned char *nb = realloc(buf, cap *= 2);
        if (!nb)
            free(buf);
        buf = nb;
    }
    int bad = ferror(f) || !buf;
    fclose(f);
    if (bad) {
        fprintf(stderr, "fuzz_replay: cannot read %s\n", path);
        free(buf);
        return -1;
    }
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 1;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int skip_dot(const struct dirent *e)
{
    return e->d_name[0] != '.';
}

int main(int argc, char **argv)
{
    long done = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 2;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (replay_file(argv[i]) < 0)
                return 2;
            done++;
            continue;
        }
        struct dirent **v = NULL;
        int n = scandir(argv[i], &v, skip_dot, by_name);
        if (n < 0) {
            perror(argv[i]);
            return 2;
        }
        int rc = 0;
        for (int k = 0; k < n; k++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], v[k]->d_name);
            if (!rc && replay_file(path) < 0)
                rc = 2;
            done += !rc;
            free(v[k]);
        }
        free(v);
        if (rc)
            return rc;
    }
    printf("fuzz_replay: %ld inputs replayed\n", done);
    return done ? 0 : 2;
}
