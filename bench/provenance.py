"""provenance.py - where a benchmark's results come from, for the first line of every
results file, and the check that each file has it (docs/evaluation.md, "Provenance").

The line names, in this order and with these labels: the commit (with +dirty when tracked
files outside bench/results differ from it), the CPU model, its cores, the kernel, the
hypervisor under this machine (kvm_pvm when /dev/kvm is PVM's, vm under another, bare on
none), /dev/kvm, the THP mode, the UTC date, the rounds, what else the driver says of its run, and last the
exact command (the bench settings given in the environment, then the script and its
arguments). The same facts name the host class, the folder under bench/results that
holds this machine's current results (amd-epyc-kvm_pvm, intel-xeon-kvm_pvm...): results
from different classes never share a table. Runs older than a folder's current ones are
kept under bench/results/history/ and are never cited as current.

As a program: `provenance.py line ROUNDS [DETAIL] -- COMMAND...` prints a line for a
shell driver; `provenance.py class` prints the host class; `provenance.py check [PATH...]`
checks every results file under bench/results (history/ aside) or the ones named, and
exits 1 naming each that lacks a field. The Python drivers put bench/ on sys.path."""
import json
import os
import re
import shlex
import subprocess
import sys
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
RESULTS = os.path.join(TOP, "bench", "results")
HISTORY = "history"

# The benchmarks' settings read from the environment: those given are part of a command.
KNOBS = ["ROUNDS", "QUICK", "WORKLOADS", "SYSTEMS", "REDIS_SYSTEMS", "CONFIGS", "SIZE",
         "SIZES", "SIZE_MIB", "RAM_MIB", "MEM", "REDIS_MEM", "ZERO", "ALPHA", "THREADS",
         "SCATTER", "GAP", "DURATION", "WARMUP", "AFTER", "REDIS_SECONDS", "REDIS_WARMUP",
         "RECORDS", "CLIENTS", "TARGET", "TRACKER_S", "TRAP_US", "SECTIONS", "ACCEL",
         "IMGDIR", "SNAPLOG", "PORT", "OUT", "PARTS", "START_RUNS"]

# Every results file's first line carries these (FIELDS[k] matches k's value).
FIELDS = {"commit": r"commit [0-9a-f]{7,40}(\+dirty)?(;|$)", "cpu": r"; cpu [^;]+",
          "cores": r"; cores \d+", "kernel": r"; kernel \S+",
          "hypervisor": r"; hypervisor (kvm_pvm|vm|bare)\b",
          "date": r"; date \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "rounds": r"; rounds \d+",
          "command": r"; command: \S.*$"}
# Files read as results (plots are drawn from the CSV beside them).
RESULT_EXT = (".csv", ".md", ".json", ".jsonl")


def sh(*cmd):
    """A command's stdout, stripped; empty when it fails or is missing."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=TOP)
    except OSError:
        return ""
    return r.stdout.strip() if r.returncode == 0 else ""


def commit():
    c = sh("git", "rev-parse", "--short", "HEAD") or "unknown"
    # Results are what runs write, not code: a run replacing committed ones (a headline
    # run moves the class's previous run to history/) would otherwise mark itself dirty.
    if sh("git", "status", "--porcelain", "--untracked-files=no", "--", ".",
          ":(exclude)bench/results"):
        c += "+dirty"
    return c


def cpuinfo(key):
    try:
        with open("/proc/cpuinfo") as f:
            return next((l.split(":", 1)[1].strip() for l in f if l.startswith(key)), "?")
    except OSError:
        return "?"


def hypervisor():
    """kvm_pvm where /dev/kvm is PVM's (our nested hosts), vm under any other
    hypervisor, bare on none."""
    if os.path.isdir("/sys/module/kvm_pvm"):
        return "kvm_pvm"
    return "vm" if "hypervisor" in cpuinfo("flags").split() else "bare"


def kvm():
    if not os.path.exists("/dev/kvm"):
        return "absent"
    return "present, nested" if hypervisor() != "bare" else "present"


def thp():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return f.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        return "?"


def host_class():
    """vendor-family-hypervisor, lower case: amd-epyc-kvm_pvm, intel-xeon-vm..."""
    words = re.sub(r"\((R|TM)\)", "", cpuinfo("model name")).lower().split()
    vendor = {"authenticamd": "amd", "genuineintel": "intel"}.get(cpuinfo("vendor_id").lower(),
                                                                  "cpu")
    family = next((w for w in words if w not in (vendor, "processor", "cpu")
                   and re.fullmatch(r"[a-z]+", w)), "unknown")
    return f"{vendor}-{family}-{hypervisor()}"


def host_dir(*parts):
    """bench/results/HOST-CLASS[/parts...] (the driver makes it as it writes)."""
    return os.path.join(RESULTS, host_class(), *parts)


def command(argv=None):
    """The exact command: the settings given, then the script (from the top of the tree)
    and its arguments."""
    argv = sys.argv if argv is None else argv
    given = [f"{k}={shlex.quote(os.environ[k])}" for k in KNOBS if k in os.environ]
    script = os.path.relpath(os.path.abspath(argv[0]), TOP) if argv and argv[0] else "?"
    return " ".join(given + [shlex.quote(script)] + [shlex.quote(a) for a in argv[1:]])


def line(rounds, detail="", cmd=None):
    """The first line of a results file (without '# '): DETAIL is the driver's own say of
    the run (sizes, workloads...), CMD the command when not this process's."""
    extra = f"; {detail}" if detail else ""
    return (f"commit {commit()}; cpu {cpuinfo('model name')}; cores {os.cpu_count()}; "
            f"kernel {os.uname().release}; hypervisor {hypervisor()}; kvm {kvm()}; "
            f"thp {thp()}; date {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}; "
            f"rounds {rounds}{extra}; command: {cmd if cmd is not None else command()}")


def first_line(path):
    """A results file's provenance: a CSV's or JSON lines' '# ' comment, a Markdown
    file's first line, a JSON object's "provenance"."""
    with open(path, errors="replace") as f:
        if path.endswith(".json"):
            try:
                return str(json.load(f).get("provenance", ""))
            except (ValueError, AttributeError):
                return ""
        head = f.readline().strip()
    return head[2:] if head.startswith("# ") else head


def field(head, name):
    """The value of field @name in a provenance line @head ("?" where it lacks it)."""
    m = re.search(FIELDS[name], head)
    if not m:
        return "?"
    value = m.group(0).lstrip("; ").split(" ", 1)[1]   # "command:" ends at the line's end
    return value if name == "command" else value.rstrip(";")


def missing(path):
    """The fields the file's provenance lacks (empty when it has them all)."""
    head = first_line(path)
    return [k for k in FIELDS if field(head, k) == "?"]


def results_files(paths):
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for d, dirs, files in os.walk(p):
            dirs[:] = sorted(x for x in dirs if x != HISTORY)
            for n in sorted(files):
                if n.endswith(RESULT_EXT):
                    yield os.path.join(d, n)


def check(paths):
    bad = 0
    n = 0
    for p in results_files(paths or [RESULTS]):
        n += 1
        lack = missing(p)
        if lack:
            bad += 1
            print(f"provenance: {os.path.relpath(p, TOP)}: no {', '.join(lack)} in its "
                  f"first line", file=sys.stderr)
    print(f"provenance: {n - bad} of {n} results files name commit, cpu, cores, kernel, "
          f"hypervisor, date, rounds and command")
    return 1 if bad else 0


def main(argv):
    if argv[:1] == ["check"]:
        return check(argv[1:])
    if argv[:1] == ["class"]:
        print(host_class())
        return 0
    if argv[:1] == ["line"] and "--" in argv and argv.index("--") in (2, 3) and \
            argv[1].isdigit() and len(argv) > argv.index("--") + 1:
        cut = argv.index("--")
        print(line(argv[1], argv[2] if cut == 3 else "", command(argv[cut + 1:])))
        return 0
    print("usage: provenance.py check [PATH...] | class | line ROUNDS [DETAIL] -- COMMAND...",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
