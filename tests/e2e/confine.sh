# Confinement end-to-end tests (issue 29); sourced by run.sh (uses its CCVM, G, WORK
# and lib.sh). The monitor runs confined (no new privileges, seccomp, Landlock), writes
# images only in its image directories, never follows a name a guest can change, and
# never opens what a crafted image names as its parent.

echo "== confinement"
C=$WORK/confine
mkdir -p "$C/rw" "$C/outside" "$C/elsewhere" "$C/chain"

# 0. The options: bad values are usage errors, named.
expect_fail "--user naming no user" 2 "no user named" -- "$CCVM" run --user no-such-ccvm-user -- /bin/true
expect_fail "--confine with an unknown mode" 2 "expected auto, require or off" -- "$CCVM" run --confine maybe -- /bin/true
expect_fail "--image-dir that does not exist" 2 "No such file or directory" -- "$CCVM" run --image-dir "$C/none" -- /bin/true
got=$(tmo 60 "$CCVM" run --confine require -- "$G/tests/hello.glibc" 2>"$C/req.err" </dev/null); st=$?
[ $st = 0 ] && [ "$got" = "hello from nobody, argc=1" ] &&
	pass "--confine require where the kernel has it all" "status 0, '$got'" ||
	fail "--confine require where the kernel has it all" "status $st, '$got'" "$(head -3 "$C/req.err")"

# The status lines of a running monitor's main thread.
status_of() { grep -E '^(NoNewPrivs|Seccomp):' "/proc/$1/status" 2>/dev/null | tr -s '\t ' ' ' | tr '\n' ' '; }
caps_of() { # PID: each vCPU thread's CapEff, then the process's CapBnd
	local t out=""
	for t in /proc/"$1"/task/*; do
		case "$(cat "$t/comm" 2>/dev/null)" in
		ccvm-vcpu*) out="$out $(awk '/^CapEff/ {print $2}' "$t/status" 2>/dev/null)" ;;
		esac
	done
	echo "vcpu CapEff:${out:- none}; CapBnd $(awk '/^CapBnd/ {print $2}' "/proc/$1/status" 2>/dev/null)"
}

# 1. run and restore show NoNewPrivs 1 and Seccomp 2 (filter mode) while the guest runs.
CC=$C/c.sock
mkfifo "$C/c.in"
(cd "$C/rw" && exec "$CCVM" run --control "$CC" -- "$G/tests/fdkeep.glibc" <"$C/c.in" \
	>"$C/c.out" 2>"$C/c.err") &
VMPID=$!
exec 8>"$C/c.in"
if wait_for_line ready "$C/c.out"; then
	run_status=$(status_of $VMPID)
	run_caps=$(caps_of $VMPID)
	"$CCVM" ctl "$CC" snapshot "$C/rw/c.img" --wait >"$C/c.json" 2>&1
fi
exec 8>&-
wait $VMPID
case "$run_status" in
*"NoNewPrivs: 1"*"Seccomp: 2"*) pass "ccvm run is confined" "$run_status" ;;
*) fail "ccvm run is confined" "status lines: '$run_status'" "$(head -3 "$C/c.err")" ;;
esac
# 1a. Root without --user (issue 54, finding 5): the threads that serve the guest hold no
#     capability, the bounding set is empty, and the snapshot above still worked.
if [ "$(id -u)" != 0 ]; then
	skip "root's capabilities dropped" "needs root"
else
	zero=0000000000000000
	effs=$(echo "$run_caps" | sed 's/^vcpu CapEff: *//; s/;.*//')
	if [ -n "$effs" ] && [ "$effs" != none ] && [ -z "$(echo "$effs" | tr ' ' '\n' | grep -v "^$zero\$" | grep .)" ] &&
		[ "${run_caps##*CapBnd }" = $zero ] && grep -q '"ok":true' "$C/c.json"; then
		pass "root's capabilities dropped" "$run_caps; the snapshot worked"
	else
		fail "root's capabilities dropped" "$run_caps" "$(cat "$C/c.json" 2>/dev/null)" "$(head -3 "$C/c.err")"
	fi
fi
if grep -q '"ok":true' "$C/c.json"; then
	mkfifo "$C/r.in"
	(cd "$C/rw" && exec "$CCVM" restore "$C/rw/c.img" <"$C/r.in" >"$C/r.out" 2>"$C/r.err") &
	RPID=$!
	exec 8>"$C/r.in"
	# Confined once the image is open and the VM made: wait for that, not a time.
	confined() { grep -q '^Seccomp:[[:space:]]*2' "/proc/$RPID/status" 2>/dev/null; }
	wait_until 60 confined
	restore_status=$(status_of $RPID)
	exec 8>&-
	wait $RPID; rst=$?
	case "$restore_status" in
	*"NoNewPrivs: 1"*"Seccomp: 2"*)
		[ $rst = 0 ] && pass "ccvm restore is confined" "$restore_status" ||
			fail "ccvm restore is confined" "status $rst" "$(head -3 "$C/r.err")" ;;
	*) fail "ccvm restore is confined" "status lines: '$restore_status'" "$(head -3 "$C/r.err")" ;;
	esac
else
	fail "ccvm restore is confined" "no image to restore" "$(cat "$C/c.json")"
fi
rm -f "$C/c.in" "$C/r.in"

# 2. ctl snapshot outside the image directories is refused, naming --image-dir; with
#    --image-dir that directory it works.
for with in no yes; do
	extra=()
	[ $with = yes ] && extra=(--image-dir "$C/elsewhere")
	mkfifo "$C/e.in"
	(cd "$C/rw" && exec "$CCVM" run --control "$CC" "${extra[@]}" -- "$G/tests/fdkeep.glibc" \
		<"$C/e.in" >"$C/e.out" 2>"$C/e.err") &
	VMPID=$!
	exec 8>"$C/e.in"
	wait_for_line ready "$C/e.out" &&
		"$CCVM" ctl "$CC" snapshot "$C/elsewhere/x.img" --wait >"$C/e.json" 2>&1; est=$?
	exec 8>&-
	wait $VMPID
	rm -f "$C/e.in"
	if [ $with = no ]; then
		[ $est != 0 ] && grep -q -- "--image-dir" "$C/e.json" && [ ! -e "$C/elsewhere/x.img" ] &&
			! ls -A "$C/elsewhere" | grep -q . &&
			pass "ctl snapshot outside the image directories" "refused: $(grep -o 'is outside.*' "$C/e.json" | cut -c1-70)" ||
			fail "ctl snapshot outside the image directories" "status $est" "$(cat "$C/e.json")"
	else
		[ $est = 0 ] && "$CCVM" inspect "$C/elsewhere/x.img" >/dev/null 2>&1 &&
			pass "ctl snapshot with --image-dir" "written and intact" ||
			fail "ctl snapshot with --image-dir" "status $est" "$(cat "$C/e.json")" "$(head -2 "$C/e.err")"
	fi
done

# 2b. Every snapshot policy under confinement, the fork policy's child among them.
mkfifo "$C/f.in"
(cd "$C/rw" && exec "$CCVM" run --mem 128M --control "$CC" -- "$G/tests/fillwait.glibc" 16 \
	<"$C/f.in" >"$C/f.out" 2>"$C/f.err") &
VMPID=$!
exec 8>"$C/f.in"
if wait_for_line filled "$C/f.out"; then
	for pol in fork stop cow ccow; do
		"$CCVM" ctl "$CC" snapshot "$C/rw/$pol.img" --policy $pol --wait >"$C/f-$pol.json" 2>&1
	done
fi
exec 8>&-
wait $VMPID
rm -f "$C/f.in"
for pol in fork stop cow ccow; do
	grep -q '"ok":true' "$C/f-$pol.json" 2>/dev/null && "$CCVM" inspect "$C/rw/$pol.img" >/dev/null 2>&1 &&
		pass "a confined $pol snapshot" "written and intact" ||
		fail "a confined $pol snapshot" "$(cat "$C/f-$pol.json" 2>/dev/null)" "$(head -3 "$C/f.err")"
	rm -f "$C/rw/$pol.img"
done

# 3. A guest racing symbolic links in its --rw directory while the host takes snapshots
#    into that directory: no file outside changes, and every snapshot either succeeds
#    or reports its failure.
RACES=$(scaled 100 10)
echo "the file outside --rw: never written" >"$C/outside/victim"
before=$(md5sum <"$C/outside/victim")
(cd "$C/rw" && exec "$CCVM" run --mem 64M --control "$CC" -- "$G/tests/linkrace.glibc" "$C/rw" \
	race.img "$C/outside/victim" "$C/rw/stop" >"$C/race.out" 2>"$C/race.err" </dev/null) &
VMPID=$!
ok=0 failed=0 silent=0
if wait_for_line ready "$C/race.out"; then
	for _ in $(seq "$RACES"); do
		"$CCVM" ctl "$CC" snapshot "$C/rw/race.img" --policy stop --wait >"$C/race.json" 2>&1
		if grep -q '"ok":true' "$C/race.json"; then ok=$((ok + 1))
		elif grep -q '"ok":false.*"error":"..*"' "$C/race.json"; then failed=$((failed + 1))
		else silent=$((silent + 1)); fi
	done
fi
touch "$C/rw/stop"
wait $VMPID; st=$?
after=$(md5sum <"$C/outside/victim")
[ $st = 0 ] && [ "$before" = "$after" ] && [ "$(ls -A "$C/outside")" = victim ] &&
	[ $((ok + failed)) = "$RACES" ] && [ $silent = 0 ] &&
	pass "a guest racing links during $RACES snapshots into its --rw" \
		"$ok written, $failed reported failed, the file outside untouched; $(tail -1 "$C/race.out")" ||
	fail "a guest racing links during $RACES snapshots into its --rw" \
		"status $st; written $ok, reported $failed, neither $silent" \
		"outside: $(ls -A "$C/outside" | tr '\n' ' '); victim changed: $([ "$before" = "$after" ] && echo no || echo yes)" \
		"$(cat "$C/race.json")" "$(head -3 "$C/race.err")"

# 4. A child image whose parent is a FIFO or a link to a device: inspect and restore
#    refuse it with a message, and never open the FIFO or the device (no IN_OPEN).
watch_opens() { # READY WATCHED...: report IN_OPEN on the watched files until stdin closes
	python3 -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_NONBLOCK)
for p in sys.argv[2:]:
    if libc.inotify_add_watch(fd, p.encode(), 0x20) < 0:
        sys.exit("cannot watch " + p)
open(sys.argv[1], "w").write("ready\n")
sys.stdin.read()
try:
    os.read(fd, 4096)
    print("opened")
except BlockingIOError:
    print("never opened")
' "$@"
}
CH=$C/chain
mkfifo "$C/p.in"
(cd "$CH" && exec "$CCVM" run --control "$CC" -- "$G/tests/fdkeep.glibc" \
	<"$C/p.in" >"$C/p.out" 2>"$C/p.err") &
VMPID=$!
exec 8>"$C/p.in"
if wait_for_line ready "$C/p.out"; then
	"$CCVM" ctl "$CC" snapshot "$CH/parent.img" --track --wait >"$C/p1.json" 2>&1
	"$CCVM" ctl "$CC" snapshot "$CH/child.img" --parent "$CH/parent.img" --wait >"$C/p2.json" 2>&1
fi
exec 8>&-
wait $VMPID
if grep -q '"ok":true' "$C/p2.json" && "$CCVM" inspect "$CH/child.img" >/dev/null 2>&1; then
	mv "$CH/parent.img" "$CH/parent.real"
	if mknod "$C/zero" c 1 5 2>/dev/null; then dev=$C/zero; else dev=/dev/zero; fi
	for kind in fifo device; do
		rm -f "$CH/parent.img"
		if [ $kind = fifo ]; then mkfifo "$CH/parent.img"; watched=$CH/parent.img
		else ln -s "$dev" "$CH/parent.img"; watched=$dev; fi
		rm -f "$C/w.ready"
		mkfifo "$C/w.in"
		watch_opens "$C/w.ready" "$watched" <"$C/w.in" >"$C/w.out" 2>&1 &
		WPID=$!
		exec 7>"$C/w.in"
		wait_until 20 test -s "$C/w.ready"
		"$CCVM" inspect "$CH/child.img" >"$C/i.out" 2>&1; ist=$?
		tmo 30 "$CCVM" restore "$CH/child.img" >"$C/rr.out" 2>"$C/rr.err" </dev/null; rrst=$?
		exec 7>&-
		wait $WPID
		rm -f "$C/w.in"
		[ $ist != 0 ] && [ $rrst != 0 ] && grep -Eq "not a regular file|symbolic link" "$C/rr.err" &&
			grep -q "never opened" "$C/w.out" &&
			pass "a parent that is a $kind" "refused: $(grep -Eo "(not a regular file|a symbolic link)[^;]*" "$C/rr.err" | head -1); $(cat "$C/w.out")" ||
			fail "a parent that is a $kind" "inspect $ist, restore $rrst" "$(head -2 "$C/rr.err")" "$(cat "$C/w.out")"
	done
	rm -f "$CH/parent.img" "$C/zero"
else
	for kind in fifo device; do
		fail "a parent that is a $kind" "setup: a child image" "$(cat "$C/p1.json" "$C/p2.json" 2>/dev/null)" "$(head -3 "$C/p.err")"
	done
fi
rm -f "$C/p.in"

# 5. --user nobody: the guest runs as nobody, and reads what nobody may read.
nobody=$(id -u nobody 2>/dev/null)
if [ "$(id -u)" != 0 ] || [ -z "$nobody" ]; then
	skip "--user nobody" "needs root and a user nobody"
else
	mkdir -p "$C/nobody" && chown nobody "$C/nobody"
	got=$(cd "$C/nobody" && tmo 60 "$CCVM" run --user nobody -- /usr/bin/id -u 2>"$C/u.err" </dev/null)
	(cd "$C/nobody" && tmo 60 "$CCVM" run --user nobody -- /bin/cat /etc/shadow >/dev/null 2>"$C/s.err" </dev/null); sst=$?
	[ "$got" = "$nobody" ] && [ $sst != 0 ] && grep -q "Permission denied" "$C/s.err" &&
		pass "--user nobody" "id -u prints $got; cat /etc/shadow: status $sst, '$(grep -o 'Permission denied' "$C/s.err" | head -1)'" ||
		fail "--user nobody" "id -u: '$got' (want $nobody), $(head -2 "$C/u.err")" "cat /etc/shadow: status $sst, $(head -2 "$C/s.err")"
fi

# 6. A POSIX timer with a 1 ns interval: the timer thread never spins. A spinning one
#    would add about the storm's 2 s asleep to ccvm's CPU time; the check allows half of
#    that over the same guest without the timer, not a ratio, so that the noise of a
#    nested VM's startup CPU (0.5 to 2 s in either run) decides nothing.
storm_cpu() { # NS: the CPU seconds (user + system) of ccvm running the storm
	local TIMEFORMAT='%U %S'
	{ time (cd "$C/rw" && "$CCVM" run -- "$G/tests/signals.glibc" timer-storm "$1" 2000 \
		>"$C/storm.out" 2>"$C/storm.err" </dev/null) ; } 2>&1 | awk '{ printf "%.3f", $1 + $2 }'
}
quiet=$(storm_cpu 0)
storm=$(storm_cpu 1)
grep -q "overruns counted 1" "$C/storm.out" && awk -v q="$quiet" -v s="$storm" 'BEGIN { exit !(s - q < 1.0) }' &&
	pass "a 1 ns POSIX timer" "ccvm CPU ${storm}s against ${quiet}s without the timer (2 s asleep)" ||
	fail "a 1 ns POSIX timer" "ccvm CPU ${storm}s against ${quiet}s without the timer" "$(cat "$C/storm.out")" "$(head -2 "$C/storm.err")"
