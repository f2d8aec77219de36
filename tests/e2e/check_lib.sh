# Sourced by launcher.sh and cmdline.sh: a scratch folder, servers ended at
# exit, and one check of a command's exit status and output.

# check_scratch NAME: $work (kept when something failed), $pids (servers to
# end at exit: SIGTERM, then wait), $fail (failed checks).
check_scratch() {
	work=$(mktemp -d "/tmp/rg-$1.XXXXXX")
	pids=()
	fail=0
	trap check_cleanup EXIT
}
check_cleanup() {
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	if [ "$fail" -eq 0 ]; then rm -rf "$work"; else echo "scratch folder kept: $work"; fi
}
#
# check NAME WANT_STATUS PATTERN... -- CMD...: runs CMD (stdout and stderr to
# $work/NAME.out), wants its exit status and every PATTERN (grep -E) in its
# output; a PATTERN starting with ! must not be there.
check() {
	local name=$1 want=$2 pat
	shift 2
	local pats=()
	while [ "$1" != -- ]; do pats+=("$1"); shift; done
	shift
	"$@" >"$work/$name.out" 2>&1
	local st=$? ok=1
	[ "$st" = "$want" ] || { echo "FAIL $name: exit status $st, want $want"; ok=0; }
	for pat in "${pats[@]}"; do
		if [ "${pat:0:1}" = '!' ]; then
			grep -Eq -- "${pat:1}" "$work/$name.out" && { echo "FAIL $name: has '${pat:1}'"; ok=0; }
		else
			grep -Eq -- "$pat" "$work/$name.out" || { echo "FAIL $name: no '$pat'"; ok=0; }
		fi
	done
	if [ $ok = 1 ]; then echo "ok $name"; else sed 's/^/  | /' "$work/$name.out" | tail -n 20; fail=$((fail + 1)); fi
}
