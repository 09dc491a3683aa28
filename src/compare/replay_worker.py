"""The replay worker's process (compare's replay and acc_check): its sandbox,
its loop over jobs and the kept worker that serves the compares that follow.
Embedded after replay.py (src/compare/CMakeLists.txt): one script, one
namespace; main() at the end is the worker's entry point.

Wire format. In: frames of [u32 little-endian length][JSON header] followed by
the raw bytes of each tensor the header lists, in order (C order, the dump's
native little-endian bytes); a length of 0 ends the session. Out: first a
line {"ready": torch version} (or {"error": why}; a kept worker's also names
"server", its pid, and "session", the session's number), then per job
{"id", "status": "ok"|"skip", "reason", "mode", "outputs": [{"role", "e_cmp",
"e_ref", "e_kernel", "u", "float"}]}. Infinite errors are sent as 1e300,
unknown as -1.
"""

# ---- the sandbox -------------------------------------------------------------
#
# compare starts the worker as `python -I -B -c SRC CONFIG` in a new process
# group (posix_spawn's SETPGROUP), CONFIG a JSON object: "dir" (a private
# directory compare made and removes), "parent" (compare's pid), "path" (the
# user's PYTHONPATH entries, absolute: -I drops the variable and the working
# directory, where a json module planted beside a dump would be imported from),
# "fsize", "nofile" (rlimits). Everything below runs before torch is imported
# and before any job is read.

SANDBOX = {"landlock": None, "why": ""}

# Landlock (linux/landlock.h, a stable ABI): syscall numbers are the same on
# every architecture.
_LL_CREATE, _LL_ADD, _LL_RESTRICT = 444, 445, 446
_LL_EXECUTE, _LL_WRITE_FILE = 1 << 0, 1 << 1
_LL_REMOVE_DIR, _LL_REMOVE_FILE, _LL_MAKE_CHAR, _LL_MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
_LL_MAKE_REG, _LL_MAKE_SOCK, _LL_MAKE_FIFO, _LL_MAKE_BLOCK = 1 << 8, 1 << 9, 1 << 10, 1 << 11
_LL_MAKE_SYM, _LL_REFER, _LL_TRUNCATE = 1 << 12, 1 << 13, 1 << 14
_LL_NET_BIND, _LL_NET_CONNECT = 1, 2
_LL_SCOPE_UNIX, _LL_SCOPE_SIGNAL = 1, 2


def _libc():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return ctypes, libc


def _landlock(handled_fs, rules, net=False, scoped=False):
    """Restrict this thread (and what it forks or execs) to the rights in
    rules [(path, rights)] for the accesses in handled_fs; with net, no TCP
    bind or connect; with scoped, no abstract unix socket or signal out of
    the domain. The ABI version, or raises OSError."""
    import os
    ctypes, libc = _libc()
    abi = libc.syscall(_LL_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        e = ctypes.get_errno()
        raise OSError(e, "landlock: %s" % os.strerror(e))
    known = (_LL_EXECUTE | _LL_WRITE_FILE | _LL_REMOVE_DIR | _LL_REMOVE_FILE | _LL_MAKE_CHAR
             | _LL_MAKE_DIR | _LL_MAKE_REG | _LL_MAKE_SOCK | _LL_MAKE_FIFO | _LL_MAKE_BLOCK
             | _LL_MAKE_SYM | (_LL_REFER if abi >= 2 else 0) | (_LL_TRUNCATE if abi >= 3 else 0))
    fs = handled_fs & known
    attr = (ctypes.c_uint64 * 3)(fs, (_LL_NET_BIND | _LL_NET_CONNECT) if net and abi >= 4 else 0,
                                 (_LL_SCOPE_UNIX | _LL_SCOPE_SIGNAL) if scoped and abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    fd = libc.syscall(_LL_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, "landlock ruleset: %s" % os.strerror(e))
    try:
        for path, rights in rules:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                # struct landlock_path_beneath_attr is packed: u64 then s32
                rule = (ctypes.c_uint8 * 12).from_buffer_copy(
                    struct.pack("<Qi", rights & fs, pfd))
                if libc.syscall(_LL_ADD, ctypes.c_int(fd), ctypes.c_int(1), ctypes.byref(rule),
                                ctypes.c_uint32(0)) != 0:
                    e = ctypes.get_errno()
                    raise OSError(e, "landlock rule for %s: %s" % (path, os.strerror(e)))
            finally:
                os.close(pfd)
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            raise OSError(ctypes.get_errno(), "no_new_privs")
        if libc.syscall(_LL_RESTRICT, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "landlock_restrict_self: %s" % os.strerror(e))
    finally:
        os.close(fd)
    return abi


def _name(comm):
    """This process's name in ps and /proc/PID/comm: what it is to the kept
    worker ("msprobe-spare", "msprobe-session", "msprobe-job")."""
    ctypes, libc = _libc()
    libc.prctl(15, ctypes.c_char_p(comm.encode()), 0, 0, 0)  # PR_SET_NAME


def _die_with_parent(parent):
    import os
    import signal
    ctypes, libc = _libc()
    libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    if parent and os.getppid() != parent:  # it died before the line above
        os._exit(0)


def sandbox_enter(cfg):
    """Before torch and before any job: tie the worker to compare, move it to
    its private directory, set its rlimits and take away every write outside
    that directory (Landlock, where the kernel has it). What could not be
    done is said in SANDBOX["why"] (the ready line carries it)."""
    import os
    import resource
    import signal
    if cfg.get("parent"):  # a kept worker (cfg "keep") outlives the compare that started it
        _die_with_parent(cfg.get("parent"))
    for p in reversed(cfg.get("path") or []):
        if isinstance(p, str) and os.path.isabs(p) and p not in sys.path:
            sys.path.insert(1, p)
    d = cfg.get("dir")
    if d:
        os.chdir(d)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past RLIMIT_FSIZE fails, no kill
    for res, v in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, cfg.get("fsize")),
                   (resource.RLIMIT_NOFILE, cfg.get("nofile"))):
        if v is None:
            continue
        soft, hard = resource.getrlimit(res)
        v = int(v) if hard == resource.RLIM_INFINITY else min(int(v), hard)
        resource.setrlimit(res, (v, v))
    writes = (_LL_WRITE_FILE | _LL_REMOVE_DIR | _LL_REMOVE_FILE | _LL_MAKE_CHAR | _LL_MAKE_DIR
              | _LL_MAKE_REG | _LL_MAKE_SOCK | _LL_MAKE_FIFO | _LL_MAKE_BLOCK | _LL_MAKE_SYM
              | _LL_REFER | _LL_TRUNCATE)
    rules = [(d, writes)] if d else []
    if os.path.exists(os.devnull):
        rules.append((os.devnull, _LL_WRITE_FILE | _LL_TRUNCATE))
    try:
        SANDBOX["landlock"] = _landlock(writes, rules, net=True, scoped=True)
    except (OSError, AttributeError) as e:
        SANDBOX["why"] = "Landlock unavailable (%s): writes are not confined" % e


def sandbox_no_exec():
    """After torch is imported: no program can be executed any more (a
    second Landlock layer that grants no EXECUTE anywhere)."""
    if SANDBOX["landlock"] is None:
        return
    try:
        _landlock(_LL_EXECUTE, [])
    except OSError as e:
        SANDBOX["why"] = "no second Landlock layer (%s): exec is not refused" % e


def job_limits(job):
    """In the job child, before a job: its memory (RLIMIT_AS's soft limit:
    what the child maps now plus job["mem"] bytes, plus 72 MiB a thread of
    torch's) and time (job["limit_s"] seconds of wall time, an alarm whose
    default action ends the child, and that times torch's threads of CPU
    time on top of what the child has used). job_limits_end() lifts them."""
    import os
    import resource
    import signal
    threads = max(1, torch.get_num_threads())
    mem = job.get("mem")
    if isinstance(mem, (int, float)) and mem > 0:
        with open("/proc/self/statm") as f:
            base = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        # each of torch's threads maps a stack and a malloc arena of its own
        lim = base + int(mem) + threads * (72 << 20)
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        resource.setrlimit(resource.RLIMIT_AS, (lim if hard == resource.RLIM_INFINITY
                                                else min(lim, hard), hard))
    lim_s = job.get("limit_s")
    if isinstance(lim_s, (int, float)) and lim_s > 0:
        secs = max(1, int(math.ceil(lim_s)))
        signal.alarm(secs)
        used = resource.getrusage(resource.RUSAGE_SELF)
        cpu = int(used.ru_utime + used.ru_stime) + secs * threads + 5
        hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        resource.setrlimit(resource.RLIMIT_CPU, (cpu if hard == resource.RLIM_INFINITY
                                                 else min(cpu, hard), hard))


def job_limits_end():
    import resource
    import signal
    signal.alarm(0)
    for res in (resource.RLIMIT_AS, resource.RLIMIT_CPU):
        hard = resource.getrlimit(res)[1]
        resource.setrlimit(res, (hard, hard))


def state_print():
    """What one record could change for the next: torch's global modes and
    the callables replay looks up. A job child whose print changed is not
    given another record."""
    spaces = (vars(torch), vars(torch.nn.functional), torch.Tensor.__dict__)
    return (torch.is_grad_enabled(), torch.get_default_dtype(), torch.is_autocast_enabled(),
            torch.is_autocast_cpu_enabled(), torch.get_autocast_cpu_dtype(),
            torch.get_num_threads(), torch.are_deterministic_algorithms_enabled(),
            tuple(id(ns.get(n)) for ns in spaces for n in STATE_NAMES),
            id(torch.nn), id(torch.nn.functional), id(torch.Tensor), id(torch.optim))


STATE_NAMES = ()




def read_fd(n):
    """n bytes of the job stream (fd 0), read with no read-ahead: a job child
    that dies leaves the stream at the next frame for the one after it. A
    bytearray read into in place (decode wraps it without a copy)."""
    import os
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = os.readv(0, [view[got:got + (1 << 24)]])
        if not k:
            raise EOFError
        got += k
    return buf


def read_job():
    """The next frame: (job, {(rec, role): (tensor header, bytes)}), or None
    at the end of the session."""
    try:
        n = struct.unpack("<I", read_fd(4))[0]
        if n == 0:
            return None
        job = json.loads(bytes(read_fd(n)))
        tensors = {}
        for t in job["tensors"]:
            tensors[(t["rec"], t["role"])] = (t, read_fd(int(t["nbytes"])))
    except EOFError:
        return None
    return job, tensors


def job_child(out_fd, parent):
    """A child of the worker that reads jobs from fd 0 and answers each on
    out_fd ("S id" when it starts one, "A json" with the answer, "E" at the
    end of the session). It replays until a record's call fails or changes
    the state another record would see (state_print), then exits and the
    worker forks a fresh one: every record starts from a clean state. A
    record past its time or memory limit ends the child; the worker answers
    for it. Never returns."""
    import os

    def say(tag, text=""):
        data = ("%s %s\n" % (tag, text)).encode()
        while data:
            data = data[os.write(out_fd, data):]

    try:
        _die_with_parent(parent)
        _name("msprobe-job")
        start = state_print()
        while True:
            got = read_job()
            if got is None:
                say("E")
                break
            job, raw = got
            say("S", json.dumps(job.get("id")))
            clean = True
            try:
                job_limits(job)
                t = {k: decode(b, d["dtype"], d["shape"]) for k, (d, b) in raw.items()}
                res = replay(job, t)
            except Skip as e:
                res = {"status": "skip", "reason": str(e)}
            except BaseException as e:  # the call failed: no next record here
                clean = False
                res = {"status": "skip", "reason": "replay failed: %s: %s" %
                       (type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")}
            finally:
                job_limits_end()
            del got, raw
            res["id"] = job.get("id")
            say("A", json.dumps(res, allow_nan=False))
            if not clean or state_print() != start:
                break
    finally:
        # the session learns of the end (and compare's socket may close) now,
        # not after the kernel has unmapped this process
        for fd in (out_fd, 0, 1, 2):
            try:
                os.close(fd)
            except OSError:
                pass
        os._exit(0)


def fork_job_child():
    """A job child forked now: (its pid, the pipe its answers come on)."""
    import os
    me = os.getpid()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        job_child(w, me)
    os.close(w)
    return pid, r


def serve(out, first=None):
    """The worker's loop: fork a job child (first: one forked ahead), relay
    its answers, answer for a record it died on, fork another while the
    session lasts. A session whose compare hangs up (killed, or gone past its
    budget) ends at once, its job child killed: a kept worker has no parent
    death to end it. Returns the last child's pid, for the caller to reap
    once it has cleaned up (its end, a kill, takes the kernel milliseconds
    that compare, which waits for the clean-up, need not wait)."""
    import os
    import select
    import signal
    while True:
        pid, r = first or fork_job_child()
        first = None
        pending, ended, gone, buf = None, False, False, b""
        watch = select.poll()
        watch.register(r, select.POLLIN)
        watch.register(0, select.POLLRDHUP)
        while not gone:
            events = dict(watch.poll())
            if events.get(0, 0) & (select.POLLRDHUP | select.POLLHUP | select.POLLERR):
                gone = True
                break
            if r not in events:
                continue
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                tag, _, text = line.decode().partition(" ")
                if tag == "S":
                    pending = json.loads(text)
                elif tag == "A":
                    out.write(text + "\n")
                    out.flush()
                    pending = None
                elif tag == "E":
                    ended = True
        os.close(r)
        if gone:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if ended or gone:
            return pid
        _, status = os.waitpid(pid, 0)
        if pending is None:
            continue  # a child that had its fill: the next one reads on
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        if sig in (signal.SIGALRM, signal.SIGXCPU):
            why = "the replay ran past its time limit a record"
        elif sig:
            why = "the replay was ended by signal %d (%s)" % (sig, signal.Signals(sig).name)
        else:
            why = "the replay ended (exit %d) without an answer" % os.WEXITSTATUS(status)
        out.write(json.dumps({"status": "skip", "reason": why, "id": pending}) + "\n")
        out.flush()


PREFIX_OF = {"torch.nn.functional": "Functional", "torch.Tensor": "Tensor", "torch._VF": "VF",
             "torch": "Torch"}


REPLAYABLE = []  # replayable(), made once in setup()


def replayable():
    """The record APIs ("Functional.gelu") this worker may call, sorted: the
    ready line hands them to compare, which then knows a record it cannot
    replay before sending its tensors (resolve() stays the check)."""
    out = set()
    for full in ALLOWED:
        space, _, api = full.rpartition(".")
        if space in PREFIX_OF and not denied(full) and api not in UNINITIALIZED:
            out.add(PREFIX_OF[space] + "." + api)
    return sorted(out)


def ready_line(extra=None):
    import os
    line = {"ready": torch.__version__, "pid": os.getpid(), "apis": len(ALLOWED),
            "landlock": SANDBOX["landlock"], "sandbox": SANDBOX["why"],
            "replayable": REPLAYABLE, "sample": sample_policy()}
    line.update(extra or {})
    return json.dumps(line) + "\n"


def _session_dir():
    """A session's own directory inside the kept worker's (its job children
    write nowhere else), made before and removed after the session."""
    import os
    d = os.path.abspath("s%d" % os.getpid())
    os.mkdir(d, 0o700)
    os.chdir(d)
    return d


def _remove_tree(d):
    import shutil
    shutil.rmtree(d, ignore_errors=True)


def _hello(conn):
    """A connecting compare's first message: one byte and, as SCM_RIGHTS,
    the descriptor its session's stderr goes to. (the descriptor or None, ok);
    refused when the peer is another user."""
    import os
    import socket
    conn.settimeout(10)
    pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                        struct.calcsize("3i")))
    if uid != os.getuid():
        return None, False
    size = socket.CMSG_LEN(struct.calcsize("i"))
    msg, anc, _flags, _addr = conn.recvmsg(1, size)
    if msg != b"h":
        return None, False
    fds = []
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += list(struct.unpack("%di" % (len(data) // 4), data[:len(data) // 4 * 4]))
    err = fds.pop(0) if fds else None
    for fd in fds:
        os.close(fd)
    conn.settimeout(None)
    return err, True


# A kept worker forks the next compare's session (and its first job child)
# this long after the last compare hung up (it closes its socket once its
# reports are written), so that a compare that connects finds them forked:
# two forks of a process holding torch (and their page faults) no longer
# share the cores with the compare's metrics.
SPARE_AFTER = 0.05


def _session(out, home, ready, first=None, tell=None):
    """One compare's session on fds 0 and 1, in a directory of its own (ready:
    the line that says so, or None when main said it). first: a job child
    forked ahead, handed the connection, stderr and directory through tell.
    Compare's socket closes once the directory is gone. Never returns."""
    import os
    import socket
    d, jpid = None, None
    try:
        _name("msprobe-session")
        d = _session_dir()
        if tell is not None:
            try:
                socket.send_fds(tell, [d.encode()], [0, 2])
            except OSError:
                pass  # that child is gone: serve forks another
            tell.close()
        if ready:
            out.write(ready)
            out.flush()
        jpid = serve(out, first)
    finally:
        if d:
            os.chdir(home)
            _remove_tree(d)
        try:  # compare reads the end now, whoever else holds the socket
            socket.socket(fileno=os.dup(0)).shutdown(socket.SHUT_WR)
        except OSError:
            pass
        for fd in (0, 1, 2):
            try:
                os.close(fd)
            except OSError:
                pass
        if jpid:
            os.waitpid(jpid, 0)
        os._exit(0)


def _rehearse():
    """A spare's job child replays one small call of its own while it waits:
    what a child does the first time (its pages copied from the worker's as
    it writes them, the modules a replay imports) is done before a compare
    waits on it (a 64k-element mul's first answer: 5-7 ms, the next 2)."""
    import resource  # job_limits'
    x = torch.linspace(-1.0, 1.0, 1024)
    try:
        job = {"kind": "forward", "name": "Torch.mul.0.forward", "args": {}}
        res = replay(job, {("f", "input.0"): x, ("f", "input.1"): x, ("f", "output.0"): x * x})
        json.dumps(res, allow_nan=False)
        resource.getrusage(resource.RUSAGE_SELF)
    except Exception:
        pass
    state_print()


def _spare(out, me, home, ctl):
    """A session forked ahead of its compare: it forks its first job child,
    then waits on ctl for "NUMBER" and, as SCM_RIGHTS, the compare's
    connection and stderr; the job child waits for them from it. Ends when
    ctl closes with nothing. Never returns."""
    import os
    import signal
    import socket
    try:
        _die_with_parent(me)
        _name("msprobe-spare")  # its job child too, until a compare comes
        sp = os.getpid()
        ja, jb = socket.socketpair()
        r, w = os.pipe()
        jpid = os.fork()
        if jpid == 0:
            os.close(r)
            ja.close()
            ctl.close()
            _die_with_parent(sp)
            _rehearse()
            msg, fds, _, _ = socket.recv_fds(jb, 4096, 2)
            jb.close()
            if len(fds) < 2:
                os._exit(0)
            os.dup2(fds[0], 0)
            os.dup2(fds[1], 2)
            for fd in fds:
                os.close(fd)
            os.chdir(msg.decode())
            job_child(w, sp)
        os.close(w)
        jb.close()
        msg, fds, _, _ = socket.recv_fds(ctl, 64, 2)
        ctl.close()
        if len(fds) < 2:
            os.kill(jpid, signal.SIGKILL)
            os.waitpid(jpid, 0)
            os._exit(0)
        os.dup2(fds[0], 0)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in fds:
            os.close(fd)
        _session(out, home, ready_line({"server": me, "session": int(msg)}), (jpid, r), ja)
    finally:
        os._exit(0)


def keep_serving(cfg, out):
    """A kept worker (cfg "keep" seconds, cfg "listen" its socket, which
    compare bound in a directory only its user may enter): torch is imported
    once, and each compare's session is a child forked from here, the first
    one on the descriptors compare started us with, the next ones on their
    connections: a spare forked SPARE_AFTER seconds after the last compare
    hung up, or one forked when the connection comes (no spare, or compares
    side by side). It leaves after "keep" seconds without a session (the
    spare is none); compare finds a socket nobody answers on and starts
    another."""
    import os
    import select
    import signal
    import socket
    import time
    keep = float(cfg.get("keep") or 0)
    lst = socket.socket(fileno=int(cfg["listen"]))
    me = os.getpid()
    home = os.getcwd()
    for name in os.listdir(home):  # sessions a kill left behind
        _remove_tree(os.path.join(home, name))
    live = set()
    # a dup of each compare's connection until that compare hangs up: the
    # worker is idle (and forks the spare) once the compares are done with
    # their reports, not when their sessions end; children close these
    peers = set()
    count = 0
    spare = None  # (pid, the socket it waits on)
    spares = hasattr(socket, "send_fds")  # Python 3.9 on

    def fork_session(conn, err):
        pid = os.fork()
        if pid:
            return pid
        try:
            _die_with_parent(me)
            lst.close()
            for fd in peers:
                os.close(fd)
            if spare:
                spare[1].close()
            if conn is not None:
                os.dup2(conn, 0)
                os.dup2(conn, 1)
                os.close(conn)
            if err is not None:
                os.dup2(err, 2)
                os.close(err)
            _session(out, home, ready_line({"server": me, "session": count})
                     if conn is not None else None)
        finally:
            os._exit(0)

    def fork_spare():
        a, b = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            lst.close()
            for fd in peers:
                os.close(fd)
            a.close()
            _spare(out, me, home, b)
        b.close()
        return pid, a

    def end_spare(sp):
        sp[1].close()
        try:
            os.kill(sp[0], signal.SIGKILL)
        except OSError:
            pass
        os.waitpid(sp[0], 0)

    def adopt(sp, conn, err):
        """The spare's pid, given this compare's connection, or None."""
        try:
            if err is None:
                err = os.open(os.devnull, os.O_WRONLY)
            else:
                err = os.dup(err)
            try:
                socket.send_fds(sp[1], [b"%d" % count], [conn, err])
            finally:
                os.close(err)
        except OSError:
            end_spare(sp)
            return None
        sp[1].close()
        return sp[0]

    count += 1
    live.add(fork_session(None, None))  # the compare that started us, on 0 and 1
    peers.add(os.dup(0))
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # nothing of that compare's is held once its session ends
        os.dup2(null, fd)
    os.close(null)
    idle_since = time.monotonic()
    while True:
        for pid in list(live):
            if os.waitpid(pid, os.WNOHANG)[0]:
                live.discard(pid)
        if spare and os.waitpid(spare[0], os.WNOHANG)[0]:
            spare[1].close()
            spare = None
        now = time.monotonic()
        if live or peers:
            idle_since = now
        left = keep - (now - idle_since)
        if not live and not peers and left <= 0:
            if spare:
                end_spare(spare)
            return 0
        # a session leaves a moment after its compare hangs up: looked for soon
        wait = min(0.05 if live and not peers else 1.0, max(0.05, left))
        if spares and spare is None and not live and not peers:
            if now - idle_since >= SPARE_AFTER:
                spare = fork_spare()
            else:
                wait = min(wait, idle_since + SPARE_AFTER - now)
        watch = select.poll()
        watch.register(lst, select.POLLIN)
        for fd in peers:
            watch.register(fd, select.POLLRDHUP)
        events = dict(watch.poll(wait * 1000))
        for fd in list(peers):
            if events.get(fd, 0) & (select.POLLRDHUP | select.POLLHUP | select.POLLERR):
                peers.discard(fd)
                os.close(fd)
        if not events.get(lst.fileno(), 0) & select.POLLIN:
            continue
        try:
            conn, _ = lst.accept()
        except OSError:
            continue
        try:
            err, ok = _hello(conn)
        except (OSError, struct.error):
            err, ok = None, False
        if ok:
            count += 1
            pid = adopt(spare, conn.fileno(), err) if spare else None
            spare = None
            live.add(pid or fork_session(conn.fileno(), err))
            peers.add(os.dup(conn.fileno()))
        if err is not None:
            os.close(err)
        conn.close()


def setup():
    """Import torch and list what may be called; None, or why not."""
    global torch, _TORCH_KINDS, ALLOWED, SIGNATURES, STATE_NAMES
    try:
        import torch as t
        torch = t
        _TORCH_KINDS = (torch.dtype, torch.layout, torch.memory_format)
    except Exception as e:
        return "cannot import torch: %s" % e
    torch.set_grad_enabled(False)
    # One thread, before any call: a worker that ran a parallel region has an
    # OpenMP team (libgomp), and a job child forked from it then waits forever
    # on that team's threads, which fork did not copy, at its first parallel
    # region (a layer_norm past the grain size). Replay runs sampled or small
    # tensors; one thread also keeps its rounding the same on any machine.
    torch.set_num_threads(1)
    ALLOWED = allowed_apis()
    SIGNATURES = signatures()
    STATE_NAMES = tuple(sorted({n.rsplit(".", 1)[-1] for n in ALLOWED}))
    REPLAYABLE[:] = replayable()
    warm_up()
    return None


def warm_up():
    """A few small calls of the kinds replay makes, once, before any job
    child is forked: what torch initialises on its first call of a kind
    (dispatch tables, oneDNN and BLAS state) is then inherited instead of
    done again by every child (0.13 s a child -> 0.03 s on a 2-core VM)."""
    try:
        F = torch.nn.functional
        for dt in (torch.float32, torch.float64, torch.bfloat16):
            x = torch.ones(4, 8, 6, 6, dtype=dt)
            w = torch.ones(4, 8, 3, 3, dtype=dt)
            F.conv2d(x, w).sum()
            m = x.reshape(16, -1)
            (m @ m.t()).norm()
            F.layer_norm(m, (m.shape[1],))
            F.softmax(F.gelu(m), -1)
            F.batch_norm(x, None, None, training=True)
            F.linear(m, m)
            F.cross_entropy(m.float(), torch.zeros(16, dtype=torch.long))
    except Exception:  # a torch without one of these: its first job pays
        pass


def main():
    import os
    out = sys.stdout
    cfg = {}
    try:
        cfg = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
        cfg = cfg if isinstance(cfg, dict) else {}
        sandbox_enter(cfg)
    except Exception as e:
        out.write(json.dumps({"error": "cannot enter the sandbox: %s" % e}) + "\n")
        out.flush()
        return 1
    why = setup()
    if why:
        out.write(json.dumps({"error": why}) + "\n")
        out.flush()
        return 1
    sandbox_no_exec()
    kept = cfg.get("keep") and cfg.get("listen") is not None
    out.write(ready_line({"server": os.getpid(), "session": 1} if kept else None))
    out.flush()
    if kept:
        return keep_serving(cfg, out)
    pid = serve(out)
    if pid:
        os.waitpid(pid, 0)
    # no interpreter shutdown (torch's finalizers: past compare's 0.5 s for
    # a worker to leave on a loaded machine, and it then kills the group)
    out.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
