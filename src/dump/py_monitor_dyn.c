/* msprobe's dynamic start and stop for monitor mode (msprobe-monitor(1),
 * DYNAMIC START AND STOP): with DYNAMIC_MONITOR=true nothing is monitored
 * until the config says "dynamic_on": true. The file is looked at after
 * each optimizer step (its modification time, as msprobe does; the first
 * look always reads it), and a changed, valid file with dynamic_on true
 * takes effect from the next step; an invalid one changes nothing (one
 * warning). */
#include "py_monitor_dyn.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static int g_dyn = -1;
static int64_t g_seen_ns = -1, g_seen_size = -1;

int msp_mon_dyn_on(void)
{
    if (g_dyn < 0) {
        const char *v = getenv("DYNAMIC_MONITOR");
        g_dyn = v && !strcasecmp(v, "true");
    }
    return g_dyn;
}

static void seen(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0) {
        g_seen_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        g_seen_size = (int64_t)st.st_size;
    }
}

int msp_mon_dyn_poll(const char *path, msp_mon_config_t *fresh)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return 0;
    int64_t ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    if (ns == g_seen_ns && (int64_t)st.st_size == g_seen_size)
        return 0;
    g_seen_ns = ns;
    g_seen_size = (int64_t)st.st_size;
    if (msp_mon_config_load(path, fresh) != MSP_OK) {
        msp_shim_msg("warning: monitor: %s: not updated: %s", path, msp_last_error());
        msp_mon_config_free(fresh);
        return 0;
    }
    if (!fresh->dynamic_on) {
        msp_mon_config_free(fresh);
        return 0;
    }
    return 1;
}

void msp_mon_dyn_finished(const char *path)
{
    if (msp_mon_config_dynamic_off(path) != MSP_OK)
        msp_shim_msg("warning: monitor: cannot set dynamic_on to false in %s: %s", path,
                     msp_last_error());
    else
        msp_shim_msg("monitor: %s: dynamic_on set to false; set it to true to monitor again", path);
    seen(path); /* our own change starts nothing */
}
