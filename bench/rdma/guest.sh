# shellcheck shell=bash
# shellcheck disable=SC2154,SC2034 # out ip dev gid are the caller's; pp_port and gpud_port are for it
# bench/rdma/guest.sh: sourced by the guest benchmarks (run.sh, quick.sh,
# instr.sh). On the host, `rdma_in_guest NAME TIMEOUT [--build DIR]` boots one
# guest (tools/rdma-vm) that runs the calling script again inside it with
# RG_BUILD, RG_OUT (and RG_ROUNDS and RG_BUILD_B, quick.sh's --rounds and --against) set, and exits with its status; inside the guest
# (RDMA_VM_IP set) it returns at once and the script goes on measuring.
rdma_in_guest() {
  local name=$1 timeout=$2 build script rc out
  script=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)/$(basename "${BASH_SOURCE[1]}")
  build=$(cd "$(dirname "$script")/../.." && pwd)/build
  [ "${3:-}" = --build ] && build=$(cd "$4" && pwd)
  [ -n "${RDMA_VM_IP:-}" ] && return 0
  out=$(mktemp -d "${TMPDIR:-/tmp}/rg-rdma-$name.XXXXXX")
  RDMA_VM_TIMEOUT=$timeout "$(dirname "$script")/../../tools/rdma-vm/rdma-vm.sh" run \
    -e "RG_BUILD=$build" -e "RG_OUT=$out" -e "RG_ROUNDS=${RG_ROUNDS:-1}" -e "RG_BUILD_B=${RG_BUILD_B:-}" "$out" -- "$script"
  rc=$?
  if [ -n "${RG_KEEP:-}" ]; then echo "outputs kept in $out" >&2; else rm -rf "$out"; fi
  exit $rc
}

# ---- in the guest: what the benchmarks start ($out $ip $dev $gid set) ----

# wait_file FILE [PID]: 0 once FILE has bytes; 1 after 30 s, or at once when
# PID has exited.
wait_file() {
  local n=300
  while [ $n -gt 0 ] && ! [ -s "$1" ]; do
    [ -n "${2:-}" ] && ! kill -0 "$2" 2>/dev/null && return 1
    sleep 0.1
    n=$((n - 1))
  done
  [ -s "$1" ]
}

# perftest_listening: waits (up to 60 s) for a perftest server to listen (its
# port 18515): its client may only start then.
perftest_listening() {
  local n=600
  while [ $n -gt 0 ] && ! ss -Hltn "sport = :18515" | grep -q .; do sleep 0.1; n=$((n - 1)); done
}

# perftest NAME TOOL ARGS...: a perftest server and its client on this one
# device (rxe loops the packets back); outputs $out/NAME.server, $out/NAME.txt.
perftest() {
  local name=$1; shift
  timeout 120 "$@" -d "$dev" -x "$gid" -F >"$out/$name.server" 2>&1 &
  local s=$!
  perftest_listening
  timeout 120 "$@" -d "$dev" -x "$gid" -F "$ip" >"$out/$name.txt" 2>&1
  wait $s
}

# pp_start PINGPONG SPEC LOG ENV...: rdma-pingpong's server on SPEC
# (rdma://IP or tcp://IP, any port); sets pp_pid, and pp_port (empty when it
# did not start). pp_stop ends it.
pp_start() {
  local bin=$1 spec=$2 log=$3; shift 3
  rm -f "$out/pp.port"
  env "$@" "$bin" server "$spec:0" >"$out/pp.port" 2>"$log" &
  pp_pid=$!
  pp_port=
  if wait_file "$out/pp.port" $pp_pid; then pp_port=$(head -1 "$out/pp.port"); fi
}
pp_stop() { kill "$pp_pid"; wait "$pp_pid" 2>/dev/null; }

# gpud_start BUILD SCHEME LOG ENV...: remote-gpud of BUILD on its driver test
# double, listening on SCHEME://IP (any port); sets gpud_pid, and gpud_port
# (empty when it did not start). gpud_stop ends it.
gpud_start() {
  local b=$1 scheme=$2 log=$3; shift 3
  rm -f "$out/gpud.port"
  env "$@" "$b/backend/remote-gpud" --insecure --listen "$scheme://$ip:0" --port-file "$out/gpud.port" \
    --driver "$b/tests/fakecuda/libcuda.so.1" >"$log" 2>&1 &
  gpud_pid=$!
  gpud_port=
  if wait_file "$out/gpud.port" $gpud_pid; then gpud_port=$(cat "$out/gpud.port"); fi
}
gpud_stop() { kill -TERM "$gpud_pid"; wait "$gpud_pid" 2>/dev/null; }
