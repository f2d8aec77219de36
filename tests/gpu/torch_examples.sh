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
	echo "| example | local exit | remote exit | losses equal | first difference | not supported | server memory after | local ms/step | remote ms/step | ratio |"
	echo "|---|---|---|---|---|---|---|---|---|---|"
} >"$rep"
# The server's free memory, read through the remote by tests/e2e/probe (RG_PROBE).
probe_free() {
	[ -n "${RG_PROBE:-}" ] || return
	$wrap env REMOTE_GPU=127.0.0.1:$port LD_PRELOAD="$B/frontend/libremote.so" "$RG_PROBE" 2>/dev/null |
		sed -n 's/^free=\([0-9]*\) .*/\1/p'
}
mem_back() { # -> "back to baseline" or what it is
	[ -n "${RG_PROBE:-}" ] || { echo "not checked"; return; }
	local f i
	for i in $(seq 50); do
		f=$(probe_free)
		[ "$f" = "$base" ] && { echo "back to baseline"; return; }
		sleep 0.2
	done
	echo "NOT back: $f vs $base"
}
base=$(probe_free)
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
	mem=$(mem_back)
	if [ "$eq" = no ] && [ -s "$work/$n.r" ]; then
		# Is the local run itself repeatable? Run it again, and once more each way
		# with torch's deterministic algorithms: that pair must be equal bit for bit.
		(cd "$ex" && timeout 300 python3 "$n.py" --steps "$steps" >"$work/$n.local2" 2>&1)
		(cd "$ex" && timeout 300 python3 "$n.py" --steps "$steps" --deterministic >"$work/$n.ldet" 2>&1)
		(cd "$ex" && timeout 400 $wrap env REMOTE_GPU=127.0.0.1:$port LD_PRELOAD="$B/frontend/libremote.so" \
			python3 "$n.py" --steps "$steps" --deterministic >"$work/$n.rdet" 2>>"$work/$n.err")
		cmpl() { python3 - "$1" "$2" <<'PY'
import sys
def losses(f):
    return [float(l.split()[-1]) for l in open(f) if " loss " in l]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
if not a or len(a) != len(b):
    print("n/a"); sys.exit()
d = [abs(x - y) / max(abs(x), 1e-30) for x, y in zip(a, b)]
first = next((i for i, x in enumerate(d) if x), None)
print("equal" if first is None else f"max rel {max(d):.2e}, first at step {first}")
PY
		}
		diff="$diff; local vs remote: $(cmpl "$work/$n.local" "$work/$n.remote"); local vs local again: $(cmpl "$work/$n.local" "$work/$n.local2"); deterministic local vs remote: $(cmpl "$work/$n.ldet" "$work/$n.rdet")"
	fi
	lt=$(sed -n 's/.*mean step time \([0-9.]*\) ms/\1/p' "$work/$n.local")
	rt=$(sed -n 's/.*mean step time \([0-9.]*\) ms/\1/p' "$work/$n.remote")
	ratio=$( [ -n "$lt" ] && [ -n "$rt" ] && awk -v a="$rt" -v b="$lt" 'BEGIN{printf "%.3f", a/b}' || echo -)
	echo "| $n | $lrc | $rrc | $eq | $diff | $ns | $mem | ${lt:--} | ${rt:--} | $ratio |" >>"$rep"
	{
		echo -e "\n### $n: remote log (warnings, errors; deduplicated)\n\`\`\`"
		grep -E 'warn|error|Error|Traceback' "$work/$n.err" "$work/$n.remote" | sed 's/^[^:]*://; s/^\[[^]]*\] //' | sort | uniq -c | sort -rn | head -25
		tail -n 5 "$work/$n.remote"
		echo '```'
	} >>"$work/details"
done
# What crosses the wire per step: the statistics table (REMOTE_GPU_STATS) of a
# remote gpt2 run of 10 and of 20 steps; the difference over 10 is one step.
if [[ " ${names[*]} " == *" gpt2 "* ]]; then
	for k in 10 20; do
		(cd "$ex" && timeout 300 $wrap env REMOTE_GPU=127.0.0.1:$port LD_PRELOAD="$B/frontend/libremote.so" \
			REMOTE_GPU_STATS="$work/stats$k.txt" python3 gpt2.py --steps $k >/dev/null 2>&1)
	done
	# the total line: total CALLS ROUND-TRIPS MS SENT UNIT RECEIVED UNIT
	tot() { awk '$1 == "total" {print $2, $3, $5 $6, $7 $8}' "$1" 2>/dev/null; }
	read -r c10 r10 s10 v10 <<<"$(tot "$work/stats10.txt")"
	read -r c20 r20 s20 v20 <<<"$(tot "$work/stats20.txt")"
	{
		echo -e "\n## gpt2: what one training step sends (REMOTE_GPU_STATS, 20-step run minus 10-step run, over 10)\n"
		if [ -n "${c20:-}" ] && [ -n "${c10:-}" ]; then
			echo "- calls forwarded per step: $(( (c20 - c10) / 10 )); synchronous round trips per step: $(( (r20 - r10) / 10 ))"
			echo "- totals of the 20-step run: sent $s20, received $v20 (the table below)"
		fi
		echo -e "\n\`\`\`"; cat "$work/stats20.txt" 2>/dev/null | head -60; echo '```'
	} >>"$rep"
fi
cat "$work/details" >>"$rep" 2>/dev/null
cat "$rep"
rm -rf "$work"
