#!/usr/bin/env bash
# The whole test suite, as `make test` runs it once the Debian packages are in: the
# layer checks, the results files' provenance (make results-check), the figure blocks
# of README and evaluation.md against the results (make docs-check), the unit tests, the
# end-to-end tests, both again under AddressSanitizer and UBSan, and every fuzz target
# for 10 s. Where the VMs run nested under TCG, the ASan pass's VM part runs beside the
# plain pass (tests/e2e/suite.sh --start). Each step runs even when one before it
# failed, so that one run shows every failure. Then a summary whose first line names
# where the VMs ran ("VMs: /dev/kvm" or "VMs: nested KVM under TCG", from
# tests/e2e/suite.sh), a line a step, and what was cut or skipped.
# Exit status 0 only when every step passed.
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP" || exit 1
MAKE=${MAKE:-make}
OUT=build/test
mkdir -p "$OUT"
rm -f "$OUT"/*.summary "$OUT"/*.log
START=$(date +%s)
LINES=()
FAILED=0

# step NAME TARGET: make TARGET, its output shown and kept; one summary line for it
step() {
	local name=$1 target=$2 st
	echo "== make $target"
	set -o pipefail
	$MAKE --no-print-directory "$target" 2>&1 | tee "$OUT/$target.log"
	st=$?
	set +o pipefail
	[ $st = 0 ] || FAILED=1
	LINES+=("$(printf '%-10s %s' "$name" "$([ $st = 0 ] && echo ok || echo "FAILED (status $st)")$(detail "$target")")")
}

# What a step's log says of its size.
detail() {
	case $1 in
	unit | asan-unit) grep -o 'Checks: [0-9]*, Failures: [0-9]*, Errors: [0-9]*' "$OUT/$1.log" | tail -1 | sed 's/^/: /' ;;
	e2e) tail -1 "$OUT/e2e.summary" 2>/dev/null | sed 's/^/: /' ;;
	asan-e2e) tail -1 "$OUT/e2e-asan.summary" 2>/dev/null | sed 's/^/: /' ;;
	fuzz-quick) grep -E '^[0-9]+ passed, [0-9]+ failed$' "$OUT/$1.log" | tail -1 | sed 's/^/: targets for 10 s, /' ;;
	esac
}

# Where the VMs run nested, the ASan pass's VM part starts first, in the background,
# beside the plain pass (a TCG VM is one host thread: two use both cores); the e2e ASan
# step awaits it. It does not outlive this script.
stop_started() {
	local pid
	pid=$(cat "$OUT/e2e-asan.nested.pid" 2>/dev/null) || return 0
	kill -0 "$pid" 2>/dev/null && kill -- -"$pid" 2>/dev/null
	rm -f "$OUT/e2e-asan.nested.pid"
}
trap stop_started EXIT
stop_started
rm -f "$OUT"/*.nested.*

step layers layers
step results results-check
step docs docs-check
step unit unit
echo "== make asan-e2e-start"
$MAKE --no-print-directory asan-e2e-start 2>&1 | tee "$OUT/asan-e2e-start.log"
step e2e e2e
step "unit ASan" asan-unit
step "e2e ASan" asan-e2e
step fuzz fuzz-quick

echo
echo "== summary"
# The platform line first: from the e2e run, or, if it did not get that far, as it
# would have chosen.
vms=$(head -1 "$OUT/e2e.summary" 2>/dev/null)
[ -n "$vms" ] || vms="VMs: none ran (the e2e step ended before choosing: see its log)"
echo "$vms"
for l in "${LINES[@]}"; do echo "$l"; done
# What the e2e runs said of where and how they ran, what was cut or skipped.
for f in "$OUT/e2e.summary" "$OUT/e2e-asan.summary"; do
	[ -f "$f" ] && sed -n '2,$p' "$f" | grep -v '^[0-9]* passed, '
done
mins=$((($(date +%s) - START + 59) / 60))
if [ $FAILED = 0 ]; then echo "make test: passed in $mins min"; else echo "make test: FAILED (after $mins min)"; fi
exit $FAILED
