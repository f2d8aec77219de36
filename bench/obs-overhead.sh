#!/usr/bin/env bash
# obs-overhead.sh: what client statistics (REMOTE_GPU_STATS=1) cost the async
# launch rate, the path where libremote.so's own time matters most (a launch is a
# memcpy into the send queue, a few hundred nanoseconds). Target: at most 2 %.
#
#   bench/obs-overhead.sh [--build DIR] [--driver PATH] [--device N] [--rounds N]
#                         [--launches N] [--out FILE]
#
# Two measurements:
#  1. the hooks alone (build/tests/obs/obs-hooks-bench: stats.c's enter, send and
#     leave hooks in a loop, 5 runs each way, fastest kept): nanoseconds a call
#     costs with statistics on and off; their difference over the time of one
#     launch (from 2.) is the cost the statistics add to each launch;
#  2. the launch rate end to end: remote-gpud (on the GPU, or on --driver, e.g.
#     build/tests/fakecuda/libcuda.so.1) and remote-bench's launch section, run
#     --rounds times (default 10) with statistics off and on, interleaved (off
#     on, on off, ...) so that drift falls on both alike; each run makes 5
#     repetitions of --launches launches (default 200000). Reported: the median
#     of each variant for the whole rate and the issue rate (the client's side),
#     and the median of the per-round ratios. Where client and server share few
#     cores with other work, run-to-run noise can exceed the effect (see the
#     per-round ratios); the hook measurement does not depend on that.
# With --out the report (markdown) is also written to FILE.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
build=$root/build
driver=
device=0
rounds=10
launches=200000
out=
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --driver) driver=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --launches) launches=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "obs-overhead: unknown argument $1" >&2; exit 2 ;;
  esac
done
gpud=$build/backend/remote-gpud
bench=$build/bench/remote-bench
lib=$build/frontend/libremote.so
for f in "$gpud" "$bench" "$lib"; do
  [ -e "$f" ] || { echo "obs-overhead: $f is not built" >&2; exit 1; }
done

hooks=$build/tests/obs/obs-hooks-bench
hoff= hon=
if [ -x "$hooks" ]; then
  fastest() { sort -n | head -n1; }
  hoff=$(for _ in 1 2 3 4 5; do env -u REMOTE_GPU_STATS -u REMOTE_GPU_TRACE "$hooks" | awk '{ print $3 }'; done | fastest)
  hon=$(for _ in 1 2 3 4 5; do REMOTE_GPU_STATS=/dev/null "$hooks" | awk '{ print $3 }'; done | fastest)
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/rg-obs-bench.XXXXXX")
srv=
cleanup() {
  [ -n "$srv" ] && kill -TERM "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
"$gpud" --listen 127.0.0.1:0 --port-file "$work/port" --device "$device" ${driver:+--driver "$driver"} \
  >"$work/server.log" 2>&1 &
srv=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")

# run VARIANT: one remote-bench run; appends "rate issue_rate" per repetition.
run() {
  local v=$1 env=()
  [ "$v" = on ] && env=(REMOTE_GPU_STATS=1)
  env "${env[@]}" REMOTE_GPU=127.0.0.1:$port LD_PRELOAD=$lib "$bench" --only cuda --iters 20 --min-time 0.01 \
    --min-size 4K --max-size 4K --launches "$launches" --launch-reps 5 >"$work/$v.out" 2>"$work/$v.err"
  sed -n 's/.*rep [0-9]*: \([0-9]*\) launches in \([0-9.]*\) ms (issue \([0-9.]*\) ms.*/\1 \2 \3/p' "$work/$v.out" |
    awk '{ printf "%.0f %.0f\n", $1 / ($2 / 1e3), $1 / ($3 / 1e3) }' >>"$work/$v.rates"
  [ "$v" = off ] || grep -q "remote-gpu statistics at exit" "$work/$v.err" ||
    { echo "obs-overhead: REMOTE_GPU_STATS=1 printed no table" >&2; exit 1; }
}
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then run off; run on; else run on; run off; fi
done
# Paired per round: the median (over its repetitions) of each variant's run of
# that round, on / off; the median of these ratios is robust to slow drift.
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
pairs=$(for r in $(seq 0 $((rounds - 1))); do
  a=$(sed -n "$((r * 5 + 1)),$((r * 5 + 5))p" "$work/off.rates" | cut -d' ' -f1 | median)
  b=$(sed -n "$((r * 5 + 1)),$((r * 5 + 5))p" "$work/on.rates" | cut -d' ' -f1 | median)
  awk -v a="$a" -v b="$b" 'BEGIN { print b / a }' | tee -a "$work/pairs"
done | median)

off=$(cut -d' ' -f1 "$work/off.rates" | median)
on=$(cut -d' ' -f1 "$work/on.rates" | median)
ioff=$(cut -d' ' -f2 "$work/off.rates" | median)
ion=$(cut -d' ' -f2 "$work/on.rates" | median)
n=$(wc -l <"$work/on.rates")
host=$(grep -m1 'remote-bench: run' "$work/off.out" | sed 's/.* on //')
dev=$(grep -m1 '^== CUDA: device' "$work/off.out" | sed 's/^== CUDA: //; s/ ==$//')
report=$(awk -v off="$off" -v on="$on" -v ioff="$ioff" -v ion="$ion" -v n="$n" -v host="$host" -v dev="$dev" \
  -v pairs="$pairs" -v rounds="$rounds" -v hoff="$hoff" -v hon="$hon" -v pairlist="$(sort -n "$work/pairs" | tr '\n' ' ')" \
  -v commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo "${RG_COMMIT:-?}")" 'BEGIN {
  printf "# REMOTE_GPU_STATS=1: cost on the async launch rate\n\n"
  printf "machine: %s; %s; commit %s\n", host, dev, commit
  printf "%d repetitions of each variant (remote-bench launch rate, interleaved runs), medians:\n\n", n
  printf "| | statistics off | statistics on | on / off | cost |\n|---|---:|---:|---:|---:|\n"
  printf "| launch rate (launches/s) | %.0f | %.0f | %.4f | %.2f %% |\n", off, on, on / off, (1 - on / off) * 100
  printf "| issue rate (launches/s, client side) | %.0f | %.0f | %.4f | %.2f %% |\n", ioff, ion, ion / ioff, (1 - ion / ioff) * 100
  printf "\nlaunch rate, median of the %d per-round ratios (on / off, adjacent runs): %.4f (cost %.2f %%); the ratios: %s\n", rounds, pairs, (1 - pairs) * 100, pairlist
  if (hon != "") {
    launch = 1e9 / off; issue = 1e9 / ioff
    printf "\nhooks alone (obs-hooks-bench, fastest of 5): %.2f ns per call off, %.2f ns on: %.2f ns added per call,\n", hoff, hon, hon - hoff
    printf "that is %.2f %% of a launch end to end (%.0f ns at the rate above, statistics off) and %.2f %% of the client'"'"'s issue time (%.0f ns)\n", (hon - hoff) / launch * 100, launch, (hon - hoff) / issue * 100, issue
  }
}')
echo "$report"
[ -z "$out" ] || echo "$report" >"$out"
[ -z "${RG_OBS_PAIRS:-}" ] || cp "$work/pairs" "$RG_OBS_PAIRS"
