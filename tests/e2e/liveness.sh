#!/usr/bin/env bash
# Liveness: a client waiting on a server that stopped (SIGSTOP of its session
# process: the socket stays open and the kernel still ACKs, as in a partition
# or a hung host) or died fails within REMOTE_GPU_TIMEOUT with
# cudaErrorDevicesUnavailable (46), logs it once, and keeps failing; a server
# busy with a kernel longer than the timeout is not taken for dead (it answers
# pings from its I/O thread); REMOTE_GPU_TIMEOUT=0 waits for a stopped server
# until it goes on; a host that drops SYNs fails the first call within
# REMOTE_GPU_TIMEOUT.
#   liveness.sh REMOTE_GPUD FAKE_LIBCUDA LIBREMOTE LIVENESS_PROGRAM
# With LIVENESS_TLS_CERT, LIVENESS_TLS_KEY and LIVENESS_TLS_CA set (files of
# tests/tls/run_tls.sh's test CA, for 127.0.0.1), all of it runs over tls://:
# there reads and writes, and so the progress the watchdog watches, go through
# OpenSSL. With LIVENESS_SHM=1 it runs over shm:// (a unix socket and rings in
# shared memory: a stopped server's rings simply stop moving); the unreachable
# host, a tcp matter, is left out there.
set -u
gpud=$1 fake=$2 lib=$3 prog=$4
scheme= tls_args=() tls_env=()
if [ -n "${LIVENESS_TLS_CA:-}" ]; then
	scheme=tls://
	tls_args=(--tls-cert "$LIVENESS_TLS_CERT" --tls-key "$LIVENESS_TLS_KEY")
	tls_env=(REMOTE_GPU_TLS_CA="$LIVENESS_TLS_CA")
fi
TIMEOUT=2      # the clients' REMOTE_GPU_TIMEOUT
KERNEL_MS=5000 # every kernel on the server: well past the timeout
BOUND=6        # a failure must come within this many seconds (generous)
work=$(mktemp -d /tmp/rg-live.XXXXXX)
srv=
sess=
fail=0
pass=0

cleanup() {
	if [ -n "$sess" ]; then kill -CONT "$sess" 2>/dev/null; kill -KILL "$sess" 2>/dev/null; fi
	if [ -n "$srv" ]; then kill -TERM "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; fi
	if [ $fail -eq 0 ]; then rm -rf "$work"; else echo "scratch folder kept: $work"; fi
}
trap cleanup EXIT

listen=127.0.0.1:0
[ -n "${LIVENESS_SHM:-}" ] && listen=shm://$work/gpud.sock
FAKECUDA_KERNEL_MS=$KERNEL_MS "$gpud" --listen "$listen" --port-file "$work/port" --driver "$fake" \
	"${tls_args[@]}" 2>"$work/server.log" &
srv=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
[ -s "$work/port" ] || { echo "remote-gpud did not start:"; tail -n 5 "$work/server.log"; fail=1; exit 1; }
port=$(cat "$work/port")
target=${scheme}127.0.0.1:$port
[ -n "${LIVENESS_SHM:-}" ] && target=$listen

bad() {
	echo "FAIL $name: $*"
	sed 's/^/  | /' "$work/$name.out" "$work/$name.err" | tail -n 12
	fail=$((fail + 1))
}

# run NAME MODE ACTION TIMEOUT: starts the client, waits for "ready", finds its
# session process (the server's newest child), does ACTION to it (stop, kill,
# none), lets the client make its call; the client's pid is in $cli.
run() {
	name=$1
	local mode=$2 action=$3 t=$4
	rm -f "$work/go.$name"
	env "${tls_env[@]}" REMOTE_GPU=$target REMOTE_GPU_TIMEOUT=$t LD_PRELOAD=$lib timeout 60 \
		"$prog" "$mode" "$work/go.$name" >"$work/$name.out" 2>"$work/$name.err" &
	cli=$!
	for _ in $(seq 300); do
		grep -q '^ready' "$work/$name.out" 2>/dev/null && break
		kill -0 $cli 2>/dev/null || break
		sleep 0.1
	done
	sess=$(pgrep -n -P "$srv")
	if ! grep -q '^ready' "$work/$name.out" || [ -z "$sess" ]; then
		bad "client not ready or no session process"
		return 1
	fi
	case $action in
	stop) kill -STOP "$sess" ;;
	kill) kill -KILL "$sess" ;;
	esac
	touch "$work/go.$name"
}

# finish: waits for the client and ends its session process.
finish() {
	wait $cli
	kill -CONT "$sess" 2>/dev/null
	kill -KILL "$sess" 2>/dev/null
	sess=
}

# expect MODE CODE MIN_S MAX_S AFTER_CODE: judges the client's lines.
expect() {
	local line code secs after
	line=$(grep "^$1: " "$work/$name.out")
	read -r _ _ code secs <<<"$line"
	after=$(sed -n 's/^after: [A-Za-z]* \([0-9]*\)$/\1/p' "$work/$name.out")
	if [ -z "$line" ]; then bad "no result line"; return; fi
	if [ "$code" != "$2" ]; then bad "code $code, want $2"; return; fi
	if ! awk -v s="$secs" -v lo="$3" -v hi="$4" 'BEGIN { exit !(s >= lo && s <= hi) }'; then
		bad "took $secs s, want $3..$4 s"
		return
	fi
	if [ "$after" != "$5" ]; then bad "the call after: code '$after', want $5"; return; fi
	if [ "$2" = 46 ] && [ "$(grep -c 'no sign of life\|connection to .* lost' "$work/$name.err")" != 1 ]; then
		bad "want one log line saying the server is lost"
		return
	fi
	echo "ok   $name: $line"
	pass=$((pass + 1))
}

# A kernel twice the timeout: pings keep the session alive, the call succeeds.
run busy_sync sync none $TIMEOUT && { finish; expect sync 0 $((KERNEL_MS / 1000 - 1)) 30 0; }

# Stopped: the waiting call and a copy the socket cannot take both fail in time
# (not at once: the server is given the whole timeout).
run stopped_sync sync stop $TIMEOUT && { finish; expect sync 46 1 $BOUND 46; }
run stopped_h2d h2d stop $TIMEOUT && { finish; expect h2d 46 1 $BOUND 46; }

# Killed: the connection breaks, the call fails at once.
run killed_sync sync kill $TIMEOUT && { finish; expect sync 46 0 $BOUND 46; }
run killed_h2d h2d kill $TIMEOUT && { finish; expect h2d 46 0 $BOUND 46; }

# REMOTE_GPU_TIMEOUT=0: still waiting after twice the timeout, and done once
# the server goes on.
if run forever_sync sync stop 0; then
	sleep $((2 * TIMEOUT))
	if kill -0 $cli 2>/dev/null; then
		kill -CONT "$sess"
		finish
		expect sync 0 $((2 * TIMEOUT)) 30 0
	else
		finish
		bad "the client did not wait for a stopped server with REMOTE_GPU_TIMEOUT=0"
	fi
fi

# Unreachable: a host that drops SYNs (a loopback listener whose accept queue
# is full: Linux then drops further SYNs, as from a host that is down) fails
# the first call in REMOTE_GPU_TIMEOUT with 46, saying so, rather than after
# the kernel's two minutes of SYN retries.
name=unreachable
if [ -n "${LIVENESS_SHM:-}" ]; then
	echo "$pass passed, $fail failed"
	[ $fail -eq 0 ]
	exit
fi
python3 -c 'import socket, sys, time
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(0)
fill = []
while len(fill) < 16:
    c = socket.socket(); c.settimeout(0.3)
    try: c.connect(l.getsockname())
    except OSError: break
    fill.append(c)
open(sys.argv[1], "w").write("%d\n" % l.getsockname()[1]); time.sleep(120)' "$work/hole.port" &
hole=$!
for _ in $(seq 50); do [ -s "$work/hole.port" ] && break; sleep 0.1; done
t0=$(date +%s.%N)
env "${tls_env[@]}" REMOTE_GPU=${scheme}127.0.0.1:$(cat "$work/hole.port") REMOTE_GPU_TIMEOUT=$TIMEOUT \
	LD_PRELOAD=$lib timeout 60 \
	"$(dirname "$prog")/probe" >"$work/$name.out" 2>"$work/$name.err"
rc=$?
secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
kill "$hole" 2>/dev/null
wait "$hole" 2>/dev/null
if [ $rc = 0 ]; then
	bad "served by a host that drops SYNs?"
elif ! grep -q '(46)$' "$work/$name.err"; then
	bad "want cudaErrorDevicesUnavailable (46)"
elif ! grep -q "no connection within $TIMEOUT s (REMOTE_GPU_TIMEOUT)" "$work/$name.err"; then
	bad "want a log line naming the host and REMOTE_GPU_TIMEOUT"
elif ! awk -v s="$secs" -v lo=$((TIMEOUT - 1)) -v hi=$BOUND 'BEGIN { exit !(s >= lo && s <= hi) }'; then
	bad "took $secs s, want $((TIMEOUT - 1))..$BOUND s"
else
	echo "ok   $name: failed with 46 after $secs s"
	pass=$((pass + 1))
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
