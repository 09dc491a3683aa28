"""CLI cases in the style of zstd's tests/cli-tests, shared by tests/cli and
tests/configcheck. A case is a directory holding

    cmd                   a bash script, run in a fresh empty working directory
    exit                  the expected exit status
    stdout.exact|.glob    expected stdout; absent means "must be empty"
    stderr.exact|.glob    expected stderr; absent means "must be empty"

Before comparing, the paths that change from run to run are replaced by
placeholders (the caller says which: $DATA, $TMP, ...). In a .glob file "..."
stands for any text, line breaks included. What differs between the callers
(environment, placeholders, time limit) is theirs to pass in.
"""
import os
import re
import subprocess


def glob_match(pattern, text):
    parts = [re.escape(p) for p in pattern.split("...")]
    return re.fullmatch(".*".join(parts), text, re.DOTALL) is not None


def check_case(tc, case, work, env, subs, timeout):
    """Run case/cmd under bash in work with env and assert, through the
    unittest.TestCase tc, its exit status and both streams. subs: (text,
    placeholder) pairs, replaced in that order in stdout and stderr."""
    name = os.path.basename(case)
    r = subprocess.run(["bash", os.path.join(case, "cmd")], cwd=work, env=env,
                       capture_output=True, text=True, timeout=timeout)

    def norm(s):
        for text, placeholder in subs:
            s = s.replace(text, placeholder)
        return s

    out, err = norm(r.stdout), norm(r.stderr)
    with open(os.path.join(case, "exit")) as f:
        want_rc = int(f.read().strip())
    ctx = f"\n--- stdout ---\n{out}--- stderr ---\n{err}"
    tc.assertEqual(r.returncode, want_rc, f"exit status of {name}{ctx}")
    for stream, got in (("stdout", out), ("stderr", err)):
        exact = os.path.join(case, stream + ".exact")
        globf = os.path.join(case, stream + ".glob")
        if os.path.exists(exact):
            with open(exact) as f:
                tc.assertEqual(got, f.read(), f"{stream} of {name}")
        elif os.path.exists(globf):
            with open(globf) as f:
                pat = f.read()
            tc.assertTrue(glob_match(pat, got),
                          f"{stream} of {name} does not match {globf}:\n{got}")
        else:
            tc.assertEqual(got, "", f"{stream} of {name} should be empty")
