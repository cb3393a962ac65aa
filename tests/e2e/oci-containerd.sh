# ccvm-oci driven by Debian's containerd through its runc shim (io.containerd.runc.v2
# with ccvm-oci as the runc binary, docs/oci.md), with ctr as the client: a daemon of
# the suite's own (its root, state and socket under WORK). Sourced by run.sh (uses its
# CCVM, WORK, TOP and lib.sh).

echo "== ccvm-oci under containerd"
# shellcheck source=tests/e2e/oci/lib.sh
. "$TOP/tests/e2e/oci/lib.sh"
CTD=$OCI_DIR/containerd
CTD_OK=
CTD_PID=
if ! command -v containerd >/dev/null || ! command -v ctr >/dev/null; then
	skip "oci: containerd" "containerd or ctr is not installed (scripts/install-deps.sh)"
elif ! oci_rootfs_once; then
	fail "oci: the test root" "busybox-static or cc missing"
else
	mkdir -p "$CTD"
	cat >"$CTD/config.toml" <<EOF
version = 2
root = "$CTD/root"
state = "$CTD/state"
[grpc]
  address = "$CTD/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
EOF
	containerd --config "$CTD/config.toml" >"$CTD/daemon.log" 2>&1 &
	CTD_PID=$!
	if wait_until 60 ctr --address "$CTD/containerd.sock" version >/dev/null 2>&1; then
		CTD_OK=1
	else
		skip "oci: containerd" "the daemon did not start: $(tail -1 "$CTD/daemon.log")"
	fi
fi
C=(ctr --address "$CTD/containerd.sock")
R=(--runtime io.containerd.runc.v2 --runc-binary "$OCI_BIN" --rootfs "$OCI_DIR/rootfs")
CTD_ROOT=/run/containerd/runc/default # the shim's --root for the default namespace

if [ -n "$CTD_OK" ]; then
	out=$(tmo 120 "${C[@]}" run --rm "${R[@]}" ctd-echo /bin/echo hello 2>"$CTD/1.err"); st=$?
	if [ "$st" = 0 ] && [ "$out" = hello ]; then
		pass "oci: ctr run echo prints hello"
	else
		fail "oci: ctr run echo prints hello" "status $st, output '$out'" "$(tail -2 "$CTD/1.err")"
	fi
	tmo 120 "${C[@]}" run --rm "${R[@]}" ctd-exit /bin/sh -c 'exit 7' >/dev/null 2>"$CTD/1b.err"; st=$?
	if [ "$st" = 7 ]; then
		pass "oci: ctr run exit status" "7"
	else
		fail "oci: ctr run exit status" "status $st, not 7" "$(tail -2 "$CTD/1b.err")"
	fi

	# A detached counter (its output is the shim's, into a log file we name), then
	# ctr task checkpoint: containerd pauses the task, has ccvm-oci checkpoint it with
	# --leave-running and resumes it; the checkpoint is an image in its content store.
	tmo 60 "${C[@]}" run -d --log-uri "file://$CTD/count.log" "${R[@]}" ctd-count /bin/counter \
		>/dev/null 2>"$CTD/2.err"
	if wait_until 60 has_line "^count 10 " "$CTD/count.log"; then
		pass "oci: ctr run -d counter counts"
	else
		fail "oci: ctr run -d counter counts" "$(tail -2 "$CTD/2.err")" "$(tail -2 "$CTD/count.log")"
	fi
	pid1=$("${C[@]}" task ls 2>/dev/null | awk '$1 == "ctd-count" { print $2 }')
	n0=$(grep -c '^count ' "$CTD/count.log")
	tmo 300 "${C[@]}" task checkpoint ctd-count >"$CTD/3.out" 2>"$CTD/3.err"; st=$?
	wait_until 60 sh -c "[ \$(grep -c '^count ' '$CTD/count.log') -ge $((n0 + 20)) ]"
	pid2=$("${C[@]}" task ls 2>/dev/null | awk '$1 == "ctd-count" { print $2, $3 }')
	ref=$("${C[@]}" image ls -q 2>/dev/null | grep '^containerd.io/checkpoint/ctd-count')
	if [ "$st" = 0 ] && [ "$pid2" = "$pid1 RUNNING" ] && [ -n "$ref" ] && oci_counts_up "$CTD/count.log" "$((n0 + 20))"; then
		pass "oci: ctr task checkpoint, the task runs on, an image holds it"
	else
		fail "oci: ctr task checkpoint, the task runs on, an image holds it" \
			"status $st, task '$pid1' then '$pid2', image '$ref'" "$(tail -2 "$CTD/3.err")"
	fi
	# pause and resume through the shim; then kill and delete leave nothing of ccvm's
	tmo 60 "${C[@]}" task pause ctd-count 2>"$CTD/4.err"
	s1=$("${C[@]}" task ls 2>/dev/null | awk '$1 == "ctd-count" { print $3 }')
	tmo 60 "${C[@]}" task resume ctd-count 2>>"$CTD/4.err"
	s2=$("${C[@]}" task ls 2>/dev/null | awk '$1 == "ctd-count" { print $3 }')
	if [ "$s1" = PAUSED ] && [ "$s2" = RUNNING ]; then
		pass "oci: ctr task pause and resume"
	else
		fail "oci: ctr task pause and resume" "'$s1' then '$s2'" "$(tail -2 "$CTD/4.err")"
	fi
	# ctr task exec: the shim runs `ccvm-oci exec --process P --detach --pid-file F`
	# and waits for the process standing for the guest's; its output and status.
	out=$(tmo 60 "${C[@]}" task exec --exec-id e1 ctd-count sh -c 'echo exec-out; exit 4' \
		2>"$CTD/5.err"); st=$?
	if [ "$st" = 4 ] && [ "$out" = exec-out ]; then
		pass "oci: ctr task exec runs a process in the container" "exit 4"
	else
		fail "oci: ctr task exec runs a process in the container" "status $st, output '$out'" \
			"$(tail -2 "$CTD/5.err")"
	fi
	tmo 60 "${C[@]}" task kill -s KILL ctd-count >/dev/null 2>&1
	wait_until 60 sh -c '! "$@" task ls 2>/dev/null | grep -q "^ctd-count .*RUNNING"' sh "${C[@]}"
	tmo 60 "${C[@]}" task rm ctd-count >/dev/null 2>&1
	tmo 60 "${C[@]}" container rm ctd-count >/dev/null 2>&1
	left=
	[ -e "$CTD_ROOT/ctd-count" ] && left="$left record;"
	pgrep -f "ccvm run .*$CTD_ROOT/ctd-count/" >/dev/null && left="$left a monitor;"
	if [ -z "$left" ]; then
		pass "oci: ctr task kill and rm leave nothing"
	else
		fail "oci: ctr task kill and rm leave nothing" "$left"
	fi
	[ -n "$ref" ] && "${C[@]}" image rm "$ref" >/dev/null 2>&1

	# A whole container checkpointed into an image (ctr container checkpoint --task,
	# with its image and rw layer), removed, and restored live from it: containerd
	# calls ccvm-oci restore. The test root becomes an image of containerd's own
	# (podman import, then an OCI archive), unpacked by the native snapshotter (copies:
	# nested under TCG the kernel has no overlay module loaded).
	CN=(env CONTAINERD_SNAPSHOTTER=native "${C[@]}")
	PD=(podman --root "$CTD/pstore" --runroot "$CTD/prun" --storage-driver vfs)
	if tar -C "$OCI_DIR/rootfs" -c . | tmo 120 "${PD[@]}" import - localhost/ccvm-e2e-ctd:1 >/dev/null 2>&1 &&
		tmo 120 "${PD[@]}" save --format oci-archive -o "$CTD/img.tar" localhost/ccvm-e2e-ctd:1 >/dev/null 2>&1 &&
		tmo 120 "${CN[@]}" image import --all-platforms "$CTD/img.tar" >/dev/null 2>&1; then
		tmo 60 "${CN[@]}" run -d --runtime io.containerd.runc.v2 --runc-binary "$OCI_BIN" \
			localhost/ccvm-e2e-ctd:1 ctd-img /bin/counter >/dev/null 2>"$CTD/5.err"
		tmo 300 "${CN[@]}" container checkpoint --task --image --rw ctd-img localhost/ccvm-e2e-ckpt:1 \
			>/dev/null 2>>"$CTD/5.err"; st=$?
		tmo 60 "${C[@]}" task kill -s KILL ctd-img >/dev/null 2>&1
		wait_until 60 sh -c '! "$@" task ls 2>/dev/null | grep -q "^ctd-img .*RUNNING"' sh "${C[@]}"
		tmo 60 "${C[@]}" task rm ctd-img >/dev/null 2>&1
		tmo 60 "${C[@]}" container rm ctd-img >/dev/null 2>&1
		tmo 300 "${CN[@]}" container restore --live --rw ctd-img localhost/ccvm-e2e-ckpt:1 >/dev/null 2>>"$CTD/5.err"; st2=$?
		s=$("${C[@]}" task ls 2>/dev/null | awk '$1 == "ctd-img" { print $3 }')
		pid=$(tmo 30 "$OCI_BIN" --root "$CTD_ROOT" state ctd-img 2>/dev/null | json_num pid)
		if [ "$st" = 0 ] && [ "$st2" = 0 ] && [ "$s" = RUNNING ] && [ -n "$pid" ] &&
			pgrep -f "ccvm restore /proc/self/fd/" | grep -qx "$pid"; then
			pass "oci: ctr container checkpoint, rm, restore --live: it runs again" "as ccvm restore, pid $pid"
		else
			fail "oci: ctr container checkpoint, rm, restore --live: it runs again" \
				"status $st then $st2, task '$s', pid '$pid'" "$(grep -v 'trying next host' "$CTD/5.err" | head -3)"
		fi
		tmo 60 "${C[@]}" task kill -s KILL ctd-img >/dev/null 2>&1
		wait_until 60 sh -c '! "$@" task ls 2>/dev/null | grep -q "^ctd-img .*RUNNING"' sh "${C[@]}"
		tmo 60 "${C[@]}" task rm ctd-img >/dev/null 2>&1
		tmo 60 "${C[@]}" container rm ctd-img >/dev/null 2>&1
		"${C[@]}" image rm localhost/ccvm-e2e-ckpt:1 localhost/ccvm-e2e-ctd:1 >/dev/null 2>&1
	else
		fail "oci: ctr container checkpoint, rm, restore --live: it runs again" \
			"cannot make the test root an image of containerd's"
	fi
	"${PD[@]}" rm -af >/dev/null 2>&1
fi
if [ -n "$CTD_PID" ]; then
	kill "$CTD_PID" 2>/dev/null
	wait "$CTD_PID" 2>/dev/null
fi
