#!/usr/bin/env bash
# run_obs.sh: observability tests, end to end against remote-gpud on the driver
# test double (tests/fakecuda).
#
#   tests/obs/run_obs.sh [--build DIR] [--bin DIR] [--only NAME[,NAME...]] [--keep] [--list]
#
#   smi           remote-smi (text and --json) shows a live session: client host,
#                 (and every device of a server of two: --device all)
#                 pid, program, its 1 MiB of device memory, calls per op; with a
#                 process per session and with --isolation thread; the session is
#                 gone when the client ends and when its session process is killed
#   metrics       GET /metrics (remote-gpud --metrics-port 0) parses with a strict
#                 Prometheus text-format parser and with prometheus_client's (when
#                 installed) and carries the session's memory; HEAD, bad requests
#                 (404, 405, 400, 431); remote-smi --prometheus parses too
#   metrics_listen  the same on --metrics-listen=127.0.0.2:0, and only there
#   stats         REMOTE_GPU_STATS counts exactly what obs_counts did (JSON file),
#                 remote_gpu_stats_dump() mid-run, SIGUSR1, nothing when unset
#   trace         REMOTE_GPU_TRACE: backtraces start in the program's function
#                 (checked with nm), the arguments and results of cudaMemcpy
#   trace_python  Python frames while the calling thread holds the GIL, none
#                 (and says so) when ctypes released it
#   logsync       REMOTE_GPU_LOG_SYNC=1 keeps log lines in order with the program's
#                 buffered stdout (and without it they are not)
#   oom           an out-of-memory error prints device memory and live allocations
#
# Each test runs its servers with TMPDIR set to a scratch folder of its own (the
# run directories remote-smi reads live there), on free ports.
# Exit status: 0 passed, 1 failed, 77 skipped (no nvcc or nothing built).
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${RG_BUILD_DIR:-$root/build}
bin=
only=
keep=0
ALL=(smi metrics metrics_listen stats trace trace_python logsync oom)

while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --list) printf '%s\n' "${ALL[@]}"; exit 0 ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_obs: unknown argument $1" >&2; exit 2 ;;
  esac
done
build=$(cd "$build" 2>/dev/null && pwd || echo "$build")
bin=${bin:-$build/tests/obs/bin}
if [ -n "$only" ]; then
  IFS=, read -r -a tests <<<"$only"
  for t in "${tests[@]}"; do
    [[ " ${ALL[*]} " == *" $t "* ]] || { echo "run_obs: unknown test $t (see --list)" >&2; exit 2; }
  done
else
  tests=("${ALL[@]}")
fi

skip() { echo "SKIP: $*"; exit 77; }
gpud=$build/backend/remote-gpud
smi=$build/backend/remote-smi
lib=$build/frontend/libremote.so
fake=$build/tests/fakecuda/libcuda.so.1
[ -x "$gpud" ] && [ -x "$smi" ] || skip "remote-gpud or remote-smi not built in $build"
[ -f "$lib" ] || skip "libremote.so not built ($lib)"
[ -f "$fake" ] || skip "driver test double not built ($fake)"
nvcc=${RG_NVCC:-$(command -v nvcc || true)}
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
mkdir -p "$bin"
for p in obs_counts:$here/obs_counts.cu holder:$root/tests/e2e/holder.cu; do
  name=${p%%:*} src=${p#*:}
  if [ ! -x "$bin/$name" ] || [ "$src" -nt "$bin/$name" ]; then
    [ -n "$nvcc" ] || skip "nvcc not found (set RG_NVCC): the test programs cannot be built"
    "$root/tests/e2e/nvcc-build.sh" --nvcc "$nvcc" -o "$bin/$name" "$src" || { echo "FAIL: cannot build $name"; exit 1; }
  fi
done
# The Python of the system: it has python3-prometheus-client (tools/setup.sh).
py=${RG_PYTHON:-}
[ -z "$py" ] && { [ -x /usr/bin/python3 ] && py=/usr/bin/python3 || py=$(command -v python3); }
check() { "$py" "$here/check_obs.py" "$@"; }

work=$(mktemp -d "${TMPDIR:-/tmp}/rg-obs.XXXXXX")
export TMPDIR=$work # run directories of our servers: nobody else's
pids=()
fail=0
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  if [ "$keep" = 1 ] || [ "$fail" -gt 0 ]; then echo "scratch folder kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# start_server NAME ARGS...: remote-gpud on a free port; sets port and srv_pid.
port= srv_pid=
start_server() {
  local name=$1
  shift
  rm -f "$work/$name.port"
  "$gpud" --listen 127.0.0.1:0 --port-file "$work/$name.port" --driver "$fake" "$@" >"$work/$name.log" 2>&1 &
  srv_pid=$!
  pids+=("$srv_pid")
  local n=100
  while [ $n -gt 0 ]; do
    [ -s "$work/$name.port" ] && read -r port <"$work/$name.port" && [[ $port =~ ^[0-9]+$ ]] && return 0
    kill -0 "$srv_pid" 2>/dev/null || break
    sleep 0.1
    n=$((n - 1))
  done
  echo "remote-gpud did not start:"
  sed 's/^/  | /' "$work/$name.log"
  return 1
}

stop_server() {
  kill -TERM "$srv_pid" 2>/dev/null
  wait "$srv_pid" 2>/dev/null
}

client() { REMOTE_GPU=127.0.0.1:$port LD_PRELOAD=$lib RGTEST_FAKE=1 timeout 60 "$@"; }

# start_holder [ARGS...]: a client holding 1 MiB until its stdin closes;
# holder_pid. It ignores its arguments; the server sees them in the client's
# command line (hostile characters for the escaping of labels and JSON).
holder_pid= holder_fd=
start_holder() {
  rm -f "$work/holder.fifo" "$work/holder.out"
  mkfifo "$work/holder.fifo"
  # not through client(): $! must be the holder itself (its pid is checked)
  REMOTE_GPU=127.0.0.1:$port LD_PRELOAD=$lib "$bin/holder" "$@" <"$work/holder.fifo" >"$work/holder.out" \
    2>"$work/holder.err" &
  holder_pid=$!
  pids+=("$holder_pid")
  exec {holder_fd}>"$work/holder.fifo"
  local n=100
  while [ $n -gt 0 ]; do
    [[ $(head -n1 "$work/holder.out" 2>/dev/null) =~ ^[0-9a-f]+$ ]] && return 0
    kill -0 "$holder_pid" 2>/dev/null || break
    sleep 0.1
    n=$((n - 1))
  done
  echo "the holder client did not start: $(cat "$work/holder.err")"
  return 1
}

stop_holder() {
  exec {holder_fd}>&-
  wait "$holder_pid"
}

# wait_for CMD...: retries a check for up to 5 s (session files appear and go
# with the session processes).
wait_for() {
  local n=50
  while [ $n -gt 0 ]; do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
    n=$((n - 1))
  done
  "$@"
}

smi_json() { "$smi" --port "$port" --json >"$work/smi.json" && check "$@"; }

# ---- tests ---------------------------------------------------------------------

t_smi() {
  local iso
  for iso in process thread; do
    start_server "smi-$iso" --isolation "$iso" || return 1
    start_holder || return 1
    # the client is reported once its hello ran: by then holder printed its pointer
    wait_for smi_json smi "$work/smi.json" "$holder_pid" holder 1048576 || { echo "  ($iso isolation)"; return 1; }
    "$smi" --port "$port" --ops >"$work/smi.txt" || return 1
    grep -q "holder" "$work/smi.txt" && grep -q "1.0 MiB" "$work/smi.txt" && grep -q "mem_alloc 1" "$work/smi.txt" || {
      echo "remote-smi's table lacks the session ($iso):"; sed 's/^/  | /' "$work/smi.txt"; return 1; }
    # every server under TMPDIR when no port is given
    "$smi" >"$work/smi-all.txt" && grep -q "127.0.0.1:$port" "$work/smi-all.txt" || {
      echo "remote-smi without --port does not find the server"; return 1; }
    stop_holder || { echo "the holder failed: $(cat "$work/holder.err")"; return 1; }
    wait_for smi_json nosession "$work/smi.json" || { echo "  after the client ended ($iso)"; return 1; }
    if [ "$iso" = process ]; then
      # a session process killed outright: the supervisor removes what it left
      start_holder || return 1
      wait_for smi_json smi "$work/smi.json" "$holder_pid" holder 1048576 || return 1
      local spid
      spid=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["servers"][0]["sessions"][0]["pid"])' \
        "$work/smi.json")
      kill -KILL "$spid"
      wait_for smi_json nosession "$work/smi.json" || { echo "  after SIGKILL of session process $spid"; return 1; }
      ls "$work/remote-gpud-$port" | grep -q '^session-' && { echo "session file left: $(ls "$work/remote-gpud-$port")"; return 1; }
      stop_holder >/dev/null 2>&1
    fi
    local dir=$work/remote-gpud-$port
    stop_server
    [ ! -e "$dir" ] || { echo "run directory left after SIGTERM: $(ls -A "$dir")"; return 1; }
  done
  # a server of two devices (--device all): each in the text, the JSON and
  # the Prometheus text
  FAKECUDA_DEVICES=2 start_server smi-two --device all || return 1
  "$smi" --port "$port" --json >"$work/smi-two.json" && check devices "$work/smi-two.json" 2 || return 1
  "$smi" --port "$port" >"$work/smi-two.txt" && grep -q '^  GPU 0 ' "$work/smi-two.txt" &&
    grep -q '^  GPU 1 ' "$work/smi-two.txt" || { echo "remote-smi's text lacks a device:"; sed 's/^/  | /' "$work/smi-two.txt"; return 1; }
  "$smi" --port "$port" --prometheus >"$work/smi-two.prom" &&
    [ "$(grep -c '^remote_gpud_info{.*device="[01]"' "$work/smi-two.prom")" = 2 ] ||
    { echo "remote-smi --prometheus: not one remote_gpud_info per device"; grep '^remote_gpud_info' "$work/smi-two.prom"; return 1; }
  stop_server
  "$smi" >/dev/null 2>&1 && { echo "remote-smi exits 0 with no server running"; return 1; }
  return 0
}

t_metrics() {
  start_server metrics --metrics-port 0 || return 1
  local mport
  mport=$(sed -n 's|.*metrics at http://127.0.0.1:\([0-9]*\)/metrics.*|\1|p' "$work/metrics.log")
  [ -n "$mport" ] || { echo "no metrics port in the log"; sed 's/^/  | /' "$work/metrics.log"; return 1; }
  start_holder 'q"uote' 'back\slash' $'bad\xff\xfeutf8' 'ünïcode' || return 1
  wait_for smi_json smi "$work/smi.json" "$holder_pid" holder 1048576 || return 1
  check metrics "$mport" 1048576 || return 1
  "$smi" --port "$port" --prometheus >"$work/smi.prom" && check promfile "$work/smi.prom" || return 1
  stop_holder
  stop_server
}

# --metrics-listen=HOST:PORT (the --opt=VALUE form on purpose): bound there and
# only there. 127.0.0.2 stands for "another address" and needs no setup.
t_metrics_listen() {
  start_server metrics_listen --metrics-listen=127.0.0.2:0 || return 1
  local mport
  mport=$(sed -n 's|.*metrics at http://127.0.0.2:\([0-9]*\)/metrics.*|\1|p' "$work/metrics_listen.log")
  [ -n "$mport" ] || { echo "no metrics address in the log"; sed 's/^/  | /' "$work/metrics_listen.log"; return 1; }
  start_holder || return 1
  wait_for smi_json smi "$work/smi.json" "$holder_pid" holder 1048576 || return 1
  check metrics "127.0.0.2:$mport" 1048576 || return 1
  if "$py" -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)' "$mport" 2>/dev/null; then
    echo "--metrics-listen 127.0.0.2: also answers on 127.0.0.1"; return 1
  fi
  stop_holder
  stop_server
}

t_stats() {
  start_server stats || return 1
  client "$bin/obs_counts" counts >"$work/off.out" 2>"$work/off.err" || { echo "obs_counts failed"; cat "$work/off.err"; return 1; }
  grep -q "remote-gpu statistics: off" "$work/off.out" && [ ! -s "$work/off.err" ] || {
    echo "without REMOTE_GPU_STATS: stats printed, or the dump did not say they are off"; cat "$work/off.err"; return 1; }
  REMOTE_GPU_STATS="$work/stats-%p.json" client "$bin/obs_counts" counts >"$work/stats.out" 2>"$work/stats.err" || {
    echo "obs_counts failed"; cat "$work/stats.err"; return 1; }
  local f
  f=$(ls "$work"/stats-*.json 2>/dev/null | head -n1)
  [ -n "$f" ] || { echo "no statistics file"; return 1; }
  check stats "$f" || { sed 's/^/  | /' "$f"; return 1; }
  check dump "$work/stats.out" || return 1
  REMOTE_GPU_STATS=1 client "$bin/obs_counts" counts signal >"$work/sig.out" 2>"$work/sig.err" || return 1
  grep -q "^remote-gpu statistics on SIGUSR1: pid" "$work/sig.err" && grep -q "^remote-gpu statistics at exit: pid" "$work/sig.err" || {
    echo "REMOTE_GPU_STATS=1 with SIGUSR1: the tables are not both on stderr"; sed 's/^/  | /' "$work/sig.err"; return 1; }
  stop_server
}

t_trace() {
  start_server trace || return 1
  REMOTE_GPU_TRACE="cudaMalloc=1,cudaMemcpy=2" client "$bin/obs_counts" counts >"$work/trace.out" 2>"$work/trace.err" || {
    echo "obs_counts failed"; tail "$work/trace.err"; return 1; }
  check trace "$work/trace.err" "$bin/obs_counts" || { head -n 30 "$work/trace.err" | sed 's/^/  | /'; return 1; }
  stop_server
}

t_trace_python() {
  start_server trace_py || return 1
  REMOTE_GPU_TRACE="cudaMalloc=1" client "$py" "$here/trace_py.py" >"$work/py.out" 2>"$work/py.err" || {
    echo "trace_py.py failed"; tail "$work/py.err"; return 1; }
  check trace_py "$work/py.err" "$here/trace_py.py" || { head -n 40 "$work/py.err" | sed 's/^/  | /'; return 1; }
  stop_server
}

t_logsync() {
  start_server logsync || return 1
  REMOTE_GPU_TRACE="cudaMalloc=1" client "$bin/obs_counts" logsync >"$work/nosync.out" 2>&1 || return 1
  check logsync "$work/nosync.out" 0 || return 1
  REMOTE_GPU_LOG_SYNC=1 REMOTE_GPU_TRACE="cudaMalloc=1" client "$bin/obs_counts" logsync >"$work/sync.out" 2>&1 || return 1
  check logsync "$work/sync.out" 1 || { sed 's/^/  | /' "$work/sync.out"; return 1; }
  stop_server
}

t_oom() {
  start_server oom || return 1
  REMOTE_GPU_STATS=1 client "$bin/obs_counts" oom >"$work/oom.out" 2>"$work/oom.err" || {
    echo "obs_counts oom failed"; cat "$work/oom.out" "$work/oom.err"; return 1; }
  grep -q "warn stats\] out of device memory on device 0:" "$work/oom.err" &&
    grep -q "^device 0 (127.0.0.1:$port): memory now 3.0 MiB, peak 3.0 MiB; 3 live allocations (3.0 MiB)" "$work/oom.err" &&
    grep -q "^  largest: 1.0 MiB at 0x" "$work/oom.err" || {
    echo "no memory report at the out-of-memory error:"; sed 's/^/  | /' "$work/oom.err"; return 1; }
  stop_server
}

pass=0
for t in "${tests[@]}"; do
  # in this shell, not a subshell: the servers it starts stay known to cleanup
  if "t_$t" >"$work/$t.result" 2>&1; then
    echo "PASS $t"
    pass=$((pass + 1))
  else
    echo "FAIL $t"
    sed 's/^/  /' "$work/$t.result"
    fail=$((fail + 1))
  fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
