#!/usr/bin/env python3
"""threshold-sweep.py - ccow's threshold measured against what the measured costs predict.

The CCoW paper's argument, rechecked with the costs measured here (bench/costs.sh): a
region of P pages of which a share c is written during a snapshot costs c x P traps
under copy-on-write, or one copy of the whole region under ccow. So a snapshot costs
the writers, for a threshold t,

    predicted(t) = sum over regions r:  copy_us                  if c_r >= t
                                        s(c_r) x P x trap_us     otherwise

divided by the writer threads (traps stall one writer each; this is writer time in
units of the whole load's time). c_r is the region's coverage over the snapshot's
duration as the engine's tracker learnt it from the run's own snapshots (bench/
engine-bench --region-coverage) and decides hot regions by; s(c) is the share of a cold
region's pages written before the writer saved them (trapped_share). Copying pays off
where s(c) x P x trap_us > copy_us: s above copy_us / (P x trap_us), the break-even. A
run's first snapshot knows no coverage yet and copies no region (threshold 0 aside);
the prediction averages that in (predict_run). The model counts traps and region copies
only: not the pause, nor the CPU that the image writer and the fault thread take from
the writers.

Measured: bench/engine-bench (the real engine, userfaultfd and image files; host threads
write plain memory as zipfbench does, no VM needed) under cow and ccow at every
threshold, and without snapshots, ROUNDS rounds (default 5) shuffled per round, for two
layouts: zipfbench --scatter (hot blocks spread: every region about equally covered)
and packed (rank r at block r: hot regions together). Per run: lost_ms, the work lost
per snapshot against the same round's run without snapshots, in milliseconds of the
whole load's normal rate, and the traps per snapshot, each beside its prediction.

Writes (OUT, default bench/results/HOST-CLASS) threshold_sweep.csv (a row per run),
threshold_sweep.md (means and
95% CIs) and threshold_sweep.png, with commit and machine. Needs bench/results/HOST-CLASS/costs.csv
(`make bench-costs`). Environment: ROUNDS, MEM (256M), THREADS (2), ALPHA (0.99), GAP (1),
DURATION (8), THRESHOLDS, LAYOUTS ("scatter packed"), OUT, IMGDIR.
"""
import csv
import json
import math
import os
import random
import subprocess
import sys
import tempfile

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(TOP, "bench"))
from ci95 import mean_ci  # noqa: E402
import provenance  # noqa: E402

EB = os.path.join(TOP, "bench", "engine-bench")
PAGES_PER_REGION = 512           # 2 MiB regions of 4 KiB pages, engine-bench's
DEFAULT_THRESHOLDS = "0 0.01 0.02 0.05 0.1 0.2 0.4 0.6 0.8 0.95 1"


class Failed(Exception):
    pass


def costs(path):
    """Mean trap and region-copy costs (us) over the rounds of costs.csv."""
    try:
        rows = list(csv.DictReader(l for l in open(path) if not l.startswith("#")))
    except OSError:
        raise Failed(f"{path} is missing: run `make bench-costs` first")
    if not rows:
        raise Failed(f"{path} has no rounds")
    trap = sum(float(r["trap_us"]) for r in rows) / len(rows)
    copy = sum(float(r["region_us"]) for r in rows) / len(rows)
    commit = open(path).readline().strip("# \n")
    return trap, copy, commit


def trapped_share(c):
    """Of a cold region's pages, the share written before the writer saved them.

    With coverage c over the snapshot's duration D, each page is written as a Poisson
    process of mean x = -ln(1 - c) over D, and is saved at a time uniform in [0, D]:
    it traps if written before then, with probability 1 - (1 - e^-x) / x (about c / 2
    for small c)."""
    if c >= 1.0:
        return 1.0
    if c <= 0.0:
        return 0.0
    x = -math.log1p(-c)
    return 1.0 - c / x


def predict(cov, t, trap_us, copy_us, threads):
    """Writer time (ms of the whole load) and traps one snapshot costs at threshold t
    (None: cow, every region cold)."""
    us, traps = 0.0, 0.0
    for c in cov:
        if t is not None and c >= t:
            us += copy_us
        else:
            n = trapped_share(c) * PAGES_PER_REGION
            us += n * trap_us
            traps += n
    return us / threads / 1000, traps


def predict_run(cov, t, n, trap_us, copy_us, threads):
    """predict() averaged over a run's n snapshots: the first one knows no coverage yet
    and finds every region cold (unless t is 0, every region hot by definition)."""
    ms, traps = predict(cov, t, trap_us, copy_us, threads)
    if t is None or t <= 0 or n < 1:
        return ms, traps
    cold_ms, cold_traps = predict(cov, None, trap_us, copy_us, threads)
    return (cold_ms + (n - 1) * ms) / n, (cold_traps + (n - 1) * traps) / n


def run_eb(cfg, policy, threshold, scatter, imgdir):
    args = [EB, "--mem", cfg["mem"], "--threads", str(cfg["threads"]), "--alpha",
            str(cfg["alpha"]), "--policy", policy, "--snapshot-gap", str(cfg["gap"]),
            "--duration", str(cfg["duration"]), "--dir", imgdir, "--json", "--region-coverage"]
    if threshold is not None:
        args += ["--threshold", str(threshold)]
    if scatter:
        args.append("--scatter")
    r = subprocess.run(args, capture_output=True, text=True, timeout=cfg["duration"] + 600)
    if r.returncode:
        raise Failed(f"engine-bench {' '.join(args[1:])}: {r.stderr.strip()[-300:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def machine(trap, copy, costs_from, cfg):
    return provenance.line(cfg["rounds"], f"mem {cfg['mem']} threads {cfg['threads']} alpha "
                           f"{cfg['alpha']} gap {cfg['gap']}s duration {cfg['duration']}s; "
                           f"costs trap {trap:.1f} us, region copy {copy:.0f} us "
                           f"({costs_from})")


def settings():
    e = os.environ
    try:
        cfg = {"rounds": int(e.get("ROUNDS", 5)), "mem": e.get("MEM", "256M"),
               "threads": int(e.get("THREADS", 2)), "alpha": float(e.get("ALPHA", 0.99)),
               "gap": float(e.get("GAP", 1)), "duration": float(e.get("DURATION", 8)),
               "thresholds": [float(x) for x in e.get("THRESHOLDS", DEFAULT_THRESHOLDS).split()],
               "layouts": e.get("LAYOUTS", "scatter packed").split()}
    except ValueError as err:
        raise Failed(f"bad number in the environment: {err}")
    if [x for x in cfg["layouts"] if x not in ("scatter", "packed")]:
        raise Failed("LAYOUTS: scatter, packed or both")
    if [t for t in cfg["thresholds"] if not 0 <= t <= 1] or cfg["rounds"] < 1:
        raise Failed("THRESHOLDS from 0 to 1, ROUNDS at least 1")
    return cfg


def sweep(cfg, trap, copy, imgdir):
    rows = []
    for rnd in range(1, cfg["rounds"] + 1):
        for layout in cfg["layouts"]:
            configs = [("none", None), ("cow", None)] + [("ccow", t) for t in cfg["thresholds"]]
            random.Random(f"{rnd}-{layout}").shuffle(configs)
            got = {}
            for k, (policy, t) in enumerate(configs):
                print(f"threshold-sweep: round {rnd}, {layout}, {policy} {'' if t is None else t}"
                      f" ({k + 1}/{len(configs)})", file=sys.stderr)
                got[(policy, t)] = run_eb(cfg, policy, t, layout == "scatter", imgdir)
            base = got[("none", None)]["updates_per_s"]
            for (policy, t), d in got.items():
                if policy == "none":
                    continue
                n = d["snapshots"]
                lost = (d["seconds"] - d["updates_per_s"] * d["seconds"] / base) / n if n else 0
                pred_ms, pred_traps = predict_run(d.get("region_coverage", []), t, n, trap,
                                                  copy, cfg["threads"])
                rows.append({"round": rnd, "layout": layout, "policy": policy,
                             "threshold": "" if t is None else t, "snapshots": n,
                             "lost_ms": 1000 * lost, "predicted_ms": pred_ms,
                             "traps": d["traps"] / n if n else 0, "predicted_traps": pred_traps,
                             "regions_hot": d["regions_hot"] / n if n else 0,
                             "during": d["during"] if d["during"] is not None else float("nan"),
                             "duration_ms": d["duration_ms_mean"] or 0})
    return rows


METRICS = ["lost_ms", "predicted_ms", "traps", "predicted_traps", "regions_hot", "during",
           "duration_ms"]


def write(out, header, rows, breakeven):
    cols = ["round", "layout", "policy", "threshold", "snapshots"] + METRICS
    with open(os.path.join(out, "threshold_sweep.csv"), "w") as f:
        f.write(f"# {header}\n" + ",".join(cols) + "\n")
        for r in rows:
            f.write(",".join(("%.6g" % r[k]) if isinstance(r[k], float) else str(r[k])
                             for k in cols) + "\n")
    keys = []
    for r in sorted(rows, key=lambda r: (r["layout"], r["policy"] != "cow",
                                         r["threshold"] if r["threshold"] != "" else -1)):
        if (r["layout"], r["policy"], r["threshold"]) not in keys:
            keys.append((r["layout"], r["policy"], r["threshold"]))
    summary = []
    for layout, policy, t in keys:
        rs = [r for r in rows if (r["layout"], r["policy"], r["threshold"]) == (layout, policy, t)]
        rec = {"layout": layout, "policy": policy, "threshold": t, "n": len(rs)}
        for k in METRICS:
            rec[k] = mean_ci([r[k] for r in rs if not math.isnan(r[k])])[1:]
        summary.append(rec)

    def pm(p, fmt):
        return fmt % p[0] + ("" if math.isnan(p[1]) else " ± " + fmt % p[1])
    with open(os.path.join(out, "threshold_sweep.md"), "w") as f:
        f.write(f"Threshold sweep (bench/threshold-sweep.py): {header}\n\nBreak-even coverage "
                f"by the costs: {breakeven:.4f}. Mean ± 95% CI over the rounds; *lost*: work "
                "lost per snapshot in ms of the whole load's rate without snapshots "
                "(same round); *predicted*: the cost model over the tracker's coverage of "
                "the same run.\n\n| layout | policy | threshold | n | lost ms | predicted ms "
                "| traps | predicted traps | hot regions | during |\n"
                "|---|---|---|---|---|---|---|---|---|---|\n")
        for s in summary:
            f.write(f"| {s['layout']} | {s['policy']} | {s['threshold']} | {s['n']} | "
                    f"{pm(s['lost_ms'], '%.1f')} | {pm(s['predicted_ms'], '%.1f')} | "
                    f"{pm(s['traps'], '%.0f')} | {pm(s['predicted_traps'], '%.0f')} | "
                    f"{pm(s['regions_hot'], '%.1f')} | {pm(s['during'], '%.2f')} |\n")
    plot(out, summary, header, breakeven)


def plot(out, summary, header, breakeven):
    dat = os.path.join(out, "threshold_sweep.dat")
    blocks = []
    for layout in ("scatter", "packed"):
        pts = [s for s in summary if s["layout"] == layout and s["policy"] == "ccow"]
        if pts:
            blocks.append(layout)
            with open(dat + "." + layout, "w") as f:
                for s in pts:
                    f.write(f"{max(float(s['threshold']), 0.001):g} {s['lost_ms'][0]:g} "
                            f"{0 if math.isnan(s['lost_ms'][1]) else s['lost_ms'][1]:g} "
                            f"{s['predicted_ms'][0]:g}\n")
    if not blocks:
        return
    plots = []
    for layout in blocks:
        plots.append(f'"{dat}.{layout}" using 1:2:3 with yerrorlines title "{layout}: measured"')
        plots.append(f'"{dat}.{layout}" using 1:4 with linespoints dt 2 title "{layout}: predicted"')
    script = f"""set terminal pngcairo size 900,480 font ",9"
set output "{out}/threshold_sweep.png"
set title "ccow threshold: work lost per snapshot, measured (mean, 95% CI) and predicted\\n{header[:120]}"
set logscale x
set xlabel "threshold (0 plotted at 0.001)"
set ylabel "ms of normal throughput lost per snapshot"
set arrow from {breakeven:g}, graph 0 to {breakeven:g}, graph 1 nohead dt 3
set label "break-even" at {breakeven:g}, graph 0.95 offset 0.5,0
set key top left
plot {", ".join(plots)}
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=False)
    for layout in blocks:
        os.unlink(dat + "." + layout)


def main():
    try:
        cfg = settings()
        out = os.environ.get("OUT") or provenance.host_dir()
        trap, copy, costs_from = costs(os.path.join(provenance.host_dir(), "costs.csv"))
        if not os.access(EB, os.X_OK):
            raise Failed("build bench/engine-bench first (make)")
        os.makedirs(out, exist_ok=True)
        header = machine(trap, copy, costs_from.split(";")[0], cfg)
        imgdir = tempfile.mkdtemp(prefix="ccvm-threshold.", dir=os.environ.get("IMGDIR") or "/var/tmp")
        try:
            rows = sweep(cfg, trap, copy, imgdir)
        finally:
            subprocess.run(["rm", "-rf", imgdir], check=False)
        write(out, header, rows, copy / (PAGES_PER_REGION * trap))
    except (Failed, subprocess.TimeoutExpired) as e:
        print(f"threshold-sweep: {e}", file=sys.stderr)
        return 1
    print(f"threshold-sweep: {len(rows)} runs; results in {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
