/* Private to the msprobe.json loader. A config file goes through two stages,
 * each file calling only the ones below it:
 *   config.c       what the tree means: the keys of both layouts, load, free
 *   config_json.c  text to a cJSON tree: comments blanked, syntax errors placed
 *                  at line:column of the user's file */
#ifndef MSP_CONFIG_INTERNAL_H
#define MSP_CONFIG_INTERNAL_H

#include "msprobe/config.h"

#include <cjson/cJSON.h>
#include <stddef.h>

/* ---- config_json.c ------------------------------------------------------- */

/* Line and column (from 1) of byte `off` of text. */
void msp_cfg_line_col(const char *text, size_t off, size_t *line, size_t *col);

/* Parses buf, a private copy of the file's text (its comments are blanked in
 * place), into *root, which the caller deletes. On error *root is NULL and the
 * detail is "SOURCE:LINE:COL: invalid JSON: why, near '...'" or names an empty
 * file; MSP_ERR_CONFIG. Any JSON value is accepted: an object is not required. */
msp_err msp_cfg_json_parse(char *buf, const char *source, cJSON **root);

#endif
