# The end-to-end checks that need no VM; sourced by run.sh (uses its CCVM, G, TOP, WORK
# and lib.sh). They run on the machine itself, with or without /dev/kvm: bad input
# refused before a VM is made, the snapshot engine on plain memory, the benchmark
# drivers against native Redis and QEMU.

echo "== bad input that needs no VM"
# Numbers must be finite and in range; a FIFO is not an image (and is not waited on).
H=$G/tests/hello.glibc
expect_fail "--snapshot-rate inf" 2 "snapshot-rate inf: MB/s" -- "$CCVM" run --snapshot-rate inf -- "$H"
expect_fail "--snapshot-rate 1e300" 2 "snapshot-rate 1e300: MB/s" -- "$CCVM" run --snapshot-rate 1e300 -- "$H"
expect_fail "--threshold nan" 2 "threshold nan: a coverage" -- "$CCVM" run --threshold nan -- "$H"
expect_fail "--snapshot-every inf" 2 "snapshot-every inf: a positive" -- "$CCVM" run --snapshot-every inf -- "$H"
expect_fail "--pause-budget-ms nan" 2 "pause-budget-ms nan: milliseconds" -- "$CCVM" run --pause-budget-ms nan -- "$H"
expect_fail "--coverage-budget 101" 2 "coverage-budget 101: a percentage from 0" -- "$CCVM" run --coverage-budget 101 -- "$H"
expect_fail "--coverage-stall-ms -1" 2 "coverage-stall-ms -1: milliseconds" -- "$CCVM" run --coverage-stall-ms -1 -- "$H"
expect_fail "restore --coverage-budget nan" 2 "coverage-budget nan: a percentage" -- "$CCVM" restore --coverage-budget nan "$WORK/none.img"
mkfifo "$WORK/fifo"
# Waiting for a writer would be a hang: expect_fail's bound turns it into status 124.
expect_fail "inspect of a FIFO" 1 "not a regular file" -- "$CCVM" inspect "$WORK/fifo"
expect_fail "restore of a FIFO" 1 "not a regular file" -- "$CCVM" restore "$WORK/fifo"
expect_fail "--snapshot-compress gzip" 2 "snapshot-compress gzip: auto, zstd, lz4 or none" -- "$CCVM" run --snapshot-compress gzip -- "$H"
expect_fail "--snapshot-compress-level 30" 2 "does not suit zstd" -- "$CCVM" run --snapshot-compress zstd --snapshot-compress-level 30 -- "$H"
expect_fail "--snapshot-compress-level -65" 2 "does not suit lz4 (zstd -7 to 19, lz4 -64 to 12" -- "$CCVM" run --snapshot-compress lz4 --snapshot-compress-level -65 -- "$H"
expect_fail "--snapshot-threads 0" 2 "snapshot-threads 0: from 1" -- "$CCVM" run --snapshot-threads 0 -- "$H"
expect_fail "--snapshot-full-every alone" 2 "needs --snapshot-incremental" -- "$CCVM" run --snapshot-full-every 3 -- "$H"
expect_fail "--snapshot-incremental under stop" 2 "needs --snapshot-policy cow or ccow" -- "$CCVM" run --snapshot-incremental --snapshot-policy stop -- "$H"
expect_fail "merge without OUT" 2 "usage: ccvm merge CHILD OUT" -- "$CCVM" merge "$WORK/fifo"
expect_fail "merge of a missing image" 1 "cannot merge" -- "$CCVM" merge "$WORK/none.img" "$WORK/out.img"

echo "== the snapshot engine on plain memory (bench/engine-bench: host threads, no VM)"
# The real engine, userfaultfd and image files; every image must equal the memory at
# its instant, and every field the benchmark promises must be there. Two snapshots at
# least, however long they take (--snapshots 2).
EB=$TOP/bench/engine-bench
eb_check() { # NAME ARGS...: run, then check the JSON line
	local name=$1; shift
	local out; out=$(tmo 300 "$EB" --mem 32M --threads 2 --alpha 0.99 --snapshot-every 0.5 \
		--duration 2 --snapshots 2 --dir "$WORK" --verify --json "$@" 2>"$WORK/eb.err"); local st=$?
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
	if [ "$st" = 0 ] && [ "$ok" = 0 ]; then pass "engine-bench $name" "$why"
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
iout=$(tmo 300 "$EB" --incremental-pct 10 --mem 32M --threads 0 --policy ccow --dir "$WORK" --data text --json 2>"$WORK/eb.err")
if python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["pages_held"] == d["pages_rewritten"] > 0 and d["inc_bytes"] * 5 < d["full_bytes"], d' "$iout" 2>"$WORK/inc.err"; then
	pass "engine-bench --incremental-pct 10" "the child holds exactly the rewritten pages, $(echo "$iout" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%d of %d bytes" % (d["inc_bytes"], d["full_bytes"]))')"
else
	fail "engine-bench --incremental-pct 10" "$iout" "$(head -3 "$WORK/eb.err" "$WORK/inc.err")"
fi
expect_fail "engine-bench --policy foo" 2 "bad value for --policy" -- "$EB" --policy foo --dir "$WORK"
# The coverage tracker's cost in the model: each first write to a page a window
# watches is spun for --trap-cost-us, as a VM's vCPU waits for KVM's fault. By the
# tracker's own accounting it stays within its budget (1% of the run, 2 ms in any
# 10 ms), and the model charged exactly the faults the tracker counted plus those of
# the pre-copy rounds (bounds by construction, not timing).
eb_budget() { # NAME ARGS...
	local name=$1; shift
	local out; out=$(tmo 300 "$EB" --mem 64M --threads 2 --alpha 0.99 --snapshot-every 2 \
		--duration 6 --dir "$WORK" --json --trap-cost-us 100 --precopy auto "$@" 2>"$WORK/eb.err"); local st=$?
	local why; why=$(python3 - "$out" "$@" <<'PY' 2>&1
import json, sys
d = json.loads(sys.argv[1])
args = sys.argv[2:]
for k in ("tracker_lost_ms", "tracker_longest_stall_ms", "tracker_windows", "tracker_faults", "log_faults"):
    assert k in d, "missing %s" % k
if "--coverage-budget" in args:
    assert d["tracker_windows"] == 0 and d["tracker_faults"] == 0, "windows with no budget: %s" % d
else:
    assert d["tracker_windows"] > 0, "no window in %.1f s" % d["seconds"]
assert d["tracker_lost_ms"] <= 0.01 * d["seconds"] * 1000, "lost %.1f ms of %.1f s" % (d["tracker_lost_ms"], d["seconds"])
assert d["tracker_longest_stall_ms"] <= 2.0 + 1e-9, "stall %.2f ms" % d["tracker_longest_stall_ms"]
assert d["log_faults"] >= d["tracker_faults"], "the model charged %d faults, the tracker counted %d" % (d["log_faults"], d["tracker_faults"])
if "--coverage-audit" in args:
    assert "coverage_audit" in d, "no coverage_audit"
print("%d windows, %d faults, lost %.1f ms of %.1f s, longest stall %.1f ms; the model charged %d" %
      (d["tracker_windows"], d["tracker_faults"], d["tracker_lost_ms"], d["seconds"],
       d["tracker_longest_stall_ms"], d["log_faults"]))
PY
); local ok=$?
	if [ "$st" = 0 ] && [ "$ok" = 0 ]; then pass "engine-bench tracker budget: $name" "$why"
	else fail "engine-bench tracker budget: $name" "status $st" "$why" "$(head -3 "$WORK/eb.err")"; fi
}
eb_budget "--trap-cost-us 100 --precopy auto"
eb_budget "--coverage-budget 0: no windows" --coverage-budget 0
eb_budget "--coverage-audit" --coverage-audit
ls "$WORK"/engine-bench-* >/dev/null 2>&1 && fail "engine-bench removes its images" "left: $(ls "$WORK"/engine-bench-*)" ||
	pass "engine-bench removes its images"

echo "== zipfbench --threads (natively; the same binary runs in VMs)"
zout=$("$G/zipfbench" --threads 3 --size 8M --write-total 30M --report-ms 0 2>&1)
z1=$("$G/zipfbench" --size 8M --alpha 0.99 --write-total 64M --report-ms 0 2>&1)
if echo "$zout" | grep -q "^summary updates=30720 " &&
   echo "$z1" | grep -q "checksum=c03d8284aaea3b69"; then
	pass "zipfbench --threads" "3 threads share --write-total; one thread writes the same bytes as ever"
else
	fail "zipfbench --threads" "$zout" "$z1"
fi

echo "== bench/ycsb open loop against a native Redis that stops for 2 s (no VM)"
# Latency from intended start times: a 2 s pause of the server must show in the
# maximum, the p99.9 and the longest stall, not only in the requests in flight.
# Bounds a little under 2 s: the request intended just after the stop waits the
# stop less the time between them (a run once read max 1.9992 s).
if command -v redis-server >/dev/null; then
	YP=$((20000 + $$ % 20000))
	redis-server --port "$YP" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
		--pidfile "$WORK/ycsb-redis.pid" --logfile "$WORK/ycsb-redis.log" >/dev/null
	wait_until 5 test -s "$WORK/ycsb-redis.pid"
	RPID=$(cat "$WORK/ycsb-redis.pid" 2>/dev/null)
	tmo 60 "$TOP/bench/ycsb" --port "$YP" --records 2000 --phase load --quiet >/dev/null 2>&1
	served() { redis-cli -p "$YP" info stats 2>/dev/null | sed -n 's/^total_commands_processed:\([0-9]*\).*/\1/p'; }
	loaded=$(served)
	# The server stops once the run's requests arrive, however long ycsb took to start.
	(wait_until 30 eval '[ "$(served)" -gt "$loaded" ]'; kill -STOP "$RPID"; sleep 2; kill -CONT "$RPID") &
	yout=$(tmo 60 "$TOP/bench/ycsb" --port "$YP" --records 2000 --phase run --duration 6 \
		--target 4000 --clients 4 --json --quiet 2>&1 | tail -1)
	wait
	kill "$RPID" 2>/dev/null
	why=$(python3 - "$yout" <<'PY' 2>&1
import json, sys
d = json.loads(sys.argv[1])
assert d["open_loop"] is True, "not open loop"
assert d["max_us"] >= 1.9e6, "max %.0f us: the 2 s pause is missing" % d["max_us"]
assert d["stall_ms"] >= 1900, "longest stall %.0f ms" % d["stall_ms"]
assert d["p999_us"] >= 1.0e6, "p99.9 %.0f us does not reflect the pause" % d["p999_us"]
print("p50 %.0f us, p99.9 %.2f s, max %.2f s, stall %.2f s" % (d["p50_us"], d["p999_us"] / 1e6,
      d["max_us"] / 1e6, d["stall_ms"] / 1e3))
PY
)
	[ $? = 0 ] && pass "ycsb --target" "$why" || fail "ycsb --target" "$why" "$yout"
else
	skip "ycsb --target" "no redis-server (make deps installs it)"
fi

echo "== bench/peers/redis.py: native Redis with and without BGSAVE, open loop (no VM)"
# The driver's native half: BGSAVE on the end-to-start cadence, ycsb's histograms
# merged over the seconds a snapshot ran, every figure present.
if command -v redis-server >/dev/null; then
	RECORDS=5000 DURATION=5 GAP=1 ROUNDS=1 WORKLOADS=ycsb-a SYSTEMS="native native-bgsave" \
		OUT="$WORK/redis" IMGDIR="$WORK" tmo 300 "$TOP/bench/peers/redis.py" >"$WORK/redis.out" 2>&1; st=$?
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
assert float(n["tracker_stall_ms"]) == 0 == float(b["tracker_lost_ms"]), "a tracker natively"
print("BGSAVE %d x %.2f s, p99.9 during %.1f ms" % (int(b["snapshots"]), float(b["duration_s"]),
      float(b["p999_us"]) / 1e3))
PY
); ok=$?
	[ "$st" = 0 ] && [ "$ok" = 0 ] && pass "redis.py native" "$why" || fail "redis.py native" "status $st" "$why" "$(tail -3 "$WORK/redis.out")"
	expect_fail "redis.py WORKLOADS=ycsb-z" 1 "WORKLOADS: unknown ycsb-z" -- env WORKLOADS=ycsb-z "$TOP/bench/peers/redis.py"
else
	skip "redis.py native" "no redis-server (make deps installs it)"
fi

echo "== the QEMU peer's guest and driver (bench/peers; QEMU under TCG, no KVM needed)"
# The bare-metal guest must write what zipfbench writes (same checksum after the same
# updates), refuse bad options, and the driver must take QEMU background snapshots and
# report every column. Under TCG the figures are not measurements, only the plumbing.
PG=$TOP/build/peers/zipfguest.bin
if command -v qemu-system-x86_64 >/dev/null && [ -f "$PG" ]; then
	pg_run() { # APPEND: the guest under TCG; its console on stdout
		tmo 120 qemu-system-x86_64 -accel tcg -m 64 -nodefaults -display none -no-reboot \
			-kernel "$PG" -append "$1" -debugcon stdio -device isa-debug-exit,iobase=0xf4,iosize=4 \
			</dev/null 2>"$WORK/pg.err"
	}
	for sc in 0 1; do
		scf=; [ $sc = 1 ] && scf=--scatter
		want=$("$G/zipfbench" --size 8M --alpha 0.99 $scf --seed 7 --write-total 200000K --report-ms 0 |
			grep -o 'checksum=[0-9a-f]*')
		got=$(pg_run "size=8M alpha=0.99 scatter=$sc seed=7 updates=200000"); st=$?
		if [ "$st" = 1 ] && [ -n "$want" ] && echo "$got" | grep -q "^$want\$"; then
			pass "peer guest writes zipfbench's bytes (scatter $sc)" "$want"
		else
			fail "peer guest (scatter $sc)" "status $st (want 1), zipfbench $want" "$(echo "$got" | tail -2)" "$(head -2 "$WORK/pg.err")"
		fi
	done
	got=$(pg_run "size=8M alpha=nope"); st=$?
	[ "$st" = 3 ] && echo "$got" | grep -q "zipfguest: bad option" && pass "peer guest bad option" "alpha=nope refused, status 3" ||
		fail "peer guest bad option" "status $st" "$got"
	got=$(pg_run "size=1G"); st=$?
	[ "$st" = 3 ] && echo "$got" | grep -q "does not fit" && pass "peer guest size=1G" "an area larger than its RAM refused" ||
		fail "peer guest size=1G" "status $st" "$got"
	QUICK=1 ACCEL=tcg SYSTEMS=qemu-bg SIZE=32 WARMUP=1 DURATION=4 OUT="$WORK/peers" IMGDIR="$WORK" \
		tmo 300 "$TOP/bench/peers/peers.py" >"$WORK/peers.out" 2>&1; st=$?
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
	[ "$st" = 0 ] && [ "$ok" = 0 ] && pass "peers.py QUICK" "QEMU background-snapshot under TCG, $why" ||
		fail "peers.py QUICK" "status $st" "$why" "$(tail -3 "$WORK/peers.out")"
	# bench/migrate.py end to end on its QEMU half (two QEMUs under TCG, on loopback).
	QUICK=1 ACCEL=tcg SYSTEMS=qemu-precopy SIZE=16 WARMUP=1 AFTER=1 OUT="$WORK/migq" \
		tmo 300 "$TOP/bench/migrate.py" >"$WORK/migq.out" 2>&1; st=$?
	why=$(python3 - "$WORK/migq/migrate_quick.csv" <<'PY' 2>&1
import csv, sys
lines = [l for l in open(sys.argv[1]) if not l.startswith("#")]
rows = list(csv.DictReader(lines))
want = "round,system,downtime_ms,own_downtime_ms,total_s,bytes_over_ram,during,after,rounds".split(",")
assert list(rows[0].keys()) == want, "columns %s" % list(rows[0].keys())
assert [r["system"] for r in rows] == ["qemu-precopy"], [r["system"] for r in rows]
r = {k: float(v) for k, v in rows[0].items() if k != "system"}
assert r["bytes_over_ram"] > 0 and r["total_s"] > 0 and r["downtime_ms"] > 0, r
print("qemu-precopy: %.2fx RAM sent, down %.0f ms" % (r["bytes_over_ram"], r["downtime_ms"]))
PY
); ok=$?
	[ "$st" = 0 ] && [ "$ok" = 0 ] && pass "migrate.py QUICK" "QEMU live migration under TCG, $why" ||
		fail "migrate.py QUICK" "status $st" "$why" "$(tail -3 "$WORK/migq.out")"
	ROUNDS=1 WORKLOADS=zipf-a0.99 SYSTEMS=native SIZE=32 WARMUP=1 DURATION=2 OUT="$WORK/peers" \
		IMGDIR="$WORK" tmo 120 "$TOP/bench/peers/peers.py" >"$WORK/peers.out" 2>&1; st=$?
	row=$(grep '^1,zipf-a0.99,native,' "$WORK/peers/peers.csv" 2>/dev/null)
	if [ "$st" = 0 ] && awk -F, '{exit !($4 > 0 && $8 > 0 && $8 < 1000)}' <<<"$row" &&
	   grep -q '| zipf-a0.99 | native | 1 |' "$WORK/peers/peers.md"; then
		pass "peers.py native" "zipfbench natively, $(cut -d, -f4 <<<"$row") updates/s, reports parsed"
	else
		fail "peers.py native" "status $st" "$row" "$(tail -3 "$WORK/peers.out")"
	fi
	OUT="$WORK/peers" "$TOP/bench/peers/table.py" 2>/dev/null
	grep -q '^| zipf-a0.99 | native | 1 | - | - | [0-9]' "$WORK/peers/comparison.md" &&
		grep -q 'not measured yet: redis_peers_summary.csv' "$WORK/peers/comparison.md" &&
		pass "table.py" "the comparison table from the summaries, missing ones named" ||
		fail "table.py" "$(tail -3 "$WORK/peers/comparison.md" 2>&1)"
	expect_fail "peers.py SYSTEMS=foo" 1 "SYSTEMS: unknown foo" -- env SYSTEMS=foo ACCEL=tcg "$TOP/bench/peers/peers.py"
	expect_fail "peers.py SIZE=abc" 1 "SIZE=abc: not a number" -- env SIZE=abc ACCEL=tcg "$TOP/bench/peers/peers.py"
	expect_fail "peers.py, a guest QEMU cannot allocate" 1 "QEMU did not start\|QMP" -- \
		env QUICK=1 ACCEL=tcg SYSTEMS=qemu-bg SIZE=100000000 IMGDIR="$WORK" "$TOP/bench/peers/peers.py"
	if [ ! -e /dev/kvm ]; then
		expect_fail "peers.py without /dev/kvm" 1 "no /dev/kvm" -- env QUICK=1 OUT="$WORK/peers" "$TOP/bench/peers/peers.py"
	fi
else
	skip "the QEMU peer" "no qemu-system-x86_64 or build/peers (make deps, make peer-guest)"
fi


echo "== scripts/kvm-in-tcg.sh from anywhere"
# The nested VM's /tmp is its own: the current directory, TMPDIR and the paths the
# command is given must still be where the command looks, under /tmp, through a
# symlink, with a space in the name; what cannot be shared is refused before a boot.
kit_refuses() { # DIR PATTERN: kvm-in-tcg.sh run from DIR refuses with status 125
	local t0 st ms
	t0=$(date +%s%N)
	(cd "$1" && tmo 60 "$TOP/scripts/kvm-in-tcg.sh" -- true) >/dev/null 2>"$WORK/kit.err"
	st=$? ms=$((($(date +%s%N) - t0) / 1000000))
	if [ "$st" = 125 ] && grep -q -- "$2" "$WORK/kit.err"; then
		pass "kvm-in-tcg.sh refuses a directory it cannot share ($1)" "in $ms ms: $(cut -c1-150 "$WORK/kit.err")"
	else
		fail "kvm-in-tcg.sh refuses a directory it cannot share ($1)" "status $st (want 125) after $ms ms" "$(head -3 "$WORK/kit.err")"
	fi
}
if [ "$(id -u)" != 0 ] || ! type -P qemu-system-x86_64 >/dev/null; then
	skip "kvm-in-tcg.sh from a directory under /tmp" "needs root and qemu-system-x86_64"
else
	kit="$WORK/kvm in tcg/work dir"
	mkdir -p "$kit" "$WORK/kit-tmp" "$WORK/kit-arg"
	head -c 3000 /dev/urandom | base64 >"$kit/in.txt"
	date +%s%N >"$WORK/kit-arg/given"
	ln -s "$kit" "$WORK/kit-link"
	(cd "$WORK/kit-link" && TMPDIR=$WORK/kit-tmp tmo 600 "$TOP/scripts/kvm-in-tcg.sh" --timeout 500 -- \
		bash -c 'cat in.txt >out.txt && cp "$1" "$TMPDIR/copy" && pwd >pwd.txt' sh "$WORK/kit-arg/given") \
		>"$WORK/kit.out" 2>&1
	st=$?
	if [ "$st" = 0 ] && cmp -s "$kit/in.txt" "$kit/out.txt" && cmp -s "$WORK/kit-arg/given" "$WORK/kit-tmp/copy" &&
		[ "$(cat "$kit/pwd.txt")" = "$WORK/kit-link" ]; then
		pass "kvm-in-tcg.sh from a directory under /tmp" \
			"through a symlink to a path with spaces: read and wrote there, in TMPDIR, and an argument's file"
	else
		fail "kvm-in-tcg.sh from a directory under /tmp" "status $st" "pwd: $(cat "$kit/pwd.txt" 2>&1)" \
			"$(tail -3 "$WORK/kit.out")"
	fi
	kit_refuses /tmp "the nested VM's own /tmp"
	kit_refuses /proc "the nested VM has its own /proc"
fi
