#!/usr/bin/env python3
"""render.py - README's and docs/evaluation.md's figures, rendered from the newest
headline run of each host class (bench/headline.py; bench/results/HOST-CLASS/, quick/
and history/ aside), between `<!-- results:begin -->` and `<!-- results:end -->`.

Each figure compares ccvm with what a user would otherwise pick, in the same rounds of
the same run: both means with their 95% CIs and n, and the per-round ratio (ccvm over
the peer, paired by round) with its 95% CI. The verdict follows that paired CI: "matches"
where it includes 1, "beats" or "loses to" only where it excludes 1, by whether lower or
higher is better for the figure. A part the run skipped (no /dev/kvm) or that failed is
named, never filled in.

  render.py          print the block
  render.py --write  rewrite the blocks in README.md and docs/evaluation.md
  render.py --check  exit 1 (with a diff) where a block differs from the rendering
                     (`make docs-check`, in `make test`)
RESULTS (a folder in place of bench/results) and DOCS (files in place of the two) are
for the tests."""
import difflib
import json
import os
import sys

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(TOP, "bench"))
from ci95 import mean_ci  # noqa: E402
from results_csv import read_csv  # noqa: E402
import provenance  # noqa: E402

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
MANIFEST = "headline.json"
SKIP_DIRS = ("history", "quick")


def fig(part, path, a, b, metric, better, label, unit="", scale=1.0, fmt="%.2f"):
    """A figure: in @part's @path, rows matching @a (ccvm) against rows matching @b (the
    peer), on @metric (times @scale, in @unit), where @better ("lower" or "higher")."""
    return {"part": part, "path": path, "a": a, "b": b, "metric": metric, "better": better,
            "label": label, "unit": unit, "scale": scale, "fmt": fmt}


FIGURES = [
    fig("redis-snapshots", "redis_peers.csv", {"system": "ccvm-ccow"},
        {"system": "native-bgsave"}, "p999_us", "lower",
        "Redis p99.9 during snapshots (YCSB A, open loop): ccvm's default vs native BGSAVE",
        "ms", 1e-3, "%.1f"),
    fig("redis-snapshots", "redis_peers.csv", {"system": "ccvm-ccow"},
        {"system": "native-bgsave"}, "extra_mb", "lower",
        "Redis extra memory while snapshotting: ccvm's default vs native BGSAVE", "MiB", 1,
        "%.0f"),
    fig("redis-snapshots", "redis_peers.csv", {"system": "ccvm-bgsave"},
        {"system": "native-bgsave"}, "p999_us", "lower",
        "Redis p99.9 during BGSAVE: BGSAVE inside ccvm vs native", "ms", 1e-3, "%.1f"),
    fig("redis-serving", "redis_serving.csv", {"where": "ccvm", "test": "SET"},
        {"where": "native", "test": "SET"}, "requests_per_s", "higher",
        "Redis SET, redis-benchmark -P 16: ccvm vs native", "req/s", 1, "%.0f"),
    fig("redis-serving", "redis_serving.csv", {"where": "ccvm", "test": "GET"},
        {"where": "native", "test": "GET"}, "requests_per_s", "higher",
        "Redis GET, redis-benchmark -P 16: ccvm vs native", "req/s", 1, "%.0f"),
    fig("zipf-peers", "peers.csv", {"system": "ccvm-ccow"}, {"system": "qemu-bg"}, "during",
        "higher", "zipfbench's rate during a snapshot (of its own without): ccvm vs QEMU "
        "background snapshot", "", 1, "%.2f"),
    fig("zipf-peers", "peers.csv", {"system": "ccvm-ccow"}, {"system": "qemu-bg"}, "stall_ms",
        "lower", "zipfbench's longest stall in a snapshot: ccvm vs QEMU background snapshot",
        "ms", 1, "%.0f"),
    fig("zipf-peers", "peers.csv", {"system": "ccvm-ccow"}, {"system": "qemu-bg"}, "extra_mb",
        "lower", "extra memory a snapshot takes: ccvm vs QEMU background snapshot", "MiB", 1,
        "%.0f"),
    fig("pause-restore", "snapshot_pause.csv", {"ram_mib": 1024, "policy": "cow"},
        {"ram_mib": 1024, "policy": "stop"}, "pause_us", "lower",
        "snapshot pause, 1 GiB guest: cow vs stop-and-copy (pause-and-copy VMMs)", "ms",
        1e-3, "%.1f"),
    fig("pause-restore", "snapshot_pause.csv", {"ram_mib": 4096, "policy": "cow"},
        {"ram_mib": 4096, "policy": "stop"}, "pause_us", "lower",
        "snapshot pause, 4 GiB guest: cow vs stop-and-copy", "ms", 1e-3, "%.1f"),
    fig("pause-restore", "restore_time.csv", {"ram_mib": 4096, "mode": "lazy"},
        {"ram_mib": 4096, "mode": "eager"}, "resumed_s", "lower",
        "restore until the guest runs, 4 GiB guest: lazy vs eager", "s", 1, "%.2f"),
    fig("migration", "migrate.csv", {"system": "ccvm-coverage"}, {"system": "qemu-precopy"},
        "downtime_ms", "lower", "migration downtime as the host sees it: ccvm vs QEMU "
        "pre-copy", "ms", 1, "%.0f"),
    fig("migration", "migrate.csv", {"system": "ccvm-coverage"}, {"system": "qemu-precopy"},
        "total_s", "lower", "migration total time: ccvm vs QEMU pre-copy", "s", 1, "%.2f"),
    fig("engine", "engine_sweep.csv", {"config": "ccow"}, {"config": "fork"}, "during",
        "higher", "engine, plain memory: writers' rate during a snapshot, ccow vs fork "
        "(BGSAVE's mechanism)", "", 1, "%.2f"),
    fig("engine", "engine_sweep.csv", {"config": "ccow"}, {"config": "fork"}, "max_stall_ms",
        "lower", "engine, plain memory: writers' longest stall, ccow vs fork", "ms", 1, "%.0f"),
    fig("compression", "storage_codecs.csv", {"codec": "auto", "disk": "fast"},
        {"codec": "none", "disk": "fast"}, "duration_ms_mean", "lower",
        "snapshot time of Redis' memory, this disk: auto compression vs none", "ms", 1,
        "%.0f"),
    fig("compression", "storage_codecs.csv", {"codec": "auto", "disk": "slow"},
        {"codec": "none", "disk": "slow"}, "duration_ms_mean", "lower",
        "snapshot time of Redis' memory, a disk throttled to 200 MB/s: auto vs none", "ms",
        1, "%.0f"),
    fig("compression", "storage_codecs.csv", {"codec": "auto", "disk": "fast"},
        {"codec": "none", "disk": "fast"}, "disk_per_image", "lower",
        "image size of Redis' memory: auto compression vs none", "MiB", 1 / 2**20, "%.0f"),
]


def results_root():
    return os.environ.get("RESULTS") or os.path.join(TOP, "bench", "results")


def runs():
    """(class, folder, manifest) of each class's full headline run, by class name."""
    root = results_root()
    out = []
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        d = os.path.join(root, name)
        try:
            with open(os.path.join(d, MANIFEST)) as f:
                m = json.load(f)
        except (OSError, ValueError):
            continue
        if name not in SKIP_DIRS and not m.get("quick"):
            out.append((name, d, m))
    return out


def matches(row, want):
    for k, v in want.items():
        got = row.get(k)
        if isinstance(v, (int, float)):
            if not isinstance(got, (int, float)) or abs(got - v) > 1e-9:
                return False
        elif str(got) != v:
            return False
    return True


def per_round(rows, want, metric, scale):
    """{round: the mean of @metric over the rows of that round matching @want}."""
    acc = {}
    for r in rows:
        if matches(r, want) and isinstance(r.get(metric), (int, float)) and \
                isinstance(r.get("round"), (int, float)):
            acc.setdefault(int(r["round"]), []).append(r[metric] * scale)
    return {k: sum(v) / len(v) for k, v in acc.items()}


def verdict(m, ci, better):
    """"matches" where the paired CI of the ratio includes 1; else beats or loses to."""
    if ci != ci or m != m:
        return "n/a (too few rounds)"
    if m - ci <= 1 <= m + ci:
        return "matches"
    return "beats" if (m < 1) == (better == "lower") else "loses to"


def cell(fmt, n, m, ci, unit):
    if not n:
        return "-"
    text = fmt % m + ("" if ci != ci else " ± " + fmt % ci)
    return f"{text}{' ' + unit if unit else ''} (n {n})"


def figure_row(f, folder):
    """The table row of figure @f from a run's @folder, or None when its file is absent."""
    path = os.path.join(folder, f["part"], f["path"])
    if not os.path.exists(path):
        return None
    _, rows = read_csv(path, text=("system", "where", "test", "policy", "mode", "config",
                                   "codec", "disk", "dataset", "workload", "order"))
    a = per_round(rows, f["a"], f["metric"], f["scale"])
    b = per_round(rows, f["b"], f["metric"], f["scale"])
    na, ma, ca = mean_ci(list(a.values()))
    nb, mb, cb = mean_ci(list(b.values()))
    ratios = [a[k] / b[k] for k in sorted(a) if k in b and b[k]]
    nr, mr, cr = mean_ci(ratios)
    ratio = "-" if not nr else ("%.3g" % mr + ("" if cr != cr else " ± %.2g" % cr))
    return (f"| {f['label']} | {cell(f['fmt'], na, ma, ca, f['unit'])} | "
            f"{cell(f['fmt'], nb, mb, cb, f['unit'])} | {ratio} | "
            f"{verdict(mr, cr, f['better']) if nr else '-'} |")


def host_block(name, folder, m, detail):
    prov = m.get("provenance", "")
    lines = [f"### {name}", "",
             f"{provenance.field(prov, 'cpu')}, {provenance.field(prov, 'cores')} "
             f"cores, kernel {provenance.field(prov, 'kernel')}, hypervisor "
             f"{provenance.field(prov, 'hypervisor')}: "
             f"`make bench-headline` at {m.get('commit', '?')}, {m.get('date', '?')}, "
             f"{m.get('rounds', '?')} rounds per part, shuffled, {m.get('minutes', '?')} min. "
             f"Files: `bench/results/{name}/`.", "",
             "| figure | ccvm | compared with | ccvm / it, per round | verdict |",
             "|---|---|---|---|---|"]
    status = {e["name"]: e for e in m.get("parts", [])}
    missing = []
    for f in FIGURES:
        e = status.get(f["part"])
        if not e or e.get("status") != "ok":
            why = "not run" if not e else e["status"] + (
                " (no /dev/kvm)" if e["status"] == "skipped" else "")
            missing.append(f"{f['part']}: {why}")
            continue
        row = figure_row(f, folder)
        if row is None:
            missing.append(f"{f['part']}: no {f['path']}")
        else:
            lines.append(row)
    for x in dict.fromkeys(missing):
        lines.append(f"| {x} | - | - | - | not measured |")
    if detail:
        # The run's own parts only: quick/ and other experiments share the folder.
        parts = [e["name"] for e in m.get("parts", []) if e.get("status") == "ok"]
        plots = sorted(os.path.relpath(os.path.join(d, n), folder)
                       for p in parts for d, _, files in os.walk(os.path.join(folder, p))
                       for n in files if n.endswith(".png"))
        if plots:
            lines += ["", "Plots: " + ", ".join(
                f"[{p}](../bench/results/{name}/{p})" for p in plots) + "."]
    return lines


def render(detail):
    found = runs()
    lines = [BEGIN, "<!-- generated by bench/render.py from the newest headline run of each "
             "host class; edit nothing here: rerun `make bench-headline`, then "
             "`bench/render.py --write` -->", ""]
    if not found:
        lines += ["No headline run is committed yet for any host class: `make bench-headline` "
                  "makes one. The figures elsewhere on this page are history "
                  "(`bench/results/history/`).", ""]
    for name, folder, m in found:
        lines += host_block(name, folder, m, detail) + [""]
    lines += ["Ratios are ccvm over the peer, per round of the same run (mean ± 95% CI); "
              "*matches* where that interval includes 1, *beats* or *loses to* only where it "
              "excludes 1.", END]
    return "\n".join(lines)


def docs():
    env = os.environ.get("DOCS")
    if env:
        return env.split()
    return [os.path.join(TOP, "README.md"), os.path.join(TOP, "docs", "evaluation.md")]


def spliced(path):
    """(current text, the text with its block rendered), or None without markers."""
    with open(path) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        return None
    i, j = text.index(BEGIN), text.index(END) + len(END)
    return text, text[:i] + render(detail=path.endswith("evaluation.md")) + text[j:]


def main(argv):
    if not argv:
        print(render(detail=False))
        return 0
    if argv not in (["--write"], ["--check"]):
        print("usage: render.py [--write | --check]", file=sys.stderr)
        return 2
    bad = 0
    for path in docs():
        got = spliced(path)
        if got is None:
            print(f"render: {path}: no {BEGIN} ... {END} block", file=sys.stderr)
            bad += 1
            continue
        old, new = got
        if argv == ["--write"] and old != new:
            with open(path, "w") as f:
                f.write(new)
            print(f"render: {os.path.relpath(path, TOP)} rewritten", file=sys.stderr)
        elif argv == ["--check"] and old != new:
            bad += 1
            sys.stderr.writelines(difflib.unified_diff(
                old.splitlines(True), new.splitlines(True), path, path + " (rendered)"))
            print(f"render: {os.path.relpath(path, TOP)}: its figures differ from the results; "
                  "run bench/render.py --write", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
