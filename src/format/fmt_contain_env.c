/* How the reader helper (msprobe-catalogue, fmt_contain.c) is found and
 * with what environment it starts. */
#include "fmt_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int msp_is_exe(const char *p)
{
    return p && access(p, X_OK) == 0;
}

/* The helper: MSPROBE_CATALOGUE_HELPER; else next to the running program (the
 * msprobe binary, in the build tree and installed); else the installed
 * libexec path; else the build tree's (test programs). NULL: none. */
char *msp_helper_path(void)
{
    const char *env = getenv("MSPROBE_CATALOGUE_HELPER");
    if (env && *env)
        return strdup(env);
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            char *p = msp_asprintf("%s/msprobe-catalogue", self);
            if (msp_is_exe(p))
                return p;
            free(p);
        }
    }
#ifdef MSP_LIBEXEC_HELPER
    if (msp_is_exe(MSP_LIBEXEC_HELPER))
        return strdup(MSP_LIBEXEC_HELPER);
#endif
#ifdef MSP_BUILD_HELPER
    if (msp_is_exe(MSP_BUILD_HELPER))
        return strdup(MSP_BUILD_HELPER);
#endif
    return NULL;
}

/* The helper's environment: ours, with
 *  - glibc's malloc asked to back its heap with transparent huge pages
 *    (GLIBC_TUNABLES glibc.malloc.hugetlb=1, added to the tunables already
 *    set; one the user set is kept). A helper lives for one file: most of
 *    its time was first touches of fresh pages, one fault each, and a huge
 *    page is one fault for 512 of them. Where the kernel has transparent
 *    huge pages off, glibc does nothing;
 *  - every symbol bound at its start (LD_BIND_NOW=1, unless the user set
 *    it): a server's children inherit its bindings, where each child bound
 *    lazily wrote the same table entries again, a copy-on-write fault for
 *    each page of them (issue 42).
 * *text is the one string allocated (NULL when none is); the array is NULL
 * when nothing is added, or out of memory (then the helper gets ours). */
char **msp_helper_env(char **text)
{
    static const char key[] = "GLIBC_TUNABLES=", want[] = "glibc.malloc.hugetlb=1";
    static const char bind_key[] = "LD_BIND_NOW=";
    static char bind[] = "LD_BIND_NOW=1";
    extern char **environ;
    size_t n = 0;
    const char *old = NULL;
    int bound = 0;
    for (char **e = environ; e && *e; e++, n++) {
        if (strncmp(*e, key, sizeof key - 1) == 0)
            old = *e + sizeof key - 1;
        bound |= strncmp(*e, bind_key, sizeof bind_key - 1) == 0;
    }
    *text = NULL;
    int tune = !(old && strstr(old, "glibc.malloc.hugetlb="));
    if (!tune && bound)
        return NULL;
    char **env = malloc((n + 3) * sizeof *env);
    if (tune)
        *text = msp_asprintf("%s%s%s%s", key, old && *old ? old : "", old && *old ? ":" : "", want);
    if (!env || (tune && !*text)) {
        free(env);
        free(*text);
        *text = NULL;
        return NULL;
    }
    size_t k = 0;
    for (char **e = environ; e && *e; e++)
        if (!tune || strncmp(*e, key, sizeof key - 1) != 0)
            env[k++] = *e;
    if (tune)
        env[k++] = *text;
    if (!bound)
        env[k++] = bind;
    env[k] = NULL;
    return env;
}
