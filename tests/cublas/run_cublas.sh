#!/usr/bin/env bash
# run_cublas.sh: end-to-end test of cuBLAS / cuBLASLt forwarding without a GPU.
# Starts remote-gpud on the driver test double (tests/fakecuda) and the cuBLAS
# test doubles (tests/fakecublas, which log every call to $FAKECUBLAS_LOG), runs
# cublas_e2e (linked with NVIDIA's libcublas) with LD_PRELOAD=libremote.so, and
# checks:
#   - the program's exit status is 0 (its own checks of results and statuses);
#   - every "expect cublas LINE" it printed is in the fake's log, in that order,
#     byte for byte;
#   - every "expect-teardown cublas LINE" appears after it exited (the session's
#     teardown destroyed what it left alive);
#   - every "expect-count cublas N PREFIX": N lines of the log start with PREFIX;
#   - the server's free memory is back to where it was before the program;
#   - the server logged no error and no malformed call.
#
#   run_cublas.sh --gpud PATH --lib PATH --driver PATH --cublas PATH
#                 --cublaslt PATH --prog PATH [--isolation process|thread] [--keep]
#
# Exit status: 0 passed, 1 failed, 77 skipped (something not built).
set -u -o pipefail

gpud= lib= driver= cublas= cublaslt= prog= isolation=process keep=0
while [ $# -gt 0 ]; do
  case $1 in
    --gpud) gpud=$2; shift 2 ;;
    --lib) lib=$2; shift 2 ;;
    --driver) driver=$2; shift 2 ;;
    --cublas) cublas=$2; shift 2 ;;
    --cublaslt) cublaslt=$2; shift 2 ;;
    --prog) prog=$2; shift 2 ;;
    --isolation) isolation=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_cublas: unknown argument $1" >&2; exit 2 ;;
  esac
done
for f in "$gpud" "$lib" "$driver" "$cublas" "$cublaslt" "$prog"; do
  [ -n "$f" ] && [ -e "$f" ] || { echo "SKIP: not built: ${f:-(a path is missing)}"; exit 77; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/rg-cublas.XXXXXX")
log=$work/cublas.log
srv_pid=
fail=0
cleanup() {
  if [ -n "$srv_pid" ] && kill -0 "$srv_pid" 2>/dev/null; then
    kill -TERM "$srv_pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$srv_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$srv_pid" 2>/dev/null
  fi
  if [ "$keep" = 1 ] || [ "$fail" != 0 ]; then echo "scratch folder kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
bad() { echo "FAIL: $*"; fail=1; }

FAKECUBLAS_LOG=$log REMOTE_GPU_LOG=info "$gpud" --listen 127.0.0.1:0 --port-file "$work/port" \
  --driver "$driver" --cublas "$cublas" --cublaslt "$cublaslt" --isolation "$isolation" \
  >"$work/server.log" 2>&1 &
srv_pid=$!
port=
for _ in $(seq 100); do
  [ -s "$work/port" ] && read -r port <"$work/port" && [[ $port =~ ^[0-9]+$ ]] && break
  kill -0 "$srv_pid" 2>/dev/null || break
  sleep 0.1
done
[[ $port =~ ^[0-9]+$ ]] || { bad "remote-gpud did not start"; tail -n 20 "$work/server.log"; exit 1; }

client() { REMOTE_GPU=127.0.0.1:$port LD_PRELOAD=$lib timeout 120 "$prog" "$@"; }

base=$(client --free 2>>"$work/client.err" | sed -n 's/^free=//p')
client >"$work/out.txt" 2>>"$work/client.err"
st=$?
[ "$st" = 0 ] || bad "cublas_e2e exited with $st"
grep '^FAIL' "$work/out.txt" | sed 's/^/  /'

# expect lines: a subsequence of the log, byte for byte
sed -n 's/^expect cublas //p' "$work/out.txt" >"$work/expected"
n=$(wc -l <"$work/expected")
[ "$n" -gt 50 ] || bad "only $n expected lines (the program stopped early?)"
[ -s "$log" ] || bad "the fake cuBLAS logged nothing ($log)"
missing=$(awk -f "$(dirname "$0")/../e2e/in_order.awk" "$work/expected" "$log")
if [ -n "$missing" ]; then
  bad "not in the fake's log (in this order): $missing"
  fn=${missing#*: }
  fn=${fn%% *}
  echo "  the log's $fn lines:"
  grep "^$fn " "$log" | head -5 | sed 's/^/  | /'
fi

# counts of lines with a prefix (calls that must not, or must once, reach the library)
while read -r want prefix; do
  got=$(awk -v p="$prefix" 'index($0, p) == 1 { c++ } END { print c + 0 }' "$log")
  [ "$got" = "$want" ] || bad "$got log lines start with '$prefix', expected $want"
done < <(sed -n 's/^expect-count cublas //p' "$work/out.txt")

# teardown: the server destroys what the session left (it may take a moment)
sed -n 's/^expect-teardown cublas //p' "$work/out.txt" >"$work/teardown"
[ -s "$work/teardown" ] || bad "no expect-teardown lines"
while read -r line; do
  ok=0
  for _ in $(seq 50); do grep -qxF "$line" "$log" && { ok=1; break; }; sleep 0.1; done
  [ "$ok" = 1 ] || bad "teardown did not happen: $line"
done <"$work/teardown"

# memory back to the baseline
after=
for _ in $(seq 50); do
  after=$(client --free 2>>"$work/client.err" | sed -n 's/^free=//p')
  [ -n "$after" ] && [ "$after" = "$base" ] && break
  sleep 0.1
done
[ -n "$base" ] && [ "$after" = "$base" ] || bad "free memory $after, before the program $base"

# The fake has one function of each shape of api/cublas.api's last section (what
# cuSOLVER calls besides): the server says once that it lacks the others, and
# cublas_e2e calls one of them on purpose (cublasDnrm2_v2).
if grep -E '\b(error|warn) (backend|frontend)\]|malformed' "$work/server.log" "$work/client.err" |
   grep -vE 'cublas: the library lacks [0-9]+ of the functions forwarded|not supported by the server.s library: cublasDnrm2_v2$' \
   >"$work/problems"; then
  bad "errors in the logs:"
  sed 's/^/  | /' "$work/problems" | head -10
fi

echo "$n expected calls, $(wc -l <"$log") logged; isolation $isolation"
[ "$fail" = 0 ] && echo "cublas e2e: passed" || echo "cublas e2e: FAILED"
exit $fail
