# Unmodified Debian programs in ccvm, each compared with the same program run natively
# (docs/compatibility.md lists them); sourced by run.sh (uses its CCVM, WORK and lib.sh).

echo "== Debian programs, natively and in ccvm"
CP=$WORK/compat; mkdir -p "$CP/n" "$CP/v"
seq 1 "$(scaled 200000 10000)" | sed 's/$/ lorem ipsum dolor sit amet/' >"$CP/input.txt"

# same NAME NATIVE_STATUS VM_STATUS: the native run succeeded, and the ccvm one gave the same output (files n.out
# and v.out) and status.
same() { # NAME NATIVE_STATUS VM_STATUS
	if [ "$2" = 0 ] && [ "$3" = 0 ] && cmp -s "$CP/n.out" "$CP/v.out" && [ -s "$CP/n.out" ]; then
		pass "$1" "status $2, $(wc -c <"$CP/n.out") bytes the same"
	else
		fail "$1" "native status $2, ccvm status $3" "$(diff "$CP/n.out" "$CP/v.out" | head -4)" \
			"$(head -3 "$CP/v.err")"
	fi
}

# gzip and xz: a file compressed in ccvm is byte for byte what the host makes.
gzip -c -6 <"$CP/input.txt" >"$CP/n.out"; n=$?
tmo 300 "$CCVM" run -- "$(type -P gzip)" -c -6 <"$CP/input.txt" >"$CP/v.out" 2>"$CP/v.err"; v=$?
same "gzip -6" $n $v
xz -c -T1 -3 <"$CP/input.txt" >"$CP/n.out"; n=$?
tmo 300 "$CCVM" run -- "$(type -P xz)" -c -T1 -3 <"$CP/input.txt" >"$CP/v.out" 2>"$CP/v.err"; v=$?
same "xz -3" $n $v

# sqlite3: a database written under --rw, queried, the same answers.
SQL="create table t(a integer primary key, b text); with recursive c(x) as (select 1 union all
select x + 1 from c where x < $(scaled 5000 500)) insert into t select x, 'row ' || x from c;
create index tb on t(b); select count(*), sum(a), max(b) from t where a % 7 = 3;
pragma integrity_check;"
if type -P sqlite3 >/dev/null; then
	(cd "$CP/n" && sqlite3 db "$SQL") >"$CP/n.out" 2>&1; n=$?
	(cd "$CP/v" && tmo 300 "$CCVM" run --rw "$CP/v" -- "$(type -P sqlite3)" db "$SQL") \
		>"$CP/v.out" 2>"$CP/v.err"; v=$?
	same "sqlite3: a table, an index, a query, integrity_check" $n $v
else
	fail "sqlite3: a table, an index, a query, integrity_check" "sqlite3 is not installed (scripts/install-deps.sh installs it)"
fi

# python3: threads, signal.alarm with a handler, a socket pair, subprocesses (vfork,
# execve, a pipe for the child's output, wait statuses).
cat >"$CP/py.py" <<'PY'
import os, signal, socket, threading, time
out = []
def work(i):
    out.append(sum(range(i * 100000)))
ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
print("threads", sorted(out))
fired = []
signal.signal(signal.SIGALRM, lambda s, f: fired.append(s))
signal.alarm(1)
while not fired:
    time.sleep(0.05)
print("alarm handler ran for signal", fired[0])
a, b = socket.socketpair()
a.sendall(b"ping over a socket pair")
print("socket", b.recv(100).decode())
import subprocess
print("subprocess", subprocess.run(["/bin/true"]).returncode, flush=True)
print("subprocess", subprocess.run(["/bin/sh", "-c", "exit 3"]).returncode, flush=True)
print("subprocess", subprocess.check_output(["/usr/bin/env", "X=1", "/usr/bin/printenv", "X"]), flush=True)
p = subprocess.Popen(["/bin/sleep", "10"])
p.kill()
print("subprocess killed", p.wait(), flush=True)
try:
    subprocess.run(["/bin/sleep", "10"], timeout=1)
except subprocess.TimeoutExpired:
    print("subprocess timed out", flush=True)
PY
PY3=/usr/bin/python3
"$PY3" "$CP/py.py" >"$CP/n.out" 2>&1; n=$?
tmo 300 "$CCVM" run -- "$PY3" "$CP/py.py" >"$CP/v.out" 2>"$CP/v.err"; v=$?
same "python3: threads, signal.alarm and a handler, a socket pair, subprocess" $n $v

# dash: builtins, then execve of a #! script, which execs env, which execs printenv.
cat >"$CP/script.sh" <<'SH'
#!/bin/sh -e
echo "script $0 got $# args: $*"
exec /usr/bin/env CCVM_E2E_X=7 /usr/bin/printenv CCVM_E2E_X
SH
chmod +x "$CP/script.sh"
SHC='x=5; echo "builtins $x $((x * 3))"; cd /usr; echo "cwd $PWD"; exec "$0" one "two words"'
/bin/sh -c "$SHC" "$CP/script.sh" >"$CP/n.out" 2>&1; n=$?
tmo 300 "$CCVM" run -- /bin/sh -c "$SHC" "$CP/script.sh" >"$CP/v.out" 2>"$CP/v.err"; v=$?
same "sh -c: builtins, exec of a #! script, env, printenv" $n $v

# sh -c with a pipeline: three forked children joined by pipes, the shell waiting.
seq 1 "$(scaled 20000 2000)" | awk '{print "k" ($1 * 7919 % 113)}' >"$CP/dup.txt"
/bin/sh -c 'sort | uniq -c | head' <"$CP/dup.txt" >"$CP/n.out" 2>&1; n=$?
tmo 300 "$CCVM" run -- /bin/sh -c 'sort | uniq -c | head' <"$CP/dup.txt" >"$CP/v.out" 2>"$CP/v.err"; v=$?
same "sh -c 'sort | uniq -c | head': a pipeline of forked children" $n $v

# coreutils timeout: it forks the command, and kills it when the alarm comes.
TMO=$(type -P timeout)
"$TMO" 1 sleep 5 >"$CP/n.out" 2>&1; n=$?
tmo 60 "$CCVM" run -- "$TMO" 1 "$(type -P sleep)" 5 >"$CP/v.out" 2>"$CP/v.err"; v=$?
if [ $n = 124 ] && [ $v = 124 ] && cmp -s "$CP/n.out" "$CP/v.out"; then
	pass "timeout 1 sleep 5: status 124" "natively $n, in ccvm $v"
else
	fail "timeout 1 sleep 5: status 124" "natively $n, in ccvm $v" "$(head -3 "$CP/v.err")"
fi

# make building a two-file C program with gcc (posix_spawn, cc1, as, collect2, ld), and
# the program it built runs as the native build's does.
for d in n v; do
	mkdir -p "$CP/mk-$d"
	printf '#include <stdio.h>\nint twice(int);\nint main(void) { printf("twice 21 = %%d\\n", twice(21)); return 0; }\n' >"$CP/mk-$d/a.c"
	printf 'int twice(int x) { return 2 * x; }\n' >"$CP/mk-$d/b.c"
	printf 'prog: a.o b.o\n\tgcc -o prog a.o b.o\n%%.o: %%.c\n\tgcc -O2 -c -o $@ $<\n' >"$CP/mk-$d/Makefile"
done
if type -P make >/dev/null && type -P gcc >/dev/null; then
	(make -s -C "$CP/mk-n" && "$CP/mk-n/prog") >"$CP/n.out" 2>&1; n=$?
	tmo 300 "$CCVM" run --rw "$CP/mk-v" -- "$(type -P make)" -s -C "$CP/mk-v" >"$CP/v.out" 2>"$CP/v.err"; v=$?
	[ $v = 0 ] && "$CP/mk-v/prog" >>"$CP/v.out" 2>&1; v=$((v + $?))
	same "make: gcc builds a two-file C program" $n $v
else
	fail "make: gcc builds a two-file C program" "make or gcc is not installed (scripts/install-deps.sh installs them)"
fi

# A server natively and in ccvm (published), asked the same by a client: the answers.
serve_both() { # NAME TAG CLIENT_SCRIPT -- COMMAND... (@PORT@: its port, @DIR@: its directory)
	local name=$1 tag=$2 client=$3 np vp nd vd a nargs=() vargs=() npid vpid
	shift 4
	np=$((20000 + RANDOM % 20000)); vp=$((np + 1)); nd=$CP/$tag-n; vd=$CP/$tag-v
	mkdir -p "$nd" "$vd"
	for a in "$@"; do a=${a//@PORT@/$np}; nargs+=("${a//@DIR@/$nd}"); done
	for a in "$@"; do a=${a//@PORT@/8080}; vargs+=("${a//@DIR@/$vd}"); done
	prep "$nd" "$np"; prep "$vd" 8080
	"${nargs[@]}" >"$nd/out" 2>&1 &
	npid=$!
	"$CCVM" run --rw "$vd" --publish "127.0.0.1:$vp:8080" -- "${vargs[@]}" >"$vd/out" 2>"$CP/v.err" &
	vpid=$!
	python3 "$client" "$np" "$E2E_PATIENCE" >"$CP/n.out" 2>&1; local n=$?
	python3 "$client" "$vp" "$E2E_PATIENCE" >"$CP/v.out" 2>&1; local v=$?
	same "$name" $n $v
	kill "$npid" "$vpid" 2>/dev/null; wait "$npid" "$vpid" 2>/dev/null
}

# memcached (libevent, worker threads, epoll, pipes): set, get, incr, delete.
cat >"$CP/mc.py" <<'PY'
import socket, sys, time
end = time.time() + 120 * int(sys.argv[2])
while True:
    try:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30 * int(sys.argv[2])); break
    except OSError:
        if time.time() > end:
            raise
        time.sleep(0.5)
def ask(q, want=1):
    s.sendall(q); buf = b""
    while buf.count(b"\r\n") < want:
        buf += s.recv(4096)
    print(q.split(b"\r\n")[0].decode(), "->", buf.decode().replace("\r\n", " | "))
ask(b"set greeting 5 0 13\r\nhello, ccvm!!\r\n")
ask(b"get greeting\r\n", 3)
ask(b"set n 0 0 2\r\n41\r\n")
ask(b"incr n 1\r\n")
ask(b"delete greeting\r\n")
ask(b"get greeting\r\n")
PY
prep() { :; }
if type -P memcached >/dev/null; then
	serve_both "memcached: set, get, incr, delete over TCP" memcached "$CP/mc.py" -- \
		"$(type -P memcached)" -l 127.0.0.1 -p @PORT@ -U 0 -t 2 -u "$(id -un)"
else
	fail "memcached: set, get, incr, delete over TCP" "memcached is not installed (scripts/install-deps.sh installs it)"
fi

# nginx (master_process off; daemon off): a static file, a 404, a HEAD. Its user is
# ccvm's own: as another it would chown its temporary paths, and chown is not offered.
cat >"$CP/ngx.py" <<'PY'
import http.client, sys, time
def ask(method, path):
    c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30 * int(sys.argv[2]))
    c.request(method, path); r = c.getresponse(); body = r.read(); c.close()
    return r, body
end = time.time() + 120 * int(sys.argv[2])
while True:
    try:
        ask("GET", "/"); break
    except OSError:
        if time.time() > end:
            raise
        time.sleep(0.5)
for method, path in (("GET", "/index.html"), ("GET", "/missing"), ("HEAD", "/index.html")):
    r, body = ask(method, path)
    print(method, path, r.status, r.getheader("Content-Length"), len(body), body[:40])
PY
NGX_MODE="master_process off; worker_processes 1;"
prep() { # DIR PORT: a configuration and a page
	mkdir -p "$1/www" "$1/tmp"
	seq 1 3000 | sed 's/^/line /' >"$1/www/index.html"
	cat >"$1/nginx.conf" <<CONF
user $(id -un) $(id -gn); daemon off; $NGX_MODE
error_log stderr; pid $1/nginx.pid;
events { worker_connections 64; }
http {
	access_log off; client_body_temp_path $1/tmp/b; proxy_temp_path $1/tmp/p;
	fastcgi_temp_path $1/tmp/f; uwsgi_temp_path $1/tmp/u; scgi_temp_path $1/tmp/s;
	server { listen 127.0.0.1:$2; root $1/www; }
}
CONF
}
if type -P nginx >/dev/null; then
	serve_both "nginx (master_process off): a page, a 404, a HEAD" nginx "$CP/ngx.py" -- \
		"$(type -P nginx)" -p @DIR@ -c @DIR@/nginx.conf
else
	fail "nginx (master_process off): a page, a 404, a HEAD" "nginx is not installed (scripts/install-deps.sh installs it)"
fi
# nginx as it is usually run: a master that forks 2 workers, which accept in turn.
NGX_MODE="master_process on; worker_processes 2;"
if type -P nginx >/dev/null; then
	serve_both "nginx (a master and 2 workers): a page, a 404, a HEAD" nginx2 "$CP/ngx.py" -- \
		"$(type -P nginx)" -p @DIR@ -c @DIR@/nginx.conf
else
	fail "nginx (a master and 2 workers): a page, a 404, a HEAD" "nginx is not installed (scripts/install-deps.sh installs it)"
fi
