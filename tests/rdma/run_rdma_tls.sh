#!/usr/bin/env bash
# run_rdma_tls.sh: rdma+tls:// (backend/src/ticket.c): RDMA sessions set up
# inside TLS, in the Soft-RoCE guest (tests/rdma/guest.sh), against
# remote-gpud --listen rdma+tls://IP:0 with test certificates and a token, on
# the driver test double. IP is not a loopback address, so these also check
# that no --insecure is needed.
#
#   tests/rdma/run_rdma_tls.sh --build DIR --ip IP
#
# e2e       copies and memsets through libremote.so over rdma+tls://, the
#           output as expected, the data over rdma (the server's log names
#           the session's rdma port)
# token     a wrong token is refused inside TLS: no session process starts
# cookie    at a session port: no cookie and a cookie one bit off are refused,
#           the right one admitted, then refused a second time (one use)
# late      the right cookie presented after its 10 s deadline is refused
# capture   through a recording proxy on the TCP side, the token never
#           crosses in clear (and the proxy saw the TLS exchange)
# insecure  rdma:// (not +tls) off loopback still needs --insecure
#
# Exit status: 0 all passed, 1 some failed, 77 skipped. Last line "N passed, N failed".
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$root/build
ip=${RDMA_VM_IP:-}
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --ip) ip=$2; shift 2 ;;
    *) echo "run_rdma_tls: unknown argument $1" >&2; exit 2 ;;
  esac
done
skip() { echo "SKIP: $*"; echo "0 passed, 0 failed"; exit 77; }
[ -n "$ip" ] || skip "no RDMA address (--ip, or RDMA_VM_IP in the guest)"
gpud=$build/backend/remote-gpud
lib=$build/frontend/libremote.so
fake=$build/tests/fakecuda/libcuda.so.1
bin=$build/tests/e2e/bin
probe=$build/tests/rdma/rdma_ticket_probe
for f in "$gpud" "$lib" "$fake" "$probe" "$bin/copies" "$bin/memsets"; do [ -e "$f" ] || skip "$f not built"; done
command -v openssl >/dev/null || skip "no openssl command"

work=$(mktemp -d "${TMPDIR:-/tmp}/rg-rdma-tls.XXXXXX")
pids=()
pass=0
fail=0
TOKEN=rdma-tls-token-$RANDOM$RANDOM
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  if [ "$fail" -gt 0 ]; then
    echo "--- server log (last 30 lines):"; tail -n 30 "$work/server.log" 2>/dev/null | sed 's/^/  | /'
  fi
  rm -rf "$work"
}
trap cleanup EXIT

pki() {
  cd "$work" || return 1
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
  openssl req -x509 "${ec[@]}" -days 2 -subj /CN=rg-rdma-test-ca -keyout ca.key -out ca.pem &&
  openssl req "${ec[@]}" -subj /CN=rg-rdma-server -keyout srv.key -out srv.csr &&
  printf 'subjectAltName=IP:%s\n' "$ip" >srv.ext &&
  openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile srv.ext -out srv.pem
} >"$work/pki.log" 2>&1
pki || { cat "$work/pki.log"; echo "FAIL: cannot make test certificates"; echo "0 passed, 1 failed"; exit 1; }
printf '%s\n' "$TOKEN" >"$work/token" && chmod 600 "$work/token"

report() { # NAME OK [why]
  if [ "$2" = 0 ]; then echo "PASS $1 (${3:-})"; pass=$((pass + 1)); else echo "FAIL $1: ${3:-}"; fail=$((fail + 1)); fi
}

port=
srv_pid=
start_server() {
  rm -f "$work/port"
  REMOTE_GPU_LOG=info "$gpud" --listen "rdma+tls://$ip:0" --port-file "$work/port" --driver "$fake" \
    --tls-cert "$work/srv.pem" --tls-key "$work/srv.key" --token-file "$work/token" >>"$work/server.log" 2>&1 &
  srv_pid=$!
  pids+=("$srv_pid")
  local n=300
  while [ $n -gt 0 ]; do
    if [ -s "$work/port" ] && read -r port <"$work/port" && [[ $port =~ ^[0-9]+$ ]]; then return 0; fi
    kill -0 "$srv_pid" 2>/dev/null || break
    sleep 0.1; n=$((n - 1))
  done
  echo "remote-gpud did not start on rdma+tls://$ip:"; tail -n 20 "$work/server.log" | sed 's/^/  | /'
  return 1
}

# client TOKEN PORT PROGRAM: libremote.so over rdma+tls
client() {
  REMOTE_GPU=rdma+tls://$ip:$2 REMOTE_GPU_TLS_CA=$work/ca.pem REMOTE_GPU_TOKEN=$1 LD_PRELOAD=$lib RGTEST_FAKE=1 \
    timeout 300 "$3"
}

t_e2e() {
  local why='' p before
  before=$(grep -c 'rdma session on port' "$work/server.log")
  for p in copies memsets; do
    client "$TOKEN" "$port" "$bin/$p" >"$work/$p.out" 2>"$work/$p.err" || { why="$p: exit status $? ($(tail -n 2 "$work/$p.err"))"; break; }
    if [ -f "$root/tests/e2e/expected/$p.out" ]; then
      grep -v '^expect ' "$work/$p.out" | diff -u "$root/tests/e2e/expected/$p.out" - >/dev/null || { why="$p: stdout differs"; break; }
    fi
  done
  local after; after=$(grep -c 'rdma session on port' "$work/server.log")
  [ -z "$why" ] && [ "$after" -ge $((before + 2)) ] || why="${why:-the server set up $((after - before)) rdma sessions for 2 programs}"
  report e2e "$([ -z "$why" ] && echo 0 || echo 1)" "${why:-copies and memsets over rdma+tls://$ip, sessions on rdma}"
}

t_token() {
  local why='' kids_before kids
  kids_before=$(pgrep -P "$srv_pid" | wc -l)
  if client wrong-token "$port" "$bin/memsets" >"$work/tok.out" 2>"$work/tok.err"; then
    why="a wrong token was served"
  fi
  grep -q 'REMOTE_GPU_TOKEN does not match' "$work/tok.err" || why="${why:-the client did not say why: $(tail -n 1 "$work/tok.err")}"
  grep -q 'wrong token' "$work/server.log" || why="${why:-no 'wrong token' in the server log}"
  kids=$(pgrep -P "$srv_pid" | wc -l)
  [ "$kids" -le "$kids_before" ] || why="${why:-a session process started for a wrong token}"
  report token "$([ -z "$why" ] && echo 0 || echo 1)" "${why:-refused inside TLS, no session process}"
  sleep 0.5 # the source's back-off (250 ms after one wrong token)
}

t_cookie() {
  local why=''
  REMOTE_GPU_TOKEN=$TOKEN REMOTE_GPU_TLS_CA=$work/ca.pem timeout 60 "$probe" "$ip" "$port" cookie >"$work/cookie.out" 2>&1 ||
    why="$(grep -v '^ok' "$work/cookie.out" | head -n 3 | tr '\n' ' ')"
  sed 's/^/  /' "$work/cookie.out"
  report cookie "$([ -z "$why" ] && echo 0 || echo 1)" "${why:-none, a wrong one and a reused one refused; the right one admitted}"
}

t_late() {
  local why=''
  REMOTE_GPU_TOKEN=$TOKEN REMOTE_GPU_TLS_CA=$work/ca.pem timeout 60 "$probe" "$ip" "$port" late 12 >"$work/late.out" 2>&1 ||
    why="$(grep -v '^ok' "$work/late.out" | head -n 3 | tr '\n' ' ')"
  report late "$([ -z "$why" ] && echo 0 || echo 1)" "${why:-the right cookie 12 s late refused}"
}

t_capture() {
  local why='' tport
  python3 "$root/tests/tls/tap.py" "$work/tap.port" "$port" "$work/tap.cap" "$ip" &
  pids+=($!)
  for _ in $(seq 50); do [ -s "$work/tap.port" ] && break; sleep 0.1; done
  read -r tport <"$work/tap.port" 2>/dev/null || why="the recording proxy did not start"
  [ -z "$why" ] && { client "$TOKEN" "$tport" "$bin/memsets" >/dev/null 2>"$work/cap.err" || why="memsets through the proxy failed: $(tail -n 2 "$work/cap.err")"; }
  local n; n=$(stat -c %s "$work/tap.cap" 2>/dev/null || echo 0)
  [ -z "$why" ] && [ "$n" -gt 200 ] || why="${why:-the proxy saw only $n bytes}"
  grep -qa "$TOKEN" "$work/tap.cap" && why="${why:-the token crossed the TCP side in clear}"
  grep -qa "rdma" "$work/tap.cap" && why="${why:-the hello crossed the TCP side in clear}"
  report capture "$([ -z "$why" ] && echo 0 || echo 1)" "${why:-$n bytes from the client on the TCP side, no token in them}"
}

t_insecure() {
  local why=''
  if timeout 30 "$gpud" --listen "rdma://$ip:0" --driver "$fake" >"$work/insecure.log" 2>&1; then
    why="rdma:// off loopback started without --insecure"
  fi
  grep -q 'refusing to listen' "$work/insecure.log" || why="${why:-no refusal: $(tail -n 1 "$work/insecure.log")}"
  report insecure "$([ -z "$why" ] && echo 0 || echo 1)" "${why:-rdma:// still refused without --insecure; rdma+tls:// needs none}"
}

echo "remote-gpud: $gpud (rdma+tls://$ip, driver test double)"
start_server || { echo "0 passed, 1 failed"; exit 1; }
t_e2e
t_token
t_cookie
t_late
t_capture
t_insecure
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
