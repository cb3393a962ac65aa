#!/usr/bin/env bash
# Core benchmarks of ccvm, measured side by side in one run (our machines are noisy:
# only the ratios are meaningful).
#
#  1. zipfbench natively vs in ccvm, same arguments, rounds alternating native/ccvm;
#     the ratio of updates/s per round and its median. Guest RAM is always backed by
#     transparent huge pages, so the native run is measured twice: as it comes (4 KiB
#     pages where THP is in "madvise" mode) and with --hugepages (the fair baseline).
#  2. The cost of one system call: getpid natively, getpid in ccvm (the `syscall`
#     instruction, the exit to the monitor, the return), the exit alone (jumping to
#     the stub without `syscall`), and a bare exit KVM handles in the kernel (cpuid).
#
# Writes OUT/zipf_native_vs_ccvm.csv (default this host's bench/results/HOST-CLASS),
# syscall_cost.csv and the PNG plots.
# Environment: ROUNDS (default 5), SIZE (zipfbench --size, default 512M).
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
CCVM=$TOP/ccvm
G=$TOP/build/guest
OUT=${OUT:-$TOP/bench/results/$(python3 "$TOP/bench/provenance.py" class)}
ROUNDS=${ROUNDS:-5}
SIZE=${SIZE:-512M}
mkdir -p "$OUT"

field() { grep -o "$1=[0-9.]*" | tail -1 | cut -d= -f2; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "== zipfbench --size $SIZE (write-total 10 x size), $ROUNDS rounds, native vs ccvm"
csv=$OUT/zipf_native_vs_ccvm.csv
echo "# $(python3 "$TOP/bench/provenance.py" line "$ROUNDS" "zipfbench --size $SIZE" -- "$0" "$@")" >"$csv"
echo "round,native_updates_per_s,native_thp_updates_per_s,ccvm_updates_per_s,ratio_vs_native,ratio_vs_native_thp" >>"$csv"
ratios=() ratios_thp=()
for r in $(seq "$ROUNDS"); do
	args=(--size "$SIZE" --report-ms 0 --seed "$r")
	n=$("$G/zipfbench" "${args[@]}" | field updates_per_s)
	h=$("$G/zipfbench" "${args[@]}" --hugepages | field updates_per_s)
	v=$("$CCVM" run --mem 2G -- "$G/zipfbench" "${args[@]}" | field updates_per_s)
	ratio=$(awk -v a="$v" -v b="$n" 'BEGIN {printf "%.3f", a / b}')
	ratio_thp=$(awk -v a="$v" -v b="$h" 'BEGIN {printf "%.3f", a / b}')
	ratios+=("$ratio")
	ratios_thp+=("$ratio_thp")
	echo "$r,$n,$h,$v,$ratio,$ratio_thp" >>"$csv"
	printf 'round %d: native %s, native+THP %s, ccvm %s updates/s; ccvm/native %s, ccvm/native+THP %s\n' \
		"$r" "$n" "$h" "$v" "$ratio" "$ratio_thp"
done
zipf_median=$(printf '%s\n' "${ratios[@]}" | median)
zipf_median_thp=$(printf '%s\n' "${ratios_thp[@]}" | median)
echo "zipfbench median ratio: ccvm/native $zipf_median, ccvm/native+THP $zipf_median_thp"

echo "== system call round trip"
csv2=$OUT/syscall_cost.csv
echo "# $(python3 "$TOP/bench/provenance.py" line 1 "getpid: 2000000 calls native, 20000 in ccvm" -- "$0" "$@")" >"$csv2"
echo "what,ns_per_call" >>"$csv2"
nat=$("$G/tests/syscost.glibc" getpid 2000000 | field ns_per_call)
vm=$("$CCVM" run -- "$G/tests/syscost.glibc" getpid 20000 | field ns_per_call)
stub=$("$CCVM" run -- "$G/tests/syscost.glibc" stub 20000 | field ns_per_call)
cpuid=$("$CCVM" run -- "$G/tests/syscost.glibc" cpuid 20000 | field ns_per_call)
{
	echo "native getpid,$nat"
	echo "ccvm getpid (syscall + exit to monitor),$vm"
	echo "ccvm exit to monitor only (stub),$stub"
	echo "ccvm bare exit handled by KVM (cpuid),$cpuid"
} >>"$csv2"
awk -F, '{printf "%-45s %s\n", $1, $2}' "$csv2"
awk -v v="$vm" -v c="$cpuid" -v n="$nat" 'BEGIN {printf "getpid in ccvm = %.0f x native, %.2f x a bare KVM exit\n", v / n, v / c}'

if command -v gnuplot >/dev/null; then
	gnuplot <<GP
set terminal pngcairo size 800,450 font ",10"
set datafile separator ","
set key autotitle columnhead below
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel "updates/s"
set xlabel "round"
set yrange [0:*]
set title "zipfbench --size $SIZE: ccvm/native $zipf_median, ccvm/native+THP $zipf_median_thp (medians)"
set output "$OUT/zipf_native_vs_ccvm.png"
plot "$csv" using 2:xtic(1) title "native (4 KiB pages)", "" using 3 title "native + THP", "" using 4 title "ccvm"
set output "$OUT/syscall_cost.png"
set title "cost of one call (log scale)"
set ylabel "ns per call"
set xlabel ""
set logscale y
set yrange [10:*]
set xtics rotate by -20 font ",8"
set key off
plot "$csv2" using 2:xtic(1) title "ns"
GP
	echo "plots: $OUT/zipf_native_vs_ccvm.png $OUT/syscall_cost.png"
fi
