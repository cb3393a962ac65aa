#!/usr/bin/env bash
# Run a command where there is a /dev/kvm, on a machine that has none: inside a Linux
# VM under QEMU's TCG (an emulated CPU with AMD SVM), whose Debian kernel loads
# kvm-amd (nested paging off: TCG's is not enough for it). The host's / is the VM's
# root over 9p, so the command sees this tree and its builds at the same paths.
#
# The VM's /tmp, /dev/shm, /dev, /proc and /sys are its own (sockets and FIFOs work
# there, which they do not over 9p). So that the command still finds the host's files
# where it was told they are, these are made reachable at the same paths: the
# current directory, $TMPDIR, and every argument that names an existing host path
# (PATH, VAR=PATH or --opt=PATH): an entry of the host's /tmp or /dev/shm they lie in
# is bind-mounted from the 9p root over the VM's own, and a symlink on the way is made
# again there, so /tmp, a path with spaces and a symlinked path all work. A current
# directory or $TMPDIR that cannot be shared (inside /proc, /sys or /dev, the VM's own
# /tmp itself, gone, or with a newline in its name) is refused at once, with the
# reason, before anything boots.
#
# For checking the VM paths (make test does, through tests/e2e/suite.sh; or a guest
# program by hand) on such machines: a ccvm VM then runs nested under emulation, tens
# of times slower than on hardware, so no timing measured there means anything. Needs
# qemu-system-x86; fetches Debian's kernel and busybox-static packages once with
# apt-get download and keeps them unpacked in $CACHE (default
# /var/tmp/ccvm-kvm-in-tcg), so a second run starts in seconds.
#
# Usage: scripts/kvm-in-tcg.sh [--mem SIZE] [--timeout SECONDS] -- COMMAND [ARGS...]
# The command runs as root in the current directory, with $TMPDIR as here when it is
# set; its output is shown as it comes and its exit status is this script's: 124 when
# it ran out of time, 125 when the nested KVM could not be started or the directory
# not shared (the reason is printed).
set -eu
MEM=6G
LIMIT=7200
NOSTART=125
while [ $# -gt 0 ]; do
	case $1 in
	--mem) MEM=$2; shift 2 ;;
	--timeout) LIMIT=$2; shift 2 ;;
	--) shift; break ;;
	*) echo "usage: $0 [--mem SIZE] [--timeout SECONDS] -- COMMAND [ARGS...]" >&2; exit 2 ;;
	esac
done
[ $# -gt 0 ] || { echo "usage: $0 [--mem SIZE] [--timeout SECONDS] -- COMMAND [ARGS...]" >&2; exit 2; }
nostart() { echo "$0: cannot start a nested KVM: $*" >&2; exit $NOSTART; }
command -v qemu-system-x86_64 >/dev/null || nostart "needs qemu-system-x86_64 (apt-get install qemu-system-x86)"
[ "$(id -u)" = 0 ] || nostart "run it as root (the VM's 9p root passes ownership through)"

# ---- what of this machine the VM must see at the same paths ----
NL='
'
SHARES=()          # records of three lines each: bind|link, the path, a link's target
declare -A SHARED  # paths already recorded

# Is @1 an entry directly in a tree the VM has its own of, which can be shared?
own_entry() { case $1 in /tmp/*/* | /dev/shm/*/*) return 1 ;; /tmp/?* | /dev/shm/?*) return 0 ;; *) return 1 ;; esac; }

# Why @1 cannot be reached at its own path in the VM (nothing when it can).
unshareable() {
	local top=${1#/}
	top=/${top%%/*}
	case $1 in
	*"$NL"*) echo "a newline in its name" ;;
	/tmp | /tmp/ | /dev/shm | /dev/shm/) echo "it is the nested VM's own $top, a tmpfs: use a directory in it" ;;
	/dev/shm/*) ;;
	/proc | /proc/* | /sys | /sys/* | /dev | /dev/*) echo "the nested VM has its own $top" ;;
	esac
}

record() { # KIND PATH [TARGET]
	[ -z "${SHARED[$2]:-}" ] || return 0
	SHARED[$2]=1
	SHARES+=("$1" "$2" "${3:-}")
}

# Make @1 reachable in the VM: walk it from /, bind the entry of /tmp or /dev/shm it
# passes through, and follow each symlink on the way (its target may lie in such a
# tree too). 1, with why in WHY, for what cannot be shared.
share() { # PATH [DEPTH]
	local p=$1 depth=${2:-0} q='' comp rest t
	WHY=
	[ "$depth" -lt 40 ] || { WHY="too many symlinks"; return 1; }
	WHY=$(unshareable "$p")
	[ -z "$WHY" ] || return 1
	rest=${p#/}
	while [ -n "$rest" ]; do
		comp=${rest%%/*}
		if [ "$comp" = "$rest" ]; then rest=; else rest=${rest#*/}; fi
		case $comp in "" | .) continue ;; ..) q=${q%/*}; continue ;; esac
		q=$q/$comp
		if [ -L "$q" ]; then
			t=$(readlink "$q")
			case $t in *"$NL"*) WHY="a newline in the symlink $q"; return 1 ;; esac
			if own_entry "$q"; then record link "$q" "$t"; fi
			case $t in /*) ;; *) t=${q%/*}/$t ;; esac
			share "$t${rest:+/$rest}" $((depth + 1))
			return
		fi
		if own_entry "$q" && [ -e "$q" ]; then record bind "$q"; fi
	done
	return 0
}

HERE=$(pwd 2>/dev/null) || nostart "the current directory is gone (removed after the shell entered it)"
{ [ -d "$HERE" ] && [ -x "$HERE" ]; } || nostart "the current directory $HERE is gone or cannot be entered"
share "$HERE" || nostart "cannot share the current directory $HERE with the VM: $WHY"
case ${TMPDIR:-/tmp} in
/tmp | /tmp/ | /dev/shm | /dev/shm/) ;; # the VM's own serves as well
*) share "$TMPDIR" || nostart "cannot share TMPDIR=$TMPDIR with the VM: $WHY" ;;
esac
# The command's arguments that name host paths: shared when they exist; one that lies
# directly in the VM's own /tmp and does not exist yet would be made there, out of
# this machine's sight: said, not refused (it may be meant so).
for a in "$@"; do
	case $a in /*) p=$a ;; *=/*) p=/${a#*=/} ;; *) continue ;; esac
	[ -z "$(unshareable "$p")" ] || continue
	if [ -e "$p" ] || [ -L "$p" ]; then
		share "$p" || true
	elif [ -d "${p%/*}" ] && ! own_entry "$p"; then
		share "${p%/*}" || true
	elif own_entry "$p"; then
		echo "$0: $p does not exist here: in the VM it would lie in the VM's own ${p%/*}" >&2
	fi
done

CACHE=${CACHE:-/var/tmp/ccvm-kvm-in-tcg}
mkdir -p "$CACHE"
cd "$CACHE"
# Debian's current kernel package and busybox, fetched and unpacked once; a lock keeps
# two runs from unpacking at once.
exec 9>"$CACHE/lock"
flock 9
if [ ! -d kernel ] || [ ! -d busybox ]; then
	kernel_pkg() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}'; }
	pkg=$(kernel_pkg)
	[ -n "$pkg" ] || { apt-get update -q >/dev/null 2>&1; pkg=$(kernel_pkg); }
	[ -n "$pkg" ] || nostart "apt-cache knows no linux-image-amd64, even after apt-get update"
	rm -f ./*.deb
	apt-get download "$pkg" busybox-static >/dev/null 2>&1 ||
		nostart "apt-get download $pkg busybox-static failed"
	rm -rf kernel busybox
	dpkg -x linux-image-*.deb kernel
	dpkg -x busybox-static*.deb busybox
	rm -f ./*.deb
fi
flock -u 9
KVER=$(ls kernel/lib/modules)
MODS=kernel/lib/modules/$KVER/kernel
# This run's files, apart from any other run's; the VM writes the command's output and
# status there, so it must reach them too.
RUN=$(mktemp -d "$CACHE/run.XXXXXX")
trap 'rm -rf "$RUN"' EXIT
share "$RUN" || nostart "cannot share $RUN (CACHE) with the VM: $WHY"
# The modules, in load order: virtio for the 9p root, then KVM.
ORDER="drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_pci_legacy_dev
drivers/virtio/virtio_pci_modern_dev drivers/virtio/virtio_pci fs/netfs/netfs
fs/fscache/fscache net/9p/9pnet net/9p/9pnet_virtio fs/9p/9p virt/lib/irqbypass
arch/x86/kvm/kvm drivers/crypto/ccp/ccp arch/x86/kvm/kvm-amd"
mkdir -p "$RUN"/initrd/bin "$RUN"/initrd/mods "$RUN"/initrd/proc "$RUN"/initrd/sys "$RUN"/initrd/dev "$RUN"/initrd/newroot
cp busybox/bin/busybox "$RUN"/initrd/bin/
for m in $ORDER; do cp "$MODS/$m.ko" "$RUN"/initrd/mods/; done
# The shares, three lines a record (kind, path, a link's target): no path has a newline.
for x in "${SHARES[@]}"; do printf '%s\n' "$x"; done >"$RUN"/initrd/shares
{
	echo '#!/bin/busybox sh'
	printf 'RUN=%q\n' "$RUN"
	printf 'MODULES=%q\n' "$(for m in $ORDER; do printf '%s ' "${m##*/}"; done)"
	cat <<'EOF'
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $MODULES; do
	if [ $m = kvm-amd ]; then insmod /mods/$m.ko npt=0; else insmod /mods/$m.ko; fi
done
ip link set lo up
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 hostroot /newroot
# The host's /tmp and /dev/shm, kept at hand before the VM's own cover them.
mkdir -p /host/tmp /host/shm
mount -o bind /newroot/tmp /host/tmp
mount -o bind /newroot/dev/shm /host/shm 2>/dev/null
mount -t proc proc /newroot/proc; mount -t sysfs sys /newroot/sys
mount -t devtmpfs dev /newroot/dev; mount -t tmpfs tmp /newroot/tmp
mkdir -p /newroot/dev/shm /newroot/dev/pts
mount -t tmpfs shm /newroot/dev/shm; mount -t devpts pts /newroot/dev/pts
# The links a Debian system's /dev has (bash's <(...) needs /dev/fd).
ln -s /proc/self/fd /newroot/dev/fd; ln -s /proc/self/fd/0 /newroot/dev/stdin
ln -s /proc/self/fd/1 /newroot/dev/stdout; ln -s /proc/self/fd/2 /newroot/dev/stderr
# What of the host's /tmp and /dev/shm the command needs, at the same paths.
unshared=
while IFS= read -r kind && IFS= read -r path && IFS= read -r target; do
	case $path in /tmp/*) src=/host/tmp/${path#/tmp/} ;; *) src=/host/shm/${path#/dev/shm/} ;; esac
	if [ "$kind" = link ]; then
		ln -s "$target" "/newroot$path"
	elif [ -d "$src" ]; then
		mkdir -p "/newroot$path" && mount -o bind "$src" "/newroot$path"
	else
		: >"/newroot$path" && mount -o bind "$src" "/newroot$path"
	fi || unshared="$unshared $path"
done </shares
if [ -n "$unshared" ]; then
	echo "could not make$unshared reachable in the VM (see the console log)" >"/newroot$RUN/nokvm"
elif [ -c /newroot/dev/kvm ]; then
	chroot /newroot /bin/bash "$RUN/job.sh"
else
	echo "no /dev/kvm in the VM: kvm-amd did not load (dmesg below)" >"/newroot$RUN/nokvm"
	dmesg | grep -i -E 'kvm|svm' | tail -5 >>"/newroot$RUN/nokvm"
fi
poweroff -f
EOF
} >"$RUN"/initrd/init
chmod +x "$RUN"/initrd/init
(cd "$RUN"/initrd && find . | "$CACHE"/busybox/bin/busybox cpio -o -H newc 2>/dev/null | gzip -1 >../initrd.gz)

# The job: the command in this directory (TMPDIR as here), its output to a file shown
# as it grows.
{
	echo '#!/bin/bash'
	echo "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	[ -z "${TMPDIR:-}" ] || printf 'export TMPDIR=%q\n' "$TMPDIR"
	printf 'cd %q || exit 1\n' "$HERE"
	printf '%q ' "$@"; printf '>%q 2>&1\n' "$RUN/out"
	printf 'echo $? >%q\n' "$RUN/status"
} >"$RUN"/job.sh
: >"$RUN"/out
# One host thread for every vCPU (thread=single): with multi-threaded TCG the nested
# VM's kernel locked up (soft lockups on both CPUs) within minutes in our runs.
timeout "$LIMIT" qemu-system-x86_64 -accel tcg,thread=single -cpu max -smp "$(nproc)" -m "$MEM" \
	-nographic -no-reboot -kernel "kernel/boot/vmlinuz-$KVER" -initrd "$RUN"/initrd.gz \
	-append "console=ttyS0 quiet panic=-1 rdinit=/init" \
	-fsdev local,id=r,path=/,security_model=passthrough,multidevs=remap \
	-device virtio-9p-pci,fsdev=r,mount_tag=hostroot >"$RUN"/console.log 2>&1 &
qemu=$!
# Ended early (a signal): the VM goes too (timeout passes TERM on to QEMU).
trap 'kill $qemu 2>/dev/null || true; rm -rf "$RUN"' EXIT
trap 'exit 143' TERM INT HUP
tail -n +1 -f --pid=$qemu "$RUN"/out || true
wait $qemu && qst=0 || qst=$?
cp "$RUN"/console.log "$CACHE"/console.log
[ ! -s "$RUN"/nokvm ] || nostart "$(cat "$RUN"/nokvm)"
[ -s "$RUN"/status ] && exit "$(cat "$RUN"/status)"
[ "$qst" = 124 ] && { echo "$0: the command ran out of its $LIMIT s" >&2; exit 124; }
nostart "the VM ended without the command's status (QEMU status $qst; see $CACHE/console.log)"
