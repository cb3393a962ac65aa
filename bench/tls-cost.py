#!/usr/bin/env python3
"""tls-cost.py - what TLS costs a migration's transfer, on plain memory (no VM needed):
bench/tls-bench sends MEM MiB as a migration stream over loopback TCP, plain, over TLS
with x509 credentials and over TLS with a PSK (made by tests/tls/make-creds.sh), the
three interleaved in a shuffled order each round. It is the transfer alone, the part
of `ctl migrate`'s total time that TLS touches: bench/migrate.py's ccvm-tls row measures
a whole VM's migration where there is KVM.

Outputs in OUT (default bench/results/HOST-CLASS/tls): tls.csv (a row per transfer),
tls_summary.csv
and tls.md (mean and 95% CI of seconds; per round, each TLS channel's time over plain's
of the same round), tls.png. Every file starts with the commit, machine and command.
Environment: ROUNDS (default 5), MEM (MiB, default 1024), ZERO (share of zero pages,
default 30), OUT.
"""
import os
import random
import subprocess
import sys
import tempfile

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(TOP, "bench"))
from ci95 import mean_ci  # noqa: E402
import provenance  # noqa: E402

CHANNELS = ["plain", "x509", "psk"]


def run(creds, channel, mem, zero):
    out = subprocess.run([os.path.join(TOP, "bench", "tls-bench"), "--creds", creds,
                          "--channel", channel, "--mem", str(mem), "--zero", str(zero)],
                         capture_output=True, text=True, timeout=600)
    if out.returncode:
        raise SystemExit(f"tls-cost: {channel}: {out.stderr.strip()}")
    name, secs, nbytes, same = out.stdout.strip().split(",")
    if same != "equal":
        raise SystemExit(f"tls-cost: {channel}: the receiver's copy differs")
    return float(secs), int(nbytes)


def main():
    rounds = int(os.environ.get("ROUNDS", "5"))
    mem = int(os.environ.get("MEM", "1024"))
    zero = int(os.environ.get("ZERO", "30"))
    out = os.environ.get("OUT") or provenance.host_dir("tls")
    os.makedirs(out, exist_ok=True)
    header = provenance.line(rounds, f"mem {mem} MiB, zero pages {zero}%")
    rows = []
    with tempfile.TemporaryDirectory(prefix="ccvm-tls-cost.") as tmp:
        subprocess.run([os.path.join(TOP, "tests", "tls", "make-creds.sh"), tmp], check=True,
                       capture_output=True)
        for rnd in range(1, rounds + 1):
            order = list(CHANNELS)
            random.shuffle(order)
            for ch in order:
                secs, nbytes = run(tmp, ch, mem, zero)
                rows.append({"round": rnd, "channel": ch, "s": secs, "bytes": nbytes})
                print(f"tls-cost: round {rnd} {ch}: {secs:.3f} s", file=sys.stderr)
    with open(os.path.join(out, "tls.csv"), "w") as f:
        f.write(f"# {header}\nround,channel,seconds,bytes\n")
        for r in rows:
            f.write(f"{r['round']},{r['channel']},{r['s']:.6f},{r['bytes']}\n")
    summary = {ch: mean_ci([r["s"] for r in rows if r["channel"] == ch])[1:] for ch in CHANNELS}
    plain = {r["round"]: r["s"] for r in rows if r["channel"] == "plain"}
    ratio = {ch: mean_ci([r["s"] / plain[r["round"]] for r in rows if r["channel"] == ch])[1:]
             for ch in CHANNELS[1:]}
    with open(os.path.join(out, "tls_summary.csv"), "w") as f:
        f.write(f"# {header}\nchannel,seconds,seconds_ci95,over_plain,over_plain_ci95\n")
        for ch in CHANNELS:
            r = ratio.get(ch, (1.0, 0.0))
            f.write(f"{ch},{summary[ch][0]:.6f},{summary[ch][1]:.6f},{r[0]:.4f},{r[1]:.4f}\n")
    with open(os.path.join(out, "tls.md"), "w") as f:
        f.write(f"TLS on a migration's transfer, plain memory ({mem} MiB, {zero}% zero pages, "
                f"codec auto) over loopback TCP: {header}\n\n| channel | seconds | over plain, "
                "per round |\n|---|---|---|\n")
        for ch in CHANNELS:
            s, ci = summary[ch]
            r = ratio.get(ch)
            f.write(f"| {ch} | {s:.3f} ± {ci:.3f} | " +
                    (f"{r[0]:.2f} ± {r[1]:.2f} |\n" if r else "1 |\n"))
    dat = os.path.join(out, "tls.dat")
    with open(dat, "w") as f:
        for i, ch in enumerate(CHANNELS):
            f.write(f"{i} {ch} {summary[ch][0]:g} {summary[ch][1]:g}\n")
    subprocess.run(["gnuplot", "-e", f"set terminal png size 640,400; set output '{out}/tls.png'; "
                    "set title 'migration transfer: plain vs TLS'; set ylabel 'seconds'; "
                    "set style fill solid 0.5; set boxwidth 0.6; set yrange [0:*]; "
                    f"plot '{dat}' using 1:3:4:xtic(2) with boxerrorbars notitle"], check=False)
    print(f"tls-cost: {len(rows)} transfers; results in {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
