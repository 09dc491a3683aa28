"""Secrets corpus: a real torch training run under the preload shim with
config_check on, its environment and argv full of realistic credentials.
No secret may appear in clear, nor as an unkeyed or public-salt hash, in any
pack member, in result.xlsx (read with openpyxl) or on the terminal. With
MSPROBE_SECRET_SALT the pack keeps HMAC-SHA256(salt, value) only (checked
with Python's hmac) and the report says same / differs; without it, nothing
and "not compared". A value whose name says secret, or that is all secret,
is kept whole that way; a secret found inside a longer value (the password
of a URL, the argument of sshpass -p) is replaced in place by a tag, the
rest of the text kept."""
import hashlib
import hmac
import os
import random
import string
import tempfile
import unittest
import zipfile

from cc_testlib import HERE, UNSTORED, msprobe, read_member, run_under_shim, secret_hash, sheet_rows

SCRIPT = os.path.join(HERE, "cc_secret_train.py")
OLD_PUBLIC_SALT = b"msprobe-config-check-salt-v1"  # the salt earlier versions used for every pack


def rnd(rng, n, alphabet=string.ascii_letters + string.digits):
    return "".join(rng.choice(alphabet) for _ in range(n))


def corpus(tag):
    """(where, name, full value, the part that must never leak, parts):
    parts are the secrets inside the value that the pack replaces by tags, in
    their order, the rest of the value kept; None when the whole value is
    replaced (its name says secret, or the secret is all of it). `tag` makes
    the secrets of two runs differ while their names stay the same."""
    g = random.Random("msprobe-secrets-" + tag)
    hexd = "0123456789abcdef"
    pw = "Pw%s%s" % (tag, rnd(g, 8))

    def inside(template, *parts):
        """A value holding parts (found by value), and its parts."""
        return template % parts, parts[0], list(parts)

    env = [
        ("DATABASE_URL", "postgres://app:%s@db.internal:5432/prod" % pw, pw),
        ("GITHUB_PAT", "github_pat_11A" + rnd(g, 22) + "_" + rnd(g, 59), None),
        ("GH_TOKEN", "ghp_" + rnd(g, 36), None),
        ("SLACK_WEBHOOK_URL", "https://hooks.slack.com/services/T0%s/B0%s/%s" % (rnd(g, 8).upper(), rnd(g, 8).upper(),
                                                                                rnd(g, 24)), None),
        ("SENTRY_DSN", "https://%s@o4504.ingest.sentry.io/4504" % "".join(g.choice(hexd) for _ in range(32)), None),
        ("HTTPS_PROXY", *inside("http://proxyuser:%s@proxy.corp.example:3128", "Px%s%s" % (tag, rnd(g, 6)))),
        ("CI_JOB_JWT", "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJwcm9qZWN0X3BhdGg6%s.%s" % (rnd(g, 20),
                                                                                              rnd(g, 43)), None),
        ("CREDS", "admin:Adm%s%s" % (tag, rnd(g, 7)), None),
        ("PASS", "pass%s%s" % (tag, rnd(g, 5)), None),
        ("DB_PASSWORD", "hunter2" if tag == "a" else "hunter3", None),
        ("AWS_ACCESS_KEY_ID", "AKIA" + rnd(g, 16, string.ascii_uppercase + string.digits), None),
        ("AWS_SECRET_ACCESS_KEY", rnd(g, 40, string.ascii_letters + string.digits + "+/"), None),
        ("OPENAI_API_KEY", "sk-proj-" + rnd(g, 48), None),
        ("CI_SERVICE_VALUE", "glpat-" + rnd(g, 20), None),          # a token under a harmless name
        ("SLACK_BOT", "xoxb-%d-%d-%s" % (g.randrange(10**11, 10**12), g.randrange(10**12, 10**13), rnd(g, 24)), None),
        ("HUB_USER_DATA", "hf_" + rnd(g, 34, string.ascii_letters), None),
        ("PIP_INDEX_URL", *inside("https://__token__:%s@pypi.example.com/simple",
                                  "pypi-AgEIcHlwaS5vcmc" + rnd(g, 30))),
        ("REDIS_URL", *inside("redis://:%s@cache:6379/0", "Rd%s%s" % (tag, rnd(g, 8)))),
        ("MONGO_URI", *inside("mongodb+srv://svc:%s@cluster0.example.net/db?retryWrites=true",
                              "Mg%s%s" % (tag, rnd(g, 8)))),
        ("BROKER", *inside("amqp://guest:%s@mq:5672/", "Rb%s%s" % (tag, rnd(g, 8)))),
        ("WANDB_API_KEY", "".join(g.choice(hexd) for _ in range(40)), None),
        ("ARTIFACT_LINK", *inside("https://bkt.s3.amazonaws.com/m.pt?X-Amz-Expires=60&X-Amz-Signature=%s",
                                  "".join(g.choice(hexd) for _ in range(64)))),
        ("EXTRA_HEADER", *inside("Authorization: Bearer %s", rnd(g, 32))),
        ("DEPLOY_MATERIAL", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE%s\n-----END OPENSSH PRIVATE "
         "KEY-----" % rnd(g, 60), None),
        ("X_OPAQUE", rnd(g, 32), None),                                 # high entropy, harmless name
        # a webhook's path is its key
        ("NOTIFY_TARGET", *inside("https://discord.com/%s",
                                  "api/webhooks/%d/%s" % (g.randrange(10**17, 10**18), rnd(g, 60)))),
        ("BILLING", "sk_live_" + rnd(g, 24), None),
        ("MAPS", "AIza" + rnd(g, 35), None),
        # found by value patterns, under names that say nothing of secrets: the
        # third field is the secret inside the value, which must not leak either
    ]
    env = [e if len(e) == 4 else e + (None,) for e in env]
    sec = lambda p: "%s%s%s" % (p, tag, rnd(g, 8))  # noqa: E731
    hx = lambda n: "".join(g.choice(hexd) for _ in range(n))  # noqa: E731
    s = [sec("Pg"), sec("Ks"), sec("Ss"), tag + hx(24), tag + hx(24), tag + hx(24), sec("My"),
         sec("Od"), sec("Ad"), sec("Kf"), hx(40), sec("Ml"), sec("Ld"), sec("Mn")]
    env += [
        ("DB_CONN", *inside("host=db.internal port=5432 dbname=prod user=app password=%s sslmode=require",
                            s[0])),
        # a key store's path is masked too: its option's name says key
        ("JAVA_TOOL_OPTIONS", "-Xmx2g -Djavax.net.ssl.keyStore=/etc/ks.jks "
         "-Djavax.net.ssl.keyStorePassword=%s" % s[1], s[1], ["/etc/ks.jks", s[1]]),
        ("RUN_CMD", *inside("sshpass -p %s ssh deploy@10.0.0.5 ./train.sh", s[2])),
        ("NB_CMD", *inside("jupyter notebook --no-browser --NotebookApp.token=%s", s[3])),
        ("NB_SERVER", *inside("jupyter lab --ip 0.0.0.0 --ServerApp.token %s --port 8888", s[4])),
        ("NB_LINK", *inside("http://127.0.0.1:8888/lab?token=%s", s[5])),
        ("MYSQL_CMD", *inside("mysql -h db -u root -p%s prod", s[6])),
        ("ODBC_STRING", *inside("Driver={ODBC Driver 18};Server=tcp:sql.example.net,1433;Database=prod;Uid=app;"
                                "Pwd=%s;", s[7])),
        ("ADO_STRING", *inside("Data Source=sql01;Initial Catalog=prod;User ID=svc;Password=%s;", s[8])),
        ("KAFKA_OPTS", *inside('org.apache.kafka.common.security.plain.PlainLoginModule required '
                               'username="svc" password="%s";', s[9])),
        ("TRAIN_ARGS", *inside("--wandb %s --lr 0.1", s[10])),
        ("MAIL_CFG", *inside("user: ops\npassword: %s\nhost: smtp", s[11])),
        ("LDAP_BIND", *inside("cn=admin,dc=example,dc=com secret=%s", s[12])),
        # the access key id too: its option's name says key
        ("MINIO_ARGS", "--access-key=svc --secret-key=%s" % s[13], s[13], ["svc", s[13]]),
    ]
    argv = [
        ("--db-url", "postgres://u:Arg%s%s@h/db" % (tag, rnd(g, 8)), None, None),
        ("--password", "hunter%s%s" % (tag, rnd(g, 4)), None, None),
        ("--token=", "tk%s%s" % (tag, rnd(g, 6)), None, None),
        ("--api-key", "ak%s%s" % (tag, rnd(g, 10)), None, None),
        ("--header=", *inside("Authorization: Bearer %s", rnd(g, 30))),
        ("--hf-token", "hf_" + rnd(g, 34, string.ascii_letters), None, None),
        ("--webhook", "https://hooks.slack.com/services/T1/B1/" + rnd(g, 24), None, None),
        ("", *inside("https://deploy:%s@git.example.com/repo.git", "Pos%s%s" % (tag, rnd(g, 8)))),
        ("-p", sec("Pp"), None, None),
        ("--conn", None, None, None),
        ("--wandb", hx(40), None, None),
        ("--jdbc", None, None, None),
        ("--dsn", None, None, None),
    ]
    pw = [sec("Cn"), sec("Jd"), sec("Ds")]
    composite = {"--conn": inside("Server=tcp:sql,1433;Database=prod;User Id=app;Password=%s;", pw[0]),
                 "--jdbc": inside("jdbc:postgresql://db:5432/prod?user=app&password=%s", pw[1]),
                 # its option's name says secret: whole
                 "--dsn": ("user=app password=%s host=db" % pw[2], pw[2], None)}
    argv = [(k, *composite[k]) if k in composite else (k, v, n, m) for k, v, n, m in argv]
    out = [("env", k, v, n or v, m) for k, v, n, m in env] + \
          [("argv", k, v, n or v, m) for k, v, n, m in argv]
    return out


def stored(value, parts, salt):
    """What the pack keeps of a value (Python's hmac, independent of
    msprobe's): its whole stored form, or each part replaced by its tag."""
    if parts is None:
        return secret_hash(None, value, salt.encode() if salt else None)
    for p in parts:
        t = UNSTORED if not salt else \
            "<secret hmac-sha256:%s>" % hmac.new(salt.encode(), p.encode(), hashlib.sha256).hexdigest()[:16]
        value = value.replace(p, t, 1)
    return value


def argv_of(cases):
    args = []
    for where, k, v, _, _ in cases:
        if where != "argv":
            continue
        if not k:
            args.insert(0, v)
        elif k.endswith("="):
            args.append(k + v)
        else:
            args += [k, v]
    return args + ["--lr", "0.05", "--run-name", "sweep-3"]


def forbidden(cases, salt=None):
    """Every byte string that would give a secret away."""
    out = set()
    for _, k, v, needle, _ in cases:
        key = k.strip("-=")
        for s in {v, needle}:
            b = s.encode()
            out.add(b)
            out.add(hashlib.sha256(b).hexdigest().encode())
            out.add(hashlib.md5(b).hexdigest().encode())
            out.add(hashlib.sha256(OLD_PUBLIC_SALT + b"\0" + key.encode() + b"\0" + b).hexdigest().encode())
    return out


class SecretsCorpus(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.cases = {t: corpus(t) for t in ("a", "b")}
        cls.terminal = []
        cls.packs = {}
        # a, b: no salt; sa, sa2 (same secrets), sb (other secrets): one salt.
        cls.salt = "s4lt-" + rnd(random.Random(os.getpid()), 20)
        cls.weak_salt = "msprobe"  # found at once by a guess: refused
        cls.stderr = {}
        for name, tag, salt in (("a", "a", None), ("b", "b", None), ("sa", "a", cls.salt), ("sa2", "a", cls.salt),
                                ("sb", "b", cls.salt), ("weak", "a", cls.weak_salt)):
            cases = cls.cases[tag]
            extra = {k: v for w, k, v, _, _ in cases if w == "env"}
            extra.update({"OMP_NUM_THREADS": "2", "GIT_COMMIT": "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
                          "CUDA_VISIBLE_DEVICES": "GPU-8e3cbd0e-1c2f-4a7b-9d5e-0f6a2b3c4d5e"})
            if salt:
                extra["MSPROBE_SECRET_SALT"] = salt
            z = os.path.join(d, name + ".zip")
            r = run_under_shim([SCRIPT] + argv_of(cases), z, d, **extra)
            assert r.returncode == 0, r.stderr
            cls.terminal += [r.stdout, r.stderr]
            cls.stderr[name] = r.stderr
            cls.packs[name] = z
        cls.xlsx = {}
        for a, b in (("a", "b"), ("sa", "sa2"), ("sa", "sb"), ("a", "sa")):
            out = os.path.join(d, "out_%s_%s" % (a, b))
            # Every corpus variable compared, so each secret reaches the report.
            keys = ",".join(k for w, k, _, _, _ in cls.cases["a"] if w == "env") + ",OMP_*"
            r = msprobe("-f", "pytorch", "config_check", "-c", cls.packs[a], cls.packs[b], "-o", out,
                        "--env-keys", keys)
            assert r.returncode in (0, 1), r.stderr
            cls.terminal += [r.stdout, r.stderr]
            cls.xlsx[(a, b)] = os.path.join(out, "result.xlsx")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_corpus_is_large_enough(self):
        self.assertGreaterEqual(len(self.cases["a"]), 50)

    def test_no_secret_in_any_pack_member(self):
        bad = forbidden(self.cases["a"]) | forbidden(self.cases["b"])
        for name, z in self.packs.items():
            with zipfile.ZipFile(z) as zf:
                for m in zf.namelist():
                    data = zf.read(m)
                    leaks = [s for s in bad if s in data]
                    self.assertEqual(leaks, [], "%s:%s" % (name, m))
            with open(z, "rb") as f:
                self.assertNotIn(self.salt.encode(), f.read())

    def test_no_secret_in_any_report_cell(self):
        import openpyxl
        bad = {s.decode() for s in forbidden(self.cases["a"]) | forbidden(self.cases["b"])}
        for key, x in self.xlsx.items():
            wb = openpyxl.load_workbook(x, read_only=True)
            for ws in wb.worksheets:
                for row in ws.iter_rows(values_only=True):
                    for cell in row:
                        if isinstance(cell, str):
                            self.assertEqual([s for s in bad if s in cell], [], "%s %s" % (key, ws.title))
                            # Not even the keyed hash: a report says same / differs / not compared.
                            self.assertNotIn("sha256:", cell, "%s %s" % (key, ws.title))
            wb.close()

    def test_no_secret_on_the_terminal(self):
        text = "\n".join(self.terminal)
        bad = {s.decode() for s in forbidden(self.cases["a"]) | forbidden(self.cases["b"])}
        self.assertEqual([s for s in bad if s in text], [])

    def test_without_salt_nothing_is_kept(self):
        env = read_member(self.packs["a"], "env.json")
        for w, k, v, _, parts in self.cases["a"]:
            if w == "env":
                self.assertEqual(env["vars"][k], stored(v, parts, None), k)
        self.assertEqual(env["salt"], "none")
        hyper = read_member(self.packs["a"], "hyperparameters.json")
        url = [(v, parts) for w, k, v, _, parts in self.cases["a"] if w == "argv" and not k][0]
        self.assertEqual(hyper["args"][0], stored(*url, None))
        self.assertEqual(hyper["args"][0], "https://deploy:%s@git.example.com/repo.git" % UNSTORED)
        self.assertIn("--token=" + UNSTORED, hyper["args"])
        self.assertEqual(hyper["namespaces"][0]["db_url"], UNSTORED)
        self.assertEqual(hyper["namespaces"][0]["target"], stored(*url, None))

    def test_with_salt_only_the_keyed_hash_is_kept(self):
        env = read_member(self.packs["sa"], "env.json")
        for w, k, v, _, parts in self.cases["a"]:
            if w == "env":
                self.assertEqual(env["vars"][k], stored(v, parts, self.salt), k)
        hyper = read_member(self.packs["sa"], "hyperparameters.json")
        ns = hyper["namespaces"][0]
        db = [v for w, k, v, _, _ in self.cases["a"] if k == "--db-url"][0]
        self.assertEqual(ns["db_url"], "hmac-sha256:" + hmac.new(self.salt.encode(), db.encode(),
                                                                 hashlib.sha256).hexdigest())
        header = [(v, parts) for w, k, v, _, parts in self.cases["a"] if k == "--header="][0]
        self.assertIn("--header=" + stored(*header, self.salt), hyper["args"])
        self.assertEqual(ns["header"], stored(*header, self.salt))

    def test_weak_salt_is_refused_so_nothing_keyed_by_it_is_stored(self):
        # salt_id or the keyed hash of a value anyone knows would let a guess
        # of "msprobe" be tested offline, and then the passwords reversed
        self.assertIn("MSPROBE_SECRET_SALT is too weak", self.stderr["weak"])
        env = read_member(self.packs["weak"], "env.json")
        self.assertEqual((env["salt"], env["salt_id"]), ("none", "none"))
        for w, k, v, _, parts in self.cases["a"]:
            if w == "env":
                self.assertEqual(env["vars"][k], stored(v, parts, None), k)
        key = self.weak_salt.encode()
        keyed = {hmac.new(key, b"msprobe salt id", hashlib.sha256).hexdigest()[:16]}
        keyed |= {hmac.new(key, v.encode(), hashlib.sha256).hexdigest()
                  for _, _, v, _, _ in self.cases["a"]}
        keyed |= {hmac.new(key, p.encode(), hashlib.sha256).hexdigest()[:16]
                  for _, _, _, _, parts in self.cases["a"] for p in parts or []}
        keyed |= {hmac.new(key, v.encode(), hashlib.sha256).hexdigest()
                  for v in ("false", "true", "1", "0", "2")}
        with zipfile.ZipFile(self.packs["weak"]) as zf:
            text = b"".join(zf.read(m) for m in zf.namelist()).decode()
        self.assertNotIn("hmac-sha256:", text)
        self.assertEqual([h for h in keyed if h in text], [])

    def test_harmless_values_stay_in_clear(self):
        env = read_member(self.packs["a"], "env.json")["vars"]
        self.assertEqual(env["OMP_NUM_THREADS"], "2")
        self.assertEqual(env["GIT_COMMIT"], "4b825dc642cb6eb9a060e54bf8d69288fbee4904")
        self.assertEqual(env["CUDA_VISIBLE_DEVICES"], "GPU-8e3cbd0e-1c2f-4a7b-9d5e-0f6a2b3c4d5e")
        self.assertEqual(env["PATH"], os.environ["PATH"])
        ns = read_member(self.packs["a"], "hyperparameters.json")["namespaces"][0]
        self.assertEqual((ns["lr"], ns["run_name"]), (0.05, "sweep-3"))

    def level_of(self, pair, sheet, name):
        col = "key" if sheet == "env" else "name"
        rows = [r for r in sheet_rows(self.xlsx[pair], sheet) if r[col] == name]
        self.assertEqual(len(rows), 1, (pair, sheet, name))
        return rows[0]["level"]

    def test_report_says_not_compared_without_salt(self):
        for k in ("DATABASE_URL", "GITHUB_PAT", "DB_PASSWORD"):
            self.assertEqual(self.level_of(("a", "b"), "env", k), "not compared")
        self.assertEqual(self.level_of(("a", "b"), "hyperparameters", "args.db_url"), "not compared")

    def test_report_says_same_and_differs_with_one_salt(self):
        for k in ("DATABASE_URL", "GITHUB_PAT", "DB_PASSWORD", "HTTPS_PROXY", "RUN_CMD", "MAIL_CFG"):
            self.assertEqual(self.level_of(("sa", "sa2"), "env", k), "same")
            self.assertEqual(self.level_of(("sa", "sb"), "env", k), "differs")
        self.assertEqual(self.level_of(("sa", "sb"), "hyperparameters", "args.password"), "differs")
        self.assertEqual(self.level_of(("sa", "sa2"), "hyperparameters", "args.header"), "same")
        self.assertEqual(self.level_of(("sa", "sb"), "hyperparameters", "args.header"), "differs")
        self.assertEqual(summary_env(self.xlsx[("sa", "sa2")]), True)

    def test_report_shows_the_text_around_a_secret(self):
        rows = {r["key"]: r for r in sheet_rows(self.xlsx[("sa", "sb")], "env")}
        self.assertEqual(rows["RUN_CMD"]["bench_value"], "sshpass -p <secret> ssh deploy@10.0.0.5 ./train.sh")
        self.assertEqual(rows["RUN_CMD"]["cmp_value"], "sshpass -p <secret> ssh deploy@10.0.0.5 ./train.sh")
        self.assertEqual(rows["DATABASE_URL"]["bench_value"], "<secret>")  # its name says secret: whole


def summary_env(xlsx):
    return {r["filename"]: r["pass_check"] for r in sheet_rows(xlsx, "summary")}.get("env")


if __name__ == "__main__":
    unittest.main()
