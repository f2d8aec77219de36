# Sourced by shm_pinned.sh and shm_upgrade.sh (after gpud, fake, lib, prog are
# set): the scratch folder (kept when a check failed), the server's end, the
# failure count, and the skip when something is not built.
probe=$(dirname "$prog")/probe
work=$(mktemp -d /tmp/rg-shm.XXXXXX)
srv=
fail=0
cleanup() {
	if [ -n "$srv" ]; then kill -TERM "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; fi
	if [ $fail -eq 0 ] && [ -z "${KEEP:-}" ]; then rm -rf "$work"; else echo "scratch folder kept: $work"; fi
}
trap cleanup EXIT
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
for f in "$gpud" "$fake" "$lib" "$prog" "$probe"; do
	[ -e "$f" ] || { echo "SKIP: $f not built"; exit 77; }
done
# A sanitizer build of libremote.so (tests/asan/run.sh) needs its runtime
# first in LD_PRELOAD; the programs' own leaks are not checked.
preload=$lib
san_rt=$(ldd "$lib" 2>/dev/null | sed -n 's/^[[:space:]]*libasan\.so[^ ]* => \([^ ]*\).*/\1/p')
client_asan=${ASAN_OPTIONS:-}
if [ -n "$san_rt" ]; then
	preload=$san_rt:$lib
	client_asan="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
client() { env ASAN_OPTIONS="$client_asan" LD_PRELOAD="$preload" timeout 120 "$@"; }
