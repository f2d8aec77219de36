#!/usr/bin/env bash
# The end-to-end suite under AddressSanitizer and UndefinedBehaviorSanitizer:
# remote-gpud, libremote.so and the driver test double built with
# -fsanitize=address,undefined in a build dir of their own, then the driver
# test double's own test (device memory must lie apart from ASan's heap,
# which sits at the same addresses in every process), the e2e programs
# (tests/e2e/run_e2e.sh) and the backend's client test run through them.
# tools/test.sh runs it. The test programs themselves (nvcc) are not
# instrumented; they are taken from the normal build (BUILD, default
# <repo>/build), so nvcc runs only there.
#
# libremote.so is preloaded into programs that do not link the sanitizer
# runtime, and ASan must come first in the library list: run_e2e.sh puts the
# libasan that libremote.so needs in front of it in LD_PRELOAD.
#
# Every sanitizer report goes to a file (log_path) instead of stderr, where a
# session process's report could pass unseen: the run fails if any exists.
#
#   SAN_BUILD_DIR=...  default: <repo>/build/asan (ignored by git)
#   SAN_JOBS=2         parallel compile jobs
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${SAN_BUILD_DIR:-$root/build/asan}
normal=${BUILD:-$root/build}
jobs=${SAN_JOBS:-2}
san="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRG_LTO=OFF -DRG_WITH_RDMA=OFF \
	-DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" \
	-DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
	-DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
	-DRG_CUDA_ROOT="${RG_CUDA_ROOT:-/usr/local/cuda}" >/dev/null
cmake --build "$build" -j "$jobs" --target remote-gpud remote fakecuda test_client test_fakecuda

logs=$build/san-logs
rm -rf "$logs"
mkdir -p "$logs"
# halt_on_error: the first report ends the process (a session process's end
# fails its client's test too). Leaks: checked in remote-gpud and its session
# processes; the clients' exit leaks of the CUDA runtime are not ours.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:log_path=$logs/asan"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$logs/ubsan"
export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0"

status=0
fatbin=$build/tests/fakecuda/test_kernels.fatbin
[ -f "$normal/tests/fakecuda/test_kernels.fatbin" ] && fatbin=$normal/tests/fakecuda/test_kernels.fatbin
echo "== fakecuda (asan)"
"$build/tests/fakecuda/test_fakecuda" >"$logs/test_fakecuda.out" 2>&1 || { status=1; tail -n 30 "$logs/test_fakecuda.out"; }
tail -n 1 "$logs/test_fakecuda.out"
echo "== backend test_client (asan)"
"$build/tests/backend/test_client" "$build/backend/remote-gpud" "$build/tests/fakecuda/libcuda.so.1" \
	$([ -f "$fatbin" ] && echo "$fatbin") >"$logs/test_client.out" 2>&1 || { status=1; tail -n 30 "$logs/test_client.out"; }
tail -n 1 "$logs/test_client.out"
echo "== e2e (asan)"
"$root/tests/e2e/run_e2e.sh" --build "$build" --bin "$normal/tests/e2e/bin" || status=1

if compgen -G "$logs/[au][sb]san*" >/dev/null; then
	echo "sanitizer reports:" >&2
	for f in "$logs"/[au][sb]san*; do
		echo "--- $f" >&2
		head -n 40 "$f" >&2
	done
	status=1
fi
[ $status = 0 ] && echo "asan: fakecuda, e2e and test_client clean"
exit $status
