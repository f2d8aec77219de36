#!/usr/bin/env bash
# CI: the .debs of cmake/packaging.cmake. Builds them with cpack from this
# build tree (into a scratch folder), checks each package's file list
# (dpkg-deb -c) and fields, unpacks both into a scratch root (dpkg -x) and
# runs the tools from there: --version of each (the project() version), and
# remote-gpu finding the unpacked libremote.so beside itself (doctor).
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
[ $fail -eq 0 ] && echo "all package checks passed"
exit $((fail ? 1 : 0))
