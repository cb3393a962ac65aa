# The end-to-end checks of guest programs in VMs; sourced by run.sh (uses its CCVM, G,
# TOP, WORK and lib.sh). Each guest program runs natively and in ccvm: stdout and the
# exit status must be identical. Then what differs from a native run by design: the
# sandbox, bad input, crash reports, threads, sockets, the control socket, signals from
# outside. One function a block, called at the end; under run.sh --only parsing only
# the blocks that hand the monitor guest structures and ELF files to parse.

# run_both NAME -- PROGRAM ARGS: native vs ccvm, stdout and status must match.
# A program argument @DIR@ becomes a fresh empty directory for each run.
run_both() {
	local name=$1 want_ok=; shift 2
	case $name in files.* | mem.* | clocks.*) want_ok=${name%%.*} ;; esac
	local d n v nd vd args=()
	nd=$(mktemp -d "$WORK/n.XXXX"); vd=$(mktemp -d "$WORK/v.XXXX")
	for a in "$@"; do args+=("${a//@DIR@/$nd}"); done
	(cd "$nd" && CCVM_TEST_VAR=one CCVM_TEST_SPACE="a b" tmo 60 "${args[@]}" >"$WORK/native.out" 2>"$WORK/native.err" </dev/null); n=$?
	args=(); for a in "$@"; do args+=("${a//@DIR@/$vd}"); done
	(cd "$vd" && CCVM_TEST_VAR=one CCVM_TEST_SPACE="a b" tmo 60 "$CCVM" run --mem 512M -- "${args[@]}" >"$WORK/ccvm.out" 2>"$WORK/ccvm.err" </dev/null); v=$?
	# Identical is not enough: a check that fails the same way natively and in ccvm
	# is still a failure, and a program that says "<name> ok" must say it.
	if grep -q '^FAIL' "$WORK/native.out" "$WORK/ccvm.out"; then
		fail "$name" "$(grep -h '^FAIL' "$WORK/native.out" "$WORK/ccvm.out" | head -2)"
	elif [ -n "$want_ok" ] && ! grep -q "^$want_ok ok\$" "$WORK/ccvm.out"; then
		fail "$name" "no '$want_ok ok' line" "$(tail -3 "$WORK/ccvm.out")"
	elif [ "$n" = "$v" ] && cmp -s "$WORK/native.out" "$WORK/ccvm.out"; then
		pass "$name" "status $n"
	else
		fail "$name" "native status $n, ccvm status $v" "$(diff "$WORK/native.out" "$WORK/ccvm.out" | head -5)" "$(head -3 "$WORK/ccvm.err")"
	fi
}

guest_programs() {
	echo "== guest programs: native vs ccvm (static glibc, static-PIE glibc, static musl, dynamic glibc)"
	for libc in glibc spie musl dyn; do
		T=$G/tests
		# First the programs whose calls hand the monitor structures to parse: argv and
		# envp, paths and stat buffers, poll and epoll arrays, and (hostile) a second
		# thread rewriting paths and msghdrs under open/stat/sendmsg/recvmsg.
		run_both "env.$libc" -- "$T/env.$libc" x "y z" ""
		run_both "files.$libc" -- "$T/files.$libc" @DIR@
		run_both "events.$libc" -- "$T/events.$libc"
		run_both "hostile.$libc" -- "$T/hostile.$libc"
		# Handlers, masks, sigaltstack, tgkill, alarm in a read, SIGSEGV + siglongjmp,
		# timers, sigsuspend, sigtimedwait; it ends killed by SIGPIPE (status 141).
		run_both "signals.$libc" -- "$T/signals.$libc"
		full_suite || continue
		run_both "hello.$libc" -- "$T/hello.$libc" a "b c" 7
		run_both "mem.$libc" -- "$T/mem.$libc" "$CCVM"
		run_both "clocks.$libc" -- "$T/clocks.$libc" "$(scaled 200000 1000)"
		run_both "futex.$libc" -- "$T/futex.$libc"
		run_both "threads.$libc" -- "$T/threads.$libc"
		for how in null ud2 div0 abort int3 "exit 42" "exit 0"; do
			# shellcheck disable=SC2086
			run_both "crash $how.$libc" -- "$T/crash.$libc" $how
		done
	done
}

guest_zipfbench() {
	echo "== zipfbench: same checksum natively and in ccvm"
	for z in zipfbench zipfbench.musl; do
		args=(--size 16M --write-total 64M --report-ms 0 --seed 7)
		nsum=$("$G/$z" "${args[@]}" | grep -o 'checksum=[0-9a-f]*')
		vsum=$(tmo 120 "$CCVM" run --mem 256M -- "$G/$z" "${args[@]}" | grep -o 'checksum=[0-9a-f]*')
		[ -n "$nsum" ] && [ "$nsum" = "$vsum" ] && pass "$z" "$nsum" || fail "$z" "native '$nsum' ccvm '$vsum'"
		vsum2=$(tmo 120 "$CCVM" run --mem 256M -- "$G/$z" "${args[@]}" --scatter | grep -o 'checksum=[0-9a-f]*')
		nsum2=$("$G/$z" "${args[@]}" --scatter | grep -o 'checksum=[0-9a-f]*')
		[ -n "$nsum2" ] && [ "$nsum2" = "$vsum2" ] && [ "$nsum2" != "$nsum" ] && pass "$z --scatter" "$nsum2" || fail "$z --scatter" "native '$nsum2' ccvm '$vsum2'"
	done
}

guest_crash_reports() {
	echo "== crash report"
	"$CCVM" run -- "$G/tests/crash.glibc" null >/dev/null 2>"$WORK/crash.err"; st=$?
	if [ $st = 139 ] && grep -q 'crashed: #PF page fault' "$WORK/crash.err" && grep -q 'faulting address 0' "$WORK/crash.err" && grep -q '  rip ' "$WORK/crash.err"; then
		pass "NULL dereference report" "#PF report, status 139"
	else
		fail "NULL dereference report" "status $st" "$(cat "$WORK/crash.err")"
	fi
	"$CCVM" run -- "$G/tests/crash.musl" ud2 >/dev/null 2>"$WORK/crash.err"; st=$?
	[ $st = 132 ] && grep -q '#UD invalid opcode' "$WORK/crash.err" && pass "ud2 report" "#UD report, status 132" || fail "ud2 report" "status $st" "$(cat "$WORK/crash.err")"
}

guest_sandbox() {
	echo "== sandbox"
	mkdir -p "$WORK/rw"
	(cd "$WORK/rw" && "$CCVM" run --rw "$WORK/rw" -- "$G/tests/sandbox.glibc" "$WORK/rw" >"$WORK/sandbox.out" 2>"$WORK/sandbox.err" </dev/null)
	if diff -u "$TOP/tests/e2e/expected/sandbox.txt" "$WORK/sandbox.out" >"$WORK/sandbox.diff"; then
		pass "sandbox probes" "writes, links, /proc, devices, pointers, signals"
	else
		fail "sandbox probes" "$(head -20 "$WORK/sandbox.diff")"
	fi
	n=$(grep -c 'unsupported system call' "$WORK/sandbox.err")
	[ "$n" = 1 ] && pass "unknown syscall logged once" "$(grep -o 'system call [^ ]* ([0-9]*)' "$WORK/sandbox.err")" ||
		fail "unknown syscall logged once" "logged $n times"
	[ ! -e /etc/ccvm-sandbox-probe ] && [ ! -e /ccvm-sandbox-probe ] && pass "nothing written outside --rw" || fail "nothing written outside --rw" "a probe file escaped the sandbox"

	R=$WORK/root; mkdir -p "$R/rw" "$R/bin"; cp "$G/tests/sandbox.musl" "$R/bin/sandbox"; echo inside >"$R/inside.txt"
	"$CCVM" run --root "$R" --rw "$R/rw" -- /bin/sandbox /rw /inside.txt /../../../etc/hostname ../../../../../etc/hostname "/proc/../etc/hostname" >"$WORK/root.out" 2>/dev/null </dev/null
	if grep -q '^open /inside.txt: ok' "$WORK/root.out" && [ "$(grep -c '^open .*etc/hostname: ENOENT' "$WORK/root.out")" = 3 ] && grep -q '^create in rw dir: ok' "$WORK/root.out" && [ -f "$R/rw/probe.txt" ]; then
		pass "--root confinement" ".. and absolute paths stay inside"
	else
		fail "--root confinement" "$(tail -6 "$WORK/root.out")"
	fi
	# A guest-made symlink to a host AF_UNIX socket outside --root does not reach it.
	cp "$G/tests/net.glibc" "$R/bin/net"; ln -sf "$WORK/outside.sock" "$R/rw/esc.sock"
	"$G/tests/net.glibc" unix-listen "$WORK/outside.sock" & LPID=$!
	wait_until 5 test -S "$WORK/outside.sock"
	"$G/tests/net.glibc" unix-connect "$WORK/outside.sock" >"$WORK/unix-native.out"
	tmo 20 "$CCVM" run --root "$R" --rw "$R/rw" -- /bin/net unix-connect /rw/esc.sock >"$WORK/unix-guest.out" 2>/dev/null </dev/null
	kill $LPID 2>/dev/null; wait $LPID 2>/dev/null
	grep -q "unix connect *0" "$WORK/unix-native.out" && grep -q "unix connect *-1 No such file" "$WORK/unix-guest.out" \
		&& pass "AF_UNIX symlink escape" "a connect through it stays inside --root, the host socket it names is not reached" \
		|| fail "AF_UNIX symlink escape" "$(cat "$WORK/unix-native.out")" "$(cat "$WORK/unix-guest.out")"
}

guest_bad_input() {
	echo "== bad input"
	printf 'just some text\n' >"$WORK/text"; chmod +x "$WORK/text"
	cp "$G/tests/hello.glibc" "$WORK/elf32"; printf '\001' | dd of="$WORK/elf32" bs=1 seek=4 conv=notrunc 2>/dev/null
	head -c 100 "$G/tests/hello.glibc" >"$WORK/trunc"; chmod +x "$WORK/trunc"
	head -c 4000 "$G/tests/hello.glibc" >"$WORK/trunc2"; chmod +x "$WORK/trunc2"
	printf '#!/bin/sh\necho hi\n' >"$WORK/script"; chmod +x "$WORK/script"
	: >"$WORK/empty"; chmod +x "$WORK/empty"
	expect_fail "not an ELF" 126 "not an ELF" -- "$CCVM" run -- "$WORK/text"
	expect_fail "empty file" 126 "empty" -- "$CCVM" run -- "$WORK/empty"
	expect_fail "script" 126 "a script" -- "$CCVM" run -- "$WORK/script"
	expect_fail "32-bit ELF" 126 "32-bit" -- "$CCVM" run -- "$WORK/elf32"
	expect_fail "truncated ELF header" 126 "truncated" -- "$CCVM" run -- "$WORK/trunc"
	expect_fail "truncated ELF segments" 126 "truncated" -- "$CCVM" run -- "$WORK/trunc2"
	# Dynamic programs from the host's Debian, as installed, through ld-linux.
	run_both "Debian's /bin/true" -- "$(realpath "$(type -P true)")"
	run_both "Debian's ls -la" -- "$(realpath "$(type -P ls)")" -la "$G/tests"
	run_both "Debian's sort" -- "$(realpath "$(type -P sort)")" "$TOP/README.md"
	run_both "Debian's cat (fadvise64)" -- "$(realpath "$(type -P cat)")" "$TOP/README.md"
	run_both "Debian's stat -f (statfs)" -- "$(realpath "$(type -P stat)")" -f -c '%t %b %S %l' "$TOP"
	# A dynamic program whose interpreter is missing: its PT_INTERP path, made unknown.
	sed 's|/lib64/ld-linux-x86-64.so.2|/lib64/ld-linux-x86-64.so.9|' "$G/tests/hello.dyn" >"$WORK/nointerp"
	chmod +x "$WORK/nointerp"
	expect_fail "missing ELF interpreter" 127 "its interpreter /lib64/ld-linux-x86-64.so.9: no such file" -- "$CCVM" run -- "$WORK/nointerp"
	expect_fail "missing program" 127 "no such file" -- "$CCVM" run -- "$WORK/does-not-exist"
	expect_fail "directory as program" 126 "not a regular file" -- "$CCVM" run -- "$WORK"
	expect_fail "--mem 0" 2 "guest RAM must be between" -- "$CCVM" run --mem 0 -- "$G/tests/hello.glibc"
	expect_fail "--mem 100T" 2 "guest RAM must be between" -- "$CCVM" run --mem 100T -- "$G/tests/hello.glibc"
	expect_fail "--mem more than the host" 2 "more than this host's memory" -- "$CCVM" run --mem 200G -- "$G/tests/hello.glibc"
	expect_fail "--mem garbage" 2 "not a size" -- "$CCVM" run --mem lots -- "$G/tests/hello.glibc"
	expect_fail "no program" 2 "no PROGRAM" -- "$CCVM" run --mem 64M
	expect_fail "unknown option" 2 "usage" -- "$CCVM" run --bogus -- "$G/tests/hello.glibc"
	expect_fail "unknown command" 2 "unknown command" -- "$CCVM" frobnicate
	expect_fail "ctl without a VM" 1 "cannot connect" -- "$CCVM" ctl "$WORK/none.sock" status
	expect_fail "--vcpus 0" 2 "the most guest threads at once, 1 to" -- "$CCVM" run --vcpus 0 -- "$G/tests/hello.glibc"
	expect_fail "--vcpus 65" 2 "the most guest threads at once, 1 to 64" -- "$CCVM" run --vcpus 65 -- "$G/tests/hello.glibc"
	expect_fail "--vcpus x" 2 "the most guest threads at once" -- "$CCVM" run --vcpus x -- "$G/tests/hello.glibc"
}

guest_threads() {
	echo "== threads"
	# The thread cap: --vcpus N runs N threads at most; the next pthread_create fails with
	# EAGAIN and ccvm says why.
	for libc in glibc musl; do
		out=$(tmo 30 "$CCVM" run --vcpus 3 -- "$T/threads.$libc" cap 2>"$WORK/cap.err")
		if [ "$out" = "created 2 threads, then: Resource temporarily unavailable" ] &&
			grep -q "the most --vcpus 3 allows" "$WORK/cap.err"; then
			pass "--vcpus 3 ($libc)" "caps $libc at 3 threads: '$out'"
		else
			fail "--vcpus 3 ($libc)" "$out" "$(head -3 "$WORK/cap.err")"
		fi
	done
	# vfork: a shell runs commands (each a child in its memory until it execs), and
	# waits for their statuses, as natively.
	SHV='/bin/true; echo "true $?"; /bin/false; echo "false $?"; /bin/sh -c "exit 7"; echo "sh $?"; /nonexistent 2>/dev/null; echo "missing $?"'
	want=$(/bin/sh -c "$SHV" 2>&1)
	out=$(tmo 60 "$CCVM" run -- /bin/sh -c "$SHV" 2>"$WORK/vfork.err")
	if [ "$out" = "$want" ]; then
		pass "vfork: sh runs commands and gets their statuses" "$(echo "$out" | tr '\n' ' ')"
	else
		fail "vfork: sh runs commands and gets their statuses" "got '$out', natively '$want'" "$(head -3 "$WORK/vfork.err")"
	fi
	guest_fork
	guest_shm
}

guest_shm() {
	echo "== shared memory between processes"
	# MAP_SHARED anonymous and memfd mappings between parent, child and grandchild:
	# writes, atomics and a shared futex across them; a memfd's bytes the same through
	# mmap and read/write; mremap; what must stay apart stays apart: as natively.
	same_as_native shm "shared mappings across fork (%s)"
}

# Each libc build of test program NAME (guest/tests) prints, in ccvm, what its glibc
# build prints natively, line for line: a check per build, TITLE with the build's name
# for its %s, the output's 4th line as its detail.
same_as_native() { # NAME TITLE
	local name=$1 title libc out
	"$T/$name.glibc" >"$WORK/$name.native" 2>&1
	for libc in glibc musl spie dyn; do
		# shellcheck disable=SC2059 # the title is the format, by design
		title=$(printf "$2" "$libc")
		out=$(tmo 120 "$CCVM" run -- "$T/$name.$libc" 2>"$WORK/$name.err")
		if [ "$out" = "$(cat "$WORK/$name.native")" ]; then
			pass "$title" "$(echo "$out" | sed -n 4p)"
		else
			fail "$title" "$(diff <(echo "$out") "$WORK/$name.native" | head -4)" "$(head -3 "$WORK/$name.err")"
		fi
	done
}

guest_fork() {
	echo "== fork"
	# fork: the child starts with its parent's memory, neither sees the other's writes
	# after (rounds that rewrite every block on both sides, far more page-table
	# changes than a pool holds), pipes, socketpairs and eventfds between them,
	# statuses and signals through wait4: line for line as natively.
	same_as_native fork "fork (%s): copies apart, channels, statuses"
	# A fork bomb meets --max-procs: fork fails with EAGAIN and ccvm says why; the
	# monitor still answers while the children are alive.
	SOCK=$WORK/bomb.sock
	tmo 120 "$CCVM" run --max-procs 12 --control "$SOCK" -- "$T/fork.glibc" bomb 20 \
		>"$WORK/bomb.out" 2>"$WORK/bomb.err" &
	BPID=$!
	t=
	if wait_until 60 grep -q "fork failed" "$WORK/bomb.out"; then
		t0=$(date +%s%N)
		st=$("$CCVM" ctl "$SOCK" stats 2>&1)
		t=$((($(date +%s%N) - t0) / 1000000))
		n=$(echo "$st" | json_num count)
	fi
	kill "$BPID" 2>/dev/null; wait "$BPID" 2>/dev/null
	if grep -q "fork failed after 11 children: Resource temporarily unavailable" "$WORK/bomb.out" &&
		grep -q "the most --max-procs 12 allows" "$WORK/bomb.err" && [ "$n" = 12 ]; then
		pass "fork bomb stops at --max-procs 12" "EAGAIN after 11 children; ctl stats answered in $t ms with 12 processes"
	else
		fail "fork bomb stops at --max-procs 12" "$(cat "$WORK/bomb.out")" "stats: $n processes, $t ms" "$(head -3 "$WORK/bomb.err")"
	fi
	expect_fail "--max-procs 0" 2 "the most processes at once, 1 to 64" -- "$CCVM" run --max-procs 0 -- "$G/tests/hello.glibc"
	# fork of 1 GiB: how long the parent waits, and what the host holds more once the
	# child wrote 16 blocks (each a 2 MiB copy).
	FIFO=$WORK/fork.fifo; rm -f "$FIFO"; mkfifo "$FIFO"
	SOCK=$WORK/forkt.sock
	tmo 300 "$CCVM" run --mem 1280M --control "$SOCK" -- "$T/fork.glibc" time 1024 wait \
		<"$FIFO" >"$WORK/forkt.out" 2>"$WORK/forkt.err" &
	FPID=$!
	exec 7>"$FIFO"
	r0= r1=
	if wait_until 120 grep -q "^filled" "$WORK/forkt.out"; then
		r0=$("$CCVM" ctl "$SOCK" stats | json_num host_rss_bytes)
		echo go >&7
		if wait_until 120 grep -q "^child wrote" "$WORK/forkt.out"; then
			r1=$("$CCVM" ctl "$SOCK" stats | json_num host_rss_bytes)
		fi
		echo go >&7
	fi
	exec 7>&-
	wait "$FPID"; st=$?
	us=$(grep -o "after [0-9]* us" "$WORK/forkt.out" | grep -o "[0-9]*")
	if [ "$st" = 0 ] && [ -n "$us" ] && [ -n "$r1" ]; then
		pass "fork of 1 GiB resident" "the parent resumed after $((us / 1000)) ms; the host holds $(((r1 - r0) >> 20)) MiB more once the child wrote 16 blocks (16 x 2 MiB copied)"
	else
		fail "fork of 1 GiB resident" "status $st" "$(cat "$WORK/forkt.out")" "$(head -3 "$WORK/forkt.err")"
	fi
}

guest_sockets() {
	echo "== sockets"
	# The same program natively and in ccvm, its port published on another host port: the
	# guest sees its own port numbers throughout.
	P=$((20000 + RANDOM % 20000)); H=$((P + 1))
	for libc in glibc spie musl dyn; do
		nd=$(mktemp -d "$WORK/nn.XXXX"); vd=$(mktemp -d "$WORK/vn.XXXX")
		(cd "$nd" && tmo 60 "$G/tests/net.$libc" "$P" >"$WORK/native.out" 2>&1 </dev/null); n=$?
		(cd "$vd" && tmo 60 "$CCVM" run --publish "127.0.0.1:$H:$P" -- "$G/tests/net.$libc" "$P" \
			>"$WORK/ccvm.out" 2>"$WORK/ccvm.err" </dev/null); v=$?
		[ $n = 0 ] && [ $v = 0 ] && cmp -s "$WORK/native.out" "$WORK/ccvm.out" && grep -q "got 'pair'" "$WORK/ccvm.out" \
			&& pass "net.$libc" "TCP, UDP, AF_UNIX as on the host (guest port $P on host port $H)" \
			|| fail "net.$libc" "native $n ccvm $v" "$(diff "$WORK/native.out" "$WORK/ccvm.out" | head -5)" "$(head -3 "$WORK/ccvm.err")"
	done
	# A port that is not published cannot be bound; a client outside reaches a published one.
	tmo 60 "$CCVM" run -- "$G/tests/net.glibc" "$P" >"$WORK/ccvm.out" 2>"$WORK/ccvm.err" </dev/null
	grep -q "bind 127.0.0.1:PORT *-1 Permission denied" "$WORK/ccvm.out" && grep -q "port $P refused: not published" "$WORK/ccvm.err" \
		&& grep -q "listen *-1 Permission denied" "$WORK/ccvm.out" && grep -q "listen refused" "$WORK/ccvm.err" \
		&& pass "bind to an unpublished port" "refused: '$(grep -o "guest bind.*" "$WORK/ccvm.err" | head -1)'" \
		|| fail "bind to an unpublished port" "$(head -3 "$WORK/ccvm.out")" "$(head -2 "$WORK/ccvm.err")"
	tmo 60 "$CCVM" run --publish "$H:$P" -- "$G/tests/net.dyn" echo "$P" >"$WORK/echo.out" 2>&1 </dev/null &
	EPID=$!
	got=
	if wait_until 30 eval 'exec 7<>"/dev/tcp/127.0.0.1/$H"' 2>/dev/null; then
		printf 'through the published port\n' >&7
		read -r -t "$(bound 10)" got <&7
		exec 7<&-
	fi
	wait $EPID; st=$?
	[ "$got" = "through the published port" ] && [ $st = 0 ] \
		&& pass "host client to a published port" "a host client on 127.0.0.1:$H reached the guest's server on port $P" \
		|| fail "host client to a published port" "got '$got' status $st" "$(tail -2 "$WORK/echo.out")"
	tmo 60 "$CCVM" run -- "$G/tests/net.glibc" connect 192.0.2.1 80 >"$WORK/ccvm.out" 2>"$WORK/ccvm.err" </dev/null
	grep -q "connect *-1 Network is unreachable" "$WORK/ccvm.out" && grep -q "non-loopback address refused" "$WORK/ccvm.err" \
		&& pass "connection beyond loopback" "refused without --net host" \
		|| fail "connection beyond loopback" "$(cat "$WORK/ccvm.out")" "$(head -2 "$WORK/ccvm.err")"
	for spec in abc 80 70000:80 8080:0 1.2.3:8080:80 :8080:80 "[::1]8080:80" "[::1:8080:80"; do
		expect_fail "--publish $spec" 2 "expected \[HOSTIP:\]HOSTPORT:GUESTPORT" -- "$CCVM" run --publish "$spec" -- "$G/tests/hello.glibc"
	done
	expect_fail "--publish twice for one guest port" 2 "already published" -- "$CCVM" run --publish 8080:80 --publish 8081:80 -- "$G/tests/hello.glibc"
	expect_fail "--net bogus" 2 "'host' (connections beyond loopback) or 'container'" -- "$CCVM" run --net bogus -- "$G/tests/hello.glibc"
}

guest_sockio() {
	echo "== the exitless socket path"
	P=$((20000 + RANDOM % 20000)); H=$((P + 1))
	# The exitless socket path (vmm/linux/fastio.c): an epoll server and its clients give
	# the host's answers in every build; the dynamic one takes the path, and its write
	# backlog, blocked writer and close with bytes still owed all happen; --fastio off
	# gives the same answers through system calls only.
	for libc in glibc musl dyn; do
		(tmo 60 "$G/tests/sockio.$libc" "$P" >"$WORK/native.out" 2>&1 </dev/null); n=$?
		(tmo 120 "$CCVM" run -v --publish "127.0.0.1:$H:$P" -- "$G/tests/sockio.$libc" "$P" \
			>"$WORK/ccvm.out" 2>"$WORK/ccvm.err" </dev/null); v=$?
		used=$(grep -o "fastio: [0-9]* sockets; [0-9]* reads and [0-9]* writes.*" "$WORK/ccvm.err")
		ok=1
		if [ $libc = dyn ]; then
			echo "$used" | grep -Eq "[1-9][0-9]* reads and [1-9][0-9]* writes without an exit" &&
				echo "$used" | grep -Eq "[1-9][0-9]* backlogs, [1-9][0-9]* closed with bytes" || ok=0
		else
			[ -z "$used" ] || ok=0
		fi
		[ $n = 0 ] && [ $v = 0 ] && [ $ok = 1 ] && cmp -s "$WORK/native.out" "$WORK/ccvm.out" \
			&& grep -q "identical" "$WORK/ccvm.out" \
			&& pass "sockio.$libc" "echo, bulk, close and peek as on the host${used:+ (${used#fastio: })}" \
			|| fail "sockio.$libc" "native $n ccvm $v exitless '$used'" \
				"$(diff "$WORK/native.out" "$WORK/ccvm.out" | head -5)" "$(grep -v "^ccvm: fastio" "$WORK/ccvm.err" | head -3)"
	done
	(tmo 120 "$CCVM" run --fastio off --publish "127.0.0.1:$H:$P" -- "$G/tests/sockio.dyn" "$P" \
		>"$WORK/ccvm.out" 2>"$WORK/ccvm.err" </dev/null); v=$?
	[ $v = 0 ] && cmp -s "$WORK/native.out" "$WORK/ccvm.out" && ! grep -q "without an exit" "$WORK/ccvm.err" \
		&& pass "sockio.dyn --fastio off" "the same answers, every call an exit" \
		|| fail "sockio.dyn --fastio off" "status $v" "$(diff "$WORK/native.out" "$WORK/ccvm.out" | head -3)"
	tmo 10 "$CCVM" run --fastio maybe -- /bin/true >/dev/null 2>"$WORK/ccvm.err"; v=$?
	[ $v != 0 ] && grep -q "fastio maybe: on or off" "$WORK/ccvm.err" \
		&& pass "--fastio maybe" "refused: '$(head -1 "$WORK/ccvm.err")'" \
		|| fail "--fastio maybe" "status $v" "$(head -2 "$WORK/ccvm.err")"
}

guest_control_socket() {
	echo "== control socket"
	SOCK=$WORK/ctl.sock
	mkfifo "$WORK/stdin"
	CLOCKS=$(scaled 1000000 10000)
	"$CCVM" run --control "$SOCK" -- "$G/tests/clockloop.glibc" "$CLOCKS" <"$WORK/stdin" >"$WORK/loop.out" 2>"$WORK/loop.err" &
	VM=$!
	exec 7>"$WORK/stdin"
	wait_for_line done "$WORK/loop.out"
	stats=$("$CCVM" ctl "$SOCK" stats)
	total=$(echo "$stats" | grep -o '"total":[0-9]*' | cut -d: -f2)
	if [ -n "$total" ] && [ "$total" -lt 100 ]; then pass "clock_gettime calls without VM exits" "$CLOCKS calls, $total VM exits"
	else fail "clock_gettime calls without VM exits" "$stats"; fi
	echo "$stats" | grep -q '"syscalls":{.*"write":1' && echo "$stats" | grep -q '"host_rss_bytes":[1-9]' && pass "stats fields" "syscalls by name, host RSS" || fail "stats fields" "$stats"
	[ "$(stat -c %a "$SOCK")" = 600 ] && pass "socket mode 0600" || fail "socket mode 0600" "mode $(stat -c %a "$SOCK")"
	"$CCVM" ctl "$SOCK" status | grep -q '"state":"running"' && pass "status running" || fail "status running"
	"$CCVM" ctl "$SOCK" pause | grep -q '"state":"paused"' && "$CCVM" ctl "$SOCK" status | grep -q '"state":"paused"' && pass "pause" || fail "pause"
	"$CCVM" ctl "$SOCK" resume | grep -q '"state":"running"' && pass "resume" || fail "resume"
	# exec: a new process in the running VM with ctl's stdin, stdout and stderr, its
	# status ctl's; a program that is not there is refused by name.
	out=$(echo in | tmo 60 "$CCVM" ctl "$SOCK" exec --cwd /tmp --env X=1 -- /bin/sh -c 'cat; pwd; echo $X $PPID; exit 3' 2>&1 | tr '\n' ' ')
	st=$(echo in | tmo 60 "$CCVM" ctl "$SOCK" exec /bin/sh -c 'exit 3' >/dev/null 2>&1; echo $?)
	[ "$out" = "in /tmp 1 0 " ] && [ "$st" = 3 ] && pass "ctl exec runs a process in the VM" "stdin, cwd, env, parent pid 0, status 3" ||
		fail "ctl exec runs a process in the VM" "status $st" "$out"
	out=$(tmo 60 "$CCVM" ctl "$SOCK" exec /no/such 2>&1); st=$?
	[ $st = 1 ] && echo "$out" | grep -q "cannot run '/no/such'" && pass "ctl exec of a missing program" "refused, exit 1" ||
		fail "ctl exec of a missing program" "status $st" "$out"
	out=$("$CCVM" ctl "$SOCK" frobnicate); st=$?
	[ $st = 1 ] && echo "$out" | grep -q '"ok":false' && pass "unknown ctl command" "ok=false, exit 1" || fail "unknown ctl command" "$out"
	reply=$(python3 - "$SOCK" "$(bound 5)" <<-'PY'
	import socket, sys
	s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(int(sys.argv[2]))
	s.sendall(b'this is not json\n'); a = s.recv(4096)
	s.sendall(b'{"cmd":"status"}\n'); b = s.recv(4096)
	t = socket.socket(socket.AF_UNIX); t.connect(sys.argv[1]); t.settimeout(int(sys.argv[2]))
	t.sendall(b'{' + b'x' * 70000); c = t.recv(4096)
	print(a.decode().strip()); print(b.decode().strip()); print(c.decode().strip())
	PY
	)
	echo "$reply" | sed -n 1p | grep -q '"ok":false,"error":"request is not valid JSON' && echo "$reply" | sed -n 2p | grep -q '"ok":true' && pass "garbage line" "error reply, connection still serves" || fail "garbage line" "$reply"
	echo "$reply" | sed -n 3p | grep -q 'request too long' && pass "oversized request" "error reply" || fail "oversized request" "$reply"
	"$CCVM" ctl "$SOCK" quit | grep -q '"ok":true' && pass "quit acknowledged" || fail "quit acknowledged"
	if ! wait_until 5 gone $VM; then fail "VM stopped after quit" "still running"; kill -9 $VM; else wait $VM; pass "VM stopped after quit" "status $?"; fi
	exec 7>&-
	[ ! -e "$SOCK" ] && pass "socket removed on exit" || fail "socket removed on exit" "left behind"

	touch "$WORK/not-a-socket"
	expect_fail "--control over a regular file" 1 "not a socket" -- "$CCVM" run --control "$WORK/not-a-socket" -- "$G/tests/hello.glibc"
	[ -f "$WORK/not-a-socket" ] && pass "regular file left in place" || fail "regular file left in place" "replaced"
	python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$WORK/stale.sock"
	"$CCVM" run --control "$WORK/stale.sock" -- "$G/tests/hello.glibc" >/dev/null 2>&1 && pass "stale socket replaced" || fail "stale socket replaced"
}

guest_signals_outside() {
	echo "== signals from outside the guest"
	# A script's background job starts with SIGINT ignored, and the guest would inherit
	# that, as exec gives it: env puts SIGINT back to its default first. The signal is sent
	# once the guest sleeps (its clock_nanosleep counted over the control socket): before
	# the guest exists, ccvm has nobody to give it to.
	SOCK=$WORK/sig.sock
	env --default-signal=INT "$CCVM" run --control "$SOCK" -- /bin/sleep 100 >/dev/null 2>"$WORK/sig.err" &
	VM=$!
	sleeping() { "$CCVM" ctl "$SOCK" stats 2>/dev/null | grep -q '"clock_nanosleep":[1-9]'; }
	wait_until 60 sleeping
	t0=$(date +%s.%N); kill -INT $VM; wait $VM; st=$?; t1=$(date +%s.%N)
	[ $st = 130 ] && pass "SIGINT to ccvm run -- sleep 100" "status 130 after $(printf '%.2f' "$(echo "$t1 - $t0" | bc)") s" ||
		fail "SIGINT to ccvm run -- sleep 100" "status $st (want 130)" "$(head -3 "$WORK/sig.err")"
	# The first SIGINT goes to a guest that ignores it; a second within 3 s stops the VM.
	env --default-signal=INT "$CCVM" run -- "$G/tests/signals.glibc" ignore-int >"$WORK/ign.out" 2>"$WORK/sig.err" &
	VM=$!
	wait_for_line ready "$WORK/ign.out"
	kill -INT $VM; sleep 1
	if kill -0 $VM 2>/dev/null; then
		kill -INT $VM; wait $VM; st=$?
		[ $st = 130 ] && pass "a guest that ignores SIGINT" "the first goes by, a second within 3 s stops it (130)" ||
			fail "a guest that ignores SIGINT" "second SIGINT: status $st (want 130)" "$(head -3 "$WORK/sig.err")"
	else
		wait $VM; fail "a guest that ignores SIGINT" "ended at the first one, status $?"
	fi
	# A guest that waits for its stdin until the test is done with it.
	mkfifo "$WORK/sig.in"
	"$CCVM" run --control "$SOCK" -- "$G/tests/clockloop.glibc" 1 <"$WORK/sig.in" >"$WORK/sig.out" 2>"$WORK/sig.err" &
	VM=$!
	exec 7>"$WORK/sig.in"
	wait_for_line done "$WORK/sig.out"
	out=$("$CCVM" ctl "$SOCK" kill SIGNOPE); st=$?
	[ $st = 1 ] && echo "$out" | grep -q '"ok":false.*SIGNAL' && pass "ctl kill SIGNOPE" "refused, exit 1" ||
		fail "ctl kill SIGNOPE" "status $st" "$out"
	reply=$("$CCVM" ctl "$SOCK" kill sigterm)
	wait_until 30 gone $VM || kill -9 $VM
	wait $VM; st=$?
	exec 7>&-
	[ $st = 143 ] && echo "$reply" | grep -q '"name":"SIGTERM"' && pass "ctl kill sigterm" "$reply, status 143" ||
		fail "ctl kill sigterm" "status $st (want 143)" "$reply"
}

guest_programs
guest_sandbox
guest_bad_input
guest_sockio
if full_suite; then
	guest_zipfbench
	guest_crash_reports
	guest_threads
	guest_sockets
	guest_control_socket
	guest_signals_outside
fi
