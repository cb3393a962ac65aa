#!/usr/bin/env python3
"""bench/storage/blocks.py - the codec choice: block size and level on Redis' memory.

Runs bench/codec-bench (one thread, no disk: each block compressed as the image writer
compresses a chunk, kept only when it saves a page) over a dump of a native
redis-server's memory (made as bench/storage/run.py makes it, or DUMP=...), ROUNDS
rounds (default 5) with the configurations shuffled in each: zstd level 1 and LZ4 at
block sizes 64 KiB .. 2 MiB, then zstd levels -5 .. 3 and LZ4 HC 9 at 2 MiB. Writes
bench/results/HOST-CLASS/storage_blocks.csv and storage_blocks.md (stored/data bytes, compression
and decompression MB/s of one core, means and 95% CIs) with commit and machine.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
import provenance  # noqa: E402
import run as storage  # noqa: E402

CB = os.path.join(storage.TOP, "bench", "codec-bench")
ROUNDS = int(os.environ.get("ROUNDS", "5"))
CONFIGS = ([("zstd", 1, b) for b in ("64K", "256K", "1M", "2M")] +
           [("lz4", 1, b) for b in ("64K", "256K", "1M", "2M")] +
           [("zstd", lv, "2M") for lv in (-5, -3, -1, 2, 3)] + [("lz4", 9, "2M")])
KEYS = ["bytes_data", "bytes_stored", "ratio", "compress_mb_per_s", "decompress_mb_per_s"]


def main():
    head = provenance.line(ROUNDS)
    out = storage.OUT
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="ccvm-blocks.", dir="/var/tmp")
    dump = storage.make_redis_dump(work)
    rows = []
    for rnd in range(1, ROUNDS + 1):
        jobs = list(CONFIGS)
        random.Random(rnd).shuffle(jobs)
        for codec, level, block in jobs:
            r = subprocess.run([CB, "--file", dump, "--codec", codec, "--level", str(level),
                                "--block", block], capture_output=True, text=True)
            if r.returncode != 0:
                raise storage.Failed("codec-bench: " + r.stderr.strip()[-200:])
            d = json.loads(r.stdout)
            rows.append(dict({"round": rnd, "codec": codec, "level": level, "block": block},
                             **{k: d[k] for k in KEYS}))
    storage.write_csv(os.path.join(out, "storage_blocks.csv"), head,
                      ["round", "codec", "level", "block"] + KEYS, rows)
    lines = ["# The codec choice on Redis' memory (bench/storage/blocks.py)", "",
             "codec-bench, one core, no disk, over a dump of a native redis-server's memory "
             "after a YCSB load; zero pages left out (holes in an image); a block that does "
             "not save a page counted raw. Mean ± 95%% CI over %d shuffled rounds." % ROUNDS,
             "", head, "", "| codec | level | block | stored / data | compress MB/s | "
             "decompress MB/s |", "|---|---|---|---|---|---|"]
    for codec, level, block in CONFIGS:
        sel = [r for r in rows if (r["codec"], r["level"], r["block"]) == (codec, level, block)]
        lines.append("| %s | %d | %s | %s | %s | %s |" % (
            codec, level, block, storage.fmt([1 / r["ratio"] for r in sel], "%.3f"),
            storage.fmt([r["compress_mb_per_s"] for r in sel], "%.0f"),
            storage.fmt([r["decompress_mb_per_s"] for r in sel], "%.0f")))
    with open(os.path.join(out, "storage_blocks.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    subprocess.run(["rm", "-rf", work], check=False)  # (a DUMP given lies elsewhere)


if __name__ == "__main__":
    try:
        main()
    except storage.Failed as ex:
        print("blocks: %s" % ex, file=sys.stderr)
        sys.exit(1)
