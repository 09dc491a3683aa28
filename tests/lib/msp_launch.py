"""Start N ranks of a torch.distributed script on this machine, the way
torchrun does.

torchrun (python -m torch.distributed.run --nproc_per_node N) is tried first,
once per process, on a probe script; where it cannot run (Debian's torchrun
fails on torch 1.13 with Python 3.11 inside its elastic agent) the ranks are
started directly with the environment torchrun would give them: MASTER_ADDR,
MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE. Either way each
rank's stdout lines keep their order and the result says which way was used.
"""
import os
import random
import socket
import subprocess
import tempfile

PYTHON = os.environ.get("MSPROBE_PYTHON", "/usr/bin/python3")

_PROBE = """
import torch.distributed as dist
dist.init_process_group("gloo")
print("probe rank %d of %d" % (dist.get_rank(), dist.get_world_size()), flush=True)
dist.destroy_process_group()
"""

_torchrun = None  # (usable, why not)


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_port():
    """A port nothing listens on, for a rendezvous (MASTER_PORT).

    Not one the kernel hands out for bind(0): that comes from the ephemeral
    range, the same range every outgoing connection (gloo opens many) takes
    its own port from, so between this call and the ranks' bind another
    test's connection could take it. Below that range only an explicit bind
    can, and two concurrent tests pick the same port with odds of about one
    in ten thousand."""
    lo, _ = _ephemeral_range()
    rnd = random.SystemRandom()
    for _ in range(200):
        port = rnd.randrange(20000, max(20001, lo))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_usable():
    """(True, "") when torchrun starts ranks here, else (False, its error's last line)."""
    global _torchrun
    if _torchrun is None:
        with tempfile.TemporaryDirectory(prefix="msp-torchrun-") as d:
            probe = os.path.join(d, "probe.py")
            with open(probe, "w") as f:
                f.write(_PROBE)
            env = dict(os.environ)
            env.pop("LD_PRELOAD", None)
            try:
                p = subprocess.run([PYTHON, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                                    "--master_port", str(free_port()), probe], cwd=d, env=env,
                                   capture_output=True, text=True, timeout=120)
                ok = p.returncode == 0 and p.stdout.count("probe rank") == 2
                lines = [x for x in p.stderr.strip().splitlines() if x.strip()]
                _torchrun = (ok, "" if ok else (lines[-1] if lines else "exit %d" % p.returncode))
            except subprocess.TimeoutExpired:
                _torchrun = (False, "torchrun did not finish within 120 s")
    return _torchrun


class Ranks:
    """The outcome of one launch: per rank, exit status and output."""

    def __init__(self, how, codes, outs, errs):
        self.how, self.codes, self.outs, self.errs = how, codes, outs, errs

    def check(self):
        for r, c in enumerate(self.codes):
            if c != 0:
                raise RuntimeError("rank %d exited with %s (%s):\n%s" % (r, c, self.how,
                                                                        self.errs[r][-3000:]))
        return self


def launch(script, nproc, env, cwd, args=(), timeout=600, use_torchrun=True):
    """Run script as nproc ranks with env (LD_PRELOAD and the rest given by the
    caller). With torchrun, every rank's lines start with "rank R" in the
    scripts used here, and they are split back by that prefix."""
    port = str(free_port())
    ok, _ = torchrun_usable() if use_torchrun else (False, "")
    if ok:
        p = subprocess.run([PYTHON, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
                            "--master_port", port, script] + list(args), cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=timeout)
        outs = ["".join(l + "\n" for l in p.stdout.splitlines() if l.startswith("rank %d " % r))
                for r in range(nproc)]
        return Ranks("torchrun", [p.returncode] * nproc, outs, [p.stderr] * nproc)
    procs = []
    for r in range(nproc):
        e = dict(env, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(r), LOCAL_RANK=str(r),
                 WORLD_SIZE=str(nproc), LOCAL_WORLD_SIZE=str(nproc))
        procs.append(subprocess.Popen([PYTHON, script] + list(args), cwd=cwd, env=e,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs, errs = [], []
    for p in procs:
        try:
            o, e = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            o, e = p.communicate()
            e += "\n(killed: no exit within %d s)" % timeout
        outs.append(o)
        errs.append(e)
    return Ranks("environment", [p.returncode for p in procs], outs, errs)


def losses(ranks):
    """{(rank, step): loss text} from "rank R step S loss X" lines."""
    out = {}
    for text in ranks.outs:
        for line in text.splitlines():
            w = line.split()
            if len(w) == 6 and w[0] == "rank" and w[2] == "step" and w[4] == "loss":
                out[(int(w[1]), int(w[3]))] = w[5]
    return out
