#!/usr/bin/env bash
# The share of the monitor's lines a gcov build executed: per file and in all.
#
# Usage: scripts/coverage.sh OBJDIR SOURCE...   (make coverage runs it after the unit
# tests). OBJDIR holds the .gcno/.gcda files of SOURCE..., built with --coverage.
set -euo pipefail
objdir=${1:?usage: coverage.sh OBJDIR SOURCE...}
shift
total=0 run=0
printf '%-28s %7s %7s %6s\n' file lines run share
for src in "$@"; do
	obj=$objdir/${src%.c}.o
	# gcov -n writes no .gcov files; for each source it prints "File 'SRC'" and then
	# "Lines executed:P% of N". A file no test reached has no .gcda: 0 of its lines.
	line=$(gcov -n -o "$(dirname "$obj")" "$src" 2>/dev/null |
		grep -A1 "^File '$src'" | grep -o 'Lines executed:[0-9.]*% of [0-9]*' || true)
	pct=0 n=0
	if [ -n "$line" ]; then
		pct=${line#Lines executed:}; pct=${pct%%%*}
		n=${line##* of }
	fi
	r=$(awk -v p="$pct" -v n="$n" 'BEGIN { printf "%d", p * n / 100 + 0.5 }')
	total=$((total + n)) run=$((run + r))
	printf '%-28s %7d %7d %5.1f%%\n' "$src" "$n" "$r" "$pct"
done
awk -v r="$run" -v t="$total" 'BEGIN { printf "monitor (vmm/, mmu/, snapshot/): %d of %d lines executed: %.1f%%\n", r, t, t ? 100 * r / t : 0 }'
