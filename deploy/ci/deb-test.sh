#!/usr/bin/env bash
# CI: the .debs of cmake/packaging.cmake. Builds them with cpack from this
# build tree (into a scratch folder), checks each package's file list
# (dpkg-deb -c) and fields, unpacks both into a scratch root (dpkg -x) and
# runs the tools from there: --version of each (the project() version),
# remote-gpu finding the unpacked libremote.so beside itself (doctor), and a
# CUDA program (tests/e2e/copies) through the unpacked `remote-gpu run` and
# remote-gpud on the driver test double, its output as CI expects it.
#   deb-test.sh BUILD_DIR
# Exit status: 0 passed, 1 failed, 77 skipped (no dpkg-deb or cpack).
set -u
build=$(cd "${1:?usage: deb-test.sh BUILD_DIR}" && pwd)
for t in dpkg-deb dpkg cpack; do
	command -v $t >/dev/null || { echo "skipped: no $t"; exit 77; }
done
work=$(mktemp -d /tmp/rg-deb.XXXXXX)
fail=0
trap '[ $fail -eq 0 ] && rm -rf "$work" || echo "scratch folder kept: $work"' EXIT
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

arch=$(dpkg --print-architecture)
version=$(sed -n 's/^#define RG_VERSION "\(.*\)"/\1/p' "$build/common/gen/rg_version.h")
[ -n "$version" ] || { bad "no version in $build/common/gen/rg_version.h"; exit 1; }
(cd "$build" && cpack -G DEB --config CPackConfig.cmake -B "$work/out") >"$work/cpack.log" 2>&1 ||
	{ bad "cpack failed"; tail -n 20 "$work/cpack.log"; exit 1; }
server=$work/out/remote-gpu-server_${version}_${arch}.deb
client=$work/out/remote-gpu-client_${version}_${arch}.deb
[ -f "$server" ] && [ -f "$client" ] || { bad "packages missing"; ls "$work/out"; exit 1; }

# files: exactly these (directories aside), links with their targets
list() { dpkg-deb -c "$1" | awk '$1 !~ /^d/ {print $6, $7, $8}' | sed 's/ *$//' | sort; }
cat >"$work/server.want" <<'LIST'
./usr/bin/remote-cubin
./usr/bin/remote-gpud
./usr/bin/remote-smi
./usr/share/remote-gpu/README.md
./usr/share/remote-gpu/systemd/remote-gpud@.service
LIST
cat >"$work/client.want" <<'LIST'
./usr/bin/remote-gpu
./usr/lib/libremote.so
./usr/lib/remote-gpu/driver/libcuda.so -> ../../libremote.so
./usr/lib/remote-gpu/driver/libcuda.so.1 -> ../../libremote.so
./usr/lib/remote-gpu/driver/libnvidia-ml.so -> ../../libremote.so
./usr/lib/remote-gpu/driver/libnvidia-ml.so.1 -> ../../libremote.so
LIST
# and the examples' sources with their guide
src=$(cd "$(dirname "$0")/../.." && pwd)
{
	echo ./usr/share/remote-gpu/examples/README.md
	(cd "$src/examples" && ls cuda/*.cu transformer/*.py) | sed 's|^|./usr/share/remote-gpu/examples/|'
} >>"$work/client.want"
sort -o "$work/client.want" "$work/client.want"
for p in server client; do
	deb=$work/out/remote-gpu-${p}_${version}_${arch}.deb
	list "$deb" >"$work/$p.have"
	if diff -u "$work/$p.want" "$work/$p.have" >"$work/$p.diff"; then echo "ok $p files"; else
		bad "$p files"; cat "$work/$p.diff"; fi
	[ "$(dpkg-deb -f "$deb" Package)" = "remote-gpu-$p" ] && [ "$(dpkg-deb -f "$deb" Version)" = "$version" ] &&
		echo "ok $p fields" || bad "$p package name or version: $(dpkg-deb -f "$deb" Package Version)"
done

# unpacked into a scratch root, the tools run from there
root=$work/root
dpkg -x "$server" "$root" && dpkg -x "$client" "$root" || { bad "dpkg -x"; exit 1; }
for t in remote-gpud remote-smi remote-cubin remote-gpu; do
	out=$("$root/usr/bin/$t" --version 2>&1)
	[[ "$out" == "$t $version"* ]] && echo "ok $t --version: $out" || bad "$t --version: $out"
done
grep -q "^ExecStart=/usr/bin/remote-gpud " "$root/usr/share/remote-gpu/systemd/remote-gpud@.service" &&
	echo "ok unit names /usr/bin/remote-gpud" || bad "the unit's ExecStart is not /usr/bin/remote-gpud"
out=$(env -u REMOTE_GPU_LIB "$root/usr/bin/remote-gpu" doctor --server 127.0.0.1:1 2>&1)
echo "$out" | grep -q "^ok       libremote.so: $root/usr/lib/libremote.so (install tree)" &&
	echo "$out" | grep -q "^ok       driver folder: $root/usr/lib/remote-gpu/driver" &&
	echo "ok remote-gpu finds the unpacked libremote.so" || { bad "remote-gpu doctor in the scratch root:"; echo "$out"; }
# A fresh machine's first run: the unpacked server on the driver test double
# and a CUDA program through the unpacked launcher, output as CI expects it
fake=$build/tests/fakecuda/libcuda.so.1
prog=$build/tests/e2e/bin/copies
if [ -x "$prog" ] && [ -f "$fake" ]; then
	"$root/usr/bin/remote-gpud" --listen 127.0.0.1:0 --port-file "$work/port" --driver "$fake" \
		>"$work/server.log" 2>&1 &
	spid=$!
	for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
	port=$(cat "$work/port" 2>/dev/null)
	env -u REMOTE_GPU_LIB -u LD_PRELOAD -u REMOTE_GPU "$root/usr/bin/remote-gpu" run --server "127.0.0.1:$port" -- "$prog" \
		>"$work/copies.out" 2>"$work/copies.err"
	rc=$?
	if [ $rc -eq 0 ] && diff -u "$src/tests/e2e/expected/copies.out" "$work/copies.out" >"$work/copies.diff"; then
		echo "ok copies through the unpacked remote-gpu run and remote-gpud"
	else
		bad "copies through the unpacked tools: exit $rc"; head -n 20 "$work/copies.diff" "$work/copies.err" "$work/server.log"
	fi
	kill -TERM $spid 2>/dev/null
	wait $spid || bad "the unpacked remote-gpud did not exit 0 on SIGTERM"
else
	echo "note: $prog or the driver test double not built: the first run is not checked"
fi
[ $fail -eq 0 ] && echo "all package checks passed"
exit $((fail ? 1 : 0))
