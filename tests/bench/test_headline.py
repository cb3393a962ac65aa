"""test_headline.py - bench/headline.py without running a benchmark: the previous run of
a host class moves to history/ (a second of the same commit and day beside it), unknown
parts are refused, and without /dev/kvm the VM parts are skipped and named in the
manifest while the plain-memory ones run. Run by `make docs-check` (in `make test`)."""
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import headline  # noqa: E402
import provenance  # noqa: E402


class Headline(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.patch = mock.patch.object(provenance, "RESULTS", self.tmp.name)
        self.patch.start()
        self.host = provenance.host_dir()

    def tearDown(self):
        self.patch.stop()
        self.tmp.cleanup()

    def previous_run(self):
        os.makedirs(self.host, exist_ok=True)
        with open(os.path.join(self.host, headline.MANIFEST), "w") as f:
            json.dump({"commit": "abc1234", "date": "2026-12-01T00:00:00Z"}, f)
        os.makedirs(os.path.join(self.host, "engine"), exist_ok=True)
        open(os.path.join(self.host, "engine", "engine_sweep.csv"), "w").close()

    def test_archive(self):
        self.previous_run()
        os.makedirs(os.path.join(self.host, "quick"))
        moved = headline.archive(self.host, False)
        self.assertTrue(moved.endswith(f"history/{provenance.host_class()}/abc1234-2026-12-01"))
        self.assertEqual(os.listdir(self.host), ["quick"])
        self.assertTrue(os.path.exists(os.path.join(self.tmp.name, "history",
                                                    provenance.host_class(),
                                                    "abc1234-2026-12-01", "engine")))
        self.previous_run()
        again = headline.archive(self.host, False)
        self.assertNotEqual(again, moved)
        self.assertIn("abc1234-2026-12-01-", again)
        self.assertIsNone(headline.archive(self.host, False))

    def test_unknown_part(self):
        with self.assertRaises(SystemExit):
            headline.pick(["engine", "nonsense"])
        self.assertEqual([p["name"] for p in headline.pick(["migration"])], ["migration"])

    def test_no_kvm_skips_vm_parts(self):
        ran = []

        def fake(p, quick, out, log_dir):
            ran.append(p["name"])
            return {"name": p["name"], "what": p["what"], "vm": p["vm"], "status": "ok",
                    "seconds": 0, "command": "x"}

        env = {"PARTS": "engine migration", "LOGDIR": self.tmp.name}
        with mock.patch.object(headline, "have_kvm", return_value=False), \
                mock.patch.object(headline, "run_part", side_effect=fake), \
                mock.patch.dict(os.environ, env), \
                mock.patch.object(headline, "render_docs"), \
                redirect_stderr(io.StringIO()) as err:
            self.assertEqual(headline.main(), 0)
        self.assertEqual(ran, ["engine"])
        with open(os.path.join(self.host, headline.MANIFEST)) as f:
            m = json.load(f)
        status = {e["name"]: e["status"] for e in m["parts"]}
        self.assertEqual(status, {"engine": "ok", "migration": "skipped"})
        self.assertIn("VM figures skipped (no /dev/kvm): migration", err.getvalue())
        self.assertEqual(provenance.missing(os.path.join(self.host, "headline.md")), [])


if __name__ == "__main__":
    unittest.main()
