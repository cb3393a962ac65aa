#!/usr/bin/env python3
"""latency-sweep.py - what a snapshot costs a writer's latency, on plain memory, with a
model of our VM hosts' dearer traps: the plain-memory proxy of Redis under snapshots.

bench/engine-bench with --latency RATE runs its writers open loop (each update timed from
its intended start, as bench/ycsb times requests) and --trap-cost-us N adds N us to
every write-protect fault (56 us on plain memory plus 50 is about a trapped write in a
VM on our KVM hosts, 75-150 us). Each configuration below runs once per round, in an
order shuffled per round (the seed is recorded), ROUNDS rounds (default 5). Per run:
the p99, p99.9 and max latency of updates that started while a snapshot ran, the
longest pause, the write faults per snapshot, the pages copied in pauses and the most
extra memory a snapshot took (extra_bytes_peak). Writes (OUT, default
bench/results/HOST-CLASS) latency_sweep.csv
(a row per run), latency_sweep.md (mean and 95% CI over the rounds) and
latency_sweep.png; each records the commit and the machine.

Environment: ROUNDS, MEM (256M), RATE (updates/s, 20000), TRAP_US (50), DURATION (15),
GAP (1: seconds from one snapshot's end to the next one's start), CONFIGS (names from
the table below, space separated; default all), SEED (the shuffle's), OUT, IMGDIR.
"""
import csv
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ci95 import mean_ci  # noqa: E402
import provenance  # noqa: E402

EB = os.path.join(provenance.TOP, "bench", "engine-bench")
# name: engine-bench options beyond the common ones.
CONFIGS = {
    "cow": ["--policy", "cow"],
    "ccow-lazy": ["--policy", "ccow", "--precopy", "lazy"],
    "ccow-eager-5": ["--policy", "ccow", "--precopy", "eager", "--pause-budget-ms", "5"],
    "ccow-eager-10": ["--policy", "ccow", "--precopy", "eager", "--pause-budget-ms", "10"],
    "ccow-eager-20": ["--policy", "ccow", "--precopy", "eager", "--pause-budget-ms", "20"],
    "ccow-eager-10-idle": ["--policy", "ccow", "--precopy", "eager", "--pause-budget-ms", "10",
                           "--background-idle", "1"],
    "ccow-rounds-10": ["--policy", "ccow", "--precopy", "rounds", "--pause-budget-ms", "10"],
    "ccow-auto-10": ["--policy", "ccow", "--precopy", "auto", "--pause-budget-ms", "10"],
    "stop": ["--policy", "stop"],
}
METRICS = ["p99_ms", "p999_ms", "max_ms", "pause_ms_max", "faults_per_snapshot",
           "eager_per_snapshot", "extra_mib", "during"]


def env(name, default):
    return os.environ.get(name) or default


def one(name, cfg, imgdir):
    args = [EB, "--mem", cfg["mem"], "--threads", "2", "--alpha", "0.99", "--scatter",
            "--snapshot-gap", cfg["gap"], "--duration", cfg["duration"], "--dir", imgdir,
            "--latency", cfg["rate"], "--trap-cost-us", cfg["trap"]] + CONFIGS[name]
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise RuntimeError(f"{name}: engine-bench failed: {r.stderr.strip()[-300:]}")
    d = json.loads(r.stdout.strip().splitlines()[-1])
    lat, n = d["latency"]["during"], max(d["snapshots"], 1)
    return {"p99_ms": lat["p99_us"] / 1e3, "p999_ms": lat["p999_us"] / 1e3,
            "max_ms": lat["max_us"] / 1e3, "pause_ms_max": d["pause_us_max"] / 1e3,
            "faults_per_snapshot": d["traps"] / n, "eager_per_snapshot": d["pages_eager"] / n,
            "extra_mib": d["extra_bytes_peak_max"] / 2**20, "during": d["during"] or 0.0}


def summarize(rows, names):
    out = []
    for name in names:
        mine = [r for r in rows if r["config"] == name]
        out.append({"config": name, "n": len(mine),
                    **{m: mean_ci([r[m] for r in mine])[1:] for m in METRICS}})
    return out


def fmt(pair, digits=1):
    m, c = pair
    if math.isnan(m):
        return "-"
    return f"{m:.{digits}f}" if math.isnan(c) else f"{m:.{digits}f} ± {c:.{digits}f}"


def write(out, header, rows, summary, cfg):
    with open(os.path.join(out, "latency_sweep.csv"), "w", newline="") as f:
        f.write(f"# {header}\n")
        w = csv.DictWriter(f, fieldnames=["round", "config"] + METRICS)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in r.items()})
    with open(os.path.join(out, "latency_sweep.md"), "w") as f:
        f.write("Writer latency under snapshots on plain memory (bench/latency-sweep.py): "
                f"{header}\n\n")
        f.write(f"engine-bench, {cfg['mem']} written by 2 threads open loop at {cfg['rate']} "
                f"updates/s (Zipf 0.99, scattered), every write fault {cfg['trap']} us dearer, "
                f"snapshots {cfg['gap']} s apart, {cfg['duration']} s a run. Mean ± 95% CI over "
                "the rounds; latency of the updates that started while a snapshot ran, from "
                "their intended start.\n\n")
        f.write("| config | n | p99 ms | p99.9 ms | max ms | longest pause ms | faults/snapshot "
                "| pages copied in the pause/snapshot | extra MiB | during |\n")
        f.write("|---|---|---|---|---|---|---|---|---|---|\n")
        for s in summary:
            f.write(f"| {s['config']} | {s['n']} | {fmt(s['p99_ms'])} | {fmt(s['p999_ms'])} | "
                    f"{fmt(s['max_ms'])} | {fmt(s['pause_ms_max'])} | "
                    f"{fmt(s['faults_per_snapshot'], 0)} | {fmt(s['eager_per_snapshot'], 0)} | "
                    f"{fmt(s['extra_mib'], 0)} | {fmt(s['during'], 2)} |\n")
    dat = os.path.join(out, "latency_sweep.dat")
    with open(dat, "w") as f:
        for i, s in enumerate(summary):
            m, c = s["p999_ms"]
            f.write(f"{i} {s['config']} {m:g} {0 if math.isnan(c) else c:g}\n")
    script = f"""set terminal pngcairo size 900,420 font ",9"
set output "{out}/latency_sweep.png"
set title "Writer p99.9 in snapshots, traps +{cfg['trap']} us (mean, 95% CI)\\n{header[:100]}"
set style fill solid 0.5
set boxwidth 0.6
set xtics rotate by -30
set logscale y
set ylabel "p99.9 (ms, from intended start)"
plot "{dat}" using 1:3:4:xtic(2) with boxerrorbars notitle
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=False)
    os.unlink(dat)


def main():
    cfg = {"mem": env("MEM", "256M"), "rate": env("RATE", "20000"), "trap": env("TRAP_US", "50"),
           "duration": env("DURATION", "15"), "gap": env("GAP", "1")}
    rounds = int(env("ROUNDS", "5"))
    names = env("CONFIGS", " ".join(CONFIGS)).split()
    bad = [n for n in names if n not in CONFIGS]
    if bad or rounds < 1:
        print(f"latency-sweep: unknown CONFIGS {bad} (known: {' '.join(CONFIGS)}) or ROUNDS < 1",
              file=sys.stderr)
        return 2
    if not os.access(EB, os.X_OK):
        print("latency-sweep: build bench/engine-bench first (make)", file=sys.stderr)
        return 1
    seed = int(env("SEED", str(random.SystemRandom().randrange(1 << 30))))
    rng = random.Random(seed)
    out = env("OUT", "") or provenance.host_dir()
    os.makedirs(out, exist_ok=True)
    imgdir = tempfile.mkdtemp(prefix="ccvm-latency.", dir=os.environ.get("IMGDIR") or "/var/tmp")
    header = provenance.line(rounds, f"shuffle seed {seed}")
    rows = []
    try:
        for rnd in range(1, rounds + 1):
            order = names[:]
            rng.shuffle(order)
            for name in order:
                print(f"latency-sweep: round {rnd}, {name}", flush=True)
                rows.append({"round": rnd, "config": name, **one(name, cfg, imgdir)})
    finally:
        shutil.rmtree(imgdir, ignore_errors=True)
    write(out, header, rows, summarize(rows, names), cfg)
    print(f"latency-sweep: {len(rows)} runs; results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
