#!/usr/bin/env bash
# The ccvm demo: launch a VM running the zipfbench workload (an unmodified static
# Linux program), drive it over the control socket (status, pause, resume, stats),
# take a live copy-on-write snapshot while it keeps writing, let it finish, restore
# the snapshot into a new VM, and check that both finish with exactly the memory
# checksum a native run computes.
#
# Without a usable /dev/kvm the same demo runs in a KVM nested under QEMU's TCG
# (scripts/kvm-in-tcg.sh), on a smaller VM and workload so that it ends within minutes
# on 2 cores: every step and the checksums are the same, no figure it prints is a
# timing that means anything.
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

MEM=1G
ARGS=(--size 256M --write-total 24G --report-ms 1000 --seed 42)
if [ -z "${CCVM_DEMO_NESTED:-}" ] && ! { [ -c /dev/kvm ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]; }; then
	echo "VMs: nested KVM under TCG (slow; no timing here means anything)"
	echo "(no usable /dev/kvm here: the demo runs inside a Linux VM under QEMU's TCG that has one)"
	trap - EXIT
	rm -rf "$WORK"
	exec "$TOP/scripts/kvm-in-tcg.sh" --timeout "${DEMO_NESTED_TIMEOUT:-900}" -- \
		env CCVM_DEMO_NESTED=1 "$TOP/scripts/demo.sh"
fi
if [ -n "${CCVM_DEMO_NESTED:-}" ]; then # inside the nested VM: a smaller VM and workload
	MEM=256M
	ARGS=(--size 32M --write-total 32G --report-ms 1000 --seed 42)
fi

say "1. Launch a $MEM VM running zipfbench ${ARGS[*]}"
echo "\$ ccvm run --mem $MEM --control ctl.sock -- zipfbench ${ARGS[*]}"
"$CCVM" run --mem "$MEM" --control "$SOCK" --image-dir "$WORK" -- "$ZB" "${ARGS[@]}" >"$WORK/vm.out" 2>&1 &
VM=$!
for _ in $(seq 1200); do [ -S "$SOCK" ] && break; kill -0 "$VM" 2>/dev/null || break; sleep 0.05; done
if [ ! -S "$SOCK" ]; then
	echo "demo: the VM did not open its control socket; it said:" >&2
	cat "$WORK/vm.out" >&2
	exit 1
fi
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

say "4. Take a live snapshot (policy ccow, the default) while the guest keeps writing, then a stop one"
echo "(the coverage tracker's view first: regions whose pages the guest rewrites)"
ctl "$SOCK" stats regions
ctl "$SOCK" snapshot "$WORK/live.img" --wait
ctl "$SOCK" snapshot "$WORK/stop.img" --policy stop --wait
echo "(pause_us: how long the guest was stopped; cow_faults: guest writes that had to"
echo " wait for a copy; regions_precopied: hot regions copied whole on their first fault;"
echo " pages_copied: pages saved from the pool instead of live memory)"

wait "$VM" && status=0 || status=$?
VM=
say "5. What the guest printed (exit status $status)"
cat "$WORK/vm.out"

say "6. Check the image, then restore it: the VM continues from the snapshot instant"
echo "\$ ccvm inspect live.img"
"$CCVM" inspect "$WORK/live.img" | sed "s|$WORK/||"
echo "\$ ccvm restore live.img"
"$CCVM" restore "$WORK/live.img" | tee "$WORK/restored.out"

say "7. The same program natively, same arguments: the memory checksum must match"
"$ZB" "${ARGS[@]}" --report-ms 0 | tee "$WORK/native.out"
a=$(grep -o 'checksum=[0-9a-f]*' "$WORK/vm.out")
r=$(grep -o 'checksum=[0-9a-f]*' "$WORK/restored.out")
b=$(grep -o 'checksum=[0-9a-f]*' "$WORK/native.out")
if [ -n "$a" ] && [ "$a" = "$b" ] && [ "$r" = "$b" ]; then
	echo "checksums match: $a (ccvm, through pause and two snapshots) = $r (restored from"
	echo "the live snapshot) = $b (native)"
else
	echo "CHECKSUMS DIFFER: ccvm '$a', restored '$r', native '$b'"
	exit 1
fi
