/* The CLI's messages on the terminal: text cleaned of control characters,
 * "msprobe: " errors and warnings. Every command uses these; they call no
 * command (msprobe.c dispatches to the commands, and they come down here). */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int msp_tvprintf(FILE *out, const char *fmt, va_list ap)
{
    char small[1024], *big = NULL, *owned = NULL;
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(small, sizeof small, fmt, aq);
    va_end(aq);
    const char *text = small;
    if (n >= (int)sizeof small && (big = malloc((size_t)n + 1))) {
        vsnprintf(big, (size_t)n + 1, fmt, ap);
        text = big;
    }
    int r = n < 0 ? n : fputs(msp_term_clean(text, 1, &owned), out);
    free(owned);
    free(big);
    return r < 0 ? r : n;
}

int msp_tprintf(FILE *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = msp_tvprintf(out, fmt, ap);
    va_end(ap);
    return n;
}

void msp_errorf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("msprobe: ", stderr);
    msp_tvprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void msp_warnf(const msp_cli_ctx_t *ctx, const char *fmt, ...)
{
    if (ctx && ctx->verbosity == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("msprobe: warning: ", stderr);
    msp_tvprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int msp_report_error(msp_err rc)
{
    const char *d = msp_last_error();
    msp_errorf("%s", d && *d ? d : msp_strerror(rc));
    return MSP_EXIT_USAGE;
}
