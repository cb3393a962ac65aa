#!/usr/bin/env bash
# The snapshot engine's policies side by side without a VM (bench/engine-bench: host
# threads writing plain memory, the real engine, userfaultfd and image files).
#
# ROUNDS rounds (default 5); in each, every configuration runs once, in an order
# shuffled per round, so that drift of the machine spreads over all of them. Writes
# OUT/engine_sweep.csv (default this host's bench/results/HOST-CLASS) (one row per
# run), engine_sweep_summary.csv and
# engine_sweep.md (mean and 95% confidence interval per configuration, Student's t over
# the rounds) and engine_sweep.png; every file records the commit and machine.
#
# Environment: ROUNDS, MEM (default 256M), THREADS (2), ALPHA (0.99), GAP (seconds from
# one snapshot's end to the next one's start, the same for every policy; default 1),
# DURATION (seconds per run, default 8), SCATTER (default 1: hot blocks spread over
# memory, the layout every comparison uses; 0: packed), IMGDIR (where images go;
# default a temporary directory), TRAP_US (engine-bench --trap-cost-us: the model of a
# VM host's dearer write faults and dirty-log faults; default 0, none), CONFIGS (the
# configurations, space separated, each name:policy:threshold[:precopy], threshold -
# for the default and precopy one of engine-bench's --precopy; default below), OUT,
# PARENT (a built tree of another commit: a configuration whose name ends in @parent
# runs PARENT's engine-bench, and the summary adds each configuration's per-round ratio
# to its @parent twin: the same experiment, old build against new).
#
# The writers run flat out (closed loop): max_stall_ms and p999_batch_ms are how long
# a writer's batch of 64 updates took, the snapshot's pause and traps included, not a
# request latency measured from intended start times.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
EB=$TOP/bench/engine-bench
OUT=${OUT:-$TOP/bench/results/$(python3 "$TOP/bench/provenance.py" class)}
ROUNDS=${ROUNDS:-5}
MEM=${MEM:-256M}
THREADS=${THREADS:-2}
ALPHA=${ALPHA:-0.99}
GAP=${GAP:-1}
DURATION=${DURATION:-8}
SCATTER=${SCATTER:-1}
IMGDIR=${IMGDIR:-$(mktemp -d /var/tmp/ccvm-engine-sweep.XXXXXX)}
mkdir -p "$OUT" "$IMGDIR"
trap 'rm -rf "$IMGDIR"' EXIT
[ -x "$EB" ] || { echo "engine-sweep: build bench/engine-bench first (make)" >&2; exit 1; }

# name:policy:threshold[:precopy] (threshold - for none, stop and cow)
CONFIGS=${CONFIGS:-"none:none:- stop:stop:- cow:cow:- ccow:ccow:0.8 ccow-all:ccow:0 fork:fork:-"}
TRAP_US=${TRAP_US:-0}
parent=
if [ -n "${PARENT:-}" ]; then
	[ -x "$PARENT/bench/engine-bench" ] || { echo "engine-sweep: PARENT=$PARENT has no built bench/engine-bench" >&2; exit 1; }
	parent=" parent $(git -C "$PARENT" rev-parse --short HEAD)"
fi
prov=$(python3 "$TOP/bench/provenance.py" line "$ROUNDS" "mem $MEM threads $THREADS alpha $ALPHA gap ${GAP}s (end to start) duration ${DURATION}s scatter $SCATTER trap-cost-us $TRAP_US configs $CONFIGS$parent" -- "$0" "$@")
commit=${prov#commit }
commit=${commit%%;*}
raw=$OUT/engine_sweep.csv
scatter=; [ "$SCATTER" = 1 ] && scatter=--scatter

{
	echo "# $prov"
	echo "round,order,config,policy,threshold,updates_per_s,during,max_stall_ms,p999_batch_ms,snapshots,traps,pause_us_max,pause_us_mean,duration_ms_mean,pages_copied,regions_hot,regions_precopied,extra_bytes_peak_max,tracker_lost_ms,tracker_longest_stall_ms"
} >"$raw"

for round in $(seq 1 "$ROUNDS"); do
	order=0
	for cfg in $(echo $CONFIGS | tr ' ' '\n' | shuf --random-source=<(yes "$round")); do
		IFS=: read -r name policy thr precopy <<<"$cfg"
		args=(--mem "$MEM" --threads "$THREADS" --alpha "$ALPHA" --policy "$policy"
		      --snapshot-gap "$GAP" --duration "$DURATION" --dir "$IMGDIR" --json)
		[ "$thr" != - ] && args+=(--threshold "$thr")
		[ -n "$precopy" ] && args+=(--precopy "$precopy")
		[ "$TRAP_US" != 0 ] && args+=(--trap-cost-us "$TRAP_US")
		[ -n "$scatter" ] && args+=("$scatter")
		order=$((order + 1))
		echo "engine-sweep: round $round/$ROUNDS, $name" >&2
		eb=$EB
		case $name in *@parent) eb=${PARENT:?a configuration @parent needs PARENT}/bench/engine-bench ;; esac
		line=$("$eb" "${args[@]}")
		python3 - "$round" "$order" "$name" "$thr" "$line" >>"$raw" <<'PY'
import json, sys
r, order, name, thr, line = sys.argv[1:6]
d = json.loads(line)
keys = ["updates_per_s", "during", "max_stall_ms", "p999_batch_ms", "snapshots", "traps",
        "pause_us_max", "pause_us_mean", "duration_ms_mean", "pages_copied", "regions_hot",
        "regions_precopied", "extra_bytes_peak_max", "tracker_lost_ms", "tracker_longest_stall_ms"]
vals = ["" if d.get(k) is None else "%.6g" % d[k] for k in keys]
print(",".join([r, order, name, d["policy"], thr] + vals))
PY
	done
done

PYTHONPATH="$TOP/bench" python3 - "$raw" "$OUT" "$CONFIGS" <<'PY'
import csv, math, sys
from ci95 import mean_ci
raw, out = sys.argv[1], sys.argv[2]
lines = open(raw).read().splitlines()
meta = [l for l in lines if l.startswith("#")]
rows = list(csv.DictReader([l for l in lines if not l.startswith("#")]))
# In the order CONFIGS gives them, not the shuffled order they ran in.
order = [c.split(":")[0] for c in sys.argv[3].split()]
metrics = ["updates_per_s", "during", "max_stall_ms", "p999_batch_ms", "traps", "pause_us_max",
           "pages_copied", "regions_hot"]
def num(x):
    return float(x) if x not in ("", None) else None
summary = []
for c in order:
    rs = [r for r in rows if r["config"] == c]
    rec = {"config": c}
    for k in metrics:
        n, m, ci = mean_ci([num(r[k]) for r in rs])
        rec[k] = (m, ci)
        rec["n"] = n
    summary.append(rec)
with open(out + "/engine_sweep_summary.csv", "w") as f:
    for l in meta:
        f.write(l + "\n")
    f.write("config,n," + ",".join("%s_mean,%s_ci95" % (k, k) for k in metrics) + "\n")
    for rec in summary:
        f.write("%s,%d," % (rec["config"], rec["n"]) +
                ",".join("%.6g,%.6g" % rec[k] for k in metrics) + "\n")
none = next((r for r in summary if r["config"] == "none"), None)
with open(out + "/engine_sweep.md", "w") as f:
    f.write("Engine sweep (bench/engine-sweep.sh): " + "; ".join(l[2:] for l in meta) + "\n\n")
    f.write("Mean ± 95% CI over the rounds. *vs none*: updates/s relative to the same rounds' runs "
            "without snapshots; *during*: the writers' rate while a snapshot runs over their rate "
            "in the same run without one.\n\n")
    f.write("| config | n | updates/s | vs none | during | max stall ms | p99.9 batch ms | traps | "
            "pause max µs | regions hot |\n|---|---|---|---|---|---|---|---|---|---|\n")
    for rec in summary:
        u = rec["updates_per_s"]
        rel = u[0] / none["updates_per_s"][0] if none else float("nan")
        def pm(k, fmt):
            m, ci = rec[k]
            return (fmt % m) + (" ± " + fmt % ci if not math.isnan(ci) else "")
        f.write("| %s | %d | %s | %.2f | %s | %s | %s | %s | %s | %s |\n" % (
            rec["config"], rec["n"], pm("updates_per_s", "%.3g"), rel, pm("during", "%.2f"),
            pm("max_stall_ms", "%.1f"), pm("p999_batch_ms", "%.2f"), pm("traps", "%.0f"),
            pm("pause_us_max", "%.0f"), pm("regions_hot", "%.1f")))
# Old build against new: each configuration's per-round ratio to its @parent twin.
pairs = [(c, c + "@parent") for c in order if c + "@parent" in order]
if pairs:
    with open(out + "/engine_sweep.md", "a") as f:
        f.write("\nThis build over PARENT's, per round (mean ± 95% CI of the ratio; 1 inside "
                "the CI: they match):\n\n| config | updates/s | during | p99.9 batch | "
                "pause max |\n|---|---|---|---|---|\n")
        for new, old in pairs:
            cells = []
            for k in ["updates_per_s", "during", "p999_batch_ms", "pause_us_max"]:
                ratios = []
                for r in sorted({x["round"] for x in rows}):
                    a = [num(x[k]) for x in rows if x["round"] == r and x["config"] == new]
                    b = [num(x[k]) for x in rows if x["round"] == r and x["config"] == old]
                    if a and b and a[0] is not None and b[0]:
                        ratios.append(a[0] / b[0])
                n, m, ci = mean_ci(ratios)
                cells.append("-" if math.isnan(m) else "%.3f ± %.3f" % (m, ci))
            f.write("| %s | %s |\n" % (new, " | ".join(cells)))
with open(out + "/engine_sweep.dat", "w") as f:
    for i, rec in enumerate(summary):
        m, ci = rec["updates_per_s"]
        d, dci = rec["during"]
        f.write("%d %s %g %g %g %g\n" % (i, rec["config"], m / 1e6, ci / 1e6,
                                         0 if math.isnan(d) else d, 0 if math.isnan(dci) else dci))
PY

gnuplot <<EOF
set terminal pngcairo noenhanced size 900,420 font ",10"
set output "$OUT/engine_sweep.png"
set multiplot layout 1,2 title "engine-bench: $MEM, $THREADS writers, alpha $ALPHA, ${GAP}s between snapshots, trap cost ${TRAP_US} us ($commit; mean, 95% CI)"
set style fill solid 0.5
set boxwidth 0.6
set xtics rotate by -30
set yrange [0:*]
set xrange [-0.6:$(echo $CONFIGS | wc -w)-0.4]
set ylabel "million updates/s"
plot "$OUT/engine_sweep.dat" using 1:3:4:xtic(2) with boxerrorbars notitle
set ylabel "during (rate in a snapshot / rate outside)"
set yrange [0:1.1]
plot "$OUT/engine_sweep.dat" using 1:5:6:xtic(2) with boxerrorbars notitle
unset multiplot
EOF
rm -f "$OUT/engine_sweep.dat"
cat "$OUT/engine_sweep.md"
