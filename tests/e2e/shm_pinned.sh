#!/usr/bin/env bash
# Pinned memory over shm:// (shared regions, transport/README.md "Shared
# memory"): copies of cudaMallocHost / cudaHostAlloc memory are equal byte for
# byte at several sizes and offsets, and so are large synchronous copies of
# pageable memory, which take the channel's bounce region (pinned_shm
# copies); every copy of 4 KiB or
# more the server made ran between the device and a range it had registered
# with cuMemHostRegister (the driver test double's trace, FAKECUDA_LOG), so no
# such copy went through the rings and the staging buffers; every registration
# was released (REMOTE_GPU_REGION_SYNC_MIN=0: every pinned copy a region copy;
# the same copies with the default, where small synchronous ones to the
# device go as bytes in frames, are equal too; and with a bounce buffer of
# three 320 KiB slots, each memcpy split across three threads, so the large
# pageable copies wrap around the slots many times). Then a client killed with copies from and to pinned memory in
# flight (pinned_shm die): the server releases its registrations, keeps no
# mapping or descriptor of its memory, its device memory is back at baseline,
# and it serves the next client. Last, a client in a loop of large pageable
# copies (the bounce pipeline) whose server is killed: the copy in flight
# fails, and the client ends (pinned_shm loop). Thread isolation, so that the sessions live
# in the server's own process where whatever they left would show.
#   shm_pinned.sh REMOTE_GPUD FAKE_LIBCUDA LIBREMOTE PINNED_SHM_PROGRAM
set -u
gpud=$1 fake=$2 lib=$3 prog=$4
. "$(dirname "$0")/shm_lib.sh"
REMOTE_GPU_LOG=warn,backend=info FAKECUDA_LOG=$work/fk.log "$gpud" --listen "shm://$work/gpud.sock" --port-file "$work/port" --driver "$fake" \
	--isolation thread 2>"$work/server.log" &
srv=$!
for _ in $(seq 100); do [ -e "$work/port" ] && break; sleep 0.05; done
[ -e "$work/port" ] || { bad "remote-gpud did not start"; tail -n 5 "$work/server.log"; exit 1; }
export REMOTE_GPU=shm://$work/gpud.sock

base=$(client "$probe") || bad "probe"

# registrations: successful cuMemHostRegister and cuMemHostUnregister calls
regs() { grep -c "cuMemHostRegister[_v0-9]*(.*) = CUDA_SUCCESS" "$work/fk.log"; }
unregs() { grep -c "cuMemHostUnregister[_v0-9]*(.*) = CUDA_SUCCESS" "$work/fk.log"; }

# the copies of 4 KiB or more whose host side is not inside a registered range
unregistered_copies() {
	awk '
	function hex(s,   v, i, c) {
		v = 0; s = tolower(substr(s, 3))
		for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)) - 1; v = v * 16 + c }
		return v
	}
	/cuMemHostRegister[_v0-9]*\(.*\) = CUDA_SUCCESS/ {
		split(substr($0, index($0, "(") + 1), a, ", "); lo[++n] = hex(a[1]); hi[n] = hex(a[1]) + a[2]
	}
	/cuMemcpy(HtoD|DtoH)Async[_v0-9]*\(.*\) = CUDA_SUCCESS/ {
		split(substr($0, index($0, "(") + 1), a, ", "); len = a[3] + 0
		h = /HtoD/ ? hex(a[2]) : hex(a[1])
		if (len < 4096) next
		ok = 0
		for (i = 1; i <= n; i++) if (h >= lo[i] && h + len <= hi[i]) ok = 1
		if (!ok) { bad++; if (bad < 4) print "  unregistered: " $0 > "/dev/stderr" }
		copies++
	}
	END { print bad + 0, copies + 0 }' "$work/fk.log"
}

# copies NAME WHAT [VAR=VALUE...]: pinned_shm copies with those settings, its
# output in NAME.out and NAME.err; 0 when it ran to the end (its checks passed)
copies() {
	local name=$1 what=$2 rc
	shift 2
	client env "$@" "$prog" copies >"$work/$name.out" 2>"$work/$name.err"
	rc=$?
	if [ $rc -eq 0 ] && grep -q '^pinned_shm: done' "$work/$name.out"; then
		echo "ok   $what: equal"
		return 0
	fi
	bad "pinned_shm copies ($what) exited $rc"
	tail -n 8 "$work/$name.out" "$work/$name.err"
	return 1
}

before=$(grep -c "served by the receiving thread" "$work/server.log") # sessions ended so far
copies copies "copies, every pinned one a region copy" REMOTE_GPU_REGION_SYNC_MIN=0
read -r nbad ncopies < <(unregistered_copies)
r=$(regs) u=$(unregs)
if [ "$nbad" != 0 ] || [ "$ncopies" -lt 200 ]; then
	bad "$nbad of $ncopies copies of 4 KiB or more were not from or to registered memory"
else
	echo "ok   copies: $ncopies copies between the device and registered client memory"
fi
if [ "$r" -lt 5 ] || [ "$r" != "$u" ]; then bad "$r registrations, $u released"; else echo "ok   copies: $r registrations, all released"; fi
# nothing queued ahead of them: the synchronous copies (pinned ones as region
# copies answered when done, pageable ones through staging) were served by the
# thread that received them, without a hand-off to the executor
for _ in $(seq 50); do [ "$(grep -c "served by the receiving thread" "$work/server.log")" -gt "$before" ] && break; sleep 0.1; done
now=$(grep -h "served by the receiving thread" "$work/server.log" | tail -n 1 |
	sed -n 's/.*; \([0-9]*\) synchronous copies served by the receiving thread.*/\1/p')
if [ "${now:-0}" -lt 1 ]; then bad "${now:-no} synchronous copies served by the receiving thread"; else
	echo "ok   copies: $now synchronous copies served by the thread that received them"; fi
copies copies2 "copies, small synchronous ones to the device in frames"
copies copies3 "copies through three bounce slots of 320 KiB, three copy threads" \
	REMOTE_GPU_BOUNCE_CHUNK=$((320 << 10)) REMOTE_GPU_BOUNCE_BYTES=$((960 << 10)) REMOTE_GPU_COPY_THREADS=3

client "$prog" die >"$work/die.out" 2>"$work/die.err"
rc=$?
grep -q '^dying' "$work/die.out" || bad "pinned_shm die did not get to its copies (exit $rc)"
# its session, by the program line of its start, and that session's own line of
# regions (an earlier session's end may still be on its way to the log)
sid=$(sed -n 's/.*session \([0-9]*\) started: .*pinned_shm die .*/\1/p' "$work/server.log" | tail -n 1)
for _ in $(seq 100); do
	grep -q "session ${sid:-none}: shared regions:" "$work/server.log" && [ "$(regs)" = "$(unregs)" ] && break
	sleep 0.1
done
r=$(regs) u=$(unregs)
[ "$r" = "$u" ] || bad "after the killed client: $r registrations, $u released"
# its regions were still registered when it died: the teardown released them
left=$(grep -h "session ${sid:-none}: shared regions:" "$work/server.log" | tail -n 1 |
	sed -n 's/.*; \([0-9]*\) left, \([0-9]*\) registrations released/\1 \2/p')
read -r nleft nrel <<<"$left"
[ "${nleft:-0}" -ge 2 ] && [ "$nleft" = "$nrel" ] || bad "the killed client's session: '$left' (want its 2 regions left and released)"
# the transport unmaps and closes once the connection is freed, just after the
# teardown's log line: give it a few seconds on a loaded machine
held() {
	grep -q 'remote-gpu-pinned' "/proc/$srv/maps" && return 0
	for f in "/proc/$srv/fd"/*; do readlink "$f"; done 2>/dev/null | grep -q 'remote-gpu-pinned'
}
for _ in $(seq 50); do held || break; sleep 0.1; done
grep -q 'remote-gpu-pinned' "/proc/$srv/maps" && bad "the server still maps a dead client's memory"
for f in "/proc/$srv/fd"/*; do readlink "$f"; done 2>/dev/null | grep -q 'remote-gpu-pinned' &&
	bad "the server still holds a dead client's memfd"
after=$(client "$probe") || bad "probe after"
[ "$after" = "$base" ] || bad "device memory not back at baseline: $base before, $after after"
[ $fail -eq 0 ] && echo "ok   killed client: registrations released ($r), no mapping left, memory at baseline"
kill -0 "$srv" 2>/dev/null || bad "the server died"

REMOTE_GPU_TIMEOUT=5 client "$prog" loop >"$work/loop.out" 2>"$work/loop.err" &
cl=$!
for _ in $(seq 100); do grep -q '^looping' "$work/loop.out" && break; sleep 0.05; done
grep -q '^looping' "$work/loop.out" || bad "pinned_shm loop did not get to its copies"
kill -KILL "$srv"
wait "$srv" 2>/dev/null
srv= # gone: nothing for the cleanup
for _ in $(seq 200); do kill -0 "$cl" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$cl" 2>/dev/null; then
	bad "a client copying through the bounce region hangs 10 s after its server died"
	kill -KILL "$cl"
fi
wait "$cl"
rc=$?
if [ $rc -eq 0 ] && grep -q '^copy failed: cuda' "$work/loop.out"; then
	echo "ok   server killed mid-copy: $(grep '^copy failed' "$work/loop.out")"
else
	bad "pinned_shm loop after its server died: exit $rc, $(tail -n 1 "$work/loop.out")"
fi
[ $fail -eq 0 ] || { tail -n 20 "$work/server.log"; exit 1; }
exit 0
