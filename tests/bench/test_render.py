"""test_render.py - bench/render.py on a results folder made here: a ratio whose paired
CI includes 1 "matches", one that excludes it "beats" or "loses to" by which way is
better, a skipped part is named and never filled in, quick/ and history/ are not
rendered, the plots listed are the run's parts' only, and --check fails once a CSV row
changes until --write renders again. Run by `make docs-check` (in `make test`)."""
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import provenance  # noqa: E402
import render  # noqa: E402

LINE = provenance.line(5, "test", "bench/headline.py")


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def peers_csv(a, b):
    """peers.csv with ccvm-ccow's and qemu-bg's 'during' per round (a[i], b[i])."""
    rows = [f"{i + 1},zipf-a0.99,{s},{v},10,5" for i in range(len(a))
            for s, v in (("ccvm-ccow", a[i]), ("qemu-bg", b[i]))]
    return f"# {LINE}\nround,workload,system,during,stall_ms,extra_mb\n" + "\n".join(rows) + "\n"


class Render(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = os.path.join(self.tmp.name, "results")
        self.host = os.path.join(self.root, "amd-epyc-kvm_pvm")
        self.doc = os.path.join(self.tmp.name, "doc.md")
        os.environ["RESULTS"] = self.root
        os.environ["DOCS"] = self.doc
        write(self.doc, f"intro\n\n{render.BEGIN}\nold\n{render.END}\n\nrest\n")
        parts = [{"name": "zipf-peers", "status": "ok"},
                 {"name": "migration", "status": "skipped", "why": "no /dev/kvm"}]
        write(os.path.join(self.host, render.MANIFEST), json.dumps(
            {"provenance": LINE, "commit": "abc1234", "date": "2026-12-06T00:00:00Z",
             "quick": False, "rounds": 5, "minutes": 50, "parts": parts}))

    def tearDown(self):
        os.environ.pop("RESULTS", None)
        os.environ.pop("DOCS", None)
        self.tmp.cleanup()

    def peers(self, a, b):
        write(os.path.join(self.host, "zipf-peers", "peers.csv"), peers_csv(a, b))

    def row(self, text, label):
        return next(l for l in text.splitlines() if l.startswith("| " + label))

    def test_verdicts_follow_the_paired_ci(self):
        self.peers([0.7, 0.72, 0.69, 0.71, 0.7], [0.05, 0.06, 0.05, 0.04, 0.05])
        self.assertIn("| beats |", self.row(render.render(False), "zipfbench's rate"))
        self.peers([0.5, 0.9, 0.4, 1.2, 0.7], [0.7, 0.7, 0.6, 0.8, 0.75])
        self.assertIn("| matches |", self.row(render.render(False), "zipfbench's rate"))
        self.peers([0.04, 0.05, 0.04, 0.05, 0.04], [0.7, 0.72, 0.69, 0.71, 0.7])
        self.assertIn("| loses to |", self.row(render.render(False), "zipfbench's rate"))
        self.assertEqual(render.verdict(0.61, 0.40, "lower"), "matches")
        self.assertEqual(render.verdict(0.5, 0.1, "lower"), "beats")
        self.assertEqual(render.verdict(0.5, 0.1, "higher"), "loses to")

    def test_skipped_parts_named_quick_and_history_left_out(self):
        self.peers([0.7] * 5, [0.05] * 5)
        for skip in ("quick", "history"):
            write(os.path.join(self.root, skip, render.MANIFEST),
                  json.dumps({"quick": skip == "quick", "parts": []}))
        text = render.render(False)
        self.assertIn("| migration: skipped (no /dev/kvm) | - | - | - | not measured |", text)
        self.assertEqual(text.count("make bench-headline` at"), 1)
        self.assertIn("(n 5)", text)

    def test_plots_are_the_runs_own(self):
        self.peers([0.7] * 5, [0.05] * 5)
        for d in ("zipf-peers", "quick/zipf-peers", "redis-load-10000"):
            write(os.path.join(self.host, d, "p.png"), "")
        text = render.render(True)
        self.assertIn("[zipf-peers/p.png](../bench/results/amd-epyc-kvm_pvm/zipf-peers/p.png)", text)
        self.assertNotIn("quick/", text)
        self.assertNotIn("redis-load-10000", text)
        self.assertIn("### amd-epyc-kvm_pvm", text)

    def test_check_fails_on_a_changed_row_until_written(self):
        self.peers([0.7, 0.72, 0.69, 0.71, 0.7], [0.05, 0.06, 0.05, 0.04, 0.05])
        with redirect_stderr(io.StringIO()):
            self.assertEqual(render.main(["--check"]), 1)
            self.assertEqual(render.main(["--write"]), 0)
            self.assertEqual(render.main(["--check"]), 0)
            self.peers([0.7, 0.72, 0.69, 0.71, 0.9], [0.05, 0.06, 0.05, 0.04, 0.05])
            self.assertEqual(render.main(["--check"]), 1)
        with open(self.doc) as f:
            text = f.read()
        self.assertTrue(text.startswith("intro\n\n") and text.endswith("\n\nrest\n"))

    def test_no_markers_is_an_error(self):
        write(self.doc, "no block\n")
        with redirect_stderr(io.StringIO()):
            self.assertEqual(render.main(["--check"]), 1)
            self.assertEqual(render.main(["--bogus"]), 2)


if __name__ == "__main__":
    unittest.main()
