#!/usr/bin/env bash
# Makes the base image the CI builds deploy/Dockerfile from, with no image
# registry: `debootstrap --variant=minbase` of this machine's Debian release
# (so the binaries built here run in it) from its apt mirror, then
# `podman import`. Cached: an image of that name is kept.
#
#   deploy/ci/base-image.sh [IMAGE]     (default localhost/rg-debian-base:latest)
#
# The image carries what remote-gpud, remote-smi and the test programs need at
# run time (libssl3, libstdc++), so the image builds need no network.
set -euo pipefail
image=${1:-localhost/rg-debian-base:latest}
if podman image exists "$image"; then
	echo "base-image: $image exists"
	exit 0
fi
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}")
mirror=${RG_DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=$(mktemp -d /var/tmp/rg-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "base-image: debootstrap $suite from $mirror"
debootstrap --variant=minbase --include=libssl3,ca-certificates,libstdc++6 "$suite" "$root" "$mirror" \
	>"$root.log" 2>&1 || { tail -n 20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | podman import -q --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
echo "base-image: $image made"
