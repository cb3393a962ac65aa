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
#                    (NESTED_ASAN=full); NESTED_ASAN=parsing cuts it to the checks that
#                    exercise guest-pointer and image parsing (run.sh --only parsing)
#                    where the time is short. make test starts the ASan pass's nested
#                    part first, in the background (--start), beside the plain pass.
#   neither          fails, saying why.
#
# E2E_PLATFORM=kvm|nested picks one instead of auto (nested works on a machine with
# /dev/kvm too: the way to try the nested run there).
#
# Usage: tests/e2e/suite.sh [--asan] [--start] CCVM_BINARY
# --start: only start the nested VM part in the background (nothing on /dev/kvm), for
# the next run of the same pass (without --start) to await instead of running it.
# Prints "VMs: /dev/kvm" or "VMs: nested KVM under TCG" first and the closing "N passed,
# N failed, N skipped" line last; writes both, and what was cut or skipped, to
# build/test/e2e[-asan].summary for scripts/test.sh. Exit status 0 when nothing failed.
set -u
NESTED_SCALE=${NESTED_SCALE:-25}
NESTED_PATIENCE=${NESTED_PATIENCE:-20}
NESTED_ASAN=${NESTED_ASAN:-full}
ASAN='' START='' JOB=''
while [ $# -gt 1 ]; do
	case $1 in
	--asan) ASAN=1; shift ;;
	--start) START=1; shift ;;
	--nested-job) JOB=1; shift ;; # (internal: the started VM part itself)
	*) break ;;
	esac
done
[ $# = 1 ] || { echo "usage: tests/e2e/suite.sh [--asan] [--start] CCVM_BINARY" >&2; exit 2; }
# A nested VM part took 31 minutes on a 2-core machine, about 42 under ASan (2026-12,
# the two side by side): past 45 and 60 it hangs, and make test, the ASan part started
# beside the plain one, still ends with its summary inside CI's 90 minutes.
NESTED_TIMEOUT=${NESTED_TIMEOUT:-$([ -n "$ASAN" ] && echo 3600 || echo 2700)}
TOP=$(cd "$(dirname "$0")/../.." && pwd)
cd "$TOP" || exit 1
CCVM=$1
OUT=$TOP/build/test
TAG=e2e${ASAN:+-asan}
LABEL="e2e${ASAN:+ ASan}"
SUMMARY=$OUT/$TAG.summary
RESULTS=$OUT/$TAG.results
NESTED=$OUT/$TAG.nested # .out .err .status .pid of a VM part started ahead (--start)
mkdir -p "$OUT"
[ -n "$START$JOB" ] || rm -f "$SUMMARY" "$RESULTS" "$RESULTS.times"

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
	if [ -s "$RESULTS.times" ]; then # where the time went, for whoever trims the suite
		echo "$LABEL: the slowest checks (seconds, each from the check before it):"
		sort -rn "$RESULTS.times" | head -8 | sed 's/^/  /'
	fi
	cat "$SUMMARY"
	[ "$st" = 0 ] && [ "$f" = 0 ]
}

case $NESTED_ASAN in full | parsing) ;; *) echo "e2e: NESTED_ASAN=$NESTED_ASAN: full or parsing" >&2; exit 2 ;; esac
only=
[ -n "$ASAN" ] && [ "$NESTED_ASAN" = parsing ] && only="--only parsing"
# ASAN_OPTIONS crosses into the nested VM with the rest of the environment the command
# line names; the results file lies in this tree, which the nested VM shares. Its
# stderr is kept too, for the reason when it cannot start.
nested_part() {
	# shellcheck disable=SC2086
	scripts/kvm-in-tcg.sh --timeout "$NESTED_TIMEOUT" -- env E2E_RESULTS="$RESULTS.vm" E2E_SCALE="$NESTED_SCALE" \
		E2E_PATIENCE="$NESTED_PATIENCE" ASAN_OPTIONS="${ASAN_OPTIONS:-}" \
		tests/e2e/run.sh --part vm $only "$CCVM"
}
if [ -n "$JOB" ]; then # the VM part alone, in the background: its status to a file
	nested_part >"$NESTED.out" 2>"$NESTED.err"
	echo $? >"$NESTED.status.tmp" && mv "$NESTED.status.tmp" "$NESTED.status"
	exit 0
fi
# --start (make test, nested): the VM part now, in the background, for a later run of
# this script to await. A TCG VM is one host thread: the ASan pass's VM part, run
# beside the plain pass, uses the machine's second core.
if [ -n "$START" ]; then
	[ "$platform" = nested ] || exit 0 # on /dev/kvm the suite runs whole when asked
	rm -f "$NESTED".* "$RESULTS.vm" "$RESULTS.vm.times"
	setsid "$TOP/tests/e2e/suite.sh" ${ASAN:+--asan} --nested-job "$CCVM" </dev/null >/dev/null 2>&1 &
	echo $! >"$NESTED.pid"
	echo "$LABEL: the VM part started in the background (nested under TCG; its output: $NESTED.out)"
	exit 0
fi

if [ $platform = kvm ]; then
	echo "VMs: /dev/kvm" | tee "$SUMMARY.head"
	echo "$LABEL: every check, full scale" | tee -a "$SUMMARY.head"
	E2E_RESULTS=$RESULTS tests/e2e/run.sh "$CCVM"
	close $?
	exit
fi

echo "VMs: nested KVM under TCG" | tee "$SUMMARY.head"
{
	echo "$LABEL: the checks that need no VM ran on this machine, the VM checks in a KVM nested"
	echo "$LABEL: under QEMU's TCG (scripts/kvm-in-tcg.sh) at E2E_SCALE=$NESTED_SCALE, E2E_PATIENCE=$NESTED_PATIENCE"
	[ -z "$only" ] || echo "$LABEL: the VM part cut to the guest-pointer and image-parsing checks (run.sh --only parsing)"
} | tee -a "$SUMMARY.head"
E2E_RESULTS=$RESULTS tests/e2e/run.sh --part host "$CCVM"
host=$?
started=
if [ -s "$NESTED.pid" ]; then
	started=$(cat "$NESTED.pid")
	echo "$LABEL: the VM part, started beside the plain pass (make test), is awaited"
	while [ ! -e "$NESTED.status" ] && kill -0 "$started" 2>/dev/null; do sleep 5; done
	cat "$NESTED.out" 2>/dev/null
	cat "$NESTED.err" >&2 2>/dev/null
	nested=$(cat "$NESTED.status" 2>/dev/null || echo 126)
	rm -f "$NESTED.pid" "$NESTED.status" "$NESTED.out"
else
	rm -f "$RESULTS.vm" "$RESULTS.vm.times"
	set -o pipefail
	{ nested_part 2>&1 1>&3 | tee "$NESTED.err" >&2; } 3>&1
	nested=$?
	set +o pipefail
fi
cat "$RESULTS.vm" >>"$RESULTS" 2>/dev/null
cat "$RESULTS.vm.times" >>"$RESULTS.times" 2>/dev/null
rm -f "$RESULTS.vm" "$RESULTS.vm.times"
case $nested in
0 | 1) ;;
124) echo "$LABEL: FAILED: the nested VM part ran out of its $NESTED_TIMEOUT s (a hang?)" | tee -a "$SUMMARY.head" ;;
125)
	# Neither platform: the first line says so, and why.
	why=$(sed -n 's/.*cannot start a nested KVM: //p' "$NESTED.err" | head -1)
	{ echo "VMs: none: no usable /dev/kvm, and the nested KVM did not start: ${why:-see above}"
	  tail -n +2 "$SUMMARY.head"; } >"$SUMMARY.tmp" && mv "$SUMMARY.tmp" "$SUMMARY.head"
	echo "$LABEL: FAILED: the VM checks had no platform to run on" | tee -a "$SUMMARY.head"
	;;
126) echo "$LABEL: FAILED: the VM part started ahead ended without its status (killed?)" | tee -a "$SUMMARY.head" ;;
*) echo "$LABEL: FAILED: the nested VM part did not complete (status $nested): see the lines above" | tee -a "$SUMMARY.head" ;;
esac
close $host $nested
