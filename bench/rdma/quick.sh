#!/usr/bin/env bash
# bench/rdma/quick.sh: the round trips only, in one guest boot (about 20 s), for
# trying a change to the rdma path before the benchmark of record (run.sh):
#
#   bench/rdma/quick.sh [--build DIR] [--rounds N]
#
# prints ib_send_lat's line (its "typical" column is half a round trip), the
# transport alone (rdma-pingpong, busy polling) and cudaStreamQuery through
# libremote.so and remote-gpud on the driver test double (default settings and
# busy polling). Needs what run.sh needs.
#
# --rounds N repeats the four measurements N times, interleaved, and ends with
# each round's ratios to that round's ib_send_lat and their medians: under
# emulation the guest's speed drifts over seconds, so a ratio is best taken
# between measurements made close together.
#
# --against DIR measures a second build too, right after the first in every
# round (its lines and ratios marked "[B]"): an A/B of a change in one boot,
# the only comparison that the guest's drift between boots leaves readable.
set -u -o pipefail
. "$(dirname "${BASH_SOURCE[0]}")/guest.sh"
rounds=1
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --against) export RG_BUILD_B=$(cd "$2" && pwd); shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
per_round=180; [ -n "${RG_BUILD_B:-}" ] && per_round=360
RG_ROUNDS=$rounds rdma_in_guest quick $((120 + per_round * rounds)) "${args[@]}"
rounds=${RG_ROUNDS:-$rounds}

B=$RG_BUILD out=$RG_OUT ip=$RDMA_VM_IP dev=$RDMA_VM_DEV gid=$RDMA_VM_GID_INDEX
SPIN=(REMOTE_GPU_RDMA_SPIN_US=2000000 REMOTE_GPU_RDMA_SERVER_SPIN_US=2000000)

for round in $(seq 1 "$rounds"); do
[ "$rounds" -gt 1 ] && echo "== round $round of $rounds"

perftest lat ib_send_lat -s 64 -n 3000
echo "ib_send_lat: $(grep -A1 t_min "$out/lat.txt" | tail -1)"

# measure BUILD MARK: the transport alone and a CUDA call of one build
measure() {
local B=$1 mark=$2 pp=$1/tests/rdma/rdma-pingpong
pp_start "$pp" "rdma://$ip" "$out/pp.server" "${SPIN[@]}"
echo "rdma-pingpong$mark (busy polling): $(env "${SPIN[@]}" timeout 60 "$pp" client "rdma://$ip:$pp_port" 2000 1 2>&1 | grep rtt)"
pp_stop

for mode in default busy; do
  E=(RG_MODE=$mode); [ $mode = busy ] && E=("${SPIN[@]}")
  gpud_start "$B" rdma "$out/gpud.log" "${E[@]}"
  env "${E[@]}" REMOTE_GPU="rdma://$ip:$gpud_port" LD_PRELOAD="$B/frontend/libremote.so" timeout 120 \
    "$B/bench/remote-bench" --only cuda --iters 2000 --min-time 0.5 --min-size 1M --max-size 1M --launches 500 \
    --launch-reps 1 >"$out/rb.txt" 2>&1
  echo "remote-bench$mark ($mode): $(grep -m1 cudaStreamQuery "$out/rb.txt")"
  gpud_stop
done
}
measure "$B" ""
[ -n "${RG_BUILD_B:-}" ] && measure "$RG_BUILD_B" "[B]"
done | tee "$out/rounds.txt"

[ "$rounds" -gt 1 ] || exit 0
# per round: ib_send_lat's round trip is twice its typical figure (column 5)
awk '
  function med(a, k,   i, j, t) { for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
  function line(m) { printf "round %d%s: ib_send_lat RT %.2f us; transport %.2fx, CUDA call busy %.2fx, default %.2fx\n", n[m], m, lat, r1[m, n[m]], r2[m, n[m]], r3[m, n[m]] }
  /^ib_send_lat:/ { lat = 2 * $6 }
  /^rdma-pingpong/ { m = index($1, "[B]") ? "[B]" : ""; pp[m] = $6 }
  /^remote-bench.* \(default\)/ { m = index($1, "[B]") ? "[B]" : ""; d[m] = $4 }
  /^remote-bench.* \(busy\)/ { m = index($1, "[B]") ? "[B]" : ""; k = ++n[m]; marks[m] = 1
    r1[m, k] = pp[m] / lat; r2[m, k] = $4 / lat; r3[m, k] = d[m] / lat; line(m) }
  END { for (m in marks) { for (i = 1; i <= n[m]; i++) { a1[i] = r1[m, i]; a2[i] = r2[m, i]; a3[i] = r3[m, i] }
    printf "median of %d rounds%s: transport %.2fx, CUDA call busy polling %.2fx, default %.2fx (target <= 1.3x)\n", n[m], m, med(a1, n[m]), med(a2, n[m]), med(a3, n[m]) } }
' "$out/rounds.txt"
