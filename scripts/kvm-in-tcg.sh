#!/usr/bin/env bash
# Run a command where there is a /dev/kvm, on a machine that has none: inside a Linux
# VM under QEMU's TCG (an emulated CPU with AMD SVM), whose Debian kernel loads
# kvm-amd (nested paging off: TCG's is not enough for it). The host's / is the VM's
# root over 9p, so the command sees this tree and its builds; /tmp is the VM's own.
#
# For checking the VM paths (make test does, through tests/e2e/suite.sh; or a guest
# program by hand) on such machines: a ccvm VM then runs nested under emulation, tens
# of times slower than on hardware, so no timing measured there means anything. Needs
# qemu-system-x86; fetches Debian's kernel and busybox-static packages once with
# apt-get download and keeps them unpacked in $CACHE (default
# /var/tmp/ccvm-kvm-in-tcg), so a second run starts in seconds.
#
# Usage: scripts/kvm-in-tcg.sh [--mem SIZE] [--timeout SECONDS] -- COMMAND [ARGS...]
# The command runs as root in the current directory; its output is shown as it comes
# and its exit status is this script's: 124 when it ran out of time, 125 when the
# nested KVM could not be started (the reason is printed).
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

HERE=$(pwd)
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
# This run's files, apart from any other run's.
RUN=$(mktemp -d "$CACHE/run.XXXXXX")
trap 'rm -rf "$RUN"' EXIT
# The modules, in load order: virtio for the 9p root, then KVM.
ORDER="drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_pci_legacy_dev
drivers/virtio/virtio_pci_modern_dev drivers/virtio/virtio_pci fs/netfs/netfs
fs/fscache/fscache net/9p/9pnet net/9p/9pnet_virtio fs/9p/9p virt/lib/irqbypass
arch/x86/kvm/kvm drivers/crypto/ccp/ccp arch/x86/kvm/kvm-amd"
mkdir -p "$RUN"/initrd/bin "$RUN"/initrd/mods "$RUN"/initrd/proc "$RUN"/initrd/sys "$RUN"/initrd/dev "$RUN"/initrd/newroot
cp busybox/bin/busybox "$RUN"/initrd/bin/
for m in $ORDER; do cp "$MODS/$m.ko" "$RUN"/initrd/mods/; done
cat >"$RUN"/initrd/init <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $(for m in $ORDER; do printf '%s ' "${m##*/}"; done); do
	if [ \$m = kvm-amd ]; then insmod /mods/\$m.ko npt=0; else insmod /mods/\$m.ko; fi
done
ip link set lo up
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 hostroot /newroot
mount -t proc proc /newroot/proc; mount -t sysfs sys /newroot/sys
mount -t devtmpfs dev /newroot/dev; mount -t tmpfs tmp /newroot/tmp
mkdir -p /newroot/dev/shm /newroot/dev/pts
mount -t tmpfs shm /newroot/dev/shm; mount -t devpts pts /newroot/dev/pts
# The links a Debian system's /dev has (bash's <(...) needs /dev/fd).
ln -s /proc/self/fd /newroot/dev/fd; ln -s /proc/self/fd/0 /newroot/dev/stdin
ln -s /proc/self/fd/1 /newroot/dev/stdout; ln -s /proc/self/fd/2 /newroot/dev/stderr
if [ -c /newroot/dev/kvm ]; then
	chroot /newroot /bin/bash $RUN/job.sh
else
	echo "no /dev/kvm in the VM: kvm-amd did not load (dmesg below)" >$RUN/nokvm
	dmesg | grep -i -E 'kvm|svm' | tail -5 >>$RUN/nokvm
fi
poweroff -f
EOF
chmod +x "$RUN"/initrd/init
(cd "$RUN"/initrd && find . | "$CACHE"/busybox/bin/busybox cpio -o -H newc 2>/dev/null | gzip -1 >../initrd.gz)

# The job: the command in this directory, its output to a file shown as it grows.
{
	echo '#!/bin/bash'
	echo "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	printf 'cd %q || exit 1\n' "$HERE"
	printf '%q ' "$@"; echo ">$RUN/out 2>&1"
	echo "echo \$? >$RUN/status"
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
tail -n +1 -f --pid=$qemu "$RUN"/out || true
wait $qemu && qst=0 || qst=$?
cp "$RUN"/console.log "$CACHE"/console.log
[ ! -s "$RUN"/nokvm ] || nostart "$(cat "$RUN"/nokvm)"
[ -s "$RUN"/status ] && exit "$(cat "$RUN"/status)"
[ "$qst" = 124 ] && { echo "$0: the command ran out of its $LIMIT s" >&2; exit 124; }
nostart "the VM ended without the command's status (QEMU status $qst; see $CACHE/console.log)"
