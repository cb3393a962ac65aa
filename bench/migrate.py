#!/usr/bin/env python3
"""migrate.py - live migration on loopback: ccvm's pre-copy against QEMU's (issue 34).

Two workloads (WORKLOADS, default "zipfbench redis"): zipfbench, below, beside QEMU; and
Redis under YCSB A in open loop, ccvm only (bench/migrate_redis.py says how).

Every system moves a VM running zipfbench's update loop (1 KiB blocks, Zipf ranks with
--scatter, the same seed) from one process to another on this machine over TCP on
127.0.0.1: ccvm from `ccvm run --control` to `ccvm restore --incoming tcp:...` through
`ctl migrate --wait`, QEMU from one qemu-system-x86_64 to another started with
`-incoming tcp:...` through QMP `migrate`, the peer guest being bench/peers/guest (the
same blocks in the same order). Both sides get the same care: the downtime target of
300 ms (ccvm's --downtime-ms default, QEMU's downtime-limit set to it), no bandwidth
limit (QEMU's default of 128 MiB/s lifted), the source started with the same RAM.

Systems:
  ccvm-coverage       ctl migrate (coverage order, hot pages deferred; --postcopy never)
  ccvm-address        ctl migrate --order address (a plain pre-copy, in the same run)
  ccvm-stopcopy       ctl migrate --max-rounds 0 (pause and copy)
  ccvm-postcopy-auto  ctl migrate --postcopy auto (post-copy when the rounds do not converge)
  ccvm-postcopy-now   ctl migrate --postcopy now (post-copy at once)
  ccvm-tls            ccvm-coverage over TLS 1.3 (x509, credentials made by
                      tests/tls/make-creds.sh): the cost of TLS beside plain
  ccvm-tls-psk        the same with a pre-shared key (keys.psk) instead of certificates
  qemu-precopy        QEMU pre-copy migration, downtime-limit 300 ms, unlimited bandwidth
  qemu-precopy-prealloc  the same, the destination started with -mem-prealloc: its RAM
                      faulted in before the migration, as ccvm's destination does on
                      the source's plan (first touch is slow on this host)
QEMU's own post-copy (postcopy-ram) is not run: its peer guest's RAM would need
userfaultfd on shared memory set up the way QEMU wants, not tried here.

From each run, progress as the host sees it arrive (ccvm: zipfbench's report lines every
REPORT_MS from the source, then from the destination; QEMU: a byte on each side's debug
console every CHUNK updates):
  downtime_ms     the last progress seen from the source before the switch to the first
                  seen from the destination (resolution: one report or chunk, ~20 ms)
  own_downtime_ms the system's own figure (ccvm downtime_ms: pause to RUNNING; QEMU
                  downtime)
  total_s         from the migrate command to its completion
  bytes_over_ram  bytes sent over the VM's RAM size (ccvm bytes; QEMU ram.transferred)
  during          updates/s while migrating over the rate in the WARMUP seconds before
  after           updates/s on the destination in its first AFTER seconds, over the same
                  rate (post-copy's cost: pages still arriving)
  rounds          ccvm's pre-copy rounds; QEMU's dirty-sync-count

ROUNDS rounds (default 5; QUICK=1: 1), systems shuffled per round. Outputs in
bench/results/HOST-CLASS (OUT): migrate.csv (a row per run), migrate_summary.csv and migrate.md
(mean and 95% CI), migrate.png, and the same named migrate_redis*; with QUICK=1 only
migrate_quick.csv and migrate_redis_quick.csv. Every file records commit and machine. Environment: ROUNDS, QUICK, SIZE (MiB of zipfbench data, default
1024), ALPHA (0.99), WARMUP (seconds before migrating, default 8), AFTER (seconds of
destination progress kept, default 3), ACCEL (kvm; tcg runs QEMU under emulation: a
check of this script, not a measurement; ccvm needs kvm), SYSTEMS, OUT, PORT (the first
run's port, one up for each next; default: a free one below the ephemeral range).
"""
import itertools
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(TOP, "bench"))
sys.path.insert(0, os.path.join(TOP, "bench", "peers"))
from ci95 import mean_ci  # noqa: E402
import peers  # noqa: E402
from peers import Failed, Progress, Qmp, read_qemu_progress, read_zipfbench_reports  # noqa: E402
from peers import stop_process, env_float  # noqa: E402
import migrate_redis  # noqa: E402
from redis import free_port  # noqa: E402

CCVM, ZIPFBENCH, PEER_GUEST, QEMU = peers.CCVM, peers.ZIPFBENCH, peers.PEER_GUEST, peers.QEMU
CHUNK, REPORT_MS = peers.CHUNK, peers.REPORT_MS
DOWNTIME_MS = 300
MIGRATE_TIMEOUT_S = migrate_redis.MIGRATE_TIMEOUT_S
BOOT_TIMEOUT_S = 120
SYSTEMS = {"ccvm-coverage": ("ccvm", []), "ccvm-address": ("ccvm", ["--order", "address"]),
           "ccvm-stopcopy": ("ccvm", ["--max-rounds", "0"]),
           "ccvm-postcopy-auto": ("ccvm", ["--postcopy", "auto"]),
           "ccvm-postcopy-now": ("ccvm", ["--postcopy", "now"]),
           "ccvm-tls": ("ccvm", ["--tls-creds", "TLS"]),
           "ccvm-tls-psk": ("ccvm", ["--tls-creds", "PSK"]), "qemu-precopy": ("qemu", []),
           "qemu-precopy-prealloc": ("qemu", ["-mem-prealloc"])}
QMP_TIMES_WAIT_S = 5.0   # the longest to wait for a completed migration's times
METRICS = ["downtime_ms", "own_downtime_ms", "total_s", "bytes_over_ram", "during", "after",
           "rounds"]


class Side:
    """One process of a migration, its progress read from its output."""

    def __init__(self, args, reader, work, name, prog):
        self.name = name
        self.err_path = os.path.join(work, f"{name}.err")
        self.log = []
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                     stderr=open(self.err_path, "wb"))
        threading.Thread(target=reader, args=(self.proc.stdout, prog, self.log),
                         daemon=True).start()

    def describe(self):
        try:
            err = open(self.err_path, errors="replace").read()
        except OSError:
            err = ""
        text = "".join(x if isinstance(x, str) else x.decode(errors="replace") for x in self.log)
        return f"exit {self.proc.poll()}; {(err + text).strip()[-400:]}"


def wait_ready(prog, side, who):
    if not prog.ready.wait(BOOT_TIMEOUT_S):
        raise Failed(f"{who}: no progress within {BOOT_TIMEOUT_S} s: {side.describe()}")


TLS_CREDS = {}


def tls_creds(kind):
    """The credentials directory of KIND (x509 or psk) for ccvm-tls*, made once a run as
    a user would."""
    if "tmp" not in TLS_CREDS:
        TLS_CREDS["tmp"] = tempfile.TemporaryDirectory(prefix="ccvm-migrate-tls.")
        subprocess.run([os.path.join(TOP, "tests", "tls", "make-creds.sh"),
                        TLS_CREDS["tmp"].name], check=True, capture_output=True)
    return os.path.join(TLS_CREDS["tmp"].name, kind)


def run_ccvm(name, opts, cfg, work, port):
    src_prog, dst_prog = Progress(), Progress()
    sock = os.path.join(work, "ctl.sock")
    where = f"tcp:127.0.0.1:{port}"
    mem = f"{cfg['size'] + peers.GUEST_MIB_EXTRA['ccvm']}M"
    zb = [ZIPFBENCH, "--size", f"{cfg['size']}M", "--alpha", str(cfg["alpha"]), "--seed", "7",
          "--scatter", "--report-ms", str(REPORT_MS), "--duration", "3600"]
    src = Side([CCVM, "run", "--mem", mem, "--control", sock, "--"] + zb,
               read_zipfbench_reports, work, "src", src_prog)
    dst = None
    try:
        wait_ready(src_prog, src, name)
        if "--tls-creds" in opts:
            kind = {"TLS": "x509", "PSK": "psk"}[opts[opts.index("--tls-creds") + 1]]
            opts = [tls_creds(kind) if o in ("TLS", "PSK") else o for o in opts]
            channel = ["--tls-creds", tls_creds(kind)]
        else:
            channel = ["--insecure"]
        dst = Side([CCVM, "restore", "--incoming", where] + channel + ["--mem", mem,
                    "--rw", "none"], read_zipfbench_reports, work, "dst", dst_prog)
        time.sleep(cfg["warmup"])
        t0 = time.monotonic()
        fig, said = migrate_redis.ctl_migrate(sock, where, ["--downtime-ms", str(DOWNTIME_MS)]
                                              + opts)
        t1 = time.monotonic()
        if not fig.get("ok"):
            raise Failed(f"{name}: migrate: {said.strip()[-300:]}; "
                         f"source {src.describe()}; destination {dst.describe()}")
        wait_ready(dst_prog, dst, name + " destination")
        time.sleep(cfg["after"] + 0.5)
        return measure(src_prog, dst_prog, t0, t1, cfg, {
            "own_downtime_ms": fig["downtime_ms"], "total_s": fig["total_ms"] / 1000,
            "bytes_over_ram": fig["bytes_over_ram"], "rounds": fig["rounds"]})
    finally:
        stop_process(src.proc)
        if dst:
            stop_process(dst.proc)


def qemu_args(cfg, qmp, extra):
    accel = cfg["accel"]
    cpu = "host,-arch-capabilities" if accel == "kvm" else "max"
    append = f"size={cfg['size']}M alpha={cfg['alpha']} scatter=1 seed=7 chunk={CHUNK}"
    return [QEMU, "-accel", accel, "-cpu", cpu, "-m", f"{qemu_ram_mib(cfg)}M", "-smp", "1",
            "-nodefaults", "-display", "none", "-no-reboot", "-kernel", PEER_GUEST,
            "-append", append, "-debugcon", "stdio",
            "-device", "isa-debug-exit,iobase=0xf4,iosize=4",
            "-qmp", f"unix:{qmp},server=on,wait=off"] + extra


def qemu_ram_mib(cfg):
    return cfg["size"] + peers.GUEST_MIB_EXTRA["qemu"]


def run_qemu(name, opts, cfg, work, port):
    src_prog, dst_prog = Progress(), Progress()
    src_qmp, dst_qmp = os.path.join(work, "src.qmp"), os.path.join(work, "dst.qmp")
    src = Side(qemu_args(cfg, src_qmp, []), read_qemu_progress, work, "src", src_prog)
    dst = q_src = q_dst = None
    try:
        q_src = Qmp(src_qmp, time.monotonic() + 30, src)
        wait_ready(src_prog, src, name)
        dst = Side(qemu_args(cfg, dst_qmp, ["-incoming", f"tcp:127.0.0.1:{port}"] + opts),
                   read_qemu_progress, work, "dst", dst_prog)
        q_dst = Qmp(dst_qmp, time.monotonic() + 30, dst)
        q_src.cmd("migrate-set-parameters", {"max-bandwidth": peers.UNLIMITED_BW,
                                              "downtime-limit": DOWNTIME_MS})
        time.sleep(cfg["warmup"])
        t0 = time.monotonic()
        q_src.cmd("migrate", {"uri": f"tcp:127.0.0.1:{port}"})
        while True:
            st = q_src.cmd("query-migrate")
            if st.get("status") == "completed":
                break
            if st.get("status") in ("failed", "cancelled"):
                raise Failed(f"{name}: migration {st.get('status')}: {st.get('error-desc')}")
            if time.monotonic() - t0 > MIGRATE_TIMEOUT_S:
                raise Failed(f"{name}: did not converge in {MIGRATE_TIMEOUT_S} s")
            time.sleep(peers.POLL_S)
        t1 = time.monotonic()
        # QEMU reports "completed" a moment before it fills in the times (0 until then).
        times_due = t1 + QMP_TIMES_WAIT_S
        while not st.get("total-time") and time.monotonic() < times_due:
            time.sleep(peers.POLL_S)
            st = q_src.cmd("query-migrate")
        # The destination's dots count from zero again: they continue the source's.
        wait_ready(dst_prog, dst, name + " destination")
        time.sleep(cfg["after"] + 0.5)
        ram = st.get("ram", {})
        return measure(src_prog, dst_prog, t0, t1, cfg, {
            "own_downtime_ms": st.get("downtime", 0), "total_s": st.get("total-time", 0) / 1000,
            "bytes_over_ram": ram.get("transferred", 0) / (qemu_ram_mib(cfg) << 20),
            "rounds": ram.get("dirty-sync-count", 0)})
    finally:
        for q in (q_src, q_dst):
            if q:
                try:
                    q.cmd("quit")
                except (Failed, OSError):
                    pass
                q.close()
        stop_process(src.proc)
        if dst:
            stop_process(dst.proc)


def measure(src, dst, t0, t1, cfg, own):
    """Downtime from the host's view of progress, throughput while migrating."""
    with src.lock:
        last_src = max((t for t, _ in src.points if t <= t1), default=t0)
    with dst.lock:
        first_dst = min((t for t, _ in dst.points), default=t1)
    base = (src.at(t0) - src.at(t0 - cfg["warmup"] / 2)) / (cfg["warmup"] / 2)
    moved = src.at(last_src) - src.at(t0)
    during = moved / (last_src - t0) / base if base > 0 and last_src > t0 else 0.0
    done = dst.at(first_dst + cfg["after"]) - dst.at(first_dst)
    after = done / cfg["after"] / base if base > 0 else 0.0
    return dict(own, downtime_ms=max(0.0, first_dst - last_src) * 1000, during=during,
                after=after)


def settings(quick):
    return {"size": int(env_float("SIZE", 32 if quick else 1024)),
            "alpha": env_float("ALPHA", 0.99),
            "warmup": env_float("WARMUP", 2 if quick else 8),
            "after": env_float("AFTER", 1 if quick else 3),
            "accel": os.environ.get("ACCEL", "kvm")}


def pick_systems(accel):
    names = os.environ.get("SYSTEMS", " ".join(SYSTEMS)).split()
    for n in names:
        if n not in SYSTEMS:
            raise Failed(f"SYSTEMS: unknown '{n}' (known: {', '.join(SYSTEMS)})")
    if accel != "kvm":
        dropped = [n for n in names if SYSTEMS[n][0] == "ccvm"]
        if dropped:
            print(f"migrate: ACCEL={accel}: {', '.join(dropped)} left out (ccvm needs kvm)",
                  file=sys.stderr)
        names = [n for n in names if SYSTEMS[n][0] != "ccvm"]
    if not names:
        raise Failed("no system to run")
    return names


def pick_workloads(accel):
    wl = os.environ.get("WORKLOADS", "zipfbench redis").split()
    for w in wl:
        if w not in ("zipfbench", "redis"):
            raise Failed(f"WORKLOADS: unknown '{w}' (known: zipfbench, redis)")
    if accel != "kvm" and "redis" in wl:
        print(f"migrate: ACCEL={accel}: the Redis workload left out (ccvm needs kvm)",
              file=sys.stderr)
        wl = [w for w in wl if w != "redis"]
    if not wl:
        raise Failed("no workload to run")
    return wl


def summarise(rows, names, metrics=METRICS):
    out = []
    for n in names:
        mine = [r for r in rows if r["system"] == n]
        if mine:
            out.append(dict({"system": n, "n": len(mine)},
                            **{m: mean_ci([r[m] for r in mine])[1:] for m in metrics}))
    return out


def fmt(pair, f):
    m, ci = pair
    return f % m + ("" if ci != ci else " ± " + f % ci)


def write_md(path, intro, summary, cols):
    """@intro, then a table of @summary: @cols as (heading, metric, format, scale)."""
    with open(path, "w") as f:
        f.write(f"{intro}\n\n| system | n | " + " | ".join(c[0] for c in cols) + " |\n|" +
                "---|" * (len(cols) + 2) + "\n")
        for s in summary:
            f.write(f"| {s['system']} | {s['n']} | " + " | ".join(
                fmt((s[m][0] * k, s[m][1] * k), form) for _, m, form, k in cols) + " |\n")


def write_csvs(out, stem, header, rows, names, metrics, quick):
    """The rows (stem.csv, or stem_quick.csv) and, unless quick, their summary."""
    with open(os.path.join(out, f"{stem}_quick.csv" if quick else f"{stem}.csv"), "w") as f:
        f.write(f"# {header}\n" + ",".join(["round", "system"] + metrics) + "\n")
        for r in rows:
            f.write(",".join([str(r["round"]), r["system"]] + ["%.6g" % r[m] for m in metrics])
                    + "\n")
    if quick:
        return None
    summary = summarise(rows, names, metrics)
    with open(os.path.join(out, f"{stem}_summary.csv"), "w") as f:
        f.write(f"# {header}\nsystem,n," + ",".join(f"{m},{m}_ci95" for m in metrics) + "\n")
        for s in summary:
            f.write(f"{s['system']},{s['n']}," + ",".join("%.6g,%.6g" % s[m] for m in metrics)
                    + "\n")
    return summary


def write_outputs(out, header, rows, names, quick):
    summary = write_csvs(out, "migrate", header, rows, names, METRICS, quick)
    if quick:
        return
    write_md(os.path.join(out, "migrate.md"),
             f"Migration (bench/migrate.py): {header}\n\nMean ± 95% CI over the rounds. "
             "*downtime*: last progress on the source to first on the destination, as the "
             "host saw it; *own*: the system's own downtime figure; *bytes/RAM*: bytes sent "
             "over the VM's RAM; *during*: throughput while migrating over before; "
             "*after*: the destination's in its first seconds over the same.", summary,
             [("downtime ms", "downtime_ms", "%.0f", 1), ("own ms", "own_downtime_ms", "%.0f", 1),
              ("total s", "total_s", "%.2f", 1), ("bytes/RAM", "bytes_over_ram", "%.2f", 1),
              ("during", "during", "%.2f", 1), ("after", "after", "%.2f", 1),
              ("rounds", "rounds", "%.1f", 1)])
    write_tls_cost(os.path.join(out, "migrate.md"), rows)
    write_tls_cost(os.path.join(out, "migrate.md"), rows, tls="ccvm-tls-psk")
    plot(out, "migrate", summary, header, "zipfbench --scatter migrated on loopback",
         [("downtime_ms", "downtime (ms)"), ("bytes_over_ram", "bytes sent / RAM")])


def write_tls_cost(path, rows, tls="ccvm-tls", plain="ccvm-coverage"):
    """What TLS costs: per round, ccvm-tls's figure over ccvm-coverage's (run in the same
    round, in shuffled order), mean ± 95% CI. Nothing when either is missing."""
    by = {(r["round"], r["system"]): r for r in rows}
    pairs = [(by[(k, tls)], by[(k, plain)]) for k, n in by if n == tls and (k, plain) in by]
    if not pairs:
        return
    with open(path, "a") as f:
        f.write(f"\nTLS against plain, per round ({tls} / {plain}, {len(pairs)} pairs):\n\n"
                "| figure | ratio | 95% CI |\n|---|---|---|\n")
        for m in ("total_s", "own_downtime_ms", "downtime_ms", "during"):
            ratios = [a[m] / b[m] for a, b in pairs if b[m]]
            if ratios:
                mean, lo_hi = mean_ci(ratios)[1:]
                f.write(f"| {m} | {mean:.2f} | ± {lo_hi:.2f} |\n" if lo_hi == lo_hi else
                        f"| {m} | {mean:.2f} | (one pair) |\n")


def plot(out, stem, summary, header, title, panels):
    """Two bar charts side by side: @panels, (metric, axis label) each."""
    dat = os.path.join(out, f"{stem}.dat")
    with open(dat, "w") as f:
        for i, s in enumerate(summary):
            vals = [v for m, _ in panels for v in s[m]]
            f.write(f"{i} {s['system']} " + " ".join("%g" % (0 if v != v else v) for v in vals)
                    + "\n")
    script = f"""set terminal pngcairo size 1000,450 font ",9"
set output "{out}/{stem}.png"
set multiplot layout 1,2 title "{title} (mean, 95% CI)\\n{header[:110]}"
set style fill solid 0.5
set boxwidth 0.6
set xtics rotate by -30
set xrange [-0.6:{len(summary) - 0.4}]
set yrange [0:*]
set ylabel "{panels[0][1]}"
plot "{dat}" using 1:3:4:xtic(2) with boxerrorbars notitle
set ylabel "{panels[1][1]}"
plot "{dat}" using 1:5:6:xtic(2) with boxerrorbars notitle
unset multiplot
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=False)
    os.unlink(dat)


def write_redis(out, header, rows, names, used, quick):
    cfg = migrate_redis.settings(quick)
    header = (f"{header}; Redis {cfg['records']} YCSB records (used_memory "
              f"{used / (1 << 30):.2f} GiB) in a {cfg['mem']} VM, YCSB A open loop "
              f"{cfg['target']} ops/s, {cfg['clients']} clients, migration "
              f"{cfg['warmup']:g} s into {cfg['seconds']} s")
    summary = write_csvs(out, "migrate_redis", header, rows, names, migrate_redis.METRICS,
                         quick)
    if quick:
        return
    write_md(os.path.join(out, "migrate_redis.md"),
             f"Redis migrated under YCSB A (bench/migrate_redis.py): {header}\n\nMean ± "
             "95% CI over the rounds. *stall*: YCSB's longest time without an answer (the "
             "downtime a client sees); *own*: ccvm's pause to RUNNING; *during*: operations "
             "completed over offered in the seconds the migration overlapped; p99.9 and "
             "max over those seconds and the 2 after; *run p99.9*: the whole run phase's. "
             "No QEMU row: its peer guest has no Redis.", summary,
             [("stall ms", "stall_ms", "%.0f", 1), ("own ms", "own_downtime_ms", "%.0f", 1),
              ("total s", "total_s", "%.2f", 1), ("bytes/RAM", "bytes_over_ram", "%.2f", 1),
              ("during", "during", "%.2f", 1), ("p99.9 ms", "p999_us", "%.0f", 1e-3),
              ("max ms", "max_us", "%.0f", 1e-3), ("run p99.9 ms", "run_p999_us", "%.0f", 1e-3),
              ("errors", "errors", "%.0f", 1), ("reconnects", "reconnects", "%.1f", 1)])
    plot(out, "migrate_redis", summary, header, "Redis under YCSB A migrated on loopback",
         [("stall_ms", "longest stall (ms)"), ("p999_us", "p99.9 while migrating (us)")])


def port_source():
    """Each run's port: PORT, PORT+1, ... when given; else one nobody holds at the time,
    below the ephemeral range, where some connection's local end may sit (free_port)."""
    if os.environ.get("PORT"):
        given = itertools.count(int(env_float("PORT", 0)))
        return lambda: next(given)
    return free_port


def run_zipfbench(cfg, names, rounds, out, header, next_port, quick):
    rows = []
    for rnd in range(1, rounds + 1):
        order = list(names)
        random.shuffle(order)
        for n in order:
            family, opts = SYSTEMS[n]
            # TMPDIR or /tmp: control sockets live there (no images), and /var/tmp may be
            # a 9p share that takes no socket (scripts/kvm-in-tcg.sh).
            with tempfile.TemporaryDirectory(prefix="ccvm-migrate.") as work:
                run = run_ccvm if family == "ccvm" else run_qemu
                r = run(n, opts, cfg, work, next_port())  # fresh: the last may linger
            r.update(round=rnd, system=n)
            rows.append(r)
            print(f"migrate: round {rnd} {n}: " + ", ".join(
                f"{m} {r[m]:.3g}" for m in METRICS), file=sys.stderr)
    write_outputs(out, header, rows, names, quick)
    return len(rows)


def run_redis(rounds, out, header, next_port, quick):
    names = [n for n in os.environ.get("REDIS_SYSTEMS", " ".join(migrate_redis.SYSTEMS)).split()]
    for n in names:
        if n not in migrate_redis.SYSTEMS:
            raise Failed(f"REDIS_SYSTEMS: unknown '{n}' (known: "
                         f"{', '.join(migrate_redis.SYSTEMS)})")
    rows, used = migrate_redis.session(migrate_redis.settings(quick), rounds, names, next_port,
                                       lambda line: print(line, file=sys.stderr))
    write_redis(out, header, rows, names, used, quick)
    return len(rows)


def main():
    quick = os.environ.get("QUICK") == "1"
    try:
        rounds = 1 if quick else int(env_float("ROUNDS", 5))
        cfg = settings(quick)
        workloads = pick_workloads(cfg["accel"])
        names = pick_systems(cfg["accel"]) if "zipfbench" in workloads else []
        out = os.environ.get("OUT") or peers.provenance.host_dir()
        os.makedirs(out, exist_ok=True)
        next_port = port_source()
        qemu = peers.provenance.sh(QEMU, "--version").splitlines()[0:1]
        peer = f"{qemu[0] if qemu else 'no QEMU'} accel {cfg['accel']}"
        header = peers.provenance.line(
            rounds, f"{peer}; zipfbench "
            f"--scatter size {cfg['size']}M alpha {cfg['alpha']} warmup {cfg['warmup']}s "
            f"downtime target {DOWNTIME_MS} ms")
        n_runs = 0
        if "zipfbench" in workloads:
            n_runs = run_zipfbench(cfg, names, rounds, out, header, next_port, quick)
        if "redis" in workloads:
            n_runs += run_redis(rounds, out, peers.provenance.line(rounds, peer), next_port,
                                quick)
    except (Failed, subprocess.TimeoutExpired, subprocess.CalledProcessError, OSError,
            KeyError) as e:
        print(f"migrate: {e}", file=sys.stderr)
        return 1
    print(f"migrate: {n_runs} runs measured; results in {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
