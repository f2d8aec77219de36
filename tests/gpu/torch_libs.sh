#!/usr/bin/env bash
# The libraries PyTorch reaches through the driver API (cuDNN, cuFFT, cuSOLVER,
# cuSPARSE, cuRAND), local vs remote, and the ResNet-50 training step ratio.
#
#   RG_LIB=libremote.so [RG_PROBE=probe] tests/gpu/torch_libs.sh GPULESS_WRAPPER PORT
#
# 1. tests/gpu/torch_libs.py locally and through libremote.so: each workload's
#    digests must be equal (lines other than "time ..."), and the remote log must
#    hold no "not supported".
#    The conv and LSTM workloads again with PyTorch's expandable segments (its
#    allocator on the driver's virtual memory calls).
# 2. ResNet-50 training steps (bf16 autocast, channels_last, batch 32) timed
#    locally and remotely, alternating L R L R (RG_BENCH_STEPS steps each after a
#    warm-up): the ratio of the medians.
# 3. Calls, synchronous round trips and bytes per step, from two remote runs of
#    N and 2N steps with REMOTE_GPU_STATS (the difference over N steps).
# Writes torch-libs.md to $OUT (or tests/gpu/reports/). Last line: a summary.
set -u
wrap=$1 port=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-$root/tests/gpu/reports}
lib=${RG_LIB:?RG_LIB: the libremote.so to use}
steps=${RG_BENCH_STEPS:-20}
work=$(mktemp -d /tmp/rg-libs.XXXXXX)
rep=$out/torch-libs.md
mkdir -p "$out"

remote() {
	$wrap env REMOTE_GPU=127.0.0.1:$port LD_PRELOAD="$lib" LD_LIBRARY_PATH="$(dirname "$lib")/driver" \
		PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 "$@"
}

timeout 300 python3 "$here/torch_libs.py" >"$work/local.out" 2>"$work/local.err"
lrc=$?
# a second local run: what a library does not reproduce locally either
timeout 300 python3 "$here/torch_libs.py" >"$work/local2.out" 2>/dev/null
remote timeout 400 env REMOTE_GPU_LOG=info python3 "$here/torch_libs.py" >"$work/remote.out" 2>"$work/remote.err"
rrc=$?
grep -v '^time ' "$work/local.out" >"$work/local.cmp"
grep -v '^time ' "$work/remote.out" >"$work/remote.cmp"
grep -v '^time ' "$work/local2.out" >"$work/local2.cmp"
# the largest relative difference between the numbers of two lines
reldiff() {
	python3 -c 'import re, sys
a = [float(x) for x in re.findall(r"\d+\.\d+(?:e-?\d+)?", sys.argv[1])]
b = [float(x) for x in re.findall(r"\d+\.\d+(?:e-?\d+)?", sys.argv[2])]
print("%.2e" % max((abs(x - y) / max(abs(x), 1e-30) for x, y in zip(a, b)), default=0.0) if a and len(a) == len(b) else "-")' "$1" "$2"
}

# PyTorch's expandable segments: its allocator on the virtual memory calls
for side in local remote; do
	run=(); [ $side = remote ] && run=(remote)
	"${run[@]}" timeout 300 env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 "$here/torch_libs.py" \
		--only conv,lstm >"$work/exp.$side" 2>"$work/exp.$side.err"
	sed -i '/^time /d; s/^\([a-z]*\):/\1 (expandable segments):/' "$work/exp.$side"
done
cat "$work/exp.local" >>"$work/local.cmp"
cat "$work/exp.local" >>"$work/local2.cmp"
cat "$work/exp.remote" >>"$work/remote.cmp"
cat "$work/exp.remote.err" >>"$work/remote.err"
ns=$(grep -c 'not supported' "$work/remote.err")

median() { sed -n "s/^time resnet50_step_median //p" "$1"; }
bench=()
for r in 1 2; do
	timeout 300 python3 "$here/torch_libs.py" --only none --bench "$steps" >"$work/bl$r" 2>&1
	remote timeout 300 python3 "$here/torch_libs.py" --only none --bench "$steps" >"$work/br$r" 2>&1
	bench+=("$(median "$work/bl$r")" "$(median "$work/br$r")")
done
ratio=$(python3 -c 'import sys
v=[float(x) for x in sys.argv[1:] if x]
l, r = v[0::2], v[1::2]
print("%.3f" % ((sum(r)/len(r)) / (sum(l)/len(l))) if len(v) == 4 else "n/a")' "${bench[@]}")

for n in "$steps" $((2 * steps)); do
	remote timeout 300 env REMOTE_GPU_STATS="$work/stats$n.json" python3 "$here/torch_libs.py" --only none \
		--bench "$n" >/dev/null 2>&1
done
per_step=$(python3 - "$work/stats$steps.json" "$work/stats$((2 * steps)).json" "$steps" <<'EOF'
import json, sys
def tot(p):
    try:
        f = json.load(open(p))["functions"]
    except Exception:
        return None
    return [sum(x[k] for x in f) for k in ("calls", "round_trips", "bytes_sent", "bytes_received")]
a, b, n = tot(sys.argv[1]), tot(sys.argv[2]), int(sys.argv[3])
if a and b:
    c, rt, tx, rx = [(y - x) / n for x, y in zip(a, b)]
    print(f"{c:.0f} calls, {rt:.1f} synchronous round trips, {tx / 1024:.1f} KiB sent, {rx / 1024:.1f} KiB received")
else:
    print("n/a (no statistics file)")
EOF
)

{
	echo "# CUDA libraries through the driver API, and ResNet-50"
	echo
	echo "- machine: $(nvidia-smi -L 2>/dev/null | head -n1); torch $(python3 -c 'import torch; print(torch.__version__)')"
	echo "- commit: ${RG_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null)}; remote = libremote.so in the GPU-less namespace"
	echo "- local exit $lrc, remote exit $rrc; \"not supported\" lines in the remote log: $ns"
	echo
	echo "A workload that a second local run does not reproduce either is judged by its"
	echo "numbers: the largest relative difference remote vs local next to local vs local."
	echo
	echo "| workload | local = remote | local = local again | max rel diff remote/local | max rel diff local/local | local | remote |"
	echo "|---|---|---|---|---|---|---|"
	while read -r line; do
		name=${line%%:*}
		r=$(grep "^$name:" "$work/remote.cmp" | head -n1)
		l2=$(grep "^$name:" "$work/local2.cmp" | head -n1)
		[ "$line" = "$r" ] && eq=yes || eq=NO
		[ "$line" = "$l2" ] && eq2=yes || eq2=NO
		echo "| $name | $eq | $eq2 | $(reldiff "$line" "$r") | $(reldiff "$line" "$l2") | \`${line#*: }\` | \`${r#*: }\` |"
	done <"$work/local.cmp"
	echo
	echo "ResNet-50 training step (bf16 autocast, channels_last, batch 32), median ms of $steps steps,"
	echo "rounds local/remote: ${bench[*]}; **remote/local $ratio**"
	echo
	echo "Per step (remote, difference of a $((2 * steps))- and a $steps-step run): $per_step"
	echo
	echo "remote log (warnings and errors, deduplicated):"
	echo '```'
	grep -E 'warn|error' "$work/remote.err" | sed 's/^\[[^]]*\] //' | sort | uniq -c | sort -rn | head -40
	echo '```'
	if ! cmp -s "$work/local.cmp" "$work/remote.cmp"; then
		echo
		echo "remote stderr (last lines):"
		echo '```'
		tail -n 30 "$work/remote.err" | cut -c1-300
		echo '```'
	fi
} >"$rep"
cp "$work/remote.err" "$out/torch-libs-remote.log" 2>/dev/null
same=$(cmp -s "$work/local.cmp" "$work/remote.cmp" && echo equal || echo DIFFERENT)
echo "libraries $same (local exit $lrc, remote exit $rrc, $ns not supported); ResNet-50 remote/local $ratio; $per_step"
