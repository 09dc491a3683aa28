"""Secrets inside free text, whatever the variable is called (issue 37, item 4;
msprobe-config_check(1), SECRETS): `EXPERIMENT_NOTE="login admin / hunter2
on the cluster"` must not be packed in clear. Static packs (`msprobe
config_check -d -o pack.zip`) of an environment holding such values are
opened with Python's zipfile: no secret appears in any member; each secret
is replaced in place by a tag (HMAC-SHA256 keyed by MSPROBE_SECRET_SALT,
computed here with Python's hmac, or "<secret: not stored>" without a salt)
while the rest of the text is kept; ordinary values (paths, hostnames,
versions, a commit under GIT_COMMIT) stay as they are. Two packs with the
same secrets compare the same, a changed secret shows as differs, and the
report shows the text with <secret> where the secret was, never the secret
or its hash."""
import hashlib
import hmac
import os
import random
import string
import tempfile
import unittest
import zipfile

from cc_testlib import UNSTORED, clean_env, msprobe, read_member, sheet_rows

SALT = "Qm7#tR2vX9!pL4$wZ8^kB3"


def rnd(g, n, alphabet=string.ascii_letters + string.digits):
    return "".join(g.choice(alphabet) for _ in range(n))


def hexs(g, n):
    return "".join(g.choice("0123456789abcdef") for _ in range(n))


def secrets(tag):
    """{key: (template, parts)}: the value is template % parts; each part is
    a secret the pack must replace. `tag` changes every secret, never the text."""
    g = random.Random("in-text-" + tag)
    return {
        "EXPERIMENT_NOTE": ("login admin / %s on the cluster", ("hunter2" + tag,)),
        "DEPLOY_NOTE": ("the password is %s.", ("Hu%s%s" % (tag, rnd(g, 6)),)),
        "DB_HINT": ("db password: %s (rotated monthly)", ("s3%s!%s" % (tag, rnd(g, 5)),)),
        "CFG_LINE": ("retries=3 passw0rd=%s timeout=30", ("pw%s%s" % (tag, rnd(g, 6)),)),
        "PHRASE_NOTE": ('unlock with passphrase "%s"', ("blue %s horse %s" % (tag, rnd(g, 4)),)),
        "SYNC_TARGET": ("rsync to backup:%s@store.example.com:/data nightly", ("Bk%s%s" % (tag, rnd(g, 6)),)),
        "CURL_ARGS": ('-H "Authorization: Bearer %s" https://api.example.com/v1', (rnd(g, 32),)),
        "PROXY_HEADER": ("Proxy-Authorization: Basic %s", (rnd(g, 24) + "==",)),
        "CI_NOTE": ("mirror pushes with %s every hour", ("ghp_" + rnd(g, 36),)),
        "FINE_NOTE": ("scoped %s for releases", ("github_pat_11A" + rnd(g, 22) + "_" + rnd(g, 30),)),
        "GITLAB_NOTE": ("runner %s registered", ("glpat-" + rnd(g, 20),)),
        "SLACK_NOTE": ("bot %s posts results", ("xoxb-%d-%s" % (g.randrange(10**11, 10**12), rnd(g, 24)),)),
        "AWS_NOTE": ("keys %s in us-east-1", ("AKIA" + rnd(g, 16, string.ascii_uppercase + string.digits),)),
        "OPENAI_NOTE": ("eval via %s", ("sk-" + rnd(g, 40),)),
        "HUB_NOTE": ("weights pulled with %s today", ("hf_" + rnd(g, 34, string.ascii_letters),)),
        "SIGNING_NOTE": ("signing key %s (see vault)", (hexs(g, 40),)),
        "CALL_NOTE": ("session %s expires at noon",
                     ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOi%s.%s" % (rnd(g, 20), rnd(g, 43)),)),
        "RANDOM_NOTE": ("opaque %s kept", (rnd(g, 32),)),
    }


# Ordinary values: kept as they are.
HARMLESS = {
    "GIT_COMMIT": "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    "MODEL_REVISION": "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678",
    "DATA_DIR": "/mnt/data/imagenet/train",
    "MASTER_ADDR": "gpu-node-01.cluster.local",
    "VERSIONS_NOTE": "torch 2.1.0+cu118, python 3.10.12, cuda 11.8",
    "PROSE_NOTE": "password reset tomorrow; Basic training for new staff; user alice / team nlp",
    "IMAGE": "registry.example.com/train:v1.2@sha256:" + "0123456789abcdef" * 4,
    "RUN_UUID": "123e4567-e89b-12d3-a456-426614174000",
    "LAUNCH": "torchrun --nproc_per_node 8 train.py --lr 3e-4 --user-name alice",
    "SSH_OPTS": "-o StrictHostKeyChecking=no -i ~/.ssh/id_ed25519",
}


def value(template, parts):
    return template % parts


def tagged(template, parts, salt):
    """The stored text, computed here: each secret as its tag."""
    tags = tuple(UNSTORED if salt is None else
                 "<secret hmac-sha256:%s>" % hmac.new(salt.encode(), p.encode(),
                                                      hashlib.sha256).hexdigest()[:16]
                 for p in parts)
    return template % tags


def shown(template, parts):
    return template % tuple("<secret>" for _ in parts)


class SecretsInText(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.sets = {t: secrets(t) for t in ("a", "b")}
        cls.packs, cls.terminal = {}, []
        # sa, sa2: the same secrets, one salt; sb: every secret changed;
        # na, nb: no salt, secrets changed; nr: no salt, a readable part changed
        for name, tag, salt, reword in (("sa", "a", SALT, False), ("sa2", "a", SALT, False),
                                        ("sb", "b", SALT, False), ("na", "a", None, False),
                                        ("nb", "b", None, False), ("nr", "a", None, True)):
            env = {k: value(t, p) for k, (t, p) in cls.sets[tag].items()}
            if reword:
                env["EXPERIMENT_NOTE"] = env["EXPERIMENT_NOTE"].replace("admin", "root")
            env.update(HARMLESS)
            if salt:
                env["MSPROBE_SECRET_SALT"] = salt
            z = os.path.join(cls.tmp.name, name + ".zip")
            r = msprobe("config_check", "-d", "-o", z, env=clean_env(**env))
            assert r.returncode == 0, r.stderr
            cls.terminal += [r.stdout, r.stderr]
            cls.packs[name] = z
        cls.keys = ",".join(sorted(cls.sets["a"]) + sorted(HARMLESS))
        cls.reports = {}
        for a, b in (("sa", "sa2"), ("sa", "sb"), ("na", "nb"), ("na", "nr")):
            out = os.path.join(cls.tmp.name, "out_%s_%s" % (a, b))
            r = msprobe("-f", "pytorch", "config_check", "-c", cls.packs[a], cls.packs[b], "-o", out,
                        "--env-keys", cls.keys)
            assert r.returncode in (0, 1), r.stderr
            cls.terminal += [r.stdout, r.stderr]
            cls.reports[(a, b)] = os.path.join(out, "result.xlsx")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def every_secret(self):
        out = set()
        for s in self.sets.values():
            for t, parts in s.values():
                out.add(value(t, parts))
                out.update(parts)
        return out

    def env_rows(self, pair):
        return {r["key"]: r for r in sheet_rows(self.reports[pair], "env")}

    def test_no_secret_in_any_member_of_any_pack(self):
        bad = {s.encode() for s in self.every_secret()}
        for name, z in self.packs.items():
            with zipfile.ZipFile(z) as zf:
                for m in zf.namelist():
                    data = zf.read(m)
                    self.assertEqual([s for s in bad if s in data], [], "%s:%s" % (name, m))
            with open(z, "rb") as f:
                self.assertNotIn(SALT.encode(), f.read())

    def test_each_secret_becomes_its_keyed_tag_and_the_text_stays(self):
        env = read_member(self.packs["sa"], "env.json")
        for k, (t, parts) in self.sets["a"].items():
            self.assertEqual(env["vars"][k], tagged(t, parts, SALT), k)
        self.assertEqual(env["vars"]["EXPERIMENT_NOTE"],
                         "login admin / <secret hmac-sha256:%s> on the cluster" %
                         hmac.new(SALT.encode(), b"hunter2a", hashlib.sha256).hexdigest()[:16])
        # the keys whose values were hashed, whole or in part, are listed
        self.assertLessEqual(set(self.sets["a"]), set(env["hashed_keys"]))
        self.assertEqual(set(env["hashed_keys"]) & set(HARMLESS), set())

    def test_without_a_salt_nothing_of_a_secret_is_kept(self):
        env = read_member(self.packs["na"], "env.json")
        for k, (t, parts) in self.sets["a"].items():
            self.assertEqual(env["vars"][k], tagged(t, parts, None), k)
        self.assertEqual(env["vars"]["EXPERIMENT_NOTE"], "login admin / %s on the cluster" % UNSTORED)

    def test_ordinary_values_stay_in_clear(self):
        for name in ("sa", "na"):
            env = read_member(self.packs[name], "env.json")["vars"]
            for k, v in HARMLESS.items():
                self.assertEqual(env[k], v, k)

    def test_same_secrets_compare_the_same(self):
        rows = self.env_rows(("sa", "sa2"))
        for k, (t, parts) in self.sets["a"].items():
            self.assertEqual(rows[k]["level"], "same", k)
            self.assertEqual((rows[k]["bench_value"], rows[k]["cmp_value"]), (shown(t, parts),) * 2, k)
        summary = {r["filename"]: r["pass_check"] for r in sheet_rows(self.reports[("sa", "sa2")], "summary")}
        self.assertEqual(summary["env"], True)

    def test_a_changed_secret_differs(self):
        rows = self.env_rows(("sa", "sb"))
        for k, (t, parts) in self.sets["a"].items():
            self.assertEqual(rows[k]["level"], "differs", k)
            # the text is the same on both sides: only the secret changed
            self.assertEqual((rows[k]["bench_value"], rows[k]["cmp_value"]), (shown(t, parts),) * 2, k)
        self.assertEqual(rows["EXPERIMENT_NOTE"]["bench_value"], "login admin / <secret> on the cluster")
        summary = {r["filename"]: r["pass_check"] for r in sheet_rows(self.reports[("sa", "sb")], "summary")}
        self.assertEqual(summary["env"], False)

    def test_without_a_salt_the_text_is_compared_and_the_secret_is_not(self):
        rows = self.env_rows(("na", "nb"))
        for k in self.sets["a"]:
            self.assertEqual(rows[k]["level"], "not compared", k)
        rows = self.env_rows(("na", "nr"))
        self.assertEqual(rows["EXPERIMENT_NOTE"]["level"], "differs")
        self.assertEqual((rows["EXPERIMENT_NOTE"]["bench_value"], rows["EXPERIMENT_NOTE"]["cmp_value"]),
                         ("login admin / <secret> on the cluster", "login root / <secret> on the cluster"))

    def test_no_secret_nor_hash_in_the_reports_or_on_the_terminal(self):
        import openpyxl
        bad = self.every_secret()
        for pair, x in self.reports.items():
            wb = openpyxl.load_workbook(x, read_only=True)
            for ws in wb.worksheets:
                for row in ws.iter_rows(values_only=True):
                    for cell in row:
                        if isinstance(cell, str):
                            self.assertEqual([s for s in bad if s in cell], [], (pair, ws.title))
                            self.assertNotIn("hmac-sha256", cell, (pair, ws.title))
            wb.close()
        text = "\n".join(self.terminal)
        self.assertEqual([s for s in bad if s in text], [])
        self.assertNotIn("hmac-sha256", text)


if __name__ == "__main__":
    unittest.main()
