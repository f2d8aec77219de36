#!/usr/bin/env bash
# Striped copies over tcp (frontend/src/stripe.c, backend/src/stripe.h) with
# small settings, so that every boundary is crossed at small sizes: three
# stripes, striping from 64 KiB, pieces of 64 KiB.
#  1. stripes copies: exact bytes at sizes around the threshold, the split and
#     the pieces, and jumps to 9 and 21 MiB, pageable and pinned, both ways;
#     the client says it opened three stripe connections, the server that it
#     listened for them, and that none of the session's copies went through
#     pageable memory (a stripe thread regrows a big staging buffer itself
#     rather than receive into malloc'd memory); stripes burst: large H2D
#     copies back to back, at 9 then 21 MiB, exact (a loaded machine may keep
#     both big buffers busy past the wait, so its count is not checked);
#  2. stripes kill: one of the client's stripe sockets shut down, the next
#     copy fails with cudaErrorOperatingSystem, later ones are exact over the
#     main connection; the server's memory is back at its baseline;
#  3. a server with --stripes 0: no stripes, the same copies exact.
#   stripes.sh REMOTE_GPUD FAKE_LIBCUDA LIBREMOTE STRIPES_PROGRAM
set -u
gpud=$1 fake=$2 lib=$3 prog=$4
. "$(dirname "$0")/shm_lib.sh"

start() {
	rm -f "$work/port"
	REMOTE_GPU_LOG=warn,backend=info "$gpud" --listen 127.0.0.1:0 --port-file "$work/port" --driver "$fake" \
		--drain-seconds 0 "$@" 2>>"$work/server.log" &
	srv=$!
	for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
	[ -s "$work/port" ] || { bad "remote-gpud did not start"; tail -n 5 "$work/server.log"; exit 1; }
	export REMOTE_GPU=127.0.0.1:$(cat "$work/port")
}
stop() { kill -TERM "$srv"; wait "$srv"; srv=; }
export REMOTE_GPU_STRIPES=3 REMOTE_GPU_STRIPE_MIN=65536 REMOTE_GPU_STRIPE_KB=64

start
base=$(client "$probe") || bad "probe"
REMOTE_GPU_LOG=debug client "$prog" copies >"$work/copies.out" 2>"$work/copies.err" || bad "stripes copies failed"
grep -q MISMATCH "$work/copies.out" && bad "stripes copies: bytes differ"
[ "$(grep -c ': ok fnv=' "$work/copies.out")" = 18 ] || bad "stripes copies: not 18 exact copies"
client "$prog" burst >"$work/burst.out" 2>"$work/burst.err" || bad "stripes burst failed"
grep -q MISMATCH "$work/burst.out" && bad "stripes burst: bytes differ"
[ "$(grep -c ': ok fnv=' "$work/burst.out")" = 8 ] || bad "stripes burst: not 8 exact copies"
grep -q "striped copies: 3 connections" "$work/copies.err" || bad "the client opened no stripes"
grep -q "stripes: listening" "$work/server.log" || bad "the server listened for no stripes"
client "$prog" kill >"$work/kill.out" 2>"$work/kill.err" || bad "stripes kill failed"
grep -q "copy with a stripe shut down: cudaErrorOperatingSystem" "$work/kill.out" || bad "stripes kill: no failed copy"
grep -q "after the stripe died: ok" "$work/kill.out" || bad "stripes kill: copies after it not exact"
sleep 0.3 # the sessions' teardowns are asynchronous
[ "$(client "$probe")" = "$base" ] || bad "memory not back at baseline"
stop
pg=$(grep -F "stripes copies) ended" "$work/server.log" | grep -o '[0-9]* copies through pageable memory')
[ "$pg" = "0 copies through pageable memory" ] || bad "stripes copies: server says ${pg:-nothing}"

start --stripes 0
REMOTE_GPU_LOG=info client "$prog" copies >"$work/off.out" 2>"$work/off.err" || bad "copies without stripes failed"
[ "$(grep -c ': ok fnv=' "$work/off.out")" = 18 ] || bad "copies without stripes: not 18 exact copies"
client "$prog" burst >"$work/off-burst.out" 2>&1 || bad "burst without stripes failed"
[ "$(grep -c ': ok fnv=' "$work/off-burst.out")" = 8 ] || bad "burst without stripes: not 8 exact copies"
grep -q "striped copies: the server offers none" "$work/off.err" || bad "the client did not say the server offers no stripes"
stop

[ $fail -eq 0 ] && echo "stripes: all passed"
exit $((fail > 0))
