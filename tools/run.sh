#!/usr/bin/env bash
# The main job: start remote-gpud on this machine's GPU and run an example CUDA
# program through libremote.so, as a GPU-less client would.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
B=$PWD/build
port_file=$(mktemp)
example=$B/examples/vector_add
if ! ldconfig -p | grep -q 'libcuda.so.1' || ! ls /dev/nvidia0 >/dev/null 2>&1; then
	cat <<MSG
This machine has no NVIDIA GPU (no libcuda.so.1 / /dev/nvidia0), so remote-gpud has
nothing to serve here. On a GPU node run:

    $B/backend/remote-gpud --listen 0.0.0.0:7420 --tls-cert CERT.pem --tls-key KEY.pem

and on any host without a GPU:

    REMOTE_GPU=tls://gpu-node:7420 REMOTE_GPU_TLS_CA=CA.pem LD_PRELOAD=$B/frontend/libremote.so ./your-cuda-program

For a look at the whole path now, a test program whose kernels the driver test
double emulates runs against remote-gpud on that double (device memory in host RAM):
MSG
	driver=(--driver "$B/tests/fakecuda/libcuda.so.1")
	example=$B/tests/e2e/bin/streams
else
	driver=()
fi
"$B/backend/remote-gpud" --listen 127.0.0.1:0 --port-file "$port_file" "${driver[@]}" &
server=$!
trap 'kill $server 2>/dev/null; rm -f "$port_file"' EXIT
for _ in $(seq 100); do [ -s "$port_file" ] && break; sleep 0.05; done
echo "remote-gpud listening on 127.0.0.1:$(cat "$port_file")"
REMOTE_GPU=127.0.0.1:$(cat "$port_file") LD_PRELOAD=$B/frontend/libremote.so "$example"
