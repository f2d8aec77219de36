#!/bin/sh
# Run-time libraries of remote-gpu's binaries, in deploy/Dockerfile's images:
# OpenSSL 3 (libremote.so and remote-gpud; libuv is linked in) and the C++
# runtime (remote-bench, test programs). Skips apt when they are present (the
# CI's base image has them and no registry), and knows both Debian 12's and
# Ubuntu 24.04's package names.
set -eu
have() { ls /usr/lib/*/"$1"* /lib/*/"$1"* >/dev/null 2>&1; }
if have libssl.so.3 && have libstdc++.so.6; then
	exit 0
fi
apt-get update -q
ssl=libssl3t64
apt-cache show "$ssl" >/dev/null 2>&1 || ssl=libssl3
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$ssl" libstdc++6 ca-certificates
rm -rf /var/lib/apt/lists/*
