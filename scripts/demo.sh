#!/usr/bin/env bash
# The ccvm demo: launch a VM running the zipfbench workload (an unmodified static
# Linux program), drive it over the control socket (status, pause, resume, stats),
# and check that it computes exactly what it computes natively.
#
# Live snapshots and restore join this demo when the snapshot engine lands.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
CCVM=$TOP/ccvm
ZB=$TOP/build/guest/zipfbench
WORK=$(mktemp -d /tmp/ccvm-demo.XXXXXX)
SOCK=$WORK/ctl.sock
VM=
cleanup() {
	[ -n "$VM" ] && kill "$VM" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
ctl() { echo "\$ ccvm ctl $*" | sed "s|$SOCK|ctl.sock|"; "$CCVM" ctl "$@"; }

if [ ! -e /dev/kvm ]; then
	echo "demo: /dev/kvm is absent on this machine; ccvm needs KVM" >&2
	exit 1
fi

ARGS=(--size 256M --write-total 24G --report-ms 1000 --seed 42)
say "1. Launch a 1 GiB VM running zipfbench ${ARGS[*]}"
echo "\$ ccvm run --mem 1G --control ctl.sock -- zipfbench ${ARGS[*]}"
"$CCVM" run --mem 1G --control "$SOCK" -- "$ZB" "${ARGS[@]}" >"$WORK/vm.out" 2>&1 &
VM=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
sleep 1.5

say "2. Ask the monitor about it over the control socket"
ctl "$SOCK" status
echo "(exit and system-call counters: clock reads go through the vDSO, no exits)"
ctl "$SOCK" stats

say "3. Pause the VM for 2 seconds, then resume it (the throughput lines show the gap)"
ctl "$SOCK" pause
sleep 2
ctl "$SOCK" status
ctl "$SOCK" resume

wait "$VM" && status=0 || status=$?
VM=
say "4. What the guest printed (exit status $status)"
cat "$WORK/vm.out"

say "5. The same program natively, same arguments: the memory checksum must match"
"$ZB" "${ARGS[@]}" --report-ms 0 | tee "$WORK/native.out"
a=$(grep -o 'checksum=[0-9a-f]*' "$WORK/vm.out")
b=$(grep -o 'checksum=[0-9a-f]*' "$WORK/native.out")
if [ -n "$a" ] && [ "$a" = "$b" ]; then
	echo "checksums match: $a (in ccvm) = $b (native)"
else
	echo "CHECKSUMS DIFFER: ccvm '$a', native '$b'"
	exit 1
fi
