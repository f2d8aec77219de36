#!/usr/bin/env bash
# A client ends, then the server gets SIGTERM at once: the session process must
# not crash on the way out (its listener was closed by the connection's end and
# again by the signal: a use after free, seen as "killed by signal 11").
#   sigterm_after_client.sh REMOTE_GPUD FAKE_LIBCUDA LIBREMOTE PROGRAM
set -u
gpud=$1 fake=$2 lib=$3 prog=$4
work=$(mktemp -d /tmp/rg-term.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail=0
for i in $(seq 8); do
	rm -f "$work/port"
	"$gpud" --listen 127.0.0.1:0 --port-file "$work/port" --driver "$fake" 2>"$work/log" &
	s=$!
	for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
	REMOTE_GPU=127.0.0.1:$(cat "$work/port") LD_PRELOAD="$lib" "$prog" >/dev/null 2>&1
	kill -TERM $s
	wait $s
	rc=$?
	if [ $rc -ne 0 ] || grep -q "killed by signal" "$work/log"; then
		echo "round $i: exit $rc; server log:"; tail -n 5 "$work/log"
		fail=$((fail + 1))
	fi
done
echo "$((8 - fail)) passed, $fail failed"
[ $fail -eq 0 ]
