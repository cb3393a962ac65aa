# Isolation end-to-end tests (issue 12); sourced by run.sh (uses its CCVM, G, WORK
# and lib.sh). What a guest can reach on the host, what a restore gives it back, and
# what a kill -9 in the middle of a snapshot leaves behind.

echo "== isolation"
I=$WORK/iso
mkdir -p "$I/rw" "$I/out" "$I/elsewhere" "$I/w"

# 1. ccvm's own control socket, even where it lies under --rw (the default rw is the
#    working directory): the guest could otherwise snapshot over any file or quit.
CS=$I/rw/ctl.sock
(cd "$I/rw" && tmo 30 "$CCVM" run --control "$CS" -- "$G/tests/net.glibc" unix-connect "$CS" \
	>"$I/ctl.out" 2>"$I/ctl.err" </dev/null)
grep -q "unix connect *-1 Permission denied" "$I/ctl.out" && grep -q "own control socket" "$I/ctl.err" \
	&& pass "guest connect to the control socket" "refused: '$(grep -o "guest connection.*" "$I/ctl.err" | head -1)'" \
	|| fail "guest connect to the control socket" "$(cat "$I/ctl.out")" "$(head -2 "$I/ctl.err")"

# 1b. Another VM's control socket in this guest's --rw (issue 54, finding 2): the guest
#    asks VM B for a snapshot of B's memory into a file it could read. Refused: B
#    runs on and no image appears. The guest's own sockets still connect (net's AF_UNIX
#    test, further down, connects to one it made).
mkdir -p "$I/vms"
mkfifo "$I/b.in"
(cd "$I/vms" && exec "$CCVM" run --control "$I/vms/b.sock" -- "$G/tests/fdkeep.glibc" <"$I/b.in" \
	>"$I/b.out" 2>"$I/b.err") &
BPID=$!
exec 7>"$I/b.in"
wait_until 10 test -S "$I/vms/b.sock"
(cd "$I/rw" && tmo 30 "$CCVM" run --rw "$I/vms" -- "$G/tests/net.glibc" unix-say "$I/vms/b.sock" \
	"{\"cmd\":\"snapshot\",\"args\":[\"$I/vms/b.img\"],\"wait\":true}" >"$I/a.out" 2>"$I/a.err" </dev/null)
sleep 1
kill -0 "$BPID" 2>/dev/null; bst=$?
exec 7>&-
wait "$BPID" 2>/dev/null
grep -q "unix connect *-1 Connection refused" "$I/a.out" && grep -q "another ccvm" "$I/a.err" &&
	[ "$bst" = 0 ] && [ ! -e "$I/vms/b.img" ] \
	&& pass "guest connect to another VM's control socket in its --rw" "refused, B ran on, no image: '$(grep -o "guest connection.*" "$I/a.err" | head -1 | cut -c1-90)'" \
	|| fail "guest connect to another VM's control socket in its --rw" "$(cat "$I/a.out")" "$(head -2 "$I/a.err")" \
		"B running: $([ "$bst" = 0 ] && echo yes || echo no)" "image: $(ls "$I/vms")"

# 2. A host Unix socket outside --rw: refused, unless --allow-unix names it.
#    The host listener lives until killed (a fixed lifetime ran out under ASan, nested).
host_listener() { # PORT|PATH: accept and close on 127.0.0.1:PORT or a Unix socket PATH
	exec python3 - "$1" "$E2E_PATIENCE" <<'PY' # run with &: $! is python itself
import os, socket, sys
tcp = sys.argv[1].isdigit()
s = socket.socket() if tcp else socket.socket(socket.AF_UNIX)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])) if tcp else sys.argv[1])
s.listen(8)
s.settimeout(30 * int(sys.argv[2]))
try:
    while True:
        s.accept()[0].close()
except OSError:
    pass
if not tcp:
    os.unlink(sys.argv[1])
PY
}
host_listener "$I/out/host.sock" &
LPID=$!
wait_until 10 test -S "$I/out/host.sock"
(cd "$I/rw" && tmo 30 "$CCVM" run -- "$G/tests/net.glibc" unix-connect "$I/out/host.sock" \
	>"$I/unix.out" 2>"$I/unix.err" </dev/null)
(cd "$I/rw" && tmo 30 "$CCVM" run --allow-unix "$I/out/host.sock" -- "$G/tests/net.glibc" \
	unix-connect "$I/out/host.sock" >"$I/unix-allowed.out" 2>&1 </dev/null)
kill $LPID 2>/dev/null; wait $LPID 2>/dev/null
grep -q "unix connect *-1 Permission denied" "$I/unix.out" && grep -q "outside the --rw directories" "$I/unix.err" \
	&& grep -q "unix connect *0" "$I/unix-allowed.out" \
	&& pass "Unix socket outside --rw" "refused, reached with --allow-unix" \
	|| fail "Unix socket outside --rw" "$(cat "$I/unix.out")" "$(head -2 "$I/unix.err")" "$(cat "$I/unix-allowed.out")"

# 2b. A guest's Unix socket file gets the guest's umask (issue 54, finding 6), as on
#     Linux: umask 027 gives 0750, so other local users cannot reach the guest's socket.
(cd "$I/rw" && umask 027 && tmo 60 "$CCVM" run -- "$G/tests/net.glibc" unix-listen "$I/rw/um.sock" \
	>/dev/null 2>"$I/um.err" </dev/null) &
UMPID=$!
sock_there() { [ -S "$I/rw/um.sock" ]; }
wait_until 30 sock_there && um=$(stat -c %a "$I/rw/um.sock" 2>/dev/null) || um=none
wait $UMPID 2>/dev/null
[ "$um" = 750 ] && pass "guest Unix socket mode" "umask 027: mode $um" \
	|| fail "guest Unix socket mode" "mode '$um' (want 750)" "$(head -2 "$I/um.err")"

# 3. A host service on a loopback port: refused, unless --allow-port or --net host.
Q=$((20000 + RANDOM % 20000))
host_listener "$Q" &
QPID=$!
wait_until 10 eval '(exec 8<>"/dev/tcp/127.0.0.1/$Q") 2>/dev/null'
for how in "" "--allow-port $Q" "--net host"; do
	# shellcheck disable=SC2086
	tmo 30 "$CCVM" run $how -- "$G/tests/net.glibc" connect 127.0.0.1 "$Q" \
		>"$I/port.out" 2>"$I/port.err" </dev/null
	if [ -z "$how" ]; then
		grep -q "connect *-1 Permission denied" "$I/port.out" && grep -q "not a port of its own" "$I/port.err" \
			&& pass "loopback port not allowed" "port $Q of a host service refused: '$(grep -o "guest connection.*" "$I/port.err" | head -1)'" \
			|| fail "loopback port not allowed" "$(cat "$I/port.out")" "$(head -2 "$I/port.err")"
	else
		grep -q "connect *0" "$I/port.out" && pass "loopback port with ${how% [0-9]*}" "port $Q reached with $how" \
			|| fail "loopback port with ${how% [0-9]*}" "$(cat "$I/port.out")" "$(head -2 "$I/port.err")"
	fi
done
kill $QPID 2>/dev/null; wait $QPID 2>/dev/null

# 4. A VM run with --rw W and --net host, snapshotted, and restored from another
#    directory without them: the restored guest can neither write W nor leave loopback.
#    The guest goes on once its stdin closes, after the snapshot.
RS=$I/reach.sock
mkfifo "$I/reach.in"
(cd "$I/w" && exec "$CCVM" run --rw "$I/w" --net host --control "$RS" --image-dir "$I" -- "$G/tests/reach.glibc" "$I/w" \
	>"$I/reach.out" 2>"$I/reach.err" <"$I/reach.in") &
VMPID=$!
exec 8>"$I/reach.in"
if wait_for_line ready "$I/reach.out"; then
	"$CCVM" ctl "$RS" snapshot "$I/reach.img" --wait >"$I/reach.json" 2>&1
fi
exec 8>&-
wait $VMPID; st=$?
if [ $st = 0 ] && grep -q "create after.txt *0" "$I/reach.out" && [ -f "$I/w/after.txt" ] &&
	grep -q '"ok":true' "$I/reach.json"; then
	rm -f "$I/w/after.txt"
	(cd "$I/elsewhere" && tmo 60 "$CCVM" restore "$I/reach.img" >"$I/rest.out" 2>"$I/rest.err" </dev/null)
	grep -q "create after.txt *-1" "$I/rest.out" && [ ! -e "$I/w/after.txt" ] \
		&& pass "restore without --rw" "W is not writable ('$(grep -o "create after.txt.*" "$I/rest.out")')" \
		|| fail "restore without --rw" "$(cat "$I/rest.out")" "$(head -3 "$I/rest.err")"
	grep -q "udp connect 198.51.100.1 *-1" "$I/rest.out" && grep -q "non-loopback address refused" "$I/rest.err" \
		&& pass "restore without --net host" "cannot leave loopback" \
		|| fail "restore without --net host" "$(cat "$I/rest.out")" "$(head -3 "$I/rest.err")"
else
	for c in "restore without --rw" "restore without --net host"; do
		fail "$c" "the run with --rw and --net host, then snapshot: status $st" "$(cat "$I/reach.out")" \
			"$(head -3 "$I/reach.err")" "$(cat "$I/reach.json" 2>/dev/null)"
	done
fi

# 5. kill -9 of the monitor while a snapshot is being written over an existing image:
#    that image still inspects intact and restores, and the next snapshot to the same
#    path works and leaves no temporary behind.
KS=$I/k.sock
KMIB=$(scaled 96 16)
mkfifo "$I/k.in"
"$CCVM" run --mem 256M --control "$KS" -- "$G/tests/fillwait.glibc" "$KMIB" <"$I/k.in" >"$I/k.out" 2>"$I/k.err" &
VMPID=$!
exec 9>"$I/k.in"
if wait_for_line filled "$I/k.out" && "$CCVM" ctl "$KS" snapshot "$I/k.img" --wait >"$I/k1.json" 2>&1; then
	# A number out of range is a clear error (not a snapshot started), and the VM goes on.
	tmo 10 "$CCVM" ctl "$KS" snapshot "$I/x.img" --rate 1e300 >"$I/rate.json" 2>&1; rst=$?
	[ $rst = 1 ] && grep -q '"ok":false.*rate' "$I/rate.json" && [ ! -e "$I/x.img" ] &&
		"$CCVM" ctl "$KS" status | grep -q '"state":"running"' \
		&& pass "ctl --rate 1e300" "error '$(grep -o '"error":"[^"]*' "$I/rate.json" | cut -c10-)', VM running" \
		|| fail "ctl --rate 1e300" "status $rst" "$(cat "$I/rate.json")"
	# KMIB MiB at 1 MB/s: the writer is busy for 16 s or more when the monitor is killed,
	# right after its temporary file appears.
	"$CCVM" ctl "$KS" snapshot "$I/k.img" --rate 1 >"$I/k2.json" 2>&1
	tmp_in_place() { ls -A "$I" | grep -q '^\.k\.img\.tmp\.'; }
	wait_until 10 tmp_in_place && tmp_seen=yes || tmp_seen=no
	kill -9 $VMPID
	wait $VMPID 2>/dev/null
	exec 9>&-
	"$CCVM" inspect "$I/k.img" >"$I/k.insp" 2>&1; ist=$?
	got=$(tmo 60 "$CCVM" restore "$I/k.img" </dev/null 2>"$I/k.rerr")
	[ $tmp_seen = yes ] && [ $ist = 0 ] && grep -q '0 damaged' "$I/k.insp" && echo "$got" | grep -q "pattern intact" \
		&& pass "kill -9 during a snapshot" "the previous image inspects intact and restores" \
		|| fail "kill -9 during a snapshot" "temporary seen: $tmp_seen, inspect status $ist" \
			"$(tail -2 "$I/k.insp")" "$got" "$(head -2 "$I/k.rerr")"
	"$CCVM" run --mem 256M --control "$KS" -- "$G/tests/fillwait.glibc" 8 <"$I/k.in" >"$I/k.out" 2>"$I/k.err" &
	VMPID=$!
	exec 9>"$I/k.in"
	wait_for_line filled "$I/k.out" && "$CCVM" ctl "$KS" snapshot "$I/k.img" --wait >"$I/k3.json" 2>&1; sst=$?
	exec 9>&-
	wait $VMPID
	[ $sst = 0 ] && ! ls -A "$I" | grep -q '^\.k\.img\.tmp\.' && "$CCVM" inspect "$I/k.img" >/dev/null 2>&1 \
		&& pass "snapshot after kill -9" "the next snapshot to that path works and removes the dead writer's temporary" \
		|| fail "snapshot after kill -9" "status $sst" "$(ls -A "$I")" "$(cat "$I/k3.json")"
else
	exec 9>&-
	kill -9 $VMPID 2>/dev/null; wait $VMPID 2>/dev/null
	for c in "ctl --rate 1e300" "kill -9 during a snapshot" "snapshot after kill -9"; do
		fail "$c" "setup: the first snapshot" "$(cat "$I/k.out")" "$(head -3 "$I/k.err")" "$(cat "$I/k1.json" 2>/dev/null)"
	done
fi
rm -f "$I/k.in"

# 6. A VM-wide memory bound (issue 54, finding 3): 63 forked children, all alive at
#    once, each write a mapping nearly as large as --mem. Before --mem-total each had
#    a window of its own and the host gave them 63 x --mem. Now what all processes hold
#    together stays within --mem-total (the first process is charged its whole RAM):
#    the children past it get SIGBUS (in their handler, or as their end when the
#    handler's frame cannot be written either), a fork that cannot copy its child's
#    first blocks gets ENOMEM, and the monitor's peak RSS stays under 1.1 x
#    --mem-total. The VM lives on, and the parent reaps every child it made.
mkfifo "$I/mt.in"
"$CCVM" run --mem 256M --mem-total 512M --control "$I/mt.sock" -- "$G/tests/fork.glibc" \
	budget 63 240 <"$I/mt.in" >"$I/mt.out" 2>"$I/mt.err" &
MPID=$!
exec 8>"$I/mt.in"
hwm= charged=
if wait_until 900 has_line holding "$I/mt.out"; then
	hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$MPID/status") # KiB
	charged=$("$CCVM" ctl "$I/mt.sock" stats | json_num mem_charged_bytes)
fi
echo go >&8
exec 8>&-
wait $MPID; st=$?
rm -f "$I/mt.in"
line=$(grep "^budget:" "$I/mt.out")
total=$((512 << 20))
forked=$(echo "$line" | awk '{ print $2 }')
sigbus=$(echo "$line" | awk '{ print $10 + $13 }')
enomem=no
[ "${forked:-0}" = 63 ] || ! grep -q "^fork $((forked + 1)) failed: Cannot allocate memory" "$I/mt.out" ||
	enomem=yes
[ "$st" = 0 ] && grep -q "all ${forked:-x} reaped" "$I/mt.out" && [ -n "$hwm" ] && [ -n "$charged" ] &&
	[ "$charged" -le "$total" ] && [ $((hwm * 1024 * 10)) -lt $((total * 11)) ] &&
	{ [ "${sigbus:-0}" -ge 1 ] || [ $enomem = yes ]; } \
	&& pass "63 children each writing --mem stay within --mem-total" "$(echo "$line" | cut -d' ' -f2-); charged $((charged >> 20)) of 512 MiB, peak RSS $((hwm >> 10)) MiB" \
	|| fail "63 children each writing --mem stay within --mem-total" "status $st, charged '$charged', VmHWM '$hwm' KiB" \
		"$(cat "$I/mt.out")" "$(grep -v "past the VM's memory budget" "$I/mt.err" | head -3)"
