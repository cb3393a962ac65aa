#!/usr/bin/env bash
# Install the Debian packages ccvm needs to build, test and benchmark; only those
# that are missing, so a second run costs nothing. Runs as root or through sudo.
set -euo pipefail

PKGS=(
	build-essential pkg-config linux-libc-dev  # compiler, KVM and userfaultfd headers
	check libsubunit-dev                       # unit tests
	libjansson-dev                             # control protocol (JSON)
	libxxhash-dev                              # snapshot image checksums (XXH3)
	libzstd-dev liblz4-dev                     # snapshot compression (zstd, LZ4)
	libseccomp-dev                             # the monitor's own seccomp filter
	libcap-dev                                 # root without --user gives up its capabilities
	libgnutls28-dev openssl                    # migration over TLS; test credentials
	musl-tools                                 # static musl builds of the test programs
	gnuplot-nox                                # benchmark plots
	python3                                    # control-socket probes in the e2e tests
	redis-server redis-tools                   # the guest workload, redis-cli, redis-benchmark
	libhiredis-dev                             # the YCSB load generator (bench/ycsb)
	qemu-system-x86                            # the peer: QEMU's live snapshots (bench/peers)
	clang libclang-rt-14-dev                   # libFuzzer targets (tests/fuzz)
	memcached nginx-light sqlite3 xz-utils     # Debian programs run in ccvm (docs/compatibility.md)
	podman conmon crun runc containerd criu    # ccvm-oci's real clients and peers (docs/oci.md)
	netavark aardvark-dns iptables containernetworking-plugins catatonit uidmap slirp4netns
	busybox-static                             # the e2e containers' root
	python3-jsonschema golang-github-opencontainers-specs-dev  # OCI state and config schemas
)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=()
[ "$(id -u)" = 0 ] || SUDO=(sudo)
echo "installing missing Debian packages: ${missing[*]}"
"${SUDO[@]}" apt-get update -q
DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
