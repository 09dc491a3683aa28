/* Private to fmt_msprobe.c and the files it reads a dump directory with:
 * opening a file of the dump (fmt_msjson.c) and scanning its JSON text. */
#ifndef MSP_FMT_MSJSON_H
#define MSP_FMT_MSJSON_H

#include "msprobe/common.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* One record (or one stack.json / construct.json entry) of the JSON text:
 * real ones take kilobytes; parsed alone, this bounds the tree cJSON builds. */
#define MSP_MS_ENTRY_MAX ((size_t)16 << 20)

/* name under dirfd (or a path with AT_FDCWD) opened for reading, checked as
 * every file of a msprobe dump is: no link, a regular file, at most cap
 * bytes. shown names it in messages. */
msp_err msp_ms_open_file(int dirfd, const char *name, const char *shown, uint64_t cap, int *fd_out,
                         uint64_t *size);
/* The caps on what a msprobe dump directory may make the reader hold
 * (msprobe-dump(5), "MSPROBE'S OWN DIRECTORIES"): bytes of one JSON file
 * (dump.json, stack.json, construct.json), read whole, and records of
 * dump.json's "data", each of which becomes a catalogue entry. Defaults
 * MSP_MS_JSON_MAX_MB and MSP_MS_MAX_RECORDS; the environment variables
 * MSPROBE_DUMP_JSON_MAX_MB and MSPROBE_DUMP_JSON_MAX_RECORDS (a positive
 * whole number) replace them. */
#define MSP_MS_JSON_MAX_MB 1024
#define MSP_MS_MAX_RECORDS 200000
uint64_t msp_ms_json_max_bytes(void);
size_t msp_ms_max_records(void);

/* A JSON file of the dump (path) read whole, checked as above, its size at
 * most msp_ms_json_max_bytes(). */
msp_err msp_ms_slurp(const char *path, char **text, size_t *len);

/* Checks one JSON value's structure and steps over it without building it:
 * strings (escapes stepped over), numbers and bare words (true, NaN,
 * -Infinity: Python's json writes those), arrays and objects to a bounded
 * depth. The values that matter are parsed later, one small span at a time. */
struct msp_js {
    const char *p, *end;
    int depth;
};

void msp_js_ws(struct msp_js *s);

/* Each member of the object at s->p: fn(key_start, member_end, value_start,
 * ud), the member's text being key_start..member_end ("key": value). Stops
 * at fn's first error. 1: not an object or malformed (s->p where). */
typedef msp_err (*msp_js_member_fn)(const char *key, const char *end, const char *value, void *ud);
int msp_js_members(struct msp_js *s, msp_js_member_fn fn, void *ud, msp_err *rc);
/* How many members the object at s->p has, its structure checked as
 * msp_js_members does, nothing built; s->p moves past it. -1: not an object
 * or malformed. */
long long msp_js_count_members(struct msp_js *s);

/* The member key..end as an object of its own, {"key": value}, parsed (NaN
 * and friends quoted first): the tree of one member only. NULL when it does
 * not parse or is over MSP_MS_ENTRY_MAX (*too_big). */
cJSON *msp_js_member_tree(const char *key, const char *end, int *too_big);

#endif
