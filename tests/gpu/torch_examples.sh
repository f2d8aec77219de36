#!/usr/bin/env bash
# Issue 4 on the GPU machine: each example of examples/transformer runs locally and
# through libremote.so (GPU-less namespace, remote-gpud on the same GPU); the
# per-step losses must be equal bit for bit (repr of the float), the remote log
# must hold no "not supported", and the step times are compared.
#
#   tests/gpu/torch_examples.sh BUILD_DIR GPULESS_WRAPPER PORT [STEPS] [NAMES...]
#
# Writes torch-examples.md to $OUT (or tests/gpu/reports/).
set -u
B=$1 wrap=$2 port=$3 steps=${4:-50}
shift 4 2>/dev/null || shift $#
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(encoder decoder seq2seq gpt2)
root=$(cd "$(dirname "$0")/../.." && pwd)
ex=$root/examples/transformer
out=${OUT:-$root/tests/gpu/reports}
mkdir -p "$out"
work=$(mktemp -d /tmp/rg-torch.XXXXXX)
rep=$out/torch-examples.md
{
	echo "# PyTorch examples: local vs remote"
	echo
	echo "- machine: $(nvidia-smi -L 2>/dev/null | head -n1); torch $(python3 -c 'import torch; print(torch.__version__)')"
	echo "- commit: ${RG_COMMIT:-unknown}; $steps steps each; remote = libremote.so in the GPU-less namespace, remote-gpud over loopback TCP"
	echo
	echo "| example | local exit | remote exit | losses equal | first difference | not supported | local ms/step | remote ms/step | ratio |"
	echo "|---|---|---|---|---|---|---|---|---|"
} >"$rep"
for n in "${names[@]}"; do
	(cd "$ex" && timeout 300 python3 "$n.py" --steps "$steps" --time >"$work/$n.local" 2>&1)
	lrc=$?
	(cd "$ex" && timeout 400 $wrap env REMOTE_GPU=127.0.0.1:$port LD_PRELOAD="$B/frontend/libremote.so" \
		REMOTE_GPU_LOG=info PYTHONUNBUFFERED=1 python3 "$n.py" --steps "$steps" --time >"$work/$n.remote" 2>"$work/$n.err")
	rrc=$?
	grep ' loss ' "$work/$n.local" >"$work/$n.l"
	grep ' loss ' "$work/$n.remote" >"$work/$n.r"
	if [ -s "$work/$n.l" ] && cmp -s "$work/$n.l" "$work/$n.r"; then eq=yes diff=-; else
		eq=no
		diff=$(diff "$work/$n.l" "$work/$n.r" | grep '^[<>]' | head -n2 | paste -sd' ' | cut -c1-160)
	fi
	ns=$(grep -c 'not supported\|not forwarded' "$work/$n.err")
	lt=$(sed -n 's/.*mean step time \([0-9.]*\) ms/\1/p' "$work/$n.local")
	rt=$(sed -n 's/.*mean step time \([0-9.]*\) ms/\1/p' "$work/$n.remote")
	ratio=$( [ -n "$lt" ] && [ -n "$rt" ] && awk -v a="$rt" -v b="$lt" 'BEGIN{printf "%.3f", a/b}' || echo -)
	echo "| $n | $lrc | $rrc | $eq | $diff | $ns | ${lt:--} | ${rt:--} | $ratio |" >>"$rep"
	{
		echo -e "\n### $n: remote log (warnings, errors; deduplicated)\n\`\`\`"
		grep -E 'warn|error|Error|Traceback' "$work/$n.err" "$work/$n.remote" | sed 's/^[^:]*://; s/^\[[^]]*\] //' | sort | uniq -c | sort -rn | head -25
		tail -n 5 "$work/$n.remote"
		echo '```'
	} >>"$work/details"
done
cat "$work/details" >>"$rep" 2>/dev/null
cat "$rep"
rm -rf "$work"
