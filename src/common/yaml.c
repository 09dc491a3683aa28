/* One YAML document parsed by libyaml's document API, for the files msprobe
 * takes in msprobe's YAML (merge_result's config, data_mapping.yaml,
 * cell_mapping.yaml; include/msprobe/common.h). */
#include "msprobe/common.h"

#include <stdio.h>
#include <yaml.h>

int msp_yaml_doc(const char *text, size_t len, yaml_document_t *doc, char *why, size_t n,
                 size_t *line)
{
    yaml_parser_t parser;
    snprintf(why, n, "out of memory");
    *line = 1;
    if (!yaml_parser_initialize(&parser))
        return -1;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int ok = yaml_parser_load(&parser, doc);
    if (ok) {
        yaml_document_t next;
        if (!yaml_parser_load(&parser, &next)) {
            ok = 0;
        } else {
            yaml_node_t *root = yaml_document_get_root_node(&next);
            if (root) {
                ok = 0;
                parser.problem = "a second YAML document";
                parser.problem_mark = root->start_mark;
            }
            yaml_document_delete(&next);
        }
        if (!ok)
            yaml_document_delete(doc);
    }
    if (!ok) {
        /* the context ("while scanning a quoted scalar") says where the
         * trouble began; the problem may be found only at the end */
        snprintf(why, n, "%s%s%s", parser.problem ? parser.problem : "a YAML parse error",
                 parser.context ? " " : "", parser.context ? parser.context : "");
        *line = (parser.context ? parser.context_mark.line : parser.problem_mark.line) + 1;
    }
    yaml_parser_delete(&parser);
    return ok ? 0 : -1;
}
