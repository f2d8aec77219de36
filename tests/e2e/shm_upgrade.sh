#!/usr/bin/env bash
# The move from tcp to shm:// on the server's host (frontend/src/rt_upgrade.c):
# remote-gpud --listen 127.0.0.1:0 --shm-offer PATH. A client with
# REMOTE_GPU=127.0.0.1:PORT (no scheme) is offered the socket in the hello
# reply, moves there (its log says so, the server sees a session from a shm
# peer) and its pinned copies are zero-copy (pinned_shm copies, exact bytes);
# REMOTE_GPU=tcp://127.0.0.1:PORT stays on tcp; a server without --shm-offer
# offers nothing (every other e2e test). In process isolation, so the offer
# travels to the session processes and the shm socket's connections are
# handed over like tcp's.
#   shm_upgrade.sh REMOTE_GPUD FAKE_LIBCUDA LIBREMOTE PINNED_SHM_PROGRAM
set -u
gpud=$1 fake=$2 lib=$3 prog=$4
. "$(dirname "$0")/shm_lib.sh"
REMOTE_GPU_LOG=info "$gpud" --listen 127.0.0.1:0 --shm-offer "$work/gpud.sock" --port-file "$work/port" \
	--driver "$fake" 2>"$work/server.log" &
srv=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
[ -s "$work/port" ] || { bad "remote-gpud did not start"; tail -n 5 "$work/server.log"; exit 1; }
port=$(cat "$work/port")
[ -S "$work/gpud.sock" ] || bad "no socket at --shm-offer's path"

export REMOTE_GPU_LOG=info
shm_sessions() { grep -c "connection from shm\.uid" "$work/server.log"; }

REMOTE_GPU=127.0.0.1:$port client "$prog" copies >"$work/implicit.out" 2>"$work/implicit.err"
rc=$?
if [ $rc -ne 0 ] || ! grep -q '^pinned_shm: done' "$work/implicit.out"; then
	bad "pinned_shm over 127.0.0.1:$port exited $rc"
	tail -n 5 "$work/implicit.err"
fi
grep -q "moved to shm://$work/gpud.sock" "$work/implicit.err" || bad "REMOTE_GPU=127.0.0.1:$port did not move to shm"
grep -q "shared regions: [1-9]" "$work/server.log" || sleep 1
n=$(shm_sessions)
[ "$n" = 1 ] || bad "$n sessions from a shm peer, want 1"
[ $fail -eq 0 ] && echo "ok   127.0.0.1:$port: moved to shm://, pinned copies exact"

REMOTE_GPU=tcp://127.0.0.1:$port client "$probe" >"$work/explicit.out" 2>"$work/explicit.err" ||
	bad "probe over tcp:// failed"
grep -q "moved to shm" "$work/explicit.err" && bad "REMOTE_GPU=tcp://... moved to shm"
n=$(shm_sessions)
[ "$n" = 1 ] || bad "tcp:// made a session from a shm peer"
grep -q '^free=' "$work/explicit.out" && echo "ok   tcp://127.0.0.1:$port: stayed on tcp"
kill -0 "$srv" 2>/dev/null || bad "the server died"
[ $fail -eq 0 ] || { tail -n 20 "$work/server.log"; exit 1; }
exit 0
