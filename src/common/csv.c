/* CSV text as msprobe writes it (result.csv, acc_check's csvs): one RFC
 * 4180 field at a time (include/msprobe/common.h). */
#include "msprobe/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void msp_csv_field(FILE *f, const char *s, int first)
{
    if (!first)
        fputc_unlocked(',', f);
    char *owned = NULL;
    s = msp_utf8_clean(s ? s : "", 0, &owned); /* csv is read as UTF-8: no invalid bytes */
    if (!s)
        return;
    if (strpbrk(s, ",\"\r\n") == NULL) {
        fputs_unlocked(s, f);
        free(owned);
        return;
    }
    fputc_unlocked('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc_unlocked('"', f);
        fputc_unlocked(*s, f);
    }
    fputc_unlocked('"', f);
    free(owned);
}
