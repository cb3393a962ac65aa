# Snapshot end-to-end tests; sourced by run.sh (uses its CCVM, G, WORK, pass, fail).
#
# The key invariant: an image equals guest memory at the snapshot instant, byte for
# byte, whatever the guest does afterwards; and a VM restored from it finishes with
# the same result as an uninterrupted run.

echo "== snapshots"
S=$WORK/snap; mkdir -p "$S"
ZARGS=(--size 64M --write-total 24G --report-ms 0 --seed 11 --scatter)
WANT=$("$G/zipfbench" "${ZARGS[@]}" | grep -o 'checksum=[0-9a-f]*')

start_vm() { # SOCK, then command; sets VMPID
	local sock=$1; shift
	"$CCVM" run --mem 256M --control "$sock" -- "$@" >"$S/vm.out" 2>"$S/vm.err" &
	VMPID=$!
	for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
}
field() { grep -o "\"$1\":[^,}]*" | head -1 | cut -d: -f2- | tr -d '"'; }
image_memory_equals_ref() { # IMAGE: the memory region of the image vs IMAGE.ref
	local ram; ram=$(stat -c %s "$1.ref")
	tail -c +$((1048576 + 1)) "$1" | head -c "$ram" | cmp -s - "$1.ref"
}

# 1. cow and stop snapshots of a guest that keeps writing, compared with a copy of RAM
#    taken synchronously at the instant, then restored to the end.
SOCK=$S/ctl.sock
CCVM_TEST_REFERENCE=1 start_vm "$SOCK" "$G/zipfbench" "${ZARGS[@]}"
sleep 0.5
for i in 1 2 3; do
	pol=cow; [ $i = 2 ] && pol=stop
	"$CCVM" ctl "$SOCK" snapshot "$S/z$i.img" --policy $pol --wait >"$S/z$i.json" 2>&1
	sleep 0.3
done
wait $VMPID; st=$?
[ $st = 0 ] && grep -q "$WANT" "$S/vm.out" && pass "zipfbench ran through 3 snapshots, $WANT" || fail "zipfbench under snapshots" "status $st" "$(tail -2 "$S/vm.out" "$S/vm.err")"
for i in 1 2 3; do
	pol=$(field policy <"$S/z$i.json"); faults=$(field cow_faults <"$S/z$i.json"); pause=$(field pause_us <"$S/z$i.json")
	if [ "$(field ok <"$S/z$i.json")" = true ] && [ -f "$S/z$i.img" ]; then
		pass "snapshot $i ($pol): pause ${pause} us, $faults cow faults, $(field duration_ms <"$S/z$i.json") ms"
	else
		fail "snapshot $i" "$(cat "$S/z$i.json")"; continue
	fi
	image_memory_equals_ref "$S/z$i.img" && pass "image $i ($pol) equals RAM at the snapshot instant, byte for byte" || fail "image $i differs from the reference copy"
	got=$(timeout 120 "$CCVM" restore "$S/z$i.img" </dev/null 2>"$S/r.err" | grep -o 'checksum=[0-9a-f]*')
	[ "$got" = "$WANT" ] && pass "restored image $i ($pol) finishes with $got" || fail "restore $i" "got '$got' want '$WANT'" "$(head -3 "$S/r.err")"
done
for k in id file policy pause_us duration_ms bytes pages_total pages_zero pages_saved_by_writer cow_faults pages_copied copy_bytes_peak; do
	grep -q "\"$k\":" "$S/z1.json" || { fail "snapshot reply lacks $k" "$(cat "$S/z1.json")"; break; }
done && pass "snapshot reply has every figure"

# 1 (dynamic). A dynamic program (ld-linux, libc and libm mapped from their files): a cow
#     snapshot while it runs restores to the same result.
CCVM_TEST_REFERENCE=1 start_vm "$SOCK" "$G/zipfbench.dyn" "${ZARGS[@]}"
sleep 0.5
"$CCVM" ctl "$SOCK" snapshot "$S/dyn.img" --policy cow --wait >"$S/dyn.json" 2>&1
wait $VMPID; st=$?
got=$(timeout 120 "$CCVM" restore "$S/dyn.img" </dev/null 2>"$S/r.err" | grep -o 'checksum=[0-9a-f]*')
[ $st = 0 ] && grep -q "$WANT" "$S/vm.out" && [ "$(field ok <"$S/dyn.json")" = true ] && \
	image_memory_equals_ref "$S/dyn.img" && [ "$got" = "$WANT" ] \
	&& pass "dynamic zipfbench: snapshot exact, restores to $got" \
	|| fail "dynamic zipfbench snapshot" "status $st" "$(cat "$S/dyn.json")" "got '$got'" "$(head -3 "$S/r.err")"
rm -f "$S/dyn.img" "$S/dyn.img.ref"

# 1 (threads). Five threads passing work through a condition-variable queue (futex
#     waits and wakes on every vCPU): cow and ccow snapshots while they run, each
#     restored with all five vCPUs, finish with the uninterrupted checksum.
QWANT=$("$G/tests/threads.glibc" queue 150000)
start_vm "$SOCK" "$G/tests/threads.glibc" queue 150000
sleep 1
"$CCVM" ctl "$SOCK" snapshot "$S/q1.img" --policy cow --wait >"$S/q1.json" 2>&1
sleep 0.5
"$CCVM" ctl "$SOCK" snapshot "$S/q2.img" --policy ccow --wait >"$S/q2.json" 2>&1
wait $VMPID; st=$?
[ $st = 0 ] && [ "$(cat "$S/vm.out")" = "$QWANT" ] && pass "threaded queue ran through 2 snapshots: $QWANT" ||
	fail "threaded queue under snapshots" "status $st" "$(tail -2 "$S/vm.out" "$S/vm.err")"
for i in 1 2; do
	threads=$("$CCVM" inspect "$S/q$i.img" 2>/dev/null | sed -n 's/^threads: \([0-9]*\) .*/\1/p')
	got=$(timeout 120 "$CCVM" restore "$S/q$i.img" </dev/null 2>"$S/r.err")
	[ "$(field ok <"$S/q$i.json")" = true ] && [ "$threads" = 5 ] && [ "$got" = "$QWANT" ] &&
		pass "threaded snapshot $i ($(field policy <"$S/q$i.json")): $threads threads saved, restored to the same checksum" ||
		fail "threaded snapshot $i" "threads '$threads'" "$(cat "$S/q$i.json")" "got '$got'" "$(head -3 "$S/r.err")"
done
rm -f "$S"/q?.img

# 1 (descriptors). A pipe, an eventfd with a count, an epoll instance watching both
#     and a socket pair, snapshotted while the program sleeps: restored, the pipe still
#     connects its ends, the eventfd keeps its count, epoll hands back the program's
#     own event data, and only the connection is gone (its read sees end-of-file).
for libc in glibc musl; do
	start_vm "$SOCK" "$G/tests/fdkeep.$libc" 2
	for _ in $(seq 100); do grep -q ready "$S/vm.out" && break; sleep 0.05; done
	"$CCVM" ctl "$SOCK" snapshot "$S/fd.img" --wait >"$S/fd.json" 2>&1
	wait $VMPID; st=$?
	got=$(timeout 60 "$CCVM" restore "$S/fd.img" </dev/null 2>"$S/r.err")
	want=$(sed '1d; s/^socket pair read .*/socket pair read                   0 /' "$S/vm.out")
	if [ $st = 0 ] && grep -q '^socket pair read .*-1 Resource temporarily unavailable' "$S/vm.out" &&
		[ "$got" = "$want" ]; then
		pass "descriptors across a restore ($libc): pipe, eventfd count, epoll data kept; the connection reads as closed"
	else
		fail "descriptors across a restore ($libc)" "status $st" "$(diff <(echo "$want") <(echo "$got"))" "$(head -3 "$S/r.err")"
	fi
	rm -f "$S/fd.img"
done

# 1a. The coverage tracker sees what the guest rewrites: a guest rewriting 32 MiB
# uniformly makes those 16 regions hot and leaves the other 112 of 256 MiB cold.
"$CCVM" run --mem 256M --control "$SOCK" --coverage-window 500 -- "$G/zipfbench" --size 32M --alpha 0.01 \
	--duration 8 --seed 3 >"$S/vm.out" 2>"$S/vm.err" &
VMPID=$!
regions=
for _ in $(seq 70); do
	sleep 0.1
	regions=$("$CCVM" ctl "$SOCK" stats regions 2>/dev/null) || continue
	[ "$(echo "$regions" | field windows)" -ge 1 ] 2>/dev/null && break
done
hot=$(echo "$regions" | field regions_hot)
# The guest's progress (its vDSO clock reads) times the tracker, and a snapshot's own
# write set is folded into coverage when the guest ran long enough during it (the
# writer is held to 40 MB/s so the snapshot lasts about a second).
after=
for n in 1 2 3; do
	"$CCVM" ctl "$SOCK" snapshot "$S/obs.img" --policy ccow --rate 40 --wait >/dev/null 2>&1 || true
	after=$("$CCVM" ctl "$SOCK" stats regions 2>/dev/null) || true
	[ "$(echo "$after" | field snapshots_observed)" -ge 1 ] 2>/dev/null && break
done
"$CCVM" ctl "$SOCK" quit >/dev/null 2>&1 || true
wait $VMPID || true
rm -f "$S/obs.img"
[ "$(echo "$regions" | field windows)" -ge 1 ] 2>/dev/null && [ "$hot" -ge 15 ] && [ "$hot" -le 18 ] \
	&& echo "$regions" | grep -q '"histogram":\[' \
	&& pass "stats regions: $hot of $(echo "$regions" | field regions) regions hot while 32 MiB are rewritten" \
	|| fail "stats regions (want 15-18 hot)" "$regions"
awk -v r="$(echo "$regions" | field progress_per_s)" 'BEGIN {exit !(r >= 100)}' \
	&& [ "$(echo "$after" | field snapshots_observed)" -ge 1 ] 2>/dev/null \
	&& pass "tracker timed by the guest's clock reads ($(echo "$regions" | field progress_per_s)/s); $(echo "$after" | field snapshots_observed) snapshot write set(s) folded into coverage" \
	|| fail "progress count or snapshot observation" "$regions" "$after"

# 1b. CCoW: exact at threshold 0.8 and 0 (CCoW-All), hot-first and linear order, lazy
# and eager pre-copy.
CCVM_TEST_REFERENCE=1 "$CCVM" run --mem 256M --control "$SOCK" --coverage-window 100 -- "$G/zipfbench" "${ZARGS[@]}" \
	>"$S/vm.out" 2>"$S/vm.err" &
VMPID=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
for _ in $(seq 70); do # threshold 0.8 needs a measured window to find hot regions
	[ "$("$CCVM" ctl "$SOCK" stats regions 2>/dev/null | field windows)" -ge 1 ] 2>/dev/null && break
	sleep 0.1
done
i=0
for opts in "--threshold 0.8 --save-order hot-first --precopy lazy" "--threshold 0 --save-order linear --precopy lazy" \
	"--threshold 0 --save-order hot-first --precopy lazy" "--threshold 0.8 --save-order linear --precopy lazy" \
	"--threshold 0 --precopy eager --pause-budget-ms 40" "--threshold 0.8 --precopy eager --pause-budget-ms 40"; do
	i=$((i + 1))
	# shellcheck disable=SC2086
	"$CCVM" ctl "$SOCK" snapshot "$S/c$i.img" --policy ccow $opts --wait >"$S/c$i.json" 2>&1
done
wait $VMPID
for i in 1 2 3 4 5 6; do
	eager_ok=true # eager pre-copy must have copied regions during the pause
	[ $i -ge 5 ] && { [ "$(field regions_eager <"$S/c$i.json")" -gt 0 ] || eager_ok=false; }
	[ "$(field ok <"$S/c$i.json")" = true ] && [ "$(field pages_precopied <"$S/c$i.json")" -gt 0 ] && $eager_ok && \
		image_memory_equals_ref "$S/c$i.img" && \
		got=$(timeout 120 "$CCVM" restore "$S/c$i.img" </dev/null 2>/dev/null | grep -o 'checksum=[0-9a-f]*') && [ "$got" = "$WANT" ] \
		&& pass "ccow snapshot $i (threshold $(field threshold <"$S/c$i.json"), $(field precopy <"$S/c$i.json") precopy, $(field regions_hot <"$S/c$i.json") hot, $(field regions_eager <"$S/c$i.json") copied in the pause, $(field pages_precopied <"$S/c$i.json") pages precopied): image exact, restores to $got" \
		|| fail "ccow snapshot $i" "$(cat "$S/c$i.json")" "got '${got:-}'"
done

# 1c. Periodic snapshots: the newest N are kept, each restores to the same result.
mkdir -p "$S/periodic"
"$CCVM" run --mem 256M --snapshot-every 0.25 --snapshot-dir "$S/periodic" --snapshot-keep 2 \
	-- "$G/zipfbench" "${ZARGS[@]}" >"$S/vm.out" 2>&1 </dev/null
n=$(ls "$S/periodic" | grep -c '^snapshot-.*\.img$')
ok=1
for f in "$S"/periodic/snapshot-*.img; do
	got=$(timeout 120 "$CCVM" restore "$f" </dev/null 2>/dev/null | grep -o 'checksum=[0-9a-f]*')
	[ "$got" = "$WANT" ] || ok=0
done
[ "$n" = 2 ] && [ $ok = 1 ] && grep -q "$WANT" "$S/vm.out" && pass "--snapshot-every: 2 newest images kept, both restore to $WANT" || fail "periodic snapshots" "$n images: $(ls "$S/periodic")"
expect_fail "--snapshot-every without a dir" 2 "needs --snapshot-dir" -- "$CCVM" run --snapshot-every 1 -- "$G/tests/hello.glibc"
expect_fail "--snapshot-policy unknown" 2 "known policies" -- "$CCVM" run --snapshot-every 1 --snapshot-dir "$S" --snapshot-policy fast -- "$G/tests/hello.glibc"

# 2. A restored VM can be snapshotted again, and that image restores too.
"$CCVM" restore "$S/z1.img" --control "$S/r.sock" >"$S/vm.out" 2>"$S/vm.err" </dev/null &
VMPID=$!
for _ in $(seq 100); do [ -S "$S/r.sock" ] && break; sleep 0.05; done
# Paused first, so the guest cannot finish before the request arrives.
"$CCVM" ctl "$S/r.sock" pause >/dev/null
"$CCVM" ctl "$S/r.sock" snapshot "$S/again.img" --wait >"$S/again.json" 2>&1
"$CCVM" ctl "$S/r.sock" resume >/dev/null
wait $VMPID
got=$("$CCVM" restore "$S/again.img" </dev/null 2>/dev/null | grep -o 'checksum=[0-9a-f]*')
[ "$got" = "$WANT" ] && grep -q "$WANT" "$S/vm.out" && pass "snapshot of a restored VM restores to $got" || fail "snapshot of a restored VM" "$(cat "$S/again.json")" "got '$got'"

# 2b. Lazy restore: same result; the restored VM can be snapshotted once its memory is
#     in; a damaged chunk stops the VM with a message.
got=$(timeout 120 "$CCVM" restore "$S/z3.img" --lazy </dev/null 2>"$S/r.err" | grep -o 'checksum=[0-9a-f]*')
[ "$got" = "$WANT" ] && pass "lazy restore finishes with $got" || fail "lazy restore" "got '$got'" "$(head -3 "$S/r.err")"
"$CCVM" restore "$S/z3.img" --lazy --control "$S/l.sock" >"$S/vm.out" 2>"$S/vm.err" </dev/null &
VMPID=$!
for _ in $(seq 100); do [ -S "$S/l.sock" ] && break; sleep 0.05; done
"$CCVM" ctl "$S/l.sock" pause >/dev/null
for _ in $(seq 100); do
	r=$("$CCVM" ctl "$S/l.sock" snapshot "$S/lazy-again.img" --wait 2>&1) && break
	echo "$r" | grep -q 'still loading' || break
	sleep 0.05
done
"$CCVM" ctl "$S/l.sock" resume >/dev/null
wait $VMPID
got=$("$CCVM" restore "$S/lazy-again.img" </dev/null 2>/dev/null | grep -o 'checksum=[0-9a-f]*')
[ "$got" = "$WANT" ] && pass "snapshot of a lazily restored VM restores to $got" || fail "snapshot after lazy restore" "$r" "got '$got'"

# 3. While paused, overlapping requests, events, quit during a snapshot.
start_vm "$SOCK" "$G/zipfbench" --size 64M --duration 30 --report-ms 0
"$CCVM" ctl "$SOCK" pause >/dev/null
r=$("$CCVM" ctl "$SOCK" snapshot "$S/p.img" --wait)
"$CCVM" ctl "$SOCK" status | grep -q '"state":"paused"' && [ "$(echo "$r" | field ok)" = true ] && pass "snapshot while paused: done, VM still paused" || fail "snapshot while paused" "$r"
"$CCVM" ctl "$SOCK" resume >/dev/null
r1=$("$CCVM" ctl "$SOCK" snapshot "$S/slow.img" --rate 20)
r2=$("$CCVM" ctl "$SOCK" snapshot "$S/other.img"); st=$?
[ "$(echo "$r1" | field state)" = running ] && [ $st = 1 ] && echo "$r2" | grep -q 'still running' && pass "second snapshot while one runs: refused ('$(echo "$r2" | field error)')" || fail "overlapping snapshots" "$r1" "$r2"
"$CCVM" ctl "$SOCK" quit >/dev/null
for _ in $(seq 100); do kill -0 $VMPID 2>/dev/null || break; sleep 0.1; done
if kill -0 $VMPID 2>/dev/null; then fail "quit during a snapshot: VM still running"; kill -9 $VMPID; else pass "quit during a snapshot ends the VM"; fi
[ ! -e "$S/slow.img" ] && [ -z "$(ls -A "$S" | grep '\.tmp\.')" ] && pass "abandoned snapshot left no file" || fail "abandoned snapshot left files" "$(ls -A "$S")"

# 4. A guest blocked in read() is snapshotted mid-call; restored, it makes the call again.
mkfifo "$S/in"
"$CCVM" run --control "$SOCK" -- "$G/tests/clockloop.glibc" 1000 <"$S/in" >"$S/vm.out" 2>&1 &
VMPID=$!
exec 8>"$S/in"
for _ in $(seq 100); do grep -q done "$S/vm.out" 2>/dev/null && break; sleep 0.05; done
"$CCVM" ctl "$SOCK" snapshot "$S/blocked.img" --wait >/dev/null
exec 8>&-
wait $VMPID
echo "more input" | timeout 20 "$CCVM" restore "$S/blocked.img" >"$S/rb.out" 2>&1; st=$?
[ $st = 0 ] && pass "restored guest blocked in read() reads again and exits 0" || fail "restore of a blocked read" "status $st" "$(cat "$S/rb.out")"

# 5. Damaged images are refused by inspect and restore with a reason.
"$CCVM" inspect "$S/z1.img" >"$S/insp.out" 2>&1 && grep -q '0 damaged' "$S/insp.out" && pass "inspect: intact image verifies" || fail "inspect of a good image" "$(tail -3 "$S/insp.out")"
cp "$S/z1.img" "$S/bad.img"
off=$(python3 - "$S/bad.img" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
print(os.lseek(fd, 1048576 + 8 * 2097152, os.SEEK_DATA) + 4000)
PY
)
printf '\xff' | dd of="$S/bad.img" bs=1 seek="$off" conv=notrunc 2>/dev/null
"$CCVM" inspect "$S/bad.img" >"$S/insp.out" 2>&1; st=$?
[ $st = 1 ] && grep -q 'DAMAGED: memory chunk' "$S/insp.out" && pass "inspect: flipped byte found ($(grep -o 'DAMAGED: memory chunk [0-9]*' "$S/insp.out"))" || fail "inspect of a damaged image" "status $st"
timeout 20 "$CCVM" restore "$S/bad.img" >/dev/null 2>"$S/r.err"; st=$?
[ $st = 1 ] && grep -q 'fails its checksum' "$S/r.err" && pass "restore refuses the damaged image" || fail "restore of a damaged image" "status $st" "$(cat "$S/r.err")"
timeout 60 "$CCVM" restore "$S/bad.img" --lazy >/dev/null 2>"$S/r.err" </dev/null; st=$?
[ $st = 1 ] && grep -q 'fails its checksum' "$S/r.err" && pass "lazy restore stops at the damaged chunk (status 1)" || fail "lazy restore of a damaged image" "status $st" "$(cat "$S/r.err")"
cp "$S/z1.img" "$S/trunc.img"; truncate -s -100 "$S/trunc.img"
for cmd in inspect restore; do
	timeout 20 "$CCVM" $cmd "$S/trunc.img" >/dev/null 2>"$S/r.err" </dev/null; st=$?
	[ $st = 1 ] && grep -q 'truncated' "$S/r.err" && pass "$cmd refuses a truncated image" || fail "$cmd of a truncated image" "status $st" "$(cat "$S/r.err")"
done
cp "$S/z1.img" "$S/hdr.img"; printf '\x07' | dd of="$S/hdr.img" bs=1 seek=8 conv=notrunc 2>/dev/null
timeout 20 "$CCVM" restore "$S/hdr.img" >/dev/null 2>"$S/r.err"; st=$?
[ $st = 1 ] && grep -q 'version 7' "$S/r.err" && pass "restore refuses another format version" || fail "wrong version" "$(cat "$S/r.err")"
timeout 20 "$CCVM" restore "$G/zipfbench" >/dev/null 2>"$S/r.err"; st=$?
[ $st = 1 ] && grep -q 'not a ccvm snapshot image' "$S/r.err" && pass "restore refuses a foreign file" || fail "foreign file" "$(cat "$S/r.err")"

# 6. Disk full while writing: the snapshot fails, the guest runs on, the old image stays.
if [ "$(id -u)" = 0 ] && mkdir -p "$S/full" && mount -t tmpfs -o size=72m tmpfs "$S/full" 2>/dev/null; then
	ZA=(--size 48M --write-total 24G --report-ms 0 --seed 5)
	WANT5=$("$G/zipfbench" "${ZA[@]}" | grep -o 'checksum=[0-9a-f]*')
	start_vm "$SOCK" "$G/zipfbench" "${ZA[@]}"
	sleep 0.3
	r1=$("$CCVM" ctl "$SOCK" snapshot "$S/full/old.img" --wait)
	r2=$("$CCVM" ctl "$SOCK" snapshot "$S/full/new.img" --wait); st=$?
	r3=$("$CCVM" ctl "$SOCK" snapshot "$S/full/old.img" --wait)
	"$CCVM" ctl "$SOCK" status | grep -q '"state":"running"' && running=1 || running=0
	wait $VMPID; vst=$?
	if [ "$(echo "$r1" | field ok)" = true ] && [ $st = 1 ] && echo "$r2" | grep -q 'No space left' && [ $running = 1 ]; then
		pass "disk full: snapshot fails with '$(echo "$r2" | field error)', guest keeps running"
	else
		fail "disk full" "$r1" "$r2"
	fi
	[ $vst = 0 ] && grep -q "$WANT5" "$S/vm.out" && pass "guest finished correctly after the failed snapshots ($WANT5)" || fail "guest after disk full" "$(tail -2 "$S/vm.out")"
	"$CCVM" inspect "$S/full/old.img" >/dev/null 2>&1 && [ -z "$(ls -A "$S/full" | grep -v '^old.img$')" ] && echo "$r3" | grep -q '"ok":false' \
		&& pass "old image intact and verified, no temporary files left" || fail "old image after disk full" "$(ls -A "$S/full")" "$r3"
	umount "$S/full"
else
	echo "skip disk-full test (needs root to mount a small tmpfs)"
fi

# Signals in a snapshot: a handler installed, SIGUSR2 blocked and pending, ITIMER_REAL
# armed; the VM snapshotted while it waits for the alarm and stopped, its image
# restored: the alarm comes, the pending signal is delivered when unblocked, as in an
# uninterrupted run.
native=$("$G/tests/signals.glibc" snapshot 6 | tail -n +2)
start_vm "$SOCK" "$G/tests/signals.glibc" snapshot 6
for _ in $(seq 100); do grep -q armed "$S/vm.out" 2>/dev/null && break; sleep 0.1; done
"$CCVM" ctl "$SOCK" snapshot "$S/sig.img" --policy cow --wait >"$S/sig.json" 2>&1
"$CCVM" ctl "$SOCK" quit >/dev/null 2>&1
wait $VMPID
got=$(timeout 120 "$CCVM" restore "$S/sig.img" </dev/null 2>"$S/r.err"); st=$?
if [ $st = 0 ] && [ "$(field ok <"$S/sig.json")" = true ] && [ "$got" = "$native" ] && [ -n "$native" ] &&
   ! grep -q "alarm" "$S/vm.out"; then
	pass "signals restored: the armed alarm fires, the pending SIGUSR2 arrives on unblock (status 0)"
else
	fail "signals across a snapshot" "status $st" "got: $got" "want: $native" "$(head -3 "$S/r.err")" "$(cat "$S/sig.json")"
fi

