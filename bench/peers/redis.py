#!/usr/bin/env python3
"""redis.py - Redis under live snapshots: ccvm's policies beside Redis' own BGSAVE, open loop.

Debian's redis-server natively (with and without a periodic BGSAVE, Redis' fork-based
snapshot) and in ccvm (none, stop, cow, ccow, fork; the policy given to `run
--snapshot-policy`; none keeps the default, ccow, with its coverage tracker, and takes
no snapshot; and ccvm-bgsave, Redis' own BGSAVE forking inside the VM onto an --rw
directory), loaded with RECORDS
YCSB records, then YCSB workload A or B from bench/ycsb in open loop: TARGET operations
per second over all clients, each operation's latency measured from its intended start
(no coordinated omission). Snapshots on the cadence of bench/peers/peers.py: the first
GAP seconds after the run phase starts, each next one GAP seconds after the previous one
ended, the same for BGSAVE.

Per run, from ycsb's JSON line, its per-second timeline and histograms (--timeline,
--histograms) and the snapshot windows the driver saw (wall clock, mapped onto ycsb's
seconds through its t0_unix):

  during        ops/s in the seconds a snapshot overlapped over the same server's ops/s
                without snapshots (native or ccvm-none, same round)
  lost_s        work not done by the run's end, per snapshot, in seconds of that rate
                (open loop: the backlog still queued)
  p99_us, p999_us, max_us
                ops-weighted latency percentiles over those seconds (histograms merged)
  run_p999_us, run_max_us, stall_ms
                the whole run phase's p99.9, max and longest time without a completion
  duration_s, extra_mb, image_mb
                as in peers.py (extra: PSS of server, monitor and children)
  tracker_stall_ms, tracker_lost_ms
                ccvm: the coverage tracker's own accounts at the run phase's end
                (`stats regions`: longest_stall_ms, guest_lost_ms); 0 elsewhere

TARGET defaults to half of what the slowest server selected serves closed loop without
snapshots (measured first, 5 s), so that every server can keep up outside snapshots.
ROUNDS rounds (default 5), systems shuffled per round. Writes (OUT, default
bench/results/HOST-CLASS) redis_peers.csv
(a row per run), redis_peers_summary.csv and redis_peers.md (mean and 95% CI) and
redis_peers.png; each records commit, machine, THP mode and the servers' huge pages.

ccvm-compact is ccvm-ccow with compaction in idle time (--snapshot-compact idle, the
default of `ccvm run`): its images are kept until the compactor is done with them, the
driver follows its `compacted` events, and the seconds a compaction overlapped and no
snapshot did give p999_compact_us (ops-weighted, as above), compact_s the seconds
compactions took (wall, from the compactor taking the image up to its rename, with the
time a snapshot held it and the time it waited for the guest to rest) and compactions
their count. The compactor waits while the guest works, so after the run phase the
driver waits for it to finish the images queued (at most COMPACT_WAIT_S): compact_after_s
is that wait, compactions_in_run the compactions that ended within the run phase and
compact_cpu_run_ms the compactor thread's CPU time by then (`ctl stats`' cpu_ms).
ccvm-keep, its control, is ccvm-ccow with each image kept until the run phase is over,
as ccvm-compact keeps them, so that compaction is the one difference. Every system with snapshots has p999_between_us, over the
seconds from its first snapshot on that no snapshot overlapped: the report compares
p999_compact_us with ccvm-ccow's (the same snapshots, compaction off: its seconds hold
the backlog a snapshot leaves too) when ccvm-ccow ran, else with ccvm-none's
run_p999_us. Every other ccvm system runs with --snapshot-compact off and removes each
image at once, as before compaction existed: their figures are the snapshot's alone.

Each run starts once the machine is idle (the last run's server may still be giving
its memory back). Besides the policies, ccvm-ccow-lazy, ccvm-rounds and ccvm-eager-N (N in
10, 20, 50, 100) run ccow with --precopy lazy, rounds, or eager with --pause-budget-ms N;
ccvm-none-untracked runs without snapshots and without the coverage tracker
(--coverage-window off), whose dirty-log windows are what ccvm-none pays besides.
ccvm-none+idle is ccvm-none with a host busy loop under SCHED_IDLE (chrt -i 0) for the
run phase: a compaction's CPU alone, without its disk or its locks.

Environment: ROUNDS, RECORDS (default 250000), DURATION (run phase seconds, 30), GAP (2),
TARGET, CLIENTS (8), WORKLOADS ("ycsb-a ycsb-b"), SYSTEMS (subset of native
native-bgsave ccvm-none ccvm-stop ccvm-cow ccvm-ccow ccvm-fork ccvm-ccow-lazy
ccvm-rounds ccvm-eager-N ccvm-auto-100 ccvm-none-untracked ccvm-none+idle ccvm-bgsave
ccvm-compact ccvm-keep), MEM (ccvm guest RAM, default 2G), OUT, IMGDIR, SNAPLOG (a file: every ccvm
snapshot's figures appended as JSON lines), PARENT (a built tree of another commit:
each ccvm system NAME gets a twin NAME@parent that runs PARENT's ccvm in the same
rounds; the summary then adds each system's per-round p99.9 ratio to its twin). Without /dev/kvm the ccvm systems are left
out.
"""
import csv
import json
import math
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402
from peers import Failed, env_float  # noqa: E402

YCSB = os.path.join(peers.TOP, "bench", "ycsb")
HIST_STEP = 1.01           # bench/ycsb's histogram buckets
BGSAVE_TIMEOUT_S = 900
COMPACT_WAIT_S = 600       # ccvm-compact: the most the driver waits after the run phase
PORT_MIN = 10000
PORT_TRIES = 3
SYSTEMS = {
    "native": ("native", None), "native-bgsave": ("native", "bgsave"),
    "ccvm-none": ("ccvm", None), "ccvm-stop": ("ccvm", "stop"), "ccvm-cow": ("ccvm", "cow"),
    "ccvm-ccow": ("ccvm", "ccow"), "ccvm-fork": ("ccvm", "fork"),
    "ccvm-ccow-lazy": ("ccvm", "ccow"), "ccvm-rounds": ("ccvm", "ccow"),
    "ccvm-none-untracked": ("ccvm", None), "ccvm-bgsave": ("ccvm", "bgsave"),
}
# Beyond the policy: ccow with its pause copy off, or on with a pause budget in ms
# (ccvm-eager-N), whatever ccvm's defaults are.
EAGER_BUDGETS_MS = (10, 20, 50, 100)
EXTRA_ARGS = {"ccvm-ccow-lazy": ["--precopy", "lazy"], "ccvm-rounds": ["--precopy", "rounds"],
              "ccvm-none-untracked": ["--coverage-window", "off"]}
for _ms in EAGER_BUDGETS_MS:
    SYSTEMS[f"ccvm-eager-{_ms}"] = ("ccvm", "ccow")
    EXTRA_ARGS[f"ccvm-eager-{_ms}"] = ["--precopy", "eager", "--pause-budget-ms", str(_ms)]
# The default pre-copy (auto) with a pause budget of 100 ms: the budget's bound.
SYSTEMS["ccvm-auto-100"] = ("ccvm", "ccow")
EXTRA_ARGS["ccvm-auto-100"] = ["--pause-budget-ms", "100"]
# The default path with compaction in idle time after each snapshot.
SYSTEMS["ccvm-compact"] = ("ccvm", "ccow")
EXTRA_ARGS["ccvm-compact"] = ["--snapshot-compact", "idle"]
# Its control: the same, compaction off, each image kept as ccvm-compact keeps it
# (until the run phase is over), so that compaction is the one difference.
SYSTEMS["ccvm-keep"] = ("ccvm", "ccow")
KEEP_IMAGES = {"ccvm-keep"}
# ccvm-none with a busy loop under SCHED_IDLE beside it on the host for the run phase:
# the CPU a compaction in idle time takes and nothing else (no disk, no lock, no
# snapshot), so what idle-priority work alone costs the guest's latency on this host.
SYSTEMS["ccvm-none+idle"] = ("ccvm", None)
IDLE_SPIN = {"ccvm-none+idle"}
BASELINE = {"native": "native", "ccvm": "ccvm-none"}
# PARENT, a built tree of another commit: each ccvm system NAME has a twin NAME@parent
# run with PARENT's ccvm, so old build and new run in the same shuffled rounds.
PARENT = os.environ.get("PARENT")
if PARENT:
    for _name in [n for n in SYSTEMS if SYSTEMS[n][0] == "ccvm"]:
        SYSTEMS[_name + "@parent"] = SYSTEMS[_name]
        if _name in EXTRA_ARGS:
            EXTRA_ARGS[_name + "@parent"] = EXTRA_ARGS[_name]
METRICS = ["ops_per_s", "during", "lost_s", "p99_us", "p999_us", "max_us", "run_p999_us", "run_max_us",
           "stall_ms", "duration_s", "extra_mb", "image_mb", "snapshots",
           "tracker_stall_ms", "tracker_lost_ms", "p999_compact_us", "p999_between_us",
           "compact_s", "compactions", "compactions_in_run", "compact_after_s",
           "compact_cpu_run_ms"]


def free_port():
    """A loopback TCP port nobody holds now, below the ephemeral range."""
    try:
        low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(100):
        port = random.randrange(PORT_MIN, max(PORT_MIN + 1, low))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise Failed("no free loopback port")


def redis_cli(port, *args, timeout=10):
    r = subprocess.run(["redis-cli", "-p", str(port)] + list(args), capture_output=True,
                       text=True, timeout=timeout)
    return r.stdout.strip() if r.returncode == 0 else None


def info(port, section):
    out = redis_cli(port, "info", section) or ""
    return dict(l.split(":", 1) for l in out.splitlines() if ":" in l)


class Server:
    """One Redis: native or in ccvm, on a free loopback port."""

    def __init__(self, name, cfg, work):
        self.name, self.cfg, self.work = name, cfg, work
        self.family, self.mode = SYSTEMS[name]
        self.ccvm = (os.path.join(PARENT, "ccvm") if PARENT and name.endswith("@parent")
                     else peers.CCVM)
        self.port = 0
        self.windows, self.durations, self.images = [], [], []
        self.compact = "--snapshot-compact" in EXTRA_ARGS.get(name, [])
        self.compactions = []      # (start, end) wall clock, from the compacted events
        self.compact_after_s = 0.0
        self.compact_cpu_ms = 0.0  # the compactor's CPU time by the run phase's end
        self.keep = name.split("@")[0] in KEEP_IMAGES
        self.events = None

    def start(self):
        """Start on a free port below the kernel's ephemeral range (client sockets of
        earlier runs may hold any port in it); a lost race for the port is retried."""
        for attempt in range(PORT_TRIES):
            self.port = free_port()
            try:
                return self.start_on_port()
            except Failed:
                if attempt == PORT_TRIES - 1 or "Address already in use" not in self.tail():
                    raise

    def start_on_port(self):
        redis = "redis-server"
        if self.family == "native":
            args = [redis, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--dir", self.work]
        else:
            self.sock = peers.socket_path(f"{self.name}-ctl")
            args = [self.ccvm, "run", "--mem", self.cfg["mem"], "--control", self.sock,
                    "--image-dir", self.work, "--publish", f"127.0.0.1:{self.port}:6379"]
            if self.mode == "bgsave":   # Redis' own fork, inside the VM, onto --rw
                args += ["--rw", self.work]
            elif self.mode:
                args += ["--snapshot-policy", self.mode]
            if not self.compact:
                args += ["--snapshot-compact", "off"]
            args += EXTRA_ARGS.get(self.name, [])
            args += ["--", shutil.which(redis) or redis, "--port", "6379", "--save", "", "--appendonly", "no",
                     "--dir", self.work]
        if getattr(self, "log", None):
            self.log.close()
        self.log = open(os.path.join(self.work, "server.log"), "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        for _ in range(600):
            if redis_cli(self.port, "ping") == "PONG":
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise Failed(f"{self.name}: Redis did not come up: {self.tail()}")

    def tail(self):
        try:
            return open(os.path.join(self.work, "server.log")).read()[-400:].strip()
        except OSError:
            return ""

    def huge_kib(self):
        """AnonHugePages of the server's process tree (ccvm: the monitor's guest RAM)."""
        total = 0
        for p in peers.tree_pids(self.proc.pid):
            try:
                for line in open(f"/proc/{p}/smaps_rollup"):
                    if line.startswith("AnonHugePages:"):
                        total += int(line.split()[1])
            except OSError:
                pass
        return total

    def snapshot(self, i):
        if self.mode == "bgsave":
            return self.bgsave()
        path = os.path.join(self.work, f"s{i}.img")
        fig = peers.ccvm_snapshot(self.sock, path, self.name)
        if os.environ.get("SNAPLOG"):   # each snapshot's figures, for a closer look
            with open(os.environ["SNAPLOG"], "a") as f:
                f.write(json.dumps(dict(fig, system=self.name)) + "\n")
        self.durations.append(fig["duration_ms"] / 1000)
        self.images.append(peers.allocated_bytes(path))
        if not self.compact and not self.keep:   # (else removed once compacted, or
            os.unlink(path)                        # after the run phase)

    def follow_compactions(self):
        """ccvm-compact: the monitor's events, read in a thread: each compaction's window
        (its end less its milliseconds) and its image removed once done with."""
        self.events = subprocess.Popen([self.ccvm, "ctl", self.sock, "events"],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                       stdin=subprocess.DEVNULL, text=True)

        def reader():
            for line in self.events.stdout:
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if ev.get("event") == "compacted":
                    end = time.time()
                    self.compactions.append((end - ev["ms"] / 1000, end))
                if ev.get("event") in ("compacted", "compaction-failed"):
                    try:
                        os.unlink(ev["file"])
                    except OSError:
                        pass
        threading.Thread(target=reader, daemon=True).start()

    def compaction_stats(self):
        r = subprocess.run([self.ccvm, "ctl", self.sock, "stats"], capture_output=True,
                           text=True, timeout=60)
        return json.loads(r.stdout).get("compaction", {}) if r.returncode == 0 else {}

    def remove_kept(self):
        """ccvm-keep, the run phase over: its images removed."""
        for i in range(len(self.durations) + 1):   # (s0.img on; a failed one too)
            try:
                os.unlink(os.path.join(self.work, f"s{i}.img"))
            except OSError:
                pass

    def wait_compactor(self):
        """ccvm-compact, the run phase over: wait until the compactor has no image left
        (running or queued), at most COMPACT_WAIT_S; the seconds waited."""
        start = time.monotonic()
        while time.monotonic() - start < COMPACT_WAIT_S:
            c = self.compaction_stats()
            if c and not c["running"] and not c["waiting"]:
                break
            time.sleep(0.5)
        time.sleep(0.5)   # the last event on its way to the reader
        return time.monotonic() - start

    def bgsave(self):
        """BGSAVE and wait for its end: rdb_saves (Redis 7) counts finished saves."""
        s = time.monotonic()
        before = info(self.port, "persistence").get("rdb_saves")
        if before is None:
            raise Failed(f"{self.name}: INFO persistence has no rdb_saves (Redis 7 needed)")
        if not (redis_cli(self.port, "bgsave") or "").startswith("Background saving"):
            raise Failed(f"{self.name}: BGSAVE refused")
        while True:
            p = info(self.port, "persistence")
            if p.get("rdb_bgsave_in_progress") == "0":
                if p.get("rdb_saves") != before:
                    break
                if p.get("rdb_last_bgsave_status") != "ok":
                    raise Failed(f"{self.name}: BGSAVE failed")
            if time.monotonic() - s > BGSAVE_TIMEOUT_S:
                raise Failed(f"{self.name}: BGSAVE still running after {BGSAVE_TIMEOUT_S} s")
            time.sleep(peers.POLL_S)
        self.durations.append(time.monotonic() - s)
        rdb = os.path.join(self.work, "dump.rdb")
        self.images.append(peers.allocated_bytes(rdb))
        os.unlink(rdb)

    def tracker(self):
        """The coverage tracker's own accounts (ccvm; zeros where none runs)."""
        none = {"tracker_stall_ms": 0.0, "tracker_lost_ms": 0.0}
        if self.family != "ccvm":
            return none
        r = subprocess.run([self.ccvm, "ctl", self.sock, "stats", "regions"],
                           capture_output=True, text=True, timeout=60)
        if r.returncode and "not tracked" in r.stdout + r.stderr:
            return none   # a policy other than ccow, or --coverage-window off
        if r.returncode:
            raise Failed(f"{self.name}: stats regions: {(r.stderr or r.stdout).strip()}")
        d = json.loads(r.stdout.strip().splitlines()[-1])
        return {"tracker_stall_ms": float(d.get("longest_stall_ms", 0.0)),
                "tracker_lost_ms": float(d.get("guest_lost_ms", 0.0))}

    def stop(self):
        redis_cli(self.port, "shutdown", "nosave")
        peers.stop_process(self.proc)
        if self.events:
            peers.stop_process(self.events)
        self.log.close()


def ycsb(port, *args, timeout):
    r = subprocess.run([YCSB, "--port", str(port), "--quiet"] + list(args), capture_output=True,
                       text=True, timeout=timeout)
    if r.returncode:
        raise Failed(f"ycsb {' '.join(args)}: {(r.stderr or r.stdout).strip()[-300:]}")
    return r.stdout


def snapshot_loop(srv, cfg, end, stop, errors):
    try:
        if stop.wait(cfg["gap"]):
            return
        i = 0
        while time.time() < end - 1 and not stop.is_set():
            s = time.time()
            srv.snapshot(i)
            srv.windows.append((s, time.time()))
            i += 1
            if stop.wait(cfg["gap"]):
                return
    except (Failed, OSError, subprocess.TimeoutExpired) as e:
        errors.append(str(e))


SETTLE_IDLE = 0.9     # a run starts once the CPUs were this idle for a second...
SETTLE_MAX_S = 30     # ...or after this long


def cpu_times():
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(v), v[3] + v[4]   # all, idle + iowait


def settle():
    """Wait until the machine is quiet: the last run's server may still be giving back
    gigabytes (ccvm's guest RAM), which took a core for seconds here and made the next
    run's latency look like its own (native Redis' p99.9 went from 25 ms to 0.6 s).
    Returns the seconds waited."""
    start = time.monotonic()
    while time.monotonic() - start < SETTLE_MAX_S:
        a0, i0 = cpu_times()
        time.sleep(1)
        a1, i1 = cpu_times()
        if a1 > a0 and (i1 - i0) / (a1 - a0) >= SETTLE_IDLE:
            break
    return time.monotonic() - start


def one_run(name, wl, cfg, work, target):
    settle()
    srv = Server(name, cfg, work)
    srv.start()
    try:
        ycsb(srv.port, "--phase", "load", "--records", str(cfg["records"]), "--clients", "8",
             "--pipeline", "16", timeout=1800)
        huge = srv.huge_kib()
        if srv.compact:
            srv.follow_compactions()
        sampler = peers.PssSampler(srv.proc.pid)
        sampler.start()
        tl, hist = os.path.join(work, "tl.csv"), os.path.join(work, "hist.csv")
        stop, errors = threading.Event(), []
        snap = spin = None
        if name.split("@")[0] in IDLE_SPIN:
            spin = subprocess.Popen(["chrt", "-i", "0", "sh", "-c", "while :; do :; done"])
        if srv.mode:
            snap = threading.Thread(target=snapshot_loop, daemon=True, args=(
                srv, cfg, time.time() + cfg["duration"], stop, errors))
            snap.start()
        try:
            out = ycsb(srv.port, "--phase", "run", "--workload", wl[-1], "--records",
                       str(cfg["records"]), "--duration", str(cfg["duration"]), "--target",
                       str(target), "--clients", str(cfg["clients"]), "--timeline", tl,
                       "--histograms", hist, "--json", timeout=cfg["duration"] + 900)
        finally:
            stop.set()
            if spin:
                spin.kill()
                spin.wait()
            if snap:
                snap.join()
            sampler.stop.set()
            sampler.join()
        if errors:
            raise Failed(errors[0])
        if srv.compact:
            srv.compact_cpu_ms = srv.compaction_stats().get("cpu_ms", 0.0)
            srv.compact_after_s = srv.wait_compactor()
        if srv.keep:
            srv.remove_kept()
        summary = json.loads(out.strip().splitlines()[-1])
        return dict(measure(srv, summary, tl, hist, sampler.samples, huge), **srv.tracker())
    finally:
        srv.stop()


def merged_quantiles(hist_rows, seconds):
    buckets = {}
    for sec, b, n in hist_rows:
        if sec in seconds:
            buckets[b] = buckets.get(b, 0) + n
    total = sum(buckets.values())
    out = []
    for q in (0.99, 0.999):
        seen, val = 0, 0.0
        for b in sorted(buckets):
            seen += buckets[b]
            if seen >= q * total:
                val = HIST_STEP ** (b + 1)
                break
        out.append(val)
    return out


def measure(srv, summary, tl_path, hist_path, pss, huge):
    t0 = summary["t0_unix"]
    per_sec = {int(r["second"]): r for r in csv.DictReader(open(tl_path))}
    hist_rows = [(int(r["second"]), int(r["bucket"]), int(r["count"]))
                 for r in csv.DictReader(l for l in open(hist_path) if not l.startswith("#"))]
    # Second s covers [t0 + s - 1, t0 + s): those a snapshot window overlapped.
    inside = {s for s in per_sec for a, b in srv.windows if t0 + s - 1 < b and t0 + s > a}
    # Those a compaction overlapped and no snapshot did.
    compacting = {s for s in per_sec for a, b in srv.compactions
                  if t0 + s - 1 < b and t0 + s > a} - inside
    p999_compact = merged_quantiles(hist_rows, compacting)[1] if compacting else 0.0
    # From the first snapshot on, those no snapshot overlapped: what a compaction's
    # seconds are compared with (they too follow snapshots, and hold their backlog).
    first = min((a for a, b in srv.windows), default=None)
    between = {s for s in per_sec if first is not None and t0 + s > first} - inside
    p999_between = merged_quantiles(hist_rows, between)[1] if between else 0.0
    n_in = len(inside)
    ops_in = sum(int(per_sec[s]["ops_per_s"]) for s in inside)
    p99, p999 = merged_quantiles(hist_rows, inside) if inside else (0.0, 0.0)
    max_in = max((float(per_sec[s]["max_us"]) for s in inside), default=0.0)
    off = time.monotonic() - time.time()   # the PSS samples are on the monotonic clock
    mono_windows = [(a + off, b + off) for a, b in srv.windows]
    start = mono_windows[0][0] if mono_windows else float("inf")
    before = [k for t, k in pss if t < start]
    during = [k for t, k in pss for a, b in mono_windows if a <= t <= b]
    pss0 = sorted(before)[len(before) // 2] if before else 0
    return {
        "ops_per_s": summary["ops_per_s"],
        "ops_per_s_in": ops_in / n_in if n_in else summary["ops_per_s"],
        "p99_us": p99, "p999_us": p999, "max_us": max_in,
        "run_p999_us": summary["p999_us"], "run_max_us": summary["max_us"],
        "stall_ms": summary["stall_ms"],
        "duration_s": sum(srv.durations) / len(srv.durations) if srv.durations else 0.0,
        "extra_mb": max(0, max(during, default=pss0) - pss0) / 1024,
        "image_mb": sum(srv.images) / len(srv.images) / (1 << 20) if srv.images else 0.0,
        "snapshots": len(srv.windows), "huge_mib": huge / 1024,
        "p999_compact_us": p999_compact, "p999_between_us": p999_between,
        "compactions": len(srv.compactions),
        "compact_s": sum(b - a for a, b in srv.compactions),
        "compactions_in_run": sum(1 for a, b in srv.compactions
                                  if b <= t0 + max(per_sec, default=0)),
        "compact_after_s": srv.compact_after_s,
        "compact_cpu_run_ms": srv.compact_cpu_ms,
    }


def calibrate(names, cfg, work):
    """Half the closed-loop rate of the slowest baseline selected."""
    rates = []
    for base in sorted({BASELINE[SYSTEMS[n][0]] for n in names}):
        srv = Server(base, cfg, os.path.join(work, "calibrate-" + base))
        os.makedirs(srv.work, exist_ok=True)
        srv.start()
        try:
            ycsb(srv.port, "--phase", "load", "--records", str(cfg["records"]), "--clients", "8",
                 "--pipeline", "16", timeout=1800)
            out = ycsb(srv.port, "--phase", "run", "--records", str(cfg["records"]),
                       "--duration", "5", "--clients", str(cfg["clients"]), "--json",
                       timeout=120)
            rates.append(json.loads(out.strip().splitlines()[-1])["ops_per_s"])
        finally:
            srv.stop()
    return max(100, int(min(rates) / 2))


def settings():
    c = {"records": int(env_float("RECORDS", 250000)), "duration": int(env_float("DURATION", 30)),
         "gap": env_float("GAP", 2.0), "clients": int(env_float("CLIENTS", 8)),
         "mem": os.environ.get("MEM", "2G")}
    if c["records"] < 1 or c["duration"] < 2 or c["gap"] < 0 or c["clients"] < 1:
        raise Failed("RECORDS and CLIENTS at least 1, DURATION at least 2, GAP not negative")
    return c


def write_outputs(out, header, rows, target):
    cols = ["round", "workload", "system"] + METRICS + ["huge_mib"]
    summary = peers.summarise(rows, SYSTEMS, METRICS + ["huge_mib"])
    peers.write_csvs(os.path.join(out, "redis_peers.csv"),
                     os.path.join(out, "redis_peers_summary.csv"),
                     f"{header}; target {target} ops/s", rows, cols, summary,
                     METRICS + ["huge_mib"])
    def ci(pair, fmt, snapshots=True):
        return peers.fmt_ci(pair, fmt) if snapshots else "-"
    with open(os.path.join(out, "redis_peers.md"), "w") as f:
        f.write(f"Redis under snapshots (bench/peers/redis.py): {header}; open loop at {target} "
                "ops/s\n\nMean ± 95% CI over the rounds. *during*: ops/s in the seconds a "
                "snapshot overlapped over the same server's without snapshots; p99, p99.9 and "
                "max over those seconds, weighted by operations, from each operation's "
                "intended start; *run*: the whole run phase; *huge*: the server's "
                "AnonHugePages after loading.\n\n| workload | system | n | during | p99 ms | "
                "p99.9 ms | max ms | run p99.9 ms | run max ms | stall ms | duration s | "
                "extra MiB | image MiB | huge MiB | tracker stall ms | tracker lost ms |\n" +
                "|---" * 16 + "|\n")
        for s in summary:
            snap = SYSTEMS[s["system"]][1] is not None
            ms = lambda k: (s[k][0] / 1000, s[k][1] / 1000)  # noqa: E731
            f.write(f"| {s['workload']} | {s['system']} | {s['n']} | "
                    f"{ci(s['during'], '%.2f', snap)} | {ci(ms('p99_us'), '%.2f', snap)} | "
                    f"{ci(ms('p999_us'), '%.1f', snap)} | {ci(ms('max_us'), '%.0f', snap)} | "
                    f"{ci(ms('run_p999_us'), '%.1f')} | {ci(ms('run_max_us'), '%.0f')} | "
                    f"{ci(s['stall_ms'], '%.0f')} | {ci(s['duration_s'], '%.2f', snap)} | "
                    f"{ci(s['extra_mb'], '%.0f', snap)} | {ci(s['image_mb'], '%.0f', snap)} | "
                    f"{ci(s['huge_mib'], '%.0f')} | {ci(s['tracker_stall_ms'], '%.1f')} | "
                    f"{ci(s['tracker_lost_ms'], '%.0f')} |\n")
        twins(f, rows)
        compaction(f, rows)
    plot(out, summary, header)


def compaction_base(rows, wl):
    """What ccvm-compact's seconds compacting are compared with, per round: ccvm-keep's
    seconds between snapshots (the same snapshots and kept images, compaction off) when
    it ran, else ccvm-ccow's (images removed at once), else ccvm-none's whole run (no
    snapshot at all, so no backlog after one either)."""
    for name, key, what in (("ccvm-keep", "p999_between_us", "ccvm-keep between snapshots"),
                            ("ccvm-ccow", "p999_between_us", "ccvm-ccow between snapshots"),
                            ("ccvm-none", "run_p999_us", "ccvm-none run")):
        base = {r["round"]: r[key] for r in rows
                if r["workload"] == wl and r["system"] == name and r.get(key)}
        if base:
            return base, what
    return {}, "nothing"


def compaction(f, rows):
    """ccvm-compact: p99.9 in the seconds a compaction ran over compaction_base's, per
    round; 1 inside the CI: they match."""
    got = [r for r in rows if r["system"] == "ccvm-compact"]
    if not got:
        return
    f.write("\nCompaction in idle time (ccvm-compact): p99.9 in the seconds a compaction "
            "overlapped and no snapshot did, over the baseline's p99.9 in the same round: "
            "ccvm-keep's seconds between snapshots (the same snapshots, images kept as "
            "ccvm-compact keeps them, compaction off; from the first one on) where it ran, "
            "else ccvm-ccow's (images removed at once), else ccvm-none's whole run (mean ± 95% CI "
            "of the per-round ratio; 1 inside the CI: they match). *own between*: "
            "ccvm-compact's p99.9 in all its seconds between snapshots. A compaction's "
            "seconds run from the compactor taking its image up to the rename, with the "
            "time it waited for the guest to rest; *ended in run*: compactions that ended "
            "within the run phase; *wait after*: the seconds the compactor took to finish "
            "its queue after the run phase; *CPU in run*: the compactor thread's CPU time "
            "by the run phase's end.\n\n"
            "| workload | n | p99.9 compacting ms | baseline | baseline p99.9 ms | ratio | "
            "own between ms | compactions per run | ended in run | CPU in run ms | "
            "wait after s | compaction s each |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    for wl in sorted({r["workload"] for r in got}):
        mine = [r for r in got if r["workload"] == wl and r["compactions"]]
        base, what = compaction_base(rows, wl)
        ratios = [r["p999_compact_us"] / base[r["round"]] for r in mine
                  if r["round"] in base and r["p999_compact_us"]]
        each = [r["compact_s"] / r["compactions"] for r in mine]
        own = [r["p999_between_us"] / 1000 for r in mine if r.get("p999_between_us")]
        f.write(f"| {wl} | {len(ratios)} | "
                f"{peers.fmt_ci(peers.mean_ci([r['p999_compact_us'] / 1000 for r in mine])[1:], '%.1f')} | "
                f"{what} | "
                f"{peers.fmt_ci(peers.mean_ci([b / 1000 for b in base.values()])[1:], '%.1f')} | "
                f"{peers.fmt_ci(peers.mean_ci(ratios)[1:], '%.2f')} | "
                f"{peers.fmt_ci(peers.mean_ci(own)[1:], '%.1f')} | "
                f"{peers.fmt_ci(peers.mean_ci([r['compactions'] for r in mine])[1:], '%.1f')} | "
                f"{peers.fmt_ci(peers.mean_ci([r.get('compactions_in_run', 0) for r in mine])[1:], '%.1f')} | "
                f"{peers.fmt_ci(peers.mean_ci([r.get('compact_cpu_run_ms', 0) for r in mine])[1:], '%.1f')} | "
                f"{peers.fmt_ci(peers.mean_ci([r.get('compact_after_s', 0) for r in mine])[1:], '%.1f')} | "
                f"{peers.fmt_ci(peers.mean_ci(each)[1:], '%.2f')} |\n")


def twins(f, rows):
    """Old build against new: each system's per-round ratio to its @parent twin (the
    same round, workload and load), mean and 95% CI; 1 inside the CI: they match."""
    pairs = sorted({(r["workload"], r["system"]) for r in rows
                    if any(q["system"] == r["system"] + "@parent" for q in rows)})
    if not pairs:
        return
    keys = ["p999_us", "p99_us", "during", "run_p999_us", "duration_s"]
    f.write("\nThis build over PARENT's, per round (mean ± 95% CI of the ratio; 1 inside "
            "the CI: they match):\n\n| workload | system | " + " | ".join(keys) + " |\n" +
            "|---" * (2 + len(keys)) + "|\n")
    for wl, name in pairs:
        cells = []
        for k in keys:
            ratios = []
            for rnd in sorted({r["round"] for r in rows}):
                a = [r[k] for r in rows if (r["round"], r["workload"], r["system"]) ==
                     (rnd, wl, name)]
                b = [r[k] for r in rows if (r["round"], r["workload"], r["system"]) ==
                     (rnd, wl, name + "@parent")]
                if a and b and b[0]:
                    ratios.append(a[0] / b[0])
            _, m, c = peers.mean_ci(ratios)
            cells.append(peers.fmt_ci((m, c), "%.2f"))
        f.write(f"| {wl} | {name} | " + " | ".join(cells) + " |\n")


def plot(out, summary, header):
    """p99.9 in the seconds snapshots ran, per system with snapshots; where none took
    any (ccvm-none beside ccvm-none+idle), the whole run phase's."""
    snaps = [s for s in summary if SYSTEMS[s["system"]][1]]
    key, when = "p999_us", "in the seconds a snapshot ran"
    if not snaps:
        snaps, key, when = list(summary), "run_p999_us", "over the whole run phase"
    if not snaps:
        return
    dat = os.path.join(out, "redis_peers.dat")
    with open(dat, "w") as f:
        for i, s in enumerate(snaps):
            m, c = s[key]
            f.write(f"{i} {s['workload']}:{s['system']} {m / 1000:g} "
                    f"{0 if math.isnan(c) else c / 1000:g}\n")
    script = f"""set terminal pngcairo noenhanced size 1000,450 font ",9"
set output "{out}/redis_peers.png"
set title "Redis, open loop: p99.9 latency {when} (mean, 95% CI)\\n{header[:110]}"
set style fill solid 0.5
set boxwidth 0.6
set xrange [-0.6:{len(snaps) - 0.4}]
set xtics rotate by -45
set logscale y
set ylabel "p99.9 (ms, from intended start)"
plot "{dat}" using 1:3:4:xtic(2) with boxerrorbars notitle
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=False)
    os.unlink(dat)


def main():
    try:
        cfg = settings()
        rounds = int(env_float("ROUNDS", 5))
        wls = peers.pick_names(os.environ.get("WORKLOADS", "ycsb-a ycsb-b"),
                               ["ycsb-a", "ycsb-b"], "WORKLOADS")
        names = peers.pick_names(os.environ.get("SYSTEMS", " ".join(SYSTEMS)), list(SYSTEMS),
                                 "SYSTEMS")
        names = peers.runnable(names, SYSTEMS, BASELINE, "redis")
        for f in [YCSB] + ([peers.CCVM] if any(SYSTEMS[n][0] == "ccvm" for n in names) else []) \
                + ([os.path.join(PARENT, "ccvm")] if any(n.endswith("@parent") for n in names)
                   else []):
            if not os.path.exists(f):
                raise Failed(f"{f} is missing: build first (make bench-redis does)")
        out = os.environ.get("OUT") or peers.provenance.host_dir()
        os.makedirs(out, exist_ok=True)
        work = tempfile.mkdtemp(prefix="ccvm-redis.", dir=os.environ.get("IMGDIR") or "/var/tmp")
        rows = []
        try:
            target = int(env_float("TARGET", 0)) or calibrate(names, cfg, work)
            parent = (" parent " + subprocess.run(
                ["git", "-C", PARENT, "rev-parse", "--short", "HEAD"], capture_output=True,
                text=True).stdout.strip()) if PARENT else ""
            header = peers.provenance.line(
                rounds, f"records {cfg['records']} duration {cfg['duration']}s gap "
                f"{cfg['gap']}s (end to start) clients {cfg['clients']}{parent}")
            for rnd in range(1, rounds + 1):
                for wl in wls:
                    order = list(names)
                    random.Random(f"{rnd}-{wl}").shuffle(order)
                    got = {}
                    for k, name in enumerate(order):
                        print(f"redis: round {rnd}, {wl}, {name} ({k + 1}/{len(order)}), "
                              f"{target} ops/s", file=sys.stderr)
                        d = os.path.join(work, f"{name}-{wl}-r{rnd}")
                        os.makedirs(d)
                        got[name] = one_run(name, wl, cfg, d, target)
                    for name in order:
                        m = got[name]
                        base = got[BASELINE[SYSTEMS[name][0]]]["ops_per_s"]
                        m["during"] = m["ops_per_s_in"] / base if base else 0.0
                        # Work not done by the end, in seconds of the baseline's pace.
                        m["lost_s"] = ((cfg["duration"] - m["ops_per_s"] * cfg["duration"] /
                                        base) / m["snapshots"]
                                       if base and m["snapshots"] else 0.0)
                        rows.append(dict(m, round=rnd, workload=wl, system=name))
        except (Failed, subprocess.TimeoutExpired, OSError):
            if rows:  # the rounds that finished are kept, marked as such
                write_outputs(out, header + f"; STOPPED after {len(rows)} runs", rows, target)
            raise
        finally:
            subprocess.run(["rm", "-rf", work], check=False)
        write_outputs(out, header, rows, target)
    except (Failed, subprocess.TimeoutExpired, OSError) as e:
        print(f"redis: {e}", file=sys.stderr)
        return 1
    print(f"redis: {len(rows)} runs measured; results in {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
