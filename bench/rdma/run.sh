#!/usr/bin/env bash
# bench/rdma/run.sh: the rdma benchmark of record, on Soft-RoCE in the test
# guest. From the repository root, after building (build/ by default):
#
#   bench/rdma/run.sh [--build DIR] [--out DIR] [--quick] [--repeat N]
#
# boots one guest (tools/rdma-vm) and runs in it, on the same rxe device:
#   1. perftest: ib_send_lat (64 B) and ib_write_bw (1 MiB and 4 MiB), the
#      verbs limits of this device in this run (plus ib_read_bw, since the
#      transport moves bulk data with RDMA READ);
#   2. rdma-pingpong: the transport alone (round trip, streams of 4 MiB frames
#      both ways from pageable and registered memory), default settings and
#      busy polling;
#   3. remote-bench --only cuda through libremote.so against remote-gpud
#      --listen rdma:// on the driver test double: the CUDA calls' round trip
#      and copy bandwidth (to 4 MiB) measure the transport (plus frontend and
#      backend); once with default settings, once with busy polling;
#   4. the same over tcp:// on the guest's loopback, for scale;
#   5. the 16 MiB copies of the target, default settings then busy polling,
#      each between two ib_write_bw -s 16M runs (its baseline: their mean).
#   6. the round trips of the target (the transport alone busy polling, a CUDA
#      call busy polling and with default settings) between two ib_send_lat
#      runs (their baseline: the mean round trip of the two).
# then writes bench/results/<date>-softroce-rdma.md (bench/rdma/report.py)
# with the ratios. --repeat N measures all of it N times in the one boot (into
# OUT/r1..rN) and judges the targets on the medians of the runs' ratios: under
# emulation one run's perftest baseline alone moves by 10%. The raw outputs stay in --out (default build/bench-rdma).
#
# Inside the guest (RDMA_VM=1) it runs the measurements only:
#   bench/rdma/run.sh --guest --build DIR --out DIR
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/guest.sh"
root=$(cd "$here/../.." && pwd)
build=$root/build
out=
guest=0
quick=0
repeat=1
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --out) out=$2; shift 2 ;;
    --guest) guest=1; shift ;;
    --quick) quick=1; shift ;;
    --repeat) repeat=$2; shift 2 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
out=${out:-$build/bench-rdma}

if [ $guest = 0 ]; then
  for f in "$build/backend/remote-gpud" "$build/frontend/libremote.so" "$build/tests/fakecuda/libcuda.so.1" \
           "$build/bench/remote-bench"; do
    [ -e "$f" ] || { echo "run.sh: $f not built" >&2; exit 1; }
  done
  pp=$build/tests/rdma/rdma-pingpong
  [ -x "$pp" ] || pp=$build/rdma-pingpong
  [ -x "$pp" ] || { echo "run.sh: rdma-pingpong not built" >&2; exit 1; }
  rm -rf "$out" && mkdir -p "$out" || exit 1
  q=(--repeat "$repeat"); [ $quick = 1 ] && q+=(--quick)
  RDMA_VM_TIMEOUT=${RDMA_VM_TIMEOUT:-1500} "$root/tools/rdma-vm/rdma-vm.sh" run "$root" -- \
    "$here/run.sh" --guest --build "$build" --out "$out" "${q[@]}" || exit $?
  python3 "$here/report.py" "$out" "$root/bench/results" || exit 1
  exit 0
fi

# ---- in the guest --------------------------------------------------------------
[ -n "${RDMA_VM_IP:-}" ] || { echo "run.sh --guest: not in the rdma guest" >&2; exit 77; }
ip=$RDMA_VM_IP
dev=${RDMA_VM_DEV:-rxe0}
gid=${RDMA_VM_GID_INDEX:-1}
mkdir -p "$out"
pp=$build/tests/rdma/rdma-pingpong
[ -x "$pp" ] || pp=$build/rdma-pingpong
secs=4; iters=3000; rb_time=1; rb_iters=3000; wn=24
[ $quick = 1 ] && { secs=2; iters=1000; rb_time=0.3; rb_iters=500; wn=8; }
SPIN=(REMOTE_GPU_RDMA_SPIN_US=2000000 REMOTE_GPU_RDMA_SERVER_SPIN_US=2000000)

step() { echo "== $* ($(date +%T))"; }

base=$out
for run in $(seq 1 "$repeat"); do
(
[ "$repeat" -gt 1 ] && { out=$base/r$run; mkdir -p "$out"; echo "== run $run of $repeat"; }
{
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "kernel $(uname -r)"
  echo "cpu $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') x$(nproc)"
  echo "device $dev $(cat "/sys/class/infiniband/$dev/ports/1/active_mtu" 2>/dev/null)"
  echo "commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo "${RG_COMMIT:-unknown}")"
  echo "dirty $(git -C "$root" status --porcelain 2>/dev/null | grep -c .)"
} >"$out/env.txt"

step "perftest"
perftest ib_send_lat ib_send_lat -s 64 -n 5000
perftest ib_write_bw_1m ib_write_bw -s 1048576 -D $secs
perftest ib_write_bw_4m ib_write_bw -s 4194304 -D $secs
perftest ib_read_bw_1m ib_read_bw -s 1048576 -D $secs
tail -n 2 "$out"/ib_*.txt | grep -v '^-' | sed 's/^/  /'

# rdma-pingpong: the transport alone
pingpong() { # NAME SPEC ENV...
  local name=$1 spec=$2; shift 2
  pp_start "$pp" "$spec" "$out/$name.server" "$@"
  [ -n "$pp_port" ] || { echo "  pingpong server did not start"; pp_stop; return; }
  env "$@" timeout 300 "$pp" client "$spec:$pp_port" $iters $secs 1048576 4194304 >"$out/$name.txt" 2>&1
  pp_stop
  sed 's/^/  /' "$out/$name.txt"
}
step "rdma-pingpong rdma (default settings)"; pingpong pp_rdma "rdma://$ip"
step "rdma-pingpong rdma (busy polling)"; pingpong pp_rdma_spin "rdma://$ip" "${SPIN[@]}"
step "rdma-pingpong tcp"; pingpong pp_tcp "tcp://$ip"

# gpud_bench NAME SCHEME ARGS ENV...: remote-gpud on the driver test double and
# remote-bench --only cuda through libremote.so against it, with ARGS (one
# string) and ENV on both sides; the output in $out/NAME.txt and .json.
gpud_bench() {
  local name=$1 scheme=$2 args=$3; shift 3
  gpud_start "$build" "$scheme" "$out/$name.server" "$@"
  [ -n "$gpud_port" ] || { echo "  remote-gpud did not start"; tail -5 "$out/$name.server"; gpud_stop; return 1; }
  # shellcheck disable=SC2086 # ARGS are words
  env "$@" REMOTE_GPU="$scheme://$ip:$gpud_port" LD_PRELOAD="$build/frontend/libremote.so" \
    timeout 900 "$build/bench/remote-bench" --only cuda $args --launch-reps 1 --label "$name" \
    --json "$out/$name.json" >"$out/$name.txt" 2>&1
  gpud_stop
}
rbench() { # NAME SCHEME MAX_SIZE ENV...
  local name=$1 scheme=$2 max=$3; shift 3
  gpud_bench "$name" "$scheme" "--iters $rb_iters --min-time $rb_time --max-size $max --launches 5000" "$@" &&
    sed -n '/round trip/,/launch rate/p' "$out/$name.txt" | sed 's/^/  /'
}
step "remote-bench over rdma (default settings)"; rbench rb_rdma rdma 4M
step "remote-bench over rdma (busy polling)"; rbench rb_rdma_spin rdma 4M "${SPIN[@]}"
step "remote-bench over tcp"; rbench rb_tcp tcp 16M

# The copies the target is about, 16 MiB, each between two ib_write_bw runs of
# the same size: under emulation the device's bandwidth drifts by tens of
# percent within a minute, so each copy is judged against the mean of the
# measurements right before and right after it. ib_write_bw runs a fixed
# count of messages (-n): at 16 MiB a 4 s duration holds a dozen, and its
# average moves in steps of 8%.
cbench() { # NAME ENV...
  local name=$1; shift
  gpud_bench "$name" rdma "--iters 200 --min-time $rb_time --min-size 16M --max-size 16M --launches 100" "$@" &&
    grep -A6 'copy bandwidth' "$out/$name.txt" | sed 's/^/  /'
}
step "16 MiB copies between ib_write_bw runs"
perftest ib_write_bw_16m_0 ib_write_bw -s 16777216 -n $wn
cbench cb_rdma
perftest ib_write_bw_16m_1 ib_write_bw -s 16777216 -n $wn
cbench cb_rdma_spin "${SPIN[@]}"
perftest ib_write_bw_16m_2 ib_write_bw -s 16777216 -n $wn
tail -qn 2 "$out"/ib_write_bw_16m_*.txt | grep -v '^-' | sed 's/^/  /'

# The round trips the target is about, likewise between two ib_send_lat runs:
# the transport alone and a CUDA call, busy polling and default settings, each
# a few seconds, judged against the mean of the ib_send_lat runs around them.
step "round trips between ib_send_lat runs"
perftest ib_send_lat_0 ib_send_lat -s 64 -n 5000
pp_start "$pp" "rdma://$ip" "$out/rt_pp.server" "${SPIN[@]}"
[ -n "$pp_port" ] && env "${SPIN[@]}" timeout 120 "$pp" client "rdma://$ip:$pp_port" $iters 1 >"$out/rt_pp.txt" 2>&1
pp_stop
rtb() { # NAME ENV...
  local name=$1; shift
  gpud_bench "$name" rdma "--iters $rb_iters --min-time 0.01 --min-size 4K --max-size 4K --launches 100" "$@"
}
rtb rt_rdma_spin "${SPIN[@]}"
rtb rt_rdma
perftest ib_send_lat_1 ib_send_lat -s 64 -n 5000
grep -h rtt "$out/rt_pp.txt" | sed 's/^/  transport: /'
grep -h -m1 cudaStreamQuery "$out"/rt_rdma_spin.txt "$out"/rt_rdma.txt | sed 's/^/  /'
tail -qn 2 "$out"/ib_send_lat_[01].txt | grep -v '^-' | sed 's/^/  /'
)
done
step "done"
