/* Steps that lost records to a failed write (dump_writer.c's writer thread
 * only): kept as ranges and said once at shutdown. Apart from the writer so
 * that dump_writer.c keeps to one job, the queue and the files. */
#include "dump_lost.h"
#include "shim_log.h"

#include <stdio.h>

/* Steps that lost records to a failed write (a full disk, an unwritable
 * directory), kept as ranges by the writer thread and said once at
 * shutdown, so the user knows which steps to dump again: a first warning
 * alone names only the first failure. dropped: no file for the step. */
#define MSP_LOST_RANGES 64
struct lost_range {
    int64_t first, last;
    int dropped;
};
static struct lost_range g_lost[MSP_LOST_RANGES];
static size_t g_nlost;
static int g_lost_more;

void msp_dq_note_lost(int64_t step, int dropped)
{
    if (g_nlost && g_lost[g_nlost - 1].last == step) {
        if (g_lost[g_nlost - 1].first == step)
            g_lost[g_nlost - 1].dropped |= dropped;
        else if (dropped && !g_lost[g_nlost - 1].dropped) { /* split off the last step */
            g_lost[g_nlost - 1].last--;
            if (g_nlost < MSP_LOST_RANGES)
                g_lost[g_nlost++] = (struct lost_range){step, step, 1};
        }
        return;
    }
    if (g_nlost && g_lost[g_nlost - 1].last + 1 == step && g_lost[g_nlost - 1].dropped == dropped) {
        g_lost[g_nlost - 1].last = step;
        return;
    }
    if (g_nlost == MSP_LOST_RANGES) {
        g_lost_more = 1;
        return;
    }
    g_lost[g_nlost++] = (struct lost_range){step, step, dropped};
}

/* "steps 2-3 dropped (no dump file), 5 incomplete (records missing)" */
void msp_dq_say_lost(void)
{
    if (!g_nlost)
        return;
    char buf[2048];
    size_t n = 0;
    for (size_t i = 0; i < g_nlost && n < sizeof buf - 64; i++) {
        int k = g_lost[i].first == g_lost[i].last
                    ? snprintf(buf + n, sizeof buf - n, "%s%lld", i ? ", " : "",
                               (long long)g_lost[i].first)
                    : snprintf(buf + n, sizeof buf - n, "%s%lld-%lld", i ? ", " : "",
                               (long long)g_lost[i].first, (long long)g_lost[i].last);
        n += (size_t)k;
        k = snprintf(buf + n, sizeof buf - n, " %s",
                     g_lost[i].dropped ? "dropped (no dump file)" : "incomplete (records missing)");
        n += (size_t)k;
    }
    msp_shim_msg("warning: writes failed (disk full or unwritable), and these steps were lost: "
                 "%s%s; dump them again (dump_iter) once there is room",
                 buf, g_lost_more ? ", and more" : "");
}
