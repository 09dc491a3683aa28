/* Text buffers and the self-contained HTML page every report shares.
 *
 * A report page carries everything it draws with: Chart.js (Debian's
 * libjs-chart.js, embedded into msprobe at build time by MspEmbed.cmake), the
 * report's own script and style, and its data as one JSON object. Opening it
 * needs no network, no server and no file beside it. */
#include "msprobe/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Generated from chart.min.js, html_base.css and html_base.js
 * (src/common/CMakeLists.txt). */
extern const char msp_html_chartjs[];
extern const size_t msp_html_chartjs_len;
extern const char msp_html_base_css[];
extern const char msp_html_base_js[];

void msp_buf_json_str(msp_buf_t *b, const char *s)
{
    char *owned = NULL;
    const char *t = msp_utf8_clean(s, 0, &owned);
    if (!t) {
        b->oom = 1;
        return;
    }
    msp_buf_put(b, "\"", 1);
    const char *run = t;
    for (const char *p = t;; p++) {
        unsigned char c = (unsigned char)*p;
        if (c && c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&')
            continue;
        msp_buf_put(b, run, (size_t)(p - run));
        if (!c)
            break;
        switch (c) {
        case '"':
            msp_buf_puts(b, "\\\"");
            break;
        case '\\':
            msp_buf_puts(b, "\\\\");
            break;
        case '\n':
            msp_buf_puts(b, "\\n");
            break;
        case '\t':
            msp_buf_puts(b, "\\t");
            break;
        default: /* control characters, and what could end a <script> */
            msp_buf_printf(b, "\\u%04x", c);
            break;
        }
        run = p + 1;
    }
    msp_buf_put(b, "\"", 1);
    free(owned);
}

void msp_buf_json_num(msp_buf_t *b, double v, int digits)
{
    if (isnan(v))
        msp_buf_puts(b, "null");
    else if (isinf(v))
        msp_buf_puts(b, v > 0 ? "1e999" : "-1e999");
    else {
        char t[MSP_DTOA_SIZE]; /* printf's %.*g, without printf: a page's numbers */
        msp_buf_put(b, t, msp_fmt_g(v, digits, t));
    }
}

void msp_buf_json_int(msp_buf_t *b, long long v)
{
    char t[24];
    msp_buf_put(b, t, msp_i64_digits(t, (int64_t)v));
}

const char *msp_html_chartjs_version(void)
{
    /* The banner reads " * Chart.js v3.9.1" */
    static char ver[32];
    const char *p = strstr(msp_html_chartjs, "Chart.js v");
    if (!ver[0] && p && p < msp_html_chartjs + 200) {
        p += strlen("Chart.js v");
        size_t n = strspn(p, "0123456789.");
        snprintf(ver, sizeof ver, "%.*s", (int)(n < sizeof ver ? n : sizeof ver - 1), p);
    }
    return ver;
}

static void msp_html_escape(msp_buf_t *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            msp_buf_puts(b, "&lt;");
        else if (*s == '>')
            msp_buf_puts(b, "&gt;");
        else if (*s == '&')
            msp_buf_puts(b, "&amp;");
        else
            msp_buf_put(b, s, 1);
    }
}

msp_err msp_html_write_page(const char *path, const char *title, const char *css, const char *data,
                            size_t data_len, const char *js)
{
    if (!path || !title || !css || !data || !js)
        return msp_fail(MSP_ERR_USAGE, "html page: missing argument");
    /* The page's own parts are ours; a "</script" in them would end the
     * element early, and the data is built by msp_buf_json_*, which escapes '<'. */
    if (strstr(js, "</script") || strstr(msp_html_base_js, "</script") ||
        memchr(data, '<', data_len) || strstr(msp_html_chartjs, "</script"))
        return msp_fail(MSP_ERR_INTERNAL, "html page %s: a script part holds \"<\"", path);
    msp_buf_t b = {0};
    msp_buf_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                     "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    msp_buf_printf(&b, "<meta name=\"generator\" content=\"msprobe %s, Chart.js %s\">\n",
                   MSP_VERSION, msp_html_chartjs_version());
    msp_buf_puts(&b, "<title>");
    msp_html_escape(&b, title);
    msp_buf_puts(&b, "</title>\n<style>\n");
    msp_buf_puts(&b, msp_html_base_css);
    msp_buf_puts(&b, css);
    msp_buf_puts(&b, "</style>\n</head>\n<body>\n<noscript>This report draws its charts with "
                     "JavaScript (embedded in this file: it needs no network).</noscript>\n"
                     "<div id=\"msp-app\"></div>\n"
                     "<script type=\"application/json\" id=\"msp-data\">");
    msp_buf_put(&b, data, data_len);
    msp_buf_printf(&b,
                   "</script>\n<script>/* Chart.js %s (MIT License), from Debian's "
                   "libjs-chart.js */\n",
                   msp_html_chartjs_version());
    msp_buf_put(&b, msp_html_chartjs, msp_html_chartjs_len);
    msp_buf_puts(&b, "\n</script>\n<script>\n");
    msp_buf_puts(&b, msp_html_base_js);
    msp_buf_puts(&b, js);
    msp_buf_puts(&b, "\n</script>\n</body>\n</html>\n");
    msp_err rc;
    if (b.oom)
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory writing %s", path);
    else
        rc = msp_write_file_atomic(path, b.data, b.len);
    msp_buf_free(&b);
    return rc;
}
