#!/usr/bin/env bash
# tests/gpu/deb_examples.sh: a fresh machine installs the .debs and runs the
# examples (issue 21), on the GPU machine. Called by tests/gpu/run.sh with
# RG_DEB=1, or by hand:
#
#   tests/gpu/deb_examples.sh BUILD_DIR WRAPPER OUT.md
#
# cpack makes the server and client packages from BUILD_DIR; both are
# unpacked (dpkg -x: the machine has no apt, and nothing goes into /) into a
# scratch root. The unpacked remote-gpud serves the real GPU; every example
# the client package ships (share/remote-gpu/examples/cuda, but the faulting
# one) is built from those sources with nvcc as its guide says, run locally,
# and run through the unpacked `remote-gpu run` inside WRAPPER (the GPU-less
# namespace): remote output must equal local byte for byte.
# Appends a section to OUT.md; exit status 0 when every example passed.
set -u -o pipefail
build=$(cd "${1:?usage: deb_examples.sh BUILD_DIR WRAPPER OUT.md}" && pwd)
wrap=${2:?wrapper}
rep=${3:?report}
work=$(mktemp -d /tmp/rg-deb-gpu.XXXXXX)
fail=0
say() { echo "$*" >>"$rep"; }
say ""
say "## The packages on a fresh machine (cpack, dpkg -x, examples from share/remote-gpu/examples)"
say ""
for t in cpack dpkg-deb nvcc; do
	command -v $t >/dev/null || { say "not run: no $t"; exit 1; }
done
(cd "$build" && cpack -G DEB --config CPackConfig.cmake -B "$work/out") >"$work/cpack.log" 2>&1 ||
	{ say "cpack failed: $(tail -n 3 "$work/cpack.log" | paste -sd';')"; exit 1; }
root=$work/root
for d in "$work"/out/remote-gpu-server_*.deb "$work"/out/remote-gpu-client_*.deb; do
	dpkg -x "$d" "$root" || { say "dpkg -x $d failed"; exit 1; }
	say "- unpacked $(basename "$d")"
done
"$root/usr/bin/remote-gpud" --listen 127.0.0.1:0 --port-file "$work/port" >"$work/server.log" 2>&1 &
spid=$!
for _ in $(seq 150); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port" 2>/dev/null)
[ -n "$port" ] || { say "the unpacked remote-gpud did not start: $(tail -n 3 "$work/server.log" | paste -sd';')"; kill $spid; exit 1; }
say "- the unpacked remote-gpud serves the GPU on port $port"
say ""
say "| example | built | local exit | remote exit | remote = local |"
say "|---|---|---|---|---|"
ex=$root/usr/share/remote-gpu/examples/cuda
for src in "$ex"/*.cu; do
	name=$(basename "$src" .cu)
	[ "$name" = fault ] && continue # ends in a sticky error: tests/gpu/run.sh's fault case
	if ! nvcc -cudart shared -o "$work/$name" "$src" >"$work/$name.build" 2>&1; then
		say "| $name | no | | | |"; fail=1; continue
	fi
	timeout 120 "$work/$name" >"$work/$name.local" 2>"$work/$name.local.err"; lrc=$?
	timeout 120 $wrap env -u LD_PRELOAD -u REMOTE_GPU "$root/usr/bin/remote-gpu" run --server "127.0.0.1:$port" \
		-- "$work/$name" >"$work/$name.remote" 2>"$work/$name.remote.err"; rrc=$?
	same=no
	cmp -s "$work/$name.local" "$work/$name.remote" && same=yes
	[ $lrc -eq 0 ] && [ $rrc -eq 0 ] && [ $same = yes ] || fail=1
	say "| $name | yes | $lrc | $rrc | $same |"
done
kill -TERM $spid 2>/dev/null
wait $spid || { say "- the unpacked remote-gpud did not exit 0 on SIGTERM"; fail=1; }
say ""
[ $fail -eq 0 ] && say "every example equal to local through the unpacked packages" || say "**FAILED** (scratch: $work)"
exit $fail
