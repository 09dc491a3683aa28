/* msprobe's scope: a range of records, from the start of the one named
 * first to the end of the one named last, in execution order (its
 * APIRangeScope, ModuleRangeScope and MixRangeScope). Every API and module
 * is then hooked, and each call asks here whether it is in the range: an API
 * call's forward record opens it when it is the first name and closes it
 * after itself when it is the last; a module's forward opens it at its start
 * and, as the last name, closes it at its end at L0 (what ran inside is in)
 * and at its start at mix (what runs inside is out), as msprobe 26 does. The range is one state
 * for the process (msprobe's is one per collector), kept across steps: a
 * range not closed in one step goes on in the next, as msprobe's does. */
#include "dump_py.h"

#include <string.h>

static int g_in;         /* between the opening and the closing record */
static int g_seen_begin; /* the first name ran at least once */

int msp_scope_on(void)
{
    return msp_g.have_cfg && msp_g.cfg.scope[0] != NULL;
}

/* The directions the forward call `name` is recorded in: forward when in
 * the range (a backward pass runs after the range closed: msprobe checks
 * backward names then, out of range), nothing otherwise. */
static unsigned in_range(void)
{
    return g_in ? msp_dump_dirs() & MSP_DIR_FORWARD : 0;
}

unsigned msp_scope_api(const char *name)
{
    if (strcmp(name, msp_g.cfg.scope[0]) == 0) {
        g_in = 1;
        g_seen_begin = 1;
    }
    unsigned d = in_range();
    if (strcmp(name, msp_g.cfg.scope[1]) == 0)
        g_in = 0;
    return d;
}

unsigned msp_scope_module_begin(const char *name, int *closes)
{
    if (strcmp(name, msp_g.cfg.scope[0]) == 0) {
        g_in = 1;
        g_seen_begin = 1;
    }
    unsigned d = in_range();
    *closes = strcmp(name, msp_g.cfg.scope[1]) == 0;
    /* At mix msprobe checks a module's name as an API's when it starts
     * (MixRangeScope.check): the last module closes the range there, its own
     * record in, what runs inside it out. At L0 (ModuleRangeScope) its end
     * does, what ran inside in. */
    if (*closes && msp_g.cfg.dump_mode == MSP_DUMP_MIX) {
        *closes = 0;
        g_in = 0;
    }
    return d;
}

void msp_scope_module_end(void)
{
    g_in = 0;
}

void msp_scope_exit_report(void)
{
    static int done;
    if (done || !msp_scope_on() || g_seen_begin || !msp_g.torch_seen)
        return;
    done = 1;
    msp_shim_msg("warning: %s: scope: \"%s\" never ran, so nothing in the range was dumped "
                 "(record names as msprobe ls or a dump without scope shows them)",
                 msp_g.cfg.source ? msp_g.cfg.source : "config", msp_g.cfg.scope[0]);
}
