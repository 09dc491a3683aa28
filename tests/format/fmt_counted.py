"""`msprobe ls` with a counting library (fmt_zlib_count.c, fmt_call_count.c)
preloaded into the reader helper, through a wrapper that
MSPROBE_CATALOGUE_HELPER names; the wrapper logs each helper it starts as a
line "start", the library its own lines, in one log."""
import os
import stat
import subprocess


def ls_counted(test, work, counter, log_var, path, server):
    """(`msprobe ls path`'s output, the log's lines split into words): the
    helper run as a server that forks a child per file (server) or started
    per file; test fails unless ls succeeds"""
    binary = os.environ["MSPROBE_BIN"]
    real = os.path.join(os.path.dirname(binary), "msprobe-catalogue")
    log = os.path.join(work, "counted.log")
    if os.path.exists(log):
        os.unlink(log)
    wrapper = os.path.join(work, "helper.sh")
    with open(wrapper, "w") as f:
        f.write('#!/bin/sh\necho start >> "%s"\nLD_PRELOAD="%s" %s="%s" exec "%s" "$@"\n'
                % (log, counter, log_var, log, real))
    os.chmod(wrapper, stat.S_IRWXU)
    env = dict(os.environ, MSPROBE_CATALOGUE_HELPER=wrapper,
               MSPROBE_READER_SERVER="1" if server else "0")
    env.pop("MSPROBE_READER_INPROC", None)
    p = subprocess.run([binary, "ls", path], capture_output=True, text=True, timeout=300,
                       env=env)
    test.assertEqual(p.returncode, 0, p.stderr)
    with open(log) as f:
        return p.stdout, [line.split() for line in f]


def ls_in_process_counted(test, work, counter, path, what):
    """(`msprobe ls path`'s output, msprobe's count of calls to what) with
    fmt_call_count.c preloaded and the file read in process (the helper
    links libhdf5 into itself, past a preloaded library's reach; the check
    is the same code); test fails unless ls succeeds"""
    log = os.path.join(work, "counted.log")
    if os.path.exists(log):
        os.unlink(log)
    env = dict(os.environ, LD_PRELOAD=counter, MSP_CALL_COUNT_LOG=log,
               MSP_CALL_COUNT_AT_EXIT="1", MSPROBE_READER_INPROC="1")
    p = subprocess.run([os.environ["MSPROBE_BIN"], "ls", path], capture_output=True, text=True,
                       timeout=300, env=env)
    test.assertEqual(p.returncode, 0, p.stderr)
    with open(log) as f:
        counts = [int(w[2]) for w in (line.split() for line in f) if w[0] == what]
    test.assertEqual(len(counts), 1, counts)  # msprobe, which read the file
    return p.stdout, counts[0]
