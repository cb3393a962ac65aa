# Isolation end-to-end tests (issue 12); sourced by run.sh (uses its CCVM, G, WORK,
# pass, fail). What a guest can reach on the host, what a restore gives it back, and
# what a kill -9 in the middle of a snapshot leaves behind.

echo "== isolation"
I=$WORK/iso
mkdir -p "$I/rw" "$I/out" "$I/elsewhere" "$I/w"

wait_for_line() { # PATTERN FILE: up to 10 s
	for _ in $(seq 200); do grep -q "$1" "$2" 2>/dev/null && return 0; sleep 0.05; done
	return 1
}

# 1. ccvm's own control socket, even where it lies under --rw (the default rw is the
#    working directory): the guest could otherwise snapshot over any file or quit.
CS=$I/rw/ctl.sock
(cd "$I/rw" && timeout 30 "$CCVM" run --control "$CS" -- "$G/tests/net.glibc" unix-connect "$CS" \
	>"$I/ctl.out" 2>"$I/ctl.err" </dev/null)
grep -q "unix connect *-1 Permission denied" "$I/ctl.out" && grep -q "own control socket" "$I/ctl.err" \
	&& pass "guest connect to ccvm's own control socket refused: '$(grep -o "guest connection.*" "$I/ctl.err" | head -1)'" \
	|| fail "guest connect to the control socket" "$(cat "$I/ctl.out")" "$(head -2 "$I/ctl.err")"

# 2. A host Unix socket outside --rw: refused, unless --allow-unix names it.
"$G/tests/net.glibc" unix-listen "$I/out/host.sock" &
LPID=$!
for _ in $(seq 100); do [ -S "$I/out/host.sock" ] && break; sleep 0.05; done
(cd "$I/rw" && timeout 30 "$CCVM" run -- "$G/tests/net.glibc" unix-connect "$I/out/host.sock" \
	>"$I/unix.out" 2>"$I/unix.err" </dev/null)
(cd "$I/rw" && timeout 30 "$CCVM" run --allow-unix "$I/out/host.sock" -- "$G/tests/net.glibc" \
	unix-connect "$I/out/host.sock" >"$I/unix-allowed.out" 2>&1 </dev/null)
kill $LPID 2>/dev/null; wait $LPID 2>/dev/null
grep -q "unix connect *-1 Permission denied" "$I/unix.out" && grep -q "outside the --rw directories" "$I/unix.err" \
	&& grep -q "unix connect *0" "$I/unix-allowed.out" \
	&& pass "Unix socket outside --rw refused, reached with --allow-unix" \
	|| fail "Unix socket outside --rw" "$(cat "$I/unix.out")" "$(head -2 "$I/unix.err")" "$(cat "$I/unix-allowed.out")"

# 3. A host service on a loopback port: refused, unless --allow-port or --net host.
Q=$((20000 + RANDOM % 20000))
python3 - "$Q" <<'PY' &
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(8)
s.settimeout(30)
try:
    while True:
        s.accept()[0].close()
except OSError:
    pass
PY
QPID=$!
for _ in $(seq 100); do (exec 8<>"/dev/tcp/127.0.0.1/$Q") 2>/dev/null && break; sleep 0.05; done
for how in "" "--allow-port $Q" "--net host"; do
	# shellcheck disable=SC2086
	timeout 30 "$CCVM" run $how -- "$G/tests/net.glibc" connect 127.0.0.1 "$Q" \
		>"$I/port.out" 2>"$I/port.err" </dev/null
	if [ -z "$how" ]; then
		grep -q "connect *-1 Permission denied" "$I/port.out" && grep -q "not a port of its own" "$I/port.err" \
			&& pass "loopback port $Q of a host service refused: '$(grep -o "guest connection.*" "$I/port.err" | head -1)'" \
			|| fail "loopback port not allowed" "$(cat "$I/port.out")" "$(head -2 "$I/port.err")"
	else
		grep -q "connect *0" "$I/port.out" && pass "loopback port $Q reached with $how" \
			|| fail "loopback port with $how" "$(cat "$I/port.out")" "$(head -2 "$I/port.err")"
	fi
done
kill $QPID 2>/dev/null; wait $QPID 2>/dev/null

# 4. A VM run with --rw W and --net host, snapshotted, and restored from another
#    directory without them: the restored guest can neither write W nor leave loopback.
RS=$I/reach.sock
(cd "$I/w" && exec "$CCVM" run --rw "$I/w" --net host --control "$RS" -- "$G/tests/reach.glibc" 3 "$I/w" \
	>"$I/reach.out" 2>"$I/reach.err" </dev/null) &
VMPID=$!
if wait_for_line ready "$I/reach.out"; then
	"$CCVM" ctl "$RS" snapshot "$I/reach.img" --wait >"$I/reach.json" 2>&1
fi
wait $VMPID; st=$?
if [ $st = 0 ] && grep -q "create after.txt *0" "$I/reach.out" && [ -f "$I/w/after.txt" ] &&
	grep -q '"ok":true' "$I/reach.json"; then
	rm -f "$I/w/after.txt"
	(cd "$I/elsewhere" && timeout 60 "$CCVM" restore "$I/reach.img" >"$I/rest.out" 2>"$I/rest.err" </dev/null)
	grep -q "create after.txt *-1" "$I/rest.out" && [ ! -e "$I/w/after.txt" ] \
		&& pass "restored without --rw: W is not writable ('$(grep -o "create after.txt.*" "$I/rest.out")')" \
		|| fail "restore without --rw" "$(cat "$I/rest.out")" "$(head -3 "$I/rest.err")"
	grep -q "udp connect 198.51.100.1 *-1" "$I/rest.out" && grep -q "non-loopback address refused" "$I/rest.err" \
		&& pass "restored without --net host: cannot leave loopback" \
		|| fail "restore without --net host" "$(cat "$I/rest.out")" "$(head -3 "$I/rest.err")"
else
	fail "run with --rw and --net host, then snapshot" "status $st" "$(cat "$I/reach.out")" \
		"$(head -3 "$I/reach.err")" "$(cat "$I/reach.json" 2>/dev/null)"
fi

# 5. kill -9 of the monitor while a snapshot is being written over an existing image:
#    that image still inspects intact and restores, and the next snapshot to the same
#    path works and leaves no temporary behind.
KS=$I/k.sock
mkfifo "$I/k.in"
"$CCVM" run --mem 256M --control "$KS" -- "$G/tests/fillwait.glibc" 96 <"$I/k.in" >"$I/k.out" 2>"$I/k.err" &
VMPID=$!
exec 9>"$I/k.in"
if wait_for_line filled "$I/k.out" && "$CCVM" ctl "$KS" snapshot "$I/k.img" --wait >"$I/k1.json" 2>&1; then
	# A number out of range is a clear error at once, and the VM goes on.
	start=$(date +%s%N)
	"$CCVM" ctl "$KS" snapshot "$I/x.img" --rate 1e300 >"$I/rate.json" 2>&1; rst=$?
	ms=$((($(date +%s%N) - start) / 1000000))
	[ $rst = 1 ] && grep -q '"ok":false.*rate' "$I/rate.json" && [ $ms -lt 1000 ] && [ ! -e "$I/x.img" ] &&
		"$CCVM" ctl "$KS" status | grep -q '"state":"running"' \
		&& pass "ctl snapshot --rate 1e300: error in $ms ms ('$(grep -o '"error":"[^"]*' "$I/rate.json" | cut -c10-)'), VM running" \
		|| fail "ctl --rate 1e300" "status $rst after $ms ms" "$(cat "$I/rate.json")"
	# 96 MiB at 4 MB/s: the writer is busy for about 25 s when the monitor is killed.
	"$CCVM" ctl "$KS" snapshot "$I/k.img" --rate 4 >"$I/k2.json" 2>&1
	for _ in $(seq 100); do ls -A "$I" | grep -q '^\.k\.img\.tmp\.' && break; sleep 0.05; done
	ls -A "$I" | grep -q '^\.k\.img\.tmp\.' && tmp_seen=yes || tmp_seen=no
	kill -9 $VMPID
	wait $VMPID 2>/dev/null
	exec 9>&-
	"$CCVM" inspect "$I/k.img" >"$I/k.insp" 2>&1; ist=$?
	got=$(timeout 60 "$CCVM" restore "$I/k.img" </dev/null 2>"$I/k.rerr")
	[ $tmp_seen = yes ] && [ $ist = 0 ] && grep -q '0 damaged' "$I/k.insp" && echo "$got" | grep -q "pattern intact" \
		&& pass "kill -9 during a snapshot: the previous image inspects intact and restores" \
		|| fail "kill -9 during a snapshot" "temporary seen: $tmp_seen, inspect status $ist" \
			"$(tail -2 "$I/k.insp")" "$got" "$(head -2 "$I/k.rerr")"
	"$CCVM" run --mem 256M --control "$KS" -- "$G/tests/fillwait.glibc" 8 <"$I/k.in" >"$I/k.out" 2>"$I/k.err" &
	VMPID=$!
	exec 9>"$I/k.in"
	wait_for_line filled "$I/k.out" && "$CCVM" ctl "$KS" snapshot "$I/k.img" --wait >"$I/k3.json" 2>&1; sst=$?
	exec 9>&-
	wait $VMPID
	[ $sst = 0 ] && ! ls -A "$I" | grep -q '^\.k\.img\.tmp\.' && "$CCVM" inspect "$I/k.img" >/dev/null 2>&1 \
		&& pass "the next snapshot to that path works and removes the dead writer's temporary" \
		|| fail "snapshot after kill -9" "status $sst" "$(ls -A "$I")" "$(cat "$I/k3.json")"
else
	exec 9>&-
	kill -9 $VMPID 2>/dev/null; wait $VMPID 2>/dev/null
	fail "kill -9 during a snapshot: setup" "$(cat "$I/k.out")" "$(head -3 "$I/k.err")" "$(cat "$I/k1.json" 2>/dev/null)"
fi
rm -f "$I/k.in"
