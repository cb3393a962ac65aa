#!/usr/bin/env bash
# What a userfaultfd trap, a kernel copy-on-write fault and a 2 MiB region copy cost
# a writer on this machine (bench/cost-bench, no VM needed), and the coverage above
# which copying a region whole beats trapping on its pages.
#
# ROUNDS rounds (default 5); writes costs.csv (every round) and
# costs.md (mean and 95% confidence interval), each with its provenance
# (bench/provenance.py), in OUT (default this host's bench/results/HOST-CLASS).
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$TOP/bench/results/$(python3 "$TOP/bench/provenance.py" class)}
ROUNDS=${ROUNDS:-5}
[ -x "$TOP/bench/cost-bench" ] || { echo "costs: build bench/cost-bench first (make)" >&2; exit 1; }
mkdir -p "$OUT"
prov=$(python3 "$TOP/bench/provenance.py" line "$ROUNDS" -- "$0" "$@")
runs=$(mktemp)
trap 'rm -f "$runs"' EXIT
"$TOP/bench/cost-bench" "$ROUNDS" >"$runs"
PYTHONPATH="$TOP/bench" python3 - "$OUT" "# $prov" "$runs" <<'PY'
import json, sys
from ci95 import mean_ci
out, meta, runs = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [json.loads(l) for l in open(runs) if l.strip()]
keys = ["write_ns", "trap_us", "fork_cow_us", "region_us", "breakeven_uffd", "breakeven_fork"]
with open(out + "/costs.csv", "w") as f:
    f.write(meta + "\n" + "round," + ",".join(keys) + "\n")
    for r in rows:
        f.write("%d," % r["round"] + ",".join("%g" % r[k] for k in keys) + "\n")
with open(out + "/costs.md", "w") as f:
    f.write("Copy-on-write costs (bench/costs.sh, bench/cost-bench): " + meta[2:] + "\n\n")
    f.write("Per page written, on THP-backed memory, the plain write subtracted; mean ± 95%% CI "
            "over %d rounds.\n\n" % len(rows))
    f.write("| figure | value |\n|---|---|\n")
    names = {"write_ns": "a plain write (ns)", "trap_us": "userfaultfd trap, cow's handler (us)",
             "fork_cow_us": "kernel copy-on-write after fork (us)",
             "region_us": "copy and unprotect a 2 MiB region (us)",
             "breakeven_uffd": "coverage above which a region copy beats uffd traps",
             "breakeven_fork": "coverage above which a region copy beats fork's faults"}
    for k in keys:
        _, m, c = mean_ci([r[k] for r in rows])
        f.write("| %s | %.4g ± %.2g |\n" % (names[k], m, c))
print(open(out + "/costs.md").read())
PY
