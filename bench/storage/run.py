#!/usr/bin/env python3
"""bench/storage/run.py - snapshot storage (issue 16) measured without a VM.

The real engine (bench/engine-bench: userfaultfd, the image writer, real files) snapshots
plain memory that host threads write, every GAP seconds after the last one ended, for
DURATION seconds, ROUNDS rounds (default 5) with the configurations of a round in a
shuffled order. Sections:

  codecs   each dataset x none / lz4 / zstd / auto (default levels, default threads) x
           each disk, one writer thread (a guest that keeps one vCPU busy, as Redis
           does): per image the blocks on disk and their ratio to `none` in the same
           round and disk, the snapshot's duration, the writers' rate while a snapshot
           runs over their rate without one, auto's mix of codecs, and an eager restore
           of the last image (writers stopped). Disks: fast, the image directory's disk
           as it is; slow, the same with its writes limited to SLOW_MBS MB/s (default
           200) for engine-bench alone: cgroup v2's io.max where the io controller is
           there, else cgroup v1's blkio.throttle.write_bps_device; the report says which.
           A machine with neither runs fast only, and says so.
  threads  zstd on the redis dataset with 1..nproc compressing threads, with nobody
           writing (idle) and with one writer thread (busy): duration and MB/s of data.
  incremental  on the redis dataset, none and zstd: a full snapshot with tracking, then
           1%, 10% or 50% of the pages rewritten by one thread (each first write traps
           once: the tracking cost), then an incremental snapshot; its blocks on disk
           and duration over the full one's.
  default  the default path (--precopy auto: rounds for these writers) on each dataset
           and disk: none, auto, and auto with compaction in idle time (--compact idle):
           the snapshot's duration and its time from the request (pre-copy rounds
           included), the image on disk right after the snapshot and after compaction, the
           compaction's seconds per image (not counting the time snapshots held it or it
           waited for the writers: it waits while they work, so it compacts once they
           stop), and the writers' rate while it ran over their rate with neither running
           (empty when it never ran beside them).
  held     on the redis dataset, ccow (zstd images) with a copy pool of 1, 0.5 and 0.4
           of MEM, held-copy compression off and on, one writer thread, HELD_DURATION
           seconds: write faults per snapshot once the tracker has learnt the hot regions
           (the first one or two have none, and fault page by page in every
           configuration), the most copies held at once (guest bytes) and the pool bytes
           they took, the snapshot's duration and the writers' rate during it.

Datasets: redis, a dump of the memory of a native redis-server (not in a VM) after a
YCSB load of RECORDS records and a few seconds of workload A, tiled over MEM (updates
rewrite a block with the dump's own bytes, a new value in its first 8: memory stays as
compressible as Redis'); text, records of words and numbers; zipf, zipfbench's words
(incompressible).

Writes (OUT, default bench/results/HOST-CLASS)
storage_{codecs,default,threads,incremental,held}.csv (a row per run),
storage.md (means and 95% CIs) and storage.png, each with commit and machine.
Environment: ROUNDS, SECTIONS ("codecs threads incremental held"), DATASETS ("redis text
zipf"), CODECS ("none lz4 zstd auto"), DISKS ("fast slow"), SLOW_MBS (200), PRECOPY
(the codecs section's --precopy, default lazy: the engine's own default, auto, picks
pre-copy rounds for these writers, and rounds store every chunk raw, so every codec
would read 1.00x; "" for the engine's default), MEM (512M), GAP (1), DURATION (8),
HELD_DURATION (16), RECORDS (250000), DUMP (a dump to reuse instead of making one),
OUT, IMGDIR.
"""
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(TOP, "bench"))
import provenance  # noqa: E402
from results_csv import fmt, plot_bars, read_csv, write_csv  # noqa: E402

EB = os.path.join(TOP, "bench", "engine-bench")
YCSB = os.path.join(TOP, "bench", "ycsb")
ENV = os.environ.get
ROUNDS = int(ENV("ROUNDS", "5"))
SECTIONS = ENV("SECTIONS", "codecs default threads incremental held").split()
HELD_POOLS = [1.0, 0.5, 0.4]   # of MEM
DEFAULT_CONFIGS = ["none", "auto", "auto+compact"]
HELD_MODES = ["off", "on"]
HELD_DURATION = ENV("HELD_DURATION", "16")
INC_PCTS = [1, 10, 50]
INC_CODECS = ["none", "zstd"]
DATASETS = ENV("DATASETS", "redis text zipf").split()
MEM, GAP, DURATION = ENV("MEM", "512M"), ENV("GAP", "1"), ENV("DURATION", "8")
RECORDS = ENV("RECORDS", "250000")
OUT = ENV("OUT", "") or provenance.host_dir()
CODECS = ENV("CODECS", "none lz4 zstd auto").split()
DISKS = ENV("DISKS", "fast slow").split()
SLOW_MBS = float(ENV("SLOW_MBS", "200"))
PRECOPY = ENV("PRECOPY", "lazy")  # the codecs section's --precopy; "": the engine's default
CGROUP_V1_BLKIO = "/sys/fs/cgroup/blkio"
SLOW_GROUP = "ccvm-bench-slow-disk"
NPROC = os.cpu_count() or 1
KEYS = ["snapshots", "duration_ms_mean", "bytes_disk", "bytes_raw", "bytes_stored",
        "updates_per_s", "during", "max_stall_ms", "restore_ms", "writer_mb_per_s"]
MIX_KEYS = ["mix_raw", "mix_lz4", "mix_zstd"]
DEFAULT_KEYS = ["snapshots", "duration_ms_mean", "presave_ms_mean", "total_ms", "disk_per_image",
                "compacted_per_image", "compact_s_per_image", "during", "during_compaction",
                "max_stall_ms", "images_compacted"]


class Failed(Exception):
    pass


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def dump_memory(pid, path):
    """The private anonymous writable mappings of @pid (Redis' heap and arenas)."""
    total = 0
    with open("/proc/%d/maps" % pid) as maps, open("/proc/%d/mem" % pid, "rb", 0) as mem, \
            open(path, "wb") as out:
        for line in maps:
            f = line.split()
            if f[1] != "rw-p" or (len(f) > 5 and f[5] != "[heap]"):
                continue
            a, b = (int(x, 16) for x in f[0].split("-"))
            try:
                mem.seek(a)
                out.write(mem.read(b - a))
                total += b - a
            except OSError:
                continue
    return total


def make_redis_dump(workdir):
    """Run redis-server natively, load it with YCSB, dump its memory; the dump's path."""
    if ENV("DUMP"):
        return ENV("DUMP")
    if not shutil.which("redis-server"):
        raise Failed("redis-server is missing (make deps installs it)")
    port = free_port()
    path = os.path.join(workdir, "redis-memory.bin")
    srv = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly",
                            "no", "--bind", "127.0.0.1"], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        r = subprocess.run([YCSB, "--port", str(port), "--records", RECORDS, "--phase", "both",
                            "--duration", "5", "--clients", "4", "--pipeline", "16", "--quiet"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise Failed("ycsb: " + r.stderr.strip()[-200:])
        n = dump_memory(srv.pid, path)
    finally:
        srv.send_signal(signal.SIGKILL)
        srv.wait()
    print("storage: redis dump of %d MiB (%s records)" % (n >> 20, RECORDS), file=sys.stderr)
    return path


def whole_disk(dev):
    """MAJ:MIN of the disk holding device number @dev (a partition's parent)."""
    sysdir = "/sys/dev/block/%d:%d" % (os.major(dev), os.minor(dev))
    if os.path.exists(os.path.join(sysdir, "partition")):
        with open(os.path.join(sysdir, "..", "dev")) as f:
            return f.read().strip()
    return "%d:%d" % (os.major(dev), os.minor(dev))


def unified_root():
    """The cgroup v2 hierarchy's mount point when its io controller can be used, else
    None."""
    with open("/proc/mounts") as f:
        for line in f:
            dev, mnt, fstype = line.split()[:3]
            if fstype == "cgroup2":
                try:
                    if "io" in open(os.path.join(mnt, "cgroup.controllers")).read().split():
                        return mnt
                except OSError:
                    pass
    return None


def slow_disk(imgdir):
    """A cgroup whose writes to @imgdir's disk are limited to SLOW_MBS: (cgroup.procs path,
    how it was done), or (None, why not)."""
    disk = whole_disk(os.stat(imgdir).st_dev)
    bps = int(SLOW_MBS * 1e6)
    root = unified_root()
    try:
        if root:
            group = os.path.join(root, SLOW_GROUP)
            os.makedirs(group, exist_ok=True)
            with open(os.path.join(root, "cgroup.subtree_control"), "w") as f:
                f.write("+io")
            with open(os.path.join(group, "io.max"), "w") as f:
                f.write("%s wbps=%d" % (disk, bps))
            return os.path.join(group, "cgroup.procs"), "cgroup v2 io.max %s wbps=%d" % (disk, bps)
        if os.path.isdir(CGROUP_V1_BLKIO):
            group = os.path.join(CGROUP_V1_BLKIO, SLOW_GROUP)
            os.makedirs(group, exist_ok=True)
            with open(os.path.join(group, "blkio.throttle.write_bps_device"), "w") as f:
                f.write("%s %d" % (disk, bps))
            return (os.path.join(group, "cgroup.procs"),
                    "cgroup v1 blkio.throttle.write_bps_device %s %d" % (disk, bps))
    except OSError as ex:
        return None, "cannot limit disk %s: %s" % (disk, ex)
    return None, "neither cgroup v2's io controller nor cgroup v1's blkio is mounted"


SLOW = {"procs": None, "how": ""}


def engine(args, slow=False):
    cmd = [EB] + args + ["--json"]
    if slow:  # engine-bench alone in the limited group (its children too)
        cmd = ["sh", "-c", 'echo $$ > "$0" && exec "$@"', SLOW["procs"]] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise Failed("engine-bench %s: %s" % (" ".join(args), r.stderr.strip()[-300:]))
    d = json.loads(r.stdout)
    if not d.get("snapshots"):
        raise Failed("engine-bench %s took no snapshot" % " ".join(args))
    return d


def data_args(ds, dump):
    return ["--data-file", dump] if ds == "redis" else ["--data", ds]


def codec_run(ds, codec, disk, dump, imgdir):
    d = engine(["--mem", MEM, "--threads", "1", "--alpha", "0.99", "--scatter", "--policy",
                "ccow", "--snapshot-gap", GAP, "--duration", DURATION, "--dir", imgdir,
                "--compress", codec, "--restore"] + data_args(ds, dump) +
               (["--precopy", PRECOPY] if PRECOPY else []), slow=disk == "slow")
    row = {k: d.get(k) for k in KEYS}
    row["disk_per_image"] = d["bytes_disk"] / d["snapshots"]
    for k in MIX_KEYS:
        row[k] = d.get("codec_mix", {}).get(k[4:])
    return row


def default_run(ds, config, disk, dump, imgdir):
    """The engine's default pre-copy (auto) with @config: none, auto, auto+compact."""
    d = engine(["--mem", MEM, "--threads", "1", "--alpha", "0.99", "--scatter", "--policy",
                "ccow", "--snapshot-gap", GAP, "--duration", DURATION, "--dir", imgdir,
                "--compress", "none" if config == "none" else "auto",
                "--compact", "idle" if config == "auto+compact" else "off"] +
               data_args(ds, dump), slow=disk == "slow")
    row = {k: d.get(k) for k in ("snapshots", "duration_ms_mean", "presave_ms_mean", "during",
                                 "max_stall_ms")}
    row["total_ms"] = d["duration_ms_mean"] + (d.get("presave_ms_mean") or 0)
    row["disk_per_image"] = d["bytes_disk"] / d["snapshots"]
    for k in MIX_KEYS:
        row[k] = d.get("codec_mix", {}).get(k[4:])
    c = d.get("compaction")
    if c is not None:
        if not c["images"]:
            raise Failed("%s %s %s: no image was compacted: %s" % (ds, config, disk, c))
        row["images_compacted"] = c["images"]
        row["compacted_per_image"] = c["bytes_out"] / c["images"]
        row["compact_s_per_image"] = d["compact_s"] / c["images"]
        row["during_compaction"] = d.get("during_compaction")
    return row


def threads_run(mode, n, dump, imgdir):
    d = engine(["--mem", MEM, "--threads", "0" if mode == "idle" else "1", "--alpha", "0.99",
                "--scatter", "--policy", "ccow", "--snapshot-gap", "0.1" if mode == "idle" else GAP,
                "--duration", "0.2" if mode == "idle" else DURATION, "--dir", imgdir, "--compress", "zstd",
                "--snapshot-threads", str(n), "--data-file", dump])
    return {k: d.get(k) for k in KEYS}


def incremental_run(codec, pct, dump, imgdir):
    r = subprocess.run([EB, "--incremental-pct", str(pct), "--mem", MEM, "--threads", "0",
                        "--policy", "ccow", "--dir", imgdir, "--compress", codec,
                        "--data-file", dump, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise Failed("engine-bench --incremental-pct %s: %s" % (pct, r.stderr.strip()[-300:]))
    d = json.loads(r.stdout)
    d["disk_vs_full"] = d["inc_bytes"] / d["full_bytes"]
    d["duration_vs_full"] = d["inc_ms"] / max(d["full_ms"], 1)
    d["us_per_track_fault"] = d["rewrite_ms"] * 1e3 / max(d["track_faults"], 1)
    return d


def mem_bytes():
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(MEM[:-1]) * units[MEM[-1]] if MEM[-1] in units else int(MEM)


def held_run(frac, mode, dump, imgdir):
    pool = int(mem_bytes() * frac) // 4096 * 4096
    d = engine(["--mem", MEM, "--threads", "1", "--alpha", "0.99", "--scatter", "--policy",
                "ccow", "--snapshot-gap", GAP, "--duration", HELD_DURATION, "--dir", imgdir,
                "--compress", "zstd", "--pool", str(pool), "--held-compress", mode,
                "--data-file", dump])
    row = {k: d.get(k) for k in HELD_KEYS if k in d}
    row["pool_bytes"] = pool
    if not d.get("snapshots_hot"):
        raise Failed("held: no snapshot had hot regions in %s s" % HELD_DURATION)
    row["warm_traps_per_snapshot"] = d["traps_hot"] / d["snapshots_hot"]
    return row


HELD_KEYS = ["snapshots", "traps", "snapshots_hot", "traps_hot", "duration_ms_mean", "during", "max_stall_ms",
             "held_raw_bytes_max", "held_stored_bytes_max", "held_compressed_bytes",
             "bytes_disk"]


INC_KEYS = ["pages_rewritten", "pages_held", "full_bytes", "inc_bytes", "full_ms", "inc_ms",
            "disk_vs_full", "duration_vs_full", "rewrite_ms", "track_faults",
            "us_per_track_fault"]


def read_section(sec):
    """An earlier run's section: (provenance line, rows), counts back to ints."""
    head, rows = read_csv(os.path.join(OUT, "storage_%s.csv" % sec),
                          text=("dataset", "codec", "mode", "disk", "config"))
    for r in rows:
        if sec == "codecs" and not r.get("disk"):
            r["disk"] = "fast"  # (written before the slow disk was)
        for k in ("threads", "pct", "round"):  # matched against ints
            if isinstance(r.get(k), float):
                r[k] = int(r[k])
    return head, rows


def per(rows, key, **match):
    return [r[key] for r in rows if all(r.get(k) == v for k, v in match.items())
            and r.get(key) is not None]


def none_of(rows, r, key):
    """The row of `none` (under @key) in @r's dataset, disk and round, or None."""
    base = [b for b in rows if b["dataset"] == r["dataset"] and b["round"] == r["round"]
            and b[key] == "none" and b.get("disk") == r.get("disk")]
    return base[0] if base else None


def add_default_ratios(rows):
    """Each configuration's figures over none's, same dataset, disk and round."""
    for r in rows:
        b = none_of(rows, r, "config")
        if not b:
            continue
        r["duration_vs_none"] = r["duration_ms_mean"] / b["duration_ms_mean"]
        r["total_vs_none"] = r["total_ms"] / b["total_ms"]
        r["disk_vs_none"] = r["disk_per_image"] / b["disk_per_image"]
        if r.get("compacted_per_image") is not None:
            r["compacted_vs_none"] = r["compacted_per_image"] / b["disk_per_image"]


def default_report(head, rows):
    if not rows:
        return []
    out = ["## The default path: pre-copy rounds, compression, compaction in idle time "
           "(%s, one writer thread, ccow, --precopy auto, %s s between snapshots)" % (MEM, GAP),
           "", head, "",
           "Ratios are per round against `none` on the same dataset and disk. *snapshot s*: "
           "from the pause to the end (the engine's duration); *from request*: with the "
           "pre-copy rounds before the pause. *compacted*: the image on disk after its "
           "compaction in idle time; *compaction s*: per image, not counting the time "
           "snapshots held it or it waited for the writers to rest (it compacts once they "
           "stop); *during compaction*: the writers' rate while it ran beside them over "
           "their rate with neither a snapshot nor a compaction running (— when it never "
           "did).", "",
           "| dataset | disk | config | snapshot s | vs none | from request s | vs none | "
           "MiB on disk | vs none | compacted MiB | vs none | compaction s | during "
           "compaction | raw / lz4 / zstd chunks |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for ds in DATASETS:
        for dk in ("fast", "slow"):
            for co in DEFAULT_CONFIGS:
                m = dict(dataset=ds, config=co, disk=dk)
                if not per(rows, "disk_per_image", **m):
                    continue
                out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    ds, dk, co, fmt([x / 1e3 for x in per(rows, "duration_ms_mean", **m)], "%.2f"),
                    fmt(per(rows, "duration_vs_none", **m), "%.2f"),
                    fmt([x / 1e3 for x in per(rows, "total_ms", **m)], "%.2f"),
                    fmt(per(rows, "total_vs_none", **m), "%.2f"),
                    fmt([x / 2**20 for x in per(rows, "disk_per_image", **m)], "%.0f"),
                    fmt(per(rows, "disk_vs_none", **m), "%.3f"),
                    fmt([x / 2**20 for x in per(rows, "compacted_per_image", **m)], "%.0f"),
                    fmt(per(rows, "compacted_vs_none", **m), "%.3f"),
                    fmt(per(rows, "compact_s_per_image", **m), "%.2f"),
                    fmt(per(rows, "during_compaction", **m), "%.2f"),
                    " / ".join(fmt(per(rows, k, **m), "%.2f") for k in MIX_KEYS)))
    return out + [""]


def add_ratios(rows):
    """Each codec's disk blocks and duration over none's, same dataset and round."""
    for r in rows:
        b = none_of(rows, r, "codec")
        if b:
            r["disk_vs_none"] = r["disk_per_image"] / b["disk_per_image"]
            r["duration_vs_none"] = r["duration_ms_mean"] / b["duration_ms_mean"]


def report(head, heads, rows):
    """storage.md: its first line this run's provenance (@head), each section under the
    provenance of the run it comes from (@heads)."""
    out = [f"Snapshot storage without a VM (bench/storage/run.py), this run: {head}", "",
           "Mean ± 95% CI over the rounds, configurations shuffled in each round; the real "
           "engine on plain memory written by host threads (no VM: the redis dataset is a "
           "dump of a native redis-server's memory). Each section names the run it comes "
           "from.", ""]
    c = rows["codecs"]
    if c:
        out += ["## Codecs (%s, one writer thread, ccow, %s s between snapshots, default "
                "levels and threads)" % (MEM, GAP), "", heads["codecs"], "",
                "| dataset | disk | codec | MiB on disk per image | vs none | snapshot s | vs none | "
                "during | restore s | raw / lz4 / zstd chunks |", "|---|---|---|---|---|---|---|---|---|---|"]
        for ds in DATASETS:
            for dk in ("fast", "slow"):
                for co in CODECS:
                    m = dict(dataset=ds, codec=co, disk=dk)
                    if not per(c, "disk_per_image", **m):
                        continue
                    out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                        ds, dk, co, fmt([x / 2**20 for x in per(c, "disk_per_image", **m)], "%.0f"),
                        fmt(per(c, "disk_vs_none", **m), "%.3f"),
                        fmt([x / 1e3 for x in per(c, "duration_ms_mean", **m)], "%.2f"),
                        fmt(per(c, "duration_vs_none", **m), "%.2f"), fmt(per(c, "during", **m), "%.2f"),
                        fmt([x / 1e3 for x in per(c, "restore_ms", **m)], "%.2f"),
                        " / ".join(fmt(per(c, k, **m), "%.2f") for k in MIX_KEYS)))
        out.append("")
    t = rows["threads"]
    if t:
        out += ["## Compressing threads (zstd level 1, redis dataset, %s)" % MEM, "",
                heads["threads"], "",
                "| writers | threads | snapshot s | data MB/s |", "|---|---|---|---|"]
        for mode in ("idle", "busy"):
            for n in range(1, NPROC + 1):
                if per(t, "duration_ms_mean", mode=mode, threads=n):
                    out.append("| %s | %d | %s | %s |" % (
                        "none" if mode == "idle" else "one thread", n,
                        fmt([x / 1e3 for x in per(t, "duration_ms_mean", mode=mode, threads=n)], "%.2f"),
                        fmt(per(t, "writer_mb_per_s", mode=mode, threads=n), "%.0f")))
        out.append("")
    i = rows["incremental"]
    if i:
        out += ["## Incremental snapshots (redis dataset, %s, nobody else writing, ccow)" % MEM,
                "", heads["incremental"], "", "| codec | rewritten | blocks vs full | duration vs full | incremental s | "
                "µs per tracking fault |", "|---|---|---|---|---|---|"]
        for co in INC_CODECS:
            for p in INC_PCTS:
                if per(i, "disk_vs_full", codec=co, pct=p):
                    out.append("| %s | %d%% | %s | %s | %s | %s |" % (
                        co, p, fmt(per(i, "disk_vs_full", codec=co, pct=p), "%.3f"),
                        fmt(per(i, "duration_vs_full", codec=co, pct=p), "%.2f"),
                        fmt([x / 1e3 for x in per(i, "inc_ms", codec=co, pct=p)], "%.2f"),
                        fmt(per(i, "us_per_track_fault", codec=co, pct=p), "%.0f")))
        out.append("")
    out += default_report(heads.get("default"), rows["default"])
    out += held_report(heads.get("held"), rows["held"])
    with open(os.path.join(OUT, "storage.md"), "w") as f:
        f.write("\n".join(out))


def held_need(rows, mode):
    """The smallest pool (fraction of MEM) whose mean warm traps stay within 10% of the
    full pool's without compression; None when none does."""
    base = per(rows, "warm_traps_per_snapshot", frac=1.0, mode="off")
    if not base:
        return None
    limit = 1.1 * sum(base) / len(base)
    ok = [f for f in HELD_POOLS
          if per(rows, "warm_traps_per_snapshot", frac=f, mode=mode) and
          sum(per(rows, "warm_traps_per_snapshot", frac=f, mode=mode)) /
          len(per(rows, "warm_traps_per_snapshot", frac=f, mode=mode)) <= limit]
    return min(ok) if ok else None


def held_report(head, rows):
    if not rows:
        return []
    out = ["## Held copies compressed under pressure (redis dataset, %s, ccow, zstd images, "
           "one writer thread)" % MEM, "", head, "",
           "| pool | held-copy compression | faults per snapshot | most held, MiB | "
           "pool MiB they took | compressed MiB per snapshot | snapshot s | during | "
           "longest stall ms |", "|---|---|---|---|---|---|---|---|---|"]
    for f in HELD_POOLS:
        for m in HELD_MODES:
            m_ = dict(frac=f, mode=m)
            if not per(rows, "warm_traps_per_snapshot", **m_):
                continue
            comp = [r["held_compressed_bytes"] / r["snapshots"] / 2**20 for r in rows
                    if r.get("frac") == f and r.get("mode") == m and r.get("snapshots")]
            out.append("| %.1f × %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                f, MEM, m, fmt(per(rows, "warm_traps_per_snapshot", **m_), "%.0f"),
                fmt([x / 2**20 for x in per(rows, "held_raw_bytes_max", **m_)], "%.0f"),
                fmt([x / 2**20 for x in per(rows, "held_stored_bytes_max", **m_)], "%.0f"),
                fmt(comp, "%.0f"),
                fmt([x / 1e3 for x in per(rows, "duration_ms_mean", **m_)], "%.2f"),
                fmt(per(rows, "during", **m_), "%.2f"),
                fmt(per(rows, "max_stall_ms", **m_), "%.0f")))
    need = {m: held_need(rows, m) for m in HELD_MODES}
    out += ["", "Smallest pool within 10%% of the full pool's faults: off %s, on %s." % tuple(
        "none measured" if need[m] is None else "%.1f × %s" % (need[m], MEM)
        for m in HELD_MODES), ""]
    return out


def plot(heads, rows, head):
    c = rows["codecs"]
    bars = [("%s/%s/%s" % (ds, dk[0], co),
             [x / 2**20 for x in per(c, "disk_per_image", dataset=ds, codec=co, disk=dk)],
             [x / 1e3 for x in per(c, "duration_ms_mean", dataset=ds, codec=co, disk=dk)])
            for ds in DATASETS for dk in ("fast", "slow") for co in CODECS
            if per(c, "disk_per_image", dataset=ds, codec=co, disk=dk)]
    if bars:
        plot_bars(os.path.join(OUT, "storage.png"), "snapshot storage, engine-bench: " +
                  heads.get("codecs", head),
                  bars, "MiB on disk per image", "snapshot duration (s)")
    h = rows["held"]
    bars = [("%.1f/%s" % (f, m), per(h, "warm_traps_per_snapshot", frac=f, mode=m),
             [x / 2**20 for x in per(h, "held_raw_bytes_max", frac=f, mode=m)])
            for f in HELD_POOLS for m in HELD_MODES if per(h, "warm_traps_per_snapshot", frac=f, mode=m)]
    if bars:
        plot_bars(os.path.join(OUT, "storage_held.png"), "held-copy compression, engine-bench: " +
                  heads.get("held", head), bars, "write faults per snapshot", "copies held at most (guest MiB)")
    d = rows["default"]
    bars = [("%s/%s/%s" % (ds, dk[0], co),
             [x / 2**20 for x in per(d, "compacted_per_image" if co == "auto+compact" else "disk_per_image",
                                     dataset=ds, config=co, disk=dk)],
             [x / 1e3 for x in per(d, "total_ms", dataset=ds, config=co, disk=dk)])
            for ds in DATASETS for dk in ("fast", "slow") for co in DEFAULT_CONFIGS
            if per(d, "disk_per_image", dataset=ds, config=co, disk=dk)]
    if bars:
        plot_bars(os.path.join(OUT, "storage_default.png"), "the default path, engine-bench: " +
                  heads.get("default", head), bars, "MiB on disk per image (compacted: after)",
                  "snapshot from request (s)")


def codecs_head(head, disks):
    """The codecs section's provenance, with how its slow disk was made."""
    return (head + ("; slow disk: %s, %g MB/s" % (SLOW["how"], SLOW_MBS) if "slow" in disks else
                    "; fast disk only") + ("; --precopy %s" % PRECOPY if PRECOPY else ""))


def main():
    head = provenance.line(ROUNDS)
    os.makedirs(OUT, exist_ok=True)
    imgdir = ENV("IMGDIR") or tempfile.mkdtemp(prefix="ccvm-storage.", dir="/var/tmp")
    needs = (("codecs" in SECTIONS or "default" in SECTIONS) and "redis" in DATASETS) or \
        "threads" in SECTIONS or \
        "incremental" in SECTIONS or "held" in SECTIONS
    dump = make_redis_dump(imgdir) if needs else None
    rows = {"codecs": [], "default": [], "threads": [], "incremental": [], "held": []}
    disks = [d for d in DISKS if d in ("fast", "slow")]
    if "slow" in disks and ("codecs" in SECTIONS or "default" in SECTIONS):
        SLOW["procs"], SLOW["how"] = slow_disk(imgdir)
        if not SLOW["procs"]:
            print("storage: no slow disk, fast only: %s" % SLOW["how"], file=sys.stderr)
            disks.remove("slow")
    for rnd in range(1, ROUNDS + 1):
        jobs = []
        if "codecs" in SECTIONS:
            jobs += [("codecs", ds, (co, dk)) for ds in DATASETS for co in CODECS for dk in disks]
        if "default" in SECTIONS:
            jobs += [("default", ds, (co, dk)) for ds in DATASETS for co in DEFAULT_CONFIGS
                     for dk in disks]
        if "threads" in SECTIONS:
            jobs += [("threads", mode, n) for mode in ("idle", "busy") for n in range(1, NPROC + 1)]
        if "incremental" in SECTIONS:
            jobs += [("incremental", co, p) for co in INC_CODECS for p in INC_PCTS]
        if "held" in SECTIONS:
            jobs += [("held", f, m) for f in HELD_POOLS for m in HELD_MODES]
        random.Random(rnd).shuffle(jobs)
        for order, (sec, a, b) in enumerate(jobs, 1):
            print("storage: round %d/%d, %s %s %s" % (rnd, ROUNDS, sec, a, b), file=sys.stderr,
                  flush=True)
            row = {"round": rnd, "order": order}
            if sec == "codecs":
                row.update({"dataset": a, "codec": b[0], "disk": b[1]},
                           **codec_run(a, b[0], b[1], dump, imgdir))
            elif sec == "default":
                row.update({"dataset": a, "config": b[0], "disk": b[1]},
                           **default_run(a, b[0], b[1], dump, imgdir))
            elif sec == "incremental":
                row.update({"codec": a, "pct": b}, **incremental_run(a, b, dump, imgdir))
            elif sec == "held":
                row.update({"frac": a, "mode": b}, **held_run(a, b, dump, imgdir))
            else:
                row.update({"mode": a, "threads": b}, **threads_run(a, b, dump, imgdir))
            rows[sec].append(row)
    add_ratios(rows["codecs"])
    if rows["codecs"]:
        write_csv(os.path.join(OUT, "storage_codecs.csv"), codecs_head(head, disks),
                  ["round", "order", "dataset", "codec", "disk", "disk_per_image", "disk_vs_none",
                   "duration_vs_none"] + KEYS + MIX_KEYS, rows["codecs"])
    add_default_ratios(rows["default"])
    if rows["default"]:
        write_csv(os.path.join(OUT, "storage_default.csv"), codecs_head(head, disks).replace(
                      "; --precopy %s" % PRECOPY, "") + "; --precopy auto (the default)",
                  ["round", "order", "dataset", "config", "disk", "duration_vs_none",
                   "total_vs_none", "disk_vs_none", "compacted_vs_none"] + DEFAULT_KEYS + MIX_KEYS,
                  rows["default"])
    if rows["threads"]:
        write_csv(os.path.join(OUT, "storage_threads.csv"), head,
                  ["round", "order", "mode", "threads"] + KEYS, rows["threads"])
    if rows["incremental"]:
        write_csv(os.path.join(OUT, "storage_incremental.csv"), head,
                  ["round", "order", "codec", "pct"] + INC_KEYS, rows["incremental"])
    if rows["held"]:
        write_csv(os.path.join(OUT, "storage_held.csv"), head,
                  ["round", "order", "frac", "mode", "pool_bytes", "warm_traps_per_snapshot"] +
                  HELD_KEYS, rows["held"])
    heads = {sec: head for sec in rows if rows[sec]}
    if rows["codecs"]:
        heads["codecs"] = codecs_head(head, disks)
    if rows["default"]:
        heads["default"] = codecs_head(head, disks).replace("; --precopy %s" % PRECOPY, "") + \
            "; --precopy auto (the default)"
    for sec in rows:  # a section not run this time: its last results stay in the report
        if not rows[sec]:
            heads[sec], rows[sec] = read_section(sec)
    report(head, heads, rows)
    plot(heads, rows, head)
    if not ENV("IMGDIR"):
        shutil.rmtree(imgdir, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except Failed as ex:
        print("storage: %s" % ex, file=sys.stderr)
        sys.exit(1)
