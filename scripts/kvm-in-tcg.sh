#!/usr/bin/env bash
# Run a command where there is a /dev/kvm, on a machine that has none: inside a Linux
# VM under QEMU's TCG (an emulated CPU with AMD SVM), whose Debian kernel loads
# kvm-amd (nested paging off: TCG's is not enough for it). The host's / is the VM's
# root over 9p, so the command sees this tree and its builds; /tmp is the VM's own.
#
# For checking the VM paths (make e2e, a guest program) on such machines: a ccvm VM
# then runs nested under emulation, tens of times slower than on hardware, so no
# timing measured there means anything. Needs qemu-system-x86; fetches Debian's kernel
# and busybox-static packages with apt-get download (cached in $CACHE).
#
# Usage: scripts/kvm-in-tcg.sh [--mem SIZE] [--timeout SECONDS] -- COMMAND [ARGS...]
# The command runs as root in the current directory; its output is shown and its
# exit status is this script's (124 when it ran out of time).
set -eu
MEM=6G
LIMIT=7200
while [ $# -gt 0 ]; do
	case $1 in
	--mem) MEM=$2; shift 2 ;;
	--timeout) LIMIT=$2; shift 2 ;;
	--) shift; break ;;
	*) echo "usage: $0 [--mem SIZE] [--timeout SECONDS] -- COMMAND [ARGS...]" >&2; exit 2 ;;
	esac
done
[ $# -gt 0 ] || { echo "usage: $0 [--mem SIZE] [--timeout SECONDS] -- COMMAND [ARGS...]" >&2; exit 2; }
command -v qemu-system-x86_64 >/dev/null || { echo "$0: needs qemu-system-x86_64 (apt-get install qemu-system-x86)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "$0: run it as root (the VM's 9p root passes ownership through)" >&2; exit 1; }

HERE=$(pwd)
CACHE=${CACHE:-/var/tmp/ccvm-kvm-in-tcg}
mkdir -p "$CACHE"
cd "$CACHE"
# Debian's current kernel package and busybox, unpacked once.
if [ ! -d kernel ] || [ ! -d busybox ]; then
	pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/{print $2; exit}')
	[ -n "$pkg" ] || { echo "$0: apt-cache knows no linux-image-amd64 (apt-get update?)" >&2; exit 1; }
	rm -f ./*.deb
	apt-get download "$pkg" busybox-static >/dev/null 2>&1 ||
		{ echo "$0: apt-get download $pkg busybox-static failed" >&2; exit 1; }
	rm -rf kernel busybox
	dpkg -x linux-image-*.deb kernel
	dpkg -x busybox-static*.deb busybox
	rm -f ./*.deb
fi
KVER=$(ls kernel/lib/modules)
MODS=kernel/lib/modules/$KVER/kernel
# The modules, in load order: virtio for the 9p root, then KVM.
ORDER="drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_pci_legacy_dev
drivers/virtio/virtio_pci_modern_dev drivers/virtio/virtio_pci fs/netfs/netfs
fs/fscache/fscache net/9p/9pnet net/9p/9pnet_virtio fs/9p/9p virt/lib/irqbypass
arch/x86/kvm/kvm drivers/crypto/ccp/ccp arch/x86/kvm/kvm-amd"
rm -rf initrd && mkdir -p initrd/bin initrd/mods initrd/proc initrd/sys initrd/dev initrd/newroot
cp busybox/bin/busybox initrd/bin/
for m in $ORDER; do cp "$MODS/$m.ko" initrd/mods/; done
cat >initrd/init <<EOF
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
chroot /newroot /bin/bash $CACHE/job.sh
poweroff -f
EOF
chmod +x initrd/init
(cd initrd && find . | ../busybox/bin/busybox cpio -o -H newc 2>/dev/null | gzip -1 >../initrd.gz)

# The job: the command in this directory, its output to a file the host reads.
rm -f status out
{
	echo '#!/bin/bash'
	echo "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	printf 'cd %q || exit 1\n' "$HERE"
	printf '%q ' "$@"; echo ">$CACHE/out 2>&1"
	echo "echo \$? >$CACHE/status"
} >job.sh
timeout "$LIMIT" qemu-system-x86_64 -accel tcg,thread=single -cpu max -smp "$(nproc)" -m "$MEM" \
	-nographic -no-reboot -kernel "kernel/boot/vmlinuz-$KVER" -initrd initrd.gz \
	-append "console=ttyS0 quiet panic=-1 rdinit=/init" \
	-fsdev local,id=r,path=/,security_model=passthrough,multidevs=remap \
	-device virtio-9p-pci,fsdev=r,mount_tag=hostroot >console.log 2>&1 || true
cat out 2>/dev/null || true
[ -s status ] || { echo "$0: the VM ended without the command's status (see $CACHE/console.log)" >&2; exit 124; }
exit "$(cat status)"
