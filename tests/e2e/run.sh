#!/usr/bin/env bash
# End-to-end tests: real programs in real VMs.
#
# Usage: tests/e2e/run.sh CCVM_BINARY
#
# Each guest program in guest/tests/ runs natively and in ccvm, built as a static
# glibc, a static-PIE glibc and a static musl executable; stdout and the exit status
# must be identical. Then what differs from a
# native run by design: the sandbox, bad input, crash reports, the control socket.
# Needs /dev/kvm for the VMs: where it is absent, only the checks that need no VM run
# (bad input, the snapshot engine on plain memory) and the rest is reported skipped.
set -u
CCVM=$(realpath "${1:?usage: run.sh CCVM_BINARY}")
TOP=$(cd "$(dirname "$0")/../.." && pwd)
G=$TOP/build/guest
PASS=0 FAIL=0 SKIP=0
WORK=$(mktemp -d /tmp/ccvm-e2e.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

pass() { PASS=$((PASS + 1)); echo "ok   $1"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $1"; shift; for l in "$@"; do echo "     $l"; done; }

expect_fail() { # NAME STATUS PATTERN -- COMMAND...
	local name=$1 want=$2 pat=$3; shift 4
	timeout 20 "$@" >/dev/null 2>"$WORK/bad.err" </dev/null; local st=$?
	if [ "$st" = "$want" ] && grep -q -- "$pat" "$WORK/bad.err"; then
		pass "$name: status $st, '$(grep -o -- "$pat.*" "$WORK/bad.err" | head -1 | cut -c1-70)'"
	else
		fail "$name" "status $st (want $want)" "$(head -3 "$WORK/bad.err")"
	fi
}

echo "== bad input that needs no VM"
# Numbers must be finite and in range; a FIFO is not an image (and is not waited on).
H=$G/tests/hello.glibc
expect_fail "--snapshot-rate inf" 2 "snapshot-rate inf: MB/s" -- "$CCVM" run --snapshot-rate inf -- "$H"
expect_fail "--snapshot-rate 1e300" 2 "snapshot-rate 1e300: MB/s" -- "$CCVM" run --snapshot-rate 1e300 -- "$H"
expect_fail "--threshold nan" 2 "threshold nan: a coverage" -- "$CCVM" run --threshold nan -- "$H"
expect_fail "--snapshot-every inf" 2 "snapshot-every inf: a positive" -- "$CCVM" run --snapshot-every inf -- "$H"
expect_fail "--pause-budget-ms nan" 2 "pause-budget-ms nan: milliseconds" -- "$CCVM" run --pause-budget-ms nan -- "$H"
mkfifo "$WORK/fifo"
start=$(date +%s%N)
expect_fail "inspect of a FIFO" 1 "not a regular file" -- "$CCVM" inspect "$WORK/fifo"
[ $(( ($(date +%s%N) - start) / 1000000 )) -lt 5000 ] && pass "inspect of a FIFO answers at once" || fail "inspect of a FIFO took 5 s or more"
expect_fail "restore of a FIFO" 1 "not a regular file" -- "$CCVM" restore "$WORK/fifo"
expect_fail "--snapshot-compress gzip" 2 "snapshot-compress gzip: zstd, lz4 or none" -- "$CCVM" run --snapshot-compress gzip -- "$H"
expect_fail "--snapshot-compress-level 30" 2 "does not suit zstd" -- "$CCVM" run --snapshot-compress zstd --snapshot-compress-level 30 -- "$H"
expect_fail "--snapshot-threads 0" 2 "snapshot-threads 0: from 1" -- "$CCVM" run --snapshot-threads 0 -- "$H"
expect_fail "--snapshot-full-every alone" 2 "needs --snapshot-incremental" -- "$CCVM" run --snapshot-full-every 3 -- "$H"
expect_fail "--snapshot-incremental under stop" 2 "needs --snapshot-policy cow or ccow" -- "$CCVM" run --snapshot-incremental --snapshot-policy stop -- "$H"
expect_fail "merge without OUT" 2 "usage: ccvm merge CHILD OUT" -- "$CCVM" merge "$WORK/fifo"
expect_fail "merge of a missing image" 1 "cannot merge" -- "$CCVM" merge "$WORK/none.img" "$WORK/out.img"

echo "== the snapshot engine on plain memory (bench/engine-bench: host threads, no VM)"
# The real engine, userfaultfd and image files; every image must equal the memory at
# its instant, and every field the benchmark promises must be there.
EB=$TOP/bench/engine-bench
eb_check() { # NAME ARGS...: run, then check the JSON line
	local name=$1; shift
	local out; out=$(timeout 300 "$EB" --mem 32M --threads 2 --alpha 0.99 --snapshot-every 0.5 \
		--duration 2 --dir "$WORK" --verify --json "$@" 2>"$WORK/eb.err"); local st=$?
	local why; why=$(python3 - "$out" "$@" <<'PY' 2>&1
import json, sys
d = json.loads(sys.argv[1])
need = ["policy", "updates_per_s", "during", "max_stall_ms", "p999_batch_ms", "snapshots",
        "traps", "pause_us_max", "exact"]
missing = [k for k in need if k not in d]
assert not missing, "missing fields %s" % missing
assert d["exact"] is True, "an image differs from memory at its instant"
assert d["snapshots"] >= 2, "%d snapshots" % d["snapshots"]
assert d["updates_per_s"] > 0 and d["during"] > 0
if d["policy"] in ("cow", "ccow", "fork"):
    assert d["traps"] > 0, "no write was trapped"
if "0" in sys.argv[2:]:
    assert d["regions_precopied"] > 0, "threshold 0 copied no region"
print("%d snapshots, exact, during %.2f, %d traps" % (d["snapshots"], d["during"], d["traps"]))
PY
); local ok=$?
	if [ "$st" = 0 ] && [ "$ok" = 0 ]; then pass "engine-bench $name: $why"
	else fail "engine-bench $name" "status $st" "$why" "$(head -3 "$WORK/eb.err")"; fi
}
eb_check stop --policy stop
eb_check cow --policy cow
eb_check "ccow 0.8" --policy ccow
eb_check "ccow 0 scattered" --policy ccow --threshold 0 --scatter
eb_check fork --policy fork
eb_check "cow, zstd, text" --policy cow --data text --compress zstd
eb_check "ccow 0, lz4, 3 threads" --policy ccow --threshold 0 --scatter --data text --compress lz4 --snapshot-threads 3
eb_check "stop, zstd" --policy stop --data text --compress zstd
iout=$(timeout 300 "$EB" --incremental-pct 10 --mem 32M --threads 0 --policy ccow --dir "$WORK" --data text --json 2>"$WORK/eb.err")
if python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["pages_held"] == d["pages_rewritten"] > 0 and d["inc_bytes"] * 5 < d["full_bytes"], d' "$iout" 2>"$WORK/inc.err"; then
	pass "engine-bench --incremental-pct 10: the child holds exactly the rewritten pages, $(echo "$iout" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%d of %d bytes" % (d["inc_bytes"], d["full_bytes"]))')"
else
	fail "engine-bench --incremental-pct 10" "$iout" "$(head -3 "$WORK/eb.err" "$WORK/inc.err")"
fi
expect_fail "engine-bench --policy foo" 2 "bad value for --policy" -- "$EB" --policy foo --dir "$WORK"
ls "$WORK"/engine-bench-* >/dev/null 2>&1 && fail "engine-bench left images behind" || pass "engine-bench removed its images"

echo "== zipfbench --threads (natively; the same binary runs in VMs)"
zout=$("$G/zipfbench" --threads 3 --size 8M --write-total 30M --report-ms 0 2>&1)
z1=$("$G/zipfbench" --size 8M --alpha 0.99 --write-total 64M --report-ms 0 2>&1)
if echo "$zout" | grep -q "^summary updates=30720 " &&
   echo "$z1" | grep -q "checksum=c03d8284aaea3b69"; then
	pass "zipfbench: 3 threads share --write-total; one thread writes the same bytes as ever"
else
	fail "zipfbench --threads" "$zout" "$z1"
fi

echo "== bench/ycsb open loop against a native Redis that stops for 2 s (no VM)"
# Latency from intended start times: a 2 s pause of the server must show in the
# maximum, the p99.9 and the longest stall, not only in the requests in flight.
if command -v redis-server >/dev/null; then
	YP=$((20000 + $$ % 20000))
	redis-server --port "$YP" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
		--pidfile "$WORK/ycsb-redis.pid" --logfile "$WORK/ycsb-redis.log" >/dev/null
	for _ in $(seq 50); do [ -s "$WORK/ycsb-redis.pid" ] && break; sleep 0.1; done
	RPID=$(cat "$WORK/ycsb-redis.pid" 2>/dev/null)
	timeout 60 "$TOP/bench/ycsb" --port "$YP" --records 2000 --phase load --quiet >/dev/null 2>&1
	(sleep 2; kill -STOP "$RPID"; sleep 2; kill -CONT "$RPID") &
	yout=$(timeout 60 "$TOP/bench/ycsb" --port "$YP" --records 2000 --phase run --duration 6 \
		--target 4000 --clients 4 --json --quiet 2>&1 | tail -1)
	wait
	kill "$RPID" 2>/dev/null
	why=$(python3 - "$yout" <<'PY' 2>&1
import json, sys
d = json.loads(sys.argv[1])
assert d["open_loop"] is True, "not open loop"
assert d["max_us"] >= 2.0e6, "max %.0f us: the 2 s pause is missing" % d["max_us"]
assert d["stall_ms"] >= 1900, "longest stall %.0f ms" % d["stall_ms"]
assert d["p999_us"] >= 1.0e6, "p99.9 %.0f us does not reflect the pause" % d["p999_us"]
print("p50 %.0f us, p99.9 %.2f s, max %.2f s, stall %.2f s" % (d["p50_us"], d["p999_us"] / 1e6,
      d["max_us"] / 1e6, d["stall_ms"] / 1e3))
PY
)
	[ $? = 0 ] && pass "ycsb --target: $why" || fail "ycsb --target" "$why" "$yout"
else
	SKIP=$((SKIP + 1)); echo "skip ycsb --target: no redis-server (make deps installs it)"
fi

echo "== bench/peers/redis.py: native Redis with and without BGSAVE, open loop (no VM)"
# The driver's native half: BGSAVE on the end-to-start cadence, ycsb's histograms
# merged over the seconds a snapshot ran, every figure present.
if command -v redis-server >/dev/null; then
	RECORDS=5000 DURATION=5 GAP=1 ROUNDS=1 WORKLOADS=ycsb-a SYSTEMS="native native-bgsave" \
		OUT="$WORK/redis" IMGDIR="$WORK" timeout 300 "$TOP/bench/peers/redis.py" >"$WORK/redis.out" 2>&1; st=$?
	why=$(python3 - "$WORK/redis/redis_peers.csv" <<'PY' 2>&1
import csv, sys
rows = {r["system"]: r for r in csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#"))}
assert set(rows) == {"native", "native-bgsave"}, sorted(rows)
b, n = rows["native-bgsave"], rows["native"]
assert int(b["snapshots"]) >= 1 and int(n["snapshots"]) == 0, (b["snapshots"], n["snapshots"])
assert float(b["image_mb"]) > 1, "rdb of %s MiB" % b["image_mb"]
assert float(b["p999_us"]) >= float(b["p99_us"]) > 0, (b["p99_us"], b["p999_us"])
assert float(b["run_max_us"]) >= float(b["max_us"]) > 0
assert 0 < float(b["during"]) < 2 and float(b["duration_s"]) > 0
print("BGSAVE %d x %.2f s, p99.9 during %.1f ms" % (int(b["snapshots"]), float(b["duration_s"]),
      float(b["p999_us"]) / 1e3))
PY
); ok=$?
	[ "$st" = 0 ] && [ "$ok" = 0 ] && pass "redis.py native: $why" || fail "redis.py native" "status $st" "$why" "$(tail -3 "$WORK/redis.out")"
	expect_fail "redis.py WORKLOADS=ycsb-z" 1 "WORKLOADS: unknown ycsb-z" -- env WORKLOADS=ycsb-z "$TOP/bench/peers/redis.py"
else
	SKIP=$((SKIP + 1)); echo "skip redis.py: no redis-server (make deps installs it)"
fi

echo "== the QEMU peer's guest and driver (bench/peers; QEMU under TCG, no KVM needed)"
# The bare-metal guest must write what zipfbench writes (same checksum after the same
# updates), refuse bad options, and the driver must take QEMU background snapshots and
# report every column. Under TCG the figures are not measurements, only the plumbing.
PG=$TOP/build/peers/zipfguest.bin
if command -v qemu-system-x86_64 >/dev/null && [ -f "$PG" ]; then
	pg_run() { # APPEND: the guest under TCG; its console on stdout
		timeout 120 qemu-system-x86_64 -accel tcg -m 64 -nodefaults -display none -no-reboot \
			-kernel "$PG" -append "$1" -debugcon stdio -device isa-debug-exit,iobase=0xf4,iosize=4 \
			</dev/null 2>"$WORK/pg.err"
	}
	for sc in 0 1; do
		scf=; [ $sc = 1 ] && scf=--scatter
		want=$("$G/zipfbench" --size 8M --alpha 0.99 $scf --seed 7 --write-total 200000K --report-ms 0 |
			grep -o 'checksum=[0-9a-f]*')
		got=$(pg_run "size=8M alpha=0.99 scatter=$sc seed=7 updates=200000"); st=$?
		if [ "$st" = 1 ] && [ -n "$want" ] && echo "$got" | grep -q "^$want\$"; then
			pass "peer guest writes zipfbench's bytes (scatter $sc): $want"
		else
			fail "peer guest (scatter $sc)" "status $st (want 1), zipfbench $want" "$(echo "$got" | tail -2)" "$(head -2 "$WORK/pg.err")"
		fi
	done
	got=$(pg_run "size=8M alpha=nope"); st=$?
	[ "$st" = 3 ] && echo "$got" | grep -q "zipfguest: bad option" && pass "peer guest refuses alpha=nope (status 3)" ||
		fail "peer guest bad option" "status $st" "$got"
	got=$(pg_run "size=1G"); st=$?
	[ "$st" = 3 ] && echo "$got" | grep -q "does not fit" && pass "peer guest refuses an area larger than its RAM" ||
		fail "peer guest size=1G" "status $st" "$got"
	QUICK=1 ACCEL=tcg SYSTEMS=qemu-bg SIZE=32 WARMUP=1 DURATION=4 OUT="$WORK/peers" IMGDIR="$WORK" \
		timeout 300 "$TOP/bench/peers/peers.py" >"$WORK/peers.out" 2>&1; st=$?
	why=$(python3 - "$WORK/peers/peers_quick.csv" <<'PY' 2>&1
import csv, sys
lines = [l for l in open(sys.argv[1]) if not l.startswith("#")]
rows = list(csv.DictReader(lines))
want = "system,workload,round,during,lost_s,stall_ms,duration_s,extra_mb,image_mb".split(",")
assert list(rows[0].keys()) == want, "columns %s" % list(rows[0].keys())
r = [r for r in rows if r["system"] == "qemu-bg"]
assert len(r) == 1 and not [x for x in rows if x["system"] == "qemu-none"], [x["system"] for x in rows]
r = r[0]
for k in want[3:]:
    float(r[k])
assert float(r["duration_s"]) > 0, "no snapshot duration"
assert float(r["image_mb"]) >= 32, "image %s MiB < the 32 MiB area" % r["image_mb"]
assert 0 < float(r["during"]) < 1.5, "during %s" % r["during"]
print("qemu-bg: image %.0f MiB, snapshot %.2f s" % (float(r["image_mb"]), float(r["duration_s"])))
PY
); ok=$?
	[ "$st" = 0 ] && [ "$ok" = 0 ] && pass "peers.py QUICK (QEMU background-snapshot under TCG): $why" ||
		fail "peers.py QUICK" "status $st" "$why" "$(tail -3 "$WORK/peers.out")"
	ROUNDS=1 WORKLOADS=zipf-a0.99 SYSTEMS=native SIZE=32 WARMUP=1 DURATION=2 OUT="$WORK/peers" \
		IMGDIR="$WORK" timeout 120 "$TOP/bench/peers/peers.py" >"$WORK/peers.out" 2>&1; st=$?
	row=$(grep '^1,zipf-a0.99,native,' "$WORK/peers/peers.csv" 2>/dev/null)
	if [ "$st" = 0 ] && awk -F, '{exit !($4 > 0 && $8 > 0 && $8 < 1000)}' <<<"$row" &&
	   grep -q '| zipf-a0.99 | native | 1 |' "$WORK/peers/peers.md"; then
		pass "peers.py: zipfbench natively, $(cut -d, -f4 <<<"$row") updates/s, reports parsed"
	else
		fail "peers.py native" "status $st" "$row" "$(tail -3 "$WORK/peers.out")"
	fi
	OUT="$WORK/peers" "$TOP/bench/peers/table.py" 2>/dev/null
	grep -q '^| zipf-a0.99 | native | 1 | - | - | [0-9]' "$WORK/peers/comparison.md" &&
		grep -q 'not measured yet: redis_peers_summary.csv' "$WORK/peers/comparison.md" &&
		pass "table.py: the comparison table from the summaries, missing ones named" ||
		fail "table.py" "$(tail -3 "$WORK/peers/comparison.md" 2>&1)"
	expect_fail "peers.py SYSTEMS=foo" 1 "SYSTEMS: unknown foo" -- env SYSTEMS=foo ACCEL=tcg "$TOP/bench/peers/peers.py"
	expect_fail "peers.py SIZE=abc" 1 "SIZE=abc: not a number" -- env SIZE=abc ACCEL=tcg "$TOP/bench/peers/peers.py"
	expect_fail "peers.py, a guest QEMU cannot allocate" 1 "QEMU did not start\|QMP" -- \
		env QUICK=1 ACCEL=tcg SYSTEMS=qemu-bg SIZE=100000000 IMGDIR="$WORK" "$TOP/bench/peers/peers.py"
	if [ ! -e /dev/kvm ]; then
		expect_fail "peers.py without /dev/kvm" 1 "no /dev/kvm" -- env QUICK=1 OUT="$WORK/peers" "$TOP/bench/peers/peers.py"
	fi
else
	SKIP=$((SKIP + 1)); echo "skip the QEMU peer: no qemu-system-x86_64 or build/peers (make deps, make peer-guest)"
fi

if [ ! -e /dev/kvm ]; then
	echo "e2e: /dev/kvm is absent on this machine: the end-to-end tests that run VMs are skipped"
	echo "$PASS passed, $FAIL failed, $((SKIP + 1)) skipped"
	[ "$FAIL" = 0 ]
	exit
fi

# run_both NAME -- PROGRAM ARGS: native vs ccvm, stdout and status must match.
# A program argument @DIR@ becomes a fresh empty directory for each run.
run_both() {
	local name=$1 want_ok=; shift 2
	case $name in files.* | mem.* | clocks.*) want_ok=${name%%.*} ;; esac
	local d n v nd vd args=()
	nd=$(mktemp -d "$WORK/n.XXXX"); vd=$(mktemp -d "$WORK/v.XXXX")
	for a in "$@"; do args+=("${a//@DIR@/$nd}"); done
	(cd "$nd" && CCVM_TEST_VAR=one CCVM_TEST_SPACE="a b" timeout 60 "${args[@]}" >"$WORK/native.out" 2>"$WORK/native.err" </dev/null); n=$?
	args=(); for a in "$@"; do args+=("${a//@DIR@/$vd}"); done
	(cd "$vd" && CCVM_TEST_VAR=one CCVM_TEST_SPACE="a b" timeout 60 "$CCVM" run --mem 512M -- "${args[@]}" >"$WORK/ccvm.out" 2>"$WORK/ccvm.err" </dev/null); v=$?
	# Identical is not enough: a check that fails the same way natively and in ccvm
	# is still a failure, and a program that says "<name> ok" must say it.
	if grep -q '^FAIL' "$WORK/native.out" "$WORK/ccvm.out"; then
		fail "$name" "$(grep -h '^FAIL' "$WORK/native.out" "$WORK/ccvm.out" | head -2)"
	elif [ -n "$want_ok" ] && ! grep -q "^$want_ok ok\$" "$WORK/ccvm.out"; then
		fail "$name" "no '$want_ok ok' line" "$(tail -3 "$WORK/ccvm.out")"
	elif [ "$n" = "$v" ] && cmp -s "$WORK/native.out" "$WORK/ccvm.out"; then
		pass "$name (status $n)"
	else
		fail "$name" "native status $n, ccvm status $v" "$(diff "$WORK/native.out" "$WORK/ccvm.out" | head -5)" "$(head -3 "$WORK/ccvm.err")"
	fi
}

echo "== guest programs: native vs ccvm (static glibc, static-PIE glibc, static musl, dynamic glibc)"
for libc in glibc spie musl dyn; do
	T=$G/tests
	run_both "hello.$libc" -- "$T/hello.$libc" a "b c" 7
	run_both "env.$libc" -- "$T/env.$libc" x "y z" ""
	run_both "files.$libc" -- "$T/files.$libc" @DIR@
	run_both "mem.$libc" -- "$T/mem.$libc" "$CCVM"
	run_both "clocks.$libc" -- "$T/clocks.$libc" 200000
	run_both "futex.$libc" -- "$T/futex.$libc"
	run_both "events.$libc" -- "$T/events.$libc"
	run_both "threads.$libc" -- "$T/threads.$libc"
	# A second thread rewrites paths and msghdrs under open/stat/sendmsg/recvmsg.
	run_both "hostile.$libc" -- "$T/hostile.$libc"
	# Handlers, masks, sigaltstack, tgkill, alarm in a read, SIGSEGV + siglongjmp,
	# timers, sigsuspend, sigtimedwait; it ends killed by SIGPIPE (status 141).
	run_both "signals.$libc" -- "$T/signals.$libc"
	for how in null ud2 div0 abort int3 "exit 42" "exit 0"; do
		# shellcheck disable=SC2086
		run_both "crash $how.$libc" -- "$T/crash.$libc" $how
	done
done

echo "== zipfbench: same checksum natively and in ccvm"
for z in zipfbench zipfbench.musl; do
	args=(--size 16M --write-total 64M --report-ms 0 --seed 7)
	nsum=$("$G/$z" "${args[@]}" | grep -o 'checksum=[0-9a-f]*')
	vsum=$(timeout 120 "$CCVM" run --mem 256M -- "$G/$z" "${args[@]}" | grep -o 'checksum=[0-9a-f]*')
	[ -n "$nsum" ] && [ "$nsum" = "$vsum" ] && pass "$z $nsum" || fail "$z" "native '$nsum' ccvm '$vsum'"
	vsum2=$(timeout 120 "$CCVM" run --mem 256M -- "$G/$z" "${args[@]}" --scatter | grep -o 'checksum=[0-9a-f]*')
	nsum2=$("$G/$z" "${args[@]}" --scatter | grep -o 'checksum=[0-9a-f]*')
	[ -n "$nsum2" ] && [ "$nsum2" = "$vsum2" ] && [ "$nsum2" != "$nsum" ] && pass "$z --scatter $nsum2" || fail "$z --scatter" "native '$nsum2' ccvm '$vsum2'"
done

echo "== crash report"
"$CCVM" run -- "$G/tests/crash.glibc" null >/dev/null 2>"$WORK/crash.err"; st=$?
if [ $st = 139 ] && grep -q 'crashed: #PF page fault' "$WORK/crash.err" && grep -q 'faulting address 0' "$WORK/crash.err" && grep -q '  rip ' "$WORK/crash.err"; then
	pass "NULL dereference: #PF report, status 139"
else
	fail "NULL dereference report" "status $st" "$(cat "$WORK/crash.err")"
fi
"$CCVM" run -- "$G/tests/crash.musl" ud2 >/dev/null 2>"$WORK/crash.err"; st=$?
[ $st = 132 ] && grep -q '#UD invalid opcode' "$WORK/crash.err" && pass "ud2: #UD report, status 132" || fail "ud2 report" "status $st" "$(cat "$WORK/crash.err")"

echo "== sandbox"
mkdir -p "$WORK/rw"
(cd "$WORK/rw" && "$CCVM" run --rw "$WORK/rw" -- "$G/tests/sandbox.glibc" "$WORK/rw" >"$WORK/sandbox.out" 2>"$WORK/sandbox.err" </dev/null)
if diff -u "$TOP/tests/e2e/expected/sandbox.txt" "$WORK/sandbox.out" >"$WORK/sandbox.diff"; then
	pass "sandbox probes (writes, links, /proc, devices, pointers, signals)"
else
	fail "sandbox probes" "$(head -20 "$WORK/sandbox.diff")"
fi
n=$(grep -c 'unsupported system call' "$WORK/sandbox.err")
[ "$n" = 1 ] && pass "unknown syscall logged once ($(grep -o 'system call [^ ]* ([0-9]*)' "$WORK/sandbox.err"))" || fail "unknown syscall logged $n times"
[ ! -e /etc/ccvm-sandbox-probe ] && [ ! -e /ccvm-sandbox-probe ] && pass "nothing written outside --rw" || fail "a probe file escaped the sandbox"

R=$WORK/root; mkdir -p "$R/rw" "$R/bin"; cp "$G/tests/sandbox.musl" "$R/bin/sandbox"; echo inside >"$R/inside.txt"
"$CCVM" run --root "$R" --rw "$R/rw" -- /bin/sandbox /rw /inside.txt /../../../etc/hostname ../../../../../etc/hostname "/proc/../etc/hostname" >"$WORK/root.out" 2>/dev/null </dev/null
if grep -q '^open /inside.txt: ok' "$WORK/root.out" && [ "$(grep -c '^open .*etc/hostname: ENOENT' "$WORK/root.out")" = 3 ] && grep -q '^create in rw dir: ok' "$WORK/root.out" && [ -f "$R/rw/probe.txt" ]; then
	pass "--root confines path resolution (.. and absolute paths stay inside)"
else
	fail "--root confinement" "$(tail -6 "$WORK/root.out")"
fi
# A guest-made symlink to a host AF_UNIX socket outside --root does not reach it.
cp "$G/tests/net.glibc" "$R/bin/net"; ln -sf "$WORK/outside.sock" "$R/rw/esc.sock"
"$G/tests/net.glibc" unix-listen "$WORK/outside.sock" & LPID=$!
for _ in $(seq 50); do [ -S "$WORK/outside.sock" ] && break; sleep 0.05; done
"$G/tests/net.glibc" unix-connect "$WORK/outside.sock" >"$WORK/unix-native.out"
timeout 20 "$CCVM" run --root "$R" --rw "$R/rw" -- /bin/net unix-connect /rw/esc.sock >"$WORK/unix-guest.out" 2>/dev/null </dev/null
kill $LPID 2>/dev/null; wait $LPID 2>/dev/null
grep -q "unix connect *0" "$WORK/unix-native.out" && grep -q "unix connect *-1 No such file" "$WORK/unix-guest.out" \
	&& pass "AF_UNIX connect through a symlink stays inside --root (the host socket it names is not reached)" \
	|| fail "AF_UNIX symlink escape" "$(cat "$WORK/unix-native.out")" "$(cat "$WORK/unix-guest.out")"

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

echo "== threads"
# The thread cap: --vcpus N runs N threads at most; the next pthread_create fails with
# EAGAIN and ccvm says why.
for libc in glibc musl; do
	out=$(timeout 30 "$CCVM" run --vcpus 3 -- "$T/threads.$libc" cap 2>"$WORK/cap.err")
	if [ "$out" = "created 2 threads, then: Resource temporarily unavailable" ] &&
		grep -q "the most --vcpus 3 allows" "$WORK/cap.err"; then
		pass "--vcpus 3 caps $libc at 3 threads: '$out'"
	else
		fail "--vcpus 3 ($libc)" "$out" "$(head -3 "$WORK/cap.err")"
	fi
done
# Fork is not a thread: refused with ENOSYS and a log line, the program goes on.
out=$(timeout 30 "$CCVM" run -- "$(realpath "$(type -P sh)")" -c 'echo in-shell; /bin/true; echo "status $?"' 2>"$WORK/fork.err")
if grep -q "a new process (fork, vfork, posix_spawn) is not supported" "$WORK/fork.err" &&
	[ "$(echo "$out" | head -1)" = in-shell ]; then
	pass "fork refused with a clear log line: '$(grep -o 'a new process.*supported' "$WORK/fork.err" | head -1)'"
else
	fail "fork refused" "$out" "$(head -3 "$WORK/fork.err")"
fi

echo "== sockets"
# The same program natively and in ccvm, its port published on another host port: the
# guest sees its own port numbers throughout.
P=$((20000 + RANDOM % 20000)); H=$((P + 1))
for libc in glibc spie musl dyn; do
	nd=$(mktemp -d "$WORK/nn.XXXX"); vd=$(mktemp -d "$WORK/vn.XXXX")
	(cd "$nd" && timeout 60 "$G/tests/net.$libc" "$P" >"$WORK/native.out" 2>&1 </dev/null); n=$?
	(cd "$vd" && timeout 60 "$CCVM" run --publish "127.0.0.1:$H:$P" -- "$G/tests/net.$libc" "$P" \
		>"$WORK/ccvm.out" 2>"$WORK/ccvm.err" </dev/null); v=$?
	[ $n = 0 ] && [ $v = 0 ] && cmp -s "$WORK/native.out" "$WORK/ccvm.out" && grep -q "got 'pair'" "$WORK/ccvm.out" \
		&& pass "net.$libc: TCP, UDP, AF_UNIX as on the host (guest port $P on host port $H)" \
		|| fail "net.$libc" "native $n ccvm $v" "$(diff "$WORK/native.out" "$WORK/ccvm.out" | head -5)" "$(head -3 "$WORK/ccvm.err")"
done
# The exitless socket path (vmm/linux/fastio.c): an epoll server and its clients give
# the host's answers in every build; the dynamic one takes the path, and its write
# backlog, blocked writer and close with bytes still owed all happen; --fastio off
# gives the same answers through system calls only.
for libc in glibc musl dyn; do
	(timeout 60 "$G/tests/sockio.$libc" "$P" >"$WORK/native.out" 2>&1 </dev/null); n=$?
	(timeout 120 "$CCVM" run -v --publish "127.0.0.1:$H:$P" -- "$G/tests/sockio.$libc" "$P" \
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
		&& pass "sockio.$libc: echo, bulk, close and peek as on the host${used:+ (${used#fastio: })}" \
		|| fail "sockio.$libc" "native $n ccvm $v exitless '$used'" \
			"$(diff "$WORK/native.out" "$WORK/ccvm.out" | head -5)" "$(grep -v "^ccvm: fastio" "$WORK/ccvm.err" | head -3)"
done
(timeout 120 "$CCVM" run --fastio off --publish "127.0.0.1:$H:$P" -- "$G/tests/sockio.dyn" "$P" \
	>"$WORK/ccvm.out" 2>"$WORK/ccvm.err" </dev/null); v=$?
[ $v = 0 ] && cmp -s "$WORK/native.out" "$WORK/ccvm.out" && ! grep -q "without an exit" "$WORK/ccvm.err" \
	&& pass "sockio.dyn with --fastio off: the same answers, every call an exit" \
	|| fail "sockio.dyn --fastio off" "status $v" "$(diff "$WORK/native.out" "$WORK/ccvm.out" | head -3)"
timeout 10 "$CCVM" run --fastio maybe -- /bin/true >/dev/null 2>"$WORK/ccvm.err"; v=$?
[ $v != 0 ] && grep -q "fastio maybe: on or off" "$WORK/ccvm.err" \
	&& pass "--fastio maybe refused: '$(head -1 "$WORK/ccvm.err")'" \
	|| fail "--fastio maybe" "status $v" "$(head -2 "$WORK/ccvm.err")"
# A port that is not published cannot be bound; a client outside reaches a published one.
timeout 60 "$CCVM" run -- "$G/tests/net.glibc" "$P" >"$WORK/ccvm.out" 2>"$WORK/ccvm.err" </dev/null
grep -q "bind 127.0.0.1:PORT *-1 Permission denied" "$WORK/ccvm.out" && grep -q "port $P refused: not published" "$WORK/ccvm.err" \
	&& grep -q "listen *-1 Permission denied" "$WORK/ccvm.out" && grep -q "listen refused" "$WORK/ccvm.err" \
	&& pass "bind to an unpublished port refused: '$(grep -o "guest bind.*" "$WORK/ccvm.err" | head -1)'" \
	|| fail "bind to an unpublished port" "$(head -3 "$WORK/ccvm.out")" "$(head -2 "$WORK/ccvm.err")"
timeout 60 "$CCVM" run --publish "$H:$P" -- "$G/tests/net.dyn" echo "$P" >"$WORK/echo.out" 2>&1 </dev/null &
EPID=$!
got=
for _ in $(seq 100); do
	if exec 7<>"/dev/tcp/127.0.0.1/$H" 2>/dev/null; then
		printf 'through the published port\n' >&7
		read -r -t 10 got <&7
		exec 7<&-
		break
	fi
	sleep 0.1
done
wait $EPID; st=$?
[ "$got" = "through the published port" ] && [ $st = 0 ] \
	&& pass "a host client on 127.0.0.1:$H reached the guest's server on port $P" \
	|| fail "host client to a published port" "got '$got' status $st" "$(tail -2 "$WORK/echo.out")"
timeout 60 "$CCVM" run -- "$G/tests/net.glibc" connect 192.0.2.1 80 >"$WORK/ccvm.out" 2>"$WORK/ccvm.err" </dev/null
grep -q "connect *-1 Network is unreachable" "$WORK/ccvm.out" && grep -q "non-loopback address refused" "$WORK/ccvm.err" \
	&& pass "connection beyond loopback refused without --net host" \
	|| fail "connection beyond loopback" "$(cat "$WORK/ccvm.out")" "$(head -2 "$WORK/ccvm.err")"
for spec in abc 80 70000:80 8080:0 1.2.3:8080:80 :8080:80 "[::1]8080:80" "[::1:8080:80"; do
	expect_fail "--publish $spec" 2 "expected \[HOSTIP:\]HOSTPORT:GUESTPORT" -- "$CCVM" run --publish "$spec" -- "$G/tests/hello.glibc"
done
expect_fail "--publish twice for one guest port" 2 "already published" -- "$CCVM" run --publish 8080:80 --publish 8081:80 -- "$G/tests/hello.glibc"
expect_fail "--net bogus" 2 "the only network mode is 'host'" -- "$CCVM" run --net bogus -- "$G/tests/hello.glibc"

echo "== control socket"
SOCK=$WORK/ctl.sock
mkfifo "$WORK/stdin"
"$CCVM" run --control "$SOCK" -- "$G/tests/clockloop.glibc" 1000000 <"$WORK/stdin" >"$WORK/loop.out" 2>"$WORK/loop.err" &
VM=$!
exec 7>"$WORK/stdin"
for _ in $(seq 100); do grep -q done "$WORK/loop.out" 2>/dev/null && break; sleep 0.1; done
stats=$("$CCVM" ctl "$SOCK" stats)
total=$(echo "$stats" | grep -o '"total":[0-9]*' | cut -d: -f2)
if [ -n "$total" ] && [ "$total" -lt 100 ]; then pass "10^6 clock_gettime calls: $total VM exits"; else fail "clock exits" "$stats"; fi
echo "$stats" | grep -q '"syscalls":{.*"write":1' && echo "$stats" | grep -q '"host_rss_bytes":[1-9]' && pass "stats: syscalls by name, host RSS" || fail "stats fields" "$stats"
[ "$(stat -c %a "$SOCK")" = 600 ] && pass "socket mode 0600" || fail "socket mode $(stat -c %a "$SOCK")"
"$CCVM" ctl "$SOCK" status | grep -q '"state":"running"' && pass "status: running" || fail "status"
"$CCVM" ctl "$SOCK" pause | grep -q '"state":"paused"' && "$CCVM" ctl "$SOCK" status | grep -q '"state":"paused"' && pass "pause" || fail "pause"
"$CCVM" ctl "$SOCK" resume | grep -q '"state":"running"' && pass "resume" || fail "resume"
out=$("$CCVM" ctl "$SOCK" frobnicate); st=$?
[ $st = 1 ] && echo "$out" | grep -q '"ok":false' && pass "unknown command: ok=false, exit 1" || fail "unknown ctl command" "$out"
reply=$(python3 - "$SOCK" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(5)
s.sendall(b'this is not json\n'); a = s.recv(4096)
s.sendall(b'{"cmd":"status"}\n'); b = s.recv(4096)
t = socket.socket(socket.AF_UNIX); t.connect(sys.argv[1]); t.settimeout(5)
t.sendall(b'{' + b'x' * 70000); c = t.recv(4096)
print(a.decode().strip()); print(b.decode().strip()); print(c.decode().strip())
PY
)
echo "$reply" | sed -n 1p | grep -q '"ok":false,"error":"request is not valid JSON' && echo "$reply" | sed -n 2p | grep -q '"ok":true' && pass "garbage line: error reply, connection still serves" || fail "garbage line" "$reply"
echo "$reply" | sed -n 3p | grep -q 'request too long' && pass "oversized request: error reply" || fail "oversized request" "$reply"
"$CCVM" ctl "$SOCK" quit | grep -q '"ok":true' && pass "quit acknowledged" || fail "quit"
for _ in $(seq 50); do kill -0 $VM 2>/dev/null || break; sleep 0.1; done
if kill -0 $VM 2>/dev/null; then fail "VM still running after quit"; kill -9 $VM; else wait $VM; pass "VM stopped after quit (status $?)"; fi
exec 7>&-
[ ! -e "$SOCK" ] && pass "socket removed on exit" || fail "socket left behind"

touch "$WORK/not-a-socket"
expect_fail "--control over a regular file" 1 "not a socket" -- "$CCVM" run --control "$WORK/not-a-socket" -- "$G/tests/hello.glibc"
[ -f "$WORK/not-a-socket" ] && pass "regular file left in place" || fail "regular file replaced"
python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$WORK/stale.sock"
"$CCVM" run --control "$WORK/stale.sock" -- "$G/tests/hello.glibc" >/dev/null 2>&1 && pass "stale socket replaced" || fail "stale socket"

echo "== signals from outside the guest"
# A script's background job starts with SIGINT ignored, and the guest would inherit
# that, as exec gives it: env puts SIGINT back to its default first.
env --default-signal=INT "$CCVM" run -- /bin/sleep 100 >/dev/null 2>"$WORK/sig.err" &
VM=$!
sleep 1
t0=$(date +%s.%N); kill -INT $VM; wait $VM; st=$?; t1=$(date +%s.%N)
[ $st = 130 ] && pass "SIGINT to ccvm run -- sleep 100: status 130 after $(printf '%.2f' "$(echo "$t1 - $t0" | bc)") s" ||
	fail "SIGINT to ccvm run -- sleep 100" "status $st (want 130)" "$(head -3 "$WORK/sig.err")"
env --default-signal=INT "$CCVM" run -- "$G/tests/signals.glibc" ignore-int >"$WORK/ign.out" 2>"$WORK/sig.err" &
VM=$!
for _ in $(seq 600); do grep -q ready "$WORK/ign.out" 2>/dev/null && break; sleep 0.1; done
kill -INT $VM; sleep 1
if kill -0 $VM 2>/dev/null; then
	kill -INT $VM; wait $VM; st=$?
	[ $st = 130 ] && pass "a guest that ignores SIGINT: the first goes by, a second within 3 s stops it (130)" ||
		fail "second SIGINT" "status $st (want 130)" "$(head -3 "$WORK/sig.err")"
else
	wait $VM; fail "a guest that ignores SIGINT ended at the first one" "status $?"
fi
SOCK=$WORK/sig.sock
"$CCVM" run --control "$SOCK" -- "$G/tests/clockloop.glibc" 100000000 >/dev/null 2>"$WORK/sig.err" &
VM=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
out=$("$CCVM" ctl "$SOCK" kill SIGNOPE); st=$?
[ $st = 1 ] && echo "$out" | grep -q '"ok":false.*SIGNAL' && pass "ctl kill SIGNOPE: refused, exit 1" ||
	fail "ctl kill SIGNOPE" "status $st" "$out"
reply=$("$CCVM" ctl "$SOCK" kill sigterm)
wait $VM; st=$?
[ $st = 143 ] && echo "$reply" | grep -q '"name":"SIGTERM"' && pass "ctl kill sigterm: $reply, status 143" ||
	fail "ctl kill sigterm" "status $st (want 143)" "$reply"

# shellcheck source=tests/e2e/isolation.sh
. "$TOP/tests/e2e/isolation.sh"
# shellcheck source=tests/e2e/snapshot.sh
. "$TOP/tests/e2e/snapshot.sh"
# shellcheck source=tests/e2e/redis.sh
. "$TOP/tests/e2e/redis.sh"
# shellcheck source=tests/e2e/compat.sh
. "$TOP/tests/e2e/compat.sh"

echo
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
