#!/usr/bin/env python3
"""peers.py - ccvm's snapshot policies and QEMU's live snapshots, side by side on zipfbench.

Every system runs the same workload: zipfbench's update loop (1 KiB blocks, Zipf ranks
with --scatter, the same seed), in ccvm as the Linux program guest/zipfbench, in QEMU as
the bare-metal guest bench/peers/guest (the same blocks in the same order; its checksum
equals zipfbench's). One driver takes every system's snapshots on one cadence: the first
GAP seconds after the measured period starts, each next one GAP seconds after the
previous one ended. ccvm snapshots go through its control socket (`ctl snapshot --wait`,
the policy given to `run --snapshot-policy`, so the coverage tracker runs only for ccow);
QEMU's through QMP: `migrate` to a file with the background-snapshot capability
(userfaultfd write-protect) at QEMU's default bandwidth limit (qemu-bg) and unlimited
(qemu-bg-unlimited), and plain pre-copy migration, unlimited, as the pause-and-copy
family (qemu-precopy; the VM stops at the end and is resumed with `cont`; a run that
does not converge within its period is cancelled and reported so).

From each run: progress as the host sees it arrive (ccvm: zipfbench's report lines, every
REPORT_MS; QEMU: a byte on the debug console every CHUNK updates), snapshot windows as
the driver saw them start and end, the image's allocated size, and the PSS of the
process tree (monitor and children) every 50 ms. Per run:

  during      updates/s inside snapshot windows over the same system's no-snapshot rate
              (ccvm-none or qemu-none, same round)
  lost_s      work lost per snapshot, in seconds of that rate: (period - updates/rate)
              divided by the snapshots in the period; all slowdown counts, not only the
              windows'
  stall_ms    the longest interval without progress (resolution: one report or chunk,
              ~20 ms)
  duration_s  mean snapshot duration (the system's own figure: ccvm duration_ms, QEMU
              total-time)
  extra_mb    peak PSS during snapshots less the median PSS between the warm-up's end
              and the first snapshot
  image_mb    mean allocated size of an image

ROUNDS rounds (default 5; QUICK=1: 1 round of one workload), configurations shuffled
per round. Outputs in bench/results/HOST-CLASS (OUT): peers.csv (a row per run),
peers_summary.csv and
peers.md (mean and 95% CI per system and workload), peers.png; with QUICK=1 only
peers_quick.csv (columns system,workload,round,during,lost_s,stall_ms,duration_s,
extra_mb,image_mb; snapshot systems only). Every file records commit and machine.

Environment: ROUNDS, QUICK, SIZE (MiB, default 256), DURATION (measured seconds per run,
default 20; QUICK 12), GAP (default 1), WARMUP (default 2), ACCEL (kvm; tcg runs QEMU's
half under emulation: a check of this script, not a measurement; ccvm needs kvm),
SYSTEMS and WORKLOADS (space-separated subsets; `native` is zipfbench on the host, no
snapshots; ccvm-rounds, ccvm-eager and ccvm-lazy are ccvm-ccow with that --precopy,
ccvm-half ccvm-ccow with --snapshot-pool at half of SIZE, none of them run unless
named), OUT, IMGDIR.
"""
import atexit
import itertools
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(TOP, "bench"))
from ci95 import mean_ci  # noqa: E402
import provenance  # noqa: E402

CCVM = os.path.join(TOP, "ccvm")
ZIPFBENCH = os.path.join(TOP, "build", "guest", "zipfbench")
PEER_GUEST = os.path.join(TOP, "build", "peers", "zipfguest.bin")
QEMU = "qemu-system-x86_64"
QEMU_DEFAULT_BW = 128 << 20      # QEMU's default max-bandwidth (bytes/s)
UNLIMITED_BW = 1 << 40
CHUNK = 65536                    # updates per progress byte from the QEMU guest
REPORT_MS = 20                   # zipfbench's report period in ccvm: the same ~20 ms
PSS_PERIOD_S = 0.05
POLL_S = 0.01
SNAPSHOT_TIMEOUT_S = 900
# Guest RAM beyond the area: ccvm's process layout; the QEMU guest's 4 MiB below its
# area. Kept small for QEMU because its first snapshot backs all of a VM's untouched
# RAM with memory (seen under TCG: +59 MiB PSS for 64 MiB never touched).
GUEST_MIB_EXTRA = {"ccvm": 256, "qemu": 16}
COLUMNS_QUICK = ["system", "workload", "round", "during", "lost_s", "stall_ms",
                 "duration_s", "extra_mb", "image_mb"]
METRICS = COLUMNS_QUICK[3:]

SYSTEMS = {
    # name: (family, policy or QEMU mode)
    "native": ("native", None),
    "ccvm-none": ("ccvm", None), "ccvm-stop": ("ccvm", "stop"), "ccvm-cow": ("ccvm", "cow"),
    "ccvm-ccow": ("ccvm", "ccow"), "ccvm-fork": ("ccvm", "fork"),
    "qemu-none": ("qemu", None), "qemu-bg": ("qemu", "bg"),
    "qemu-bg-unlimited": ("qemu", "bg-unlimited"), "qemu-precopy": ("qemu", "precopy"),
    "ccvm-rounds": ("ccvm", "ccow"), "ccvm-half": ("ccvm", "ccow"),
    "ccvm-eager": ("ccvm", "ccow"), "ccvm-lazy": ("ccvm", "ccow"),
}
# Beyond the policy: ccow with --precopy rounds (memory written before the instant), and
# ccow with its pool capped at half the data ({half}: SIZE/2 MiB), the memory a snapshot
# may add in issue 31's zipfbench point.
EXTRA_ARGS = {"ccvm-rounds": ["--precopy", "rounds"], "ccvm-eager": ["--precopy", "eager"],
              "ccvm-lazy": ["--precopy", "lazy"],
              "ccvm-half": ["--snapshot-pool", "{half}M"]}
BASELINE = {"native": "native", "ccvm": "ccvm-none", "qemu": "qemu-none"}


class Failed(Exception):
    pass


def env_float(name, default):
    v = os.environ.get(name)
    try:
        return float(v) if v else default
    except ValueError:
        raise Failed(f"{name}={v}: not a number")


class Progress:
    """Cumulative updates against host time, from a reader thread."""

    def __init__(self):
        self.points = []          # (monotonic seconds, cumulative updates)
        self.ready = threading.Event()
        self.lock = threading.Lock()

    def add(self, updates):
        with self.lock:
            self.points.append((time.monotonic(), updates))
        self.ready.set()

    def at(self, t):
        """Updates done by time t, linear between the two points around it."""
        with self.lock:
            pts = list(self.points)
        if not pts or t <= pts[0][0]:
            return pts[0][1] if pts else 0
        for (t0, u0), (t1, u1) in zip(pts, pts[1:]):
            if t0 <= t <= t1:
                return u0 + (u1 - u0) * (t - t0) / (t1 - t0) if t1 > t0 else u1
        return pts[-1][1]

    def longest_gap(self, start, end):
        """The longest time in [start, end] without a progress point; the period's ends
        count, so a guest that stops before the end shows the stall."""
        with self.lock:
            ts = [start] + [t for t, _ in self.points if start < t < end] + [end]
        return max(b - a for a, b in zip(ts, ts[1:]))


def read_qemu_progress(stream, prog, log):
    """The guest's debug console: 'R' ready, '.' per CHUNK updates, anything else text."""
    n = 0
    while True:
        b = stream.read(1)
        if not b:
            return
        if b == b".":
            n += CHUNK
            prog.add(n)
        elif b == b"R":
            prog.add(0)
        else:
            log.append(b)


def read_zipfbench_reports(stream, prog, log):
    """zipfbench's 'report t=.. updates_per_s=.. updates=N' lines, through ccvm."""
    for line in iter(stream.readline, b""):
        text = line.decode(errors="replace")
        if text.startswith("report ") and " updates=" in text:
            prog.add(int(text.rsplit(" updates=", 1)[1].split()[0]))
        else:
            log.append(text)


def tree_pids(pid):
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return pids


def pss_kib(pid):
    total = 0
    for p in tree_pids(pid):
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            pass
    return total


class PssSampler(threading.Thread):
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.samples, self.stop = pid, [], threading.Event()

    def run(self):
        while not self.stop.is_set():
            self.samples.append((time.monotonic(), pss_kib(self.pid)))
            self.stop.wait(PSS_PERIOD_S)


class Qmp:
    def __init__(self, path, deadline, run):
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX)
                self.sock.connect(path)
                break
            except OSError:
                self.sock.close()
                if run.proc.poll() is not None:
                    raise Failed(f"{run.name}: QEMU did not start: {describe_exit(run)}")
                if time.monotonic() > deadline:
                    raise Failed(f"{run.name}: QMP socket {path} did not come up")
                time.sleep(0.05)
        self.file = self.sock.makefile("rwb")
        self._read()  # greeting
        self.cmd("qmp_capabilities")

    def _read(self):
        while True:
            try:
                line = self.file.readline()
            except OSError as e:
                raise Failed(f"QMP: {e}")
            if not line:
                raise Failed("QEMU closed its QMP socket")
            msg = json.loads(line)
            if "event" not in msg:
                return msg

    def cmd(self, name, args=None):
        req = {"execute": name}
        if args:
            req["arguments"] = args
        try:
            self.file.write(json.dumps(req).encode() + b"\n")
            self.file.flush()
        except OSError as e:
            raise Failed(f"QMP {name}: {e}")
        reply = self._read()
        if "error" in reply:
            raise Failed(f"QMP {name}: {reply['error'].get('desc')}")
        return reply.get("return")

    def close(self):
        self.sock.close()


def allocated_bytes(path):
    try:
        return os.stat(path).st_blocks * 512
    except OSError:
        return 0


_sock_dir = None
_sock_seq = itertools.count(1)


def socket_path(name):
    """A fresh path for a Unix socket, in a directory of this run's own under /tmp.
    Sockets never go beside the images: IMGDIR and /var/tmp may be 9p shares, which
    take no socket (scripts/kvm-in-tcg.sh), and a long IMGDIR can pass sun_path's
    108 bytes. /tmp itself, not $TMPDIR, since kvm-in-tcg shares a TMPDIR over 9p too."""
    global _sock_dir
    if _sock_dir is None:
        _sock_dir = tempfile.mkdtemp(prefix="ccvm-sock.", dir="/tmp")
        atexit.register(shutil.rmtree, _sock_dir, True)
    return os.path.join(_sock_dir, f"{name}-{next(_sock_seq)}.sock")


class Run:
    """One system on one workload: starts it, waits for the updates to start."""

    def __init__(self, name, cfg, work):
        self.name, self.cfg, self.work = name, cfg, work
        self.family, self.mode = SYSTEMS[name]
        self.prog, self.log = Progress(), []
        self.windows, self.durations, self.images = [], [], []
        self.skipped = None
        self.proc = None

    def err_file(self):
        """The system's stderr goes to a file: a pipe nobody reads while the run lasts
        could fill and block it."""
        self.err_path = os.path.join(self.work, "stderr.log")
        return open(self.err_path, "wb")

    def image_path(self, i):
        return os.path.join(self.work, f"{self.name}-{i}.img")

    def record_image(self, path):
        self.images.append(allocated_bytes(path))
        try:
            os.unlink(path)
        except OSError:
            pass


def ccvm_snapshot(sock, path, who):
    """One live snapshot through ccvm's control socket, its figures once it is done."""
    r = subprocess.run([CCVM, "ctl", sock, "snapshot", path, "--wait"], capture_output=True,
                       text=True, timeout=SNAPSHOT_TIMEOUT_S)
    if r.returncode:
        raise Failed(f"{who}: ctl snapshot: {(r.stderr or r.stdout).strip()}")
    fig = json.loads(r.stdout.strip().splitlines()[-1])
    if fig.get("state") != "done":
        raise Failed(f"{who}: snapshot {fig.get('state')}: {fig.get('error')}")
    return fig


def zipfbench_args(c):
    args = [ZIPFBENCH, "--size", f"{c['size']}M", "--alpha", str(c["alpha"]),
            "--seed", str(c["seed"]), "--duration", str(c["run_s"]),
            "--report-ms", str(REPORT_MS), "--threads", str(c["threads"])]
    return args + (["--scatter"] if c["scatter"] else [])


class NativeRun(Run):
    """zipfbench on the host, transparent huge pages asked for as guest RAM has them."""

    def start(self):
        self.proc = subprocess.Popen(zipfbench_args(self.cfg) + ["--hugepages"],
                                     stdout=subprocess.PIPE, stderr=self.err_file(),
                                     stdin=subprocess.DEVNULL)
        threading.Thread(target=read_zipfbench_reports, args=(self.proc.stdout, self.prog,
                                                              self.log), daemon=True).start()

    def stop(self):
        stop_process(self.proc)


class CcvmRun(Run):
    def start(self):
        c = self.cfg
        self.sock = socket_path(f"{self.name}-ctl")
        args = [CCVM, "run", "--mem", f"{c['size'] + GUEST_MIB_EXTRA['ccvm']}M",
                "--control", self.sock, "--image-dir", self.work]
        if self.mode:
            args += ["--snapshot-policy", self.mode]
        args += [a.format(half=c["size"] // 2) for a in EXTRA_ARGS.get(self.name, [])]
        self.proc = subprocess.Popen(args + ["--"] + zipfbench_args(c), stdout=subprocess.PIPE,
                                     stderr=self.err_file(), stdin=subprocess.DEVNULL)
        threading.Thread(target=read_zipfbench_reports, args=(self.proc.stdout, self.prog,
                                                              self.log), daemon=True).start()

    def snapshot(self, i):
        path = self.image_path(i)
        fig = ccvm_snapshot(self.sock, path, self.name)
        # From the request: a pre-copy's rounds (presave_ms) come before the pause
        self.durations.append((fig["duration_ms"] + fig.get("presave_ms", 0)) / 1000)
        self.record_image(path)

    def stop(self):
        stop_process(self.proc)


class QemuRun(Run):
    def start(self):
        c = self.cfg
        if c["threads"] != 1:
            self.skipped = "the QEMU guest has one vCPU"
            return
        self.qmp_path = socket_path(f"{self.name}-qmp")
        append = (f"size={c['size']}M alpha={c['alpha']} scatter={int(c['scatter'])} "
                  f"seed={c['seed']} chunk={CHUNK}")
        accel = c["accel"]
        # -arch-capabilities: on KVM hosts like ours QEMU cannot set MSR 0x10a
        # (IA32_ARCH_CAPABILITIES) and refuses to start with plain -cpu host.
        cpu = "host,-arch-capabilities" if accel == "kvm" else "max"
        args = [QEMU, "-accel", accel, "-cpu", cpu,
                "-m", f"{c['size'] + GUEST_MIB_EXTRA['qemu']}M", "-smp", "1",
                "-nodefaults", "-display", "none", "-no-reboot",
                "-kernel", PEER_GUEST, "-append", append, "-debugcon", "stdio",
                "-device", "isa-debug-exit,iobase=0xf4,iosize=4",
                "-qmp", f"unix:{self.qmp_path},server=on,wait=off"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.err_file(),
                                     stdin=subprocess.DEVNULL)
        threading.Thread(target=read_qemu_progress, args=(self.proc.stdout, self.prog,
                                                          self.log), daemon=True).start()
        self.qmp = Qmp(self.qmp_path, time.monotonic() + 30, self)
        bg = self.mode in ("bg", "bg-unlimited")
        if self.mode:
            self.qmp.cmd("migrate-set-capabilities", {"capabilities": [
                {"capability": "background-snapshot", "state": bg}]})
            bw = QEMU_DEFAULT_BW if self.mode == "bg" else UNLIMITED_BW
            self.qmp.cmd("migrate-set-parameters", {"max-bandwidth": bw})

    def snapshot(self, i, deadline):
        path = self.image_path(i)
        self.qmp.cmd("migrate", {"uri": f"exec:cat > {path}"})
        while True:
            st = self.qmp.cmd("query-migrate")
            status = st.get("status")
            if status == "completed":
                break
            if status in ("failed", "cancelled"):
                raise Failed(f"{self.name}: migration {status}: {st.get('error-desc')}")
            if time.monotonic() > deadline:
                self.qmp.cmd("migrate_cancel")
                self.wait_cancelled()
                self.record_image(path)
                return False
            time.sleep(POLL_S)
        if self.mode == "precopy":
            self.qmp.cmd("cont")   # pre-copy leaves the VM stopped at the end
        self.durations.append(st.get("total-time", 0) / 1000)
        self.record_image(path)
        return True

    def wait_cancelled(self):
        for _ in range(1000):
            if self.qmp.cmd("query-migrate").get("status") != "cancelling":
                break
            time.sleep(POLL_S)
        if self.qmp.cmd("query-status").get("status") != "running":
            self.qmp.cmd("cont")

    def stop(self):
        if getattr(self, "qmp", None):
            try:
                self.qmp.cmd("quit")
            except (Failed, OSError):
                pass
            self.qmp.close()
        stop_process(self.proc)


def stop_process(proc):
    if not proc or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def drive(run):
    """Start, warm up, take snapshots on the cadence, measure; fills run's fields."""
    c = run.cfg
    try:
        run.start()
    except BaseException:
        run.stop()  # a QEMU whose QMP never answered is still running
        raise
    if run.skipped:
        return
    sampler = PssSampler(run.proc.pid)
    sampler.start()
    try:
        if not run.prog.ready.wait(c["boot_timeout"]):
            raise Failed(f"{run.name}: no progress within {c['boot_timeout']:.0f} s: "
                         f"{describe_exit(run)}")
        t0 = time.monotonic() + c["warmup"]
        t1 = t0 + c["duration"]
        time.sleep(max(0.0, t0 + c["gap"] - time.monotonic()))
        i = 0
        while run.mode and time.monotonic() < t1:
            s = time.monotonic()
            if run.family == "qemu":
                done = run.snapshot(i, max(t1, s + c["gap"] + 5))
            else:
                run.snapshot(i)
                done = True
            e = time.monotonic()
            if not done:
                run.skipped = f"did not converge in {time.monotonic() - s:.0f} s (cancelled)"
                break
            run.windows.append((s, e))
            i += 1
            if run.proc.poll() is not None:
                raise Failed(f"{run.name}: the VM ended during snapshots: {describe_exit(run)}")
            time.sleep(c["gap"])
        time.sleep(max(0.0, t1 - time.monotonic()))
        if run.proc.poll() is not None:
            raise Failed(f"{run.name}: the VM ended early: {describe_exit(run)}")
        run.period = (t0, max(t1, run.windows[-1][1] if run.windows else t1))
    finally:
        sampler.stop.set()
        sampler.join()
        run.pss = sampler.samples
        run.stop()


def describe_exit(run):
    rc = run.proc.poll()
    try:
        err = open(run.err_path, errors="replace").read()
    except (OSError, AttributeError):
        err = ""
    text = "".join(x if isinstance(x, str) else x.decode(errors="replace") for x in run.log)
    return f"exit {rc}; {(err + text).strip()[-400:]}"


def rate(run):
    t0, t1 = run.period
    return (run.prog.at(t1) - run.prog.at(t0)) / (t1 - t0)


def metrics(run, base):
    if base <= 0:
        raise Failed(f"{run.name}: its baseline made no progress")
    t0, t1 = run.period
    done = run.prog.at(t1) - run.prog.at(t0)
    n = len(run.windows)
    win_s = sum(e - s for s, e in run.windows)
    win_u = sum(run.prog.at(e) - run.prog.at(s) for s, e in run.windows)
    # After the warm-up, before the first snapshot: the guest's memory all touched.
    before = [k for t, k in run.pss if t0 <= t < (run.windows[0][0] if n else t1)]
    during = [k for t, k in run.pss for s, e in run.windows if s <= t <= e]
    pss0 = statistics.median(before) if before else 0
    return {
        "updates_per_s": done / (t1 - t0),
        "during": (win_u / win_s) / base if n and win_s > 0 else 1.0,
        "lost_s": ((t1 - t0) - done / base) / n if n else 0.0,
        "stall_ms": 1000 * run.prog.longest_gap(t0, t1),
        "duration_s": statistics.mean(run.durations) if run.durations else 0.0,
        "extra_mb": max(0, max(during, default=pss0) - pss0) / 1024,
        "image_mb": statistics.mean(run.images) / (1 << 20) if run.images else 0.0,
        "snapshots": n,
    }


def workloads(quick):
    base = {"seed": 7, "scatter": True, "threads": 1}
    every = [dict(base, name="zipf-a0.9", alpha=0.9), dict(base, name="zipf-a0.99", alpha=0.99),
             dict(base, name="zipf-a1.2", alpha=1.2),
             dict(base, name="zipf-a0.99-t4", alpha=0.99, threads=4)]
    known = [w["name"] for w in every]
    names = pick_names(os.environ.get("WORKLOADS", "zipf-a0.99" if quick else " ".join(known)),
                       known, "WORKLOADS")
    return [w for w in every if w["name"] in names]


def machine_line(accel, rounds, detail):
    """A results file's provenance, with QEMU's version and accelerator."""
    qemu = provenance.sh(QEMU, "--version").splitlines()[0:1]
    return provenance.line(rounds, f"{qemu[0] if qemu else 'no QEMU'} accel {accel}; {detail}")


def settings(quick):
    c = {"size": int(env_float("SIZE", 256)), "gap": env_float("GAP", 1.0),
         "warmup": env_float("WARMUP", 2.0),
         "duration": env_float("DURATION", 12.0 if quick else 20.0),
         "accel": os.environ.get("ACCEL", "kvm"), "boot_timeout": 120.0}
    if c["accel"] not in ("kvm", "tcg"):
        raise Failed(f"ACCEL={c['accel']}: kvm or tcg")
    if c["size"] < 1 or c["duration"] <= 0 or c["gap"] < 0 or c["warmup"] < 0:
        raise Failed("SIZE (MiB) and DURATION must be positive, GAP and WARMUP not negative")
    c["run_s"] = int(c["warmup"] + c["duration"]) + 120  # the driver stops it first
    return c


def pick_names(value, known, what):
    """The space-separated names in @value, each one of @known."""
    names = value.split()
    bad = [n for n in names if n not in known]
    if bad:
        raise Failed(f"{what}: unknown {' '.join(bad)} (known: {' '.join(known)})")
    return names


def runnable(names, systems, baseline, who):
    """@names less ccvm's where there is no /dev/kvm (said on stderr), plus each
    family's baseline, which `during` and `lost_s` are measured against."""
    if not os.path.exists("/dev/kvm"):
        dropped = [n for n in names if systems[n][0] == "ccvm"]
        if dropped:
            print(f"{who}: no /dev/kvm, leaving out {' '.join(dropped)}", file=sys.stderr)
        names = [n for n in names if systems[n][0] != "ccvm"]
    for fam in sorted({systems[n][0] for n in names}):
        if baseline[fam] not in names:
            names.append(baseline[fam])
    return names


def pick_systems(accel, quick):
    # QUICK's file has the snapshot systems only: native would cost time for nothing.
    default = [n for n in SYSTEMS if not (quick and n == "native") and n not in EXTRA_ARGS]
    names = pick_names(os.environ.get("SYSTEMS", " ".join(default)), list(SYSTEMS), "SYSTEMS")
    vms = [n for n in names if SYSTEMS[n][0] != "native"]
    if not os.path.exists("/dev/kvm") and accel == "kvm" and vms:
        raise Failed("no /dev/kvm: the peers benchmark measures VMs under KVM "
                     "(ACCEL=tcg runs QEMU's half under emulation, to check the scripts)")
    names = runnable(names, SYSTEMS, BASELINE, "peers")
    needs = {"native": [ZIPFBENCH], "ccvm": [CCVM, ZIPFBENCH], "qemu": [PEER_GUEST]}
    for fam in {SYSTEMS[n][0] for n in names}:
        for f in needs[fam]:
            if not os.path.exists(f):
                raise Failed(f"{f} is missing: build first (make bench-peers does)")
    return names


def run_round(rnd, wl, names, cfg, imgdir, rows, notes):
    order = list(names)
    random.Random(f"{rnd}-{wl['name']}").shuffle(order)
    runs = {}
    for k, name in enumerate(order):
        print(f"peers: round {rnd}, {wl['name']}, {name} ({k + 1}/{len(order)})", file=sys.stderr)
        work = os.path.join(imgdir, f"{name}-r{rnd}")
        os.makedirs(work, exist_ok=True)
        family = SYSTEMS[name][0]
        run = {"native": NativeRun, "ccvm": CcvmRun, "qemu": QemuRun}[family](
            name, dict(cfg, **wl), work)
        drive(run)
        if run.skipped:
            notes.append(f"{name} on {wl['name']}, round {rnd}: {run.skipped}")
            continue
        runs[name] = run
    for name in order:
        run = runs.get(name)
        base = runs.get(BASELINE[SYSTEMS[name][0]])
        if not run or not base:
            continue
        m = metrics(run, rate(base))
        rows.append(dict(m, system=name, workload=wl["name"], round=rnd))


def summarise(rows, systems, metrics):
    """Per (workload, system), in the table's system order: n and (mean, 95% CI) of
    each of @metrics over the rounds."""
    keys = sorted({(r["workload"], r["system"]) for r in rows},
                  key=lambda k: (k[0], list(systems).index(k[1])))
    out = []
    for wl, sysname in keys:
        rs = [r for r in rows if r["workload"] == wl and r["system"] == sysname]
        rec = {"workload": wl, "system": sysname, "n": len(rs)}
        for k in metrics:
            rec[k] = mean_ci([r[k] for r in rs])[1:]
        out.append(rec)
    return out


def write_csvs(runs_path, summary_path, header, rows, cols, summary, metrics):
    """A row per run (@cols), and the summary's mean and CI per metric."""
    with open(runs_path, "w") as f:
        f.write(f"# {header}\n" + ",".join(cols) + "\n")
        for r in rows:
            f.write(",".join(str(r[k]) if isinstance(r[k], (str, int)) else "%.6g" % r[k]
                             for k in cols) + "\n")
    with open(summary_path, "w") as f:
        f.write(f"# {header}\nworkload,system,n," +
                ",".join(f"{k}_mean,{k}_ci95" for k in metrics) + "\n")
        for s in summary:
            f.write(f"{s['workload']},{s['system']},{s['n']}," +
                    ",".join("%.6g,%.6g" % s[k] for k in metrics) + "\n")


def fmt_ci(pair, fmt):
    m, ci = pair
    return fmt % m + ("" if ci != ci else " ± " + fmt % ci)


def write_outputs(out, header, rows, notes, quick):
    if quick:
        with open(os.path.join(out, "peers_quick.csv"), "w") as f:
            f.write(f"# {header}\n")
            f.write(",".join(COLUMNS_QUICK) + "\n")
            for r in rows:
                if SYSTEMS[r["system"]][1] is None:
                    continue
                f.write(",".join([r["system"], r["workload"], str(r["round"])] +
                                 ["%.6g" % r[k] for k in METRICS]) + "\n")
        return
    cols = ["round", "workload", "system", "updates_per_s", "snapshots"] + METRICS
    summary = summarise(rows, SYSTEMS, ["updates_per_s"] + METRICS)
    write_csvs(os.path.join(out, "peers.csv"), os.path.join(out, "peers_summary.csv"), header,
               rows, cols, summary, ["updates_per_s"] + METRICS)
    with open(os.path.join(out, "peers.md"), "w") as f:
        f.write(f"Peers (bench/peers/peers.py): {header}\n\n"
                "Mean ± 95% CI over the rounds. *during*: updates/s inside snapshots over the "
                "same system's rate without snapshots; *lost*: seconds of that rate lost per "
                "snapshot over the whole run; *stall*: longest interval without progress; "
                "*extra*: peak PSS during snapshots less before.\n\n"
                "| workload | system | n | updates/s | during | lost s | stall ms | "
                "duration s | extra MiB | image MiB |\n|---|---|---|---|---|---|---|---|---|---|\n")
        for s in summary:
            f.write(f"| {s['workload']} | {s['system']} | {s['n']} | "
                    f"{fmt_ci(s['updates_per_s'], '%.3g')} | {fmt_ci(s['during'], '%.2f')} | "
                    f"{fmt_ci(s['lost_s'], '%.2f')} | {fmt_ci(s['stall_ms'], '%.0f')} | "
                    f"{fmt_ci(s['duration_s'], '%.2f')} | {fmt_ci(s['extra_mb'], '%.0f')} | "
                    f"{fmt_ci(s['image_mb'], '%.0f')} |\n")
        for n in notes:
            f.write(f"\n- {n}")
        f.write("\n")
    plot(out, summary, header)


def plot(out, summary, header):
    snaps = [s for s in summary if SYSTEMS[s["system"]][1] is not None]
    if not snaps:
        return
    dat = os.path.join(out, "peers.dat")
    with open(dat, "w") as f:
        for i, s in enumerate(snaps):
            m, ci = s["during"]
            f.write(f"{i} {s['workload']}:{s['system']} {m:g} {0 if ci != ci else ci:g}\n")
    script = f"""set terminal pngcairo size 1000,450 font ",9"
set output "{out}/peers.png"
set title "zipfbench --scatter: throughput during snapshots relative to none (mean, 95% CI)\\n{header[:110]}"
set style fill solid 0.5
set boxwidth 0.6
set xtics rotate by -45
set yrange [0:1.1]
set ylabel "during"
plot "{dat}" using 1:3:4:xtic(2) with boxerrorbars notitle
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=False)
    os.unlink(dat)


def main():
    quick = os.environ.get("QUICK") == "1"
    try:
        rounds = 1 if quick else int(env_float("ROUNDS", 5))
        cfg = settings(quick)
        names = pick_systems(cfg["accel"], quick)
        out = os.environ.get("OUT") or provenance.host_dir()
        os.makedirs(out, exist_ok=True)
        imgdir = os.environ.get("IMGDIR") or "/var/tmp"
        work = __import__("tempfile").mkdtemp(prefix="ccvm-peers.", dir=imgdir)
        header = machine_line(cfg["accel"], rounds,
                              f"size {cfg['size']}M gap {cfg['gap']}s (end to start) warmup "
                              f"{cfg['warmup']}s duration {cfg['duration']}s")
        rows, notes, wls = [], [], workloads(quick)
        try:
            for rnd in range(1, rounds + 1):
                for wl in wls:
                    run_round(rnd, wl, names, cfg, work, rows, notes)
        except (Failed, subprocess.TimeoutExpired, OSError):
            if rows:  # the runs that finished are kept, marked as such
                write_outputs(out, header + f"; STOPPED after {len(rows)} runs", rows, notes,
                              quick)
            raise
        finally:
            subprocess.run(["rm", "-rf", work], check=False)
        write_outputs(out, header, rows, notes, quick)
    except (Failed, subprocess.TimeoutExpired, OSError) as e:
        print(f"peers: {e}", file=sys.stderr)
        return 1
    for n in notes:
        print(f"peers: {n}", file=sys.stderr)
    print(f"peers: {len(rows)} runs measured; results in {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
