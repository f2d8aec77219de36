#!/usr/bin/env bash
# Issue 3's benchmark, on the GPU machine: a client that imports torch and runs one
# kernel, timed from process start to the first result, and the kernel-image bytes
# it had to send: locally on the GPU; remotely with an empty store; remotely with a
# store extracted from libtorch_cuda.so beforehand. Then a cuDNN client (a conv2d
# forward and backward): locally, and remotely twice on one store, cold (it
# uploads what cuDNN loads) and warm (it must upload nothing). Writes
# cubin-startup.md to $OUT (or bench/results/).
#
#   bench/cubin-startup.sh BUILD_DIR GPULESS_WRAPPER
#
# GPULESS_WRAPPER runs a command in the mount namespace without the driver (as
# tests/gpu/run.sh builds it); without one the client runs with the driver visible.
set -u
B=$1 wrap=${2:-}
out=${OUT:-$(dirname "$0")/results}
mkdir -p "$out"
work=$(mktemp -d /tmp/rg-startup.XXXXXX)
py='import torch; x = torch.ones(1024, device="cuda"); print("result", (x * 2).sum().item())'
tlib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so"))')

ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
runs=3
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

local_ms=$(for i in $(seq $runs); do t=$(date +%s%N); python3 -c "$py" >/dev/null 2>&1; ms $t; done | median)

serve() { # STORE -> port in $work/port
	rm -f "$work/port"
	"$B/backend/remote-gpud" --listen 127.0.0.1:0 --port-file "$work/port" --cubin-store "$1" 2>>"$work/server.log" &
	srv=$!
	for _ in $(seq 400); do [ -s "$work/port" ] && return; sleep 0.05; done
}
conv='import torch; x = torch.randn(8, 16, 32, 32, device="cuda", requires_grad=True); w = torch.randn(32, 16, 3, 3, device="cuda", requires_grad=True); y = torch.nn.functional.conv2d(x, w, padding=1); y.sum().backward(); print("result", y.sum().item(), x.grad.sum().item())'
client() { # [PROGRAM] -> "ms uploaded_images uploaded_bytes"
	local py=${1:-$py}
	t=$(date +%s%N)
	$wrap env REMOTE_GPU=127.0.0.1:$(cat "$work/port") REMOTE_GPU_LOG=info LD_PRELOAD="$B/frontend/libremote.so" LD_LIBRARY_PATH="$B/frontend/driver" \
		python3 -c "$py" >"$work/client.out" 2>"$work/client.err"
	el=$(ms $t)
	up=$(sed -n 's/.*kernel images: [0-9]* loaded, \([0-9]*\) uploaded (\([0-9]*\) bytes).*/\1 \2/p' "$work/client.err" | tail -n1)
	grep -q '^result' "$work/client.out" || up="FAILED $(tail -n1 "$work/client.err" | cut -c1-120)"
	echo "$el ${up:-0 0}"
}

serve "$work/empty"
cold=$(client)
kill $srv; wait $srv 2>/dev/null

t=$(date +%s%N)
"$B/cubin-tools/remote-cubin" extract "$tlib" --store "$work/pre" >"$work/extract.log" 2>&1
extract_ms=$(ms $t)
serve "$work/pre"
warm=$(for i in $(seq $runs); do client; done | sort -n | awk '{a[NR]=$0} END {print a[int((NR+1)/2)]}')
kill $srv; wait $srv 2>/dev/null

conv_local_ms=$(for i in $(seq $runs); do t=$(date +%s%N); python3 -c "$conv" >/dev/null 2>&1; ms $t; done | median)
serve "$work/cudnn"
conv_cold=$(client "$conv")
conv_warm=$(for i in $(seq $runs); do client "$conv"; done | sort -n | awk '{a[NR]=$0} END {print a[int((NR+1)/2)]}')
kill $srv; wait $srv 2>/dev/null

{
	echo "# Startup with and without a preloaded cubin store"
	echo
	echo "- machine: $(nvidia-smi -L 2>/dev/null | head -n1); $(nproc) cores"
	echo "- commit: ${RG_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
	echo "- client: \`python3 -c '$py'\`, timed from process start to the printed result (median of $runs where repeated)"
	echo "- remote: remote-gpud on the GPU (a process per session), client in the GPU-less namespace over loopback TCP"
	echo "- store extraction: \`remote-cubin extract libtorch_cuda.so\` took ${extract_ms} ms ($(grep -c . "$work/pre/index" 2>/dev/null) images)"
	echo
	echo "| run | time to first result | images uploaded | bytes uploaded | vs local |"
	echo "|---|---|---|---|---|"
	echo "| local GPU | ${local_ms} ms | - | - | - |"
	set -- $cold
	echo "| remote, empty store | $1 ms | $2 | $3 | +$(( $1 - local_ms )) ms |"
	set -- $warm
	echo "| remote, store from libtorch_cuda.so | $1 ms | $2 | $3 | +$(( $1 - local_ms )) ms |"
	echo
	echo "cuDNN: \`python3 -c '$conv'\`; the warm runs on the store the cold run filled"
	echo
	echo "| run | time to first result | images uploaded | bytes uploaded | vs local |"
	echo "|---|---|---|---|---|"
	echo "| local GPU | ${conv_local_ms} ms | - | - | - |"
	set -- $conv_cold
	echo "| remote, empty store (cold) | $1 ms | $2 | $3 | +$(( $1 - conv_local_ms )) ms |"
	set -- $conv_warm
	echo "| remote, the same store (warm) | $1 ms | $2 | $3 | +$(( $1 - conv_local_ms )) ms |"
} >"$out/cubin-startup.md"
cat "$out/cubin-startup.md"
rm -rf "$work"
