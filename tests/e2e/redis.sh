# Redis end-to-end tests; sourced by run.sh (uses its CCVM, WORK, TOP and lib.sh).
#
# Debian's redis-server, unmodified, in a VM: served over a published port to
# redis-cli, many clients and redis-benchmark; snapshotted under a write load and
# restored: the restored server holds exactly the dataset of the snapshot instant.

echo "== redis"
RS=$WORK/redis; mkdir -p "$RS"
REDIS=$(type -P redis-server || true)
LOAD=$TOP/tests/e2e/redis_load.py
RP=$((20000 + RANDOM % 20000))

pong() { [ "$(redis-cli -p "$1" ping 2>/dev/null)" = PONG ]; } # PORT
redis_up() { wait_until 30 pong "$1"; } # PORT
redis_stop() { # PORT PID
	redis-cli -p "$1" shutdown nosave >/dev/null 2>&1 || true
	wait "$2" 2>/dev/null || true
}

# Redis' own BGSAVE inside ccvm: --save 10 1000 under YCSB load forks a child in the VM
# that writes dump.rdb while the parent serves; the dump loads in a native Redis with
# every key the load phase had acknowledged, and nothing else.
redis_bgsave() {
	local bd=$RS/bgsave recs st cow nat
	mkdir -p "$bd"; rm -f "$bd/dump.rdb"
	recs=$(scaled 20000 2000)
	"$CCVM" run --mem 1G --rw "$bd" --control "$bd/ctl.sock" --publish "127.0.0.1:$RP:6379" -- \
		"$REDIS" --port 6379 --dir "$bd" --save "10 1000" --appendonly no >"$bd/vm.out" 2>"$bd/vm.err" &
	local vm=$!
	if ! redis_up "$RP"; then
		fail "Redis BGSAVE in ccvm under YCSB load" "redis-server did not answer" "$(tail -3 "$bd/vm.out" "$bd/vm.err")"
		redis_stop "$RP" $vm
		return
	fi
	tmo 300 "$TOP/bench/ycsb" --port "$RP" --records "$recs" --phase load --clients 4 --pipeline 8 \
		--quiet >"$bd/load.out" 2>&1
	redis-cli -p "$RP" --scan --pattern 'user*' | sort >"$bd/acked.keys"
	# The run phase writes on while a save point comes due (every 10 s with 1000 changes).
	tmo 300 "$TOP/bench/ycsb" --port "$RP" --records "$recs" --phase run --workload a --duration 14 \
		--clients 4 --pipeline 8 --quiet >"$bd/run.out" 2>&1
	saved() { redis-cli -p "$RP" info persistence | grep -q '^rdb_bgsave_in_progress:0' &&
		grep -q 'Background saving terminated with success' "$bd/vm.out"; }
	wait_until 120 saved
	st=$(redis-cli -p "$RP" info persistence | tr -d '\r' | grep -E '^rdb_last_bgsave_status|^rdb_saves' | tr '\n' ' ')
	cow=$("$CCVM" ctl "$bd/ctl.sock" stats | json_num cow_faults)
	redis_stop "$RP" $vm
	nat=$((RP + 2))
	redis-server --port "$nat" --dir "$bd" --dbfilename dump.rdb --save "" --appendonly no \
		>"$bd/native.out" 2>&1 &
	local np=$!
	if redis_up "$nat"; then
		redis-cli -p "$nat" --scan --pattern 'user*' | sort >"$bd/native.keys"
	fi
	redis_stop "$nat" $np
	if grep -q 'Background saving started by pid' "$bd/vm.out" && echo "$st" | grep -q 'rdb_last_bgsave_status:ok' &&
		[ "$(wc -l <"$bd/acked.keys")" = "$recs" ] && cmp -s "$bd/acked.keys" "$bd/native.keys"; then
		pass "Redis BGSAVE in ccvm under YCSB load" "a child forked in the VM saved $recs records ($(stat -c %s "$bd/dump.rdb") bytes), all of them loaded natively; $cow copy-on-write faults"
	else
		fail "Redis BGSAVE in ccvm under YCSB load" "$st" "acked $(wc -l <"$bd/acked.keys"), native $(wc -l <"$bd/native.keys" 2>/dev/null)" \
			"$(grep -E 'saving|fork|error' "$bd/vm.out" | tail -3)" "$(tail -2 "$bd/vm.err")"
	fi
}

# bench/peers/redis.py on ccvm's Redis, its images in a directory under /var/tmp. Nested
# under scripts/kvm-in-tcg.sh that is a 9p share, which takes no socket: this guards
# that the driver keeps its control sockets in /tmp. Plumbing only, no timing.
redis_driver() {
	local imgs st why
	imgs=$(mktemp -d /var/tmp/ccvm-e2e-redis.XXXXXX)
	RECORDS=$(scaled 2000 500) DURATION=5 GAP=1 ROUNDS=1 TARGET=500 MEM=512M WORKLOADS=ycsb-a \
		SYSTEMS="ccvm-none ccvm-ccow" IMGDIR="$imgs" OUT="$RS/driver" \
		tmo 400 "$TOP/bench/peers/redis.py" >"$RS/driver.out" 2>&1; st=$?
	rm -rf "$imgs"
	why=$(python3 - "$RS/driver/redis_peers.csv" <<'PY' 2>&1
import csv, sys
rows = {r["system"]: r for r in csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#"))}
assert set(rows) == {"ccvm-none", "ccvm-ccow"}, sorted(rows)
c, n = rows["ccvm-ccow"], rows["ccvm-none"]
assert int(c["snapshots"]) >= 1 and int(n["snapshots"]) == 0, (c["snapshots"], n["snapshots"])
assert float(c["image_mb"]) > 0 and float(c["duration_s"]) > 0, (c["image_mb"], c["duration_s"])
for r in (c, n):
    assert float(r["tracker_stall_ms"]) >= 0 and float(r["tracker_lost_ms"]) >= 0
    assert float(r["run_max_us"]) > 0 and float(r["ops_per_s"]) > 0
print("ccow: %d snapshots of %.1f MiB; tracker's longest stall %.1f ms without snapshots"
      % (int(c["snapshots"]), float(c["image_mb"]), float(n["tracker_stall_ms"])))
PY
); local ok=$?
	[ "$st" = 0 ] && [ "$ok" = 0 ] && pass "bench/peers/redis.py on ccvm" "$why" ||
		fail "bench/peers/redis.py on ccvm" "status $st" "$why" "$(tail -3 "$RS/driver.out")"
}

if [ -z "$REDIS" ] || ! type -P redis-cli >/dev/null; then
	fail "redis-server in ccvm" "redis-server and redis-cli are not installed (scripts/install-deps.sh installs them)"
else
	"$CCVM" run --mem 512M --control "$RS/ctl.sock" --publish "127.0.0.1:$RP:6379" -- \
		"$REDIS" --port 6379 --save "" --appendonly no >"$RS/vm.out" 2>"$RS/vm.err" &
	RVM=$!
	if redis_up "$RP"; then
		pass "redis-server in ccvm" "answers PING on published port $RP"
	else
		fail "redis-server in ccvm" "$(tail -5 "$RS/vm.out" "$RS/vm.err")"
	fi
	got=$(redis-cli -p "$RP" set greeting "hello from a VM" 2>&1; redis-cli -p "$RP" get greeting 2>&1)
	[ "$got" = "OK
hello from a VM" ] && pass "SET then GET through redis-cli" || fail "SET then GET through redis-cli" "$got"
	out=$(tmo 60 python3 "$LOAD" clients "$RP" 50 2>&1)
	[ "$out" = "50 clients ok" ] && pass "50 clients" "$out (interleaved SET/MGET)" || fail "50 clients" "$out"
	out=$(tmo 120 redis-benchmark -p "$RP" -q -n "$(scaled 20000 2000)" -c 20 -P 16 -t set,get 2>&1 | tr '\r' '\n' | grep 'requests per second')
	[ "$(echo "$out" | grep -c 'requests per second')" = 2 ] &&
		pass "redis-benchmark -P 16" "completes: $(echo "$out" | sed 's/, p50.*//' | tr '\n' ' ')" ||
		fail "redis-benchmark" "$out"
	# Redis' client reads and writes took the exitless socket path (vmm/linux/fastio.c).
	st=$("$CCVM" ctl "$RS/ctl.sock" stats 2>&1)
	fr=$(echo "$st" | grep -o '"fast_reads":[0-9]*' | cut -d: -f2)
	fw=$(echo "$st" | grep -o '"fast_writes":[0-9]*' | cut -d: -f2)
	sr=$(echo "$st" | grep -o '"read":[0-9]*' | head -1 | cut -d: -f2)
	[ "${fr:-0}" -gt 100 ] && [ "${fw:-0}" -gt 100 ] &&
		pass "exitless socket path under Redis" "$fr reads, $fw writes (reads that exited: ${sr:-0})" ||
		fail "exitless socket path under Redis" "$st"
	# The YCSB load generator: a load phase, then workload F (read-modify-write).
	out=$(tmo 120 "$TOP/bench/ycsb" --port "$RP" --records 2000 --operations "$(scaled 4000 1000)" --clients 4 \
		--pipeline 8 --workload f --timeline "$RS/ycsb.csv" --quiet 2>&1)
	if echo "$out" | grep -q '^\[LOAD\] 2000 records' && echo "$out" | grep -q '0 errors$' &&
		[ "$(redis-cli -p "$RP" dbsize)" -ge 2000 ] && [ "$(redis-cli -p "$RP" hlen "$(redis-cli -p "$RP" --scan --pattern 'user*' | head -1)")" = 10 ] &&
		head -1 "$RS/ycsb.csv" | grep -q '^second,ops_per_s,p50_us,p99_us,p999_us,max_us$'; then
		pass "bench/ycsb" "loads 2000 records of 10 fields and runs workload F: $(echo "$out" | grep OVERALL | sed 's/.*: //')"
	else
		fail "bench/ycsb" "$out"
	fi
	# Two snapshots under a write load (ccow, then cow).
	for pol in ccow cow; do
		# A fresh progress file, and confirmed transactions in it before the snapshot:
		# on a slow machine the writer takes a while to start.
		rm -f "$RS/progress"
		tmo 300 python3 "$LOAD" write "$RP" "$RS/progress" "$pol" &
		WR=$!
		confirmed() { [ "$(cut -d' ' -f1 "$RS/progress" 2>/dev/null)" -gt "$1" ] 2>/dev/null; } # N
		wait_until 30 confirmed 0
		low=$(cut -d' ' -f1 "$RS/progress")
		"$CCVM" ctl "$RS/ctl.sock" snapshot "$RS/$pol.img" --policy "$pol" --wait >"$RS/$pol.json" 2>&1
		high=$(awk '{print $2}' "$RS/progress")
		# Transactions confirmed after the snapshot, which the restored image must lack.
		wait_until 30 confirmed "${high:-0}"
		echo "$low $high $(cut -d' ' -f1 "$RS/progress")" >"$RS/$pol.range"
		kill $WR 2>/dev/null; wait $WR 2>/dev/null
		if grep -q '"ok":true' "$RS/$pol.json" && [ "$low" -gt 0 ] 2>/dev/null; then
			pass "$pol snapshot of Redis under load" "$low transactions confirmed before it"
		else
			fail "$pol snapshot of Redis" "$(cat "$RS/$pol.json")" "low '$low'"
		fi
	done
	redis_stop "$RP" $RVM
	for pol in ccow cow; do
		read -r low high after <"$RS/$pol.range"
		"$CCVM" restore "$RS/$pol.img" >"$RS/r.out" 2>"$RS/r.err" &
		RVM=$!
		if redis_up "$RP"; then
			out=$(tmo 120 python3 "$LOAD" check "$RP" "$pol" "$low" "$high" 2>&1)
			[ "$after" -gt "$high" ] && echo "$out" | grep -q '^dataset ok' &&
				pass "restored $pol dataset" "the snapshot instant's: $out; $((after - high)) later transactions absent" ||
				fail "restored $pol dataset" "$out" "range $low $high $after"
			# The writer's connection existed at the snapshot instant: the restored
			# Redis reads it as closed and drops it.
			one_client() { [ "$(redis-cli -p "$RP" client list 2>/dev/null | grep -c .)" = 1 ]; }
			wait_until 10 one_client && pass "connections after $pol restore" "the connection open at the snapshot reads as closed (clients: 1)" ||
				fail "connections after $pol restore" "$(redis-cli -p "$RP" client list)"
		else
			for c in "restored $pol dataset" "connections after $pol restore"; do
				fail "$c" "the restored $pol Redis does not answer" "$(tail -3 "$RS/r.out" "$RS/r.err")"
			done
		fi
		redis_stop "$RP" $RVM
	done
	# New publish rules on restore; a taken port or an unpublished guest port refused.
	RP2=$((RP + 1))
	"$CCVM" restore "$RS/ccow.img" --publish "127.0.0.1:$RP2:6379" >"$RS/r.out" 2>"$RS/r.err" &
	RVM=$!
	if redis_up "$RP2" && [ "$(redis-cli -p "$RP2" get greeting)" = "hello from a VM" ]; then
		pass "restore --publish" "127.0.0.1:$RP2:6379 serves the dataset on the new port"
	else
		fail "restore --publish" "$(tail -3 "$RS/r.err")"
	fi
	expect_fail "restore onto a taken port" 1 "cannot listen again for guest port 6379" -- \
		"$CCVM" restore "$RS/ccow.img" --publish "127.0.0.1:$RP2:6379"
	expect_fail "restore without the guest's port published" 1 "which is not published" -- \
		"$CCVM" restore "$RS/ccow.img" --publish "127.0.0.1:$RP:6380"
	expect_fail "restore --publish garbage" 2 "expected \[HOSTIP:\]HOSTPORT:GUESTPORT" -- \
		"$CCVM" restore "$RS/ccow.img" --publish 6379
	redis_stop "$RP2" $RVM
	# Redis needs its background threads: one vCPU is not enough, and ccvm says why.
	expect_fail "redis with --vcpus 1" 1 "the most --vcpus 1 allows" -- \
		"$CCVM" run --vcpus 1 --publish "127.0.0.1:$RP:6379" -- "$REDIS" --port 6379 --save ""
	# kill -TERM of `ccvm run`: the signal reaches Redis, whose handler schedules its
	# shutdown; it saves dump.rdb under the --rw directory and exits, and so does ccvm.
	mkdir -p "$RS/rw"
	"$CCVM" run --mem 512M --rw "$RS/rw" --publish "127.0.0.1:$RP:6379" -- "$REDIS" --port 6379 \
		--dir "$RS/rw" --save "3600 1" --appendonly no >"$RS/term.out" 2>"$RS/term.err" &
	RVM=$!
	if redis_up "$RP" && [ "$(redis-cli -p "$RP" set saved-by sigterm)" = OK ]; then
		kill -TERM $RVM; wait $RVM; st=$?
		if [ $st = 0 ] && grep -q 'Received SIGTERM' "$RS/term.out" && grep -q 'DB saved on disk' "$RS/term.out" &&
		   [ -s "$RS/rw/dump.rdb" ]; then
			pass "SIGTERM to Redis in ccvm" "Redis shuts down, saves $(stat -c %s "$RS/rw/dump.rdb") bytes of dump.rdb, status 0"
		else
			fail "SIGTERM to Redis in ccvm" "status $st" "$(grep -i -E 'sigterm|saved|bye|error' "$RS/term.out" | tail -4)" "$(tail -3 "$RS/term.err")"
		fi
	else
		fail "SIGTERM to Redis in ccvm" "redis-server did not answer" "$(tail -3 "$RS/term.out" "$RS/term.err")"
		redis_stop "$RP" $RVM
	fi
	redis_bgsave
	redis_driver
	rm -f "$RS"/*.img
fi
