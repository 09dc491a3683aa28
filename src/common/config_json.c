/* msprobe.json's text to a cJSON tree: comments blanked in place (offsets
 * kept, so a position is the line:column of the user's file), and, when cJSON
 * refuses the text, a scanner of the same grammar that says where and why.
 * What the tree means is config.c's business. */
#include "config_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define MSP_NELEM(a) (sizeof(a) / sizeof((a)[0]))

void msp_cfg_line_col(const char *text, size_t off, size_t *line, size_t *col)
{
    size_t l = 1, c = 1;
    for (size_t i = 0; i < off && text[i]; i++) {
        if (text[i] == '\n') {
            l++;
            c = 1;
        } else {
            c++;
        }
    }
    *line = l;
    *col = c;
}

/* Blank out // and block comments in place, outside strings. Newlines stay, so
 * every offset in the result is the offset in the user's file. Returns the
 * offset of an unterminated block comment, or (size_t)-1; *nul_escape gets
 * the offset of the first \u0000 inside a string, or (size_t)-1. */
static size_t msp_cfg_strip_comments(char *s, size_t *nul_escape)
{
    int in_str = 0;
    *nul_escape = (size_t)-1;
    for (size_t i = 0; s[i]; i++) {
        if (in_str) {
            /* cJSON would end the C string at \u0000 and drop the rest silently. */
            if (s[i] == '\\' && strncmp(s + i + 1, "u0000", 5) == 0 && *nul_escape == (size_t)-1)
                *nul_escape = i;
            if (s[i] == '\\' && s[i + 1])
                i++;
            else if (s[i] == '"')
                in_str = 0;
        } else if (s[i] == '"') {
            in_str = 1;
        } else if (s[i] == '/' && s[i + 1] == '/') {
            for (; s[i] && s[i] != '\n'; i++)
                s[i] = ' ';
            if (!s[i])
                break;
        } else if (s[i] == '/' && s[i + 1] == '*') {
            size_t start = i;
            s[i] = s[i + 1] = ' ';
            for (i += 2; s[i] && !(s[i] == '*' && s[i + 1] == '/'); i++)
                if (s[i] != '\n')
                    s[i] = ' ';
            if (!s[i])
                return start;
            s[i] = s[i + 1] = ' ';
            i++;
        }
    }
    return (size_t)-1;
}

/* cJSON says only where it gave up, often one character late. When it fails,
 * this scanner (same grammar and leniencies as cJSON 1.7) walks the text again
 * to say where and why: line:column matter more to a user than the parse. */
typedef struct msp_json_scan {
    const char *s;
    size_t pos; /* error offset */
    const char *why;
    size_t open; /* unclosed '{' or '[' when the text ended, or (size_t)-1 */
} msp_json_scan_t;

#define MSP_JSON_MAX_DEPTH 1000 /* CJSON_NESTING_LIMIT */

static void msp_scan_ws(msp_json_scan_t *sc)
{
    while (sc->s[sc->pos] && (unsigned char)sc->s[sc->pos] <= 32)
        sc->pos++;
}

static int msp_scan_err(msp_json_scan_t *sc, const char *why)
{
    sc->why = sc->s[sc->pos] ? why : "unexpected end of file";
    return 0;
}

static int msp_scan_hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        if (!isxdigit((unsigned char)c))
            return 0;
        v = v * 16 + (unsigned)(isdigit((unsigned char)c) ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    *out = v;
    return 1;
}

static int msp_scan_string(msp_json_scan_t *sc)
{
    size_t start = sc->pos++;
    for (;;) {
        char c = sc->s[sc->pos];
        if (c == '\0') {
            sc->pos = start;
            sc->why = "string never closed (missing '\"')";
            return 0;
        }
        if (c == '"') {
            sc->pos++;
            return 1;
        }
        if (c != '\\') {
            sc->pos++;
            continue;
        }
        char e = sc->s[sc->pos + 1];
        unsigned u, lo;
        if (e && strchr("\"\\/bfnrt", e)) {
            sc->pos += 2;
        } else if (e == 'u' && msp_scan_hex4(sc->s + sc->pos + 2, &u) &&
                   !(u >= 0xDC00 && u <= 0xDFFF)) {
            if (u >= 0xD800 && u <= 0xDBFF) {
                const char *n = sc->s + sc->pos + 6;
                if (n[0] != '\\' || n[1] != 'u' || !msp_scan_hex4(n + 2, &lo) || lo < 0xDC00 ||
                    lo > 0xDFFF)
                    return msp_scan_err(sc, "\\u escape of a lone UTF-16 surrogate");
                sc->pos += 6;
            }
            sc->pos += 6;
        } else {
            return msp_scan_err(sc, "invalid escape (allowed: \\\" \\\\ \\/ \\b \\f \\n \\r \\t "
                                    "\\uXXXX)");
        }
    }
}

static int msp_scan_value(msp_json_scan_t *sc, int depth);

/* Object or array: the same loop with different brackets. */
static int msp_scan_container(msp_json_scan_t *sc, int depth)
{
    int is_obj = sc->s[sc->pos] == '{';
    char close = is_obj ? '}' : ']';
    size_t open = sc->pos;
    if (depth >= MSP_JSON_MAX_DEPTH)
        return msp_scan_err(sc, "nested more than 1000 levels deep");
    sc->pos++;
    msp_scan_ws(sc);
    if (sc->s[sc->pos] == close) {
        sc->pos++;
        return 1;
    }
    for (;;) {
        msp_scan_ws(sc);
        if (!sc->s[sc->pos]) {
            sc->open = open;
            return msp_scan_err(sc, "");
        }
        if (is_obj) {
            char c = sc->s[sc->pos];
            if (c != '"')
                return msp_scan_err(sc, c == '}'
                                            ? "comma before '}' (JSON allows no trailing comma)"
                                        : c == '\'' ? "keys need double quotes, not single"
                                                    : "expected a key in double quotes");
            if (!msp_scan_string(sc))
                return 0;
            msp_scan_ws(sc);
            if (sc->s[sc->pos] != ':') {
                if (!sc->s[sc->pos])
                    sc->open = open;
                return msp_scan_err(sc, "expected ':' after the key");
            }
            sc->pos++;
        } else if (sc->s[sc->pos] == ']') {
            return msp_scan_err(sc, "comma before ']' (JSON allows no trailing comma)");
        }
        if (!msp_scan_value(sc, depth + 1))
            return 0;
        msp_scan_ws(sc);
        char c = sc->s[sc->pos];
        if (c == close) {
            sc->pos++;
            return 1;
        }
        if (c != ',') {
            if (!c)
                sc->open = open;
            return msp_scan_err(sc, is_obj ? "expected ',' or '}' (a comma missing?)"
                                           : "expected ',' or ']' (a comma missing?)");
        }
        sc->pos++;
    }
}

static int msp_scan_value(msp_json_scan_t *sc, int depth)
{
    static const char *const lits[] = {"true", "false", "null"};
    msp_scan_ws(sc);
    const char *p = sc->s + sc->pos;
    if (*p == '{' || *p == '[')
        return msp_scan_container(sc, depth);
    if (*p == '"')
        return msp_scan_string(sc);
    if (*p == '-' || isdigit((unsigned char)*p)) {
        /* cJSON hands the run of number characters to strtod. */
        char num[64];
        size_t n = 0;
        while (n < sizeof num - 1 && p[n] && strchr("0123456789+-eE.", p[n]))
            n++;
        memcpy(num, p, n);
        num[n] = '\0';
        char *end;
        (void)strtod(num, &end);
        if (end == num)
            return msp_scan_err(sc, "invalid number");
        sc->pos += (size_t)(end - num);
        return 1;
    }
    for (size_t i = 0; i < MSP_NELEM(lits); i++) {
        if (strncmp(p, lits[i], strlen(lits[i])) == 0) {
            sc->pos += strlen(lits[i]);
            return 1;
        }
    }
    return msp_scan_err(sc, *p == '\'' ? "strings need double quotes, not single"
                                       : "expected a value (object, array, \"string\", number, "
                                         "true, false or null)");
}

/* cJSON refused `text`: report where and why, as FILE:LINE:COLUMN. */
static msp_err msp_cfg_syntax(const char *source, const char *text, size_t cjson_off)
{
    msp_json_scan_t sc = {.s = text, .open = (size_t)-1};
    size_t line, col;
    char near[48];
    if (msp_scan_value(&sc, 0)) {
        /* Our scanner accepts what cJSON refused: keep cJSON's position. */
        sc.pos = cjson_off;
        sc.why = "cannot be parsed";
    }
    msp_cfg_line_col(text, sc.pos, &line, &col);
    if (text[sc.pos] == '\0') {
        if (sc.open == (size_t)-1)
            return msp_fail(MSP_ERR_CONFIG, "%s:%zu:%zu: invalid JSON: unexpected end of file",
                            source, line, col);
        size_t oline, ocol;
        msp_cfg_line_col(text, sc.open, &oline, &ocol);
        return msp_fail(MSP_ERR_CONFIG,
                        "%s:%zu:%zu: invalid JSON: unexpected end of file (the '%c' at line %zu, "
                        "column %zu is never closed)",
                        source, line, col, text[sc.open], oline, ocol);
    }
    msp_excerpt(near, sizeof near, text + sc.pos, 24, MSP_EXCERPT_LINE);
    return msp_fail(MSP_ERR_CONFIG, "%s:%zu:%zu: invalid JSON: %s, near '%s'", source, line, col,
                    sc.why, near);
}

/* Text after the top-level value (cJSON parsed a prefix of the file). */
static msp_err msp_cfg_trailing(const char *source, const char *text, size_t off)
{
    size_t line, col;
    char near[48];
    msp_cfg_line_col(text, off, &line, &col);
    msp_excerpt(near, sizeof near, text + off, 24, MSP_EXCERPT_LINE);
    return msp_fail(MSP_ERR_CONFIG,
                    "%s:%zu:%zu: invalid JSON: text after the end of the top-level object, near "
                    "'%s'",
                    source, line, col, near);
}

msp_err msp_cfg_json_parse(char *buf, const char *source, cJSON **root)
{
    *root = NULL;
    size_t nul_escape, unterminated = msp_cfg_strip_comments(buf, &nul_escape);
    if (unterminated != (size_t)-1) {
        size_t line, col;
        msp_cfg_line_col(buf, unterminated, &line, &col);
        return msp_fail(MSP_ERR_CONFIG, "%s:%zu:%zu: invalid JSON: comment \"/*\" is never closed",
                        source, line, col);
    }
    if (nul_escape != (size_t)-1) {
        size_t line, col;
        msp_cfg_line_col(buf, nul_escape, &line, &col);
        return msp_fail(MSP_ERR_CONFIG,
                        "%s:%zu:%zu: \\u0000 (a NUL character) is not allowed in "
                        "a string",
                        source, line, col);
    }
    const char *p = buf;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '\0')
        return msp_fail(MSP_ERR_CONFIG,
                        "%s: empty file (expected a JSON object such as "
                        "{\"dump\": {...}})",
                        source);
    const char *end = NULL;
    cJSON *tree = cJSON_ParseWithOpts(buf, &end, 0);
    if (!tree)
        return msp_cfg_syntax(source, buf, end ? (size_t)(end - buf) : 0);
    while (isspace((unsigned char)*end))
        end++;
    if (*end) {
        cJSON_Delete(tree);
        return msp_cfg_trailing(source, buf, (size_t)(end - buf));
    }
    *root = tree;
    return MSP_OK;
}
