#!/usr/bin/env bash
# The end-to-end suite on whatever runs VMs on this machine, as `make e2e` and
# `make asan` run it: never with the VM checks silently skipped.
#
#   /dev/kvm usable  tests/e2e/run.sh, every check at full scale, as it always ran.
#   no /dev/kvm      the checks that need no VM run here (run.sh --part host); the VM
#                    checks run in a KVM nested under QEMU's TCG (scripts/kvm-in-tcg.sh,
#                    run.sh --part vm) at E2E_SCALE=$NESTED_SCALE and E2E_PATIENCE=
#                    $NESTED_PATIENCE: every assertion as at full scale, on smaller
#                    workloads. With --asan too the nested part runs whole
#                    (NESTED_ASAN=full: the whole make test took 40 minutes so on a
#                    2-core machine); NESTED_ASAN=parsing cuts it to the checks that
#                    exercise guest-pointer and image parsing (run.sh --only parsing)
#                    where the time is short.
#   neither          fails, saying why.
#
# E2E_PLATFORM=kvm|nested picks one instead of auto (nested works on a machine with
# /dev/kvm too: the way to try the nested run there).
#
# Usage: tests/e2e/suite.sh [--asan] CCVM_BINARY
# Prints "VMs: /dev/kvm" or "VMs: nested KVM under TCG" first and the closing "N passed,
# N failed, N skipped" line last; writes both, and what was cut or skipped, to
# build/test/e2e[-asan].summary for scripts/test.sh. Exit status 0 when nothing failed.
set -u
NESTED_SCALE=${NESTED_SCALE:-25}
NESTED_PATIENCE=${NESTED_PATIENCE:-20}
NESTED_ASAN=${NESTED_ASAN:-full}
# A nested part takes about 15 minutes on a 2-core machine: past 35 it hangs, and both
# parts still end, with their summary, inside CI's 90 minutes.
NESTED_TIMEOUT=${NESTED_TIMEOUT:-2100}
ASAN=
[ "${1:-}" = --asan ] && { ASAN=1; shift; }
[ $# = 1 ] || { echo "usage: tests/e2e/suite.sh [--asan] CCVM_BINARY" >&2; exit 2; }
TOP=$(cd "$(dirname "$0")/../.." && pwd)
cd "$TOP" || exit 1
CCVM=$1
OUT=$TOP/build/test
TAG=e2e${ASAN:+-asan}
LABEL="e2e${ASAN:+ ASan}"
SUMMARY=$OUT/$TAG.summary
RESULTS=$OUT/$TAG.results
mkdir -p "$OUT"
rm -f "$SUMMARY" "$RESULTS"

kvm_usable() { [ -c /dev/kvm ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]; }

platform=${E2E_PLATFORM:-auto}
case $platform in
auto) if kvm_usable; then platform=kvm; else platform=nested; fi ;;
kvm) kvm_usable || { echo "e2e: E2E_PLATFORM=kvm, but /dev/kvm is not usable here" >&2; exit 1; } ;;
nested) ;;
*) echo "e2e: E2E_PLATFORM=$platform: auto, kvm or nested" >&2; exit 2 ;;
esac

# The closing line from the results file: the counts of every part together.
count() { grep -c "^$1	" "$RESULTS" 2>/dev/null; }
close() { # STATUS...: the summary; 0 only when every part ended well and nothing failed
	local p f s st=0 x
	p=$(count ok) f=$(count FAIL) s=$(count skip)
	for x in "$@"; do [ "$x" = 0 ] || st=1; done
	{
		cat "$SUMMARY.head"
		grep "^skip	" "$RESULTS" 2>/dev/null | cut -f2- | sed "s/	/: /; s/^/$LABEL skipped: /"
		echo "$p passed, $f failed, $s skipped"
	} >"$SUMMARY"
	rm -f "$SUMMARY.head"
	echo
	cat "$SUMMARY"
	[ "$st" = 0 ] && [ "$f" = 0 ]
}

if [ $platform = kvm ]; then
	echo "VMs: /dev/kvm" | tee "$SUMMARY.head"
	echo "$LABEL: every check, full scale" | tee -a "$SUMMARY.head"
	E2E_RESULTS=$RESULTS tests/e2e/run.sh "$CCVM"
	close $?
	exit
fi

echo "VMs: nested KVM under TCG" | tee "$SUMMARY.head"
case $NESTED_ASAN in full | parsing) ;; *) echo "e2e: NESTED_ASAN=$NESTED_ASAN: full or parsing" >&2; exit 2 ;; esac
only=
[ -n "$ASAN" ] && [ "$NESTED_ASAN" = parsing ] && only="--only parsing"
{
	echo "$LABEL: the checks that need no VM ran on this machine, the VM checks in a KVM nested"
	echo "$LABEL: under QEMU's TCG (scripts/kvm-in-tcg.sh) at E2E_SCALE=$NESTED_SCALE, E2E_PATIENCE=$NESTED_PATIENCE"
	[ -z "$only" ] || echo "$LABEL: the VM part cut to the guest-pointer and image-parsing checks (run.sh --only parsing)"
} | tee -a "$SUMMARY.head"
E2E_RESULTS=$RESULTS tests/e2e/run.sh --part host "$CCVM"
host=$?
# ASAN_OPTIONS crosses into the nested VM with the rest of the environment the command
# line names; the results file lies in this tree, which the nested VM shares. Its
# stderr is kept too, for the reason when it cannot start.
set -o pipefail
# shellcheck disable=SC2086
{ scripts/kvm-in-tcg.sh --timeout "$NESTED_TIMEOUT" -- env E2E_RESULTS="$RESULTS" E2E_SCALE="$NESTED_SCALE" \
	E2E_PATIENCE="$NESTED_PATIENCE" ASAN_OPTIONS="${ASAN_OPTIONS:-}" \
	tests/e2e/run.sh --part vm $only "$CCVM" 2>&1 1>&3 | tee "$OUT/$TAG.nested.err" >&2; } 3>&1
nested=$?
set +o pipefail
case $nested in
0 | 1) ;;
124) echo "$LABEL: FAILED: the nested VM part ran out of its $NESTED_TIMEOUT s (a hang?)" | tee -a "$SUMMARY.head" ;;
125)
	# Neither platform: the first line says so, and why.
	why=$(sed -n 's/.*cannot start a nested KVM: //p' "$OUT/$TAG.nested.err" | head -1)
	{ echo "VMs: none: no usable /dev/kvm, and the nested KVM did not start: ${why:-see above}"
	  tail -n +2 "$SUMMARY.head"; } >"$SUMMARY.tmp" && mv "$SUMMARY.tmp" "$SUMMARY.head"
	echo "$LABEL: FAILED: the VM checks had no platform to run on" | tee -a "$SUMMARY.head"
	;;
*) echo "$LABEL: FAILED: the nested VM part did not complete (status $nested): see the lines above" | tee -a "$SUMMARY.head" ;;
esac
close $host $nested
