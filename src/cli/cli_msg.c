/* The CLI's messages on the terminal: text cleaned of control characters,
 * "msprobe: " errors and warnings. Every command uses these; they call no
 * command (msprobe.c dispatches to the commands, and they come down here). */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int msp_tvline(FILE *out, const char *pre, const char *fmt, va_list ap, const char *post)
{
    char small[1024], *big = NULL, *owned = NULL, *line = NULL;
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(small, sizeof small, fmt, aq);
    va_end(aq);
    if (n < 0)
        return n;
    const char *text = small;
    if (n >= (int)sizeof small && (big = malloc((size_t)n + 1))) {
        vsnprintf(big, (size_t)n + 1, fmt, ap);
        text = big;
    }
    text = msp_term_clean(text, 1, &owned);
    size_t a = strlen(pre), b = strlen(text), c = strlen(post);
    int r = 0;
    if (!a && !c) { /* nothing to join (msp_tvprintf: stdout, buffered) */
        r = fputs(text, out) < 0 ? -1 : 0;
    } else if ((line = malloc(a + b + c))) {
        memcpy(line, pre, a);
        memcpy(line + a, text, b);
        memcpy(line + a + b, post, c);
        r = fwrite(line, 1, a + b + c, out) == a + b + c ? 0 : -1;
    } else if (fputs(pre, out) < 0 || fputs(text, out) < 0 || fputs(post, out) < 0) {
        r = -1;
    }
    free(line);
    free(owned);
    free(big);
    return r < 0 ? r : n;
}

int msp_tvprintf(FILE *out, const char *fmt, va_list ap)
{
    return msp_tvline(out, "", fmt, ap, "");
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
    msp_tvline(stderr, "msprobe: ", fmt, ap, "\n");
    va_end(ap);
}

void msp_warnf(const msp_cli_ctx_t *ctx, const char *fmt, ...)
{
    if (ctx && ctx->verbosity == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    msp_tvline(stderr, "msprobe: warning: ", fmt, ap, "\n");
    va_end(ap);
}

int msp_report_error(msp_err rc)
{
    const char *d = msp_last_error();
    msp_errorf("%s", d && *d ? d : msp_strerror(rc));
    return MSP_EXIT_USAGE;
}
