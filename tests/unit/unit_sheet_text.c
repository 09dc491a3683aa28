/* A report sheet's text cells (rep_sheet_str, src/report/rep_sheet.c) as
 * XML: an inline string whose bytes are the text's, but for the control
 * characters XML 1.0 cannot hold (below 0x20 but tab, newline and carriage
 * return), each U+FFFD as any invalid byte (msp_utf8_clean), then the three
 * that XML escapes (& < > as &amp; &lt; &gt;) and carriage return as
 * _x000D_ (Excel's escape, which keeps it from becoming a newline); DEL
 * and valid UTF-8 as they are; a text that begins or ends in white space
 * kept with xml:space="preserve". The sheet finds where a text needs
 * none of this sixteen bytes at a time where it can: here each text starts
 * at every offset of a 16-byte block, is 1 to 40 bytes long, holds one
 * byte of each kind at its start, middle or end (or none), and lies
 * between bytes that would need escaping, which must not be read as its
 * own. The wanted XML is built here by the rule above. */
#include "rep_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit_check.h"

/* the rule: text's bytes as the cell's XML must hold them */
static size_t want_xml(const char *raw, char *out)
{
    char text[256];
    size_t n = 0, len = 0;
    for (const unsigned char *p = (const unsigned char *)raw; *p; p++) {
        if (*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r') {
            memcpy(text + len, "\xef\xbf\xbd", 3); /* U+FFFD */
            len += 3;
        } else {
            text[len++] = (char)*p;
        }
    }
    text[len] = '\0';
    unsigned char first = (unsigned char)text[0], last = (unsigned char)text[len - 1];
    int keep = first == ' ' || (first >= 9 && first <= 13) || last == ' ' ||
               (last >= 9 && last <= 13);
    n += (size_t)sprintf(out, "<c t=\"inlineStr\"><is><t%s>",
                         keep ? " xml:space=\"preserve\"" : "");
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '&')
            n += (size_t)sprintf(out + n, "&amp;");
        else if (c == '<')
            n += (size_t)sprintf(out + n, "&lt;");
        else if (c == '>')
            n += (size_t)sprintf(out + n, "&gt;");
        else if (c < 0x20 && c != '\t' && c != '\n')
            n += (size_t)sprintf(out + n, "_x00%02X_", c);
        else
            out[n++] = (char)c;
    }
    n += (size_t)sprintf(out + n, "</t></is></c>");
    return n;
}

int main(void)
{
    /* the kinds: none, the escaped, controls, DEL, a two-byte character */
    static const char *const kinds[] = {"",   "&",  "<",        ">",           "\x01",
                                        "\t", "\n", "\r",       "\x1f",        "\x7f",
                                        " ",  "\"", "\xc3\xa9", "\xe2\x82\xac"};
    const size_t nk = sizeof kinds / sizeof kinds[0];
    char dir[] = "/tmp/msp-unit-sheet-text-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    rep_sheet_t s;
    CHECK(rep_sheet_open(&s, dir, 1) == MSP_OK);
    static char block[256] __attribute__((aligned(64)));
    size_t cells = 0, checked = 0, bad = 0, row = 1;
    for (size_t off = 0; off < 16; off++)
        for (size_t len = 1; len <= 40; len++)
            for (size_t k = 0; k < nk; k++)
                for (int at = 0; at < 3; at++) {
                    size_t kl = strlen(kinds[k]);
                    if (kl > len || (k == 0 && at > 0))
                        continue;
                    /* around the text, bytes that would need escaping */
                    memset(block, '&', sizeof block);
                    for (size_t i = 0; i < sizeof block; i += 3)
                        block[i] = (char)0x80;
                    char *text = block + 64 + off;
                    for (size_t i = 0; i < len; i++)
                        text[i] = (char)('a' + (i * 7 + off) % 26);
                    size_t pos = at == 0 ? 0 : at == 1 ? (len - kl) / 2 : len - kl;
                    memcpy(text + pos, kinds[k], kl);
                    text[len] = '\0';
                    char want[512];
                    size_t wn = want_xml(text, want);
                    rep_sheet_row(&s, row++);
                    char *base = s.xml;
                    size_t from = s.xml_len;
                    rep_sheet_str(&s, 0, text, 0);
                    cells++;
                    if (s.err || s.xml != base || s.xml_len < from)
                        continue; /* handed to the deflater: not in memory */
                    checked++;
                    if (s.xml_len - from != wn || memcmp(s.xml + from, want, wn) != 0) {
                        if (bad++ < 10)
                            fprintf(stderr,
                                    "offset %zu length %zu kind %zu at %d: got '%.*s', "
                                    "want '%.*s'\n",
                                    off, len, k, at, (int)(s.xml_len - from), s.xml + from, (int)wn,
                                    want);
                    }
                }
    CHECK(s.err == 0);
    CHECK(bad == 0);
    CHECK(checked > cells - 64); /* a few cells fall where the buffer is handed on */
    rep_sheet_free(&s);
    CHECK(rmdir(dir) == 0);
    printf("%zu cells, %zu checked, %zu wrong\n", cells, checked, bad);
    return failures ? 1 : 0;
}
