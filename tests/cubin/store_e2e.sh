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
# Issue 24: a store of the old XXH3-128 addresses is refused by the server and by
# remote-cubin; the client's cache of image hashes is filled, private (0700), and
# a stale entry in it is noticed (the server refuses the upload) and mended; over
# the store quota the program's load fails cleanly and nothing is stored.
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
export REMOTE_GPU_HASH_CACHE=$work/hash-cache
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

# The client's hash cache: filled by the runs above, the user's own.
hc=$(ls "$REMOTE_GPU_HASH_CACHE"/v1-* 2>/dev/null | head -n1)
[ "$(stat -c %a "$REMOTE_GPU_HASH_CACHE" 2>/dev/null)" = 700 ] && ok "hash cache folder is mode 0700" ||
	bad "hash cache folder: mode $(stat -c %a "$REMOTE_GPU_HASH_CACHE" 2>&1)"
if [ -n "$hc" ] && [ "$(wc -l <"$hc")" -ge "$n" ]; then
	ok "hash cache holds the program's images ($(wc -l <"$hc") lines)"
	# A stale entry (as if the file changed under the same identity): every hash
	# replaced by another. The server refuses the upload under the wrong name, the
	# client hashes the bytes, loads, and files the right hash.
	sed -i 's/ [0-9a-f]*$/ 00000000000000000000000000000000000000000000000000000000000000ff/' "$hc"
	start "$store"
	expect "stale hash cache: each image sent, refused, then loaded by its hash" "$n $n" "$(uploads)"
	grep -q "stale entry" "$work/err" && ok "client noticed the stale entries" || bad "no stale-entry warning"
	expect "mended hash cache: nothing uploaded" "$n 0" "$(uploads)"
	grep -q "stale entry" "$work/err" && bad "stale entries again after mending" || ok "hash cache mended"
	stop
	ls "$store" | grep -q '^0*ff\.fatbin$' && bad "an image stored under the stale name" || ok "nothing stored under the stale name"
else
	bad "hash cache not filled (${hc:-no file})"
fi
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
# Issue 24: a store of the old format (XXH3-128 names, no FORMAT) is never read.
old=$work/old
mkdir "$old"
x=0123456789abcdef0123456789abcdef
printf '%s 4 prog\n' $x >"$old/index"
printf 'junk' >"$old/$x.fatbin"
if timeout 10 "$gpud" --listen 127.0.0.1:0 --driver "$fake" --cubin-store "$old" >"$work/old.log" 2>&1; then
	bad "server ran on an XXH3 store"
else
	grep -q "older format" "$work/old.log" && ok "server refuses an XXH3 store" || { bad "server: no clear message"; cat "$work/old.log"; }
fi
"$cubin" extract "$work/prog" --store "$old" >"$work/old-x.log" 2>&1 && bad "extract wrote into an XXH3 store" ||
	{ grep -q "older format" "$work/old-x.log" && ok "extract refuses an XXH3 store" || bad "extract: no clear message"; }
"$cubin" verify "$old" >"$work/old-v.log" 2>&1 && bad "verify passed an XXH3 store" || ok "verify refuses an XXH3 store"
[ ! -e "$old/FORMAT" ] && [ "$(ls "$old" | wc -l)" = 2 ] && ok "the XXH3 store is left as it was" || bad "the XXH3 store was changed"

# Over the store quota: the program's load fails cleanly, nothing is stored.
q=$work/quota
rm -f "$work/port"
"$gpud" --listen 127.0.0.1:0 --port-file "$work/port" --driver "$fake" --cubin-store "$q" --store-quota 1 2>>"$work/server.log" &
srv=$!
for _ in $(seq 200); do [ -s "$work/port" ] && break; sleep 0.05; done
REMOTE_GPU=127.0.0.1:$(cat "$work/port") LD_PRELOAD="$lib" timeout 60 "$work/prog" >"$work/out" 2>"$work/err"
st=$?
[ $st -ne 0 ] && [ $st -lt 124 ] && ok "over quota: the program fails cleanly (exit $st)" ||
	{ bad "over quota: exit status $st"; tail -3 "$work/err"; }
grep -q "store quota" "$work/err" && ok "over quota: the client says why" || bad "over quota: no message"
ls "$q"/*.fatbin >/dev/null 2>&1 && bad "over quota: an image was stored" || ok "over quota: nothing stored"
stop

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
