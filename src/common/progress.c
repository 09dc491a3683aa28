/* A progress bar for long work, drawn only when the stream is a terminal so
 * that logs and CI output stay clean. */
#include "msprobe/common.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct msp_progress {
    FILE *out;
    char label[48];
    uint64_t total, done;
    double started, last_draw;
    pthread_mutex_t lock;
};

static double msp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void msp_progress_draw(msp_progress_t *p, int final)
{
    const int width = 30;
    double frac = p->total ? (double)p->done / (double)p->total : 1.0;
    if (frac > 1.0)
        frac = 1.0;
    int fill = (int)(frac * width);
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    double el = msp_now() - p->started;
    fprintf(p->out, "\r%-16s [%s] %5.1f%% %6.1fs%s", p->label, bar, frac * 100.0, el,
            final ? "\n" : "");
    fflush(p->out);
}

msp_progress_t *msp_progress_new(FILE *out, const char *label, uint64_t total)
{
    if (!out || !isatty(fileno(out)))
        return NULL;
    msp_progress_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->out = out;
    snprintf(p->label, sizeof p->label, "%s", label ? label : "");
    p->total = total;
    p->started = msp_now();
    pthread_mutex_init(&p->lock, NULL);
    return p;
}

void msp_progress_add(msp_progress_t *p, uint64_t done)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->done += done;
    double t = msp_now();
    if (t - p->last_draw >= 0.1) {
        p->last_draw = t;
        msp_progress_draw(p, 0);
    }
    pthread_mutex_unlock(&p->lock);
}

void msp_progress_finish(msp_progress_t *p)
{
    if (!p)
        return;
    p->done = p->total;
    msp_progress_draw(p, 1);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
