/* Catalogues the reader helper already verified, kept for a later open of
 * the same unchanged file in this process (fmt_internal.h). One compare
 * opens each step file three times (metrics, replay, the report's samples);
 * a helper's verification of every /index row against its dataset is most
 * of an open's cost, and would find the same answer each time. A file is
 * the same when the descriptor just opened has the same device, inode,
 * size, modification and status-change times as the one verified: any
 * write to it changes the last. */
#include "fmt_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MSP_CAT_SLOTS 16
/* A catalogue above this is not kept (a dump of millions of records). */
#define MSP_CAT_MAX_BYTES ((size_t)64 << 20)

struct msp_cat_slot {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
    unsigned char *buf;
    size_t n;
    unsigned long used;
};

static struct msp_cat_slot msp_cat[MSP_CAT_SLOTS];
static unsigned long msp_cat_clock;
static pthread_mutex_t msp_cat_lock = PTHREAD_MUTEX_INITIALIZER;

static int msp_cat_same(const struct msp_cat_slot *s, const struct stat *st)
{
    return s->buf && s->dev == st->st_dev && s->ino == st->st_ino && s->size == st->st_size &&
           s->mtime.tv_sec == st->st_mtim.tv_sec && s->mtime.tv_nsec == st->st_mtim.tv_nsec &&
           s->ctime.tv_sec == st->st_ctim.tv_sec && s->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

int msp_cat_cache_get(int fd, unsigned char **buf, size_t *n)
{
    struct stat st;
    *buf = NULL;
    *n = 0;
    if (fd < 0 || fstat(fd, &st) != 0)
        return 0;
    int hit = 0;
    pthread_mutex_lock(&msp_cat_lock);
    for (int i = 0; i < MSP_CAT_SLOTS && !hit; i++) {
        struct msp_cat_slot *s = &msp_cat[i];
        if (!msp_cat_same(s, &st) || !(*buf = malloc(s->n ? s->n : 1)))
            continue;
        memcpy(*buf, s->buf, s->n);
        *n = s->n;
        s->used = ++msp_cat_clock;
        hit = 1;
    }
    pthread_mutex_unlock(&msp_cat_lock);
    return hit;
}

void msp_cat_cache_put(int fd, unsigned char *buf, size_t n)
{
    struct stat st;
    if (fd < 0 || n > MSP_CAT_MAX_BYTES || fstat(fd, &st) != 0) {
        free(buf);
        return;
    }
    /* kept as it came (copying it cost a catalogue's worth of fresh pages);
     * only the slack of its read buffer is given back */
    unsigned char *kept = n ? realloc(buf, n) : buf;
    if (!kept)
        kept = buf;
    pthread_mutex_lock(&msp_cat_lock);
    int at = 0;
    for (int i = 0; i < MSP_CAT_SLOTS; i++) {
        if (msp_cat_same(&msp_cat[i], &st) || !msp_cat[i].buf) {
            at = i;
            break;
        }
        if (msp_cat[i].used < msp_cat[at].used)
            at = i;
    }
    struct msp_cat_slot *s = &msp_cat[at];
    free(s->buf);
    *s = (struct msp_cat_slot){st.st_dev,  st.st_ino, st.st_size, st.st_mtim,
                               st.st_ctim, kept,      n,          ++msp_cat_clock};
    pthread_mutex_unlock(&msp_cat_lock);
}
