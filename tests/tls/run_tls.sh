#!/usr/bin/env bash
# run_tls.sh: TLS on TCP (tls://, issue 24), end to end on the driver test double.
#
#   tests/tls/run_tls.sh [--build DIR] [--only NAME[,NAME...]] [--keep] [--list]
#
# Makes a throwaway CA, a server certificate (localhost, 127.0.0.1), a client
# certificate and a second, unrelated CA with the openssl command, then:
#   e2e            tests/e2e programs (copies, streams) over tls:// give the expected output
#   thread         the same with --isolation thread (the handshake in the supervisor)
#   capture        through a recording proxy (tap.py) the token never crosses in clear
#                  (and, as the control, it does over plain tcp://)
#   wrong_ca       a client trusting another CA refuses the server
#   wrong_host     a client that asked for another address refuses the certificate
#   plain_to_tls   a plain tcp:// client on a TLS port fails at once, saying to use tls://
#   tls_to_plain   a tls:// client on a plain port fails at once, saying why
#   client_cert    --tls-client-ca: no client certificate, or one of another CA, is
#                  refused; one the CA signed is served
#   silent_server  a server that accepts but never answers the handshake: the client
#                  gives up after 10 s, saying so
#   refuse_start   off loopback without certificates and without --insecure the server
#                  refuses to start; with --insecure it starts; half a TLS setup is refused
#   peer           copies between two tls:// servers go server to server inside TLS
#                  (the source's server trusting the CA by REMOTE_GPU_TLS_CA); a
#                  source's server that does not trust it: the client stages, logged
#   liveness       tests/e2e/liveness.sh over tls://: a stopped, killed, busy or
#                  unreachable server seen from a waiting client
#
# Exit status: 0 all passed, 1 some failed, 77 skipped (nothing built, no openssl).
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${RG_BUILD_DIR:-$root/build}
only=
keep=0
CASES=(e2e thread capture wrong_ca wrong_host plain_to_tls tls_to_plain client_cert silent_server refuse_start
  liveness peer)

while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --list) printf '%s\n' "${CASES[@]}"; exit 0 ;;
    *) echo "run_tls: unknown argument $1" >&2; exit 2 ;;
  esac
done
gpud=$build/backend/remote-gpud
lib=$build/frontend/libremote.so
fake=$build/tests/fakecuda/libcuda.so.1
bin=$build/tests/e2e/bin
expected=$root/tests/e2e/expected
skip() { echo "SKIP: $*"; exit 77; }
[ -x "$gpud" ] && [ -f "$lib" ] && [ -f "$fake" ] || skip "remote-gpud, libremote.so or the fake driver not built"
[ -x "$bin/copies" ] && [ -x "$bin/streams" ] || skip "tests/e2e programs not built (no nvcc)"
command -v openssl >/dev/null || skip "no openssl command"
command -v python3 >/dev/null || skip "no python3"

work=$(mktemp -d "${TMPDIR:-/tmp}/rg-tls.XXXXXX")
pids=()
pass=0
fail=0
TOKEN=tls-test-token-$RANDOM$RANDOM

cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  if [ "$keep" = 1 ] || [ "$fail" -gt 0 ]; then echo "scratch folder kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# ---- certificates ----------------------------------------------------------------
pki() {
  local d=$work/pki
  mkdir -p "$d" && cd "$d" || return 1
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
  openssl req -x509 "${ec[@]}" -days 2 -subj /CN=rg-test-ca -keyout ca.key -out ca.pem &&
  openssl req -x509 "${ec[@]}" -days 2 -subj /CN=rg-other-ca -keyout other-ca.key -out other-ca.pem &&
  openssl req "${ec[@]}" -subj /CN=localhost -keyout srv.key -out srv.csr &&
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >srv.ext &&
  openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile srv.ext -out srv.pem &&
  openssl req "${ec[@]}" -subj /CN=rg-client -keyout cli.key -out cli.csr &&
  openssl x509 -req -in cli.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -out cli.pem &&
  openssl x509 -req -in cli.csr -CA other-ca.pem -CAkey other-ca.key -CAcreateserial -days 2 -out cli-other.pem
} >"$work/pki.log" 2>&1
pki || { cat "$work/pki.log"; echo "FAIL: cannot make test certificates"; exit 1; }
cd "$work" || exit 1
P=$work/pki

# ---- helpers ---------------------------------------------------------------------
# start_server NAME ARGS...: remote-gpud on the fake driver; sets port (and adds its pid).
port=
start_server() {
  local name=$1; shift
  local pf=$work/$name.port
  rm -f "$pf"
  REMOTE_GPU_TOKEN=$TOKEN "$gpud" --port-file "$pf" --driver "$fake" "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    if [ -s "$pf" ] && read -r port <"$pf" && [[ $port =~ ^[0-9]+$ ]]; then return 0; fi
    sleep 0.1
  done
  echo "  remote-gpud $name did not start:"; sed 's/^/  | /' "$work/$name.log"
  return 1
}
tls_server() { start_server "$1" --listen 127.0.0.1:0 --tls-cert "$P/srv.pem" --tls-key "$P/srv.key" "${@:2}"; }

# client OUT ERR ADDR [VAR=VALUE...] -- PROG: a program through libremote.so (token set, trusting ca.pem)
client() {
  local out=$1 err=$2 addr=$3; shift 3
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env REMOTE_GPU="$addr" REMOTE_GPU_TOKEN=$TOKEN REMOTE_GPU_TLS_CA="$P/ca.pem" RGTEST_FAKE=1 \
    LD_PRELOAD="$lib" "${envs[@]}" timeout 60 "$@" >"$out" 2>"$err"
}

# same_output NAME ADDR [VAR=VALUE...]: tests/e2e program NAME passes with its expected output
same_output() {
  local name=$1 addr=$2; shift 2
  client "$work/$name.out" "$work/$name.err" "$addr" "$@" -- "$bin/$name" || {
    echo "  $name over $addr failed:"; tail -n 5 "$work/$name.err" | sed 's/^/  | /'; return 1; }
  grep -v '^expect launch' "$work/$name.out" | diff -q - "$expected/$name.out" >/dev/null || {
    echo "  $name over $addr: output differs from tests/e2e/expected/$name.out"; return 1; }
}

# refused WHAT PATTERN ADDR [VAR=VALUE...]: copies fails, quickly, and its stderr says PATTERN
refused() {
  local what=$1 pat=$2 addr=$3; shift 3
  local t0=$SECONDS
  if client "$work/refused.out" "$work/refused.err" "$addr" "$@" -- "$bin/copies"; then
    echo "  $what: the client was served"; return 1
  fi
  if [ $((SECONDS - t0)) -ge 20 ]; then echo "  $what: took $((SECONDS - t0)) s (a hang?)"; return 1; fi
  grep -q -- "$pat" "$work/refused.err" || {
    echo "  $what: stderr does not say \"$pat\":"; sed 's/^/  | /' "$work/refused.err"; return 1; }
}

# ---- cases -----------------------------------------------------------------------
case_e2e() {
  tls_server e2e || return 1
  same_output copies "tls://localhost:$port" && same_output streams "tls://localhost:$port" &&
    same_output copies "tls://127.0.0.1:$port" || return 1
  grep -q "TLS handshake failed\|bad frame" "$work/e2e.log" && { echo "  server log has errors"; return 1; }
  return 0
}

case_thread() {
  tls_server thread --isolation thread || return 1
  same_output copies "tls://localhost:$port" && same_output streams "tls://localhost:$port"
}

case_capture() {
  tls_server capture || return 1
  local tls_port=$port
  python3 "$here/tap.py" "$work/tap.port" "$tls_port" "$work/tls.cap" & pids+=($!)
  start_server plain_cap --listen 127.0.0.1:0 || return 1
  local plain_port=$port
  python3 "$here/tap.py" "$work/tap2.port" "$plain_port" "$work/plain.cap" & pids+=($!)
  for _ in $(seq 50); do [ -s "$work/tap.port" ] && [ -s "$work/tap2.port" ] && break; sleep 0.1; done
  same_output copies "tls://127.0.0.1:$(cat "$work/tap.port")" || return 1
  same_output copies "127.0.0.1:$(cat "$work/tap2.port")" || return 1
  local n; n=$(stat -c %s "$work/tls.cap")
  [ "$n" -gt 1000000 ] || { echo "  the proxy saw only $n bytes of tls traffic"; return 1; }
  grep -qa "$TOKEN" "$work/plain.cap" || { echo "  control: the token is not in the plain capture"; return 1; }
  if grep -qa "$TOKEN" "$work/tls.cap"; then echo "  the token crossed in clear over tls://"; return 1; fi
  # nor the start of the hello (the remote-gpu frame magic) or the program's name
  if grep -qa "copies" "$work/tls.cap"; then echo "  the hello crossed in clear over tls://"; return 1; fi
}

case_peer() {
  [ -x "$bin/peer_copy" ] || { echo "  peer_copy not built"; return 1; }
  # distinct fake device addresses, as two GPUs have (else cudaMemcpyDefault cannot tell them apart)
  FAKECUDA_ARENA_SLOT=1 REMOTE_GPU_LOG=info REMOTE_GPU_TLS_CA="$P/ca.pem" tls_server peer_a || return 1
  local a=$port
  FAKECUDA_ARENA_SLOT=2 REMOTE_GPU_LOG=info REMOTE_GPU_TLS_CA="$P/ca.pem" tls_server peer_b || return 1
  local b=$port
  same_output peer_copy "tls://localhost:$a,tls://localhost:$b" || return 1
  if grep -q "staged through the client" "$work/peer_copy.err"; then echo "  the client staged"; return 1; fi
  grep -q "peer copies: listening on tls://" "$work/peer_b.log" || { echo "  no tls peer listener"; return 1; }
  FAKECUDA_ARENA_SLOT=3 REMOTE_GPU_LOG=info REMOTE_GPU_TLS_CA="$P/other-ca.pem" tls_server peer_c || return 1
  same_output peer_copy "tls://localhost:$port,tls://localhost:$b" || return 1
  grep -q "staged through the client" "$work/peer_copy.err" || { echo "  an untrusting source: not staged"; return 1; }
  grep -q "peer copy: cannot reach tls://localhost" "$work/peer_c.log" || { echo "  peer_c does not say why"; return 1; }
}

case_wrong_ca() {
  tls_server wrong_ca || return 1
  refused "other CA" "not trusted" "tls://localhost:$port" REMOTE_GPU_TLS_CA="$P/other-ca.pem" &&
    refused "system store" "not trusted" "tls://localhost:$port" REMOTE_GPU_TLS_CA=
}

case_wrong_host() {
  # off loopback with certificates: tls by default; 127.0.0.2 reaches it but is not in its certificate
  start_server wrong_host --listen 0.0.0.0:0 --tls-cert "$P/srv.pem" --tls-key "$P/srv.key" || return 1
  grep -q ", tls," "$work/wrong_host.log" || { echo "  the server does not say tls"; return 1; }
  refused "127.0.0.2" "not trusted" "tls://127.0.0.2:$port" &&
    same_output copies "tls://127.0.0.1:$port"
}

case_plain_to_tls() {
  tls_server plain_to_tls || return 1
  refused "plain client" "takes only TLS connections" "tcp://127.0.0.1:$port" &&
    refused "plain client (no scheme)" "takes only TLS connections" "localhost:$port"
}

case_tls_to_plain() {
  start_server tls_to_plain --listen 127.0.0.1:0 || return 1
  refused "tls client" "closed the connection during the TLS handshake" "tls://localhost:$port"
}

case_client_cert() {
  tls_server client_cert --tls-client-ca "$P/ca.pem" || return 1
  refused "no client certificate" "certificate required" "tls://localhost:$port" &&
    refused "client certificate of another CA" "unknown ca" "tls://localhost:$port" \
      REMOTE_GPU_TLS_CERT="$P/cli-other.pem" REMOTE_GPU_TLS_KEY="$P/cli.key" &&
    same_output copies "tls://localhost:$port" REMOTE_GPU_TLS_CERT="$P/cli.pem" REMOTE_GPU_TLS_KEY="$P/cli.key"
}

case_silent_server() {
  python3 -c 'import socket,sys,time
s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(8)
open(sys.argv[1],"w").write("%d\n" % s.getsockname()[1]); time.sleep(120)' "$work/silent.port" & pids+=($!)
  for _ in $(seq 50); do [ -s "$work/silent.port" ] && break; sleep 0.1; done
  local t0=$SECONDS
  client "$work/silent.out" "$work/silent.err" "tls://127.0.0.1:$(cat "$work/silent.port")" -- "$bin/copies" &&
    { echo "  served by a silent server?"; return 1; }
  [ $((SECONDS - t0)) -le 30 ] || { echo "  took $((SECONDS - t0)) s"; return 1; }
  grep -q "did not complete the TLS handshake" "$work/silent.err" ||
    { echo "  stderr does not say why:"; sed 's/^/  | /' "$work/silent.err"; return 1; }
}

# expect_refusal WHAT PATTERN ARGS...: remote-gpud ARGS exits 2 at once saying PATTERN
expect_refusal() {
  local what=$1 pat=$2; shift 2
  timeout 20 "$gpud" --driver "$fake" --port-file "$work/never.port" "$@" >"$work/refuse.log" 2>&1
  local rc=$?
  [ $rc = 2 ] || { echo "  $what: exit status $rc, not 2"; sed 's/^/  | /' "$work/refuse.log"; return 1; }
  grep -q -- "$pat" "$work/refuse.log" || { echo "  $what: does not say \"$pat\""; sed 's/^/  | /' "$work/refuse.log"; return 1; }
  [ ! -e "$work/never.port" ] || { echo "  $what: it listened"; return 1; }
}

case_refuse_start() {
  expect_refusal "0.0.0.0 in clear" "refusing to listen" --listen 0.0.0.0:0 &&
    expect_refusal "tcp://0.0.0.0 in clear" "--insecure" --listen tcp://0.0.0.0:0 &&
    expect_refusal "cert without key" "both --tls-cert" --listen 127.0.0.1:0 --tls-cert "$P/srv.pem" &&
    expect_refusal "tls:// without cert" "needs --tls-cert" --listen tls://127.0.0.1:0 &&
    expect_refusal "key of another cert" "certificate or key" --listen 127.0.0.1:0 --tls-cert "$P/srv.pem" \
      --tls-key "$P/cli.key" || return 1
  start_server insecure --listen 0.0.0.0:0 --insecure || return 1
  same_output copies "127.0.0.1:$port"
}

case_liveness() {
  [ -x "$bin/liveness" ] && [ -x "$bin/probe" ] || { echo "  tests/e2e liveness programs not built"; return 1; }
  LIVENESS_TLS_CERT=$P/srv.pem LIVENESS_TLS_KEY=$P/srv.key LIVENESS_TLS_CA=$P/ca.pem \
    "$root/tests/e2e/liveness.sh" "$gpud" "$fake" "$lib" "$bin/liveness" | sed 's/^/  /'
}

if [ -n "$only" ]; then IFS=, read -r -a run <<<"$only"; else run=("${CASES[@]}"); fi
for t in "${run[@]}"; do
  [[ " ${CASES[*]} " == *" $t "* ]] || { echo "run_tls: unknown case $t (see --list)" >&2; exit 2; }
  if "case_$t"; then echo "PASS: $t"; pass=$((pass + 1)); else echo "FAIL: $t"; fail=$((fail + 1)); fi
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
