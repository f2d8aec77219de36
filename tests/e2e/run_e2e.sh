#!/usr/bin/env bash
# run_e2e.sh: end-to-end tests of the whole path, libremote.so -> TCP ->
# remote-gpud -> driver, on a machine without a GPU. The backend runs on the
# driver test double (tests/fakecuda: device memory in host RAM, launches logged
# to $FAKECUDA_LAUNCH_LOG); the CUDA C programs of tests/e2e run unmodified with
# LD_PRELOAD=libremote.so.
#
#   tests/e2e/run_e2e.sh [--build DIR] [--bin DIR] [--only NAME[,NAME...]]
#                        [--driver PATH] [--transport tcp|shm] [--keep] [--list]
#
#   --build DIR   the CMake build folder (default $RG_BUILD_DIR or <repo>/build):
#                 backend/remote-gpud, frontend/libremote.so and
#                 tests/fakecuda/libcuda.so.1 are taken from there
#   --bin DIR     where the compiled test programs are (default
#                 <build>/tests/e2e/bin); missing or stale ones are built with
#                 nvcc (tests/e2e/nvcc-build.sh)
#   --only LIST   run only these tests (names from --list)
#   --driver PATH run the backend on another driver library (default: the fake;
#                 with another driver the launch-log checks are skipped)
#   --transport T tcp (default, $RG_E2E_TRANSPORT) or shm: the server listens on
#                 shm://<scratch>/gpud.sock and the clients connect there
#                 (garbage, which writes raw bytes to a tcp port, is tcp only)
#   --keep        keep the scratch folder (it is always kept when a test fails)
#
# Each program test: the program's exit status is 0; its stdout, less the
# "expect launch" lines, equals tests/e2e/expected/<name>.out where that file
# exists; every "expect launch" line it printed is in the fake's launch log, in
# order, byte for byte; and afterwards the server's free memory (cudaMemGetInfo
# through the remote, by the probe program) is back to its baseline.
# Programs tagged gpu2 run against a server of their own that serves two fake
# devices (FAKECUDA_DEVICES=2, --device all) and check their memory themselves.
# Other tests: several clients at once, a client killed with SIGKILL in the
# middle of a 64 MiB copy loop, garbage bytes on the server's port, NVML with
# two remote devices (REMOTE_GPU naming the server twice), multi_gpu on two
# servers of two devices each (multi_gpu_mixed), NVML on a server of two
# devices (nvml_multi), dead REMOTE_GPU entries and CUDA_VISIBLE_DEVICES
# (skip_dead), SIGTERM.
#
# Exit status: 0 all passed, 1 some failed, 77 skipped (no nvcc, or the backend,
# frontend or fake driver not built). The last line is "N passed, N failed".
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${RG_BUILD_DIR:-$root/build}
bin=
only=
driver=
keep=0
timeout_s=${RG_E2E_TIMEOUT:-120}
transport=${RG_E2E_TRANSPORT:-tcp}

# The lists are programs.txt's (tags ci, ci-static, scenario, helper). The
# programs that end in a sticky error (faulting) run last: on a GPU their error
# may poison the server.
source "$here/programs.sh"
PROGRAMS=($(rg_programs ci '!helper' '!scenario' '!faulting') $(rg_programs ci faulting '!helper'))
# the same programs built with nvcc's default static runtime, which reaches
# libremote.so as the driver (libcuda.so.1): test static_<name>, same expected output
STATIC=($(rg_programs ci-static))
SPECIAL=($(rg_programs ci scenario))
HELPERS=($(rg_programs ci helper))
DRIVER=" $(rg_programs driver | tr '\n' ' ') "
# programs that need two devices: run on servers of two fake devices (gpu2)
GPU2=" $(rg_programs gpu2 | tr '\n' ' ') "

while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --driver) driver=$2; shift 2 ;;
    --transport) transport=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --list) printf '%s\n' "${PROGRAMS[@]}" "${STATIC[@]/#/static_}" "${SPECIAL[@]}"; exit 0 ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_e2e: unknown argument $1" >&2; exit 2 ;;
  esac
done
build=$(cd "$build" 2>/dev/null && pwd || echo "$build")
case $transport in tcp|shm) ;; *) echo "run_e2e: --transport tcp or shm, not $transport" >&2; exit 2 ;; esac
bin=${bin:-$build/tests/e2e/bin}

skip() {
  echo "SKIP: $*"
  echo "0 passed, 0 failed"
  exit 77
}

if [ -n "$only" ]; then
  IFS=, read -r -a tests <<<"$only"
  for t in "${tests[@]}"; do
    [[ " ${PROGRAMS[*]} ${STATIC[*]/#/static_} ${SPECIAL[*]} " == *" $t "* ]] ||
      { echo "run_e2e: unknown test $t (see --list)" >&2; exit 2; }
  done
else
  tests=("${PROGRAMS[@]}" "${STATIC[@]/#/static_}" "${SPECIAL[@]}")
fi

# ---- what we need -------------------------------------------------------------
gpud=$build/backend/remote-gpud
lib=$build/frontend/libremote.so
fake=$build/tests/fakecuda/libcuda.so.1
[ -x "$gpud" ] || skip "remote-gpud not built ($gpud)"
[ -f "$lib" ] || skip "libremote.so not built ($lib)"
if [ -z "$driver" ]; then
  [ -f "$fake" ] || skip "driver test double not built ($fake)"
  driver=$fake
fi
# A sanitizer build of libremote.so (tests/asan/run.sh) needs its runtime ahead
# of everything in the program, which is not instrumented: first in LD_PRELOAD.
preload=$lib
san_rt=$(ldd "$lib" 2>/dev/null | sed -n 's/^[[:space:]]*libasan\.so[^ ]* => \([^ ]*\).*/\1/p')
[ -n "$san_rt" ] && preload=$san_rt:$lib
# Leaks are checked in the server; the test programs' own (and their CUDA
# runtime's) are not what this suite is about.
srv_asan_options=${ASAN_OPTIONS:-}
[ -n "$san_rt" ] && export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fake_mode=0
[ "$(realpath "$driver")" = "$(realpath "$fake" 2>/dev/null)" ] && fake_mode=1

nvcc=${RG_NVCC:-$(command -v nvcc || true)}
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
mkdir -p "$bin"
for p in "${PROGRAMS[@]}" "${HELPERS[@]}"; do
  src=$here/$p.cu
  if [ ! -x "$bin/$p" ] || [ "$src" -nt "$bin/$p" ] || [ "$here/rgtest.h" -nt "$bin/$p" ] ||
     [ "$here/rgtest_kernels.cuh" -nt "$bin/$p" ] || [ "$here/rgdrv.h" -nt "$bin/$p" ]; then
    [ -n "$nvcc" ] || skip "nvcc not found (set RG_NVCC or put it on PATH): the test programs cannot be built"
    echo "nvcc: $p"
    # driver API programs, with the static runtime and -lcuda
    mode=(); [[ $DRIVER == *" $p "* ]] && mode=(--static)
    "$here/nvcc-build.sh" --nvcc "$nvcc" "${mode[@]}" -o "$bin/$p" "$src" ||
      { echo "FAIL: cannot build $p"; echo "0 passed, 1 failed"; exit 1; }
  fi
done
for p in "${STATIC[@]}"; do
  src=$here/$p.cu
  [[ " ${tests[*]} " == *" static_$p "* ]] || continue
  if [ ! -x "$bin/static/$p" ] || [ "$src" -nt "$bin/static/$p" ] || [ "$here/rgtest.h" -nt "$bin/static/$p" ]; then
    [ -n "$nvcc" ] || skip "nvcc not found (set RG_NVCC or put it on PATH): the test programs cannot be built"
    echo "nvcc --static: $p"
    "$here/nvcc-build.sh" --nvcc "$nvcc" --static -o "$bin/static/$p" "$src" ||
      { echo "FAIL: cannot build $p with the static runtime"; echo "0 passed, 1 failed"; exit 1; }
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/rg-e2e.XXXXXX")
# The client's cache of image hashes (frontend/src/hash_cache.c): the run's own.
export REMOTE_GPU_HASH_CACHE=$work/hash-cache
launch_log=$work/launch.log
srv_pid=
srv_port=
srv_addr= # what clients put in REMOTE_GPU
holder_pid=
holder_fd=
pass=0
fail=0
failed=()

cleanup() {
  stop_holder >/dev/null 2>&1
  stop_extra
  if [ -n "$srv_pid" ] && kill -0 "$srv_pid" 2>/dev/null; then
    kill -TERM "$srv_pid" 2>/dev/null
    wait_pid "$srv_pid" 10 || kill -KILL "$srv_pid" 2>/dev/null
  fi
  if [ "$keep" = 1 ] || [ "$fail" -gt 0 ]; then
    echo "scratch folder kept: $work"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

# wait_pid PID SECONDS: wait for a child to end; its status in $wait_status.
wait_status=
wait_pid() {
  local pid=$1 n=$(($2 * 10))
  while kill -0 "$pid" 2>/dev/null && [ $n -gt 0 ]; do sleep 0.1; n=$((n - 1)); done
  kill -0 "$pid" 2>/dev/null && return 1
  wait "$pid" 2>/dev/null
  wait_status=$?
  return 0
}

start_server() {
  local pf=$work/port
  rm -f "$pf"
  echo "--- remote-gpud start $(date +%T)" >>"$work/server.log"
  local listen=127.0.0.1:0
  [ "$transport" = shm ] && listen=shm://$work/gpud.sock
  ASAN_OPTIONS=$srv_asan_options FAKECUDA_LAUNCH_LOG=$launch_log "$gpud" --listen "$listen" --port-file "$pf" --driver "$driver" \
    >>"$work/server.log" 2>&1 &
  srv_pid=$!
  local n=100
  while [ $n -gt 0 ]; do
    if [ -s "$pf" ] && read -r srv_port <"$pf" && [[ $srv_port =~ ^[0-9]+$ ]]; then
      srv_addr=127.0.0.1:$srv_port
      [ "$transport" = shm ] && srv_addr=${listen}
      return 0
    fi
    kill -0 "$srv_pid" 2>/dev/null || break
    sleep 0.1
    n=$((n - 1))
  done
  echo "remote-gpud did not start (no port in $pf); its log:"
  tail -n 20 "$work/server.log" | sed 's/^/  | /'
  return 1
}

server_alive() { [ -n "$srv_pid" ] && kill -0 "$srv_pid" 2>/dev/null; }

# start_extra N SLOT: another server, of N fake devices (--device all), its
# device addresses FAKECUDA_ARENA_SLOT SLOT apart from other servers'; its
# port appended to extra_ports, its pid to extra_pids.
extra_ports=()
extra_pids=()
start_extra() {
  local pf=$work/port.extra.${#extra_pids[@]}
  rm -f "$pf"
  ASAN_OPTIONS=$srv_asan_options FAKECUDA_DEVICES=$1 FAKECUDA_ARENA_SLOT=$2 FAKECUDA_LAUNCH_LOG=$launch_log \
    "$gpud" --listen 127.0.0.1:0 --port-file "$pf" --driver "$driver" --device all >>"$work/server.extra.log" 2>&1 &
  extra_pids+=($!)
  local n=100 port
  while [ $n -gt 0 ]; do
    if [ -s "$pf" ] && read -r port <"$pf" && [[ $port =~ ^[0-9]+$ ]]; then
      extra_ports+=("$port")
      return 0
    fi
    sleep 0.1
    n=$((n - 1))
  done
  return 1
}

# stop_extra: SIGTERM to the extra servers; 0 if each exited 0.
stop_extra() {
  local pid rc=0
  for pid in "${extra_pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null
    if wait_pid "$pid" 10; then [ "$wait_status" -eq 0 ] || rc=1; else kill -KILL "$pid" 2>/dev/null; rc=1; fi
  done
  extra_pids=()
  extra_ports=()
  return $rc
}

# client PROG ARGS...: a program through the remote (stdout/stderr as the caller redirects)
# (the driver folder: programs with the static runtime, or linked with -lcuda,
# find libremote.so as libcuda.so.1)
client_gpus= # REMOTE_GPU for the client, if not the one server
client() {
  REMOTE_GPU=${client_gpus:-$srv_addr} LD_PRELOAD=$preload LD_LIBRARY_PATH=$build/frontend/driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    RGTEST_FAKE=$fake_mode timeout "$timeout_s" "$@"
}

probe_free() { client "$bin/probe" 2>>"$work/probe.err" | sed -n 's/^free=\([0-9]*\) .*/\1/p'; }

# mem_back: poll until the server's free memory is back at the baseline.
mem_detail=
mem_back() {
  local f='' n=100
  while [ $n -gt 0 ]; do
    f=$(probe_free)
    [ -n "$f" ] && [ "$f" = "$baseline" ] && return 0
    sleep 0.1
    n=$((n - 1))
  done
  if [ -z "$f" ]; then
    mem_detail="the probe got no answer from the server"
  else
    mem_detail="free memory $f, baseline $baseline ($((baseline - f)) bytes still held)"
    baseline=$f # judge the next tests on their own
  fi
  return 1
}

# start_holder: another client holding 1 MiB; its device address in $holder_ptr.
holder_ptr=
start_holder() {
  local fifo=$work/holder.fifo
  rm -f "$fifo" "$work/holder.out"
  mkfifo "$fifo"
  client "$bin/holder" <"$fifo" >"$work/holder.out" 2>"$work/holder.err" &
  holder_pid=$!
  exec {holder_fd}>"$fifo"
  local n=100
  while [ $n -gt 0 ]; do
    holder_ptr=$(head -n1 "$work/holder.out" 2>/dev/null)
    [[ $holder_ptr =~ ^[0-9a-f]+$ ]] && return 0
    kill -0 "$holder_pid" 2>/dev/null || break
    sleep 0.1
    n=$((n - 1))
  done
  return 1
}

# stop_holder: close its stdin; 0 if it ended cleanly (its memory untouched).
stop_holder() {
  [ -n "$holder_pid" ] || return 0
  [ -n "$holder_fd" ] && exec {holder_fd}>&-
  holder_fd=
  local pid=$holder_pid
  holder_pid=
  wait_pid "$pid" 20 || { kill -KILL "$pid" 2>/dev/null; return 1; }
  return "$wait_status"
}

# check_launches OUT OFFSET: the "expect launch" lines of OUT appear, in order,
# in the launch log written since byte OFFSET.
check_launches() {
  local out=$1 off=$2
  grep '^expect launch ' "$out" | sed 's/^expect //' >"$out.want"
  tail -c +"$((off + 1))" "$launch_log" >"$out.log"
  awk 'function norm(s) { sub(/[ \t\r]+$/, "", s); return tolower(s) }
       NR == FNR { want[++n] = norm($0); next }
       i < n && norm($0) == want[i + 1] { i++ }
       END { if (i < n) { print "  not in the launch log (in order): " want[i + 1]; exit 1 } }' \
    "$out.want" "$out.log" && return 0
  local name
  name=$(awk '{print $2}' <<<"$(grep -vxFf "$out.log" "$out.want" | head -n1)")
  echo "  the log's lines for ${name:-?}:"
  grep -F "launch $name " "$out.log" | head -n 4 | cut -c1-300 | sed 's/^/  | /'
  return 1
}

report() { # NAME PROBLEMS...
  local name=$1
  shift
  if [ $# -eq 0 ]; then
    echo "PASS $name"
    pass=$((pass + 1))
  else
    echo "FAIL $name"
    printf '  %s\n' "$@"
    fail=$((fail + 1))
    failed+=("$name")
  fi
}

show_files() { # DIR: diff and stderr of a failed program
  [ -s "$1/diff" ] && head -n 40 "$1/diff" | sed 's/^/  | /'
  [ -s "$1/err" ] && { echo "  stderr:"; tail -n 12 "$1/err" | sed 's/^/  | /'; }
  return 0
}

# run_program NAME DIR [ARGS...]: runs it (static_NAME: NAME built with the
# static runtime), checks status, stdout and launches;
# appends problems to the array "problems".
run_program() {
  local p=$1 dir=$2 exe=$bin/$1
  shift 2
  if [[ $p == static_* ]]; then p=${p#static_}; exe=$bin/static/$p; fi
  mkdir -p "$dir"
  local off
  off=$(stat -c %s "$launch_log" 2>/dev/null || echo 0)
  client "$exe" "$@" >"$dir/out" 2>"$dir/err"
  local rc=$?
  [ $rc -eq 0 ] || problems+=("exit status $rc$([ $rc -eq 124 ] && echo ' (timed out)')")
  local want=${expect_name:-$p}
  if [ -f "$here/expected/$want.out" ]; then
    grep -v '^expect ' "$dir/out" >"$dir/out.cmp"
    diff -u "$here/expected/$want.out" "$dir/out.cmp" >"$dir/diff" ||
      problems+=("stdout differs from tests/e2e/expected/$want.out")
  fi
  if [ "$fake_mode" = 1 ] && grep -q '^expect launch ' "$dir/out"; then
    check_launches "$dir/out" "$off" >"$dir/launches" || problems+=("launches differ from the fake's log:" "$(cat "$dir/launches")")
  fi
}

ensure_server() {
  server_alive && return 0
  echo "(remote-gpud is not running: starting it again)"
  start_server && baseline=$(probe_free)
}

# ---- tests -------------------------------------------------------------------
# gpu2 programs, and multi_gpu_mixed: on servers of their own, of two fake
# devices each (the program checks each device's memory itself); the servers
# must end cleanly.
t_gpu2() { # NAME SERVERS [CASE [ARGS...]]: CASE names the test and its expected output
  local p=$1 nsrv=$2 dir=$work/${3:-$1} args=("${@:4}")
  problems=()
  local i gpus=
  for ((i = 1; i <= nsrv; i++)); do
    start_extra 2 "$i" || problems+=("a server of two fake devices did not start: $(tail -n 3 "$work/server.extra.log")")
  done
  for i in "${extra_ports[@]}"; do gpus=${gpus:+$gpus,}127.0.0.1:$i; done
  if [ ${#problems[@]} -eq 0 ]; then
    client_gpus=$gpus expect_name=${3:-} run_program "$p" "$dir" "${args[@]}"
  fi
  stop_extra || problems+=("a server of two fake devices did not end cleanly: $(tail -n 3 "$work/server.extra.log")")
  report "${3:-$p}" "${problems[@]}"
  [ ${#problems[@]} -eq 0 ] || show_files "$dir"
}

t_program() {
  local p=$1 dir=$work/$1 args=()
  problems=()
  if [ "$p" = errors ]; then
    if start_holder; then args=("$holder_ptr"); else problems+=("the holder client did not start"); fi
  fi
  run_program "$p" "$dir" "${args[@]}"
  if [ "$p" = errors ]; then
    stop_holder || problems+=("the holder client (whose pointer errors used) did not end cleanly: $(tail -n 2 "$work/holder.err")")
  fi
  server_alive || problems+=("remote-gpud died: $(tail -n 5 "$work/server.log")")
  server_alive && { mem_back || problems+=("after the client: $mem_detail"); }
  report "$p" "${problems[@]}"
  [ ${#problems[@]} -eq 0 ] || show_files "$dir"
}

t_multi_client() {
  problems=()
  local progs=(copies streams threads graphs memsets) pids=() i
  for i in "${!progs[@]}"; do
    (
      problems=()
      run_program "${progs[$i]}" "$work/multi.$i"
      [ ${#problems[@]} -eq 0 ] || printf '%s\n' "${problems[@]}" >"$work/multi.$i.problems"
    ) &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}"
    if [ -s "$work/multi.$i.problems" ]; then
      problems+=("${progs[$i]}: $(paste -sd';' "$work/multi.$i.problems")")
      show_files "$work/multi.$i" >"$work/multi.$i.show"
    fi
  done
  server_alive || problems+=("remote-gpud died")
  server_alive && { mem_back || problems+=("after the clients: $mem_detail"); }
  report multi_client "${problems[@]}"
  cat "$work"/multi.*.show 2>/dev/null
  return 0
}

t_kill_mid_copy() {
  problems=()
  local round delay
  for round in 1 2; do
    delay=$([ $round = 1 ] && echo 0.3 || echo 1.1)
    local out=$work/copyloop.$round
    REMOTE_GPU=$srv_addr LD_PRELOAD=$preload RGTEST_FAKE=$fake_mode "$bin/copyloop" >"$out" 2>"$out.err" &
    local pid=$! n=300
    while [ $n -gt 0 ] && ! grep -q '^ready' "$out" 2>/dev/null && kill -0 $pid 2>/dev/null; do
      sleep 0.1
      n=$((n - 1))
    done
    if ! grep -q '^ready' "$out"; then
      problems+=("round $round: copyloop never got ready: $(tail -n 3 "$out.err")")
      kill -KILL $pid 2>/dev/null
      wait $pid 2>/dev/null
      continue
    fi
    sleep "$delay"
    kill -KILL $pid
    wait $pid 2>/dev/null
    server_alive || { problems+=("round $round: remote-gpud died"); break; }
    mem_back || problems+=("round $round: after SIGKILL: $mem_detail")
  done
  if server_alive; then
    run_program memsets "$work/after_kill"
  fi
  report kill_mid_copy "${problems[@]}"
  [ ${#problems[@]} -eq 0 ] || show_files "$work/after_kill"
}

t_garbage() {
  problems=()
  if [ "$transport" != tcp ]; then
    echo "SKIP: garbage writes to a tcp port (shm's ring parser: tests/unit/test_shm.c, tests/fuzz)"
    return 0
  fi
  "$here/garbage.sh" 127.0.0.1 "$srv_port" >"$work/garbage.log" 2>&1 ||
    problems+=("garbage.sh exit status $?: $(tail -n 3 "$work/garbage.log" | paste -sd';')")
  server_alive || problems+=("remote-gpud died: $(tail -n 5 "$work/server.log")")
  if server_alive; then
    mem_back || problems+=("$mem_detail")
    run_program memsets "$work/after_garbage"
  fi
  report garbage "${problems[@]}"
  [ ${#problems[@]} -eq 0 ] || show_files "$work/after_garbage"
}

# warm_store: NVIDIA's libraries register hundreds of images; with the server's
# store warm (a second run of the same program), no image bytes are sent but
# those of images the device refused (never stored: issue 24).
# peer_s2s: peer_copy on two servers of one fake device each. Direct: the
# servers copy to each other (each logs its peer listener; the client stages
# nothing). Fallback: the client reaches the second server through a
# forwarder on 127.0.0.2, so the first server, sent to 127.0.0.2 at the second
# one's peer port (listening on 127.0.0.1 only), cannot connect; the client
# stages (logged once), with the same bytes. Both servers end cleanly.
t_peer_s2s() {
  problems=()
  local dir=$work/peer_s2s fwd_pid fport a b
  mkdir -p "$dir"
  : >"$work/server.extra.log"
  { REMOTE_GPU_LOG=info start_extra 1 1 && REMOTE_GPU_LOG=info start_extra 1 2; } || problems+=("a server of one fake device did not start: $(tail -n 3 "$work/server.extra.log")")
  if [ ${#problems[@]} -eq 0 ]; then
    a=127.0.0.1:${extra_ports[0]} b=127.0.0.1:${extra_ports[1]}
    client_gpus=$a,$b expect_name=peer_copy run_program peer_copy "$dir/direct"
    grep -q "staged through the client" "$dir/direct/err" && problems+=("direct: the client staged a copy: $(grep -m1 staged "$dir/direct/err")")
    [ "$(grep -c 'peer copies: listening on' "$work/server.extra.log")" -ge 2 ] || problems+=("direct: a server logged no peer listener")
    python3 - "${extra_ports[1]}" "$dir/fport" <<'PY' &
import socket, sys, threading
srv = socket.create_server(("127.0.0.2", 0))
open(sys.argv[2], "w").write("%d\n" % srv.getsockname()[1])
def pipe(x, y):
    try:
        while (d := x.recv(1 << 16)):
            y.sendall(d)
    except OSError:
        pass
    for s in (x, y):
        try: s.shutdown(socket.SHUT_RDWR)
        except OSError: pass
while True:
    c, _ = srv.accept()
    u = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    for x, y in ((c, u), (u, c)):
        threading.Thread(target=pipe, args=(x, y), daemon=True).start()
PY
    fwd_pid=$!
    for _ in $(seq 50); do [ -s "$dir/fport" ] && break; sleep 0.1; done
    read -r fport <"$dir/fport"
    client_gpus=$a,127.0.0.2:$fport expect_name=peer_copy run_program peer_copy "$dir/staged"
    [ "$(grep -c 'staged through the client' "$dir/staged/err")" = 1 ] || problems+=("fallback: not one log line of the staged path")
    grep -q "peer copy: cannot reach tcp://127.0.0.2:" "$work/server.extra.log" || problems+=("fallback: the first server did not log why")
    kill "$fwd_pid" 2>/dev/null
    wait "$fwd_pid" 2>/dev/null
  fi
  stop_extra || problems+=("a server did not end cleanly: $(tail -n 3 "$work/server.extra.log")")
  report peer_s2s "${problems[@]}"
  [ ${#problems[@]} -eq 0 ] || show_files "$dir"
}

# skip_dead: REMOTE_GPU naming a port nobody listens on (127.0.0.1:1), or a
# server that refuses the session (another token), between two servers of two
# fake devices each: the entry is logged and skipped,
# multi_gpu's checks pass on the four devices left; every entry dead: the error
# as before (cudaErrorDevicesUnavailable, 46); REMOTE_GPU_STRICT=1 with one
# dead: the same error; CUDA_VISIBLE_DEVICES on top (ordinals, order, the list
# ending at an invalid entry, a UUID, empty); more devices than FE_MAX_DEVICES
# (16): an error (cudaErrorInvalidValue, 1), 16 exactly: all usable. The
# visible program checks that NVML lists what CUDA does.
t_skip_dead() {
  problems=()
  local dir=$work/skip_dead dead=127.0.0.1:1 a b r u=() got
  mkdir -p "$dir"
  { start_extra 2 1 && start_extra 2 2 && REMOTE_GPU_TOKEN=not-the-clients start_extra 1 3; } || problems+=("a server of two fake devices did not start: $(tail -n 3 "$work/server.extra.log")")
  # vis NAME GPUS [VAR=VALUE...]: the visible program; its stdout in NAME.out, its devices' UUIDs in $got
  vis() {
    local name=$1 gpus=$2
    shift 2
    (unset CUDA_VISIBLE_DEVICES REMOTE_GPU_STRICT REMOTE_GPU_TOKEN; [ $# -gt 0 ] && export "$@"; client_gpus=$gpus client "$bin/visible") \
      >"$dir/$name.out" 2>"$dir/$name.err"
    local rc=$?
    got=$(sed -n 's/^device [0-9]* //p' "$dir/$name.out" | tr '\n' ' ')
    return $rc
  }
  want() { # NAME RC FIRST-LINE [UUIDS]
    local rc=$?
    [ "$rc" = "$2" ] || problems+=("$1: exit status $rc, want $2: $(tail -n 2 "$dir/$1.err")")
    [ "$(head -n 1 "$dir/$1.out")" = "$3" ] || problems+=("$1: '$(head -n 1 "$dir/$1.out")', want '$3'")
    [ $# -lt 4 ] || [ "$got" = "$4" ] || problems+=("$1: devices '$got', want '$4'")
  }
  if [ ${#problems[@]} -eq 0 ]; then
    a=127.0.0.1:${extra_ports[0]} b=127.0.0.1:${extra_ports[1]} r=127.0.0.1:${extra_ports[2]}
    client_gpus=$a,$dead,$b expect_name=multi_gpu_mixed run_program multi_gpu "$dir/mixed"
    grep -q "cannot reach remote GPU at $dead: .*: entry skipped" "$dir/mixed/err" || problems+=("no log line names the skipped entry $dead")
    vis all "$a,$dead,$b"; want all 0 "count 4"
    read -r -a u <<<"$got"
    [ ${#u[@]} -eq 4 ] && [ "$(printf '%s\n' "${u[@]}" | sort -u | wc -l)" -eq 4 ] || problems+=("all: not four distinct devices: $got")
    vis dead "$dead,127.0.0.1:2"; want dead 3 "error 46"
    vis refused "$a,$r,$b"; want refused 0 "count 4" "${u[*]} "
    grep -q "REMOTE_GPU entry '$r' skipped" "$dir/refused.err" || problems+=("refused: no log line names the skipped entry $r")
    vis strict "$a,$dead,$b" REMOTE_GPU_STRICT=1; want strict 3 "error 46"
    vis strict0 "$a,$dead,$b" REMOTE_GPU_STRICT=0; want strict0 0 "count 4" "${u[*]} "
    vis cvd1 "$a,$dead,$b" CUDA_VISIBLE_DEVICES=1; want cvd1 0 "count 1" "${u[1]} "
    vis cvd10 "$a,$dead,$b" CUDA_VISIBLE_DEVICES=1,0; want cvd10 0 "count 2" "${u[1]} ${u[0]} "
    vis cvd091 "$a,$dead,$b" CUDA_VISIBLE_DEVICES=0,9,1; want cvd091 0 "count 1" "${u[0]} "
    vis cvd3u "$a,$dead,$b" "CUDA_VISIBLE_DEVICES=${u[3]},2"; want cvd3u 0 "count 2" "${u[3]} ${u[2]} "
    vis cvdnone "$a,$dead,$b" CUDA_VISIBLE_DEVICES=; want cvdnone 3 "error 100"
    vis sixteen "$a,$dead,$b,$a,$b,$a,$dead,$b,$a,$b"; want sixteen 0 "count 16"
    vis over "$a,$dead,$b,$a,$b,$a,$dead,$b,$a,$b,$a"; want over 3 "error 1"
    grep -q "FE_MAX_DEVICES" "$dir/over.err" || problems+=("over: no log line names the limit")
  fi
  stop_extra || problems+=("a server of two fake devices did not end cleanly: $(tail -n 3 "$work/server.extra.log")")
  report skip_dead "${problems[@]}"
  [ ${#problems[@]} -eq 0 ] || show_files "$dir"
}

# Two remote devices: two sessions on the one server, which NVML must count
# and describe as two devices, as CUDA does.
t_nvml_two() {
  problems=()
  client_gpus=$srv_addr,$srv_addr
  run_program nvml "$work/nvml_two" 2
  client_gpus=
  server_alive || problems+=("remote-gpud died: $(tail -n 5 "$work/server.log")")
  server_alive && { mem_back || problems+=("after the client: $mem_detail"); }
  report nvml_two "${problems[@]}"
  [ ${#problems[@]} -eq 0 ] || show_files "$work/nvml_two"
}

t_warm_store() {
  problems=()
  local d=$work/warm_store
  mkdir -p "$d"
  for i in 1 2; do
    REMOTE_GPU_LOG=info client "$bin/libhandles" >"$d/out.$i" 2>"$d/err.$i" ||
      problems+=("libhandles run $i: exit status $?")
  done
  local line
  line=$(grep 'kernel images:' "$d/err.2" | tail -n 1)
  [[ $line =~ kernel\ images:\ ([0-9]+)\ loaded,\ ([0-9]+)\ uploaded.*,\ ([0-9]+)\ of\ them\ refused ]] &&
    [ "${BASH_REMATCH[1]}" -gt 0 ] && [ "${BASH_REMATCH[2]}" = "${BASH_REMATCH[3]}" ] ||
    problems+=("second run: '${line:-no kernel images line}' (want images loaded, none uploaded but refused ones)")
  report warm_store "${problems[@]}"
  [ ${#problems[@]} -eq 0 ] || show_files "$d"
}

t_sigterm() {
  problems=()
  # A client still connected (holding memory) when the signal comes: the server
  # drains (--drain-seconds, default 30), so the client finishes its work (a
  # copy back and a free, after the signal) and then the server exits 0.
  start_holder || problems+=("the holder client did not start")
  kill -TERM "$srv_pid"
  sleep 0.2
  stop_holder || problems+=("the client live at SIGTERM could not finish during the drain: $(tail -n 2 "$work/holder.err")")
  if wait_pid "$srv_pid" 10; then
    [ "$wait_status" -eq 0 ] || problems+=("remote-gpud exit status $wait_status after SIGTERM")
  else
    problems+=("remote-gpud still running 10 s after SIGTERM and its last session's end")
    kill -KILL "$srv_pid" 2>/dev/null
  fi
  srv_pid=
  report sigterm "${problems[@]}"
  [ ${#problems[@]} -eq 0 ] || tail -n 10 "$work/server.log" | sed 's/^/  | /'
}

# ---- run ----------------------------------------------------------------------
echo "remote-gpud: $gpud"
echo "frontend:    $lib"
echo "driver:      $driver$([ $fake_mode = 1 ] && echo ' (test double)')"
echo "programs:    $bin"
start_server || { echo "0 passed, ${#tests[@]} failed"; exit 1; }
baseline=$(probe_free)
if [ -z "$baseline" ]; then
  echo "FAIL: the probe program gets no answer through the remote:"
  sed 's/^/  | /' "$work/probe.err" | tail -n 10
  tail -n 10 "$work/server.log" | sed 's/^/  | /'
  echo "0 passed, ${#tests[@]} failed"
  fail=1
  exit 1
fi
echo "server on $srv_addr, free memory baseline $baseline"

for t in "${tests[@]}"; do
  [ "$t" = sigterm ] && continue
  ensure_server || { report "$t" "remote-gpud could not be restarted"; continue; }
  case $t in
    multi_client) t_multi_client ;;
    kill_mid_copy) t_kill_mid_copy ;;
    garbage) t_garbage ;;
    warm_store) t_warm_store ;;
    nvml_two) t_nvml_two ;;
    multi_gpu_mixed) t_gpu2 multi_gpu 2 multi_gpu_mixed ;;
    nvml_multi) t_gpu2 nvml 1 nvml_multi 2 ;;
    skip_dead) t_skip_dead ;;
    peer_s2s) t_peer_s2s ;;
    *) if [[ $GPU2 == *" $t "* ]]; then t_gpu2 "$t" 1; else t_program "$t"; fi ;;
  esac
done
if [[ " ${tests[*]} " == *" sigterm "* ]]; then
  ensure_server && t_sigterm
fi

[ $fail -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
