#!/usr/bin/env python3
"""datapath-sweep.py - the snapshot data path measured without a VM (issue 15's figures).

Three experiments on bench/engine-bench (the real engine, userfaultfd and image files;
host threads write plain memory as zipfbench does), each ROUNDS rounds (default 5) with
the configurations of a round run in a shuffled order:

  tune    cow and ccow at threshold 0 (every region hot: the background copier has
          work), writes scattered, under CONFIGS: fault thread count, real-time fault
          threads or not, copier and writer nice levels (POLICY/FAULTS/rt|-/CNICE/WNICE). Per run:
          updates/s, during (the writers' rate while a snapshot runs over their rate
          without one), the longest stall (a batch of 64 updates), p99.9 of batches,
          snapshot duration, most faults served at once, the copy pool's size. The
          defaults in snapshot/engine.h are the configuration this table favours.
  writer  the writer's rate against the disk's: a snapshot of WMEM (2 GiB) of plain
          memory that nobody writes (engine-bench --threads 0: data bytes saved over the
          snapshot's duration) beside `dd` writing 2 GiB to the same file system with
          O_DIRECT in 2 MiB blocks and one fsync, interleaved.
  pause   the pause of cow and ccow snapshots of PMEM (4 GiB) of plain memory that was
          all touched and is written by two threads: each snapshot's pause (a run takes
          PSNAPS snapshots, default 1, as a 4 GiB snapshot under writers takes ~20 s
          here); the median and max over all snapshots of all rounds.

Writes (OUT, default bench/results/HOST-CLASS) datapath_{tune,writer,pause}.csv (a row
per run), datapath.md
(means and 95% CIs) and datapath.png, each with commit and machine. Environment: ROUNDS,
SECTIONS ("tune writer pause"), CONFIGS, MEM (256M), THREADS (2), ALPHA (0.99), GAP (1),
DURATION (8), WMEM (2G), PMEM (4G), PSNAPS (1), OUT, IMGDIR.
"""
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(TOP, "bench"))
from ci95 import mean_ci  # noqa: E402
import provenance  # noqa: E402
from results_csv import fmt, plot_bars, read_csv, write_csv  # noqa: E402

EB = os.path.join(TOP, "bench", "engine-bench")
ENV = os.environ.get
ROUNDS = int(ENV("ROUNDS", "5"))
SECTIONS = ENV("SECTIONS", "tune writer pause").split()
MEM, THREADS, ALPHA = ENV("MEM", "256M"), ENV("THREADS", "2"), ENV("ALPHA", "0.99")
GAP, DURATION = ENV("GAP", "1"), ENV("DURATION", "8")
WMEM, PMEM, PSNAPS = ENV("WMEM", "2G"), ENV("PMEM", "4G"), int(ENV("PSNAPS", "1"))
OUT = ENV("OUT", "") or provenance.host_dir()
DD_BYTES = 2 << 30
DD_BLOCK = 2 << 20

# Configurations as POLICY/FAULT_THREADS/RT/COPIER_NICE/WRITER_NICE, e.g. ccow/2/rt/0/5
# (ccow at threshold 0; rt: fault threads SCHED_FIFO, -: not).
DEFAULT_CONFIGS = ("cow/2/rt/0/5 ccow/2/rt/0/5 cow/2/-/0/5 ccow/2/-/0/5 ccow/1/rt/0/5 "
                   "ccow/4/rt/0/5 ccow/2/rt/0/0 cow/2/rt/5/10 ccow/2/rt/5/10")
CONFIGS = ENV("CONFIGS", DEFAULT_CONFIGS).split()


def config_args(name):
    policy, faults, rt, cnice, wnice = name.split("/")
    a = ["--policy", policy] + (["--threshold", "0"] if policy == "ccow" else [])
    return a + ["--fault-threads", faults, "--fault-rt", "1" if rt == "rt" else "0",
                "--copier-nice", cnice, "--writer-nice", wnice]


TUNE_KEYS = ["updates_per_s", "during", "max_stall_ms", "p999_batch_ms", "duration_ms_mean",
             "traps", "faults_parallel_max", "pool_bytes", "regions_background", "snapshots"]


class Failed(Exception):
    pass


def engine(args):
    r = subprocess.run([EB] + args + ["--json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise Failed("engine-bench %s: %s" % (" ".join(args), r.stderr.strip()[-300:]))
    return json.loads(r.stdout)


def tune_run(name, imgdir):
    common = ["--mem", MEM, "--threads", THREADS, "--alpha", ALPHA, "--scatter",
              "--snapshot-gap", GAP, "--duration", DURATION, "--dir", imgdir]
    d = engine(common + config_args(name))
    return {k: d.get(k) for k in TUNE_KEYS}


def dd_rate(imgdir):
    """MB/s of a 2 GiB O_DIRECT write in 2 MiB blocks with one fsync at the end."""
    path = os.path.join(imgdir, "dd.out")
    t0 = time.monotonic()
    r = subprocess.run(["dd", "if=/dev/zero", "of=" + path, "bs=%d" % DD_BLOCK,
                        "count=%d" % (DD_BYTES // DD_BLOCK), "oflag=direct", "conv=fsync"],
                       capture_output=True, text=True)
    dt = time.monotonic() - t0
    os.unlink(path)
    if r.returncode != 0:
        raise Failed("dd: " + r.stderr.strip()[-200:])
    return DD_BYTES / 1e6 / dt


def writer_rate(imgdir):
    """MB/s the engine's writer saved a snapshot of WMEM that nobody writes."""
    d = engine(["--mem", WMEM, "--threads", "0", "--policy", "cow", "--snapshot-gap", "0.1",
                "--duration", "0.2", "--dir", imgdir])
    if not d.get("snapshots"):
        raise Failed("engine-bench took no snapshot")
    return d["writer_mb_per_s"]


def pause_run(policy, imgdir):
    # Snapshots 1 s apart (end to start) while the run lasts; the last one is awaited.
    d = engine(["--mem", PMEM, "--threads", "2", "--alpha", ALPHA, "--policy", policy,
                "--snapshot-gap", "1", "--duration", str(PSNAPS * 1.0 + 0.5),
                "--dir", imgdir])
    p = d.get("pauses_us") or []
    return {"snapshots": len(p), "median_us": statistics.median(p) if p else None,
            "max_us": max(p) if p else None, "pauses_us": " ".join(map(str, p))}


def main():
    head = provenance.line(ROUNDS)
    os.makedirs(OUT, exist_ok=True)
    imgdir = ENV("IMGDIR") or tempfile.mkdtemp(prefix="ccvm-datapath.", dir="/var/tmp")
    rows = {"tune": [], "writer": [], "pause": []}
    for rnd in range(1, ROUNDS + 1):
        jobs = []
        if "tune" in SECTIONS:
            jobs += [("tune", n) for n in CONFIGS]
        if "writer" in SECTIONS:
            jobs += [("writer", "dd"), ("writer", "engine")]
        if "pause" in SECTIONS:
            jobs += [("pause", "cow"), ("pause", "ccow")]
        random.Random(rnd).shuffle(jobs)
        for order, (sec, name) in enumerate(jobs, 1):
            print("datapath-sweep: round %d/%d, %s %s" % (rnd, ROUNDS, sec, name),
                  file=sys.stderr, flush=True)
            row = {"round": rnd, "order": order, "config": name}
            if sec == "tune":
                row.update(tune_run(name, imgdir))
            elif sec == "writer":
                row["mb_per_s"] = dd_rate(imgdir) if name == "dd" else writer_rate(imgdir)
            else:
                row.update(pause_run(name, imgdir))
            rows[sec].append(row)
    base = ["round", "order", "config"]
    heads = {sec: head for sec in rows if rows[sec]}
    for sec in rows:  # a section not run this time: its last results stay in the report
        if not rows[sec]:
            heads[sec], rows[sec] = read_csv(os.path.join(OUT, "datapath_%s.csv" % sec),
                                             text=("config", "pauses_us"))
    write_results(head, base, rows, heads)


def write_results(head, base, rows, heads):
    if rows["tune"] and heads.get("tune") == head:
        write_csv(os.path.join(OUT, "datapath_tune.csv"), head, base + TUNE_KEYS, rows["tune"])
    if rows["writer"] and heads.get("writer") == head:
        write_csv(os.path.join(OUT, "datapath_writer.csv"), head, base + ["mb_per_s"],
                  rows["writer"])
    if rows["pause"] and heads.get("pause") == head:
        write_csv(os.path.join(OUT, "datapath_pause.csv"), head,
                  base + ["snapshots", "median_us", "max_us", "pauses_us"], rows["pause"])
    report(heads, rows)
    plot(heads.get("tune", head), rows)


def per(rows, name, key):
    return [r[key] for r in rows if r["config"] == name and r.get(key) is not None]


def report(heads, rows):
    out = ["# The snapshot data path without a VM (bench/datapath-sweep.py)", "",
           "Mean ± 95% CI over the rounds, configurations shuffled in each round. Each "
           "section names the run it comes from.", ""]
    if rows["tune"]:
        t = rows["tune"]
        out += ["## Threads and priorities (%s, %s writers, alpha %s, scattered, %ss between "
                "snapshots, %ss runs)" % (MEM, THREADS, ALPHA, GAP, DURATION), "",
                heads["tune"], "",
                "| config | updates/s | during | longest stall ms | p99.9 batch ms | "
                "snapshot s | faults at once (max) | pool MiB |", "|---|---|---|---|---|---|---|---|"]
        for n in CONFIGS:
            if not per(t, n, "updates_per_s"):
                continue
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                n, fmt(per(t, n, "updates_per_s")), fmt(per(t, n, "during"), "%.2f"),
                fmt(per(t, n, "max_stall_ms"), "%.1f"), fmt(per(t, n, "p999_batch_ms"), "%.2f"),
                fmt([x / 1000 for x in per(t, n, "duration_ms_mean")], "%.2f"),
                fmt(per(t, n, "faults_parallel_max"), "%.1f"),
                fmt([x / 2**20 for x in per(t, n, "pool_bytes")], "%.0f")))
        for c in CONFIGS:  # each ccow beside the cow with the same threads and priorities
            w = "cow/" + c.split("/", 1)[1]
            if not c.startswith("ccow/") or not per(t, w, "updates_per_s"):
                continue
            out.append("")
            out.append("%s over %s: updates/s %.2fx; longest stall %.1f vs %.1f ms (means)." % (
                c, w, mean_ci(per(t, c, "updates_per_s"))[1] / mean_ci(per(t, w, "updates_per_s"))[1],
                mean_ci(per(t, c, "max_stall_ms"))[1], mean_ci(per(t, w, "max_stall_ms"))[1]))
        out.append("")
    if rows["writer"]:
        w = rows["writer"]
        dd, en = per(w, "dd", "mb_per_s"), per(w, "engine", "mb_per_s")
        ratios = [e / d for e, d in zip(en, dd)]  # same round
        out += ["## The writer against the disk (%s snapshot, nobody writing; dd: 2 GiB, "
                "O_DIRECT, 2 MiB blocks, fsync)" % WMEM, "", heads["writer"], "",
                "| | MB/s |", "|---|---|",
                "| dd | %s |" % fmt(dd, "%.0f"), "| snapshot writer | %s |" % fmt(en, "%.0f"),
                "| writer / dd, same round | %s |" % fmt(ratios, "%.2f"), ""]
    if rows["pause"]:
        p = rows["pause"]
        out += ["## The pause at %s (all memory touched, 2 writers)" % PMEM, "", heads["pause"], "",
                "| policy | snapshots per run | median µs | max µs |", "|---|---|---|---|"]
        for n in ("cow", "ccow"):
            if per(p, n, "median_us"):
                out.append("| %s | %s | %s | %s |" % (n, fmt(per(p, n, "snapshots"), "%.0f"),
                                                     fmt(per(p, n, "median_us"), "%.0f"),
                                                     fmt(per(p, n, "max_us"), "%.0f")))
        allp = [int(x) for r in p for x in str(r["pauses_us"] or "").split()]
        if allp:
            out += ["", "Over all %d snapshots: median %.0f µs, max %d µs." % (
                len(allp), statistics.median(allp), max(allp))]
        out.append("")
    with open(os.path.join(OUT, "datapath.md"), "w") as f:
        f.write("\n".join(out))


def plot(head, rows):
    t = rows["tune"]
    bars = [(n, [x / 1e6 for x in per(t, n, "updates_per_s")], per(t, n, "max_stall_ms"))
            for n in CONFIGS if per(t, n, "updates_per_s")]
    if bars:
        plot_bars(os.path.join(OUT, "datapath.png"), "engine-bench data path: " + head, bars,
                  "updates/s (millions)", "longest stall (ms)")


if __name__ == "__main__":
    try:
        main()
    except Failed as ex:
        print("datapath-sweep: %s" % ex, file=sys.stderr)
        sys.exit(1)
