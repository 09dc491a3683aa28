/* msprobe's scope: a range of records, from the start of the one named
 * first to the end of the one named last, in execution order (its
 * APIRangeScope, ModuleRangeScope and MixRangeScope). Every API and module
 * is then hooked, and each call asks here whether it is in the range: an API
 * call's forward record opens it when it is the first name and closes it
 * after itself when it is the last; a module's forward opens it at its start
 * and, as the last name, closes it at its end at L0 (what ran inside is in)
 * and at its start at mix (what runs inside is out), as msprobe 26 does; a
 * backward name opens or closes it when that backward record is made
 * (py_bwd.c asks msp_scope_backward). The range is one state
 * for the process (msprobe's is one per collector), kept across steps: a
 * range not closed in one step goes on in the next, as msprobe's does. */
#include "dump_py.h"

#include <string.h>

static int g_in;         /* between the opening and the closing record */
static int g_seen_begin; /* the first name ran at least once */
static int g_bwd = -1;   /* a name is a backward record's (-1: not looked yet) */
static int g_listed;     /* mix: modules running whose name holds a list entry */

/* msprobe's check_api_list inside the range: no list, a list entry's text
 * held in the record's name, or at mix a listed module running (its
 * MixRangeScope.in_list). */
static int list_pass(const char *name)
{
    const msp_config_t *c = msp_cfg;
    if (c->n_api_list == 0 || g_listed > 0)
        return 1;
    for (size_t i = 0; i < c->n_api_list; i++)
        if (c->api_list[i].text && strstr(name, c->api_list[i].text))
            return 1;
    return 0;
}

int msp_scope_on(void)
{
    return msp_g.have_cfg && msp_cfg->scope[0] != NULL;
}

static int is_backward(const char *name)
{
    size_t n = strlen(name);
    return (n > 9 && strcmp(name + n - 9, ".backward") == 0) || strstr(name, ".backward.");
}

/* The directions a forward call is hooked in: forward when in the range;
 * backward for every call when a name is a backward record's, each backward
 * record then asking msp_scope_backward when it is made (msprobe checks a
 * backward name when its backward runs). With two forward names the range
 * has closed before any backward runs: no backward is hooked. */
static unsigned in_range(void)
{
    if (g_bwd < 0)
        g_bwd = is_backward(msp_cfg->scope[0]) || is_backward(msp_cfg->scope[1]);
    return msp_dump_dirs() & ((g_in ? MSP_DIR_FORWARD : 0u) | (g_bwd ? MSP_DIR_BACKWARD : 0u));
}

int msp_scope_backward(const char *name)
{
    if (strcmp(name, msp_cfg->scope[0]) == 0) {
        g_in = 1;
        g_seen_begin = 1;
    }
    int in = g_in && list_pass(name);
    if (strcmp(name, msp_cfg->scope[1]) == 0)
        g_in = 0;
    return in;
}

unsigned msp_scope_api(const char *name)
{
    if (strcmp(name, msp_cfg->scope[0]) == 0) {
        g_in = 1;
        g_seen_begin = 1;
    }
    unsigned d = in_range();
    if (!list_pass(name))
        d &= ~MSP_DIR_FORWARD;
    if (strcmp(name, msp_cfg->scope[1]) == 0)
        g_in = 0;
    return d;
}

unsigned msp_scope_module_begin(const char *name, int *closes, int *listed)
{
    if (strcmp(name, msp_cfg->scope[0]) == 0) {
        g_in = 1;
        g_seen_begin = 1;
    }
    /* at mix a module the list names lets everything inside it through */
    *listed = 0;
    for (size_t i = 0; msp_cfg->dump_mode == MSP_DUMP_MIX && i < msp_cfg->n_api_list; i++)
        if (msp_cfg->api_list[i].text && strstr(name, msp_cfg->api_list[i].text)) {
            *listed = 1;
            g_listed++;
            break;
        }
    unsigned d = in_range();
    if (!list_pass(name))
        d &= ~MSP_DIR_FORWARD;
    *closes = strcmp(name, msp_cfg->scope[1]) == 0;
    /* At mix msprobe checks a module's name as an API's when it starts
     * (MixRangeScope.check): the last module closes the range there, its own
     * record in, what runs inside it out. At L0 (ModuleRangeScope) its end
     * does, what ran inside in. */
    if (*closes && msp_cfg->dump_mode == MSP_DUMP_MIX) {
        *closes = 0;
        g_in = 0;
    }
    return d;
}

void msp_scope_module_end(int closes, int listed)
{
    if (closes)
        g_in = 0;
    if (listed && g_listed > 0)
        g_listed--;
}

void msp_scope_exit_report(void)
{
    static int done;
    if (done || !msp_scope_on() || g_seen_begin || !msp_g.torch_seen)
        return;
    done = 1;
    msp_shim_msg("warning: %s: scope: \"%s\" never ran, so nothing in the range was dumped "
                 "(record names as msprobe ls or a dump without scope shows them)",
                 msp_cfg->source ? msp_cfg->source : "config", msp_cfg->scope[0]);
}
