# Snapshot end-to-end tests; sourced by run.sh (uses its CCVM, G, WORK and lib.sh).
#
# The key invariant: an image equals guest memory at the snapshot instant, byte for
# byte, whatever the guest does afterwards; and a VM restored from it ends with the
# memory a native run of the same length ends with.
#
# The writing guests run until the test creates $STOP (zipfbench --stop-file, threads
# queue-until), so every snapshot finds them running on a machine of any speed. A run
# that stops reports how many updates it made, and the native run of that many updates
# is its reference (zcheck): the uninterrupted guest, and each restored one, must end
# with that run's checksum.
#
# One function a block, called at the end; under run.sh --only parsing only the blocks
# that restore images (exact, with descriptors, signals, a call in progress) and refuse
# damaged ones.

echo "== snapshots"
S=$WORK/snap; mkdir -p "$S"
# shellcheck source=tests/e2e/snaplib.sh
. "$TOP/tests/e2e/snaplib.sh"

snap_each() { # PREFIX OPTIONS...: of the VM on $SOCK, $S/PREFIXn.img (and .json) with the
	local prefix=$1 i=0 opts # n-th OPTIONS, the guest writing on between; then $STOP
	shift
	for opts in "$@"; do
		i=$((i + 1))
		# shellcheck disable=SC2086
		"$CCVM" ctl "$SOCK" snapshot "$S/$prefix$i.img" $opts --wait >"$S/$prefix$i.json" 2>&1
		wait_until 60 more_reports "$(reports)"
	done
	touch "$STOP"
	wait "$VMPID"
}

# 1. cow and stop snapshots of a guest that keeps writing, compared with a copy of RAM
#    taken synchronously at the instant, then restored to the end.
snap_live() {
	rm -f "$STOP"
	CCVM_TEST_REFERENCE=1 start_vm "$SOCK" "$G/zipfbench" "${ZARGS[@]}" --report-ms 20 --stop-file "$STOP"
	wait_until 60 more_reports 0
	for i in 1 2 3; do
		pol=cow; [ $i = 2 ] && pol=stop
		"$CCVM" ctl "$SOCK" snapshot "$S/z$i.img" --policy $pol --wait >"$S/z$i.json" 2>&1
		wait_until 60 more_reports "$(reports)" # the guest writes on between snapshots
	done
	# One table checks a request: run and ctl refuse a bad value in the same words.
	"$CCVM" ctl "$SOCK" snapshot "$S/bad.img" --threads 99 >"$S/bad.json" 2>&1; cst=$?
	"$CCVM" run --snapshot-threads 99 -- "$G/zipfbench" >/dev/null 2>"$S/bad.err"; rst=$?
	cwhy=$(grep -o '99: [^"]*' "$S/bad.json"); rwhy=$(grep -o '99: .*' "$S/bad.err")
	[ $cst = 1 ] && [ $rst = 2 ] && [ -n "$cwhy" ] && [ "$cwhy" = "$rwhy" ] && [ ! -e "$S/bad.img" ] &&
		pass "ctl snapshot --threads 99 and run --snapshot-threads 99" "both: '$cwhy'" ||
		fail "ctl snapshot --threads 99 and run --snapshot-threads 99" "ctl $cst '$(cat "$S/bad.json")'" \
			"run $rst '$(cat "$S/bad.err")'"
	vm_stop; st=$?
	why=$(zcheck "$S/vm.out") && [ $st = 0 ] && pass "zipfbench under snapshots" "ran through 3 snapshots, $why" ||
		fail "zipfbench under snapshots" "status $st" "$why" "$(tail -2 "$S/vm.err")"
	for i in 1 2 3; do
		pol=$(field policy <"$S/z$i.json"); [ -n "$pol" ] || pol=$( [ $i = 2 ] && echo stop || echo cow)
		faults=$(field cow_faults <"$S/z$i.json"); pause=$(field pause_us <"$S/z$i.json")
		if [ "$(field ok <"$S/z$i.json")" = true ] && [ -f "$S/z$i.img" ]; then
			pass "snapshot $i ($pol)" "pause ${pause} us, $faults cow faults, $(field duration_ms <"$S/z$i.json") ms"
		else
			fail "snapshot $i ($pol)" "$(cat "$S/z$i.json")"
			fail "image $i ($pol) equals RAM at the snapshot instant" "no image"
			fail "restore $i ($pol)" "no image"
			continue
		fi
		image_memory_equals_ref "$S/z$i.img" && pass "image $i ($pol) equals RAM at the snapshot instant" "byte for byte" ||
			fail "image $i ($pol) equals RAM at the snapshot instant" "the image differs from the reference copy"
		tmo 120 "$CCVM" restore "$S/z$i.img" </dev/null >"$S/r.out" 2>"$S/r.err"
		why=$(zcheck "$S/r.out") && pass "restore $i ($pol)" "the restored guest ends with $why" ||
			fail "restore $i ($pol)" "$why" "$(head -3 "$S/r.err")"
	done
	for k in id file policy pause_us duration_ms bytes pages_total pages_zero pages_saved_by_writer cow_faults pages_copied copy_bytes_peak; do
		grep -q "\"$k\":" "$S/z1.json" || { fail "snapshot reply has every figure" "it lacks $k" "$(cat "$S/z1.json")"; break; }
	done && pass "snapshot reply has every figure"
}

# 1 (dynamic). A dynamic program (ld-linux, libc and libm mapped from their files): a cow
#     snapshot while it runs restores to the same result.
snap_dynamic() {
	rm -f "$STOP"
	CCVM_TEST_REFERENCE=1 start_vm "$SOCK" "$G/zipfbench.dyn" "${ZARGS[@]}" --report-ms 20 --stop-file "$STOP"
	wait_until 60 more_reports 0
	"$CCVM" ctl "$SOCK" snapshot "$S/dyn.img" --policy cow --wait >"$S/dyn.json" 2>&1
	vm_stop; st=$?
	tmo 120 "$CCVM" restore "$S/dyn.img" </dev/null >"$S/r.out" 2>"$S/r.err"
	if [ $st = 0 ] && ran=$(zcheck "$S/vm.out") && [ "$(field ok <"$S/dyn.json")" = true ] &&
		image_memory_equals_ref "$S/dyn.img" && got=$(zcheck "$S/r.out"); then
		pass "dynamic zipfbench snapshot" "exact; the run ends with $ran, the restored one with $got"
	else
		fail "dynamic zipfbench snapshot" "status $st" "$(cat "$S/dyn.json")" "run: ${ran:-}" "restored: ${got:-}" "$(head -3 "$S/r.err")"
	fi
	rm -f "$S/dyn.img" "$S/dyn.img.ref"
}

# 1 (threads). Five threads passing work through a condition-variable queue (futex
#     waits and wakes on every vCPU): cow and ccow snapshots while they run, each
#     restored with all five vCPUs, end with the checksum of a native run of as many
#     items.
snap_threads() {
	qcheck() { # FILE: its "queue items N checksum C" is a native `threads queue N`'s
		local line n
		line=$(grep '^queue items' "$1" 2>/dev/null)
		n=$(echo "$line" | awk '{print $3}')
		[ -n "$n" ] && [ "$n" -gt 0 ] && [ "$line" = "$("$G/tests/threads.glibc" queue "$n")" ] &&
			echo "$line" || { echo "'$line'"; return 1; }
	}
	rm -f "$STOP"
	start_vm "$SOCK" "$G/tests/threads.glibc" queue-until "$STOP"
	wait_until 60 vm_field_ge "$SOCK" status vcpus 5
	"$CCVM" ctl "$SOCK" snapshot "$S/q1.img" --policy cow --wait >"$S/q1.json" 2>&1
	"$CCVM" ctl "$SOCK" snapshot "$S/q2.img" --policy ccow --wait >"$S/q2.json" 2>&1
	vm_stop; st=$?
	why=$(qcheck "$S/vm.out") && [ $st = 0 ] && pass "threaded queue under snapshots" "ran through 2 snapshots: $why" ||
		fail "threaded queue under snapshots" "status $st" "$why" "$(tail -2 "$S/vm.err")"
	for i in 1 2; do
		threads=$("$CCVM" inspect "$S/q$i.img" 2>/dev/null | sed -n 's/^threads: \([0-9]*\) .*/\1/p')
		tmo 120 "$CCVM" restore "$S/q$i.img" </dev/null >"$S/r.out" 2>"$S/r.err"
		[ "$(field ok <"$S/q$i.json")" = true ] && [ "$threads" = 5 ] && why=$(qcheck "$S/r.out") &&
			pass "threaded snapshot $i" "$(field policy <"$S/q$i.json"): $threads threads saved, restored to $why" ||
			fail "threaded snapshot $i" "threads '$threads'" "$(cat "$S/q$i.json")" "got: $(cat "$S/r.out")" "$(head -3 "$S/r.err")"
	done
	rm -f "$S"/q?.img
}

# 1 (descriptors). A pipe holding 4 bytes, an eventfd with a count, an epoll instance
#     watching both and a socket pair, snapshotted while the program waits for its
#     stdin: restored, the pipe still connects its ends and holds the bytes, the
#     eventfd keeps its count, epoll hands back the program's own event data, and only
#     the connection is gone (its read sees end-of-file).
snap_descriptors() {
	for libc in glibc musl; do
		start_vm "$SOCK" "$G/tests/fdkeep.$libc"
		wait_for_line ready "$S/vm.out"
		"$CCVM" ctl "$SOCK" snapshot "$S/fd.img" --wait >"$S/fd.json" 2>&1
		vm_stop; st=$?
		got=$(tmo 60 "$CCVM" restore "$S/fd.img" </dev/null 2>"$S/r.err")
		want=$(sed '1,/^ready$/d; s/^socket pair read .*/socket pair read                   0 /' "$S/vm.out")
		if [ $st = 0 ] && grep -q '^socket pair read .*-1 Resource temporarily unavailable' "$S/vm.out" &&
			[ "$got" = "$want" ]; then
			pass "descriptors across a restore ($libc)" "pipe and its bytes, eventfd count, epoll data kept; the connection reads as closed"
		else
			echo "$want" >"$S/fd.want"
			echo "$got" >"$S/fd.got"
			fail "descriptors across a restore ($libc)" "status $st" "$(diff "$S/fd.want" "$S/fd.got")" "$(head -3 "$S/r.err")"
		fi
		rm -f "$S/fd.img"
	done
}

# 1a. The coverage tracker sees what the guest rewrites: a guest rewriting 32 MiB
# uniformly makes those 16 regions hot and leaves the rest of its RAM cold.
snap_tracker() {
	rm -f "$STOP"
	"$CCVM" run --mem "$SMEM" --control "$SOCK" --coverage-window 500 -- "$G/zipfbench" --size 32M --alpha 0.01 \
		--stop-file "$STOP" --seed 3 >"$S/vm.out" 2>"$S/vm.err" </dev/null &
	VMPID=$!
	wait_rewrite_window "$SOCK"
	# Windows watch a sample of pages each (within the tracker's budget), and a region
	# folds in once it holds enough samples: the regions fold a window or two apart.
	wait_until 60 vm_field_ge "$SOCK" stats regions regions_hot 15
	regions=$("$CCVM" ctl "$SOCK" stats regions 2>/dev/null)
	hot=$(echo "$regions" | field regions_hot)
	# The guest's progress (its vDSO clock reads) times the tracker, and a snapshot's own
	# write set is folded into coverage when the guest ran long enough during it (the
	# writer is held to 40 MB/s so the snapshot lasts about a second; where the guest
	# runs slowly during it, as nested under a loaded TCG, each try holds it longer).
	after=
	for rate in 40 20 10 5 2; do
		"$CCVM" ctl "$SOCK" snapshot "$S/obs.img" --policy ccow --rate "$rate" --wait >/dev/null 2>&1 || true
		after=$("$CCVM" ctl "$SOCK" stats regions 2>/dev/null) || true
		[ "$(echo "$after" | field snapshots_observed)" -ge 1 ] 2>/dev/null && break
	done
	touch "$STOP"
	wait $VMPID
	rm -f "$S/obs.img"
	[ "$(echo "$regions" | field windows)" -ge 1 ] 2>/dev/null && [ "$hot" -ge 15 ] 2>/dev/null && [ "$hot" -le 18 ] \
		&& echo "$regions" | grep -q '"histogram":\[' \
		&& pass "stats regions" "$hot of $(echo "$regions" | field regions) regions hot while 32 MiB are rewritten" \
		|| fail "stats regions" "want 15-18 hot" "$regions"
	awk -v r="$(echo "$regions" | field progress_per_s)" 'BEGIN {exit !(r >= 100)}' \
		&& [ "$(echo "$after" | field snapshots_observed)" -ge 1 ] 2>/dev/null \
		&& pass "tracker progress and snapshot observation" "timed by the guest's clock reads ($(echo "$regions" | field progress_per_s)/s); $(echo "$after" | field snapshots_observed) snapshot write set(s) folded into coverage" \
		|| fail "tracker progress and snapshot observation" "$regions" "$after"
}

# 1b. CCoW: exact at threshold 0.8 and 0 (CCoW-All), hot-first and linear order, lazy
# and eager pre-copy. The guest rewrites an 8 MiB area uniformly, so the regions wholly
# inside it are hot at 0.8 however little of a snapshot the guest runs: under
# emulation it runs little, and a Zipf area's coverage over that time falls below the
# threshold.
snap_ccow() {
	local cargs=(--size 8M --alpha 0.01 --report-ms 0 --seed 11)
	rm -f "$STOP"
	CCVM_TEST_REFERENCE=1 "$CCVM" run --mem "$SMEM" --control "$SOCK" --coverage-window 100 -- "$G/zipfbench" "${cargs[@]}" \
		--report-ms 20 --stop-file "$STOP" >"$S/vm.out" 2>"$S/vm.err" </dev/null &
	VMPID=$!
	wait_until 10 test -S "$SOCK"
	# threshold 0.8 needs a measured window to find hot regions
	wait_rewrite_window "$SOCK"
	# Eager pre-copy copies until the pause has lasted its budget, counted from the
	# snapshot's start: 40 ms here, a bound times E2E_PATIENCE on a slower machine,
	# where the pause's own steps alone took longer (ASan under emulation).
	local budget=$((40 * E2E_PATIENCE)) i=0
	for opts in "--threshold 0.8 --save-order hot-first --precopy lazy" "--threshold 0 --save-order linear --precopy lazy" \
		"--threshold 0 --save-order hot-first --precopy lazy" "--threshold 0.8 --save-order linear --precopy lazy" \
		"--threshold 0 --precopy eager --pause-budget-ms $budget" "--threshold 0.8 --precopy eager --pause-budget-ms $budget" \
		"--threshold 0.8 --precopy rounds --pause-budget-ms $budget"; do
		i=$((i + 1))
		# Right after CCoW-All snapshots, under emulation, the tracker takes the
		# area for cold until its next windows: a 0.8 snapshot waits until it is hot.
		case $opts in *"threshold 0.8"*) wait_until 60 vm_field_ge "$SOCK" stats regions regions_hot 1 ;; esac
		# shellcheck disable=SC2086
		"$CCVM" ctl "$SOCK" snapshot "$S/c$i.img" --policy ccow $opts --wait >"$S/c$i.json" 2>&1
		wait_until 60 more_reports "$(reports)"
	done
	touch "$STOP"
	wait $VMPID
	for i in 1 2 3 4 5 6 7; do
		eager_ok=true # eager pre-copy must have copied regions during the pause
		[ $i -ge 5 ] && [ $i -le 6 ] && { [ "$(field regions_eager <"$S/c$i.json")" -gt 0 ] 2>/dev/null || eager_ok=false; }
		# rounds: every page went to the image before the instant
		eager_rounds=
		[ $i -eq 7 ] && { [ "$(field rounds <"$S/c$i.json")" -ge 1 ] 2>/dev/null &&
			[ "$(field pages_presaved <"$S/c$i.json")" -gt 0 ] 2>/dev/null || eager_ok=false; }
		[ $i -eq 7 ] && eager_rounds=", $(field rounds <"$S/c$i.json") rounds wrote $(field pages_presaved <"$S/c$i.json") pages before the instant, $(field pages_redirtied <"$S/c$i.json") rewritten since, $(field cow_faults <"$S/c$i.json") faults"
		got=
		[ "$(field ok <"$S/c$i.json")" = true ] && [ "$(field pages_precopied <"$S/c$i.json")" -gt 0 ] 2>/dev/null && $eager_ok && \
			image_memory_equals_ref "$S/c$i.img" && \
			tmo 120 "$CCVM" restore "$S/c$i.img" </dev/null >"$S/r.out" 2>/dev/null && got=$(zcheck "$S/r.out" "${cargs[@]}") \
			&& pass "ccow snapshot $i" "threshold $(field threshold <"$S/c$i.json"), $(field precopy <"$S/c$i.json") precopy, $(field regions_hot <"$S/c$i.json") hot, $(field regions_eager <"$S/c$i.json") copied in the pause, $(field pages_precopied <"$S/c$i.json") pages precopied${eager_rounds:-}: image exact, restores to $got" \
			|| fail "ccow snapshot $i" "$(cat "$S/c$i.json")" "got '${got:-}'"
	done
}

# 1d. --snapshot-pool as a hard cap: a guest writing scattered over 32 MiB, a cap of
#     24 MiB, of which the writer's buffers take 16: cow and eager ccow snapshots
#     report extra memory within the cap (faults beyond it save their page
#     themselves), and each image is exact and restores to a native run's result.
snap_pool_cap() {
	local cargs=(--size 32M --alpha 0.5 --report-ms 0 --seed 13 --scatter) cap=$((24 << 20))
	rm -f "$STOP"
	CCVM_TEST_REFERENCE=1 "$CCVM" run --mem "$SMEM" --control "$SOCK" --snapshot-pool 24M -- "$G/zipfbench" "${cargs[@]}" \
		--report-ms 20 --stop-file "$STOP" >"$S/vm.out" 2>"$S/vm.err" </dev/null &
	VMPID=$!
	wait_until 10 test -S "$SOCK"
	wait_until 60 more_reports 2
	snap_each p "--policy cow" "--policy ccow --precopy eager --pause-budget-ms 1000" \
		"--policy ccow --precopy eager --pause-budget-ms 1000"
	for i in 1 2 3; do
		got=
		extra=$(field extra_bytes_peak <"$S/p$i.json")
		[ "$(field ok <"$S/p$i.json")" = true ] && [ -n "$extra" ] && [ "$extra" -le $cap ] && \
			image_memory_equals_ref "$S/p$i.img" && \
			tmo 120 "$CCVM" restore "$S/p$i.img" </dev/null >"$S/r.out" 2>/dev/null && got=$(zcheck "$S/r.out" "${cargs[@]}") \
			&& pass "snapshot within --snapshot-pool $i" "$(field policy <"$S/p$i.json"), extra memory $((extra >> 20)) MiB of 24, $(field cow_faults <"$S/p$i.json") faults, $(field pages_eager <"$S/p$i.json") pages copied in the pause: image exact, restores to $got" \
			|| fail "snapshot within --snapshot-pool $i" "$(cat "$S/p$i.json")" "got '${got:-}'"
	done
}

# 1e. Compression in VMs (--snapshot-compress auto): a guest writing text-like blocks,
#     snapshotted with cow, stop, and ccow with lazy and eager pre-copy (auto: which
#     codecs it picks depends on the machine's speed, so only their shares are checked),
#     then cow with lz4 and with zstd (chunks stored as frames of that codec); each
#     restores to a native run's result, one lazily too; inspect shows the mix of codecs
#     and verifies every chunk; a flipped byte in an lz4 and in a zstd frame is found by
#     inspect and refused by restore and lazy restore (a raw chunk's: block 5 below).
snap_compress() {
	local targs=("${ZARGS[@]}" --text) want=(auto auto auto auto lz4 zstd) mix got i
	rm -f "$STOP"
	"$CCVM" run --mem "$SMEM" --control "$SOCK" --snapshot-compress auto --snapshot-compact off -- "$G/zipfbench" "${targs[@]}" \
		--report-ms 20 --stop-file "$STOP" >"$S/vm.out" 2>"$S/vm.err" </dev/null &
	VMPID=$!
	wait_until 10 test -S "$SOCK"
	wait_until 60 more_reports 2
	snap_each c "--policy cow" "--policy stop" "--policy ccow --precopy lazy" "--policy ccow --precopy eager" \
		"--policy cow --compress lz4" "--policy cow --compress zstd"
	for i in 1 2 3 4 5 6; do
		got=
		mix=$(grep -o '"codec_mix":{[^}]*}' "$S/c$i.json")
		[ "$(field ok <"$S/c$i.json")" = true ] && [ "$(field compress <"$S/c$i.json")" = "${want[$((i - 1))]}" ] &&
			python3 - "$mix" "${want[$((i - 1))]}" 2>/dev/null <<-'PY' &&
			import json, sys
			m, codec = json.loads(sys.argv[1][12:]), sys.argv[2]
			assert abs(m["raw"] + m["lz4"] + m["zstd"] - 1) < 1e-6, m
			assert codec == "auto" or m[codec] > 0, m
			PY
			tmo 120 "$CCVM" restore "$S/c$i.img" </dev/null >"$S/r.out" 2>/dev/null && got=$(zcheck "$S/r.out" "${targs[@]}") &&
			pass "compressed snapshot $i (${want[$((i - 1))]})" "$(field policy <"$S/c$i.json"), codecs ${mix#*:}, $(field disk_mb_per_s <"$S/c$i.json" | cut -d. -f1) MB/s to disk: restores to $got" ||
			fail "compressed snapshot $i (${want[$((i - 1))]})" "$(cat "$S/c$i.json")" "got '${got:-}'"
	done
	tmo 120 "$CCVM" restore "$S/c1.img" --lazy </dev/null >"$S/r.out" 2>"$S/r.err"
	got=$(zcheck "$S/r.out" "${targs[@]}") && pass "lazy restore of a compressed image" "ends with $got" ||
		fail "lazy restore of a compressed image" "$got" "$(head -3 "$S/r.err")"
	"$CCVM" inspect "$S/c1.img" >"$S/insp.out" 2>&1 && grep -q '^compression: auto' "$S/insp.out" &&
		grep -q '^codecs: zstd [0-9]*%, lz4 [0-9]*%, raw [0-9]*%$' "$S/insp.out" && grep -q '0 damaged' "$S/insp.out" &&
		pass "inspect of a compressed image" "$(grep '^codecs' "$S/insp.out"), every chunk verifies" ||
		fail "inspect of a compressed image" "$(cat "$S/insp.out")"
	damaged_frame "$S/c5.img" lz4
	damaged_frame "$S/c6.img" zstd
	# The image records the CPU features its guest was given; one forged to ask for
	# every feature (its checksums made to match: they authenticate nothing) is refused
	# by the first feature this host lacks.
	cp "$S/c1.img" "$S/cpu.img" && "$TOP/build/imgcpu" "$S/cpu.img" 2>"$S/r.err"
	tmo 60 "$CCVM" restore "$S/cpu.img" </dev/null >/dev/null 2>>"$S/r.err"; st=$?
	"$CCVM" inspect "$S/c1.img" 2>/dev/null | grep -q ': cpu features, 196 bytes, checksum ok' &&
		[ $st = 1 ] && grep -q 'lack what the saved guest may use' "$S/r.err" &&
		pass "an image asking for CPU features this host lacks is refused" \
			"$(grep -o 'feature [a-z0-9_.]* is not available' "$S/r.err" | head -1)" ||
		fail "an image asking for CPU features this host lacks is refused" "status $st" "$(tail -2 "$S/r.err")"
}

# 1f. Pre-copy rounds that compress (the default path, with zstd): round 0 stores frames
#     and the pages written after it stand in the patch area; the image restores to a
#     native run's result, eagerly and lazily; a byte flipped in a patch is found by
#     inspect and refused by restore; `ccvm compact` folds the patches in and the image
#     restores the same; a compaction killed with -9 midway leaves the old image whole
#     and a temporary, which the next compaction of that image sweeps.
snap_rounds_compact() {
	local targs=("${ZARGS[@]}" --text) got st rst off pid before
	rm -f "$STOP"
	"$CCVM" run --mem "$SMEM" --control "$SOCK" -- "$G/zipfbench" "${targs[@]}" \
		--report-ms 20 --stop-file "$STOP" >"$S/vm.out" 2>"$S/vm.err" </dev/null &
	VMPID=$!
	wait_until 10 test -S "$SOCK"
	wait_until 60 more_reports 2
	snap_each p "--policy ccow --precopy rounds --compress zstd --compact off"
	tmo 120 "$CCVM" restore "$S/p1.img" </dev/null >"$S/r.out" 2>/dev/null && got=$(zcheck "$S/r.out" "${targs[@]}") &&
		tmo 120 "$CCVM" restore "$S/p1.img" --lazy </dev/null >"$S/r2.out" 2>/dev/null &&
		[ "$(zcheck "$S/r2.out" "${targs[@]}")" = "$got" ] &&
		"$CCVM" inspect "$S/p1.img" >"$S/insp.out" 2>&1 && grep -q '^patches: ' "$S/insp.out" &&
		pass "pre-copy rounds with zstd: frames and a patch area" "$(field rounds <"$S/p1.json") rounds, $(grep -o '^patches: [0-9]*' "$S/insp.out"), $(grep '^codecs' "$S/insp.out"); restores (eager, lazy) to $got" ||
		fail "pre-copy rounds with zstd: frames and a patch area" "$(head -c 300 "$S/p1.json")" "got '${got:-}'" "$(grep -E '^(patches|codecs)' "$S/insp.out")"
	off=$(python3 - "$S/p1.img" <<-'PY'
	import os, struct, sys
	fd = os.open(sys.argv[1], os.O_RDONLY)
	end = os.fstat(fd).st_size
	table, n = struct.unpack("<QI", os.pread(fd, 12, end - 40))
	for i in range(n):
	    t, _, o, ln, _ = struct.unpack("<IIQQQ", os.pread(fd, 32, table + 32 * i))
	    if t == 12 and ln >= 32:
	        print(struct.unpack("<Q", os.pread(fd, 8, o + 24))[0] + 100)
	PY
	)
	if [ -n "$off" ]; then
		cp "$S/p1.img" "$S/pbad.img" && flip_byte "$S/pbad.img" "$off"
		"$CCVM" inspect "$S/pbad.img" >"$S/insp.out" 2>&1; st=$?
		tmo 20 "$CCVM" restore "$S/pbad.img" >/dev/null 2>"$S/r.err" </dev/null; rst=$?
		[ $st = 1 ] && [ $rst = 1 ] && grep -q 'DAMAGED: memory chunk' "$S/insp.out" && grep -q 'fails its checksum' "$S/r.err" &&
			pass "a flipped byte in a patch" "found by inspect ($(grep -o 'DAMAGED: memory chunk [0-9]*' "$S/insp.out" | head -1)), refused by restore" ||
			fail "a flipped byte in a patch" "inspect status $st, restore $rst" "$(tail -2 "$S/insp.out")" "$(cat "$S/r.err")"
		rm -f "$S/pbad.img"
	else
		fail "a flipped byte in a patch" "the image has no patches section"
	fi
	before=$("$TOP/build/imgmem" "$S/p1.img" | md5sum)
	"$CCVM" compact "$S/p1.img" >"$S/compact.out" 2>&1 &&
		[ "$("$TOP/build/imgmem" "$S/p1.img" | md5sum)" = "$before" ] &&
		! "$CCVM" inspect "$S/p1.img" | grep -q '^patches' &&
		tmo 120 "$CCVM" restore "$S/p1.img" </dev/null >"$S/r.out" 2>/dev/null &&
		[ "$(zcheck "$S/r.out" "${targs[@]}")" = "$got" ] &&
		pass "ccvm compact folds the patches in" "$(cat "$S/compact.out"); the same memory, restores to $got" ||
		fail "ccvm compact folds the patches in" "$(cat "$S/compact.out")"
	# Killed midway (zstd 19 is slow enough to be caught at work): the old image stands.
	"$CCVM" compact "$S/p1.img" --level 19 >/dev/null 2>&1 &
	pid=$!
	sleep 0.3
	kill -9 "$pid" 2>/dev/null; st=$?
	wait "$pid" 2>/dev/null
	if [ $st = 0 ] && ls -A "$S" | grep -q '^\.p1\.img\.tmp\.' && "$CCVM" inspect "$S/p1.img" >/dev/null 2>&1 &&
		[ "$("$TOP/build/imgmem" "$S/p1.img" | md5sum)" = "$before" ] &&
		"$CCVM" compact "$S/p1.img" >/dev/null 2>&1 && ! ls -A "$S" | grep -q '^\.p1\.img\.tmp\.'; then
		pass "a compaction killed with -9" "the old image stands whole; the next compaction swept the temporary"
	else
		fail "a compaction killed with -9" "kill status $st" "$(ls -A "$S" | grep tmp)"
	fi
	rm -f "$S/p1.img"
	snap_idle_compaction
}

# 1g. Compaction in idle time (the default --snapshot-compact idle): after a snapshot
#     of the default path, the monitor compacts its image, but not while the guest
#     works: as long as it writes, stats show the compactor waiting (guest_busy) with
#     no image compacted; once it rests (alive, sleeping), the image is compacted, event
#     listeners are told ("compacted"), stats count it, and it restores to a native
#     run's result.
snap_idle_compaction() {
	local targs=("${ZARGS[@]}" --text) got st ev busy= n rest=$S/rest
	rm -f "$STOP" "$rest"
	"$CCVM" run --mem "$SMEM" --control "$SOCK" -- "$G/zipfbench" "${targs[@]}" \
		--report-ms 20 --stop-file "$STOP" --rest-file "$rest" >"$S/vm.out" 2>"$S/vm.err" </dev/null &
	VMPID=$!
	wait_until 10 test -S "$SOCK"
	"$CCVM" ctl "$SOCK" events >"$S/events.out" 2>&1 &
	ev=$!
	wait_until 60 more_reports 2
	"$CCVM" ctl "$SOCK" snapshot "$S/idle.img" --wait >"$S/idle.json" 2>&1
	compaction() { "$CCVM" ctl "$SOCK" stats 2>/dev/null | python3 -c 'import json, sys
c = json.load(sys.stdin)["compaction"]
print(c["images"], c["running"], c["guest_busy"])'; }
	waits_for_guest() { [ "$(compaction)" = "0 True True" ]; }
	# Still writing: the compactor waits for it, looked at for a few seconds more.
	if wait_until 60 waits_for_guest && n=$(reports) && sleep 3 && more_reports "$n" && waits_for_guest; then
		busy=$(compaction)
	fi
	touch "$STOP"
	wait_until 60 grep -q '^summary' "$S/vm.out"
	compacted() { [ "$(compaction | cut -d' ' -f1)" -ge 1 ] 2>/dev/null; }
	wait_until 120 compacted
	st=$("$CCVM" ctl "$SOCK" stats 2>/dev/null | python3 -c 'import json, sys; print(json.load(sys.stdin)["compaction"])')
	touch "$rest"
	wait "$VMPID"
	kill "$ev" 2>/dev/null; wait "$ev" 2>/dev/null
	if [ -n "$busy" ] && [ "$(field ok <"$S/idle.json")" = true ] &&
		grep -q "\"event\":\"compacted\",\"file\":\"$S/idle.img\"" "$S/events.out" &&
		"$CCVM" inspect "$S/idle.img" >"$S/insp.out" 2>&1 && grep -q '^compression: zstd level 1' "$S/insp.out" &&
		! grep -q '^patches' "$S/insp.out" &&
		tmo 120 "$CCVM" restore "$S/idle.img" </dev/null >"$S/r.out" 2>/dev/null && got=$(zcheck "$S/r.out" "${targs[@]}"); then
		pass "compaction in idle time" "waited while the guest wrote (images running guest_busy: $busy); once it rested, stats: $st; $(grep -o '"event":"compacted"[^}]*' "$S/events.out" | head -1); restores to $got"
	else
		fail "compaction in idle time" "while writing: ${busy:-not seen waiting for the guest ($(compaction))}; stats: $st" "$(head -c 300 "$S/idle.json")" "$(grep -v snapshot-done "$S/events.out" | head -3)" \
			"$(head -8 "$S/insp.out")"
	fi
	rm -f "$S/idle.img" "$rest"
}

damaged_frame() { # IMAGE NAME: a byte flipped in IMAGE's first chunk stored as a frame
	local off st
	cp "$1" "$S/cbad.img"
	off=$(python3 - "$S/cbad.img" <<-'PY'
	import os, sys
	fd, mem, chunk = os.open(sys.argv[1], os.O_RDONLY), 1048576, 2097152
	end = os.fstat(fd).st_size
	for c in range(1, 4096):  # a frame: data from the chunk's start, then only a hole
	    start = mem + c * chunk
	    if start + chunk > end:
	        break
	    try:
	        if os.lseek(fd, start, os.SEEK_DATA) != start:
	            continue
	        hole = os.lseek(fd, start, os.SEEK_HOLE)
	        if hole < start + chunk and os.lseek(fd, hole, os.SEEK_DATA) >= start + chunk:
	            print(start + (hole - start) // 2)
	            break
	    except OSError:
	        continue
	PY
	)
	if [ -z "$off" ]; then
		fail "damaged $2 frame" "no chunk of $1 is stored as a frame"
		return
	fi
	flip_byte "$S/cbad.img" "$off"
	"$CCVM" inspect "$S/cbad.img" >"$S/insp.out" 2>&1; st=$?
	[ $st = 1 ] && grep -q 'DAMAGED: memory chunk' "$S/insp.out" &&
		pass "inspect of a damaged $2 frame" "found ($(grep -o 'DAMAGED: memory chunk [0-9]*' "$S/insp.out"))" ||
		fail "inspect of a damaged $2 frame" "status $st" "$(tail -3 "$S/insp.out")"
	tmo 20 "$CCVM" restore "$S/cbad.img" >/dev/null 2>"$S/r.err" </dev/null; st=$?
	[ $st = 1 ] && grep -q 'fails its checksum' "$S/r.err" && pass "restore of a damaged $2 frame" "refused" ||
		fail "restore of a damaged $2 frame" "status $st" "$(cat "$S/r.err")"
	tmo 60 "$CCVM" restore "$S/cbad.img" --lazy >/dev/null 2>"$S/r.err" </dev/null; st=$?
	[ $st = 1 ] && grep -q 'fails its checksum' "$S/r.err" && pass "lazy restore of a damaged $2 frame" "stops (status 1)" ||
		fail "lazy restore of a damaged $2 frame" "status $st" "$(cat "$S/r.err")"
}

# 1c. Periodic snapshots: the newest N are kept, each restores to a native run's result.
#     The guest stops once a third snapshot ended (--snapshot-log has its line).
snap_periodic() {
	mkdir -p "$S/periodic"
	rm -f "$STOP"
	"$CCVM" run --mem "$SMEM" --snapshot-every 0.25 --snapshot-dir "$S/periodic" --snapshot-keep 2 \
		--snapshot-log "$S/periodic.log" -- "$G/zipfbench" "${ZARGS[@]}" --stop-file "$STOP" \
		>"$S/vm.out" 2>&1 </dev/null &
	VMPID=$!
	logged() { [ "$(wc -l 2>/dev/null <"$S/periodic.log")" -ge "$1" ] 2>/dev/null; } # N lines
	wait_until 120 logged 3
	touch "$STOP"
	wait $VMPID
	n=$(ls "$S/periodic" | grep -c '^snapshot-.*\.img$')
	ok=1 got=
	for f in "$S"/periodic/snapshot-*.img; do
		tmo 120 "$CCVM" restore "$f" </dev/null >"$S/r.out" 2>/dev/null
		got="$got $(zcheck "$S/r.out")" || ok=0
	done
	[ "$n" = 2 ] && logged 3 && [ $ok = 1 ] && ran=$(zcheck "$S/vm.out") &&
		pass "periodic snapshots" "$(wc -l <"$S/periodic.log") taken, the 2 newest kept, restored:$got; the run: $ran" ||
		fail "periodic snapshots" "$n images: $(ls "$S/periodic")" "$(wc -l <"$S/periodic.log" 2>/dev/null) logged" "restored:$got" "$(tail -2 "$S/vm.out")"
	expect_fail "--snapshot-every without a dir" 2 "needs --snapshot-dir" -- "$CCVM" run --snapshot-every 1 -- "$G/tests/hello.glibc"
	expect_fail "--snapshot-policy unknown" 2 "known policies" -- "$CCVM" run --snapshot-every 1 --snapshot-dir "$S" --snapshot-policy fast -- "$G/tests/hello.glibc"
}

# 2. A restored VM can be snapshotted again, and that image restores too. $STOP is out
#    of the way until then, so the restored guest writes on.
snap_restored_again() {
	rm -f "$STOP"
	"$CCVM" restore "$S/z1.img" --control "$S/r.sock" >"$S/vm.out" 2>"$S/vm.err" </dev/null &
	VMPID=$!
	wait_until 10 test -S "$S/r.sock"
	"$CCVM" ctl "$S/r.sock" pause >/dev/null
	"$CCVM" ctl "$S/r.sock" snapshot "$S/again.img" --wait >"$S/again.json" 2>&1
	"$CCVM" ctl "$S/r.sock" resume >/dev/null
	touch "$STOP"
	wait $VMPID
	tmo 120 "$CCVM" restore "$S/again.img" </dev/null >"$S/r.out" 2>/dev/null
	ran=$(zcheck "$S/vm.out") && got=$(zcheck "$S/r.out") &&
		pass "snapshot of a restored VM" "the restored run ends with $ran, its own snapshot restores to $got" ||
		fail "snapshot of a restored VM" "$(cat "$S/again.json")" "run: ${ran:-}" "restored: ${got:-}"
}

# 2b. Lazy restore: same result; the restored VM can be snapshotted once its memory is
#     in; a damaged chunk stops the VM with a message.
snap_lazy() {
	tmo 120 "$CCVM" restore "$S/z3.img" --lazy </dev/null >"$S/r.out" 2>"$S/r.err"
	why=$(zcheck "$S/r.out") && pass "lazy restore" "ends with $why" || fail "lazy restore" "$why" "$(head -3 "$S/r.err")"
	rm -f "$STOP"
	"$CCVM" restore "$S/z3.img" --lazy --control "$S/l.sock" >"$S/vm.out" 2>"$S/vm.err" </dev/null &
	VMPID=$!
	wait_until 10 test -S "$S/l.sock"
	"$CCVM" ctl "$S/l.sock" pause >/dev/null
	loaded_snapshot() { # the snapshot is refused while the image still loads
		r=$("$CCVM" ctl "$S/l.sock" snapshot "$S/lazy-again.img" --wait 2>&1) && return 0
		echo "$r" | grep -q 'still loading' || return 0
		return 1
	}
	r=
	wait_until 60 loaded_snapshot
	"$CCVM" ctl "$S/l.sock" resume >/dev/null
	touch "$STOP"
	wait $VMPID
	tmo 120 "$CCVM" restore "$S/lazy-again.img" </dev/null >"$S/r.out" 2>/dev/null
	got=$(zcheck "$S/r.out") && pass "snapshot after lazy restore" "restores to $got" || fail "snapshot after lazy restore" "$r" "$got"
}

# 3. While paused, overlapping requests, events, quit during a snapshot.
snap_control() {
	rm -f "$S/never"
	start_vm "$SOCK" "$G/zipfbench" --size "$(scaled 64 8)M" --stop-file "$S/never" --report-ms 0
	"$CCVM" ctl "$SOCK" pause >/dev/null
	r=$("$CCVM" ctl "$SOCK" snapshot "$S/p.img" --wait)
	"$CCVM" ctl "$SOCK" status | grep -q '"state":"paused"' && [ "$(echo "$r" | field ok)" = true ] &&
		pass "snapshot while paused" "done, VM still paused" || fail "snapshot while paused" "$r"
	"$CCVM" ctl "$SOCK" resume >/dev/null
	r1=$("$CCVM" ctl "$SOCK" snapshot "$S/slow.img" --rate 1)
	r2=$("$CCVM" ctl "$SOCK" snapshot "$S/other.img"); st=$?
	[ "$(echo "$r1" | field state)" = running ] && [ $st = 1 ] && echo "$r2" | grep -q 'still running' &&
		pass "overlapping snapshots" "the second, while one runs: refused ('$(echo "$r2" | field error)')" ||
		fail "overlapping snapshots" "$r1" "$r2"
	"$CCVM" ctl "$SOCK" quit >/dev/null
	if wait_until 10 gone $VMPID; then pass "quit during a snapshot" "ends the VM"
	else fail "quit during a snapshot" "VM still running"; kill -9 $VMPID; fi
	vm_stdin_close
	wait $VMPID 2>/dev/null
	[ ! -e "$S/slow.img" ] && [ -z "$(ls -A "$S" | grep '\.tmp\.')" ] && pass "abandoned snapshot left no file" ||
		fail "abandoned snapshot left no file" "$(ls -A "$S")"
}

# 4. A guest blocked in read() is snapshotted mid-call; restored, it makes the call again.
snap_blocked_read() {
	start_vm "$SOCK" "$G/tests/clockloop.glibc" 1000
	wait_for_line done "$S/vm.out"
	"$CCVM" ctl "$SOCK" snapshot "$S/blocked.img" --wait >/dev/null
	vm_stop
	echo "more input" | tmo 20 "$CCVM" restore "$S/blocked.img" >"$S/rb.out" 2>&1; st=$?
	[ $st = 0 ] && pass "restore of a blocked read" "the restored guest blocked in read() reads again and exits 0" ||
		fail "restore of a blocked read" "status $st" "$(cat "$S/rb.out")"
}

# 5. Damaged images are refused by inspect and restore with a reason.
snap_damaged() {
	"$CCVM" inspect "$S/z1.img" >"$S/insp.out" 2>&1 && grep -q '0 damaged' "$S/insp.out" &&
		pass "inspect of a good image" "every checksum verifies" || fail "inspect of a good image" "$(tail -3 "$S/insp.out")"
	cp "$S/z1.img" "$S/bad.img"
	off=$(python3 - "$S/bad.img" <<-'PY'
	import os, sys
	fd = os.open(sys.argv[1], os.O_RDONLY)
	try:  # data past the first 8 memory chunks, or else any; near the start of its
	    # extent, which a frame fills from its chunk's start (its end may be padding)
	    print(os.lseek(fd, 1048576 + 8 * 2097152, os.SEEK_DATA) + 16)
	except OSError:
	    print(os.lseek(fd, 1048576, os.SEEK_DATA) + 16)
	PY
	)
	flip_byte "$S/bad.img" "$off"
	"$CCVM" inspect "$S/bad.img" >"$S/insp.out" 2>&1; st=$?
	[ $st = 1 ] && grep -q 'DAMAGED: memory chunk' "$S/insp.out" &&
		pass "inspect of a damaged image" "flipped byte found ($(grep -o 'DAMAGED: memory chunk [0-9]*' "$S/insp.out"))" ||
		fail "inspect of a damaged image" "status $st"
	tmo 20 "$CCVM" restore "$S/bad.img" >/dev/null 2>"$S/r.err"; st=$?
	[ $st = 1 ] && grep -q 'fails its checksum' "$S/r.err" && pass "restore of a damaged image" "refused" ||
		fail "restore of a damaged image" "status $st" "$(cat "$S/r.err")"
	tmo 60 "$CCVM" restore "$S/bad.img" --lazy >/dev/null 2>"$S/r.err" </dev/null; st=$?
	[ $st = 1 ] && grep -q 'fails its checksum' "$S/r.err" && pass "lazy restore of a damaged image" "stops at the damaged chunk (status 1)" ||
		fail "lazy restore of a damaged image" "status $st" "$(cat "$S/r.err")"
	cp "$S/z1.img" "$S/trunc.img"; truncate -s -100 "$S/trunc.img"
	for cmd in inspect restore; do
		tmo 20 "$CCVM" $cmd "$S/trunc.img" >/dev/null 2>"$S/r.err" </dev/null; st=$?
		[ $st = 1 ] && grep -q 'truncated' "$S/r.err" && pass "$cmd of a truncated image" "refused" ||
			fail "$cmd of a truncated image" "status $st" "$(cat "$S/r.err")"
	done
	cp "$S/z1.img" "$S/hdr.img"; printf '\x07' | dd of="$S/hdr.img" bs=1 seek=8 conv=notrunc 2>/dev/null
	tmo 20 "$CCVM" restore "$S/hdr.img" >/dev/null 2>"$S/r.err"; st=$?
	[ $st = 1 ] && grep -q 'version 7' "$S/r.err" && pass "wrong version" "another format version refused" ||
		fail "wrong version" "$(cat "$S/r.err")"
	tmo 20 "$CCVM" restore "$G/zipfbench" >/dev/null 2>"$S/r.err"; st=$?
	[ $st = 1 ] && grep -q 'not a ccvm snapshot image' "$S/r.err" && pass "foreign file" "refused" ||
		fail "foreign file" "$(cat "$S/r.err")"
}

# 6. Disk full while writing: the snapshot fails, the guest runs on, the old image stays.
snap_disk_full() {
	if [ "$(id -u)" = 0 ] && mkdir -p "$S/full" && mount -t tmpfs -o size=72m tmpfs "$S/full" 2>/dev/null; then
		ZA=(--size 48M --seed 5)
		rm -f "$STOP"
		start_vm "$SOCK" "$G/zipfbench" "${ZA[@]}" --report-ms 20 --stop-file "$STOP"
		wait_until 60 more_reports 0
		r1=$("$CCVM" ctl "$SOCK" snapshot "$S/full/old.img" --wait)
		r2=$("$CCVM" ctl "$SOCK" snapshot "$S/full/new.img" --wait); st=$?
		r3=$("$CCVM" ctl "$SOCK" snapshot "$S/full/old.img" --wait)
		"$CCVM" ctl "$SOCK" status | grep -q '"state":"running"' && running=1 || running=0
		vm_stop; vst=$?
		if [ "$(echo "$r1" | field ok)" = true ] && [ $st = 1 ] && echo "$r2" | grep -q 'No space left' && [ $running = 1 ]; then
			pass "disk full" "the snapshot fails with '$(echo "$r2" | field error)', guest keeps running"
		else
			fail "disk full" "$r1" "$r2"
		fi
		why=$(zcheck "$S/vm.out" "${ZA[@]}") && [ $vst = 0 ] && pass "guest after disk full" "finished correctly: $why" ||
			fail "guest after disk full" "status $vst" "$why"
		"$CCVM" inspect "$S/full/old.img" >/dev/null 2>&1 && [ -z "$(ls -A "$S/full" | grep -v '^old.img$')" ] && echo "$r3" | grep -q '"ok":false' \
			&& pass "old image after disk full" "intact and verified, no temporary files left" || fail "old image after disk full" "$(ls -A "$S/full")" "$r3"
		umount "$S/full"
	else
		for c in "disk full" "guest after disk full" "old image after disk full"; do
			skip "$c" "needs root to mount a small tmpfs"
		done
	fi
}

# Signals in a snapshot: a handler installed, SIGUSR2 blocked and pending, ITIMER_REAL
# armed; the VM paused once armed (so the alarm cannot come before the snapshot, however
# slow the snapshot), snapshotted and stopped, its image restored: the alarm comes, the
# pending signal is delivered when unblocked, as in an uninterrupted run.
snap_signals() {
	SIGSECS=$((E2E_PATIENCE > 1 ? 10 : 6)) # the pause, not this, keeps the alarm after the snapshot
	native=$("$G/tests/signals.glibc" snapshot "$SIGSECS" | tail -n +2)
	start_vm "$SOCK" "$G/tests/signals.glibc" snapshot "$SIGSECS"
	wait_for_line armed "$S/vm.out"
	"$CCVM" ctl "$SOCK" pause >/dev/null
	"$CCVM" ctl "$SOCK" snapshot "$S/sig.img" --policy cow --wait >"$S/sig.json" 2>&1
	"$CCVM" ctl "$SOCK" quit >/dev/null 2>&1
	vm_stdin_close
	wait $VMPID
	got=$(tmo 120 "$CCVM" restore "$S/sig.img" </dev/null 2>"$S/r.err"); st=$?
	if [ $st = 0 ] && [ "$(field ok <"$S/sig.json")" = true ] && [ "$got" = "$native" ] && [ -n "$native" ] &&
	   ! grep -q "alarm" "$S/vm.out"; then
		pass "signals across a snapshot" "the armed alarm fires, the pending SIGUSR2 arrives on unblock (status 0)"
	else
		fail "signals across a snapshot" "status $st" "got: $got" "want: $native" "$(head -3 "$S/r.err")" "$(cat "$S/sig.json")"
	fi
}

# 1b (children). A shell's subshell (a fork) running at the snapshot, and one taken
#     after it ended (the shell's page tables moved by the fork: mmu/aspace.c): both
#     restore; the first one's subshell finishes its sleep first.
snap_second_process() {
	local r1 r2 rst1 rst2
	start_vm "$SOCK" /bin/sh -c 'echo started; (/bin/sleep 2); echo slept; read x; echo "read $x"'
	wait_for_line started "$S/vm.out"
	sleep 0.5
	r1=$("$CCVM" ctl "$SOCK" snapshot "$S/two.img" --wait 2>&1)
	wait_for_line slept "$S/vm.out"
	r2=$("$CCVM" ctl "$SOCK" snapshot "$S/one.img" --wait 2>&1)
	vm_stdin_close
	wait "$VMPID"
	rst1=$(echo restored | tmo 60 "$CCVM" restore "$S/two.img" 2>"$S/two.err" | tr '\n' ' ')
	rst2=$(echo restored | tmo 60 "$CCVM" restore "$S/one.img" 2>"$S/one.err")
	if [ "$(echo "$r1" | field ok)" = true ] && [ "$(echo "$r2" | field ok)" = true ] &&
		[ "$rst1" = "slept read restored " ] && [ "$rst2" = "read restored" ]; then
		pass "snapshots with a child running and after it ended" "both restore: '$rst1', '$rst2'"
	else
		fail "snapshots with a child running and after it ended" "while: $(echo "$r1" | head -c 200)" \
			"after: $(echo "$r2" | head -c 200)" "restored: '$rst1', '$rst2'" "$(head -2 "$S/two.err" "$S/one.err")"
	fi
	rm -f "$S/one.img" "$S/two.img"
}

# 1c (a tree). A shell running a pipeline of 3 processes (a subshell writing lines
#     slowly, cat, md5sum) beside a background child it waits for: snapshotted while all
#     of them run, the original stopped, restored. The pipeline finishes with the
#     uninterrupted run's output (the bytes in its pipes kept, each process's memory
#     and threads back), and the child is reaped with its status.
snap_pipeline() {
	local r tries=0 want got procs
	cat >"$S/pipeline.sh" <<'SH'
(/bin/sleep 2; exit 3) &
c=$!
i=0; while [ $i -lt 150 ]; do echo "line $i"; i=$((i + 1)); /bin/sleep 0.02; done | /bin/cat | /usr/bin/md5sum
wait $c; echo "child status $?"
SH
	want=$(/bin/sh "$S/pipeline.sh" 2>&1)
	start_vm "$SOCK" /bin/sh "$S/pipeline.sh"
	sleep 1
	# A snapshot is refused while a vfork child has not exec'd yet: tried again.
	while [ $tries -lt 40 ]; do
		r=$("$CCVM" ctl "$SOCK" snapshot "$S/tree.img" --wait 2>&1)
		[ "$(echo "$r" | field ok)" = true ] && break
		tries=$((tries + 1)); sleep 0.05
	done
	kill "$VMPID" 2>/dev/null; vm_stdin_close; wait "$VMPID" 2>/dev/null
	procs=$("$CCVM" inspect "$S/tree.img" 2>/dev/null | grep -c '^process [0-9]* (parent')
	got=$(tmo 120 "$CCVM" restore "$S/tree.img" </dev/null 2>"$S/tree.err")
	if [ "$(echo "$r" | field ok)" = true ] && [ "${procs:-0}" -ge 3 ] && [ "$got" = "$want" ]; then
		pass "snapshot of a shell pipeline restores" "$procs processes besides the shell in the image; the restored pipeline ends as the uninterrupted run: '$(echo "$got" | tr '\n' ' ')'"
	else
		fail "snapshot of a shell pipeline restores" "snapshot: $(echo "$r" | head -c 200)" "processes in the image: $procs" \
			"restored: '$got', uninterrupted: '$want'" "$(grep -v '^ ' "$S/tree.err" | head -3)"
	fi
	rm -f "$S/tree.img"
}

# 1d (shared memory). A parent and its child share a MAP_SHARED anonymous counter and
#     a memfd mapping, the child writing both every 10 ms until $STOP exists, the parent
#     waiting for the child's word that it is done: snapshotted while both run (however
#     slow the machine: they run until told), restored twice (eagerly and with --lazy,
#     which loads all memory first for such an image) with $STOP there. Each restored
#     pair finishes only if the two still share both: a private copy would leave the
#     parent waiting forever; both print the count of the snapshot's instant.
snap_shared() {
	local r got lazy sec n
	rm -f "$STOP"
	start_vm "$SOCK" "$G/tests/shm.glibc" slow 1000000 "$STOP"
	wait_for_line started "$S/vm.out"
	sleep 1
	r=$(tmo 60 "$CCVM" ctl "$SOCK" snapshot "$S/shm.img" --wait 2>&1)
	touch "$STOP"
	kill "$VMPID" 2>/dev/null; vm_stdin_close; wait "$VMPID" 2>/dev/null
	sec=$("$CCVM" inspect "$S/shm.img" 2>/dev/null | grep -o 'shared memory, [0-9]* bytes')
	got=$(tmo 60 "$CCVM" restore "$S/shm.img" </dev/null 2>"$S/shm.err")
	lazy=$(tmo 60 "$CCVM" restore --lazy "$S/shm.img" </dev/null 2>>"$S/shm.err")
	n=$(echo "$got" | sed -n "s/^shared counter \([0-9]*\), memfd 'count \1'\$/\1/p")
	if [ "$(echo "$r" | field ok)" = true ] && [ -n "$sec" ] && [ "${n:-0}" -gt 0 ] &&
		[ "$lazy" = "$got" ]; then
		pass "snapshot of processes sharing memory restores the sharing" "$sec in the image; restored (eager and --lazy): '$got'"
	else
		fail "snapshot of processes sharing memory restores the sharing" "snapshot: $(echo "$r" | head -c 200)" \
			"section: '$sec'" "restored: '$got', lazily '$lazy'" "$(head -3 "$S/shm.err")"
	fi
	rm -f "$S/shm.img" "$STOP"
}

# 1e (a child's own memory). A shell's child fills memory of its own and waits on its
#     stdin: snapshotted with ccow (the child's blocks held read-only and saved after
#     the pause) and with the fork policy (copied in the pause); both images restore,
#     and the child finds its pattern intact. The pauses are figures, never checked.
snap_child_memory() {
	local mib r1 r2 got1 got2 want="pattern intact child status 0"
	mib=$(scaled 128 32)
	start_vm "$SOCK" /bin/sh -c "$G/tests/fillwait.glibc $mib; echo child status \$?"
	wait_for_line filled "$S/vm.out"
	r1=$("$CCVM" ctl "$SOCK" snapshot "$S/held.img" --wait 2>&1)
	r2=$("$CCVM" ctl "$SOCK" snapshot "$S/forked.img" --policy fork --wait 2>&1)
	kill "$VMPID" 2>/dev/null; vm_stdin_close; wait "$VMPID" 2>/dev/null
	got1=$(tmo 120 "$CCVM" restore "$S/held.img" </dev/null 2>"$S/held.err" | grep -v resumed | tr '\n' ' ')
	got2=$(tmo 120 "$CCVM" restore "$S/forked.img" </dev/null 2>>"$S/held.err" | grep -v resumed | tr '\n' ' ')
	if [ "$(echo "$r1" | field ok)" = true ] && [ "$(echo "$r2" | field ok)" = true ] &&
		[ "$got1" = "$want " ] && [ "$got2" = "$want " ]; then
		pass "snapshot of a child owning $mib MiB restores (held after the pause, or copied in it)" \
			"pause $(echo "$r1" | field pause_us) us with ccow, $(echo "$r2" | field pause_us) us with the fork policy"
	else
		fail "snapshot of a child owning $mib MiB restores (held after the pause, or copied in it)" \
			"ccow: $(echo "$r1" | head -c 200)" "fork: $(echo "$r2" | head -c 200)" \
			"restored: '$got1', '$got2'" "$(head -3 "$S/held.err")"
	fi
	rm -f "$S/held.img" "$S/forked.img"
}

snap_live
snap_second_process
snap_pipeline
snap_shared
snap_child_memory
snap_descriptors
snap_blocked_read
snap_damaged
snap_signals
if full_suite; then
	snap_dynamic
	snap_threads
	snap_tracker
	snap_ccow
	snap_pool_cap
	snap_compress
	snap_rounds_compact
	snap_periodic
	snap_restored_again
	snap_lazy
	snap_control
	snap_disk_full
fi
