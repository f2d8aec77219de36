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
