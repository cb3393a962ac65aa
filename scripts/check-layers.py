#!/usr/bin/env python3
"""Check the monitor's include graph: no cycles, and each layer includes only what it
may (README, Layout). Run by `make layers`, which `make test` runs.

  mmu/        mmu/, and vmm/log.h, vmm/role.h, vmm/x86.h
  snapshot/   snapshot/, mmu/, vmm/log.h, vmm/role.h, vmm/x86.h; the pair that knows VMs
              (capture.[ch], restore.[ch]) also vmm/vcpu.h, vmm/vm.h, vmm/linux/lx.h

Prints each violation and exits 1 if there is any.
"""
import os
import re
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIRS = ("vmm", "mmu", "snapshot")
BASE = {"vmm/log.h", "vmm/role.h", "vmm/x86.h"}
VM_PAIR = {"snapshot/capture.c", "snapshot/capture.h", "snapshot/restore.c",
           "snapshot/restore.h"}
VM_HEADERS = {"vmm/vcpu.h", "vmm/vm.h", "vmm/linux/lx.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def files():
    for d in DIRS:
        for root, _, names in os.walk(os.path.join(TOP, d)):
            for n in sorted(names):
                if n.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(root, n), TOP)


def includes(path):
    with open(os.path.join(TOP, path), encoding="utf-8") as f:
        text = f.read()
    for name in INCLUDE.findall(text):
        target = os.path.normpath(os.path.join(os.path.dirname(path), name))
        if target.split(os.sep)[0] in DIRS:
            yield target


def allowed(src, dst):
    layer = src.split("/")[0]
    if layer == "mmu":
        return dst.startswith("mmu/") or dst in BASE
    if layer == "snapshot":
        if dst.startswith(("snapshot/", "mmu/")) or dst in BASE:
            return True
        return src in VM_PAIR and dst in VM_HEADERS
    return True


def cycles(graph):
    """Each include cycle once, as a path that returns to its start."""
    found, state, stack = [], {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in graph.get(n, ()):
            if state.get(m) == 1:
                found.append(stack[stack.index(m):] + [m])
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
    return found


def main():
    graph = {f: sorted(set(includes(f))) for f in files()}
    bad = 0
    for src, dsts in sorted(graph.items()):
        for dst in dsts:
            if not allowed(src, dst):
                print(f"layers: {src} includes {dst}, which its layer may not use")
                bad += 1
    for c in cycles(graph):
        print("layers: include cycle: " + " -> ".join(c))
        bad += 1
    print(f"layers: {len(graph)} files, {sum(map(len, graph.values()))} includes: "
          + ("ok" if not bad else f"{bad} problems"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
