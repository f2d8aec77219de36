#!/usr/bin/env bash
# bench/rdma/instr.sh: user-space instructions per round trip, ours beside
# perftest's, counted by callgrind in the Soft-RoCE guest (about 4 minutes):
#
#   bench/rdma/instr.sh [--build DIR]
#
# Under qemu's software emulation every user-space instruction costs several
# host instructions while the kernel's rxe path is the same for everybody, so
# the instructions a round trip spends outside the kernel decide most of the
# ratio to ib_send_lat, and unlike times they do not vary from run to run.
# Each program runs twice, with 200 and 1200 round trips, in event mode (no
# busy polling: only work is counted); the difference divided by 1000 is one
# round trip's cost on each side:
#   ib_send_lat -e       perftest, client and server
#   rdma-pingpong        the transport alone (64-byte frames echoed)
#   query-loop           cudaStreamQuery through libremote.so and remote-gpud
#                        (thread isolation, driver test double)
# Needs valgrind in the guest's view of the host (it shares the host's files).
set -u -o pipefail
command -v valgrind >/dev/null || { echo "instr.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
. "$(dirname "${BASH_SOURCE[0]}")/guest.sh"
rdma_in_guest instr 900 "$@"

B=$RG_BUILD out=$RG_OUT ip=$RDMA_VM_IP dev=$RDMA_VM_DEV gid=$RDMA_VM_GID_INDEX
EV=(REMOTE_GPU_RDMA_SPIN_US=0 REMOTE_GPU_RDMA_SERVER_SPIN_US=0 REMOTE_GPU_RDMA_TIMEOUT_MS=600000)
# cg NAME PROGRAM ARGS: one callgrind file per process, $out/NAME.PID
cg() { local f=$1; shift; valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$out/$f.%p" "$@"; }
# stop PID: SIGTERM, then what is left of it (callgrind writes its file on exit)
stop() { kill -TERM "$1" 2>/dev/null; local n=100; while [ $n -gt 0 ] && kill -0 "$1" 2>/dev/null; do sleep 0.1; n=$((n - 1)); done; kill -9 "$1" 2>/dev/null; wait "$1" 2>/dev/null; }

for n in 200 1200; do
  cg lat-server.$n timeout 300 ib_send_lat -e -s 64 -n $n -d "$dev" -x "$gid" -F >/dev/null 2>&1 &
  s=$!
  perftest_listening
  cg lat-client.$n timeout 300 ib_send_lat -e -s 64 -n $n -d "$dev" -x "$gid" -F "$ip" >/dev/null 2>&1
  wait $s

  rm -f "$out/pp.port"
  env "${EV[@]}" valgrind --tool=callgrind --callgrind-out-file="$out/pp-server.$n.%p" \
    "$B/tests/rdma/rdma-pingpong" server "rdma://$ip:0" >"$out/pp.port" 2>/dev/null &
  s=$!
  wait_file "$out/pp.port"
  (export "${EV[@]}"; cg pp-client.$n "$B/tests/rdma/rdma-pingpong" client "rdma://$ip:$(head -1 "$out/pp.port")" $n 1 >/dev/null 2>&1)
  stop $s

  rm -f "$out/gpud.port"
  env "${EV[@]}" valgrind --tool=callgrind --callgrind-out-file="$out/gpud.$n.%p" \
    "$B/backend/remote-gpud" --isolation thread --insecure --listen "rdma://$ip:0" --port-file "$out/gpud.port" \
    --driver "$B/tests/fakecuda/libcuda.so.1" >/dev/null 2>&1 &
  s=$!
  wait_file "$out/gpud.port"
  (export "${EV[@]}" REMOTE_GPU="rdma://$ip:$(cat "$out/gpud.port")"
   cg query-client.$n env LD_PRELOAD="$B/frontend/libremote.so" "$B/bench/query-loop" $n >/dev/null 2>&1)
  stop $s
done

# total Ir of the largest file of a run (the program itself, not `env` or `timeout`)
ir() { local best=0 f v; for f in "$out/$1".*; do
  v=$(grep -m1 '^summary:\|^totals:' "$f" | awk '{print $2}'); [ "${v:-0}" -gt "$best" ] && best=$v; done; echo $best; }
per_rt() { echo $(( ($(ir "$1.1200") - $(ir "$1.200")) / 1000 )); }
printf '%-34s %10s %10s\n' "user-space instructions per RT" client server
printf '%-34s %10s %10s\n' "ib_send_lat -e" "$(per_rt lat-client)" "$(per_rt lat-server)"
printf '%-34s %10s %10s\n' "rdma-pingpong (transport)" "$(per_rt pp-client)" "$(per_rt pp-server)"
printf '%-34s %10s %10s\n' "cudaStreamQuery (query-loop)" "$(per_rt query-client)" "$(per_rt gpud)"
