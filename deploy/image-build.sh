#!/bin/sh
# The build stage of deploy/Dockerfile: installs remote-gpu into a prefix of
# /opt/remote-gpu and lays it out for the two images:
#   OUT/node/    bin/remote-gpud, remote-smi, remote-cubin [, test-driver/]
#   OUT/client/  lib/libremote.so, lib/remote-gpu/driver/, bin/remote-gpu, bin/remote-bench
#                and the CUDA runtime it links [, test/ programs]
# With /src/prebuilt/opt/remote-gpu (deploy/ci/compose-test.sh: the build
# machine's install, its toolkit reused) nothing is compiled.
set -eu
out=${1:?usage: image-build.sh OUT}
prefix=/opt/remote-gpu
if [ -d /src/prebuilt$prefix ]; then
	tree=/src/prebuilt$prefix
else
	apt-get update -q
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends cmake make gcc g++ python3 \
		libuv1-dev libmsgpack-dev libxxhash-dev libzstd-dev liblz4-dev nettle-dev libssl-dev \
		libibverbs-dev librdmacm-dev
	tests=OFF
	[ "${TEST_DRIVER:-0}" = 1 ] && tests=ON
	cmake -S /src -B /build -DCMAKE_BUILD_TYPE=Release -DRG_BUILD_TESTS=$tests \
		-DRG_CUDA_ROOT=/usr/local/cuda -DRG_VERSION_GIT="${RG_VERSION_GIT:-}"
	cmake --build /build -j"$(nproc)"
	DESTDIR=/stage cmake --install /build --prefix $prefix
	tree=/stage$prefix
	cp -L /usr/local/cuda/lib64/libcudart.so.13 $tree/lib/
	if [ $tests = ON ]; then
		mkdir -p $tree/test-driver
		cp /build/tests/fakecuda/libcuda.so.1 $tree/test-driver/
	fi
fi
mkdir -p "$out/node/bin" "$out/client/bin" "$out/client/lib"
for t in remote-gpud remote-smi remote-cubin; do
	cp -a $tree/bin/$t "$out/node/bin/"
done
[ "${TEST_DRIVER:-0}" = 1 ] && cp -a $tree/test-driver "$out/node/"
cp -a $tree/lib/libremote.so $tree/lib/remote-gpu "$out/client/lib/"
cp -a $tree/bin/remote-gpu "$out/client/bin/"
cp -a $tree/bin/remote-bench $tree/lib/libcudart.so.13 "$out/client/bin/" 2>/dev/null || true
[ -e "$out/client/bin/libcudart.so.13" ] && mv "$out/client/bin/libcudart.so.13" "$out/client/lib/"
[ -d $tree/test ] && cp -a $tree/test "$out/client/"
exit 0
