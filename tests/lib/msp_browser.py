"""Load a page in headless Chromium (Debian's `chromium`, installed by
scripts/bootstrap.sh) from the command line only, and read back what it
shows: the DOM after its scripts ran (--dump-dom), the console (logged to
stderr), and a screenshot. Standard library only.

    dom, console = load(path)          # dom: Node tree; console: lines
    screenshot(path, png, 1400, 2400)
"""
import os
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser

CHROMIUM = os.environ.get("MSPROBE_CHROMIUM") or shutil.which("chromium") or \
    shutil.which("chromium-browser")
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


def _argv(extra, budget_ms):
    if not CHROMIUM:
        raise RuntimeError("chromium not found: apt-get install chromium (scripts/bootstrap.sh "
                           "installs it), or set MSPROBE_CHROMIUM")
    argv = [CHROMIUM, "--headless", "--disable-gpu", "--no-first-run",
            "--disable-extensions", "--disable-background-networking",
            "--enable-logging=stderr", "--v=0",
            "--virtual-time-budget=%d" % budget_ms]
    if os.geteuid() == 0:  # Chromium refuses to run as root inside its sandbox
        argv.append("--no-sandbox")
    return argv + extra


def _env():
    """The browser is not under test: no preloaded shim or sanitizer runtime
    (the sanitizer pass of scripts/test.sh puts libasan in LD_PRELOAD)."""
    return {k: v for k, v in os.environ.items()
            if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS")
            and not k.startswith("MSPROBE_")}


def _run(extra, url, budget_ms, timeout):
    with tempfile.TemporaryDirectory(prefix="msp-chromium-") as profile:
        p = subprocess.run(_argv(extra + ["--user-data-dir=" + profile], budget_ms) + [url],
                           capture_output=True, text=True, timeout=timeout, env=_env())
    if p.returncode != 0:
        raise RuntimeError("chromium failed (%d): %s" % (p.returncode, p.stderr[-2000:]))
    console = [l for l in p.stderr.splitlines() if ":CONSOLE" in l]
    return p.stdout, console


def url_of(path):
    return "file://" + os.path.abspath(path)


def load(path, budget_ms=10000, timeout=180):
    """The DOM after the page's scripts ran, and its console lines."""
    html, console = _run(["--dump-dom"], url_of(path), budget_ms, timeout)
    return parse(html), console


def screenshot(path, png, width=1400, height=2400, budget_ms=10000, timeout=180):
    _run(["--screenshot=" + os.path.abspath(png), "--window-size=%d,%d" % (width, height),
          "--hide-scrollbars"], url_of(path), budget_ms, timeout)
    return png


class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent = tag, dict(attrs), parent
        self.children = []
        self.parts = []

    def text(self):
        out = []

        def walk(n):
            for p in n.parts:
                out.append(p if isinstance(p, str) else "")
                if not isinstance(p, str):
                    walk(p)
        walk(self)
        return "".join(out)

    def find_all(self, tag=None, **attrs):
        """Descendants with this tag and attributes (name_ for "name", data_x for "data-x")."""
        want = {k.rstrip("_").replace("_", "-"): v for k, v in attrs.items()}
        out = []

        def walk(n):
            for c in n.children:
                if (tag is None or c.tag == tag) and all(
                        c.attrs.get(k) == v if v is not True else k in c.attrs
                        for k, v in want.items()):
                    out.append(c)
                walk(c)
        walk(self)
        return out

    def find(self, tag=None, **attrs):
        r = self.find_all(tag, **attrs)
        return r[0] if r else None

    def classes(self):
        return (self.attrs.get("class") or "").split()


class _Parser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {}, None)
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        n = Node(tag, attrs, self.cur)
        self.cur.children.append(n)
        self.cur.parts.append(n)
        if tag not in VOID:
            self.cur = n

    def handle_startendtag(self, tag, attrs):
        n = Node(tag, attrs, self.cur)
        self.cur.children.append(n)
        self.cur.parts.append(n)

    def handle_endtag(self, tag):
        n = self.cur
        while n is not self.root and n.tag != tag:
            n = n.parent
        if n is not self.root:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.parts.append(data)


def parse(html):
    p = _Parser()
    p.feed(html)
    p.close()
    return p.root
