#!/usr/bin/env bash
# remote-gpu (launcher/): run's environment and exit statuses, the token kept
# off command lines, info against a live server, doctor on a good setup, a
# dead port, a wrong token, a TLS-only server reached in clear and with the
# wrong CA, a missing libremote.so, and what it says of programs (shared and
# static CUDA runtime, set-user-ID, static executable). Usage errors exit 2.
#   launcher.sh REMOTE_GPUD FAKE_LIBCUDA REMOTE_GPU_LAUNCHER E2E_BIN
set -u
gpud=$1 fake=$2 rg=$3 bin=$4
[ -x "$bin/devquery" ] || { echo "skipped: e2e programs not built (no nvcc)"; exit 77; }
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"
check_scratch launcher
TOKEN=launcher-test-token-5d1f
printf '%s\n' "$TOKEN" >"$work/token" && chmod 600 "$work/token"
printf 'not-the-token\n' >"$work/wrong" && chmod 600 "$work/wrong"

# start NAME ARGS...: remote-gpud on the driver test double; sets port.
start() {
	local name=$1; shift
	"$gpud" --listen 127.0.0.1:0 --port-file "$work/$name.port" --driver "$fake" "$@" >"$work/$name.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do [ -s "$work/$name.port" ] && break; sleep 0.05; done
	[ -s "$work/$name.port" ] || { echo "FAIL: remote-gpud $name did not start"; cat "$work/$name.log"; fail=1; exit 1; }
	port=$(cat "$work/$name.port")
}


start good --token-file "$work/token"
good=$port
# a port nothing listens on: bind one, close it
dead=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
libdir=$(cd "$(dirname "$rg")/../frontend" && pwd -P)

check version 0 '^remote-gpu [0-9]+\.[0-9]+\.[0-9]+' -- "$rg" --version
check help 0 '--server ADDR' '--token-file F' '--tls-ca F' -- "$rg" --help
check usage_unknown 2 "^remote-gpu: unknown option '--bogus'" "Try 'remote-gpu --help'" -- "$rg" run --bogus -- true
check usage_value 2 "^remote-gpu: option '--server' needs a value" -- "$rg" info --server
check usage_sub 2 "unknown subcommand 'frob'" -- "$rg" frob
check usage_nocmd 2 'run: no command' -- "$rg" run --server 127.0.0.1:1
check usage_noserver 2 'no server' -- env -u REMOTE_GPU "$rg" run -- true
check run_enoent 127 'cannot run /nonexistent' -- "$rg" run --server 127.0.0.1:1 -- /nonexistent
check token_mode 1 'chmod 600' -- sh -c "cp '$work/token' '$work/open' && chmod 644 '$work/open' &&
	'$rg' run --server 127.0.0.1:$good --token-file '$work/open' -- true"

# run: the environment, both option forms, the token in the environment only
check run_env 0 "^PRELOAD=$libdir/libremote.so:/x/pre.so$" "^SERVERS=127.0.0.1:$good,tls://h:1$" \
	"^LDPATH=$libdir/driver:/x/lib$" "^TRITON=$libdir/driver$" "^TOKEN=$TOKEN$" "!^ARGV=.*$TOKEN" -- \
	env LD_PRELOAD=/x/pre.so LD_LIBRARY_PATH=/x/lib "$rg" run --server=127.0.0.1:$good -s tls://h:1 \
	--token-file "$work/token" -- sh -c 'echo "PRELOAD=$LD_PRELOAD"; echo "SERVERS=$REMOTE_GPU";
	echo "LDPATH=$LD_LIBRARY_PATH"; echo "TRITON=$TRITON_LIBCUDA_PATH"; echo "TOKEN=$REMOTE_GPU_TOKEN";
	echo "ARGV=$(tr "\0" " " </proc/$$/cmdline)"' 2>/dev/null
check run_devquery 0 'Fake|device' -- "$rg" run --server 127.0.0.1:$good --token-file "$work/token" -- "$bin/devquery"
check run_static 0 'Fake|device' -- "$rg" run --server 127.0.0.1:$good --token-file "$work/token" -- "$bin/static/devquery"
check run_status 3 -- "$rg" run --server 127.0.0.1:$good -- sh -c 'exit 3'

# info
check info_good 0 "^127.0.0.1:$good$" \
	'^  server      remote-gpud [0-9]+\.[0-9]+\.[0-9]+.*, protocol [0-9]+, driver [0-9]+\.[0-9]+$' \
	'^  device 0    .+, [0-9.]+ GiB \(its GPU 0\)$' '^  round trip  [0-9.]+ us \(median of 20 null calls' \
	'^servers answering: 1 of 1; devices: 1$' -- "$rg" info --server 127.0.0.1:$good --token-file "$work/token"
check info_env 0 '^  device 1    ' '^servers answering: 2 of 2; devices: 2$' -- \
	env REMOTE_GPU=127.0.0.1:$good,127.0.0.1:$good REMOTE_GPU_TOKEN=$TOKEN "$rg" info
check info_dead 1 "^127.0.0.1:$dead$" '^  error       server unreachable' '^servers answering: 1 of 2; devices: 1$' -- \
	"$rg" info -s 127.0.0.1:$good -s 127.0.0.1:$dead --token-file "$work/token"

# doctor
check doctor_good 0 '^ok       libremote.so: ' '^ok       driver folder: ' "^ok       server 127.0.0.1:$good: remote-gpud " \
	'preload in effect: through libremote.so a program sees 1 device' '^no problems found$' -- \
	"$rg" doctor --server 127.0.0.1:$good --token-file "$work/token"
check doctor_dead 1 "^PROBLEM  server 127.0.0.1:$dead: server unreachable" '^1 problem found$' -- \
	"$rg" doctor --server 127.0.0.1:$dead
check doctor_nolib 1 '^PROBLEM  libremote.so not found: REMOTE_GPU_LIB=/nonexistent' -- \
	env REMOTE_GPU_LIB=/nonexistent/libremote.so "$rg" doctor --server 127.0.0.1:$good --token-file "$work/token"
check doctor_shared 0 'links the CUDA runtime dynamically' -- \
	"$rg" doctor --server 127.0.0.1:$good --token-file "$work/token" -- "$bin/devquery"
check doctor_static 0 'links the CUDA runtime statically.*driver API path' -- \
	"$rg" doctor --server 127.0.0.1:$good --token-file "$work/token" -- "$bin/static/devquery"
cp "$bin/devquery" "$work/setuid-prog" && chmod u+s "$work/setuid-prog"
check doctor_setuid 1 'set-user-ID.*ignores LD_PRELOAD' -- \
	"$rg" doctor --server 127.0.0.1:$good --token-file "$work/token" -- "$work/setuid-prog"
if file -L /sbin/ldconfig 2>/dev/null | grep -q 'static'; then
	check doctor_staticexe 1 'is a static executable' -- \
		"$rg" doctor --server 127.0.0.1:$good --token-file "$work/token" -- /sbin/ldconfig
fi

# TLS: a TLS-only server reached in clear, and with a CA that did not sign it
if command -v openssl >/dev/null; then
	(cd "$work" && ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes) &&
		openssl req -x509 "${ec[@]}" -days 2 -subj /CN=rg-ca -keyout ca.key -out ca.pem &&
		openssl req -x509 "${ec[@]}" -days 2 -subj /CN=other-ca -keyout other.key -out other.pem &&
		openssl req "${ec[@]}" -subj /CN=localhost -keyout srv.key -out srv.csr &&
		printf 'subjectAltName=IP:127.0.0.1\n' >srv.ext &&
		openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile srv.ext -out srv.pem
	) >"$work/pki.log" 2>&1 || { echo "FAIL: certificates"; cat "$work/pki.log"; fail=1; exit 1; }
	start tls --tls-cert "$work/srv.pem" --tls-key "$work/srv.key" --token-file "$work/token"
	check doctor_tls_good 0 '^no problems found$' -- \
		"$rg" doctor -s tls://127.0.0.1:$port --tls-ca "$work/ca.pem" --token-file "$work/token"
	check doctor_tls_clear 1 'takes only TLS connections: write tls://host:port' -- \
		"$rg" doctor -s 127.0.0.1:$port --token-file "$work/token"
	check doctor_tls_ca 1 'the TCP connection works but TLS does not' -- \
		"$rg" doctor -s tls://127.0.0.1:$port --tls-ca "$work/other.pem" --token-file "$work/token"
fi
# last, on a server of its own: after a wrong token the server refuses this
# address for a while (docs/SECURITY.md), which the next check would meet
start tokensrv --token-file "$work/token"
check doctor_token 1 "^PROBLEM  server 127.0.0.1:$port: the server refused the token" -- \
	"$rg" doctor --server 127.0.0.1:$port --token-file "$work/wrong"
[ $fail -eq 0 ] && echo "all launcher checks passed"
exit $((fail ? 1 : 0))
