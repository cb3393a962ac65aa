"""test_provenance.py - bench/provenance.py's line and its check: a results file with
every field passes, one without any one field fails and is named, history/ is not
read, and the host class has the form the results folders use. Run by `make
results-check` (in `make test`)."""
import io
import json
import os
import re
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import provenance  # noqa: E402


def quiet(fn, *args):
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()) as err:
        rc = fn(*args)
    return rc, err.getvalue()


class Provenance(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.line = provenance.line(5, "size 1024M", "ROUNDS=5 bench/migrate.py")

    def tearDown(self):
        self.tmp.cleanup()

    def put(self, name, text):
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_line_has_every_field(self):
        self.assertEqual(provenance.missing(self.put("a.csv", f"# {self.line}\nx\n1\n")), [])
        self.assertTrue(self.line.endswith("; command: ROUNDS=5 bench/migrate.py"))
        self.assertIn("; rounds 5; size 1024M;", self.line)

    def test_each_field_missing_is_named(self):
        for field, rx in provenance.FIELDS.items():
            cut = re.sub(rx, "" if field == "command" else ";", self.line, count=1)
            path = self.put(f"cut_{field}.csv", f"# {cut}\nx\n")
            self.assertIn(field, provenance.missing(path), cut)

    def test_formats(self):
        md = self.put("a.md", f"Migration (bench/migrate.py): {self.line}\n\n| a |\n")
        js = self.put("a.json", json.dumps({"provenance": self.line, "rows": []}))
        jl = self.put("a.jsonl", f"# {self.line}\n{{}}\n")
        bare = self.put("b.json", json.dumps({"rows": []}))
        for p in (md, js, jl):
            self.assertEqual(provenance.missing(p), [], p)
        self.assertEqual(len(provenance.missing(bare)), len(provenance.FIELDS))

    def test_check_fails_a_bad_file_and_skips_history(self):
        self.put("host/good.csv", f"# {self.line}\nx\n")
        self.put("history/old.csv", "# commit abcdef0; machine m\nx\n")
        self.put("host/plot.png", "not text")
        self.assertEqual(quiet(provenance.check, [self.dir])[0], 0)
        self.put("host/old.csv", "# commit abcdef0; machine m\nx\n")
        rc, err = quiet(provenance.check, [self.dir])
        self.assertEqual(rc, 1)
        self.assertIn("old.csv", err)
        self.assertIn("hypervisor", err)

    def test_dirty_and_unknown_commits(self):
        self.assertEqual(provenance.missing(self.put("d.csv", "# " + self.line.replace(
            "commit ", "commit 0123abc+dirty; was ", 1) + "\n")), [])
        self.assertIn("commit", provenance.missing(self.put("u.csv", "# " + re.sub(
            r"^commit \S+;", "commit unknown;", self.line) + "\n")))

    def test_host_class(self):
        self.assertRegex(provenance.host_class(), r"^[a-z]+-[a-z]+-(kvm_pvm|vm|bare)$")

    def test_cli_line(self):
        rc = quiet(provenance.main, ["line", "3", "detail", "--", "bench/run.sh", "x"])[0]
        self.assertEqual(rc, 0)
        self.assertEqual(quiet(provenance.main, ["line", "x", "--", "a"])[0], 2)
        self.assertEqual(quiet(provenance.main, ["nonsense"])[0], 2)


if __name__ == "__main__":
    unittest.main()
