#!/usr/bin/env bash
# End-to-end tests: real programs in real VMs.
#
# Usage: tests/e2e/run.sh [--part all|host|vm] [--only SCRIPT|parsing] CCVM_BINARY
#
#   --part host   the checks that need no VM (host.sh): bad input refused before a VM
#                 exists, the snapshot engine on plain memory, the benchmark drivers
#   --part vm     the checks that run VMs: guest programs natively and in ccvm (same
#                 output and status), sandbox, sockets, the control socket, signals
#                 (guest.sh), isolation.sh, snapshot.sh, redis.sh, compat.sh, and
#                 ccvm-oci under podman (oci-podman.sh)
#   --part all    both (the default)
#   --only SCRIPT one of them alone: host, guest, isolation, snapshot, redis, compat or
#                 oci-podman
#   --only parsing  of the VM checks, those that drive the monitor's parsing of what a
#                 guest or an image hands it: guest pointers and structures (the
#                 hostile, files, events, signals and sockio programs, the sandbox
#                 probes), ELF files, snapshot images (exact images restored,
#                 descriptors and signals across a restore, damaged images refused)
#
# The VM checks need /dev/kvm: without it this script refuses to run them. `make test`
# (tests/e2e/suite.sh) runs them in a KVM nested under QEMU's TCG on such a machine;
# by hand, one script for instance:
#   scripts/kvm-in-tcg.sh -- env E2E_SCALE=25 E2E_PATIENCE=20 tests/e2e/run.sh --only snapshot ./ccvm
#
# Environment: E2E_SCALE and E2E_PATIENCE (tests/e2e/lib.sh), E2E_RESULTS (a file each
# check's outcome is appended to).
set -u
PART=all ONLY=
VM_SCRIPTS="guest isolation confine snapshot migrate redis compat oci-podman oci-containerd"
while [ $# -gt 1 ]; do
	case $1 in
	--part) PART=$2; shift 2 ;;
	--only) ONLY=$2; shift 2 ;;
	*) break ;;
	esac
done
case $PART in all | host | vm) ;; *) echo "run.sh: --part all, host or vm, not '$PART'" >&2; exit 2 ;; esac
case " host parsing $VM_SCRIPTS " in
*" ${ONLY:-host} "*) ;;
*) echo "run.sh: --only host, guest, isolation, snapshot, migrate, redis, compat, oci-podman, oci-containerd or parsing, not '$ONLY'" >&2; exit 2 ;;
esac
[ $# = 1 ] || { echo "usage: tests/e2e/run.sh [--part all|host|vm] [--only SCRIPT|parsing] CCVM_BINARY" >&2; exit 2; }
# The scripts to run, in order; parsing runs guest.sh and snapshot.sh, each cut to
# its parsing checks (full_suite in lib.sh).
case $ONLY in
"") SCRIPTS="host $VM_SCRIPTS" ;;
parsing) SCRIPTS="guest snapshot migrate" ;;
*) SCRIPTS=$ONLY ;;
esac
keep=
for s in $SCRIPTS; do
	case $PART:$s in host:host | vm:[!h]* | all:*) keep="$keep $s" ;; esac
done
SCRIPTS=${keep# }
CCVM=$(realpath "$1")
TOP=$(cd "$(dirname "$0")/../.." && pwd)
G=$TOP/build/guest
[ -x "$CCVM" ] || { echo "run.sh: $1 is not an executable (make ccvm)" >&2; exit 2; }
if [ -n "$SCRIPTS" ] && [ "$SCRIPTS" != host ] && ! { [ -c /dev/kvm ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]; }; then
	echo "run.sh: the VM checks need a usable /dev/kvm, and this machine has none:" >&2
	echo "  make e2e runs them nested (scripts/kvm-in-tcg.sh), or run only --part host" >&2
	exit 1
fi
WORK=$(mktemp -d /tmp/ccvm-e2e.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# ccvm's defaults are the current directory: what a guest may write (--rw) and where
# ctl snapshot may put images (--image-dir). Here that is the suite's own directory,
# never the source tree.
cd "$WORK" || exit 1
# shellcheck source=tests/e2e/lib.sh
. "$TOP/tests/e2e/lib.sh"
echo "e2e: ${SCRIPTS:-nothing}${ONLY:+ (only $ONLY)}, scale $E2E_SCALE%, patience x$E2E_PATIENCE"
for s in $SCRIPTS; do
	# shellcheck disable=SC1090
	. "$TOP/tests/e2e/$s.sh"
done

echo
e2e_closing
