#!/usr/bin/env bash
# The kernel image store end to end (issue 3): remote-gpud on the driver test double
# with --cubin-store, a CUDA program through libremote.so, and what the client had
# to upload each time (libremote.so logs "kernel images: N loaded, M uploaded").
#
#   store_e2e.sh REMOTE_GPUD FAKE_LIBCUDA LIBREMOTE REMOTE_CUBIN NVCC_BUILD SRC.cu
#
# Checks: an empty store makes the client upload once; a second client, and a
# restarted server on the same store, upload nothing; a store filled ahead of time
# by `remote-cubin extract` of the program needs no upload at all; a damaged store
# entry is detected, uploaded again, and repaired (remote-cubin verify passes).
set -u
gpud=$1 fake=$2 lib=$3 cubin=$4 nvccb=$5 src=$6
work=$(mktemp -d /tmp/rg-store.XXXXXX)
trap 'kill $srv 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
pass=0 fail=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

"$nvccb" -o "$work/prog" "$src" >"$work/nvcc.log" 2>&1 || { echo "SKIP: nvcc failed"; cat "$work/nvcc.log"; exit 77; }

srv=
start() { # STORE
	rm -f "$work/port"
	"$gpud" --listen 127.0.0.1:0 --port-file "$work/port" --driver "$fake" --cubin-store "$1" 2>>"$work/server.log" &
	srv=$!
	for _ in $(seq 200); do [ -s "$work/port" ] && return 0; sleep 0.05; done
	echo "server did not start"; cat "$work/server.log"; exit 1
}
stop() { kill $srv; wait $srv 2>/dev/null; }
uploads() { # -> "loaded uploaded" of one client run
	REMOTE_GPU=127.0.0.1:$(cat "$work/port") REMOTE_GPU_LOG=info LD_PRELOAD="$lib" "$work/prog" >"$work/out" 2>"$work/err" ||
		{ echo "program failed:"; tail -5 "$work/err"; }
	sed -n 's/.*kernel images: \([0-9]*\) loaded, \([0-9]*\) uploaded.*/\1 \2/p' "$work/err" | tail -n1
}
expect() { # WHAT LOADED-UPLOADED-PAIR GOT
	if [ "$3" = "$2" ]; then ok "$1 ($3)"; else bad "$1: want loaded/uploaded '$2', got '$3'"; fi
}

store=$work/store
start "$store"
first=$(uploads)
n=${first%% *}
[ -n "$n" ] && [ "$n" -gt 0 ] || { bad "no kernel image loaded (got '$first')"; echo "$pass passed, $fail failed"; exit 1; }
expect "empty store: every image uploaded once" "$n $n" "$first"
expect "second client: nothing uploaded" "$n 0" "$(uploads)"
stop
start "$store"
expect "restarted server, warm store: nothing uploaded" "$n 0" "$(uploads)"
stop

# A damaged entry: flip one byte in the middle of every stored image.
for f in "$store"/*.fatbin; do
	size=$(stat -c %s "$f")
	printf '\xff' | dd of="$f" bs=1 seek=$((size / 2)) conv=notrunc status=none
done
"$cubin" verify "$store" >"$work/verify1" 2>&1 && bad "verify passed a damaged store" || ok "verify reports the damaged store"
start "$store"
expect "damaged entries: uploaded again" "$n $n" "$(uploads)"
grep -q "damaged" "$work/server.log" && ok "server logged the damaged entry" || bad "server did not log the damage"
stop
"$cubin" verify "$store" >"$work/verify2" 2>&1 && ok "store repaired by the upload" || { bad "store still damaged"; cat "$work/verify2"; }

# Filled ahead of time from the program itself: no upload at all.
pre=$work/pre
"$cubin" extract "$work/prog" --store "$pre" >"$work/extract.log" 2>&1 || bad "remote-cubin extract failed"
start "$pre"
expect "store extracted from the program: nothing uploaded" "$n 0" "$(uploads)"
stop
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
