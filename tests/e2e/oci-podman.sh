# ccvm-oci driven by Debian's podman and conmon, as a user runs it (docs/oci.md):
# podman's own defaults (its seccomp profile, its rlimits, its cgroup) with the flags a
# machine without systemd needs; the root built from busybox-static and a static
# counter program (oci/lib.sh), given to podman with `podman import`. Sourced by
# run.sh (uses its CCVM, WORK, TOP and lib.sh).

echo "== ccvm-oci under podman"
# shellcheck source=tests/e2e/oci/lib.sh
. "$TOP/tests/e2e/oci/lib.sh"

PODMAN_OK=
if ! command -v podman >/dev/null || ! command -v conmon >/dev/null; then
	skip "oci: podman" "podman or conmon is not installed (scripts/install-deps.sh)"
elif ! oci_rootfs_once; then
	fail "oci: the test root" "busybox-static or cc missing"
else
	PODMAN_OK=1
fi
P=(podman --root "$OCI_DIR/storage" --runroot "$OCI_DIR/run" --cgroup-manager cgroupfs
	--events-backend file --storage-driver vfs --runtime "$OCI_BIN")
if [ -n "$PODMAN_OK" ] && ! tar -C "$OCI_DIR/rootfs" -c . | tmo 120 "${P[@]}" import - localhost/ccvm-e2e:1 \
	>"$OCI_DIR/import.out" 2>&1; then
	PODMAN_OK=
	skip "oci: podman" "podman cannot import an image here: $(tail -1 "$OCI_DIR/import.out")"
fi
IMG=localhost/ccvm-e2e:1

if [ -n "$PODMAN_OK" ]; then
	# 1. A program's output and its exit status, through podman's defaults.
	out=$(tmo 120 "${P[@]}" run --rm "$IMG" /bin/echo hello 2>"$OCI_DIR/1.err"); st=$?
	if [ "$st" = 0 ] && [ "$out" = hello ]; then
		pass "oci: podman run echo prints hello"
	else
		fail "oci: podman run echo prints hello" "status $st, output '$out'" "$(tail -3 "$OCI_DIR/1.err")"
	fi
	tmo 120 "${P[@]}" run --rm "$IMG" sh -c 'exit 7' >/dev/null 2>"$OCI_DIR/1b.err"; st=$?
	if [ "$st" = 7 ]; then
		pass "oci: podman run exit status" "7"
	else
		fail "oci: podman run exit status" "status $st, not 7" "$(tail -3 "$OCI_DIR/1b.err")"
	fi

	# The guest's limits are podman's (nofile within the personality's table), though
	# the monitor cannot raise its own: runc and crun fail here.
	out=$(tmo 120 "${P[@]}" run --rm --ulimit nproc=1234:2345 "$IMG" sh -c 'ulimit -u; ulimit -Hu' 2>&1 | tr '\n' ' ')
	if [ "$out" = "1234 2345 " ]; then
		pass "oci: process.rlimits are the guest's"
	else
		fail "oci: process.rlimits are the guest's" "ulimit -u, -Hu gave '$out'"
	fi

	# process.terminal: podman -t hands conmon's console socket to ccvm-oci, which
	# sends it the master of the guest's pseudo-terminal (podman's own side needs a
	# terminal too: script gives it one).
	if command -v script >/dev/null; then
		out=$(tmo 120 script -qec "${P[*]} run --rm -t $IMG sh -c 'test -t 0 && test -t 1 && echo on-a-tty'" \
			/dev/null 2>&1 | tr -d '\r')
		if echo "$out" | grep -q '^on-a-tty$'; then
			pass "oci: podman run -t gives the guest a terminal"
		else
			fail "oci: podman run -t gives the guest a terminal" "$(echo "$out" | tail -3)"
		fi
	fi

	# A seccomp profile that denies mkdir: EPERM in the guest.
	printf '%s' '{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO","errnoRet":1}]}' \
		>"$OCI_DIR/nomkdir.json"
	out=$(tmo 120 "${P[@]}" run --rm --security-opt seccomp="$OCI_DIR/nomkdir.json" "$IMG" \
		sh -c 'mkdir /tmp/d; echo status=$?' 2>&1)
	if echo "$out" | grep -q "status=1" && echo "$out" | grep -q "Operation not permitted"; then
		pass "oci: seccomp profile makes mkdir fail with EPERM"
	else
		fail "oci: seccomp profile makes mkdir fail with EPERM" "$out"
	fi
	out=$(tmo 120 "${P[@]}" run --rm "$IMG" sh -c 'mkdir /tmp/d && echo made' 2>&1)
	if [ "$out" = made ]; then
		pass "oci: podman's default profile lets mkdir through"
	else
		fail "oci: podman's default profile lets mkdir through" "$out"
	fi

	# State through every status, each checked against runtime-spec's schema; the
	# bundle podman wrote against the config schema.
	id=$(tmo 60 "${P[@]}" create --name oci-st "$IMG" counter 2>"$OCI_DIR/st.err")
	tmo 60 "${P[@]}" init oci-st >/dev/null 2>>"$OCI_DIR/st.err"
	bundle=$(tmo 30 "$OCI_BIN" state "$id" 2>/dev/null | json_str bundle)
	bad=
	for want in created running paused; do
		case $want in
		running) tmo 60 "${P[@]}" start oci-st >/dev/null 2>>"$OCI_DIR/st.err" ;;
		paused) tmo 60 "${P[@]}" pause oci-st >/dev/null 2>>"$OCI_DIR/st.err" ;;
		esac
		oci_state_check "$OCI_BIN" "$id" "$want"
	done
	tmo 60 "${P[@]}" unpause oci-st >/dev/null 2>>"$OCI_DIR/st.err"
	# stopped: podman deletes a container as soon as it stops, so that one status is
	# seen on a bundle of ours, driven by ccvm-oci alone
	B=$OCI_DIR/bundle-true
	oci_bundle "$B" '["/bin/sh", "-c", "exit 3"]'
	O=("$OCI_BIN" --root "$OCI_DIR/state")
	tmo 30 "${O[@]}" create --bundle "$B" oci-true 2>>"$OCI_DIR/st.err"
	tmo 30 "${O[@]}" start oci-true 2>>"$OCI_DIR/st.err"
	wait_until 60 sh -c '"$@" state oci-true | grep -q "\"stopped\""' sh "${O[@]}"
	oci_state_check "${O[*]}" oci-true stopped
	tmo 30 "${O[@]}" delete oci-true 2>>"$OCI_DIR/st.err" || bad="$bad delete of a stopped container failed;"
	[ -e "$OCI_DIR/state/oci-true" ] && bad="$bad its record left;"
	if [ -z "$bad" ]; then
		pass "oci: state of every status matches the OCI state schema"
	else
		fail "oci: state of every status matches the OCI state schema" "$bad" "$(tail -3 "$OCI_DIR/st.err")"
	fi
	if [ -n "$bundle" ] && $OCI_SCHEMA config "$bundle/config.json" 2>"$OCI_DIR/cfg.err"; then
		pass "oci: podman's config.json matches the OCI config schema"
	else
		fail "oci: podman's config.json matches the OCI config schema" "bundle '$bundle'" "$(cat "$OCI_DIR/cfg.err")"
	fi
	tmo 60 "${P[@]}" rm -f oci-st >/dev/null 2>&1

	# 2. A detached counter; its log counts.
	tmo 60 "${P[@]}" run -d --name oci-count "$IMG" counter >/dev/null 2>"$OCI_DIR/2.err"
	if wait_until 60 sh -c "\"\$@\" logs oci-count 2>/dev/null | grep -q '^count 20 '" sh "${P[@]}"; then
		"${P[@]}" logs oci-count >"$OCI_DIR/2.log" 2>/dev/null
		if oci_counts_up "$OCI_DIR/2.log" 20; then
			pass "oci: podman run -d counter, podman logs shows it counting"
		else
			fail "oci: podman run -d counter, podman logs shows it counting" "$(head -3 "$OCI_DIR/2.log")"
		fi
	else
		fail "oci: podman run -d counter, podman logs shows it counting" "$(tail -3 "$OCI_DIR/2.err")" \
			"$("${P[@]}" logs oci-count 2>&1 | tail -3)"
	fi
	# exec: a process started in the running VM (conmon runs `ccvm-oci exec --process
	# P --detach --pid-file F` and waits for the process standing for the guest's).
	out=$(tmo 60 "${P[@]}" exec oci-count sh -c 'echo exec-out; echo ppid=$PPID; exit 5' \
		2>"$OCI_DIR/ex.err" | tr '\n' ' ')
	out2=$(echo piped | tmo 60 "${P[@]}" exec -i -w /tmp -e EX=1 oci-count sh -c 'cat; pwd; echo $EX' \
		2>>"$OCI_DIR/ex.err" | tr '\n' ' ')
	# (the status of a pipeline is its last command's: take exec's own)
	tmo 60 "${P[@]}" exec oci-count sh -c 'exit 5' >/dev/null 2>>"$OCI_DIR/ex.err"; st=$?
	if [ "$st" = 5 ] && [ "$out" = "exec-out ppid=0 " ] && [ "$out2" = "piped /tmp 1 " ]; then
		pass "oci: podman exec runs a process in the running VM" "output, exit 5, stdin, -w, -e"
	else
		fail "oci: podman exec runs a process in the running VM" "status $st, '$out', '$out2'" \
			"$(tail -2 "$OCI_DIR/ex.err")"
	fi
	out=$(tmo 60 "${P[@]}" exec -u 1000 oci-count id 2>&1); st=$?
	if [ "$st" != 0 ] && echo "$out" | grep -q "process.user"; then
		pass "oci: exec as another user refused by name"
	else
		fail "oci: exec as another user refused by name" "status $st" "$out"
	fi
	# a process left running in the VM: the checkpoints below take it along
	tmo 60 "${P[@]}" exec -d oci-count sleep 3600 >/dev/null 2>>"$OCI_DIR/ex.err"
	# 3. checkpoint -R: still running, the same process, the count never held up for
	# longer than a pause (the log's longest gap is the figure; the bound only catches
	# a container that stopped).
	pid1=$("${P[@]}" inspect --format '{{.State.Pid}}' oci-count 2>/dev/null)
	n0=$("${P[@]}" logs oci-count 2>/dev/null | grep -c '^count ')
	tmo 120 "${P[@]}" container checkpoint -R oci-count >/dev/null 2>"$OCI_DIR/3.err"; st=$?
	wait_until 60 sh -c "[ \$(\"\$@\" logs oci-count 2>/dev/null | grep -c '^count ') -ge $((n0 + 20)) ]" sh "${P[@]}"
	pid2=$("${P[@]}" inspect --format '{{.State.Pid}}' oci-count 2>/dev/null)
	state=$("${P[@]}" inspect --format '{{.State.Status}}' oci-count 2>/dev/null)
	"${P[@]}" logs oci-count >"$OCI_DIR/3.log" 2>/dev/null
	gap=$(awk '$1 == "count" { if (t && $3 - t > g) g = $3 - t; t = $3 } END { print g + 0 }' "$OCI_DIR/3.log")
	if [ "$st" = 0 ] && [ "$state" = running ] && [ -n "$pid1" ] && [ "$pid1" = "$pid2" ] &&
		oci_counts_up "$OCI_DIR/3.log" "$((n0 + 20))" && [ "$gap" -lt $(($(bound 5) * 1000)) ]; then
		pass "oci: checkpoint -R leaves it running, same pid, counting" "longest gap ${gap} ms (period 100)"
	else
		fail "oci: checkpoint -R leaves it running, same pid, counting" \
			"status $st, state $state, pid $pid1 then $pid2, longest gap $gap ms" "$(tail -2 "$OCI_DIR/3.err")"
	fi
	# 4. checkpoint (it stops), then restore: the count goes on from where it stopped,
	# nothing counted twice.
	tmo 120 "${P[@]}" container checkpoint oci-count >/dev/null 2>"$OCI_DIR/4.err"; st=$?
	state=$("${P[@]}" inspect --format '{{.State.Status}}' oci-count 2>/dev/null)
	n1=$("${P[@]}" logs oci-count 2>/dev/null | grep -c '^count ')
	tmo 120 "${P[@]}" container restore oci-count >/dev/null 2>>"$OCI_DIR/4.err"; st2=$?
	wait_until 60 sh -c "[ \$(\"\$@\" logs oci-count 2>/dev/null | grep -c '^count ') -ge $((n1 + 20)) ]" sh "${P[@]}"
	"${P[@]}" logs oci-count >"$OCI_DIR/4.log" 2>/dev/null
	out=$(tmo 60 "${P[@]}" exec oci-count echo after-restore 2>>"$OCI_DIR/4.err")
	if [ "$st" = 0 ] && [ "$st2" = 0 ] && [ "$state" = exited ] && [ "$out" = after-restore ] &&
		oci_counts_up "$OCI_DIR/4.log" "$((n1 + 20))"; then
		pass "oci: checkpoint then restore, the counter continues" "$n1 counted before, on from there"
	else
		fail "oci: checkpoint then restore, the counter continues" "status $st then $st2, state after checkpoint $state, exec '$out'" \
			"$(grep -v '^count ' "$OCI_DIR/4.log" | tail -2)" "$(tail -2 "$OCI_DIR/4.err")"
	fi
	# 5. exported, removed, imported under another name: it resumes.
	tmo 120 "${P[@]}" container checkpoint -e "$OCI_DIR/c.tar.gz" oci-count >/dev/null 2>"$OCI_DIR/5.err"; st=$?
	n2=$("${P[@]}" logs oci-count 2>/dev/null | grep -c '^count ')
	tmo 60 "${P[@]}" rm -f oci-count >/dev/null 2>&1
	tmo 120 "${P[@]}" container restore -i "$OCI_DIR/c.tar.gz" --name oci-d >/dev/null 2>>"$OCI_DIR/5.err"; st2=$?
	wait_until 60 sh -c "[ \$(\"\$@\" logs oci-d 2>/dev/null | grep -c '^count ') -ge $((n2 + 20)) ]" sh "${P[@]}"
	"${P[@]}" logs oci-d >"$OCI_DIR/5.log" 2>/dev/null
	if [ "$st" = 0 ] && [ "$st2" = 0 ] && oci_counts_up "$OCI_DIR/5.log" "$((n2 + 20))"; then
		pass "oci: checkpoint -e, rm, restore -i --name: it resumes" "$n2 counted before"
	else
		fail "oci: checkpoint -e, rm, restore -i --name: it resumes" "status $st then $st2" \
			"$(tail -2 "$OCI_DIR/5.err")" "$(tail -2 "$OCI_DIR/5.log")"
	fi
	tmo 60 "${P[@]}" rename oci-d oci-count >/dev/null 2>&1
	# 6. stop -t 2 and rm: nothing of ccvm's is left.
	cid=$("${P[@]}" inspect --format '{{.Id}}' oci-count 2>/dev/null)
	tmo 60 "${P[@]}" stop -t 2 oci-count >/dev/null 2>&1
	tmo 60 "${P[@]}" rm oci-count >/dev/null 2>&1
	left=$(oci_left "$cid")
	if [ -n "$cid" ] && [ -z "$left" ]; then
		pass "oci: stop -t 2 and rm leave no process, socket or record"
	else
		fail "oci: stop -t 2 and rm leave no process, socket or record" "id '$cid':$left"
	fi

	# Refusals name the field, exit nonzero, and leave nothing behind.
	for c in "linux.devices|--device /dev/kvm" "linux.uidMappings|--uidmap 0:100000:65536"; do
		field=${c%%|*}
		# shellcheck disable=SC2086
		out=$(tmo 60 "${P[@]}" run --name oci-refused ${c#*|} "$IMG" true 2>&1); st=$?
		cid=$("${P[@]}" inspect --format '{{.Id}}' oci-refused 2>/dev/null)
		left=$([ -n "$cid" ] && oci_left "$cid")
		if [ "$st" != 0 ] && echo "$out" | grep -q "$field" && [ -z "$left" ]; then
			pass "oci: $field refused by name, nothing left"
		else
			fail "oci: $field refused by name, nothing left" "status $st:$left" "$(echo "$out" | tail -2)"
		fi
		tmo 60 "${P[@]}" rm -f oci-refused >/dev/null 2>&1
	done
	# 8. Redis in a container, reached from the host through podman's -p; a live
	# checkpoint under a YCSB-A-like load (half checked reads): no wrong answer, no
	# request lost.
	RP=$((20000 + RANDOM % 20000))
	if [ -n "$OCI_NESTED" ]; then
		skip "oci: Redis in a container, checkpoint -R under load, no wrong answer" \
			"nested under TCG, podman's containers have no network (oci/lib.sh)"
	elif ! command -v redis-server >/dev/null; then
		skip "oci: Redis under checkpoint -R" "redis-server is not installed"
	elif ! oci_redis_rootfs "$OCI_DIR/redisfs" ||
		! tar -C "$OCI_DIR/redisfs" -c . | tmo 120 "${P[@]}" import - localhost/ccvm-e2e-redis:1 >/dev/null 2>&1; then
		fail "oci: Redis under checkpoint -R" "cannot build or import the Redis root"
	else
		tmo 60 "${P[@]}" run -d --name oci-redis -p "127.0.0.1:$RP:6379" localhost/ccvm-e2e-redis:1 \
			/bin/redis-server --save "" --appendonly no --protected-mode no --bind 0.0.0.0 \
			>/dev/null 2>"$OCI_DIR/8.err"
		wait_until 60 sh -c "redis-cli -p $RP ping 2>/dev/null | grep -q PONG"
		rm -f "$OCI_DIR/8.stop"
		/usr/bin/python3 "$TOP/tests/e2e/redis_load.py" survive "$RP" "$(bound 120)" oci "$OCI_DIR/8.stop" \
			>"$OCI_DIR/8.load" 2>&1 &
		lp=$!
		wait_until 30 sh -c "redis-cli -p $RP get oci:last 2>/dev/null | grep -q '[0-9]'"
		tmo 120 "${P[@]}" container checkpoint -R oci-redis >/dev/null 2>>"$OCI_DIR/8.err"; st=$?
		sleep 1 # (the load runs on after the checkpoint: requests then are checked too)
		touch "$OCI_DIR/8.stop"
		wait "$lp"
		res=$(tail -1 "$OCI_DIR/8.load")
		wrong=$(echo "$res" | json_num wrong) reads=$(echo "$res" | json_num reads)
		acked=$(echo "$res" | json_num acked)
		if [ "$st" = 0 ] && [ "${wrong:-1}" = 0 ] && [ "${reads:-0}" -gt 0 ] && [ "${acked:-0}" -gt 0 ] &&
			[ "$("${P[@]}" inspect --format '{{.State.Status}}' oci-redis 2>/dev/null)" = running ]; then
			pass "oci: Redis in a container, checkpoint -R under load, no wrong answer" \
				"$acked writes, $reads reads checked"
		else
			fail "oci: Redis in a container, checkpoint -R under load, no wrong answer" \
				"checkpoint status $st, load: $res" "$(tail -2 "$OCI_DIR/8.err")"
		fi
		tmo 60 "${P[@]}" rm -f oci-redis >/dev/null 2>&1
	fi
	"${P[@]}" rm -af >/dev/null 2>&1
fi

# An unknown mount type in a bundle of our own (podman makes none), straight to
# ccvm-oci: refused before anything exists, with or without /dev/kvm.
if [ -n "$PODMAN_OK" ]; then
	B=$OCI_DIR/bundle-nfs
	mkdir -p "$B"
	/usr/bin/python3 - "$B" "$OCI_DIR/rootfs" <<'PY'
import json, sys
b, root = sys.argv[1], sys.argv[2]
cfg = {"ociVersion": "1.0.2", "root": {"path": root},
       "process": {"args": ["/bin/true"], "cwd": "/", "user": {"uid": 0, "gid": 0}},
       "mounts": [{"destination": "/mnt", "type": "nfs", "source": "server:/export"}]}
json.dump(cfg, open(b + "/config.json", "w"))
PY
	out=$(tmo 30 "$OCI_BIN" --root "$OCI_DIR/state" create --bundle "$B" oci-nfs 2>&1); st=$?
	if [ "$st" = 1 ] && echo "$out" | grep -q "mounts\[0\] (/mnt)" && [ ! -e "$OCI_DIR/state/oci-nfs" ]; then
		pass "oci: an unknown mount type refused by name, nothing left"
	else
		fail "oci: an unknown mount type refused by name, nothing left" "status $st: $out"
	fi
fi

# The monitor killed with SIGKILL while a checkpoint is being written: the previous
# checkpoint is still whole, the record still reads (stopped), delete --force cleans up.
if [ -n "$PODMAN_OK" ]; then
	B=$OCI_DIR/bundle-big
	# written at 20 MB/s (the io.ccvm.snapshot-rate annotation): seconds to catch it in
	oci_bundle "$B" "[\"/bin/counter\", \"100\", \"$(scaled 128 32)\"]" '{"io.ccvm.snapshot-rate": "20"}'
	O=("$OCI_BIN" --root "$OCI_DIR/state")
	K=$OCI_DIR/ckpt-kill
	bad=
	# (the container's output is create's: it counts once its memory is filled)
	tmo 30 "${O[@]}" create --bundle "$B" oci-kill >"$OCI_DIR/k.out" 2>"$OCI_DIR/k.err" &&
		tmo 30 "${O[@]}" start oci-kill 2>>"$OCI_DIR/k.err" || bad="$bad create or start failed;"
	wait_until 120 has_line "^count 1 " "$OCI_DIR/k.out" || bad="$bad it never counted;"
	tmo 300 "${O[@]}" checkpoint --leave-running --image-path "$K" oci-kill 2>>"$OCI_DIR/k.err" ||
		bad="$bad the first checkpoint failed;"
	sum1=$(md5sum <"$K/ccvm.img" 2>/dev/null)
	pid=$(json_num pid <"$OCI_DIR/state/oci-kill/state.json")
	tmo 300 "${O[@]}" checkpoint --leave-running --image-path "$K" oci-kill >/dev/null 2>&1 &
	ck=$!
	# (the monitor writes under a temporary name, renamed when the image is whole)
	wait_until 60 sh -c 'ls "$1"/.checkpoint.img.tmp.* >/dev/null 2>&1' sh "$OCI_DIR/state/oci-kill" ||
		bad="$bad the second never began;"
	kill -9 "$pid" 2>/dev/null
	wait "$ck"; st=$?
	sum2=$(md5sum <"$K/ccvm.img" 2>/dev/null)
	status=$("${O[@]}" state oci-kill 2>/dev/null | json_str status)
	[ "$st" != 0 ] || bad="$bad the killed checkpoint said it succeeded;"
	[ -n "$sum1" ] && [ "$sum1" = "$sum2" ] || bad="$bad the previous image changed;"
	[ "$status" = stopped ] || bad="$bad state says '$status';"
	tmo 30 "${O[@]}" delete --force oci-kill 2>>"$OCI_DIR/k.err" || bad="$bad delete --force failed;"
	[ -e "$OCI_DIR/state/oci-kill" ] && bad="$bad its record left;"
	if [ -z "$bad" ]; then
		pass "oci: kill -9 mid-checkpoint keeps the previous checkpoint, delete --force cleans up"
	else
		fail "oci: kill -9 mid-checkpoint keeps the previous checkpoint, delete --force cleans up" "$bad" \
			"$(tail -2 "$OCI_DIR/k.err")"
	fi
fi

# Incremental checkpoints as podman's pre-checkpoint asks them (`checkpoint --pre-dump`,
# then `checkpoint --parent-path ../pre`), straight to ccvm-oci: podman itself refuses
# -P here, its CRIU check of memory tracking failing on this kernel. The second
# snapshot holds only what was written since the first; the checkpoint restores alone,
# under another name, and counts on from where it stopped.
if [ -n "$PODMAN_OK" ]; then
	B=$OCI_DIR/bundle-inc
	oci_bundle "$B" "[\"/bin/counter\", \"100\", \"$(scaled 64 16)\"]"
	O=("$OCI_BIN" --root "$OCI_DIR/state")
	I=$OCI_DIR/inc
	bad=
	mkdir -p "$I"
	tmo 30 "${O[@]}" create --bundle "$B" oci-inc >"$OCI_DIR/inc.out" 2>"$OCI_DIR/inc.err" &&
		tmo 30 "${O[@]}" start oci-inc 2>>"$OCI_DIR/inc.err" || bad="$bad create or start failed;"
	wait_until 120 has_line "^count 3 " "$OCI_DIR/inc.out" || bad="$bad it never counted;"
	tmo 300 "${O[@]}" checkpoint --pre-dump --image-path "$I/pre" --work-path "$I" oci-inc \
		2>>"$OCI_DIR/inc.err" || bad="$bad the pre-dump failed;"
	n=$(grep -c '^count ' "$OCI_DIR/inc.out")
	wait_until 60 sh -c "[ \$(grep -c '^count ' '$OCI_DIR/inc.out') -ge $((n + 5)) ]"
	tmo 300 "${O[@]}" checkpoint --image-path "$I/ck" --parent-path ../pre --work-path "$I" oci-inc \
		2>>"$OCI_DIR/inc.err" || bad="$bad the checkpoint on it failed;"
	n1=$(grep -c '^count ' "$OCI_DIR/inc.out")
	figs=$(/usr/bin/python3 - "$I/pre/ccvm-oci.json" "$I/ck/ccvm-oci.json" <<'PY' 2>&1
import json, sys
pre, ck = (json.load(open(p)) for p in sys.argv[1:3])
print(pre["incremental"], ck["incremental"], ck["snapshot"]["incremental"],
      pre["snapshot"]["bytes"], ck["snapshot"]["bytes"])
PY
)
	read -r pre_inc ck_inc snap_inc b_pre b_ck <<<"$figs"
	[ "$pre_inc $ck_inc $snap_inc" = "False True True" ] || bad="$bad records say '$figs';"
	[ "${b_ck:-0}" -gt 0 ] && [ "${b_ck:-0}" -lt "$((${b_pre:-0} / 4))" ] ||
		bad="$bad the incremental snapshot wrote $b_ck bytes, the full one $b_pre;"
	[ "$("${O[@]}" state oci-inc 2>/dev/null | json_str status)" = stopped ] ||
		bad="$bad it still runs after the checkpoint;"
	tmo 30 "${O[@]}" delete --force oci-inc 2>>"$OCI_DIR/inc.err"
	tmo 60 "${O[@]}" restore --image-path "$I/ck" --bundle "$B" --detach oci-inc2 \
		>"$OCI_DIR/inc2.out" 2>>"$OCI_DIR/inc.err" || bad="$bad the restore failed;"
	wait_until 60 has_line "^count $((n1 + 5)) " "$OCI_DIR/inc2.out" || bad="$bad the restored one never counted on;"
	head -1 "$OCI_DIR/inc2.out" | grep -q "^count $n1 " || bad="$bad it restarted at '$(head -1 "$OCI_DIR/inc2.out")', not $n1;"
	tmo 30 "${O[@]}" delete --force oci-inc2 2>>"$OCI_DIR/inc.err"
	[ -e "$OCI_DIR/state/oci-inc" ] || [ -e "$OCI_DIR/state/oci-inc2" ] && bad="$bad a record left;"
	if [ -z "$bad" ]; then
		pass "oci: pre-dump, then an incremental checkpoint on it, restored under another name" \
			"$b_ck bytes written against $b_pre"
	else
		fail "oci: pre-dump, then an incremental checkpoint on it, restored under another name" "$bad" \
			"$(tail -2 "$OCI_DIR/inc.err")"
	fi
fi
