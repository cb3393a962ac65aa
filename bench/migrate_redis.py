"""migrate_redis.py - bench/migrate.py's Redis workload: Redis under YCSB A, migrated live.

Debian's redis-server runs in `ccvm run` with a published port, is loaded with RECORDS
YCSB records (default 1,150,000: Redis' used_memory ~2 GiB, in a VM of REDIS_MEM, 3G),
then moves from ccvm to ccvm on loopback again and again: each migration goes to a fresh
`ccvm restore --incoming tcp:...` publishing the same port, which is the next one's
source. Around each, bench/ycsb runs workload A in open loop (TARGET operations/s over
CLIENTS clients, latency from each operation's intended start, --reconnect: a client
whose connection breaks connects again to the same port and sends its batch again) for
REDIS_SECONDS seconds, the migration starting REDIS_WARMUP seconds in; on a machine so
slow that the migration ends late in the run, the run goes on until SETTLE_S + 1 s
after it. The settings
(never, auto, now) are shuffled per round over one loaded dataset, since loading it
takes longer than a migration; each migration must leave every record on the
destination (DBSIZE), or the run fails.

Per migration:
  stall_ms        YCSB's longest time without a completed operation: the downtime as a
                  client sees it (pause, reconnect, the first answers)
  own_downtime_ms ccvm's figure: pause to the destination's RUNNING
  total_s         the migrate command's time; bytes_over_ram as in migrate.py
  during          operations completed in the seconds the migration overlapped over the
                  operations offered then (open loop: below 1 is a backlog)
  p999_us, max_us the ops-weighted p99.9 and the max over those seconds and the
                  SETTLE_S after (the operations the pause held complete then: latency
                  is counted in the second an operation completes), histograms merged
  run_p999_us     the whole run phase's p99.9
  errors, reconnects, rounds
There is no QEMU row: QEMU's peer guest is a bare-metal zipfbench, with no Redis.
"""
import csv
import json
import os
import random
import subprocess
import tempfile
import time

import peers
from peers import Failed, env_float, stop_process
# bench/peers/redis.py (bench/peers comes first on the path), not the Python client
from redis import YCSB, merged_quantiles, redis_cli, info, ycsb

SYSTEMS = {"ccvm-coverage": [], "ccvm-postcopy-auto": ["--postcopy", "auto"],
           "ccvm-postcopy-now": ["--postcopy", "now"]}
METRICS = ["stall_ms", "own_downtime_ms", "total_s", "bytes_over_ram", "during", "p999_us",
           "max_us", "run_p999_us", "errors", "reconnects", "rounds"]
SETTLE_S = 2               # seconds after the migration kept in its latency figures
READY_TIMEOUT_S = 60
MIGRATE_TIMEOUT_S = 300


def settings(quick):
    return {"records": int(env_float("RECORDS", 20000 if quick else 1150000)),
            "mem": os.environ.get("REDIS_MEM", "512M" if quick else "3G"),
            "target": int(env_float("TARGET", 2000 if quick else 10000)),
            "clients": int(env_float("CLIENTS", 4 if quick else 8)),
            "warmup": env_float("REDIS_WARMUP", 2 if quick else 5),
            "seconds": int(env_float("REDIS_SECONDS", 12 if quick else 45))}


def ctl_migrate(sock, where, opts):
    """`ccvm ctl SOCK migrate WHERE --wait OPTS`: its figures (the reply's JSON, {} if
    none) and what it printed, for a failure's message. Loopback TCP without TLS
    (--insecure) unless OPTS carry --tls-creds."""
    channel = [] if "--tls-creds" in opts else ["--insecure"]
    r = subprocess.run([peers.CCVM, "ctl", sock, "migrate", where, "--wait"] + channel + opts,
                       capture_output=True, text=True, timeout=MIGRATE_TIMEOUT_S)
    try:
        return json.loads(r.stdout.strip().splitlines()[-1]), r.stdout + r.stderr
    except (ValueError, IndexError):
        return {}, r.stdout + r.stderr


def wait_pong(port, proc, err_path):
    end = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < end and proc.poll() is None:
        if redis_cli(port, "ping") == "PONG":
            return
        time.sleep(0.2)
    raise Failed(f"redis in ccvm did not answer on {port}: exit {proc.poll()}; "
                 f"{open(err_path, errors='replace').read()[-300:]}")


def start(args, work, name):
    err = os.path.join(work, f"{name}.err")
    return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=open(err + ".out", "wb"),
                            stderr=open(err, "wb")), err


def measure(summary, tl_path, hist_path, t_a, t_b, cfg, fig):
    """The YCSB figures of the seconds [t_a, t_b] (wall clock) overlapped."""
    t0 = summary["t0_unix"]
    per_sec = {int(r["second"]): r for r in csv.DictReader(open(tl_path))}
    hist = [(int(r["second"]), int(r["bucket"]), int(r["count"]))
            for r in csv.DictReader(l for l in open(hist_path) if not l.startswith("#"))]
    # Second s covers [t0 + s - 1, t0 + s).
    inside = {s for s in per_sec if t0 + s - 1 < t_b and t0 + s > t_a}
    settled = {s for s in per_sec if t0 + s - 1 < t_b + SETTLE_S and t0 + s > t_a}
    ops = sum(int(per_sec[s]["ops_per_s"]) for s in inside)
    return {"stall_ms": summary["stall_ms"], "own_downtime_ms": fig["downtime_ms"],
            "total_s": fig["total_ms"] / 1000, "bytes_over_ram": fig["bytes_over_ram"],
            "during": ops / (len(inside) * cfg["target"]) if inside else 0.0,
            "p999_us": merged_quantiles(hist, settled)[1],
            "max_us": max((float(per_sec[s]["max_us"]) for s in settled), default=0.0),
            "run_p999_us": summary["p999_us"], "errors": summary["errors"],
            "reconnects": summary["reconnects"], "rounds": fig["rounds"]}


def migrate_once(name, cfg, work, src, rp, port, i):
    """One migration of the Redis VM behind control socket @src: the figures and the
    destination (process, its control socket)."""
    sock = os.path.join(work, f"ctl{i}.sock")
    dst, dst_err = start([peers.CCVM, "restore", "--incoming", f"tcp:127.0.0.1:{port}",
                          "--insecure", "--mem", cfg["mem"], "--rw", "none",
                          "--control", sock, "--publish", f"127.0.0.1:{rp}:6379"], work,
                         f"dst{i}")
    tl, hist = os.path.join(work, f"tl{i}.csv"), os.path.join(work, f"hist{i}.csv")
    stop = os.path.join(work, f"stop{i}")
    # The clients end on a cue, not after fixed seconds: a migration slower than
    # planned (nested under TCG: 10 s of a 12 s run) would otherwise end after them,
    # and the run would show no switch at all.
    y = subprocess.Popen([YCSB, "--port", str(rp), "--quiet", "--phase", "run", "--workload",
                          "a", "--records", str(cfg["records"]), "--duration",
                          str(cfg["seconds"] + MIGRATE_TIMEOUT_S), "--stop-file", stop,
                          "--target", str(cfg["target"]), "--clients",
                          str(cfg["clients"]), "--reconnect", "--json", "--timeline", tl,
                          "--histograms", hist], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    t_run = time.time()
    try:
        time.sleep(cfg["warmup"])
        t_a = time.time()
        fig, said = ctl_migrate(src, f"tcp:127.0.0.1:{port}", SYSTEMS[name])
        t_b = time.time()
        if not fig.get("ok"):
            raise Failed(f"redis {name}: migrate: {said.strip()[-300:]}; "
                         f"destination: {open(dst_err, errors='replace').read()[-300:]}")
        # The planned seconds, and at least SETTLE_S and one more past the switch.
        time.sleep(max(0.0, max(t_run + cfg["seconds"], t_b + SETTLE_S + 1) - time.time()))
        open(stop, "w").close()
        out, _ = y.communicate(timeout=120)
        try:
            summary = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise Failed(f"redis {name}: ycsb: {out.strip()[-300:]}")
        keys = redis_cli(rp, "dbsize")
        if keys != str(cfg["records"]):
            raise Failed(f"redis {name}: {keys} keys on the destination, not {cfg['records']}")
        return measure(summary, tl, hist, t_a, t_b, cfg, fig), (dst, sock)
    except BaseException:
        stop_process(dst)
        raise
    finally:
        if y.poll() is None:
            y.kill()
            y.wait()


def session(cfg, rounds, names, next_port, log):
    """Load once, then every round's migrations in shuffled order, each on a port
    next_port() gives: the rows."""
    redis = "/usr/bin/redis-server"
    if not os.path.exists(redis):
        raise Failed("no redis-server (apt-get install redis-server)")
    rows, procs = [], []
    # TMPDIR or /tmp: control sockets live there (no images), and /var/tmp may be
    # a 9p share that takes no socket (scripts/kvm-in-tcg.sh).
    with tempfile.TemporaryDirectory(prefix="ccvm-migrate-redis.") as work:
        rp = next_port()
        sock = os.path.join(work, "ctl.sock")
        src, err = start([peers.CCVM, "run", "--mem", cfg["mem"], "--control", sock,
                          "--publish", f"127.0.0.1:{rp}:6379", "--", redis, "--port", "6379",
                          "--save", "", "--appendonly", "no"], work, "vm")
        procs.append(src)
        try:
            wait_pong(rp, src, err)
            ycsb(rp, "--phase", "load", "--records", str(cfg["records"]), "--clients", "8",
                 "--pipeline", "16", timeout=900)
            used = int(info(rp, "memory").get("used_memory", "0"))
            i = 0
            for rnd in range(1, rounds + 1):
                order = list(names)
                random.shuffle(order)
                for n in order:
                    i += 1
                    r, (dst, sock) = migrate_once(n, cfg, work, sock, rp, next_port(), i)
                    procs.append(dst)
                    r.update(round=rnd, system=n)
                    rows.append(r)
                    log(f"migrate: redis round {rnd} {n}: " + ", ".join(
                        f"{m} {r[m]:.3g}" for m in METRICS))
        finally:
            for p in procs:
                stop_process(p)
    return rows, used
