#!/usr/bin/env bash
# The CCoW paper's evaluation, reproduced on ccvm.
#
# zipfbench in ccvm: Zipf area SIZE (default 2G), 1 KiB blocks, alpha 1.0, DURATION
# seconds of writes (default 20), periodic live snapshots every INTERVAL seconds. INTERVAL is measured first:
# under cow, the time from a snapshot's start until throughput is back to 99% of normal
# (3-report moving average). Then, side by side in one run, for each configuration:
# average throughput and peak RSS of the ccvm process (copies included) normalised to
# cow, total CoW faults, mean snapshot duration, the work lost per snapshot (seconds
# of normal throughput) and the guest's throughput during snapshots (relative to no
# snapshots: 1 - lost / duration). Configurations: no snapshots, stop, cow, ccow at
# 2M/0.80, CCoW-All, region sizes 32K..4M at 0.80, thresholds 0.70..0.95 at 2M, eager
# pre-copy (ccow and CCoW-All, default pause budget; every other ccow configuration is
# lazy), and the ablations (linear save order; no pool). The tracker's own cost is measured apart,
# over TRACKER_S seconds (default 150: a window and the gap after it), with and
# without the tracker, no snapshots.
# The sweep runs twice: writer unlimited, and writer limited (RATE) so that a snapshot
# lasts about one interval, as the paper's child process did.
#
# Output (OUT, default this host's bench/results/HOST-CLASS): ccow_sweep.csv,
# ccow_sweep.md, ccow_regions.png (the paper's
# Figure 3), ccow_thresholds.png (Figure 4). Environment: SIZE (default 2G), DURATION
# (seconds per run, default 20), TRACKER_S.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
CCVM=$TOP/ccvm
ZB=$TOP/build/guest/zipfbench
OUT=${OUT:-$TOP/bench/results/$(python3 "$TOP/bench/provenance.py" class)}
SIZE=${SIZE:-2G}
[ -x "$CCVM" ] && [ -x "$ZB" ] || { echo "ccow-sweep: build first (make bench-ccow does)" >&2; exit 1; }
W=$(mktemp -d /var/tmp/ccvm-sweep.XXXXXX)
trap 'rm -rf "$W"' EXIT
mkdir -p "$OUT"

mib() { numfmt --from=iec "$1" | awk '{print int($1 / 1048576)}'; }
SIZE_MIB=$(mib "$SIZE")
RAM_MIB=$((SIZE_MIB + 512))
# Time-bound runs: at our guest's speed 10 x SIZE writes end before the first snapshot
# of the fastest configurations, and every configuration must see the same intervals.
DURATION=${DURATION:-20}
TRACKER_S=${TRACKER_S:-150}
ZARGS=(--size "${SIZE_MIB}M" --alpha 1.0 --seed 7)
DUR=$DURATION

# run NAME [ccvm options...]: one zipfbench run; prints "ups seconds hwm_kib snaps faults mean_ms"
run() {
	local name=$1; shift
	rm -rf "$W/snaps" "$W/log"; mkdir -p "$W/snaps"
	"$CCVM" run --mem "${RAM_MIB}M" "$@" -- "$ZB" "${ZARGS[@]}" --duration "$DUR" --report-ms 100 >"$W/$name.out" 2>"$W/$name.err" &
	local pid=$! hwm=0 h
	while kill -0 $pid 2>/dev/null; do
		h=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
		[ -n "$h" ] && hwm=$h
		sleep 0.1
	done
	wait $pid || true
	local ups secs snaps faults mean
	ups=$(grep -o 'updates_per_s=[0-9]*' "$W/$name.out" | tail -1 | cut -d= -f2)
	[ -n "$ups" ] || { echo "ccow-sweep: run $name failed: $(tail -3 "$W/$name.err")" >&2; exit 1; }
	secs=$(grep -o 'seconds=[0-9.]*' "$W/$name.out" | tail -1 | cut -d= -f2)
	snaps=0 faults=0 mean=0
	if [ -s "$W/log" ]; then
		snaps=$(grep -c '"state":"done"' "$W/log" || true)
		faults=$(grep -o '"cow_faults":[0-9]*' "$W/log" | cut -d: -f2 | awk '{s+=$1} END {print s+0}')
		mean=$(grep -o '"duration_ms":[0-9]*' "$W/log" | cut -d: -f2 | awk '{s+=$1} END {printf "%.0f", NR ? s/NR : 0}')
	fi
	echo "$ups $secs $hwm $snaps $faults $mean"
}

echo "== baseline and snapshot interval (zipfbench --size $SIZE, RAM ${RAM_MIB} MiB)"
read -r BASE_UPS _ <<<"$(run none)"
echo "no snapshots: $BASE_UPS updates/s"
# Interval: one cow snapshot at t = 1.5 s, then the time until throughput recovers.
"$CCVM" run --mem "${RAM_MIB}M" --control "$W/ctl" --image-dir "$W" -- "$ZB" --size "${SIZE_MIB}M" --alpha 1.0 --seed 7 \
	--duration 8 --report-ms 100 >"$W/probe.out" 2>&1 &
P=$!
for _ in $(seq 300); do grep -q 't=1\.[5-9]' "$W/probe.out" 2>/dev/null && break; sleep 0.05; done
T_SNAP=$(grep -o 't=[0-9.]*' "$W/probe.out" | tail -1 | cut -d= -f2)
"$CCVM" ctl "$W/ctl" snapshot "$W/probe.img" --policy cow --wait >/dev/null
wait $P || true
INTERVAL=$(grep -o 't=[0-9.]* updates_per_s=[0-9]*' "$W/probe.out" | sed 's/t=//; s/ updates_per_s=/ /' |
	awk -v ts="$T_SNAP" -v base="$BASE_UPS" '{t[NR]=$1; u[NR]=$2}
		END {for (i = 3; i <= NR; i++) if (t[i] > ts + 0.2 && (u[i]+u[i-1]+u[i-2])/3 >= 0.99*base) {printf "%.1f", t[i]-ts; exit}
		     printf "%.1f", t[NR]-ts}')
awk -v i="$INTERVAL" 'BEGIN {exit !(i < 1.0)}' && INTERVAL=1.0
echo "snapshot interval (cow recovery to 99%): $INTERVAL s"
RATE=$(awk -v m="$SIZE_MIB" -v i="$INTERVAL" 'BEGIN {printf "%.0f", m * 1.048576 / i}')

CSV=$OUT/ccow_sweep.csv
echo "# $(python3 "$TOP/bench/provenance.py" line 1 "zipfbench --size $SIZE, duration ${DURATION}s, each configuration once" -- "$0" "$@")" >"$CSV"
echo "writer,config,policy,region,threshold,updates_per_s,seconds,peak_rss_mib,snapshots,cow_faults,mean_snapshot_ms,lost_s_per_snapshot,during_snapshot" >>"$CSV"

echo "== the tracker's cost: $TRACKER_S s runs, no snapshots"
DUR=$TRACKER_S
read -r T_OFF _ <<<"$(run tracker-off)"
read -r T_ON _ <<<"$(run tracker-on --control "$W/c.sock" --coverage-window 0)"
DUR=$DURATION
TRACKER_COST=$(awk -v a="$T_OFF" -v b="$T_ON" 'BEGIN {printf "%.1f", 100 * (1 - b / a)}')
echo "tracker off $T_OFF, on $T_ON updates/s: it costs $TRACKER_COST%"
echo "-,tracker-off,none,-,-,$T_OFF,$TRACKER_S,0,0,0,0,0,1" >>"$CSV"
echo "-,tracker-on,none,2M,-,$T_ON,$TRACKER_S,0,0,0,0,0,1" >>"$CSV"
sweep() { # WRITER RATE_OPTS...
	local writer=$1; shift
	local cfgs=(
		"none|none|-|-|"
		"stop|stop|-|-|--snapshot-policy stop"
		"cow|cow|-|-|--snapshot-policy cow"
		"ccow|ccow|2M|0.80|--snapshot-policy ccow --precopy lazy"
		"ccow-all|ccow|2M|0|--snapshot-policy ccow --precopy lazy --threshold 0"
		"ccow-32K|ccow|32K|0.80|--snapshot-policy ccow --precopy lazy --region-size 32K"
		"ccow-128K|ccow|128K|0.80|--snapshot-policy ccow --precopy lazy --region-size 128K"
		"ccow-512K|ccow|512K|0.80|--snapshot-policy ccow --precopy lazy --region-size 512K"
		"ccow-4M|ccow|4M|0.80|--snapshot-policy ccow --precopy lazy --region-size 4M"
		"ccow-t0.70|ccow|2M|0.70|--snapshot-policy ccow --precopy lazy --threshold 0.70"
		"ccow-t0.90|ccow|2M|0.90|--snapshot-policy ccow --precopy lazy --threshold 0.90"
		"ccow-t0.95|ccow|2M|0.95|--snapshot-policy ccow --precopy lazy --threshold 0.95"
		"ccow-eager|ccow|2M|0.80|--snapshot-policy ccow --precopy eager"
		"ccow-all-eager|ccow|2M|0|--snapshot-policy ccow --threshold 0 --precopy eager"
		"ccow-linear|ccow|2M|0.80|--snapshot-policy ccow --precopy lazy --save-order linear"
		"ccow-nopool|ccow|2M|0.80|--snapshot-policy ccow --precopy lazy --snapshot-pool 1M"
	)
	for c in "${cfgs[@]}"; do
		IFS='|' read -r name pol region thr opts <<<"$c"
		local snap=()
		[ "$pol" != none ] && snap=(--snapshot-every "$INTERVAL" --snapshot-dir "$W/snaps" --snapshot-keep 1 --snapshot-log "$W/log" "$@")
		# shellcheck disable=SC2086
		read -r ups secs hwm snaps faults mean <<<"$(run "$name" "${snap[@]}" $opts)"
		lost=$(awk -v s="$secs" -v u="$ups" -v b="$BASE_UPS" -v n="$snaps" 'BEGIN {printf "%.3f", n ? (s - s*u/b) / n : 0}')
		during=$(awk -v l="$lost" -v m="$mean" 'BEGIN {d = m > 0 ? 1 - l / (m / 1000) : 1; printf "%.2f", d < 0 ? 0 : d}')
		echo "$writer,$name,$pol,$region,$thr,$ups,$secs,$((hwm / 1024)),$snaps,$faults,$mean,$lost,$during" >>"$CSV"
		printf '%-10s %-13s %9s upd/s  %6s MiB  %3s snaps  %7s faults  %6s ms/snap  %s s lost/snap  %s during\n' \
			"$writer" "$name" "$ups" "$((hwm / 1024))" "$snaps" "$faults" "$mean" "$lost" "$during"
	done
}
echo "== sweep, writer unlimited"
sweep unlimited
echo "== sweep, writer limited to $RATE MB/s (a snapshot lasts about one interval)"
sweep limited --snapshot-rate "$RATE"

# Table normalised to cow, per writer mode.
{
	head -1 "$CSV" | cut -c3-
	echo
	echo "zipfbench --size $SIZE (1 KiB blocks, alpha 1.0) for $DURATION s per run, snapshot every $INTERVAL s (cow's recovery time); writer limited to $RATE MB/s in the second half. Throughput and peak RSS relative to cow in the same mode; \"during\" is the guest's throughput during snapshots relative to no snapshots."
	echo
	echo "Coverage tracker alone, $TRACKER_S s without snapshots: $T_ON vs $T_OFF updates/s, a cost of $TRACKER_COST%."
	echo
	echo "| writer | config | throughput vs cow | peak RSS vs cow | CoW faults | mean snapshot | lost per snapshot | during |"
	echo "|---|---|---|---|---|---|---|---|"
	awk -F, 'NR > 2 && $1 != "-" {k[NR]=$0; if ($2 == "cow") {cu[$1]=$6; cr[$1]=$8}}
		END {for (i = 3; i <= NR; i++) if (i in k) {split(k[i], f, ","); printf "| %s | %s | %.2f | %.2f | %s | %s ms | %s s | %s |\n", f[1], f[2], f[6]/cu[f[1]], f[8]/cr[f[1]], f[10], f[11], f[12], f[13]}}' "$CSV"
} >"$OUT/ccow_sweep.md"
cat "$OUT/ccow_sweep.md"

if command -v gnuplot >/dev/null; then
	gnuplot <<GP
set terminal pngcairo size 900,450 font ",10"
set datafile separator ","
set grid
set key top left
set ylabel "relative to cow"
set title "CCoW region size (threshold 0.80): throughput and memory vs cow (paper Fig. 3)"
set output "$OUT/ccow_regions.png"
set xtics ("32K" 1, "128K" 2, "512K" 3, "2M" 4, "4M" 5)
cow_u(w) = 1
plot "< awk -F, 'BEGIN{m[\"ccow-32K\"]=1;m[\"ccow-128K\"]=2;m[\"ccow-512K\"]=3;m[\"ccow\"]=4;m[\"ccow-4M\"]=5} \\\$2==\"cow\"{cu[\\\$1]=\\\$6;cr[\\\$1]=\\\$8} (\\\$2 in m){r[\\\$1\",\"m[\\\$2]]=\\\$0} END{for(k in r){split(r[k],f,\",\");split(k,w,\",\");print w[1]\",\"w[2]\",\"f[6]/cu[f[1]]\",\"f[8]/cr[f[1]]}}' $CSV | sort -t, -k1,1 -k2,2n" \
     using 2:(strcol(1) eq "unlimited" ? \$3 : 1/0) with linespoints title "throughput, writer unlimited", \
  "" using 2:(strcol(1) eq "limited" ? \$3 : 1/0) with linespoints title "throughput, writer limited", \
  "" using 2:(strcol(1) eq "unlimited" ? \$4 : 1/0) with linespoints dt 2 title "peak RSS, unlimited", \
  "" using 2:(strcol(1) eq "limited" ? \$4 : 1/0) with linespoints dt 2 title "peak RSS, limited"
set title "CCoW threshold (2M regions): throughput and memory vs cow (paper Fig. 4)"
set output "$OUT/ccow_thresholds.png"
set xtics ("All (0)" 0, "0.70" 0.70, "0.80" 0.80, "0.90" 0.90, "0.95" 0.95)
plot "< awk -F, 'BEGIN{m[\"ccow-all\"]=0;m[\"ccow-t0.70\"]=0.70;m[\"ccow\"]=0.80;m[\"ccow-t0.90\"]=0.90;m[\"ccow-t0.95\"]=0.95} \\\$2==\"cow\"{cu[\\\$1]=\\\$6;cr[\\\$1]=\\\$8} (\\\$2 in m){r[\\\$1\",\"m[\\\$2]]=\\\$0} END{for(k in r){split(r[k],f,\",\");split(k,w,\",\");print w[1]\",\"w[2]\",\"f[6]/cu[f[1]]\",\"f[8]/cr[f[1]]}}' $CSV | sort -t, -k1,1 -k2,2g" \
     using 2:(strcol(1) eq "unlimited" ? \$3 : 1/0) with linespoints title "throughput, writer unlimited", \
  "" using 2:(strcol(1) eq "limited" ? \$3 : 1/0) with linespoints title "throughput, writer limited", \
  "" using 2:(strcol(1) eq "unlimited" ? \$4 : 1/0) with linespoints dt 2 title "peak RSS, unlimited", \
  "" using 2:(strcol(1) eq "limited" ? \$4 : 1/0) with linespoints dt 2 title "peak RSS, limited"
GP
fi
