#!/usr/bin/env python3
"""headline.py - every figure README states, measured at HEAD on this machine in one run
(`make bench-headline`): each part is one of the drivers, 5 rounds with the compared
systems shuffled per round, writing its results files (with their provenance) into
bench/results/HOST-CLASS/PART/. The class's previous run moves to
bench/results/history/HOST-CLASS/COMMIT-DATE/ first, so the folder holds one run: the
newest. headline.json (and headline.md) beside the parts say what ran, how long each
part took, and what was skipped and why.

Parts (the VM ones need /dev/kvm; without it they are skipped and named, never run
nested under TCG, whose times mean nothing):

  engine          the engine sweep on plain memory (bench/engine-sweep.sh)
  compression     snapshot storage per codec on this disk and one throttled to 200 MB/s
                  (bench/storage/run.py, the codecs section, Redis' memory)
  redis-serving   Redis at redis-benchmark -P 16 in ccvm against native (VM;
                  bench/redis-snapshots)
  redis-snapshots Redis under YCSB A, open loop: ccvm's default policy, BGSAVE inside
                  ccvm, native BGSAVE, native and ccvm without snapshots (VM;
                  bench/peers/redis.py)
  zipf-peers      zipfbench in ccvm against QEMU's background snapshot (VM;
                  bench/peers/peers.py)
  pause-restore   snapshot pause (cow, stop) and restore (eager, lazy) at 1 and 4 GiB
                  (VM; bench/snapshots.sh)
  migration       live migration on loopback against QEMU's pre-copy (VM; bench/migrate.py)

A full run then renders README's and docs/evaluation.md's figure blocks from the newest
run of each class (bench/render.py --write), for the commit that adds the results.

QUICK=1 takes a smaller subset (shorter runs, fewer systems and sizes, still 5 rounds)
within about 15 minutes, into bench/results/HOST-CLASS/quick/, which is never rendered
as the headline. PARTS (space separated) runs only those parts, into the same folder
(the rest of the newest run stays). Exit 1 when a part failed.
"""
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(TOP, "bench"))
import provenance  # noqa: E402
import render  # noqa: E402

ROUNDS = 5
BUDGET_MIN = {False: 60, True: 15}   # the whole run, full and QUICK
MANIFEST = "headline.json"


def part(name, vm, cmd, full, quick, what):
    """A part: its driver (@cmd, from the top of the tree), whether it needs /dev/kvm, its
    settings in a full run and in a QUICK one."""
    return {"name": name, "vm": vm, "cmd": cmd, "full": full, "quick": quick, "what": what}


PARTS = [
    part("engine", False, ["bench/engine-sweep.sh"], {}, {"DURATION": "3"},
         "engine sweep, plain memory"),
    part("compression", False, ["bench/storage/run.py"],
         {"SECTIONS": "codecs", "DATASETS": "redis"},
         {"SECTIONS": "codecs", "DATASETS": "redis", "CODECS": "none auto", "DURATION": "3"},
         "snapshot storage per codec, this disk and a throttled one"),
    part("redis-serving", True, ["bench/redis-snapshots"], {},
         {"REQUESTS": "100000", "MEM": "2G"}, "Redis serving -P16, ccvm against native"),
    part("redis-snapshots", True, ["bench/peers/redis.py"],
         {"WORKLOADS": "ycsb-a", "DURATION": "20",
          "SYSTEMS": "native native-bgsave ccvm-none ccvm-ccow ccvm-bgsave"},
         {"WORKLOADS": "ycsb-a", "DURATION": "8", "RECORDS": "100000",
          "SYSTEMS": "native-bgsave ccvm-ccow"},
         "Redis under snapshots: ccvm default, BGSAVE in ccvm, native BGSAVE"),
    part("zipf-peers", True, ["bench/peers/peers.py"],
         {"WORKLOADS": "zipf-a0.99", "SYSTEMS": "ccvm-none ccvm-ccow qemu-none qemu-bg"},
         {"WORKLOADS": "zipf-a0.99", "SYSTEMS": "ccvm-ccow qemu-bg", "DURATION": "6"},
         "zipfbench, ccvm against QEMU background snapshot"),
    part("pause-restore", True, ["bench/snapshots.sh"], {"SIZES": "1024 4096", "SECTIONS": "1 3"},
         {"SIZES": "1024", "SECTIONS": "1 3"}, "snapshot pause and restore, 1 and 4 GiB"),
    part("migration", True, ["bench/migrate.py"],
         {"WORKLOADS": "zipfbench", "SYSTEMS": "ccvm-coverage qemu-precopy"},
         {"WORKLOADS": "zipfbench", "SYSTEMS": "ccvm-coverage qemu-precopy", "SIZE": "256",
          "WARMUP": "4"}, "live migration, ccvm against QEMU pre-copy"),
]


def have_kvm():
    return os.path.exists("/dev/kvm")


def run_dir(quick):
    d = provenance.host_dir("quick") if quick else provenance.host_dir()
    os.makedirs(d, exist_ok=True)
    return d


def archive(out, quick):
    """The class's previous run (what @out holds but quick/) into history/; its name from
    the previous manifest's commit and date."""
    old = [n for n in os.listdir(out) if n != "quick" or quick]
    if not old:
        return None
    try:
        with open(os.path.join(out, MANIFEST)) as f:
            prev = json.load(f)
        tag = f"{prev['commit']}-{prev['date'][:10]}"
    except (OSError, ValueError, KeyError):
        tag = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    dest = os.path.join(provenance.RESULTS, provenance.HISTORY, provenance.host_class()
                        + ("-quick" if quick else ""), tag)
    if os.path.exists(dest):  # a second run of the same commit on the same day
        dest += time.strftime("-%H%M%S", time.gmtime())
    os.makedirs(dest)
    for n in old:
        shutil.move(os.path.join(out, n), os.path.join(dest, n))
    return os.path.relpath(dest, TOP)


def run_part(p, quick, out, log_dir):
    """One part, its output in @log_dir/NAME.log: its manifest entry."""
    settings = dict(sorted({"ROUNDS": str(ROUNDS), **(p["quick"] if quick else p["full"])}.items()))
    env = dict(os.environ, OUT=os.path.join(out, p["name"]), **settings)
    env.pop("QUICK", None)   # the drivers' own QUICK means one round
    os.makedirs(env["OUT"], exist_ok=True)
    entry = {"name": p["name"], "what": p["what"], "vm": p["vm"],
             "command": " ".join([f"{k}={shlex.quote(v)}" for k, v in settings.items()]
                                 + p["cmd"])}
    log = os.path.join(log_dir, p["name"] + ".log")
    print(f"headline: {p['name']}: {entry['command']} (log {log})", file=sys.stderr)
    t0 = time.monotonic()
    with open(log, "w") as f:
        rc = subprocess.run([os.path.join(TOP, p["cmd"][0])] + p["cmd"][1:], cwd=TOP, env=env,
                            stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
    entry["seconds"] = round(time.monotonic() - t0, 1)
    entry["status"] = "ok" if rc == 0 else "failed"
    if rc:
        with open(log, errors="replace") as f:
            entry["why"] = f"exit {rc}: " + f.read()[-600:].strip()
        print(f"headline: {p['name']} FAILED ({entry['why'][-300:]})", file=sys.stderr)
    return entry


def render_docs():
    render.main(["--write"])


def pick(names):
    known = [p["name"] for p in PARTS]
    bad = [n for n in names if n not in known]
    if bad:
        raise SystemExit(f"headline: unknown PARTS {' '.join(bad)} (known: {' '.join(known)})")
    return [p for p in PARTS if not names or p["name"] in names]


def write_md(path, m):
    lines = [m["provenance"], "",
             f"Headline run (bench/headline.py), {'QUICK subset' if m['quick'] else 'full'}: "
             f"{m['minutes']} min against a budget of {m['budget_min']}.", "",
             "| part | what | status | seconds | command |", "|---|---|---|---|---|"]
    for e in m["parts"]:
        lines.append(f"| {e['name']} | {e['what']} | {e['status']}"
                     f"{': ' + e['why'].splitlines()[0][:120] if e.get('why') else ''} | "
                     f"{e.get('seconds', '-')} | `{e.get('command', '-')}` |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    quick = os.environ.get("QUICK") == "1"
    parts = pick(os.environ.get("PARTS", "").split())
    kvm = have_kvm()
    out = run_dir(quick)
    moved = None if os.environ.get("PARTS") else archive(out, quick)
    log_dir = os.environ.get("LOGDIR") or os.path.join("/var/tmp", "ccvm-headline-logs")
    os.makedirs(log_dir, exist_ok=True)
    t0 = time.monotonic()
    entries = []
    for p in parts:
        if p["vm"] and not kvm:
            entries.append({"name": p["name"], "what": p["what"], "vm": True,
                            "status": "skipped", "why": "no /dev/kvm: VM figures are not "
                            "measured nested under TCG"})
            print(f"headline: {p['name']} skipped: no /dev/kvm", file=sys.stderr)
            continue
        entries.append(run_part(p, quick, out, log_dir))
    minutes = round((time.monotonic() - t0) / 60, 1)
    head = provenance.line(ROUNDS, f"headline {'quick' if quick else 'full'}, parts "
                           f"{' '.join(p['name'] for p in parts)}")
    m = {"provenance": head, "commit": provenance.commit(), "host_class": provenance.host_class(),
         "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "quick": quick,
         "kvm": kvm, "rounds": ROUNDS, "minutes": minutes, "budget_min": BUDGET_MIN[quick],
         "archived": moved, "parts": entries}
    manifest = os.path.join(out, MANIFEST)
    if os.environ.get("PARTS") and os.path.exists(manifest):
        with open(manifest) as f:
            prev = json.load(f)
        kept = [e for e in prev.get("parts", []) if e["name"] not in {p["name"] for p in parts}]
        m["parts"] = kept + entries
    with open(manifest, "w") as f:
        json.dump(m, f, indent=1)
    write_md(os.path.join(out, "headline.md"), m)
    skipped = [e["name"] for e in entries if e["status"] == "skipped"]
    failed = [e["name"] for e in entries if e["status"] == "failed"]
    print(f"headline: {minutes} min (budget {BUDGET_MIN[quick]}); results in "
          f"{os.path.relpath(out, TOP)}" + (f"; previous run in {moved}" if moved else "") +
          (f"; VM figures skipped (no /dev/kvm): {' '.join(skipped)}" if skipped else "") +
          (f"; FAILED: {' '.join(failed)}" if failed else ""), file=sys.stderr)
    if minutes > BUDGET_MIN[quick]:
        print(f"headline: over the {BUDGET_MIN[quick]}-minute budget", file=sys.stderr)
    if not quick:  # README's and evaluation.md's blocks follow the newest run
        render_docs()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
