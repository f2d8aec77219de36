#!/usr/bin/env bash
# tests/gpu/multigpu.sh: NCCL through remote-gpu on a machine with 2 GPUs (issue 23,
# items 3 and 5). One remote-gpud per GPU (--device 0, --device 1); torch.distributed
# with one process per GPU launched by torchrun, each rank's libremote.so talking
# to its own server from inside the GPU-less namespace (tests/gpu/gpuless.sh); the
# servers run NCCL between the GPUs. Each part runs locally and remotely:
#
#   a. collectives (tests/gpu/dist_nccl.py check): all_reduce (sum, max, avg,
#      bf16), broadcast, all_gather, reduce_scatter, send/recv in a group,
#      premultiplied sum, an all_reduce captured in a CUDA graph: the digests of
#      every result on every rank must equal the local run's;
#   b. all-reduce bus bandwidth of 1 GiB of float32 (busbw = 2(n-1)/n bytes/time),
#      remote / local, target >= 90%;
#   c. DDP training of examples/transformer/gpt2.py's model on 2 GPUs
#      (deterministic algorithms): per-step losses of both ranks equal to the local
#      run's, bit for bit; step time remote / local, target <= 1.05;
#   d. the same with FSDP2 (fully_shard), if time is left;
#   e. (netns) the DDP run of c with each rank on a client host of its own,
#      simulated with network namespaces: rank r runs in netns rg-mg-r (its own
#      loopback and a veth into the bridge rg-mg-br, 10.77.0.(2+r)), reaches its
#      server on the bridge's 10.77.0.1 and the other rank's TCPStore over the
#      veths; losses and weights equal to c's local run, step time against it;
#   f. (s2s) copies between the two servers' GPUs from one client (REMOTE_GPU
#      naming both servers): torch tensors of several sizes from cuda:0 to
#      cuda:1 and back, exact; the copies go server to server (no "staged
#      through the client" in the client's log); 1 GiB copy time against
#      the same copy through the client's memory (.cpu() then .to()).
#
# The servers run each session in the devices' primary contexts (remote-gpud's
# default for session processes), which NCCL's cudaSetDevice binds: with
# --own-context the collectives failed on two H100s (unhandled cuda error).
#
#   tests/gpu/multigpu.sh
#
# Environment: OUT (report folder, default tests/gpu/reports), RG_BUILD_DIR
# (default <repo>/build-gpu), RG_GPUD + RG_LIBREMOTE (use these binaries, skip the
# build), RG_COMMIT, RG_PYTHON (default python3), RG_NCCL (the libnccl.so.2 the
# servers load; default torch's own), RG_MULTIGPU_BUDGET_S (whole run, default
# 500 s: parts that would not fit are skipped and say so), RG_BUSBW_MIB (1024),
# RG_DDP_STEPS (30), RG_FSDP=0 (skip d), RG_PARTS ("check busbw ddp fsdp s2s";
# add netns for e, which needs root for ip netns).
# Writes multigpu-report.md, multigpu-run.log and multigpu-details.tar.gz to OUT.
# Exit status: 0 when every part that ran passed.
set -u -o pipefail

t0=$(date +%s)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-$root/tests/gpu/reports}
mkdir -p "$out"
out=$(cd "$out" && pwd)
B=${RG_BUILD_DIR:-$root/build-gpu}
budget=${RG_MULTIGPU_BUDGET_S:-500}
py=${RG_PYTHON:-python3}
parts=" ${RG_PARTS:-check busbw ddp fsdp s2s} "
[ "${RG_FSDP:-1}" = 0 ] && parts=${parts/ fsdp / }
work=$(mktemp -d /tmp/rg-multigpu.XXXXXX)
log=$work/multigpu-run.log
mkdir -p "$work/d"

note() { echo "$*" | tee -a "$log"; }
elapsed() { echo $(($(date +%s) - t0)); }
left() { echo $((budget - $(elapsed))); }

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  sleep 1
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  netns_down
}
netns_made=0
netns_down() {
  [ "$netns_made" = 1 ] || return 0
  ip netns del rg-mg-0 2>/dev/null
  ip netns del rg-mg-1 2>/dev/null
  ip link del rg-mg-br 2>/dev/null
  netns_made=0
}
trap cleanup EXIT

gpus=$(nvidia-smi -L 2>/dev/null | paste -sd';' -)
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
driver_ver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1)
commit=${RG_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}
torch_ver=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null)
note "multigpu: $ngpu GPU(s): $gpus; driver ${driver_ver:-?}; torch ${torch_ver:-none}; commit $commit"

# ---- build -------------------------------------------------------------------------
if [ -n "${RG_GPUD:-}" ]; then
  gpud=$RG_GPUD lib=${RG_LIBREMOTE:?RG_LIBREMOTE must be set with RG_GPUD}
  build_note="binaries given"
else
  gpud=$B/backend/remote-gpud lib=$B/frontend/libremote.so
  if cmake -S "$root" -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$root/.deps/usr" \
       -DRG_BUILD_TESTS=OFF -DRG_WITH_RDMA=OFF >"$work/build.log" 2>&1 &&
     cmake --build "$B" -j "$(nproc)" --target remote remote-gpud >>"$work/build.log" 2>&1; then
    build_note="built in $(elapsed) s"
  else
    build_note="the build FAILED: $(tail -n 5 "$work/build.log" | paste -sd';')"
  fi
fi
note "build: $build_note"

# the NCCL the servers run: torch's own, so local and remote run the same one
nccl=${RG_NCCL:-$("$py" - <<'EOF' 2>/dev/null
import glob, os, site
for d in site.getsitepackages():
    for f in sorted(glob.glob(os.path.join(d, "nvidia", "**", "libnccl.so.2"), recursive=True)):
        print(f)
        raise SystemExit
EOF
)}
[ -n "$nccl" ] || nccl=$(ls /usr/local/cuda/lib*/libnccl.so.2 2>/dev/null | head -n1)
note "NCCL for the servers: ${nccl:-not found (libnccl.so.2 from the loader path)}"

# ---- the GPU-less namespace ------------------------------------------------------------
source "$here/gpuless.sh"
hidelist=$(rg_gpuless_setup "$work")
gpuless=(unshare -m --propagation private bash "$work/gpuless.sh")
if "${gpuless[@]}" "$py" -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>/dev/null; then
  gpuless_note="NOT GPU-less: libcuda.so.1 loads in the namespace"
else
  gpuless_note="libcuda.so.1 cannot be loaded; $(wc -l <"$hidelist") paths hidden"
fi
note "namespace: $gpuless_note"

# ---- servers: one per GPU --------------------------------------------------------------
servers=
server_extra=()
listen_host=127.0.0.1 # netns: the bridge's address (with --insecure: off loopback, in clear)
start_servers() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  servers=
  for g in 0 1; do
    rm -f "$work/port$g"
    NCCL_DEBUG=${NCCL_DEBUG:-WARN} "$gpud" --listen $listen_host:0 --port-file "$work/port$g" --device $g \
      ${nccl:+--nccl "$nccl"} "${server_extra[@]}" >>"$work/server$g.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 150); do [ -s "$work/port$g" ] && break; sleep 0.1; done
    [ -s "$work/port$g" ] || return 1
    servers=${servers:+$servers,}$listen_host:$(cat "$work/port$g")
  done
}
servers_alive() { local p; for p in "${pids[@]: -2}"; do kill -0 "$p" 2>/dev/null || return 1; done; }
if [ -x "$gpud" ] && [ "$ngpu" -ge 2 ] && start_servers; then
  server_note="GPU 0 and GPU 1 at $servers"
else
  server_note="not started (binary $gpud, $ngpu GPUs)"
fi
note "servers: $server_note"

# ---- runs ---------------------------------------------------------------------------------
# run NAME local|remote SECONDS ARGS...: torchrun with 2 ranks; output in d/NAME.MODE.
# SECONDS is cut to what the budget has left (less 20 s for the report).
run() {
  local name=$1 mode=$2 limit=$3
  shift 3
  local o=$work/d/$name.$mode
  [ "$limit" -gt $(($(left) - 20)) ] && limit=$(($(left) - 20))
  if [ "$limit" -lt 10 ]; then
    note "$name $mode: not run (budget spent)"
    echo "not run: budget spent" >"$o.err"
    return 124
  fi
  if [ "$mode" = local ]; then
    NCCL_NVLS_ENABLE=0 timeout "$limit" "$py" -m torch.distributed.run --standalone --nproc-per-node 2 \
      "$here/dist_nccl.py" "$@" >"$o" 2>"$o.err"
  elif [ "$mode" = netns ]; then
    # a torchrun per simulated host, one rank each; the TCPStore on rank 0's host
    local r rpids=()
    IFS=, read -r -a srv <<<"$servers"
    for r in 0 1; do
      timeout "$limit" ip netns exec rg-mg-$r "${gpuless[@]}" env RG_REMOTE_GPUS="${srv[$r]}" RG_LIBREMOTE="$lib" \
        REMOTE_GPU_LOG=warn "$py" -m torch.distributed.run --nnodes 2 --node-rank $r --nproc-per-node 1 \
        --master-addr 10.77.0.2 --master-port 29517 --no-python \
        bash "$here/remote_rank.sh" "$py" "$here/dist_nccl.py" "$@" >"$o.$r" 2>"$o.err.$r" &
      rpids+=($!)
    done
    wait "${rpids[0]}"; local rc0=$?
    wait "${rpids[1]}"; local rc1=$?
    cat "$o.0" "$o.1" >"$o"
    cat "$o.err.0" "$o.err.1" >"$o.err"
    [ $rc0 = 0 ] && (exit $rc1)
  else
    timeout "$limit" "${gpuless[@]}" env RG_REMOTE_GPUS="$servers" RG_LIBREMOTE="$lib" REMOTE_GPU_LOG=warn \
      "$py" -m torch.distributed.run --standalone --nproc-per-node 2 --no-python \
      bash "$here/remote_rank.sh" "$py" "$here/dist_nccl.py" "$@" >"$o" 2>"$o.err"
  fi
  local rc=$?
  note "$name $mode: exit $rc ($(elapsed) s)"
  [ "$mode" != local ] && ! servers_alive && { note "a server died: restarting both"; start_servers; }
  return $rc
}
# lines KEYS FILE: the lines of the results (per rank, sorted), without device names
lines() { grep -E "^rank [0-9]+ ($1)" "$2" | sort; }

rows=() fails=0
row() { rows+=("| $1 | $2 | $3 |"); [ "$2" = PASS ] || [ "$2" = SKIPPED ] || fails=$((fails + 1)); note "$2 $1: $3"; }
want() { [[ $parts == *" $1 "* ]]; }
fits() { [ "$(left)" -gt "$1" ]; }
# not_run LABEL: the setup failed (FAIL), or the budget is spent (SKIPPED)
not_run() {
  if [ $ok_setup = 0 ]; then row "$1" FAIL "not run: the build, the namespace or the servers failed (above)"
  else row "$1" SKIPPED "not run: $(left) s of the budget left (RG_MULTIGPU_BUDGET_S)"; fi
}

ok_setup=1
[ -n "$servers" ] && [[ $gpuless_note != NOT* ]] || ok_setup=0

# check_remote NAME: the remote check against the local one; sets check_note, 0 if equal
check_remote() {
  local name=$1 rrc n
  run "$name" remote 200 check; rrc=$?
  lines "$keys" "$work/d/$name.remote" >"$work/d/$name.r"
  n=$(wc -l <"$work/d/check.l")
  if [ "$lrc" = 0 ] && [ $rrc = 0 ] && [ "$n" -ge 18 ] && cmp -s "$work/d/check.l" "$work/d/$name.r" &&
     ! grep -q ' error ' "$work/d/$name.r"; then
    check_note="$n results equal to local (digests of every result on both ranks)"
    return 0
  fi
  check_note="exit $lrc/$rrc; $n local results; differences: $(diff "$work/d/check.l" "$work/d/$name.r" | grep '^[<>]' | head -n 4 | paste -sd' ' | cut -c1-300)"
  return 1
}
context_note="the devices' primary contexts (default; --own-context fails NCCL's collectives)"
if want check; then
  if [ $ok_setup = 1 ] && fits 120; then
    keys='input|all_reduce|broadcast|all_gather|reduce_scatter|send_recv|premul_sum|graph_all_reduce'
    run check local 150 check; lrc=$?
    lines "$keys" "$work/d/check.local" >"$work/d/check.l"
    if check_remote check; then
      row "a. collectives, 2 ranks" PASS "$check_note"
    else
      row "a. collectives, 2 ranks" FAIL "$check_note"
    fi
  else
    not_run "a. collectives, 2 ranks"
  fi
fi

if want busbw; then
  if [ $ok_setup = 1 ] && fits 100; then
    mib=${RG_BUSBW_MIB:-1024}
    run busbw local 120 busbw --mib "$mib"; lrc=$?
    run busbw remote 150 busbw --mib "$mib"; rrc=$?
    lb=$(sed -n 's/^rank 0 busbw .*, \([0-9.]*\) GB\/s bus bandwidth$/\1/p' "$work/d/busbw.local")
    rb=$(sed -n 's/^rank 0 busbw .*, \([0-9.]*\) GB\/s bus bandwidth$/\1/p' "$work/d/busbw.remote")
    if [ -n "$lb" ] && [ -n "$rb" ]; then
      ratio=$(awk -v r="$rb" -v l="$lb" 'BEGIN { printf "%.3f", r / l }')
      v=$(awk -v x="$ratio" 'BEGIN { print (x >= 0.90) ? "PASS" : "FAIL" }')
      row "b. all-reduce busbw, $mib MiB float32" "$v" "local $lb GB/s, remote $rb GB/s: remote/local $ratio (target >= 0.90)"
    else
      row "b. all-reduce busbw, $mib MiB float32" FAIL "exit $lrc/$rrc; local '${lb}' remote '${rb}'"
    fi
  else
    not_run "b. all-reduce busbw"
  fi
fi

train_part() { # NAME LABEL ARGS...
  local name=$1 label=$2
  shift 2
  run "$name" local 200 train "$@"; local lrc=$?
  run "$name" remote 260 train "$@"; local rrc=$?
  lines "$name step|$name weights" "$work/d/$name.local" >"$work/d/$name.l"
  lines "$name step|$name weights" "$work/d/$name.remote" >"$work/d/$name.r"
  local n lt rt ratio v eq
  n=$(grep -c ' loss ' "$work/d/$name.l")
  lt=$(sed -n "s/^rank 0 $name mean step time \([0-9.]*\) ms$/\1/p" "$work/d/$name.local")
  rt=$(sed -n "s/^rank 0 $name mean step time \([0-9.]*\) ms$/\1/p" "$work/d/$name.remote")
  if [ "$n" -gt 0 ] && cmp -s "$work/d/$name.l" "$work/d/$name.r"; then eq="losses of both ranks and weights equal to local ($n lines)"; else
    eq="NOT equal: $(diff "$work/d/$name.l" "$work/d/$name.r" | grep '^[<>]' | head -n 2 | paste -sd' ' | cut -c1-240)"
  fi
  if [ -n "$lt" ] && [ -n "$rt" ]; then
    ratio=$(awk -v r="$rt" -v l="$lt" 'BEGIN { printf "%.3f", r / l }')
    v=$(awk -v x="$ratio" 'BEGIN { print (x <= 1.05) ? "PASS" : "FAIL" }')
  else
    ratio='?' v=FAIL
  fi
  [[ $eq == NOT* ]] && v=FAIL
  [ $lrc = 0 ] && [ $rrc = 0 ] || v=FAIL
  row "$label" "$v" "exit $lrc/$rrc; $eq; step local ${lt:-?} ms, remote ${rt:-?} ms: remote/local $ratio (target <= 1.05)"
}
steps=${RG_DDP_STEPS:-30}
if want ddp; then
  if [ $ok_setup = 1 ] && fits 150; then
    train_part ddp "c. DDP GPT-2 (124M), 2 GPUs, $steps steps" --steps "$steps"
  else
    not_run "c. DDP GPT-2"
  fi
fi
if want fsdp; then
  if [ $ok_setup = 1 ] && fits 150; then
    train_part fsdp "d. FSDP2 GPT-2 (124M), 2 GPUs, $steps steps" --steps "$steps" --fsdp
  else
    not_run "d. FSDP2 GPT-2"
  fi
fi

# e. two client hosts: a network namespace per rank, on a bridge with the servers
netns_up() {
  local r
  netns_down
  netns_made=1
  ip link add rg-mg-br type bridge && ip addr add 10.77.0.1/24 dev rg-mg-br && ip link set rg-mg-br up || return 1
  for r in 0 1; do
    ip netns add rg-mg-$r &&
      ip link add rg-mg-h$r type veth peer name eth0 netns rg-mg-$r &&
      ip link set rg-mg-h$r master rg-mg-br && ip link set rg-mg-h$r up &&
      ip -n rg-mg-$r addr add 10.77.0.$((2 + r))/24 dev eth0 &&
      ip -n rg-mg-$r link set eth0 up && ip -n rg-mg-$r link set lo up || return 1
  done
  # bridged frames pass iptables where br_netfilter is loaded (a FORWARD policy of DROP)
  iptables -C FORWARD -i rg-mg-br -o rg-mg-br -j ACCEPT 2>/dev/null ||
    iptables -I FORWARD -i rg-mg-br -o rg-mg-br -j ACCEPT 2>/dev/null
  # each host reaches the other over the veths
  ip netns exec rg-mg-1 "$py" -c 'import socket; socket.create_connection(("10.77.0.2", 9), 3)' 2>&1 |
    grep -q 'refused' || return 1
}
if want netns; then
  if [ $ok_setup = 1 ] && fits 150; then
    if netns_up; then
      listen_host=10.77.0.1 server_extra=(--insecure)
      if start_servers; then
        [ -s "$work/d/ddp.local" ] || { run ddp local 200 train --steps "$steps"; }
        lines "ddp step|ddp weights" "$work/d/ddp.local" >"$work/d/ddp.l"
        run ddp netns 260 train --steps "$steps"; nrc=$?
        lines "ddp step|ddp weights" "$work/d/ddp.netns" >"$work/d/ddp.n"
        n=$(grep -c ' loss ' "$work/d/ddp.l")
        lt=$(sed -n "s/^rank 0 ddp mean step time \([0-9.]*\) ms$/\1/p" "$work/d/ddp.local")
        nt=$(sed -n "s/^rank 0 ddp mean step time \([0-9.]*\) ms$/\1/p" "$work/d/ddp.netns")
        ratio=$(awk -v r="${nt:-0}" -v l="${lt:-0}" 'BEGIN { if (l > 0) printf "%.3f", r / l; else print "?" }')
        if [ $nrc = 0 ] && [ "$n" -gt 0 ] && cmp -s "$work/d/ddp.l" "$work/d/ddp.n"; then
          row "e. DDP, a client host per rank (netns)" PASS "losses and weights equal to local ($n lines); step local ${lt:-?} ms, two hosts ${nt:-?} ms: $ratio"
        else
          row "e. DDP, a client host per rank (netns)" FAIL "exit $nrc; $(diff "$work/d/ddp.l" "$work/d/ddp.n" | grep '^[<>]' | head -n 2 | paste -sd' ' | cut -c1-240)"
        fi
      else
        row "e. DDP, a client host per rank (netns)" FAIL "the servers did not start on 10.77.0.1"
      fi
      listen_host=127.0.0.1 server_extra=()
      start_servers
    else
      row "e. DDP, a client host per rank (netns)" FAIL "network namespaces could not be set up (root, ip, a bridge; see $log)"
    fi
    netns_down
  else
    not_run "e. DDP, a client host per rank (netns)"
  fi
fi

# f. copies between the two servers' GPUs, from one client
if want s2s; then
  if [ $ok_setup = 1 ] && fits 60; then
    o=$work/d/s2s.remote
    timeout $(($(left) - 20)) "${gpuless[@]}" env REMOTE_GPU="$servers" LD_PRELOAD="$lib" REMOTE_GPU_LOG=warn \
      "$py" - >"$o" 2>"$o.err" <<'PY'
import time, torch
ok = True
for n in (1, 4095, 4 << 20, (4 << 20) + 3, 21 << 20, 256 << 20):
    g = torch.Generator().manual_seed(n)
    h = torch.randint(0, 256, (n + 4097,), dtype=torch.uint8, generator=g)
    a = h.to("cuda:0")
    b = a[4097:].to("cuda:1")
    c = b.to("cuda:0")
    ok &= torch.equal(b.cpu(), h[4097:]) and torch.equal(c.cpu(), h[4097:])
print("s2s exact", "ok" if ok else "WRONG")
x = torch.ones(1 << 28, device="cuda:0")  # 1 GiB of float32
def timed(f):
    best = 1e9
    for _ in range(3):
        torch.cuda.synchronize(0); torch.cuda.synchronize(1)
        t = time.perf_counter(); y = f(); torch.cuda.synchronize(1)
        best = min(best, time.perf_counter() - t)
    assert torch.equal(y[:1024].cpu(), x[:1024].cpu())
    return best
d = timed(lambda: x.to("cuda:1"))
s = timed(lambda: x.cpu().to("cuda:1"))
print("s2s 1 GiB: server to server %.1f ms (%.2f GB/s), through the client %.1f ms: %.2fx" % (d * 1e3, 1.074 / d, s * 1e3, s / d))
PY
    src=$?
    note "s2s: exit $src ($(elapsed) s)"
    if [ $src = 0 ] && grep -q '^s2s exact ok' "$o" && ! grep -q 'staged through the client' "$o.err"; then
      row "f. copies between the servers' GPUs" PASS "exact at 6 sizes both ways, server to server; $(sed -n 's/^s2s 1 GiB: //p' "$o")"
    else
      row "f. copies between the servers' GPUs" FAIL "exit $src; $(head -n 2 "$o" | paste -sd' '); $(grep -m1 -iE 'staged|error' "$o.err" | cut -c1-200)"
    fi
  else
    not_run "f. copies between the servers' GPUs"
  fi
fi

# ---- report ----------------------------------------------------------------------------
rep=$out/multigpu-report.md
{
  echo "# remote-gpu: NCCL on 2 GPUs, local vs remote"
  echo
  echo "| | |"
  echo "|---|---|"
  echo "| date | $(date -u '+%Y-%m-%d %H:%M:%S UTC') |"
  echo "| GPUs | ${gpus:-none} |"
  echo "| driver | ${driver_ver:-?}; torch ${torch_ver:-?}; NCCL $(sed -n 's/^rank 0 world .* nccl \(.*\)$/\1/p' "$work/d/check.remote" 2>/dev/null | head -n1) |"
  echo "| commit | $commit |"
  echo "| build | $build_note |"
  echo "| namespace | $gpuless_note |"
  echo "| servers | $server_note; NCCL $nccl; NCCL_NVLS_ENABLE=0; sessions in $context_note |"
  echo "| result | **$fails failed** in $(elapsed) s |"
  echo
  echo "Local: torchrun, 2 processes on the 2 GPUs. Remote: the same, inside the GPU-less"
  echo "namespace, each rank through libremote.so to its own remote-gpud (loopback TCP),"
  echo "the servers running NCCL between the GPUs."
  echo
  echo "| part | result | detail |"
  echo "|---|---|---|"
  printf '%s\n' "${rows[@]}"
  for f in "$work"/d/*.remote "$work"/d/*.local; do
    [ -f "$f" ] || continue
    if [ -s "$f.err" ] && grep -qiE 'error|traceback|not supported' "$f.err"; then
      echo
      echo "### $(basename "$f") stderr (errors, last lines)"
      echo '```'
      grep -iE 'error|traceback|not supported|warn' "$f.err" | sort | uniq -c | sort -rn | head -n 25 | cut -c1-300
      echo '```'
    fi
  done
  for g in 0 1; do
    if grep -qE 'warn|error' "$work/server$g.log" 2>/dev/null; then
      echo
      echo "### server $g log (warnings and errors)"
      echo '```'
      grep -E 'warn|error|NCCL' "$work/server$g.log" | sed 's/^\[[^]]*\] //' | sort | uniq -c | sort -rn | head -n 25 | cut -c1-300
      echo '```'
    fi
  done
} >"$rep"
cp "$log" "$out/multigpu-run.log"
cp "$work"/server*.log "$work/build.log" "$work/d/" 2>/dev/null
tar czf "$out/multigpu-details.tar.gz" -C "$work" d 2>/dev/null
note "report: $rep ($fails failed, $(elapsed) s)"
[ "$fails" -eq 0 ]
