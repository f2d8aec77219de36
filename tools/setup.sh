#!/usr/bin/env bash
# Installs what the build needs (Debian/Ubuntu packages) and builds everything into
# build/. The CUDA 13 toolkit is expected at /usr/local/cuda (or RG_CUDA_ROOT).
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS="cmake make gcc g++ clang python3 libuv1-dev libmsgpack-dev libxxhash-dev libzstd-dev liblz4-dev nettle-dev
      libssl-dev openssl libibverbs-dev librdmacm-dev python3-prometheus-client
      podman podman-compose runc netavark aardvark-dns iptables debootstrap"
missing=$(for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -n "$missing" ]; then
	SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -q
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q $missing
fi
if [ ! -x "${RG_CUDA_ROOT:-/usr/local/cuda}/bin/nvcc" ]; then
	echo "setup: the CUDA 13 toolkit is not at ${RG_CUDA_ROOT:-/usr/local/cuda} (nvcc missing);" >&2
	echo "       install it or set RG_CUDA_ROOT. Test programs need nvcc." >&2
fi
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} -DRG_CUDA_ROOT="${RG_CUDA_ROOT:-/usr/local/cuda}" >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
