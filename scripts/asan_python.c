/* The Python of the sanitizer pass (scripts/test.sh): puts the ASan runtime
 * (MSP_ASAN_RT) first in LD_PRELOAD, then execs the real interpreter
 * (MSP_ASAN_REAL_PYTHON, default /usr/bin/python3). An ASan-built shim
 * preloaded into Python works only when the runtime is the first library
 * loaded; tests set LD_PRELOAD to the shim alone, so this wrapper, built
 * static (LD_PRELOAD does not apply to it), adds the runtime in front. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    const char *rt = getenv("MSP_ASAN_RT");
    const char *real = getenv("MSP_ASAN_REAL_PYTHON");
    const char *pre = getenv("LD_PRELOAD");
    (void)argc;
    if (!real || !*real)
        real = "/usr/bin/python3";
    if (rt && *rt && !(pre && strstr(pre, rt))) {
        size_t n = strlen(rt) + (pre ? strlen(pre) : 0) + 2;
        char *v = malloc(n);
        if (!v)
            return 127;
        snprintf(v, n, "%s%s%s", rt, pre && *pre ? ":" : "", pre ? pre : "");
        setenv("LD_PRELOAD", v, 1);
        free(v);
    }
    argv[0] = (char *)real;
    execv(real, argv);
    perror(real);
    return 127;
}
