#!/usr/bin/env bash
# run_nccl.sh: end-to-end test of NCCL forwarding without a GPU. Starts two
# remote-gpud on the driver test double (tests/fakecuda) and the NCCL test double
# (tests/fakenccl, which logs every call to $FAKENCCL_LOG, one file per server),
# and runs nccl_e2e (linked with NVIDIA's libnccl) with LD_PRELOAD=libremote.so:
#
#   1. the test against server A: its exit status is 0 (its own checks); every
#      "expect nccl LINE" it printed is in A's log, in that order, byte for byte;
#      every "expect-count nccl N TEXT": N lines contain TEXT; every
#      "expect-teardown nccl LINE" appears after it exited (the session aborted
#      the communicator it left);
#   2. two ranks, rank 0 on server A and rank 1 on server B: the unique id made
#      by A (its 128 bytes, the last one too) reaches B's library through the
#      client, and each server inits its rank with it;
#   3. a client killed with SIGKILL while it holds a communicator: the server
#      aborts it, and the device's free memory is back to the baseline;
#   4. neither server logged an error or a malformed call.
#
#   run_nccl.sh --gpud PATH --lib PATH --driver PATH --nccl PATH --prog PATH
#               [--isolation process|thread] [--own-context] [--keep]
#
# --own-context: the servers' session processes make contexts of their own
# (by default they run in the devices' primary contexts).
#
# Free memory is per process on the fake driver, so the baseline checks mean
# something in thread isolation (each session is a process of its own otherwise).
# Exit status: 0 passed, 1 failed, 77 skipped (something not built).
set -u -o pipefail

gpud='' lib='' driver='' nccl='' prog='' isolation=process keep=0 extra=()
while [ $# -gt 0 ]; do
  opt=${1#--}
  case $opt in
    gpud|lib|driver|nccl|prog|isolation) printf -v "$opt" '%s' "${2:?$1 needs a value}"; shift 2 ;;
    keep) keep=1; shift ;;
    own-context) extra+=(--own-context); shift ;;
    h|help|-h) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_nccl: unknown argument $1" >&2; exit 2 ;;
  esac
done
for f in "$gpud" "$lib" "$driver" "$nccl" "$prog"; do
  [ -n "$f" ] && [ -e "$f" ] || { echo "SKIP: not built: ${f:-(a path is missing)}"; exit 77; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/rg-nccl.XXXXXX")
pids=() fail=0 holder=''
declare -A port
cleanup() {
  [ -n "$holder" ] && kill -KILL "$holder" 2>/dev/null
  for p in "${pids[@]}"; do
    kill -TERM "$p" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
  done
  if [ "$keep" = 1 ] || [ "$fail" != 0 ]; then echo "scratch folder kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
bad() { echo "FAIL: $*"; fail=1; }

# start NAME: a server logging to $work/NAME.log (calls) and NAME.server.log
start() {
  FAKENCCL_LOG=$work/$1.log REMOTE_GPU_LOG=info "$gpud" --listen 127.0.0.1:0 --port-file "$work/$1.port" \
    --driver "$driver" --nccl "$nccl" --isolation "$isolation" "${extra[@]}" >"$work/$1.server.log" 2>&1 &
  pids+=($!)
  local p=
  for _ in $(seq 100); do
    [ -s "$work/$1.port" ] && read -r p <"$work/$1.port" && [[ $p =~ ^[0-9]+$ ]] && break
    sleep 0.1
  done
  [[ $p =~ ^[0-9]+$ ]] || { bad "remote-gpud $1 did not start"; tail -n 20 "$work/$1.server.log"; exit 1; }
  port[$1]=$p
}
start a
start b
client() { local p=$1; shift; REMOTE_GPU=127.0.0.1:$p LD_PRELOAD=$lib timeout 60 "$prog" "$@"; }
free_of() { client "$1" --free 2>>"$work/client.err" | sed -n 's/^free=//p'; }
# wait_free PORT BASE: free memory back to BASE (teardown may take a moment)
wait_free() {
  local after=
  for _ in $(seq 50); do
    after=$(free_of "$1")
    [ -n "$after" ] && [ "$after" = "$2" ] && return 0
    sleep 0.1
  done
  echo "$after"
  return 1
}

# ---- 1. the test
base=$(free_of "${port[a]}")
client "${port[a]}" >"$work/out.txt" 2>>"$work/client.err"
st=$?
[ "$st" = 0 ] || bad "nccl_e2e exited with $st"
grep 'check failed' -A1 "$work/client.err" | sed 's/^/  /'
sed -n 's/^expect nccl //p' "$work/out.txt" >"$work/expected"
n=$(wc -l <"$work/expected")
[ "$n" -gt 30 ] || bad "only $n expected lines (the program stopped early?)"
missing=$(awk -f "$(dirname "$0")/../e2e/in_order.awk" "$work/expected" "$work/a.log")
if [ -n "$missing" ]; then
  bad "not in the fake's log (in this order): $missing"
  fn=${missing#*: }
  grep "^${fn%% *} " "$work/a.log" | head -5 | sed 's/^/  | /'
fi
while read -r want text; do
  got=$(grep -cF -- "$text" "$work/a.log")
  [ "$got" = "$want" ] || bad "$got log lines contain '$text', expected $want"
done < <(sed -n 's/^expect-count nccl //p' "$work/out.txt")
sed -n 's/^expect-teardown nccl //p' "$work/out.txt" >"$work/teardown"
[ -s "$work/teardown" ] || bad "no expect-teardown lines"
for _ in $(seq 50); do # until every line is in the log (the teardown may take a moment)
  grep -qvxFf "$work/a.log" "$work/teardown" || break
  sleep 0.1
done
grep -vxFf "$work/a.log" "$work/teardown" | sed 's/^/  teardown did not happen: /' >"$work/teardown.missing"
[ -s "$work/teardown.missing" ] && { bad "the session's teardown:"; cat "$work/teardown.missing"; }
after=$(wait_free "${port[a]}" "$base") || bad "after the test: free memory $after, before $base"

# ---- 2. two ranks on two servers: the unique id travels through the clients
client "${port[a]}" --rank 0 --idfile "$work/id" >"$work/rank0.txt" 2>>"$work/client.err" &
r0=$!
client "${port[b]}" --rank 1 --idfile "$work/id" >"$work/rank1.txt" 2>>"$work/client.err"
s1=$?
wait "$r0"
s0=$?
[ "$s0" = 0 ] && [ "$s1" = 0 ] || bad "the ranks exited with $s0 and $s1"
id0=$(sed -n 's/^id=\([0-9a-f]*\) last=7f$/\1/p' "$work/rank0.txt")
id1=$(sed -n 's/^id=\([0-9a-f]*\) last=7f$/\1/p' "$work/rank1.txt")
[ -n "$id0" ] && [ "$id0" = "$id1" ] || bad "the ranks saw ids '$id0' and '$id1'"
grep -qx "ncclGetUniqueId id=$id0" "$work/a.log" || bad "server A did not make the id $id0"
grep -q "^ncclCommInitRank new=comm#[0-9]* nranks=2 id=$id0 last=7f rank=0 = 0$" "$work/a.log" ||
  bad "server A did not init rank 0 with the id"
grep -q "^ncclCommInitRank new=comm#[0-9]* nranks=2 id=$id0 last=7f rank=1 = 0$" "$work/b.log" ||
  bad "server B did not init rank 1 with the id"

# ---- 3. a client killed while it holds a communicator
base=$(free_of "${port[b]}")
aborts=$(grep -c '^ncclCommAbort ' "$work/b.log")
# exec: $! is the program itself, which the SIGKILL must hit
(REMOTE_GPU=127.0.0.1:${port[b]} LD_PRELOAD=$lib exec "$prog" --hold "$work/holding" >"$work/hold.txt" 2>>"$work/client.err") &
holder=$!
for _ in $(seq 100); do [ -s "$work/holding" ] && break; sleep 0.1; done
if [ -s "$work/holding" ]; then
  kill -KILL "$holder"
  wait "$holder" 2>/dev/null
  holder=
  ok=0
  for _ in $(seq 50); do
    [ "$(grep -c '^ncclCommAbort comm=comm#' "$work/b.log")" -gt "$aborts" ] && { ok=1; break; }
    sleep 0.1
  done
  [ "$ok" = 1 ] || bad "the killed client's communicator was not aborted"
  after=$(wait_free "${port[b]}" "$base") || bad "after the kill: free memory $after, before $base"
else
  bad "the holding client did not get ready"; sed 's/^/  | /' "$work/hold.txt" | head
fi

# ---- 4. the servers' logs (the client logs each function it does not forward once)
if grep -E '\b(error|warn) (backend|frontend)\]|malformed' "$work"/*.server.log "$work/client.err" |
   grep -vE 'not supported \(answered ncclInvalidUsage\)|netName and commName are not forwarded|another CUDA context current; the session.s is restored: nccl$' >"$work/problems"; then
  bad "errors in the logs:"
  sed 's/^/  | /' "$work/problems" | head -10
fi

echo "$n expected calls, $(wc -l <"$work/a.log") logged; isolation $isolation"
[ "$fail" = 0 ] && echo "nccl e2e: passed" || echo "nccl e2e: FAILED"
exit $fail
