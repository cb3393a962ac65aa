# What the ccvm-oci e2e scripts share (oci-podman.sh, oci-containerd.sh), sourced by
# each: the runtime's link, the test root, and checks of what a container left.

OCI_SCHEMA="/usr/bin/python3 $TOP/tests/e2e/oci/schema.py"
OCI_NESTED=${OCI_NESTED:-}
OCI_DIR=$WORK/oci
OCI_BIN=$OCI_DIR/bin/ccvm-oci
OCI_ROOT=/run/ccvm-oci # podman passes no --root: ccvm-oci's default
mkdir -p "$OCI_DIR/bin"
ln -sf "$CCVM" "$OCI_BIN"

# oci_rootfs_once: busybox-static and the counter, the containers' whole root, built
# once for both scripts.
oci_rootfs_once() {
	local d=$OCI_DIR/rootfs a
	[ -x "$d/bin/counter" ] && return 0
	mkdir -p "$d/bin" "$d/etc" "$d/tmp" "$d/proc" "$d/dev" "$d/sys" "$d/run" || return 1
	cp /bin/busybox "$d/bin/busybox" || return 1
	for a in sh echo cat sleep ls mkdir true false hostname id wc; do ln -sf busybox "$d/bin/$a"; done
	cc -static -O2 -o "$d/bin/counter" "$TOP/tests/e2e/oci/counter.c" || return 1
	echo "root:x:0:0:root:/:/bin/sh" >"$d/etc/passwd"
	echo "root:x:0:" >"$d/etc/group"
}

# oci_left ID: what a container left behind: its record, a monitor still running.
oci_left() {
	local left=
	[ -e "$OCI_ROOT/$1" ] && left="$left record $OCI_ROOT/$1;"
	pgrep -f "ccvm run .*$OCI_ROOT/$1/" >/dev/null && left="$left a monitor;"
	pgrep -f "ccvm-oci .*exec .*$1\$" >/dev/null && left="$left an exec's process;"
	echo "$left"
}

# oci_counts_up FILE MIN: the counter's lines in FILE reach MIN, in order from 0.
oci_counts_up() {
	awk -v min="$2" '$1 == "count" { if ($2 != n) bad = 1; n++ } END { exit (bad || n < min) }' "$1"
}

# oci_bundle DIR ARGS_JSON [ANNOTATIONS_JSON]: a bundle of ours over the test root, no
# namespaces.
oci_bundle() {
	mkdir -p "$1"
	/usr/bin/python3 - "$1" "$OCI_DIR/rootfs" "$2" "${3:-{\}}" <<'PY'
import json, sys
b, root, args, ann = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
cfg = {"ociVersion": "1.0.2", "root": {"path": root}, "annotations": ann,
       "process": {"args": args, "cwd": "/", "env": ["PATH=/bin"], "user": {"uid": 0, "gid": 0}},
       "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}]}
json.dump(cfg, open(b + "/config.json", "w"))
PY
}

# oci_state_check "RUNTIME [FLAGS]" ID STATUS: its state has STATUS and matches the
# schema, else a reason is added to $bad. runtime-spec's schema has no paused (runc's
# status, which podman reads): that state is checked with its status as the schema has
# it.
oci_state_check() {
	local f=$OCI_DIR/state-$3.json got
	# shellcheck disable=SC2086
	$1 state "$2" >"$f" 2>>"$OCI_DIR/st.err"
	got=$(json_str status <"$f")
	[ "$got" = "$3" ] || bad="$bad $3: status '$got';"
	if [ "$3" = paused ]; then
		sed 's/"paused"/"running"/' "$f" | $OCI_SCHEMA state - 2>>"$OCI_DIR/st.err" || bad="$bad $3: schema;"
	else
		$OCI_SCHEMA state "$f" 2>>"$OCI_DIR/st.err" || bad="$bad $3: schema;"
	fi
}


# oci_redis_rootfs DIR: Debian's redis-server with the libraries it loads, and busybox.
oci_redis_rootfs() {
	local d=$1 l
	mkdir -p "$d/bin" "$d/etc" "$d/tmp" "$d/data" || return 1
	cp /bin/busybox "$d/bin/busybox" && ln -sf busybox "$d/bin/sh" || return 1
	cp /usr/bin/redis-server "$d/bin/redis-server" || return 1
	for l in $(ldd /usr/bin/redis-server | grep -o '/[^ ]*'); do
		mkdir -p "$d$(dirname "$l")" && cp -L "$l" "$d$l" || return 1
	done
}

# Nested under QEMU's TCG (scripts/kvm-in-tcg.sh), the VM's /run is the host's over 9p,
# where podman's and containerd's databases (mmap) and sockets do not work, no cgroup
# is mounted, and its kernel has no bridge or netfilter modules loaded for podman's
# networks. The VM's mounts are its own: it gets a tmpfs /run and a cgroup2, and
# podman's containers get no network (CONTAINERS_CONF); the checks that need one say
# so. Nothing of this happens on a machine with /dev/kvm.
oci_nested_prep() {
	[ -n "$OCI_NESTED" ] && return 0
	local probe=/run/.ccvm-e2e-fifo.$$
	# a FIFO there cannot be opened over 9p (ENXIO)
	if ! { mkfifo "$probe" && (exec 9<>"$probe"); } 2>/dev/null; then
		rm -f "$probe"
		mount -t tmpfs tmpfs /run || return 1
		OCI_NESTED=1
	fi
	rm -f "$probe"
	if ! grep -q ' cgroup2* ' /proc/self/mounts; then
		mount -t cgroup2 none /sys/fs/cgroup || return 1
		OCI_NESTED=1
	fi
	if [ -n "$OCI_NESTED" ]; then
		printf '[containers]\nnetns = "none"\n' >"$OCI_DIR/containers.conf"
		export CONTAINERS_CONF=$OCI_DIR/containers.conf
	fi
}
oci_nested_prep || echo "oci: cannot prepare the nested VM's /run and cgroups" >&2
