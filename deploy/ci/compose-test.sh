#!/usr/bin/env bash
# Runs deploy/docker-compose.yml for real, with no GPU and no image registry:
# podman and podman-compose from Debian (settings below), a base
# image from debootstrap (base-image.sh), images built by deploy/Dockerfile
# from this build tree's install (the machine's CUDA toolkit reused: its
# libcudart for the client programs) with the driver test double in the
# GPU-node image. Then:
#   - gpu0 and gpu1 come up, TLS and token from gen-certs.sh, and their
#     health check (remote-smi in the container) passes;
#   - /metrics answers on each node's published port;
#   - the client service, run with test programs, sees two devices (one per
#     node), copies bytes exactly on both, and runs remote-bench --only cuda;
#   - gpu1 is stopped (SIGTERM: the drain): a client naming both nodes says
#     gpu1 is gone and runs on gpu0's device alone; with REMOTE_GPU_STRICT=1 it
#     fails; a client naming gpu0 alone still works;
#   - everything is taken down (containers, network, volumes).
#
#   deploy/ci/compose-test.sh [--build DIR] [--keep]
# Exit 0 pass, 1 fail, 77 skipped (no podman/podman-compose/debootstrap).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$repo/build keep=
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$(cd "$2" && pwd); shift 2 ;;
	--keep) keep=1; shift ;;
	*) echo "compose-test: unknown argument $1" >&2; exit 2 ;;
	esac
done
for t in podman podman-compose debootstrap openssl python3; do
	command -v $t >/dev/null || { echo "SKIP: compose-test: $t not installed (tools/setup.sh installs it)"; exit 77; }
done
cuda=${RG_CUDA_ROOT:-/usr/local/cuda}
cudart=$(ls "$cuda"/lib64/libcudart.so.13 "$cuda"/targets/x86_64-linux/lib/libcudart.so.13 2>/dev/null | head -n1)
[ -n "$cudart" ] || { echo "SKIP: compose-test: no libcudart.so.13 under $cuda"; exit 77; }
[ -x "$build/bench/remote-bench" ] || { echo "SKIP: compose-test: $build has no remote-bench (nvcc?)"; exit 77; }

t0=$(date +%s)
step() { echo "compose-test: [$(($(date +%s) - t0)) s] $*"; }
fail() { echo "compose-test: FAIL: $*" >&2; exit 1; }

work=$(mktemp -d /var/tmp/rg-compose.XXXXXX)
# podman's settings for this run (the machine's own are left alone): runc,
# since crun's cgroup handling fails on the CI machine; explicit ulimits, since
# root there cannot raise its limits and podman's default asks for more (files:
# this shell's limits; processes: a fixed 8192, as runc was refused even this
# shell's own limit); netavark, whose
# aardvark-dns lets containers find each other by service name.
cat >"$work/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=$(ulimit -Sn):$(ulimit -Hn)", "nproc=8192:8192"]
[engine]
runtime = "runc"
network_backend = "netavark"
CONF
export CONTAINERS_CONF=$work/containers.conf
project=rgci$$
tag=ci$$
node_img=localhost/remote-gpu-node:$tag client_img=localhost/remote-gpu-client:$tag
compose() {
	podman-compose -p "$project" -f "$repo/deploy/docker-compose.yml" -f "$here/compose.ci.yml" "$@"
}
cleanup() {
	if [ -n "$keep" ]; then
		echo "compose-test: kept $work and project $project"
		return
	fi
	compose down -v >/dev/null 2>&1 || true
	podman rmi -f "$node_img" "$client_img" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

base=localhost/rg-debian-base:latest
"$here/base-image.sh" "$base"

step "images from $build"
ctx=$work/ctx pre=$work/ctx/prebuilt/opt/remote-gpu
mkdir -p "$ctx"
cp -a "$repo/deploy" "$ctx/"
rm -rf "$ctx/deploy/secrets"
DESTDIR=$ctx/prebuilt cmake --install "$build" --prefix /opt/remote-gpu >/dev/null
cp -L "$cudart" "$pre/lib/"
mkdir -p "$pre/test-driver" "$pre/test"
cp -L "$build/tests/fakecuda/libcuda.so.1" "$pre/test-driver/"
cp "$build/tests/e2e/bin/devquery" "$build/tests/e2e/bin/copies" "$pre/test/"
ver=$(git -C "$repo" describe --tags --always --dirty 2>/dev/null || true)
for target in gpu-node client; do
	img=$node_img; [ $target = client ] && img=$client_img
	podman build -q -f "$ctx/deploy/Dockerfile" --target $target -t "$img" \
		--build-arg BUILD_BASE=$base --build-arg NODE_BASE=$base --build-arg CLIENT_BASE=$base \
		--build-arg TEST_DRIVER=1 --build-arg RG_VERSION_GIT="$ver" "$ctx" >"$work/build-$target.log" 2>&1 ||
		{ tail -n 30 "$work/build-$target.log"; fail "podman build --target $target"; }
done
podman run --rm "$node_img" --version | grep -q "^remote-gpud [0-9]" || fail "remote-gpud --version in the node image"

step "secrets and ports"
"$repo/deploy/gen-certs.sh" --dir "$work/secrets" gpu0 gpu1 localhost >/dev/null
free_ports() { python3 -c 'import socket
ss=[socket.socket() for _ in range(4)]
[s.bind(("127.0.0.1",0)) for s in ss]
print(" ".join(str(s.getsockname()[1]) for s in ss))'; }
read -r p0 p1 m0 m1 < <(free_ports)
export RG_SECRETS=$work/secrets RG_NODE_IMAGE=$node_img RG_CLIENT_IMAGE=$client_img \
	RG_BIND=127.0.0.1 GPU0_PORT=$p0 GPU1_PORT=$p1 GPU0_METRICS_PORT=$m0 GPU1_METRICS_PORT=$m1

step "up gpu0 gpu1"
compose up -d gpu0 gpu1 >"$work/up.log" 2>&1 || { cat "$work/up.log"; fail "compose up"; }
healthy() {
	local n=100
	while [ $n -gt 0 ]; do
		podman healthcheck run "${project}_$1_1" >/dev/null 2>&1 && return 0
		sleep 0.2
		n=$((n - 1))
	done
	podman logs "${project}_$1_1" 2>&1 | tail -n 20
	return 1
}
healthy gpu0 || fail "gpu0's health check (remote-smi) does not pass"
healthy gpu1 || fail "gpu1's health check (remote-smi) does not pass"

step "/metrics on the published ports"
for m in $m0 $m1; do
	python3 -c 'import sys, urllib.request
t = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=10).read().decode()
sys.exit(0 if "remote_gpud_info" in t else 1)' $m || fail "no remote_gpud_info at 127.0.0.1:$m/metrics"
done

# client REMOTE_GPU COMMAND...: the compose file's client service, running
# COMMAND; its output and podman-compose's on stdout, without a terminal's
# carriage returns, its status kept. --no-deps: podman-compose would otherwise
# start (and rebuild) the nodes it depends on, gpu1 too once it is stopped.
client() {
	local servers=$1
	shift
	compose run --rm --no-deps -T -e REMOTE_GPU="$servers" -e RGTEST_FAKE=1 ${strict:+-e REMOTE_GPU_STRICT=1} client sh -c \
		'REMOTE_GPU_TOKEN=$(cat /run/secrets/token) "$@"; echo "client-status: $?"' sh "$@" 2>&1 |
		tr -d '\r' >"$work/client.out"
	cat "$work/client.out"
	# podman-compose 1.0.3's run exits 0 whatever the command did
	grep -q "^client-status: 0$" "$work/client.out"
}
both=tls://gpu0:7420,tls://gpu1:7420
step "client on both nodes"
client $both /opt/remote-gpu/test/devquery >"$work/devquery.out" 2>&1 || { cat "$work/devquery.out"; fail "devquery"; }
grep -q "^device count: 2$" "$work/devquery.out" || { cat "$work/devquery.out"; fail "devquery: not 2 devices"; }
client $both /opt/remote-gpu/test/copies >"$work/copies.out" 2>&1 || { tail -n 20 "$work/copies.out"; fail "copies"; }
client $both remote-bench --only cuda --iters 200 --launches 2000 --launch-reps 1 --min-time 0.02 --max-size 1M \
	>"$work/bench.out" 2>&1 || { tail -n 20 "$work/bench.out"; fail "remote-bench --only cuda"; }
grep -q "launches/s" "$work/bench.out" || { tail -n 20 "$work/bench.out"; fail "remote-bench printed no launch rate"; }

step "stop gpu1 (SIGTERM, drain)"
compose stop gpu1 >/dev/null 2>&1 || fail "compose stop gpu1"
# the stopped node is reported and skipped: gpu0's device alone; with
# REMOTE_GPU_STRICT=1 the client fails instead
client $both /opt/remote-gpu/test/devquery >"$work/down.out" 2>&1 &&
	grep -q "^device count: 1$" "$work/down.out" || { cat "$work/down.out"; fail "a client naming both nodes, gpu1 stopped: not gpu0's device alone"; }
grep -q "cannot reach remote GPU at tls://gpu1:7420: .*entry skipped" "$work/down.out" || { cat "$work/down.out"; fail "the client does not say gpu1 is unreachable and skipped"; }
if strict=1 client $both /opt/remote-gpu/test/devquery >"$work/strict.out" 2>&1; then
	cat "$work/strict.out"; fail "REMOTE_GPU_STRICT=1: a client naming a stopped node succeeded"
fi
grep -q "cannot reach remote GPU at tls://gpu1:7420" "$work/strict.out" || { cat "$work/strict.out"; fail "REMOTE_GPU_STRICT=1: the client does not say gpu1 is unreachable"; }
client tls://gpu0:7420 /opt/remote-gpu/test/devquery >"$work/one.out" 2>&1 &&
	grep -q "^device count: 1$" "$work/one.out" || { cat "$work/one.out"; fail "gpu0 alone, after gpu1 stopped"; }

step "down"
compose down -v >/dev/null 2>&1 || fail "compose down"
echo "compose-test: PASS in $(($(date +%s) - t0)) s"
