/* UTF-8 for report cells. Record names, environment values and messages come
 * from outside (a dump, a training process's environment) and may hold any
 * bytes; xlsx is XML and refuses invalid UTF-8 and most control characters,
 * and a cell cut inside a multibyte character makes the whole file invalid. */
#include "msprobe/common.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid character at p (at most n bytes available) and its code
 * point, or 0 when p starts an invalid sequence (Unicode 15, table 3-7). */
static size_t msp_utf8_char(const unsigned char *p, size_t n, unsigned *cp, size_t *bad)
{
    *bad = 1;
    unsigned c = p[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    unsigned lo = 0x80, hi = 0xbf, v;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        v = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        v = c & 0x0f;
        if (c == 0xe0)
            lo = 0xa0; /* overlong */
        else if (c == 0xed)
            hi = 0x9f; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        v = c & 0x07;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f; /* past U+10FFFF */
    } else {
        return 0;
    }
    /* Invalid: *bad is the maximal subpart (the bytes that began a valid
     * sequence), each replaced by one U+FFFD as Unicode recommends. */
    if (n < 2 || p[1] < lo || p[1] > hi)
        return 0;
    v = (v << 6) | (p[1] & 0x3f);
    for (size_t k = 2; k < len; k++) {
        if (k >= n || (p[k] & 0xc0) != 0x80) {
            *bad = k;
            return 0;
        }
        v = (v << 6) | (p[k] & 0x3f);
    }
    *cp = v;
    return len;
}

static int msp_utf8_xml_ok(unsigned cp)
{
    if (cp < 0x20)
        return cp == '\t' || cp == '\n' || cp == '\r';
    return cp != 0xfffe && cp != 0xffff;
}

const char *msp_utf8_clean(const char *s, size_t max_bytes, char **owned)
{
    *owned = NULL;
    if (!s)
        return "";
    size_t n = strlen(s);
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    unsigned cp;
    size_t bad;
    size_t lim = max_bytes && max_bytes < n ? max_bytes : n;
    for (; i < n;) {
        /* printable ASCII a byte at a time: names and numbers are all of it */
        while (i < lim && p[i] >= 0x20 && p[i] < 0x80)
            i++;
        if (i == n)
            break;
        size_t l = msp_utf8_char(p + i, n - i, &cp, &bad);
        if (l == 0 || !msp_utf8_xml_ok(cp) || (max_bytes && i + l > max_bytes))
            break;
        i += l;
    }
    if (i == n)
        return s;
    /* Worst case every byte becomes U+FFFD (3 bytes). */
    size_t cap = (n > (SIZE_MAX - 1) / 3) ? 0 : n * 3 + 1;
    char *out = cap ? malloc(cap) : NULL;
    if (!out)
        return NULL;
    memcpy(out, s, i);
    size_t o = i;
    static const char repl[] = "\xef\xbf\xbd";
    while (i < n) {
        size_t l = msp_utf8_char(p + i, n - i, &cp, &bad);
        const char *src = (const char *)p + i;
        size_t w = l;
        if (l == 0 || !msp_utf8_xml_ok(cp)) {
            src = repl;
            w = 3;
            l = l ? l : bad;
        }
        if (max_bytes && o + w > max_bytes)
            break;
        memcpy(out + o, src, w);
        o += w;
        i += l;
    }
    out[o] = '\0';
    *owned = out;
    return out;
}

/* A character a terminal shows as itself: printable ASCII, tab and (when
 * allowed) newline, and any valid code point past the C1 controls. */
static int msp_term_ok(unsigned cp, int newlines)
{
    if (cp < 0x20)
        return cp == '\t' || (newlines && cp == '\n');
    return cp != 0x7f && !(cp >= 0x80 && cp < 0xa0);
}

const char *msp_term_clean(const char *s, int newlines, char **owned)
{
    *owned = NULL;
    if (!s)
        return "";
    size_t n = strlen(s);
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, bad;
    unsigned cp;
    for (size_t l;
         i < n && (l = msp_utf8_char(p + i, n - i, &cp, &bad)) && msp_term_ok(cp, newlines);)
        i += l;
    if (i == n)
        return s;
    /* Worst case every byte becomes \xNN (4 bytes). */
    char *out = n < SIZE_MAX / 4 ? malloc(n * 4 + 1) : NULL;
    if (!out)
        return "?";
    memcpy(out, s, i);
    size_t o = i;
    static const char hex[] = "0123456789abcdef";
    while (i < n) {
        size_t l = msp_utf8_char(p + i, n - i, &cp, &bad);
        if (l && msp_term_ok(cp, newlines)) {
            memcpy(out + o, p + i, l);
            o += l;
            i += l;
            continue;
        }
        /* ESC, BEL, a C1 control (a CSI of its own) or a stray byte: its
         * bytes spelled out, so nothing reaches the terminal as a command */
        for (size_t k = 0, m = l ? l : 1; k < m; k++) {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[p[i + k] >> 4];
            out[o++] = hex[p[i + k] & 15];
        }
        i += l ? l : 1;
    }
    out[o] = '\0';
    *owned = out;
    return out;
}

void msp_excerpt(char *dst, size_t cap, const char *s, size_t max, unsigned flags)
{
    if (cap == 0)
        return;
    size_t most = !(flags & MSP_EXCERPT_MARK) ? cap - 1 : cap > 4 ? cap - 4 : 0;
    if (max > most)
        max = most;
    size_t n = 0;
    for (; s[n] && n < max && !((flags & MSP_EXCERPT_LINE) && s[n] == '\n'); n++) {
        unsigned char c = (unsigned char)s[n];
        int blank = (flags & MSP_EXCERPT_BLANKS) && (c == '\n' || c == '\r' || c == '\t');
        dst[n] = blank ? ' ' : (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if ((flags & MSP_EXCERPT_MARK) && s[n] && n) {
        memcpy(dst + n, "...", 3);
        n += 3;
    }
    dst[n] = '\0';
}
