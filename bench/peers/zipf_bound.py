#!/usr/bin/env python3
"""bench/peers/zipf_bound.py - why zipfbench's point of issue 31 cannot be met here.

A model, not a measurement: zipfbench's pages under its Zipf distribution (1 KiB blocks,
4 to a page, ranks scattered by a random permutation), written at RATE updates/s. It
prints how many pages the guest has written after a time, and, for a snapshot that
copies the hottest half of the pages in the pause (the memory the point allows), writes
PAUSE_MIB more to disk in the pause and leaves the rest protected while the writer
stores them hottest first at DISK bytes/s: how many of those the guest writes before
the writer reaches them, each a trap. docs/evaluation.md quotes it.

Environment: SIZE_MIB (256), ALPHA (0.99), RATE (4.5e6), SPEED (0.8: the share of its
speed the guest keeps), DISK (1.0e9), PAUSE_MIB (35).
"""
import math
import os
import random

BLOCK, PAGE = 1024, 4096


def page_weights(size_mib, alpha, seed=7):
    n = size_mib * 1024 * 1024 // BLOCK
    w = [r ** -alpha for r in range(1, n + 1)]
    total = sum(w)
    perm = list(range(n))
    random.Random(seed).shuffle(perm)
    pages = [0.0] * (n * BLOCK // PAGE)
    for rank, x in enumerate(w):
        pages[perm[rank] * BLOCK // PAGE] += x / total
    return sorted(pages, reverse=True)


def main():
    env = os.environ.get
    size, alpha = int(env("SIZE_MIB", "256")), float(env("ALPHA", "0.99"))
    rate, speed = float(env("RATE", "4.5e6")), float(env("SPEED", "0.8"))
    disk, pause_mib = float(env("DISK", "1.0e9")), int(env("PAUSE_MIB", "35"))
    pages = page_weights(size, alpha)
    for ms in (10, 50, 100, 200):
        n = rate * ms / 1000
        share = sum(1 - math.exp(-n * q) for q in pages) / len(pages)
        print(f"after {ms} ms at full speed: {share:.0%} of the pages written")
    first = len(pages) // 2 + pause_mib * 1024 * 1024 // PAGE
    left, per = pages[first:], PAGE / disk
    traps = sum(1 - math.exp(-rate * speed * q * (i + 1) * per) for i, q in enumerate(left))
    print(f"{len(left)} pages left protected; the guest at {speed:.0%} of its speed writes "
          f"{traps:.0f} of them before the writer reaches them: {traps * 15e-3:.0f} ms of "
          f"traps at 15 us (fork), {traps * 100e-3:.0f} ms at 100 us (this host's VMs)")


if __name__ == "__main__":
    main()
