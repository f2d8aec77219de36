#!/usr/bin/env bash
# tests/gpu/run.sh: the GPU suite, one script for the GPU machine (H100/H200,
# CUDA 13, nvcc; no network; libuv/msgpack/xxhash from .deps/, unpacked by
# tools/device-deps.sh and carried along).
#
#   tests/gpu/run.sh                 # from the repository root or anywhere
#
# 1. Builds the project (Release, -DCMAKE_PREFIX_PATH=<repo>/.deps/usr), and the
#    test programs (tests/e2e/*.cu) and examples (examples/cuda/*.cu) with nvcc.
# 2. Starts remote-gpud on the real GPU (default driver libcuda.so.1).
# 3. Runs every program twice: locally on the GPU (no preload), and through
#    libremote.so inside a private mount namespace in which every libcuda.so*,
#    libnvidia-ml.so* and /dev/nvidia* is hidden under /dev/null (checked: the
#    driver cannot be loaded there, and a program without libremote.so sees no
#    GPU). The remote output must equal the local one byte for byte, and the
#    server's free memory (cudaMemGetInfo through the remote) must be back at its
#    baseline after each client. Where tests/e2e/expected/<name>.out exists, the
#    local output must also equal it (those files are what CI expects).
# 4. Several clients at once, a client killed with SIGKILL mid-copy, garbage
#    bytes on the port, SIGTERM (exit 0). Where nvidia-smi shows 2 GPUs or
#    more: the programs tagged gpu2 (tests/e2e/multi_gpu.cu) against a server of
#    every GPU (--device all), remote equal to local, and on two servers of one
#    GPU each (their own checks pass). RG_SHM=1: pinned memory over shm (a
#    server with --shm-offer, the client moving there from 127.0.0.1; shared
#    regions registered with the real driver, copies equal to local).
# 5. Writes ${OUT:-tests/gpu/reports}/gpu-report.md (GPU, driver, commit, date,
#    per-program PASS/FAIL with diffs), gpu-run.log and gpu-details.tar.gz.
# 6. Runs bench/run-gpu.sh if present, in the time left, and copies what it adds
#    under bench/results/ next to the report.
#
# Environment: OUT (report folder), RG_BUILD_DIR (default <repo>/build-gpu),
# RG_COMMIT (commit to name when the tree has no .git), RG_PROGRAMS=0 (skip
# the programs and the server tests), RG_FRONTIER=1 (issue 18's programs,
# tests/gpu/frontier.py), RG_ZOO=1 (models a user brings: torchvision,
# transformers, mixed precision, torch.compile; tests/gpu/zoo.py, ~250 s), RG_TWO_TENANTS=1 (bench/two_tenants.sh: GPT-2
# generation and training as two tenants, and 10 GiB handed between them,
# into $OUT/two-tenants/; ~210 s; RG_TT_PARTS=prio: generation beside training
# under admission, MPS (--priority mps, mps+admit, mps with --batch-sm-percent 50)
# and no priority, ~150 s; RG_TT_PARTS=handover: the handover alone, ~60 s),
# RG_ONLY="a b" (of the programs, only
# these; the server tests still run, and those that compare with a program's
# local output fail without it: copies threads streams matmul reduction
# memsets), RG_LIBS=0 (skip the
# library checks and the ResNet-50 benchmark, torch_libs.sh), RG_BENCH=0 (skip
# bench/run-gpu.sh), RG_DEB=1 (the .debs unpacked here run the examples they
# ship: deb_examples.sh), RG_GPUD and
# RG_LIBREMOTE (use these binaries, skip the CMake build), RG_GPU_BUDGET_S
# (whole run including the benchmarks, default 470 s), RG_MEM_SLACK (bytes of
# free-memory difference tolerated after a client, default 0).
# Exit status: 0 when every check passed.
set -u -o pipefail

t0=$(date +%s)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
e2e=$root/tests/e2e
report_dir=${OUT:-$root/tests/gpu/reports}
B=${RG_BUILD_DIR:-$root/build-gpu}
budget=${RG_GPU_BUDGET_S:-470}
prog_timeout=${RG_GPU_PROG_TIMEOUT:-90}
slack=${RG_MEM_SLACK:-0}
mkdir -p "$report_dir"
report_dir=$(cd "$report_dir" && pwd)
work=$(mktemp -d /tmp/rg-gpu.XXXXXX)
log=$work/gpu-run.log
bin=$work/bin
mkdir -p "$bin" "$work/d"

# The lists are tests/e2e/programs.txt's (tags gpu, gpu-static, driver,
# faulting, helper, example).
source "$e2e/programs.sh"
E2E_PROGRAMS=($(rg_programs gpu '!helper' '!driver' '!faulting' '!example'))
EXAMPLES=($(rg_programs gpu example '!faulting'))
# Programs that end in a sticky error run last, each on a fresh server: on a GPU a
# sticky error may leave the whole server process unusable (see fault_isolation).
FAULTING=($(rg_programs gpu faulting))
HELPERS=($(rg_programs gpu helper))
# The programs again, built with nvcc's default static runtime (static_NAME): it
# reaches only the driver API, which libremote.so answers as libcuda.so.1. And
# the driver API test programs (tests/e2e/drv_*.cu), built the same way.
STATIC_PROGRAMS=($(rg_programs gpu-static))
DRV_PROGRAMS=($(rg_programs gpu driver))
# Programs that need two GPUs or more (tag gpu2): only where nvidia-smi shows
# that many, against a server of every GPU (--device all), and once more on two
# servers of one GPU each (devices of two servers: exit status only, since peer
# access differs from local there).
GPU2_PROGRAMS=($(rg_programs gpu2))
# Programs that print every device the host has (tag alldev): where nvidia-smi
# shows two GPUs or more, they run with the gpu2 programs against the server of
# every GPU (a server of one device would show fewer than the local run).
ALLDEV=($(rg_programs alldev))
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
alldev() { [ "${ngpus:-0}" -ge 2 ] && [[ " ${ALLDEV[*]} " == *" ${1#static_} "* ]]; }

note() { echo "$*" | tee -a "$log"; }
elapsed() { echo $(($(date +%s) - t0)); }
left() { echo $((budget - $(elapsed))); }

srv_pid=
cleanup() {
  if [ -n "$srv_pid" ] && kill -0 "$srv_pid" 2>/dev/null; then
    kill -TERM "$srv_pid"
    sleep 2
    kill -KILL "$srv_pid" 2>/dev/null
  fi
}
trap cleanup EXIT

wait_status=
wait_pid() { # PID SECONDS
  local pid=$1 n=$(($2 * 10))
  while kill -0 "$pid" 2>/dev/null && [ $n -gt 0 ]; do sleep 0.1; n=$((n - 1)); done
  kill -0 "$pid" 2>/dev/null && return 1
  wait "$pid" 2>/dev/null
  wait_status=$?
  return 0
}

# ---- machine -------------------------------------------------------------------
gpu_name=$(nvidia-smi -L 2>/dev/null | paste -sd';' -)
driver_ver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1)
nvcc=${RG_NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
nvcc_ver=$("$nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\), \(V[0-9.]*\).*/\1 (\2)/p')
commit=${RG_COMMIT:-$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)}
if [ -z "${RG_COMMIT:-}" ] && [ -n "$(git -C "$root" status --porcelain 2>/dev/null | head -n1)" ]; then
  commit="$commit (with uncommitted changes)"
fi
run_date=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
note "GPU suite: ${gpu_name:-no GPU found}; driver ${driver_ver:-?}; nvcc ${nvcc_ver:-?}; commit $commit"

# ---- build ---------------------------------------------------------------------
build_ok=1
build_note=
if [ -n "${RG_GPUD:-}" ]; then
  gpud=$RG_GPUD
  lib=${RG_LIBREMOTE:?RG_LIBREMOTE must be set with RG_GPUD}
  build_note="binaries given: $gpud, $lib"
else
  gpud=$B/backend/remote-gpud
  lib=$B/frontend/libremote.so
  [ -d "$root/.deps/usr" ] || note "warning: $root/.deps/usr missing (run tools/device-deps.sh where apt works, and carry .deps)"
  note "building the project in $B (Release)"
  if cmake -S "$root" -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$root/.deps/usr" \
       -DRG_BUILD_TESTS=OFF -DRG_WITH_RDMA=OFF >"$work/build.log" 2>&1 &&
     cmake --build "$B" -j "$(nproc)" >>"$work/build.log" 2>&1; then
    build_note="built in $(elapsed) s"
  else
    build_ok=0
    build_note="the CMake build FAILED (log below)"
  fi
fi
[ -x "$gpud" ] && [ -f "$lib" ] || { build_ok=0; build_note="$build_note; missing $([ -x "$gpud" ] || echo "$gpud ")$([ -f "$lib" ] || echo "$lib")"; }
note "build: $build_note"

note "compiling test programs and examples with $nvcc"
srcs=()
for p in "${E2E_PROGRAMS[@]}" "${HELPERS[@]}" "${FAULTING[@]}" "${EXAMPLES[@]}" "${GPU2_PROGRAMS[@]}"; do srcs+=("$(rg_program_src "$p")"); done
printf '%s\n' "${srcs[@]}" | xargs -P "$(nproc)" -I{} sh -c \
  'n=$(basename {} .cu); "$0" --nvcc "$1" -o "$2/$n" {} >"$2/$n.build.log" 2>&1 || echo "$n" >>"$2/build-failed"' \
  "$e2e/nvcc-build.sh" "$nvcc" "$bin"
srcs=()
for p in "${STATIC_PROGRAMS[@]}" "${DRV_PROGRAMS[@]}"; do srcs+=("$(rg_program_src "$p")"); done
printf '%s\n' "${srcs[@]}" | xargs -P "$(nproc)" -I{} sh -c \
  'n=$(basename {} .cu); case " $3 " in *" $n "*) o=$n ;; *) o=static_$n ;; esac
   "$0" --nvcc "$1" --static -o "$2/$o" {} >"$2/$o.build.log" 2>&1 || echo "$o" >>"$2/build-failed"' \
  "$e2e/nvcc-build.sh" "$nvcc" "$bin" "${DRV_PROGRAMS[*]}"
[ -s "$bin/build-failed" ] && note "nvcc failed for: $(paste -sd' ' "$bin/build-failed")"

# ---- the GPU-less namespace ---------------------------------------------------------
# $work/hidden-paths and $work/gpuless.sh (tests/gpu/gpuless.sh)
source "$here/gpuless.sh"
hidelist=$(rg_gpuless_setup "$work")
gpuless() { unshare -m --propagation private bash "$work/gpuless.sh" "$@"; }

gpuless_ok=0
gpuless_note=
if [ ! -x "$bin/devquery" ]; then
  gpuless_note="not checked: devquery did not build"
else
  # shellcheck disable=SC2016
  gpuless bash -c '
    fails=0
    python3 -c "import ctypes; ctypes.CDLL(\"libcuda.so.1\")" 2>/dev/null && { echo "libcuda.so.1 loads"; fails=1; }
    python3 -c "import ctypes; ctypes.CDLL(\"libnvidia-ml.so.1\")" 2>/dev/null && { echo "libnvidia-ml.so.1 loads"; fails=1; }
    if command -v nvidia-smi >/dev/null; then nvidia-smi -L >/dev/null 2>&1 && { echo "nvidia-smi works"; fails=1; }; fi
    "$1" >/dev/null 2>&1 && { echo "devquery without libremote.so sees a GPU"; fails=1; }
    exit $fails' _ "$bin/devquery" >"$work/gpuless-check" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    gpuless_ok=1
    gpuless_note="verified: libcuda.so.1 and libnvidia-ml.so.1 cannot be loaded, nvidia-smi fails, devquery without libremote.so fails; $(wc -l <"$hidelist") paths hidden"
  else
    gpuless_note="NOT GPU-less (rc $rc): $(paste -sd';' "$work/gpuless-check")"
  fi
fi
note "namespace: $gpuless_note"

# ---- server ------------------------------------------------------------------------
srv_port=
start_server() {
  local pf=$work/port
  rm -f "$pf"
  "$gpud" --listen 127.0.0.1:0 --port-file "$pf" >>"$work/server.log" 2>&1 &
  srv_pid=$!
  local n=150
  while [ $n -gt 0 ]; do
    if [ -s "$pf" ] && read -r srv_port <"$pf" && [[ $srv_port =~ ^[0-9]+$ ]]; then return 0; fi
    kill -0 "$srv_pid" 2>/dev/null || break
    sleep 0.1
    n=$((n - 1))
  done
  return 1
}
server_alive() { [ -n "$srv_pid" ] && kill -0 "$srv_pid" 2>/dev/null; }

# fresh_server: stop the running server (if any) and start a new one.
restarts=0
fresh_server() {
  if server_alive; then
    kill -TERM "$srv_pid"
    wait_pid "$srv_pid" 10 || kill -KILL "$srv_pid" 2>/dev/null
  fi
  srv_pid=
  echo "--- restart $(date +%T)" >>"$work/server.log"
  restarts=$((restarts + 1))
  start_server && baseline=$(probe_free) && [ -n "$baseline" ]
}
# healthy_server: a server that answers a new client, restarted if need be.
healthy_server() {
  server_alive && [ -n "$(probe_free)" ] && return 0
  note "(remote-gpud not serving: starting a fresh one)"
  fresh_server
}

# (the driver folder: programs with the static runtime or -lcuda find
# libremote.so as libcuda.so.1)
remote() { # PROG ARGS...: through libremote.so in the GPU-less namespace
  timeout "$prog_timeout" unshare -m --propagation private bash "$work/gpuless.sh" \
    env REMOTE_GPU=127.0.0.1:$srv_port LD_PRELOAD="$lib" LD_LIBRARY_PATH="$(dirname "$lib")/driver" "$@"
}
local_run() { timeout "$prog_timeout" "$@"; }

probe_free() { remote "$bin/probe" 2>>"$work/probe.err" | sed -n 's/^free=\([0-9]*\) .*/\1/p'; }
server_gpu_mem() { # the server's own usage as nvidia-smi sees it (MiB), for the report
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
    awk -F', *' -v p="$srv_pid" '$1 == p {print $2 " MiB"}'
}

mem_detail=
mem_back() {
  local f='' n=100 d
  while [ $n -gt 0 ]; do
    f=$(probe_free)
    if [ -n "$f" ]; then
      d=$((baseline - f))
      [ ${d#-} -le "$slack" ] && { mem_detail="back to baseline"; return 0; }
    fi
    sleep 0.1
    n=$((n - 1))
  done
  if [ -z "$f" ]; then
    mem_detail="probe got no answer"
  else
    mem_detail="$d bytes still held"
    baseline=$f # judge the next clients on their own
  fi
  return 1
}

holder_pid=
holder_fd=
holder_ptr=
start_holder() { # local|remote
  local fifo=$work/holder.fifo
  rm -f "$fifo" "$work/holder.out"
  mkfifo "$fifo"
  if [ "$1" = remote ]; then
    remote "$bin/holder" <"$fifo" >"$work/holder.out" 2>"$work/holder.err" &
  else
    local_run "$bin/holder" <"$fifo" >"$work/holder.out" 2>"$work/holder.err" &
  fi
  holder_pid=$!
  exec {holder_fd}>"$fifo"
  local n=150
  while [ $n -gt 0 ]; do
    holder_ptr=$(head -n1 "$work/holder.out" 2>/dev/null)
    [[ $holder_ptr =~ ^[0-9a-f]+$ ]] && return 0
    kill -0 "$holder_pid" 2>/dev/null || break
    sleep 0.1
    n=$((n - 1))
  done
  return 1
}
stop_holder() {
  [ -n "$holder_fd" ] && exec {holder_fd}>&-
  holder_fd=
  [ -n "$holder_pid" ] || return 0
  local pid=$holder_pid
  holder_pid=
  wait_pid "$pid" 20 || { kill -KILL "$pid" 2>/dev/null; return 1; }
  return "$wait_status"
}

server_ok=0
server_note=
if [ $build_ok = 1 ] && [ $gpuless_ok = 1 ]; then
  if start_server; then
    baseline=$(probe_free)
    if [ -n "$baseline" ]; then
      server_ok=1
      server_note="port $srv_port; free memory baseline $baseline bytes (server process on the GPU: $(server_gpu_mem))"
    else
      server_note="the probe gets no answer through the remote: $(tail -n 3 "$work/probe.err" | paste -sd';')"
    fi
  else
    server_note="remote-gpud did not start: $(tail -n 5 "$work/server.log" | paste -sd';')"
  fi
else
  server_note="not started ($([ $build_ok = 1 ] || echo 'build failed ')$([ $gpuless_ok = 1 ] || echo 'namespace not GPU-less'))"
fi
note "server: $server_note"

# ---- programs ------------------------------------------------------------------------
rows=()     # markdown table rows
fails=()    # names with details
npass=0
nfail=0

verdict() { # NAME PASS|FAIL
  if [ "$2" = PASS ]; then npass=$((npass + 1)); else nfail=$((nfail + 1)); fails+=("$1"); fi
}

run_pair() { # NAME [nomem]: local then remote; fills a table row
  local p=$1 d=$work/d/$1 args=() problems=() nomem=${2:-}
  mkdir -p "$d"
  if [ ! -x "$bin/$p" ]; then
    rows+=("| $p | - | - | - | - | - | FAIL (did not build) |")
    verdict "$p" FAIL
    cp "$bin/$p.build.log" "$d/build.log" 2>/dev/null
    return
  fi
  if [ "$(left)" -lt 60 ]; then
    rows+=("| $p | - | - | - | - | - | FAIL (not run: time budget) |")
    verdict "$p" FAIL
    return
  fi
  # local
  [ "$p" = errors ] && { start_holder local && args=("$holder_ptr") || problems+=("local holder did not start"); }
  local_run "$bin/$p" "${args[@]}" >"$d/local.out" 2>"$d/local.err"
  local lrc=$?
  [ "$p" = errors ] && { stop_holder || problems+=("local holder did not end cleanly"); }
  # The remote run is judged against the free memory just before it: a local
  # run may leave memory with the driver for good (measured: the local run of
  # `managed` leaves 116 MiB with nvidia-uvm after it exits; the remote run
  # of it gives everything back within 4 s).
  if [ -z "$nomem" ] && server_alive; then
    local b0 b1
    b0=$(probe_free); sleep 0.3; b1=$(probe_free)
    if [ -n "$b1" ] && [ "$b0" = "$b1" ] && [ "$b1" != "$baseline" ]; then
      note "$p: after the local run the GPU has $((baseline - b1)) bytes less free; the remote run is judged against that"
      baseline=$b1
    fi
  fi
  # remote
  local rrc=- same=- mem=- exp=n/a
  if [ $server_ok = 1 ]; then
    [ -n "$nomem" ] || healthy_server
    args=()
    [ "$p" = errors ] && { start_holder remote && args=("$holder_ptr") || problems+=("remote holder did not start"); }
    remote "$bin/$p" "${args[@]}" >"$d/remote.out" 2>"$d/remote.err"
    rrc=$?
    [ "$p" = errors ] && { stop_holder || problems+=("remote holder did not end cleanly"); }
    if cmp -s "$d/local.out" "$d/remote.out"; then same=yes; else same=NO; diff -u "$d/local.out" "$d/remote.out" >"$d/diff"; fi
    if [ -n "$nomem" ]; then
      mem="see fault_isolation"
    elif server_alive; then
      mem_back; mem=$mem_detail
      [ "$mem" = "back to baseline" ] || problems+=("server memory: $mem")
    else
      mem="server died"
      problems+=("remote-gpud died: $(tail -n 5 "$work/server.log" | paste -sd';')")
    fi
  else
    problems+=("remote not run: $server_note")
  fi
  # (gpu2 programs print the GPUs' names: their expected file is the double's)
  if [ -f "$e2e/expected/$p.out" ] && [[ " ${GPU2_PROGRAMS[*]} " != *" $p "* ]] && ! alldev "$p"; then
    # GPU-only lines (kernels the fake cannot run) are compared local vs remote only
    grep -v -e '^expect ' -e '^  echo: ok' -e '^gpu: ' "$d/local.out" >"$d/local.cmp"
    if diff -u "$e2e/expected/$p.out" "$d/local.cmp" >"$d/expected.diff"; then exp=yes; else exp=NO; problems+=("local output differs from tests/e2e/expected/$p.out"); fi
  fi
  [ "$lrc" = 0 ] || problems+=("local exit status $lrc")
  if [ "$rrc" != - ]; then
    [ "$rrc" = 0 ] || problems+=("remote exit status $rrc")
    [ "$same" = yes ] || problems+=("remote output differs from local")
  fi
  local v=PASS
  [ ${#problems[@]} -eq 0 ] || v=FAIL
  printf '%s\n' "${problems[@]}" >"$d/problems"
  rows+=("| $p | $lrc | $rrc | $same | $exp | $mem | $v |")
  verdict "$p" "$v"
  note "$v $p (local $lrc, remote $rrc, same $same, expected $exp, memory $mem)"
}

wanted() { [ -z "${RG_ONLY:-}" ] || [[ " $RG_ONLY " == *" $1 "* ]]; }
if [ "${RG_PROGRAMS:-1}" = 1 ]; then
  for p in "${E2E_PROGRAMS[@]}" "${EXAMPLES[@]}"; do wanted "$p" && ! alldev "$p" && run_pair "$p"; done
  for p in "${STATIC_PROGRAMS[@]}"; do wanted "static_$p" && ! alldev "$p" && run_pair "static_$p"; done
  for p in "${DRV_PROGRAMS[@]}"; do wanted "$p" && run_pair "$p"; done
fi

# ---- server tests ------------------------------------------------------------------------
srows=()
sverdict() { # NAME DETAIL PROBLEMS...
  local name=$1 detail=$2
  shift 2
  if [ $# -eq 0 ]; then
    srows+=("| $name | PASS | $detail |")
    verdict "$name" PASS
  else
    local joined
    joined=$(printf '%s; ' "$@")
    srows+=("| $name | FAIL | $detail: ${joined%; } |")
    verdict "$name" FAIL
    printf '%s\n' "$@" >"$work/d/$name.problems"
  fi
  note "$([ $# -eq 0 ] && echo PASS || echo FAIL) $name"
}

# ---- programs that need two GPUs (gpu2) ---------------------------------------------
# start_gpud ARGS...: another server on this machine's GPUs; its port in
# $gpud_port, its pid appended to gpud_extra.
gpud_extra=()
gpud_port=
start_gpud() {
  local pf=$work/port.extra.${#gpud_extra[@]}
  rm -f "$pf"
  "$gpud" --listen 127.0.0.1:0 --port-file "$pf" "$@" >>"$work/server.extra.log" 2>&1 &
  gpud_extra+=($!)
  local n=150
  while [ $n -gt 0 ]; do
    if [ -s "$pf" ] && read -r gpud_port <"$pf" && [[ $gpud_port =~ ^[0-9]+$ ]]; then return 0; fi
    sleep 0.1
    n=$((n - 1))
  done
  return 1
}
stop_gpud() { # 0 if every extra server exited 0 on SIGTERM
  local pid rc=0
  for pid in "${gpud_extra[@]}"; do
    kill -TERM "$pid" 2>/dev/null
    if wait_pid "$pid" 15; then [ "$wait_status" = 0 ] || rc=1; else kill -KILL "$pid" 2>/dev/null; rc=1; fi
  done
  gpud_extra=()
  return $rc
}
gpu2_run=()
if [ "${RG_PROGRAMS:-1}" = 1 ] && [ ${#GPU2_PROGRAMS[@]} -gt 0 ]; then
  for p in "${GPU2_PROGRAMS[@]}"; do wanted "$p" && gpu2_run+=("$p"); done
fi
if [ "${RG_PROGRAMS:-1}" = 1 ] && [ "${ngpus:-0}" -ge 2 ]; then
  for p in "${ALLDEV[@]}"; do
    wanted "$p" && gpu2_run+=("$p")
    [[ " ${STATIC_PROGRAMS[*]} " == *" $p "* ]] && wanted "static_$p" && gpu2_run+=("static_$p")
  done
fi
if [ ${#gpu2_run[@]} -gt 0 ] && [ "${ngpus:-0}" -lt 2 ]; then
  note "gpu2 programs not run (${gpu2_run[*]}): nvidia-smi shows ${ngpus:-0} GPU(s), they need 2 or more"
elif [ ${#gpu2_run[@]} -gt 0 ] && [ $server_ok = 1 ]; then
  # one server of every GPU: remote equals local byte for byte (the program
  # checks each device's memory itself: nomem)
  if start_gpud --device all; then
    main_port=$srv_port
    srv_port=$gpud_port
    for p in "${gpu2_run[@]}"; do run_pair "$p" nomem; done
    srv_port=$main_port
  else
    for p in "${gpu2_run[@]}"; do sverdict "$p" "a server of --device all" "did not start: $(tail -n 3 "$work/server.extra.log" | paste -sd';')"; done
  fi
  problems=()
  stop_gpud || problems+=("the --device all server did not exit 0 on SIGTERM")
  sverdict gpu2_server_exit "the --device all server ends cleanly" "${problems[@]}"
  # two servers of one GPU each: the devices of two servers (copies through
  # the client); the program must pass its own checks
  for p in "${gpu2_run[@]}"; do
    [[ " ${GPU2_PROGRAMS[*]} " == *" $p "* ]] || continue
    problems=()
    if start_gpud --device 0 && a=$gpud_port && start_gpud --device 1 && b=$gpud_port; then
      d=$work/d/$p.two_servers
      mkdir -p "$d"
      timeout "$prog_timeout" unshare -m --propagation private bash "$work/gpuless.sh" \
        env REMOTE_GPU=127.0.0.1:$a,127.0.0.1:$b LD_PRELOAD="$lib" LD_LIBRARY_PATH="$(dirname "$lib")/driver" \
        "$bin/$p" >"$d/remote.out" 2>"$d/remote.err" || problems+=("exit status $?: $(grep -v '^\[' "$d/remote.err" | tail -n 3 | paste -sd';')")
    else
      problems+=("the servers of --device 0 and --device 1 did not start")
    fi
    stop_gpud || problems+=("a server did not exit 0 on SIGTERM")
    sverdict "${p}_two_servers" "devices 0 and 1 on two servers: every copy and check of the program passes" "${problems[@]}"
  done
fi


if [ "${RG_PROGRAMS:-1}" = 0 ]; then
  note "programs and server tests skipped (RG_PROGRAMS=0)"
elif [ $server_ok = 1 ] && [ "$(left)" -gt 60 ]; then
  # several clients at once, each compared with its own local output
  problems=()
  multi=(copies threads streams matmul reduction)
  pids=()
  for p in "${multi[@]}"; do
    remote "$bin/$p" >"$work/d/multi.$p.out" 2>"$work/d/multi.$p.err" &
    pids+=($!)
  done
  for i in "${!multi[@]}"; do
    wait "${pids[$i]}"
    rc=$?
    p=${multi[$i]}
    [ $rc -eq 0 ] || problems+=("$p exit status $rc")
    cmp -s "$work/d/$p/local.out" "$work/d/multi.$p.out" || problems+=("$p output differs from local")
  done
  if server_alive; then mem_back || problems+=("server memory: $mem_detail"); else problems+=("remote-gpud died"); fi
  sverdict multi_client "${multi[*]} at once, each equal to its local run" "${problems[@]}"

  # a client killed with SIGKILL in the middle of 64 MiB copies
  healthy_server
  problems=()
  timeout 120 unshare -m --propagation private bash "$work/gpuless.sh" \
    env REMOTE_GPU=127.0.0.1:$srv_port LD_PRELOAD="$lib" "$bin/copyloop" >"$work/d/copyloop.out" 2>"$work/d/copyloop.err" &
  pid=$!
  n=300
  while [ $n -gt 0 ] && ! grep -q '^ready' "$work/d/copyloop.out" && kill -0 $pid 2>/dev/null; do sleep 0.1; n=$((n - 1)); done
  if grep -q '^ready' "$work/d/copyloop.out"; then
    sleep 0.5
    # timeout -> unshare (exec'd: bash, env, copyloop): the program is the child of timeout
    pkill_target=$(pgrep -P $pid | head -n1)
    kill -KILL "${pkill_target:-$pid}" 2>/dev/null
    wait $pid 2>/dev/null
    server_alive || problems+=("remote-gpud died")
    server_alive && { mem_back || problems+=("after SIGKILL: $mem_detail"); }
    server_alive && { remote "$bin/memsets" >"$work/d/after-kill.out" 2>&1 && cmp -s "$work/d/after-kill.out" "$work/d/memsets/local.out" || problems+=("memsets after the kill failed or differs"); }
  else
    problems+=("copyloop never got ready: $(tail -n 3 "$work/d/copyloop.err" | paste -sd';')")
    kill -KILL $pid 2>/dev/null
  fi
  sverdict kill_mid_copy "SIGKILL during 64 MiB copies; memory back to baseline; server still serves" "${problems[@]}"

  # RG_SHM=1: pinned memory over shm on the real driver (shared regions the
  # server registers with cuMemHostRegister), reached the way a program on
  # this host is: 127.0.0.1 with --shm-offer, moved to the socket by itself; every pinned copy a
  # region copy (REMOTE_GPU_REGION_SYNC_MIN=0: small synchronous ones to the
  # device would go as bytes in frames), synchronous ones answered once done
  if [ "${RG_SHM:-0}" = 1 ] && [ -x "$bin/pinned_shm" ]; then
    problems=()
    rm -f "$work/shm-port"
    REMOTE_GPU_LOG=warn,backend=info,transport=info "$gpud" --listen 127.0.0.1:0 --port-file "$work/shm-port" \
      --shm-offer "$work/shm.sock" >"$work/d/shm-server.log" 2>&1 &
    shm_pid=$!
    for _ in $(seq 150); do [ -s "$work/shm-port" ] && break; sleep 0.1; done
    shm_port=$(cat "$work/shm-port" 2>/dev/null)
    local_run "$bin/pinned_shm" copies >"$work/d/pinned_shm.local" 2>&1 || problems+=("local run failed")
    timeout "$prog_timeout" unshare -m --propagation private bash "$work/gpuless.sh" \
      env REMOTE_GPU=127.0.0.1:$shm_port REMOTE_GPU_LOG=info REMOTE_GPU_REGION_SYNC_MIN=0 LD_PRELOAD="$lib" "$bin/pinned_shm" copies \
      >"$work/d/pinned_shm.remote" 2>"$work/d/pinned_shm.err" || problems+=("remote run exit status $?")
    cmp -s "$work/d/pinned_shm.local" "$work/d/pinned_shm.remote" || problems+=("output differs from local")
    grep -q "moved to shm://" "$work/d/pinned_shm.err" || problems+=("the client did not move to shm")
    kill -TERM "$shm_pid" 2>/dev/null
    wait_pid "$shm_pid" 10 || kill -KILL "$shm_pid" 2>/dev/null
    zc=$(grep -h "shared regions:" "$work/d/shm-server.log" | tail -n 1 | sed 's/.*shared regions: //')
    [[ $zc =~ ^([0-9]+)\ added\ \(([0-9]+)\ registered\),\ ([0-9]+)\ copies ]] &&
      [ "${BASH_REMATCH[1]}" -gt 0 ] && [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ] && [ "${BASH_REMATCH[3]}" -ge 200 ] ||
      problems+=("shared regions: ${zc:-none}")
    sverdict shm_pinned "127.0.0.1 moved to --shm-offer's socket; pinned copies 1 B-16 MiB equal to local, registered and zero-copy (${zc:-?})" "${problems[@]}"
  fi

  # garbage on the port
  healthy_server
  problems=()
  "$e2e/garbage.sh" 127.0.0.1 "$srv_port" >"$work/d/garbage.log" 2>&1 ||
    problems+=("garbage.sh exit status $?: $(tail -n 3 "$work/d/garbage.log" | paste -sd';')")
  server_alive || problems+=("remote-gpud died")
  server_alive && { mem_back || problems+=("$mem_detail"); }
  server_alive && { remote "$bin/memsets" >"$work/d/after-garbage.out" 2>&1 && cmp -s "$work/d/after-garbage.out" "$work/d/memsets/local.out" || problems+=("memsets after the garbage failed or differs"); }
  sverdict garbage "malformed frames, hostile lengths, truncated input; server keeps serving" "${problems[@]}"

  # Programs ending in a sticky error, each on a fresh server. Afterwards a new
  # client must still work and the memory be back: one tenant's fault must not
  # take the server from the others.
  for p in "${FAULTING[@]}"; do
    fresh_server || note "(fresh server for $p did not start)"
    run_pair "$p" nomem
    problems=()
    if ! server_alive; then
      problems+=("remote-gpud died after $p")
    else
      mem_back || problems+=("after $p, a new client: $mem_detail")
      if [ "$mem_detail" = "probe got no answer" ]; then
        problems+=("server log: $(grep -v '^---' "$work/server.log" | tail -n 2 | cut -c1-200 | paste -sd';')")
      fi
    fi
    sverdict "fault_isolation_$p" "a new client works and memory is back after $p's sticky error" "${problems[@]}"
  done

  # A fresh allocation shows nothing another client left: a writer fills 2 GiB
  # with a pattern and frees it, then a reader allocates 2 GiB; once after the
  # writer ended, once while it is still connected. Process isolation (this
  # server) and thread isolation (a second server, one process for all
  # sessions); the local driver alone as the reference.
  fresh_memory() { # PORT LABEL
    local port=$1 label=$2 out
    for how in ended connected; do
      if [ $how = ended ]; then
        timeout 60 unshare -m --propagation private bash "$work/gpuless.sh" \
          env REMOTE_GPU=127.0.0.1:$port LD_PRELOAD="$lib" "$bin/leftover" write 2048 >/dev/null 2>&1
      else
        coproc W { timeout 60 unshare -m --propagation private bash "$work/gpuless.sh" \
          env REMOTE_GPU=127.0.0.1:$port LD_PRELOAD="$lib" "$bin/leftover" write 2048 hold 2>/dev/null; }
        read -r -t 30 _ <&"${W[0]}"
      fi
      out=$(timeout 60 unshare -m --propagation private bash "$work/gpuless.sh" \
        env REMOTE_GPU=127.0.0.1:$port LD_PRELOAD="$lib" "$bin/leftover" read 2048 2>&1 | tail -n1)
      [ $how = connected ] && { eval "exec ${W[1]}>&-"; wait "$W_PID" 2>/dev/null; }
      note "fresh_memory $label, writer $how: $out"
      [[ "$out" == "pattern words 0 of "* ]] || problems+=("$label, writer $how: reader saw $out")
    done
  }
  problems=()
  "$bin/leftover" write 2048 >/dev/null 2>&1
  note "fresh_memory local driver, writer ended: $("$bin/leftover" read 2048 2>&1 | tail -n1)"
  fresh_memory "$srv_port" "process isolation"
  tpf=$work/thread.port
  "$gpud" --listen 127.0.0.1:0 --port-file "$tpf" --isolation thread >>"$work/server-thread.log" 2>&1 &
  tpid=$!
  for _ in $(seq 100); do [ -s "$tpf" ] && break; sleep 0.1; done
  if [ -s "$tpf" ]; then
    fresh_memory "$(cat "$tpf")" "thread isolation"
  else
    problems+=("the thread-isolation server did not start")
  fi
  kill -TERM $tpid 2>/dev/null
  wait $tpid 2>/dev/null
  sverdict fresh_memory "a 2 GiB allocation shows none of the pattern another client wrote and freed" "${problems[@]}"

  # SIGTERM with a client connected
  healthy_server || note "(no healthy server for the SIGTERM test)"
  problems=()
  start_holder remote || problems+=("holder did not start")
  kill -TERM "$srv_pid"
  sleep 1
  kill -0 "$srv_pid" 2>/dev/null || problems+=("ended at SIGTERM with a client live: no drain")
  # the holder, served through the drain, checks its memory and frees it
  stop_holder >/dev/null 2>&1 || problems+=("the client failed during the drain (exit $wait_status)")
  if wait_pid "$srv_pid" 10; then
    [ "$wait_status" -eq 0 ] || problems+=("exit status $wait_status")
  else
    problems+=("still running 10 s after its last client ended")
    kill -KILL "$srv_pid"
  fi
  srv_pid=
  sverdict sigterm "SIGTERM with a client connected: served until it ended, then exit 0" "${problems[@]}"
else
  for p in "${FAULTING[@]}"; do run_pair "$p" nomem; done
  for t in multi_client kill_mid_copy garbage fault_isolation_sticky fault_isolation_fault fresh_memory sigterm; do
    sverdict $t "not run" "server not available or out of time"
  done
fi

# ---- report ------------------------------------------------------------------------
rep=$report_dir/gpu-report.md
{
  echo "# remote-gpu GPU suite"
  echo
  echo "| | |"
  echo "|---|---|"
  echo "| date | $run_date |"
  echo "| GPU | ${gpu_name:-none found} |"
  echo "| driver | ${driver_ver:-?} |"
  echo "| CUDA (nvcc) | ${nvcc_ver:-?} |"
  echo "| commit | $commit |"
  echo "| host | $(hostname), kernel $(uname -r) |"
  echo "| build | $build_note |"
  echo "| GPU-less namespace | $gpuless_note |"
  echo "| server | $server_note; restarted $restarts time(s) |"
  echo "| result | **$npass passed, $nfail failed** in $(elapsed) s |"
  echo
  echo "Each program runs locally on the GPU and remotely (libremote.so, GPU-less mount"
  echo "namespace, remote-gpud on the same GPU). *remote = local*: stdout byte for byte."
  echo "*= CI expected*: the local output equals tests/e2e/expected/NAME.out (what CI"
  echo "checks against the driver test double). *server memory*: free memory through the"
  echo "remote back at its baseline after the client ended."
  echo
  echo "## Programs"
  echo
  echo "| program | local exit | remote exit | remote = local | = CI expected | server memory | result |"
  echo "|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "## Server"
  echo
  echo "| test | result | detail |"
  echo "|---|---|---|"
  printf '%s\n' "${srows[@]}"
  if [ ${#fails[@]} -gt 0 ]; then
    echo
    echo "## Failures"
    for f in "${fails[@]}"; do
      d=$work/d/$f
      echo
      echo "### $f"
      echo
      [ -s "$d/problems" ] && sed 's/^/- /' "$d/problems"
      [ -s "$work/d/$f.problems" ] && sed 's/^/- /' "$work/d/$f.problems"
      for x in diff expected.diff; do
        if [ -s "$d/$x" ]; then
          echo
          [ $x = diff ] && echo "local vs remote stdout:" || echo "expected vs local stdout:"
          echo '```diff'
          head -n 60 "$d/$x"
          echo '```'
        fi
      done
      for x in local.err remote.err build.log; do
        if [ -s "$d/$x" ]; then
          echo
          echo "$x (last lines):"
          echo '```'
          tail -n 15 "$d/$x" | cut -c1-300
          echo '```'
        fi
      done
    done
  fi
  if [ $build_ok = 0 ] && [ -s "$work/build.log" ]; then
    echo
    echo "## Build log (last lines)"
    echo '```'
    tail -n 40 "$work/build.log"
    echo '```'
  fi
  echo
  echo "## Hidden in the namespace"
  echo
  sed 's/^/- `/; s/$/`/' "$hidelist"
} >"$rep"
note "report: $rep ($npass passed, $nfail failed)"

# ---- PyTorch: a first look (issue 4) ------------------------------------------------
# Stock torch locally and through libremote.so; what the remote run asked for that
# is not forwarded yet shows in its log ("not supported" lines).
if [ "${RG_TORCH:-1}" = 1 ] && [ -f "$here/torch_probe.py" ] && python3 -c 'import torch' 2>/dev/null &&
   [ "$(left)" -gt 120 ]; then
  healthy_server
  note "torch probe: local"
  timeout 150 python3 "$here/torch_probe.py" >"$work/d/torch.local" 2>&1
  note "torch probe: remote"
  timeout 200 unshare -m --propagation private bash "$work/gpuless.sh" \
    env REMOTE_GPU=127.0.0.1:$srv_port LD_PRELOAD="$lib" REMOTE_GPU_LOG=info PYTHONUNBUFFERED=1 \
    python3 "$here/torch_probe.py" >"$work/d/torch.remote" 2>"$work/d/torch.remote.err"
  trc=$?
  {
    echo -e "\n## PyTorch probe (tests/gpu/torch_probe.py)\n"
    echo "remote exit status $trc"
    echo -e "\nlocal:\n\`\`\`"; cat "$work/d/torch.local"; echo '```'
    echo -e "\nremote:\n\`\`\`"; cat "$work/d/torch.remote"; echo '```'
    echo -e "\nremote log (warnings and errors, deduplicated):\n\`\`\`"
    grep -E 'warn|error' "$work/d/torch.remote.err" | sed 's/^\[[^]]*\] //' | sort | uniq -c | sort -rn | head -60
    echo '```'
  } >>"$rep"
  cp "$work/d/torch.remote.err" "$report_dir/torch-remote.log" 2>/dev/null
fi

# ---- issue 21: the .debs unpacked on this machine run the examples they ship --------
if [ "${RG_DEB:-0}" = 1 ] && [ "$(left)" -gt 60 ]; then
  note "packages: cpack, dpkg -x, the shipped examples through the unpacked tools"
  # (after the report's totals: a failure shows in its section and the exit status)
  if bash "$here/deb_examples.sh" "$B" "unshare -m --propagation private bash $work/gpuless.sh" "$rep"; then
    note "PASS deb_examples"
  else
    nfail=$((nfail + 1)); note "FAIL deb_examples (gpu-report.md, packages section)"
  fi
fi

# ---- issue 21: the launcher (remote-gpu info, doctor, run) against the real GPU ------
if [ "${RG_LAUNCHER:-0}" = 1 ] && [ -x "$B/launcher/remote-gpu" ] && [ "$(left)" -gt 60 ]; then
  healthy_server
  note "launcher: remote-gpu info, doctor, run"
  rgl=$B/launcher/remote-gpu
  {
    echo -e "\n## remote-gpu (launcher/), GPU-less client\n\n\`\`\`"
    # launcher SUBCOMMAND [-- COMMAND...]: remote-gpu in the GPU-less namespace
    launcher() {
      local sub=$1; shift
      echo "\$ remote-gpu $sub --server 127.0.0.1:PORT $*"
      timeout 60 unshare -m --propagation private bash "$work/gpuless.sh" "$rgl" "$sub" \
        --server 127.0.0.1:$srv_port "$@" 2>&1 | head -n 40
      echo "exit status ${PIPESTATUS[0]}"
    }
    launcher info
    launcher doctor -- "$bin/devquery"
    launcher doctor -- "$bin/static_devquery"
    launcher doctor -- python3
    launcher run -- "$bin/devquery"
    if python3 -c 'import torch' 2>/dev/null; then
      echo "\$ remote-gpu run --server 127.0.0.1:PORT -- python3 -c 'torch.cuda...'"
      timeout 120 unshare -m --propagation private bash "$work/gpuless.sh" "$rgl" run --server 127.0.0.1:$srv_port \
        -- python3 -c 'import torch; print(torch.cuda.device_count(), torch.cuda.get_device_name(0), (torch.ones(4, device="cuda") * 2).sum().item())' 2>&1 | tail -n 5
    fi
    echo '```'
  } >>"$rep"
fi

# ---- issue 3: startup with a preloaded cubin store; issue 4: the examples ----------
if [ "${RG_STARTUP:-1}" = 1 ] && [ -x "$root/bench/cubin-startup.sh" ] && [ "$(left)" -gt 150 ]; then
  note "cubin store startup benchmark"
  OUT=$report_dir timeout 200 bash "$root/bench/cubin-startup.sh" "$B" "unshare -m --propagation private bash $work/gpuless.sh" \
    >"$work/startup.log" 2>&1 || note "cubin-startup.sh: exit $?"
fi
if [ -n "${RG_EXAMPLES:-}" ] && [ "$(left)" -gt 120 ]; then
  healthy_server
  note "torch examples: $RG_EXAMPLES (${RG_EXAMPLE_STEPS:-50} steps)"
  OUT=$report_dir RG_PROBE=$bin/probe timeout $(( $(left) - 30 )) bash "$here/torch_examples.sh" "$B" \
    "unshare -m --propagation private bash $work/gpuless.sh" "$srv_port" "${RG_EXAMPLE_STEPS:-50}" $RG_EXAMPLES \
    >"$work/examples.log" 2>&1 || note "torch_examples.sh: exit $?"
fi

# ---- issue 18's programs (torch.compile, graphs, CuPy, JAX, NVML, printf): where they stand
if [ "${RG_FRONTIER:-0}" = 1 ] && [ "$(left)" -gt 120 ]; then
  healthy_server
  note "frontier: issue 18's programs"
  # where the host has several GPUs the local runs see them all (NVML's count
  # among them): the remote runs get a server of every GPU
  fport=$srv_port
  if [ "${ngpus:-0}" -ge 2 ]; then start_gpud --device all && fport=$gpud_port; fi
  timeout $(( $(left) - 30 )) python3 "$here/frontier.py" "unshare -m --propagation private bash $work/gpuless.sh" \
    "$fport" "$lib" "$report_dir/frontier.md" >"$work/frontier.log" 2>&1 || note "frontier.py: exit $?"
  stop_gpud || note "frontier: the --device all server did not exit 0 on SIGTERM"
  grep '^frontier:' "$work/frontier.log" | tee -a "$log"
fi

# ---- models a user brings (torchvision, transformers, AMP, compile): tests/gpu/zoo.py
if [ "${RG_ZOO:-0}" = 1 ] && [ "$(left)" -gt 120 ]; then
  healthy_server
  note "zoo: models a user brings"
  timeout $(( $(left) - 30 )) python3 "$here/zoo.py" "unshare -m --propagation private bash $work/gpuless.sh" \
    "$srv_port" "$lib" "$report_dir/zoo.md" >"$work/zoo.log" 2>&1 || note "zoo.py: exit $?"
  grep '^zoo:' "$work/zoo.log" | tee -a "$log"
fi

# ---- two tenants: generation (latency) beside training (batch), issue 22 -------------
if [ "${RG_TWO_TENANTS:-0}" = 1 ] && [ $build_ok = 1 ] && python3 -c 'import torch' 2>/dev/null &&
   [ "$(left)" -gt 120 ]; then
  note "two tenants: bench/two_tenants.sh (servers of their own)"
  OUT=$report_dir/two-tenants RG_GPUD=$gpud RG_LIBREMOTE=$lib RG_COMMIT="$commit" \
    RG_GPULESS="unshare -m --propagation private bash $work/gpuless.sh" \
    timeout $(( $(left) - 30 )) bash "$root/bench/two_tenants.sh" >"$work/two-tenants.log" 2>&1 ||
    note "two_tenants.sh: exit $?"
  note "$(grep -E '^(two-tenants|handover):' "$work/two-tenants.log" | paste -sd';')"
fi

# ---- the libraries torch reaches through the driver API, and ResNet-50 ---------------
if [ "${RG_LIBS:-1}" = 1 ] && python3 -c 'import torch, torchvision' 2>/dev/null && [ "$(left)" -gt 120 ]; then
  healthy_server
  OUT=$report_dir RG_PROBE=$bin/probe RG_LIB=$lib RG_BENCH_STEPS=${RG_RESNET_STEPS:-20} \
    timeout $(( $(left) - 30 )) bash "$here/torch_libs.sh" "unshare -m --propagation private bash $work/gpuless.sh" \
    "$srv_port" >"$work/libs.log" 2>&1 || note "torch_libs.sh: exit $?"
  note "libraries: $(tail -n 1 "$work/libs.log")"
fi

# ---- benchmarks -----------------------------------------------------------------------
if [ "${RG_BENCH:-1}" = 1 ] && [ -f "$root/bench/run-gpu.sh" ]; then
  cleanup
  srv_pid=
  bl=$(($(left) - 10))
  if [ $bl -gt 20 ]; then
    note "running bench/run-gpu.sh (up to $bl s)"
    marker=$work/bench-start
    touch "$marker"
    # its own files go to a folder of ours; its report (.md, .json) next to ours,
    # the rest in one archive (the device tool brings back at most 8 files)
    mkdir -p "$work/bench"
    (cd "$root" && RG_BUILD=$B OUT=$work/bench timeout "$bl" bash bench/run-gpu.sh) \
      >"$report_dir/bench-run.log" 2>&1
    brc=$?
    # anything it put under bench/results/ instead of $OUT counts too
    find "$root/bench/results" -type f -newer "$marker" -exec cp {} "$work/bench/" \; 2>/dev/null
    here_new=()
    for f in "$work"/bench/*.md "$work"/bench/*.json "$work"/bench/*.png; do
      [ -f "$f" ] && cp "$f" "$report_dir/" && here_new+=("$(basename "$f")")
    done
    if [ -n "$(ls -A "$work/bench" 2>/dev/null)" ]; then
      tar czf "$report_dir/bench-files.tar.gz" -C "$work" bench && here_new+=(bench-files.tar.gz)
    fi
    {
      echo
      echo "## Benchmarks"
      echo
      echo "bench/run-gpu.sh: exit status $brc$([ $brc = 124 ] && echo ' (stopped at the time limit)'); log: bench-run.log; results next to this report: ${here_new[*]:-none}"
    } >>"$rep"
    note "bench: exit $brc, results: ${here_new[*]:-none}"
  else
    echo -e "\n## Benchmarks\n\nbench/run-gpu.sh not run: no time left." >>"$rep"
  fi
fi

cp "$log" "$report_dir/gpu-run.log"
cp "$work/server.log" "$work/d/" 2>/dev/null
cp "$work/build.log" "$work/gpuless-check" "$hidelist" "$work/d/" 2>/dev/null
tar czf "$report_dir/gpu-details.tar.gz" -C "$work" d 2>/dev/null
note "total $(elapsed) s"
[ $nfail -eq 0 ]
