"""provenance.py - where a benchmark's results come from: the commit (with +dirty when
tracked files differ from it) and the machine (cores, kernel, CPU, /dev/kvm and whether it
is nested, the THP mode), for the first line of every results file. The Python drivers
(threshold-sweep.py, peers/peers.py, peers/redis.py) put bench/ on sys.path for it."""
import os
import subprocess
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def sh(*cmd):
    """A command's stdout, stripped; empty when it fails or is missing."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=TOP)
    except OSError:
        return ""
    return r.stdout.strip() if r.returncode == 0 else ""


def commit():
    c = sh("git", "rev-parse", "--short", "HEAD") or "unknown"
    if sh("git", "status", "--porcelain", "--untracked-files=no"):
        c += "+dirty"
    return c


def machine():
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                  if l.startswith("model name")), "?")
    kvm = "absent"
    if os.path.exists("/dev/kvm"):
        kvm = "present, nested" if "hypervisor" in open("/proc/cpuinfo").read() else "present"
    thp = "?"
    try:
        thp = open("/sys/kernel/mm/transparent_hugepage/enabled").read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        pass
    return (f"{os.uname().nodename} {os.cpu_count()} cpus, {os.uname().release}, {model}, "
            f"kvm {kvm}, THP {thp}")


def line():
    """'commit C; machine M; UTC time': the start of a results file's first line."""
    return (f"commit {commit()}; machine {machine()}; "
            f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
