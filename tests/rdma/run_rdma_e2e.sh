#!/usr/bin/env bash
# run_rdma_e2e.sh: the end-to-end path over rdma: CUDA test programs of
# tests/e2e, unmodified, with LD_PRELOAD=libremote.so REMOTE_GPU=rdma://IP:PORT,
# against remote-gpud --listen rdma://IP:0 on the driver test double. Needs an
# RDMA device with address IP (the Soft-RoCE guest: tests/rdma/guest.sh).
#
#   tests/rdma/run_rdma_e2e.sh --build DIR --ip IP [--only NAME[,NAME...]]
#
# Program tests (each: exit status 0, stdout less "expect" lines equal to
# tests/e2e/expected/NAME.out where it exists, the server's free memory back
# at its baseline afterwards): copies memsets streams threads args graphs
# pointers. Pinned copies go zero-copy (libremote.so registers cudaMallocHost
# memory with the connection), pageable ones through the bounce ring.
# server_zero_copy: after a copies run, the server's transport statistics (its
# log line at the connection's close) show payloads read straight into its
# registered staging buffers and results sent from them without a bounce copy.
# Every session runs in a process of its own (the supervisor sends each client
# to a session process's port, with a cookie): isolation checks that two clients
# at once are served by two processes other than the supervisor, and that a
# client going straight to one of those ports (no cookie) is refused while the
# session's own client carries on.
# spin_end: a session process busy polling for 30 s between requests
# (REMOTE_GPU_RDMA_SERVER_SPIN_US) still ends within 6 s of its client leaving:
# the spin looks at the rdma_cm channel.
# Fault tests: kill_client (a client SIGKILLed in the middle of 64 MiB copies:
# the server frees its session, others carry on), kill_server (the server, its
# session processes included, SIGKILLed while a client holds memory and waits:
# the client's next call fails within a bound, it does not hang).
#
# Exit status: 0 all passed, 1 some failed, 77 skipped. Last line "N passed, N failed".
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$root/build
ip=${RDMA_VM_IP:-}
only=
timeout_s=${RG_E2E_TIMEOUT:-300}
PROGRAMS=(copies memsets streams threads args graphs pointers)
SPECIAL=(server_zero_copy isolation spin_end kill_client kill_server)

while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --ip) ip=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "run_rdma_e2e: unknown argument $1" >&2; exit 2 ;;
  esac
done
skip() { echo "SKIP: $*"; echo "0 passed, 0 failed"; exit 77; }
[ -n "$ip" ] || skip "no RDMA address (--ip, or RDMA_VM_IP in the guest)"
gpud=$build/backend/remote-gpud
lib=$build/frontend/libremote.so
fake=$build/tests/fakecuda/libcuda.so.1
bin=$build/tests/e2e/bin
for f in "$gpud" "$lib" "$fake"; do [ -e "$f" ] || skip "$f not built"; done
for p in "${PROGRAMS[@]}" probe copyloop holder; do
  [ -x "$bin/$p" ] || skip "$bin/$p not built (needs nvcc at build time)"
done
if [ -n "$only" ]; then IFS=, read -r -a tests <<<"$only"; else tests=("${PROGRAMS[@]}" "${SPECIAL[@]}"); fi

work=$(mktemp -d "${TMPDIR:-/tmp}/rg-rdma-e2e.XXXXXX")
srv_pid=
pass=0
fail=0
cleanup() {
  [ -n "$srv_pid" ] && { kill -KILL "$srv_pid"; wait "$srv_pid"; } 2>/dev/null
  if [ "$fail" -gt 0 ]; then
    cp "$work/server.log" "$build/rdma-e2e-server.log" 2>/dev/null &&
      echo "--- whole server log: $build/rdma-e2e-server.log"
    echo "--- server log (last 30 lines):"; tail -n "${RG_E2E_LOG_LINES:-30}" "$work/server.log" 2>/dev/null | sed 's/^/  | /'
  fi
  rm -rf "$work"
}
trap cleanup EXIT

start_server() { # [VAR=VALUE...] for the server; sets srv_pid and port
  rm -f "$work/port"
  env "$@" REMOTE_GPU_LOG=warn,transport=debug FAKECUDA_LAUNCH_LOG=$work/launch.log "$gpud" --insecure --listen "rdma://$ip:0" --port-file "$work/port" \
    --driver "$fake" >>"$work/server.log" 2>&1 &
  srv_pid=$!
  local n=300
  while [ $n -gt 0 ]; do
    if [ -s "$work/port" ] && read -r port <"$work/port" && [[ $port =~ ^[0-9]+$ ]]; then return 0; fi
    kill -0 "$srv_pid" 2>/dev/null || break
    sleep 0.1; n=$((n - 1))
  done
  echo "remote-gpud did not start:"; tail -n 20 "$work/server.log" | sed 's/^/  | /'
  return 1
}

client() { REMOTE_GPU=rdma://$ip:$port LD_PRELOAD=$lib RGTEST_FAKE=1 timeout "$timeout_s" "$@"; }
probe_free() { client "$bin/probe" 2>>"$work/probe.err" | sed -n 's/^free=\([0-9]*\) .*/\1/p'; }
mem_back() {
  local f='' n=50
  while [ $n -gt 0 ]; do
    f=$(probe_free)
    [ -n "$f" ] && [ "$f" = "$baseline" ] && return 0
    sleep 0.2; n=$((n - 1))
  done
  echo "  server free memory $f, baseline $baseline"
  return 1
}
report() { # NAME OK [why]
  if [ "$2" = 0 ]; then echo "PASS $1 (${3:-})"; pass=$((pass + 1)); else echo "FAIL $1: ${3:-}"; fail=$((fail + 1)); fi
}

t_program() {
  local p=$1 d=$work/$1 why='' t0=$SECONDS
  mkdir -p "$d"
  client "$bin/$p" >"$d/out" 2>"$d/err"
  local rc=$?
  [ $rc -eq 0 ] || why="exit status $rc"
  if [ -z "$why" ] && [ -f "$root/tests/e2e/expected/$p.out" ]; then
    grep -v '^expect ' "$d/out" | diff -u "$root/tests/e2e/expected/$p.out" - >"$d/diff" || why="stdout differs"
  fi
  [ -z "$why" ] && { mem_back || why="memory not freed"; }
  report "$p" "$([ -z "$why" ] && echo 0 || echo 1)" "${why:-$((SECONDS - t0)) s}"
  if [ -n "$why" ]; then
    head -n 20 "$d/diff" 2>/dev/null | sed 's/^/  | /'
    tail -n 10 "$d/err" | sed 's/^/  | /'
  fi
}

t_server_zero_copy() {
  local why='' before after line direct zc
  before=$(grep -c 'rdma: .*: closed:' "$work/server.log")
  client "$bin/copies" >/dev/null 2>"$work/zc.err" || why="copies failed: $(tail -n 2 "$work/zc.err")"
  local n=50
  while [ $n -gt 0 ]; do
    after=$(grep -c 'rdma: .*: closed:' "$work/server.log")
    [ "$after" -gt "$before" ] && break
    sleep 0.1; n=$((n - 1))
  done
  line=$(grep 'rdma: .*: closed:' "$work/server.log" | tail -n 1)
  direct=$(sed -n 's/.*; \([0-9]*\) B read into registered memory.*/\1/p' <<<"$line")
  zc=$(sed -n 's/.* \([0-9]*\) B sent zero-copy.*/\1/p' <<<"$line")
  [ -z "$why" ] && [ "${after:-0}" -le "$before" ] && why="no close line from the server's transport"
  [ -z "$why" ] && [ "${direct:-0}" -gt 0 ] || why="${why:-no payload read into registered staging: $line}"
  [ -z "$why" ] && [ "${zc:-0}" -gt 0 ] || why="${why:-no result sent zero-copy: $line}"
  report server_zero_copy "$([ -z "$why" ] && echo 0 || echo 1)" "${why:-$direct B read into staging, $zc B sent from it}"
}

t_isolation() {
  local why='' fifo=$work/iso.fifo pids=() hp=() fds=()
  mkfifo "$fifo.1" "$fifo.2"
  for i in 1 2; do
    REMOTE_GPU=rdma://$ip:$port LD_PRELOAD=$lib RGTEST_FAKE=1 "$bin/holder" <"$fifo.$i" >"$work/iso.$i.out" 2>"$work/iso.$i.err" &
    hp+=($!)
    exec {fd}>"$fifo.$i"
    fds+=($fd)
  done
  local n=300
  while [ $n -gt 0 ] && ! { [ -s "$work/iso.1.out" ] && [ -s "$work/iso.2.out" ]; }; do sleep 0.1; n=$((n - 1)); done
  [ -s "$work/iso.1.out" ] && [ -s "$work/iso.2.out" ] || why="the two holders did not start"
  local kids sport
  kids=$(pgrep -P "$srv_pid" | wc -l)
  [ -z "$why" ] && [ "$kids" -ge 2 ] || why="${why:-$kids session processes for two clients}"
  sport=$(sed -n 's/.*: sent to port \([0-9]*\)$/\1/p' "$work/server.log" | tail -n 1)
  [ -n "$sport" ] || why="${why:-no 'sent to port' in the server log}"
  if [ -z "$why" ] && REMOTE_GPU=rdma://$ip:$sport LD_PRELOAD=$lib RGTEST_FAKE=1 timeout 60 "$bin/probe" \
    >"$work/iso.stranger.out" 2>&1; then
    why="a client without the cookie was served at session port $sport"
  fi
  for fd in "${fds[@]}"; do exec {fd}>&-; done
  for p in "${hp[@]}"; do wait "$p" || why="${why:-a holder failed}"; done
  [ -z "$why" ] && { mem_back || why="memory not freed"; }
  report isolation "$([ -z "$why" ] && echo 0 || echo 1)" "${why:-two clients, $kids session processes; a stranger at port $sport refused}"
}

t_spin_end() {
  local why='' main_pid=$srv_pid main_port=$port kids n=60
  if start_server REMOTE_GPU_RDMA_SERVER_SPIN_US=30000000; then
    client "$bin/probe" >/dev/null 2>"$work/spin.err" || why="probe failed: $(tail -n 2 "$work/spin.err")"
    while [ $n -gt 0 ] && pgrep -P "$srv_pid" >/dev/null; do sleep 0.1; n=$((n - 1)); done
    kids=$(pgrep -P "$srv_pid" | wc -l)
    [ -z "$why" ] && [ "$kids" -gt 0 ] && why="$kids session process(es) still there 6 s after the client left"
    kill -TERM "$srv_pid"; wait "$srv_pid" 2>/dev/null
  else
    why="the busy-polling server did not start"
    kill -KILL "$srv_pid" 2>/dev/null
  fi
  srv_pid=$main_pid port=$main_port
  report spin_end "$([ -z "$why" ] && echo 0 || echo 1)" "${why:-the session process ended with its client, inside a 30 s spin}"
}

t_kill_client() {
  local why=
  # not through client(): SIGKILL must reach the program, not `timeout`
  REMOTE_GPU=rdma://$ip:$port LD_PRELOAD=$lib RGTEST_FAKE=1 "$bin/copyloop" >"$work/cl.out" 2>"$work/cl.err" &
  local pid=$! n=600
  while [ $n -gt 0 ] && ! grep -q '^ready' "$work/cl.out" && kill -0 $pid 2>/dev/null; do sleep 0.1; n=$((n - 1)); done
  if grep -q '^ready' "$work/cl.out"; then
    sleep 1.5
    kill -KILL $pid; wait $pid 2>/dev/null
    kill -0 "$srv_pid" 2>/dev/null || why="remote-gpud died"
    [ -z "$why" ] && { mem_back || why="the killed client's session was not freed"; }
    [ -z "$why" ] && { client "$bin/memsets" >/dev/null 2>&1 || why="a client after the kill failed"; }
  else
    why="copyloop never got ready: $(tail -n 3 "$work/cl.err")"
    kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null
  fi
  report kill_client "$([ -z "$why" ] && echo 0 || echo 1)" "${why:-session freed, server fine}"
}

t_kill_server() {
  local why='' fifo=$work/holder.fifo
  mkfifo "$fifo"
  REMOTE_GPU=rdma://$ip:$port LD_PRELOAD=$lib RGTEST_FAKE=1 "$bin/holder" <"$fifo" >"$work/h.out" 2>"$work/h.err" &
  local hpid=$!
  exec {hfd}>"$fifo"
  local n=300
  while [ $n -gt 0 ] && ! [ -s "$work/h.out" ]; do sleep 0.1; n=$((n - 1)); done
  [ -s "$work/h.out" ] || why="holder did not start"
  # the whole server: the holder's session runs in a process of its own
  local kids
  kids=$(pgrep -P "$srv_pid")
  [ -n "$kids" ] || why="${why:-no session process under remote-gpud}"
  { kill -KILL $kids "$srv_pid"; wait "$srv_pid"; } 2>/dev/null; srv_pid=
  local t0=$SECONDS
  exec {hfd}>&- # the holder now frees its memory: that call must fail, not hang
  n=200
  while [ $n -gt 0 ] && kill -0 $hpid 2>/dev/null; do sleep 0.1; n=$((n - 1)); done
  if kill -0 $hpid 2>/dev/null; then
    why="the client still waits 20 s after the server died"
    kill -KILL $hpid
  fi
  wait $hpid 2>/dev/null
  grep -qi 'lost\|closed\|broken\|unavailable' "$work/h.err" || why="${why:-no error reported: $(tail -n 2 "$work/h.err")}"
  report kill_server "$([ -z "$why" ] && echo 0 || echo 1)" "${why:-client failed cleanly after $((SECONDS - t0)) s: $(grep -m1 -i 'lost\|closed\|broken' "$work/h.err" | cut -c1-120)}"
}

echo "remote-gpud: $gpud (rdma://$ip, driver test double)"
start_server || { echo "0 passed, 1 failed"; exit 1; }
baseline=$(probe_free)
if [ -z "$baseline" ]; then
  echo "FAIL: the probe gets no answer over rdma:"; tail -n 10 "$work/probe.err" | sed 's/^/  | /'
  fail=1; echo "0 passed, 1 failed"; exit 1
fi
for t in "${tests[@]}"; do
  case $t in
    server_zero_copy) t_server_zero_copy ;;
    isolation) t_isolation ;;
    spin_end) t_spin_end ;;
    kill_client) t_kill_client ;;
    kill_server) t_kill_server ;;
    *) t_program "$t" ;;
  esac
  if [ -z "$srv_pid" ] || ! kill -0 "$srv_pid" 2>/dev/null; then
    [ "$t" = kill_server ] || echo "(remote-gpud is gone: starting it again)"
    start_server && baseline=$(probe_free)
  fi
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
