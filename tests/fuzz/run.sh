#!/usr/bin/env bash
# Run every libFuzzer target in build/fuzz for SECONDS each, from its committed seed
# corpus (tests/fuzz/corpus/TARGET, read only: it is copied to a scratch directory,
# where seeds stored gzipped, such as a sparse image, are unpacked, and new inputs go).
# A crash, a sanitizer report, a leak or a timeout fails the run; its input is kept in
# build/fuzz/artifacts/ and named in the output.
#
# Usage: tests/fuzz/run.sh SECONDS
set -u
SECONDS_EACH=${1:?usage: run.sh SECONDS}
TOP=$(cd "$(dirname "$0")/../.." && pwd)
ART=$TOP/build/fuzz/artifacts
SCRATCH=$(mktemp -d /tmp/ccvm-fuzz.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
mkdir -p "$ART"
PASS=0 FAIL=0

for bin in "$TOP"/build/fuzz/fuzz_*; do
	[ -x "$bin" ] && [ -f "$bin" ] || continue
	t=$(basename "$bin")
	mkdir -p "$SCRATCH/$t"
	cp -r "$TOP/tests/fuzz/corpus/$t/." "$SCRATCH/$t/" 2>/dev/null
	find "$SCRATCH/$t" -name '*.gz' -exec gunzip -f {} +
	# Inputs as large as the largest seed (libFuzzer would cut every seed to 4 KiB:
	# an image or an ELF file is larger).
	max=$(find "$SCRATCH/$t" -type f -printf '%s\n' | sort -n | tail -1)
	[ "${max:-0}" -gt 4096 ] || max=4096
	if "$bin" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
		-max_len="$max" -artifact_prefix="$ART/$t-" "$SCRATCH/$t" >"$SCRATCH/$t.log" 2>&1; then
		PASS=$((PASS + 1))
		echo "ok   $t: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$SCRATCH/$t.log" | grep -o '[0-9]*$') executions in ${SECONDS_EACH} s, nothing found"
	else
		FAIL=$((FAIL + 1))
		echo "FAIL $t"
		grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$SCRATCH/$t.log" | head -8 | sed 's/^/     /'
	fi
done
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ] && [ "$PASS" -gt 0 ]
