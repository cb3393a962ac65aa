#!/usr/bin/env python3
"""oci.py - ccvm-oci beside runc and crun, all through Debian's podman (issue 57).

Three parts, ROUNDS rounds each (default 5), the systems in a new shuffled order every
round, every system through the same podman (cgroupfs, file events, vfs storage: the
flags a machine without systemd needs) with the same --ulimit nofile=1024:1024
--ulimit nproc=4096:4096. That last is for runc and crun: podman's default limits
(nofile 1048576) are more than root may set here (no CAP_SYS_RESOURCE), and both fail;
ccvm-oci runs with podman's defaults, but is given the same limits so that the three
do the same work.

start       `podman run --rm IMAGE /bin/true` START_RUNS times (default 5) per system
            and round, each timed whole (wall clock): ccvm-oci, runc, crun.
exec        `podman exec C /bin/true` START_RUNS times per system and round into a
            container C (`sleep`) started for the round, each timed whole: a process
            started in the running container (for ccvm-oci, a new guest process in
            the VM through its control socket).
checkpoint  Debian's redis-server in a container (its root built from the binary and
            the libraries it loads), reached through podman's -p; RECORDS records
            loaded (default 100000), then YCSB-A (bench/ycsb, open loop from intended
            start times) at TARGET ops/s (default 10000) for DURATION s (default 20);
            GAP s (default 5) into the run, `podman container checkpoint -R`.
              ccvm-oci       the checkpoint is a live ccvm snapshot (the VM's defaults:
                             ccow, its coverage tracker on, as users run it)
              runc-criu      the checkpoint is CRIU's (runc checkpoint)
              ccvm-oci-none, runc-none
                             the same load without a checkpoint: each server's own
                             latency over the same seconds of its run
            Per run: p99, p99.9 and max over the seconds the checkpoint overlapped
            (ops-weighted, merged histograms; for the -none systems the same seconds
            of the run), the whole run's p99.9 and longest stall, checkpoint_s
            (podman's command, wall clock), image_mb (allocated bytes of the
            checkpoint), pause_ms (ccvm's snapshot reply, which ccvm-oci keeps in the
            checkpoint's ccvm-oci.json; 0 for CRIU, which reports none).
            A system that cannot checkpoint here is left out and named with the
            reason (`criu check` is run first).

Writes (OUT, default bench/results/HOST-CLASS/oci) oci_start.csv, oci_exec.csv,
oci_checkpoint.csv
(a row per run), their _summary.csv (mean and 95% CI), oci.md and oci.png; each
records commit, machine, rounds and the command.

Environment: ROUNDS, START_RUNS, RECORDS, TARGET, DURATION, GAP, SYSTEMS (subset of
the names above), PARTS ("start exec checkpoint"), OUT.
"""
import csv
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402
from peers import Failed, env_float  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "redis_peers", os.path.join(os.path.dirname(os.path.abspath(__file__)), "redis.py"))
rp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rp)

ULIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"]
START_SYSTEMS = ["ccvm-oci", "runc", "crun"]
CKPT_SYSTEMS = {"ccvm-oci": ("ccvm-oci", True), "ccvm-oci-none": ("ccvm-oci", False),
                "runc-criu": ("runc", True), "runc-none": ("runc", False)}
CKPT_METRICS = ["p99_us", "p999_us", "max_us", "run_p999_us", "stall_ms", "ops_per_s",
                "checkpoint_s", "image_mb", "pause_ms"]
READY_S = 60


class Podman:
    """podman with a store of the driver's own, and the test images."""

    def __init__(self, work):
        self.work = work
        self.base = ["podman", "--root", os.path.join(work, "store"), "--runroot",
                     os.path.join(work, "run"), "--cgroup-manager", "cgroupfs",
                     "--events-backend", "file", "--storage-driver", "vfs"]
        self.oci = os.path.join(work, "bin", "ccvm-oci")
        os.makedirs(os.path.dirname(self.oci))
        os.symlink(peers.CCVM, self.oci)

    def runtime(self, name):
        return self.oci if name == "ccvm-oci" else name

    def __call__(self, *args, timeout=300, check=True):
        r = subprocess.run(self.base + list(args), capture_output=True, text=True, timeout=timeout)
        if check and r.returncode:
            raise Failed(f"podman {' '.join(args[:3])}: {(r.stderr or r.stdout).strip()[-300:]}")
        return r

    def import_root(self, root, tag):
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        r = subprocess.run(self.base + ["import", "-", tag], stdin=tar.stdout,
                           capture_output=True, text=True, timeout=300)
        tar.wait()
        if r.returncode:
            raise Failed(f"podman import {tag}: {r.stderr.strip()[-300:]}")


def build_roots(work):
    """busybox (the start part) and redis-server with its libraries."""
    bb = os.path.join(work, "busybox-root")
    for d in ("bin", "etc", "tmp", "proc", "dev", "sys"):
        os.makedirs(os.path.join(bb, d))
    shutil.copy("/bin/busybox", os.path.join(bb, "bin", "busybox"))
    for a in ("sh", "true", "echo", "sleep"):
        os.symlink("busybox", os.path.join(bb, "bin", a))
    rd = os.path.join(work, "redis-root")
    for d in ("bin", "etc", "tmp", "data"):
        os.makedirs(os.path.join(rd, d))
    shutil.copy("/usr/bin/redis-server", os.path.join(rd, "bin", "redis-server"))
    libs = subprocess.run(["ldd", "/usr/bin/redis-server"], capture_output=True, text=True).stdout
    for word in libs.split():
        if word.startswith("/"):
            dst = rd + word
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy(word, dst)
    return bb, rd


def criu_reason():
    """Why CRIU cannot checkpoint here, or None when `criu check` passes."""
    if not shutil.which("criu"):
        return "criu is not installed"
    r = subprocess.run(["criu", "check"], capture_output=True, text=True, timeout=60)
    if r.returncode == 0:
        return None
    err = [ln for ln in (r.stderr + r.stdout).splitlines() if "Error" in ln]
    return "`criu check` fails: " + (err[0].split(": ", 1)[-1] if err else r.stderr.strip()[-200:])


def start_run(pm, name, runs):
    times = []
    for _ in range(runs):
        t0 = time.monotonic()
        pm("run", "--rm", "--runtime", pm.runtime(name), *ULIMITS, "localhost/oci-bench-bb:1",
           "/bin/true", timeout=120)
        times.append(time.monotonic() - t0)
    return {"start_ms": 1000 * sum(times) / len(times), "start_min_ms": 1000 * min(times)}


def exec_run(pm, name, runs, rnd):
    """podman exec of /bin/true into a running container of runtime @name."""
    c = f"oci-bench-exec-{name}-{rnd}"
    pm("run", "-d", "--name", c, "--runtime", pm.runtime(name), *ULIMITS,
       "localhost/oci-bench-bb:1", "/bin/sleep", "3600", timeout=120)
    try:
        times = []
        for _ in range(runs):
            t0 = time.monotonic()
            pm("exec", c, "/bin/true", timeout=120)
            times.append(time.monotonic() - t0)
    finally:
        pm("rm", "-f", c, check=False)
    return {"exec_ms": 1000 * sum(times) / len(times), "exec_min_ms": 1000 * min(times)}


def ckpt_dir(pm, name):
    cid = pm("inspect", "--format", "{{.Id}}", name).stdout.strip()
    return os.path.join(pm.work, "store", "vfs-containers", cid, "userdata", "checkpoint")


def checkpoint(pm, name, window):
    """podman container checkpoint -R, its wall time into @window."""
    a = time.time()
    r = pm("container", "checkpoint", "-R", name, timeout=900, check=False)
    window.append((a, time.time()))
    if r.returncode:
        raise Failed(f"checkpoint: {(r.stderr or r.stdout).strip()[-300:]}")


def redis_up(pm, system, name, port):
    pm("run", "-d", "--name", name, "--runtime", pm.runtime(CKPT_SYSTEMS[system][0]), *ULIMITS,
       "-p", f"127.0.0.1:{port}:6379", "localhost/oci-bench-redis:1", "/bin/redis-server",
       "--save", "", "--appendonly", "no", "--protected-mode", "no", "--bind", "0.0.0.0")
    end = time.monotonic() + READY_S
    while rp.redis_cli(port, "ping") != "PONG":
        if time.monotonic() > end:
            raise Failed(f"{system}: Redis in the container does not answer")
        time.sleep(0.2)


def ckpt_run(pm, system, cfg, work):
    rp.settle()
    name, port = f"oci-bench-{os.path.basename(work)}", rp.free_port()
    redis_up(pm, system, name, port)
    try:
        rp.ycsb(port, "--phase", "load", "--records", str(cfg["records"]), "--clients", "8",
                "--pipeline", "16", timeout=1800)
        tl, hist = os.path.join(work, "tl.csv"), os.path.join(work, "hist.csv")
        out, window, errors = [], [], []

        def load():
            try:
                out.append(rp.ycsb(port, "--phase", "run", "--workload", "a", "--records",
                                   str(cfg["records"]), "--duration", str(cfg["duration"]),
                                   "--target", str(cfg["target"]), "--clients", "8",
                                   "--timeline", tl, "--histograms", hist, "--json",
                                   timeout=cfg["duration"] + 900))
            except (Failed, subprocess.TimeoutExpired) as e:
                errors.append(str(e))
        t = threading.Thread(target=load)
        t.start()
        time.sleep(cfg["gap"])
        if CKPT_SYSTEMS[system][1]:
            checkpoint(pm, name, window)
        else:
            window.append((time.time(), time.time() + 1))
        t.join()
        if errors:
            raise Failed(errors[0])
        return measure(pm, system, name, json.loads(out[0].strip().splitlines()[-1]), tl, hist,
                       window[0])
    finally:
        pm("rm", "-f", name, check=False)


def ckpt_in(pm, system, rnd, cfg, work):
    d = os.path.join(work, f"{system}-r{rnd}")
    os.makedirs(d)
    return ckpt_run(pm, system, cfg, d)


def measure(pm, system, name, summary, tl, hist, window):
    t0, (a, b) = summary["t0_unix"], window
    per_sec = {int(r["second"]): r for r in csv.DictReader(open(tl))}
    rows = [(int(r["second"]), int(r["bucket"]), int(r["count"]))
            for r in csv.DictReader(ln for ln in open(hist) if not ln.startswith("#"))]
    inside = {s for s in per_sec if t0 + s - 1 < b and t0 + s > a}
    p99, p999 = rp.merged_quantiles(rows, inside) if inside else (0.0, 0.0)
    m = {"p99_us": p99, "p999_us": p999,
         "max_us": max((float(per_sec[s]["max_us"]) for s in inside), default=0.0),
         "run_p999_us": summary["p999_us"], "stall_ms": summary["stall_ms"],
         "ops_per_s": summary["ops_per_s"], "checkpoint_s": 0.0, "image_mb": 0.0,
         "pause_ms": 0.0}
    if CKPT_SYSTEMS[system][1]:
        d = ckpt_dir(pm, name)
        m["checkpoint_s"] = b - a
        m["image_mb"] = sum(peers.allocated_bytes(os.path.join(d, f)) for f in os.listdir(d)) / (1 << 20)
        rec = os.path.join(d, "ccvm-oci.json")
        if os.path.exists(rec):
            m["pause_ms"] = json.load(open(rec)).get("snapshot", {}).get("pause_us", 0) / 1000
    return m


def rounds_of(names, rounds, tag, run, rows):
    for rnd in range(1, rounds + 1):
        order = list(names)
        random.Random(f"{tag}-{rnd}").shuffle(order)
        for k, name in enumerate(order):
            print(f"oci: {tag}, round {rnd}, {name} ({k + 1}/{len(order)})", file=sys.stderr)
            rows.append(dict(run(name, rnd), round=rnd, workload=tag, system=name))


def write_part(out, stem, header, rows, systems, metrics):
    summary = peers.summarise(rows, systems, metrics)
    peers.write_csvs(os.path.join(out, f"{stem}.csv"), os.path.join(out, f"{stem}_summary.csv"),
                     header, rows, ["round", "workload", "system"] + metrics, summary, metrics)
    return summary


def ratio(rows, metric, a, b):
    """Per-round @metric of system @a over @b: (mean, 95% CI half-width)."""
    r = []
    for rnd in sorted({x["round"] for x in rows}):
        va = [x[metric] for x in rows if x["round"] == rnd and x["system"] == a]
        vb = [x[metric] for x in rows if x["round"] == rnd and x["system"] == b]
        if va and vb and vb[0]:
            r.append(va[0] / vb[0])
    return peers.mean_ci(r)[1:]


def verdict(pair, lower_better=True):
    m, c = pair
    if c != c:
        return "one round: no verdict"
    lo, hi = m - c, m + c
    if lo <= 1 <= hi:
        return "matches"
    return "beats" if (hi < 1) == lower_better else "loses"


def write_md_times(f, title, summary, rows, metric):
    """A wall-clock table of @metric (and its _min twin) and ccvm-oci's ratio to each peer."""
    f.write(f"\n{title}, wall clock:\n\n| system | n | ms | min ms |\n|---|---|---|---|\n")
    for s in summary:
        f.write(f"| {s['system']} | {s['n']} | {peers.fmt_ci(s[metric + '_ms'], '%.0f')} | "
                f"{peers.fmt_ci(s[metric + '_min_ms'], '%.0f')} |\n")
    for base in ("runc", "crun"):
        if any(s["system"] == base for s in summary):
            r = ratio(rows, metric + "_ms", "ccvm-oci", base)
            f.write(f"\nccvm-oci over {base}, per round: {peers.fmt_ci(r, '%.2f')} "
                    f"({verdict(r)}).\n")


def write_md(out, header, start, ckpt, start_rows, ckpt_rows, notes, ex=(), exec_rows=()):
    with open(os.path.join(out, "oci.md"), "w") as f:
        f.write(f"ccvm-oci beside runc and crun through podman (bench/peers/oci.py): {header}\n\n"
                "Mean ± 95% CI over the rounds.\n")
        for n in notes:
            f.write(f"\n**{n}**\n")
        if start:
            write_md_times(f, "`podman run --rm` of /bin/true", start, start_rows, "start")
        if ex:
            write_md_times(f, "`podman exec C /bin/true` into a running container", ex,
                           exec_rows, "exec")
        if ckpt:
            f.write("\nRedis under YCSB-A, open loop; `podman container checkpoint -R` in the run "
                    "(-none: no checkpoint, the same seconds). p99, p99.9, max over the seconds "
                    "the checkpoint overlapped, from each operation's intended start:\n\n"
                    "| system | n | p99 ms | p99.9 ms | max ms | run p99.9 ms | stall ms | "
                    "ops/s | checkpoint s | image MiB | pause ms |\n" + "|---" * 11 + "|\n")
            for s in ckpt:
                ms = lambda k: (s[k][0] / 1000, s[k][1] / 1000)  # noqa: E731
                f.write(f"| {s['system']} | {s['n']} | {peers.fmt_ci(ms('p99_us'), '%.2f')} | "
                        f"{peers.fmt_ci(ms('p999_us'), '%.1f')} | {peers.fmt_ci(ms('max_us'), '%.0f')} | "
                        f"{peers.fmt_ci(ms('run_p999_us'), '%.1f')} | {peers.fmt_ci(s['stall_ms'], '%.0f')} | "
                        f"{peers.fmt_ci(s['ops_per_s'], '%.0f')} | {peers.fmt_ci(s['checkpoint_s'], '%.2f')} | "
                        f"{peers.fmt_ci(s['image_mb'], '%.0f')} | {peers.fmt_ci(s['pause_ms'], '%.1f')} |\n")
            pairs = [("ccvm-oci", "runc-criu"), ("ccvm-oci", "ccvm-oci-none"), ("ccvm-oci-none", "runc-none")]
            for a, b in pairs:
                if {a, b} <= {s["system"] for s in ckpt}:
                    r = ratio(ckpt_rows, "p999_us", a, b)
                    f.write(f"\np99.9 of {a} over {b}, per round: {peers.fmt_ci(r, '%.2f')} "
                            f"({verdict(r)}).\n")


def plot(out, start, ckpt, header, ex=()):
    dat = os.path.join(out, "oci.dat")
    with open(dat, "w") as f:
        for i, s in enumerate(start):
            f.write(f"{i} start:{s['system']} {s['start_ms'][0]:g} {s['start_ms'][1] if s['start_ms'][1] == s['start_ms'][1] else 0:g}\n")
        for i, s in enumerate(ex):
            f.write(f"{len(start) + i} exec:{s['system']} {s['exec_ms'][0]:g} {s['exec_ms'][1] if s['exec_ms'][1] == s['exec_ms'][1] else 0:g}\n")
        f.write("\n\n")
        for i, s in enumerate(ckpt):
            m, c = s["p999_us"]
            f.write(f"{i} {s['system']} {m / 1000:g} {c / 1000 if c == c else 0:g}\n")
    script = f"""set terminal pngcairo noenhanced size 1000,420 font ",9"
set output "{out}/oci.png"
set multiplot layout 1,2 title "{header[:120]}"
set style fill solid 0.5
set boxwidth 0.6
set title "podman run --rm /bin/true, podman exec /bin/true (ms, mean and 95% CI)"
set xrange [-0.6:{max(len(start) + len(ex), 1) - 0.4}]
plot "{dat}" index 0 using 1:3:4:xtic(2) with boxerrorbars notitle
set title "Redis p99.9 during checkpoint -R (ms)"
set xrange [-0.6:{max(len(ckpt), 1) - 0.4}]
set logscale y
plot "{dat}" index 1 using 1:3:4:xtic(2) with boxerrorbars notitle
unset multiplot
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=False)
    os.unlink(dat)


def settings():
    c = {"records": int(env_float("RECORDS", 100000)), "target": int(env_float("TARGET", 10000)),
         "duration": int(env_float("DURATION", 20)), "gap": env_float("GAP", 5.0),
         "start_runs": int(env_float("START_RUNS", 5))}
    if c["records"] < 1 or c["target"] < 1 or c["duration"] < 4 or not 0 < c["gap"] < c["duration"] \
            or c["start_runs"] < 1:
        raise Failed("RECORDS, TARGET, START_RUNS at least 1; DURATION at least 4; GAP inside it")
    return c


def main():
    notes, start_rows, exec_rows, ckpt_rows = [], [], [], []
    try:
        cfg, rounds = settings(), int(env_float("ROUNDS", 5))
        parts = peers.pick_names(os.environ.get("PARTS", "start exec checkpoint"),
                                 ["start", "exec", "checkpoint"], "PARTS")
        names = peers.pick_names(os.environ.get("SYSTEMS", " ".join(START_SYSTEMS + list(CKPT_SYSTEMS))),
                                 list(dict.fromkeys(START_SYSTEMS + list(CKPT_SYSTEMS))), "SYSTEMS")
        for tool in ("podman", "redis-server", "redis-cli"):
            if not shutil.which(tool):
                raise Failed(f"{tool} is not installed (scripts/install-deps.sh)")
        if not os.path.exists(rp.YCSB) or not os.path.exists(peers.CCVM):
            raise Failed("build first: make ccvm bench/ycsb")
        names = list(dict.fromkeys(names))
        why = criu_reason()
        if why and "runc-criu" in names:
            names.remove("runc-criu")
            notes.append(f"runc-criu not measured: CRIU cannot checkpoint here: {why} "
                         f"(Debian's criu {subprocess.run(['criu', '--version'], capture_output=True, text=True).stdout.split()[1] if shutil.which('criu') else '-'}, "
                         f"kernel {os.uname().release}).")
        out = os.environ.get("OUT") or peers.provenance.host_dir("oci")
        os.makedirs(out, exist_ok=True)
        work, pm = tempfile.mkdtemp(prefix="ccvm-oci-bench.", dir="/var/tmp"), None
        try:
            pm = Podman(work)
            bb, rd = build_roots(work)
            pm.import_root(bb, "localhost/oci-bench-bb:1")
            pm.import_root(rd, "localhost/oci-bench-redis:1")
            header = peers.provenance.line(
                rounds, f"start runs {cfg['start_runs']}; records {cfg['records']} target "
                f"{cfg['target']} ops/s duration {cfg['duration']}s gap {cfg['gap']}s")
            for rt in ("runc", "crun"):  # a runtime that cannot run here is named, not timed
                r = pm("run", "--rm", "--runtime", rt, *ULIMITS, "localhost/oci-bench-bb:1",
                       "/bin/true", timeout=120, check=False) if rt in names else None
                if r is not None and r.returncode:
                    names.remove(rt)
                    names[:] = [n for n in names if not n.startswith(rt + "-")]
                    notes.append(f"{rt} not measured: it cannot run a container here: "
                                 f"{(r.stderr or r.stdout).strip().splitlines()[-1][:200]}")
            if "start" in parts:
                rounds_of([n for n in names if n in START_SYSTEMS], rounds, "start",
                          lambda n, r: start_run(pm, n, cfg["start_runs"]), start_rows)
            if "exec" in parts:
                rounds_of([n for n in names if n in START_SYSTEMS], rounds, "exec",
                          lambda n, r: exec_run(pm, n, cfg["start_runs"], r), exec_rows)
            if "checkpoint" in parts:
                ck = [n for n in names if n in CKPT_SYSTEMS]
                rounds_of(ck, rounds, "checkpoint", lambda n, r: ckpt_in(pm, n, r, cfg, work),
                          ckpt_rows)
        finally:
            if pm:
                pm("rm", "-af", check=False)
            subprocess.run(["rm", "-rf", work], check=False)
        start = write_part(out, "oci_start", header, start_rows, START_SYSTEMS,
                           ["start_ms", "start_min_ms"]) if start_rows else []
        ex = write_part(out, "oci_exec", header, exec_rows, START_SYSTEMS,
                        ["exec_ms", "exec_min_ms"]) if exec_rows else []
        ckpt = write_part(out, "oci_checkpoint", header, ckpt_rows, CKPT_SYSTEMS,
                          CKPT_METRICS) if ckpt_rows else []
        write_md(out, header, start, ckpt, start_rows, ckpt_rows, notes, ex, exec_rows)
        plot(out, start, ckpt, header, ex)
    except (Failed, subprocess.TimeoutExpired, OSError) as e:
        print(f"oci: {e}", file=sys.stderr)
        return 1
    print(f"oci: {len(start_rows)} start, {len(exec_rows)} exec and {len(ckpt_rows)} checkpoint "
          f"runs; results in {out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
