/* libxlsxwriter's temp files, made here: it asks lxw_tmpfile (a public
 * function of its utility.h, called through its PLT) for a dozen a workbook,
 * each a mkstemp and an unlink in the output directory. A 1,024-rank
 * statistics tree writes 1,025 workbooks: 12,000 files made and removed in
 * one directory within a minute, and ext4 then searches its inode bitmap
 * past every inode freed in the last half minute for each new one, 3.7 s of
 * a 55 s compare (issue 42). This definition, in the program, answers for
 * libxlsxwriter's: while a thread writes a compare's workbook, whose big
 * sheets are spliced in afterwards (rep_book.c) so that libxlsxwriter's own
 * are small (a row a rank, the suspects, the chart), a temp file is an
 * anonymous memory file (memfd), no inode of the file system at all; else,
 * or where memfd_create fails, a file in tmpdir, made and unlinked as
 * libxlsxwriter makes it (rep_tmpfile_named, as the rows' own temp files).
 * A program that links libxlsxwriter statically would see two definitions:
 * msprobe links it as Debian ships it, a shared library. */
#include "rep_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xlsxwriter.h>

static __thread int rep_tmp_memory;

void rep_tmpfile_in_memory(int on)
{
    rep_tmp_memory = on;
}

FILE *rep_tmpfile_named(const char *dir, const char *name)
{
    char *path = msp_asprintf("%s/%s.XXXXXX", dir, name);
    int fd = path ? mkstemp(path) : -1;
    int err = path ? errno : ENOMEM;
    if (fd >= 0)
        unlink(path); /* nothing is left behind, whatever ends the compare */
    free(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w+b") : NULL;
    if (fd >= 0 && !f) {
        err = errno;
        close(fd);
    }
    if (!f)
        errno = err;
    return f;
}

FILE *rep_tmpfile(const char *dir)
{
    if (rep_tmp_memory) {
        int fd = memfd_create("msprobe-xlsx", MFD_CLOEXEC);
        FILE *f = fd >= 0 ? fdopen(fd, "w+b") : NULL;
        if (f)
            return f;
        if (fd >= 0)
            close(fd);
    }
    return dir ? rep_tmpfile_named(dir, ".msprobe-tmp") : tmpfile();
}

/* default visibility: the project builds hidden, and a hidden symbol never
 * reaches the dynamic table (CMakeLists.txt exports this one) */
__attribute__((visibility("default"))) FILE *lxw_tmpfile(char *tmpdir)
{
    return rep_tmpfile(tmpdir);
}
