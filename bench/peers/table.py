#!/usr/bin/env python3
"""table.py - the one comparison table: every system on every workload, from the peers'
summaries (peers_summary.csv from peers.py, redis_peers_summary.csv from redis.py).

Per workload and system: throughput during snapshots relative to the same system
without them, work lost per snapshot (seconds of normal throughput), longest stall,
ops-weighted p99 and p99.9 during snapshots (Redis; zipfbench has no requests), extra
memory (PSS), snapshot duration and image size, each as mean ± 95% CI; "-" where a
figure does not apply or was not measured. Writes OUT/comparison.md (default this host's
bench/results/HOST-CLASS) under a provenance line of its own (its rounds: the fewest of
its sources'), with the first line of each source, so commit and machine stay with the
figures. Summaries that do not exist yet are listed as missing.
"""
import csv
import math
import os
import re
import sys

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(TOP, "bench"))
import provenance  # noqa: E402
SOURCES = [("peers_summary.csv", "bench/peers/peers.py (zipfbench, --scatter)"),
           ("redis_peers_summary.csv", "bench/peers/redis.py (Redis, YCSB, open loop)")]
# column title, summary field, scale, format
COLUMNS = [("during", "during", 1, "%.2f"), ("lost s", "lost_s", 1, "%.2f"),
           ("stall ms", "stall_ms", 1, "%.0f"), ("p99 ms", "p99_us", 1e-3, "%.1f"),
           ("p99.9 ms", "p999_us", 1e-3, "%.1f"), ("extra MiB", "extra_mb", 1, "%.0f"),
           ("duration s", "duration_s", 1, "%.2f"), ("image MiB", "image_mb", 1, "%.0f")]
NO_SNAPSHOTS = ("native", "ccvm-none", "qemu-none")


def cell(row, field, scale, fmt, snapshots):
    m, c = row.get(field + "_mean"), row.get(field + "_ci95")
    if m in (None, "") or (not snapshots and field != "stall_ms"):
        return "-"
    m = float(m) * scale
    c = float(c) * scale if c not in (None, "") else float("nan")
    return fmt % m + ("" if math.isnan(c) else " ± " + fmt % c)


def main():
    out = os.environ.get("OUT") or provenance.host_dir()
    lines = ["# Snapshots side by side: every system, every workload", ""]
    rows, missing, rounds = [], [], []
    for name, what in SOURCES:
        path = os.path.join(out, name)
        try:
            text = open(path).read().splitlines()
        except OSError:
            missing.append(f"{name} ({what})")
            continue
        lines.append(f"- {what}: {text[0].lstrip('# ')}")
        rounds += [int(n) for n in re.findall(r"; rounds (\d+)", text[0])[:1]]
        rows += list(csv.DictReader(l for l in text if not l.startswith("#")))
    for m in missing:
        lines.append(f"- not measured yet: {m}")
    lines += ["", "Mean ± 95% CI over the rounds; *during* relative to the same system "
              "without snapshots, *lost*: seconds of its normal throughput lost per snapshot; "
              "latency from intended start, weighted by operations, over the seconds a "
              "snapshot ran.", "",
              "| workload | system | n | " + " | ".join(c[0] for c in COLUMNS) + " |",
              "|---|---|---|" + "---|" * len(COLUMNS)]
    for r in rows:
        snap = r["system"] not in NO_SNAPSHOTS
        lines.append(f"| {r['workload']} | {r['system']} | {r['n']} | " +
                     " | ".join(cell(r, f, s, fmt, snap) for _, f, s, fmt in COLUMNS) + " |")
    head = provenance.line(min(rounds) if rounds else 0, "a table of the sources below")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "comparison.md"), "w") as f:
        f.write("\n".join([head, ""] + lines) + "\n")
    print(f"table: {len(rows)} rows in {os.path.join(out, 'comparison.md')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
