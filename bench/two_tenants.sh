#!/usr/bin/env bash
# bench/two_tenants.sh: two tenants on one GPU (issue 22 item 3), on the GPU machine.
#
#   RG_GPUD=build/backend/remote-gpud RG_LIBREMOTE=build/frontend/libremote.so bench/two_tenants.sh
#   (or from tests/gpu/run.sh with RG_TWO_TENANTS=1, which passes its own build)
#
# One remote-gpud with a tenants file of two tokens, "infer" (class=latency) and
# "train" (class=batch), and PyTorch clients through libremote.so in the GPU-less
# mount namespace (tests/gpu/gpuless.sh), each with its own tenant's token:
#   (a) GPT-2-small greedy generation alone: per-token latency p50/p99;
#   (b) GPT-2-small training alone: steps/s;
#   (c) both together, --priority admit (the default);
#   (d) the same under CUDA MPS (the server's own daemon; docs/TENANTS.md): the
#       batch tenant at MPS's lower client priority (--priority mps), with the
#       admission too (mps+admit), and with half the SMs for the batch tenant
#       (--priority mps --batch-sm-percent 50);
#   (e) both together on a server started with --priority off, for comparison.
#   (f) memory handed between tenants (item 4): a batch PyTorch process holds
#       RG_TT_HANDOVER_GIB (10) GiB in its caching allocator with the release hook
#       installed, on a GPU it filled but for that and 1 GiB; a latency process then
#       allocates as much: the time of that allocation (with the handover) and of
#       the same on free memory (bench/handover.py).
# bench/two_tenants.py runs the clients and writes the report: the ratios against
# the targets (generation p50/p99 together <= 1.25x alone; training together >= 60%
# of alone). Writes two-tenants.md and handover.md (and the raw JSON and logs) into
# $OUT (default bench/results/two-tenants). Last lines: a summary of each. About
# 150 s of GPU time for (a)-(e), 60 s for (f). For each run under MPS, the MPS
# server's log lines naming client priorities go to mps-NAME.txt (and the report),
# its logs to mps-NAME/: proof that the sessions were MPS clients.
#
# Environment: RG_GPUD, RG_LIBREMOTE (the binaries; remote-smi is looked for
# beside remote-gpud), RG_GPULESS (a wrapper that runs a command GPU-less; by
# default made here with tests/gpu/gpuless.sh), RG_TT_TOKENS (generation tokens
# measured, 640), RG_TT_TRAIN_S (training alone, seconds, 10), RG_TT_ARGS (more
# remote-gpud options for every server), RG_TT_RUNS (the together runs, each
# NAME:OPTIONS on a server of its own, ';' between them; the alone runs are on the
# first run's server; default "admit:;mps:--priority mps;mpsadmit:--priority
# mps+admit;mps50:--priority mps --batch-sm-percent 50;off:--priority off"; the
# earlier longer hold was "h12r4:--batch-hold-ms 12 --batch-run-ms 4
# --batch-ahead 8"); RG_TT_PARTS (the parts run, "prio handover": (a)-(e)
# and (f); "handover" for (f) alone); RG_TT_HANDOVER_GIB (10).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
gpud=${RG_GPUD:?RG_GPUD: the remote-gpud to run}
lib=${RG_LIBREMOTE:?RG_LIBREMOTE: the libremote.so clients preload}
smi=$(dirname "$gpud")/remote-smi
[ -x "$smi" ] || smi=$(dirname "$gpud")/smi/remote-smi
out=${OUT:-$root/bench/results/two-tenants}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/rg-2t.XXXXXX)
rm -f "$out/runs.txt"
default_runs="admit:;mps:--priority mps;mpsadmit:--priority mps+admit;mps50:--priority mps --batch-sm-percent 50;off:--priority off"
tokens=${RG_TT_TOKENS:-640}
train_s=${RG_TT_TRAIN_S:-10}
py=$here/two_tenants.py
t0=$(date +%s)

if [ -n "${RG_GPULESS:-}" ]; then
	wrap=$RG_GPULESS
else
	# shellcheck source=../tests/gpu/gpuless.sh
	source "$root/tests/gpu/gpuless.sh"
	rg_gpuless_setup "$work" >/dev/null
	wrap="unshare -m --propagation private bash $work/gpuless.sh"
fi

tok_i=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
tok_t=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf 'infer token=%s memory=none class=latency sessions=4\ntrain token=%s memory=none class=batch sessions=4\n' \
	"$tok_i" "$tok_t" >"$work/tenants"
chmod 600 "$work/tenants"

srv_pid=
port=
start() { # remote-gpud options...
	rm -f "$work/port"
	env -u REMOTE_GPU_TOKEN "$gpud" --listen 127.0.0.1:0 --port-file "$work/port" --run-dir "$work/run" --tenants "$work/tenants" \
		${RG_TT_ARGS:-} "$@" >>"$work/server.log" 2>&1 &
	srv_pid=$!
	for _ in $(seq 200); do
		[ -s "$work/port" ] && port=$(cat "$work/port") && return 0
		kill -0 $srv_pid 2>/dev/null || break
		sleep 0.1
	done
	echo "two-tenants: remote-gpud did not start: $(tail -n 3 "$work/server.log" | paste -sd';')"
	return 1
}
stop() {
	[ -n "$srv_pid" ] || return 0
	kill -TERM $srv_pid 2>/dev/null
	for _ in $(seq 100); do kill -0 $srv_pid 2>/dev/null || break; sleep 0.1; done
	kill -KILL $srv_pid 2>/dev/null
	wait $srv_pid 2>/dev/null
	srv_pid=
}
trap 'stop' EXIT
client() { # TOKEN LOG ARGS...
	local tok=$1 logf=$2
	shift 2
	timeout 240 $wrap env REMOTE_GPU=127.0.0.1:$port REMOTE_GPU_TOKEN="$tok" LD_PRELOAD="$lib" \
		LD_LIBRARY_PATH="$(dirname "$lib")/driver" PYTHONUNBUFFERED=1 python3 "${client_py:-$py}" "$@" >"$logf" 2>&1
}
together() { # MODE
	local m=$1
	rm -f "$work/ready-$m" "$work/done-$m"
	client "$tok_t" "$out/train-$m.log" train --out "$out/train-$m.json" --ready-file "$work/ready-$m" \
		--stop-file "$work/done-$m" &
	local tp=$!
	client "$tok_i" "$out/gen-$m.log" gen --out "$out/gen-$m.json" --tokens "$tokens" \
		--start-file "$work/ready-$m" --done-file "$work/done-$m" || echo "two-tenants: gen ($m) failed: $(tail -n 2 "$out/gen-$m.log" | paste -sd';')"
	touch "$work/done-$m"
	wait $tp || echo "two-tenants: train ($m) failed: $(tail -n 2 "$out/train-$m.log" | paste -sd';')"
	"$smi" --json --run-dir "$work/run" >"$out/smi-$m.json" 2>/dev/null
}

{
	echo "- GPU: $(nvidia-smi -L 2>/dev/null | paste -sd';')"
	echo "- commit: ${RG_COMMIT:-$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)}"
	echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "- remote-gpud options: --tenants (infer: latency, train: batch) ${RG_TT_ARGS:-}; together runs: ${RG_TT_RUNS:-$default_runs}"
	echo "- generation: $tokens tokens measured, batch 1, 32-token prompt, 64 tokens a round, no KV cache"
	echo "- training: batch 8 x 256 tokens, Adam; alone for ${train_s} s; together, the steps that end while generation is measured"
} >"$out/meta.txt"

parts=" ${RG_TT_PARTS:-prio handover} "
# The together runs: name:options, separated by ';' (each on a server of its own).
IFS=";" read -r -a runs <<<"${RG_TT_RUNS:-$default_runs}"
[[ $parts == *" prio "* ]] || runs=()
first=1
for r in "${runs[@]}"; do
	name=${r%%:*} opts=${r#*:}
	[ "$name" = "$r" ] && opts=
	# shellcheck disable=SC2086 # options are words
	start $opts || continue
	echo "$name $opts" >>"$out/runs.txt"
	if [ $first = 1 ]; then
		client "$tok_i" "$out/gen-alone.log" gen --out "$out/gen-alone.json" --tokens "$tokens" ||
			echo "two-tenants: gen alone failed: $(tail -n 2 "$out/gen-alone.log" | paste -sd';')"
		client "$tok_t" "$out/train-alone.log" train --out "$out/train-alone.json" --seconds "$train_s" ||
			echo "two-tenants: train alone failed: $(tail -n 2 "$out/train-alone.log" | paste -sd';')"
		first=0
	fi
	together "$name"
	stop
	if [[ " $opts " == *" mps"* ]]; then # the daemon's logs (mps.c: RUN_DIR/mps/log), fresh for the next run
		grep -rhi "priority" "$work/run/mps/log" 2>/dev/null | tail -n 8 >"$out/mps-$name.txt"
		rm -rf "$out/mps-$name" && cp -r "$work/run/mps/log" "$out/mps-$name" 2>/dev/null
		rm -rf "$work/run/mps"
	fi
done

# (f) the handover: grab (latency) starts first, so its context is made before
# hold (batch) measures what is free; its allocation starts once hold is ready.
if [[ $parts == *" handover "* ]] && start --handover-wait-ms 30000; then
	gib=${RG_TT_HANDOVER_GIB:-10}
	rm -f "$work/ready-h" "$work/done-h"
	client_py=$here/handover.py
	client "$tok_i" "$out/grab.log" grab --out "$out/grab.json" --gib "$gib" --start-file "$work/ready-h" \
		--done-file "$work/done-h" &
	gp=$!
	client "$tok_t" "$out/hold.log" hold --out "$out/hold.json" --gib "$gib" --ready-file "$work/ready-h" \
		--stop-file "$work/done-h" &
	hp=$!
	wait $gp || echo "two-tenants: grab failed: $(tail -n 2 "$out/grab.log" | paste -sd';')"
	touch "$work/done-h"
	wait $hp || echo "two-tenants: hold failed: $(tail -n 2 "$out/hold.log" | paste -sd';')"
	client_py=
	"$smi" --json --run-dir "$work/run" >"$out/smi-handover.json" 2>/dev/null
	stop
fi
cp "$work/server.log" "$out/server.log"
echo "- wall time: $(( $(date +%s) - t0 )) s" >>"$out/meta.txt"
[[ $parts == *" prio "* ]] && python3 "$py" report --dir "$out" --out "$out/two-tenants.md" | tail -n 1
[[ $parts == *" handover "* ]] && python3 "$here/handover.py" report --dir "$out" --out "$out/handover.md" | tail -n 1
