#!/usr/bin/env bash
# Snapshot benchmarks, measured side by side in one run (only ratios are meaningful on
# our noisy, nested machines):
#
#  1. Pause and duration against guest RAM size, cow vs stop, on a guest that has
#     touched all its memory and keeps writing (zipfbench), both policies on the same
#     VM, alternating.
#  2. The guest's zipfbench throughput over time across one cow and one stop snapshot.
#  3. Restore time against RAM size, eager vs lazy, for a guest whose memory is 3/4
#     full: until the guest resumes, and until it has read back all its memory.
#
# Writes OUT/snapshot_pause.csv (default this host's bench/results/HOST-CLASS),
# snapshot_timeline.csv, restore_time.csv and
# PNG plots. Environment: SIZES (MiB list, default "256 512 1024 2048 4096 8192"),
# IMGDIR (where images go; default a temporary directory; needs room for the largest),
# SECTIONS (default "1 2 3"), ROUNDS (sections 1 and 3: rounds per size, default 2; each
# round takes both policies or modes in an order shuffled per size and round).
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
CCVM=$TOP/ccvm
G=$TOP/build/guest
OUT=${OUT:-$TOP/bench/results/$(python3 "$TOP/bench/provenance.py" class)}
SIZES=${SIZES:-256 512 1024 2048 4096 8192}
SECTIONS=${SECTIONS:-1 2 3}
ROUNDS=${ROUNDS:-2}
want() { case " $SECTIONS " in *" $1 "*) return 0 ;; esac; return 1; }
IMGDIR=${IMGDIR:-$(mktemp -d /var/tmp/ccvm-bench.XXXXXX)}
mkdir -p "$OUT" "$IMGDIR"
VM=
cleanup() { [ -n "$VM" ] && kill "$VM" 2>/dev/null; rm -rf "$IMGDIR"; }
trap cleanup EXIT
field() { grep -o "\"$1\":[^,}]*" | head -1 | cut -d: -f2- | tr -d '"'; }
wait_for() { for _ in $(seq 600); do grep -q "$1" "$2" 2>/dev/null && return 0; sleep 0.1; done; return 1; }

csv=$OUT/snapshot_pause.csv
tl=$OUT/snapshot_timeline.csv
rt=$OUT/restore_time.csv

if want 1; then
echo "== 1. pause and duration vs RAM size (cow vs stop, same VM)"
echo "# $(python3 "$TOP/bench/provenance.py" line "$ROUNDS" "sizes $SIZES MiB, per size one VM, cow and stop once a round in a shuffled order" -- "$0" "$@")" >"$csv"
echo "ram_mib,policy,pause_us,duration_ms,cow_faults,pages_copied,image_mib,round" >>"$csv"
for mib in $SIZES; do
	sock=$IMGDIR/ctl.sock
	"$CCVM" run --mem "${mib}M" --control "$sock" --image-dir "$IMGDIR" -- "$G/zipfbench" --size "$((mib * 7 / 8))M" \
		--duration 600 --report-ms 500 >"$IMGDIR/vm.out" 2>&1 &
	VM=$!
	wait_for report "$IMGDIR/vm.out" # memory populated, Zipf writes running
	for round in $(seq "$ROUNDS"); do
		for pol in $(printf '%s\n' cow stop | shuf --random-source=<(yes "$mib-$round")); do
			r=$("$CCVM" ctl "$sock" snapshot "$IMGDIR/b.img" --policy $pol --wait)
			echo "$mib,$pol,$(echo "$r" | field pause_us),$(echo "$r" | field duration_ms),$(echo "$r" | field cow_faults),$(echo "$r" | field pages_copied),$(($(echo "$r" | field bytes) >> 20)),$round" >>"$csv"
			rm -f "$IMGDIR/b.img"
		done
	done
	"$CCVM" ctl "$sock" quit >/dev/null
	wait "$VM" || true
	VM=
	awk -F, -v m="$mib" '$1==m && $2=="cow" {c+=$3; nc++} $1==m && $2=="stop" {s+=$3; ns++}
		END {printf "%5d MiB: cow pause %.1f ms, stop pause %.1f ms, stop/cow %.0fx\n", m, c/nc/1000, s/ns/1000, (s/ns)/(c/nc)}' "$csv"
done

fi

if want 2; then
echo "== 2. zipfbench throughput across snapshots (1 GiB VM, 768 MiB Zipf area)"
echo "# $(python3 "$TOP/bench/provenance.py" line 1 "one run per policy" -- "$0" "$@")" >"$tl"
echo "policy,t_s,updates_per_s" >>"$tl"
for pol in cow stop; do
	sock=$IMGDIR/ctl.sock
	"$CCVM" run --mem 1G --control "$sock" --image-dir "$IMGDIR" -- "$G/zipfbench" --size 768M --duration 6 \
		--report-ms 100 >"$IMGDIR/vm.out" 2>&1 &
	VM=$!
	wait_for "t=2\\." "$IMGDIR/vm.out"
	r=$("$CCVM" ctl "$sock" snapshot "$IMGDIR/t.img" --policy $pol --wait)
	wait "$VM" || true
	VM=
	echo "$pol snapshot: pause $(echo "$r" | field pause_us) us, duration $(echo "$r" | field duration_ms) ms"
	grep -o 't=[0-9.]* updates_per_s=[0-9]*' "$IMGDIR/vm.out" | sed "s/t=\([0-9.]*\) updates_per_s=\([0-9]*\)/$pol,\1,\2/" >>"$tl"
	rm -f "$IMGDIR/t.img"
done

fi

if want 3; then
echo "== 3. restore time vs RAM size (memory 3/4 full), eager vs lazy"
echo "# $(python3 "$TOP/bench/provenance.py" line "$ROUNDS" "sizes $SIZES MiB, guest memory 3/4 full, eager and lazy once a round in a shuffled order" -- "$0" "$@")" >"$rt"
echo "ram_mib,data_mib,mode,resumed_s,all_touched_s,round" >>"$rt"
# Time from the restore command to the guest's first output after the snapshot instant
# ("resumed"), and to it having read back every byte it wrote ("pattern intact").
time_restore() { # IMAGE MODE
	local t0 t1 t2 line
	t0=$(date +%s.%N)
	while IFS= read -r line; do
		case $line in
		resumed) t1=$(date +%s.%N) ;;
		"pattern intact") t2=$(date +%s.%N) ;;
		esac
	done < <("$CCVM" restore "$1" "--$2" </dev/null)
	[ -n "${t2:-}" ] || { echo "restore $2 of $1: pattern NOT intact" >&2; return 1; }
	awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN {printf "%.3f,%.3f", b - a, c - a}'
}
for mib in $SIZES; do
	sock=$IMGDIR/ctl.sock
	mkfifo "$IMGDIR/in"
	"$CCVM" run --mem "${mib}M" --control "$sock" --image-dir "$IMGDIR" -- "$G/tests/fillwait.glibc" "$((mib * 3 / 4))" \
		<"$IMGDIR/in" >"$IMGDIR/vm.out" 2>&1 &
	VM=$!
	exec 9>"$IMGDIR/in"
	wait_for filled "$IMGDIR/vm.out"
	"$CCVM" ctl "$sock" snapshot "$IMGDIR/r.img" --wait >/dev/null
	exec 9>&-
	wait "$VM" || true
	VM=
	rm -f "$IMGDIR/in"
	sync
	for round in $(seq "$ROUNDS"); do
		for mode in $(printf '%s\n' eager lazy | shuf --random-source=<(yes "$mib-$round")); do
			t=$(time_restore "$IMGDIR/r.img" $mode)
			echo "$mib,$((mib * 3 / 4)),$mode,$t,$round" >>"$rt"
		done
	done
	awk -F, -v m="$mib" '$1==m {r[$3]+=$4; d[$3]+=$5; n[$3]++}
		END {printf "%5d MiB RAM: eager resumes after %.3f s (all memory %.3f s), lazy after %.3f s (all memory %.3f s)\n",
		     m, r["eager"]/n["eager"], d["eager"]/n["eager"], r["lazy"]/n["lazy"], d["lazy"]/n["lazy"]}' "$rt"
	rm -f "$IMGDIR/r.img"
done
fi

# The plots of the sections that ran, each from its CSV.
plots() {
	echo 'set terminal pngcairo size 900,450 font ",10"'
	echo 'set datafile separator ","'
	echo 'set key top left'
	echo 'set grid'
	if want 1; then
		cat <<GP
set logscale xy
set xlabel "guest RAM (MiB)"
set ylabel "pause (ms)"
set title "Snapshot pause vs guest RAM (guest has touched all its memory)"
set output "$OUT/snapshot_pause.png"
plot "< awk -F, '\$2==\"cow\"' $csv" using 1:(\$3/1000) with points pt 7 title "cow", \
     "< awk -F, '\$2==\"stop\"' $csv" using 1:(\$3/1000) with points pt 5 title "stop"
unset logscale
GP
	fi
	if want 3; then
		cat <<GP
set logscale x
set xlabel "guest RAM (MiB)"
set ylabel "seconds after the restore command"
set title "Restore vs guest RAM (memory 3/4 full): until the guest resumes / has read all its memory"
set output "$OUT/restore_time.png"
plot "< awk -F, '\$3==\"eager\"' $rt" using 1:4 with points pt 7 title "eager: resumed", \
     "< awk -F, '\$3==\"eager\"' $rt" using 1:5 with points pt 6 title "eager: all memory read", \
     "< awk -F, '\$3==\"lazy\"' $rt" using 1:4 with points pt 5 title "lazy: resumed", \
     "< awk -F, '\$3==\"lazy\"' $rt" using 1:5 with points pt 4 title "lazy: all memory read"
unset logscale
GP
	fi
	if want 2; then
		cat <<GP
set xlabel "time (s)"
set ylabel "updates/s"
set title "zipfbench throughput across one snapshot taken at t = 2 s"
set output "$OUT/snapshot_timeline.png"
plot "< awk -F, '\$1==\"cow\"' $tl" using 2:3 with lines lw 2 title "cow", \
     "< awk -F, '\$1==\"stop\"' $tl" using 2:3 with lines lw 2 title "stop"
GP
	fi
}
if command -v gnuplot >/dev/null; then
	plots | gnuplot
	echo "plots in $OUT"
fi
