#!/usr/bin/env bash
# Builds every libFuzzer target listed in tests/fuzz/CMakeLists.txt with clang
# (ASan + UBSan, the libraries under test instrumented for coverage too) in a
# build dir of its own, and runs each for FUZZ_SECONDS (default 30) starting
# from its seed corpus tests/fuzz/corpus_<name>/. Exits nonzero if any target
# crashes, leaks, times out on an input or runs out of memory; the input that
# did it is left in <build>/fuzz-artifacts/.
#
#   FUZZ_SECONDS=30     time per target
#   FUZZ_BUILD_DIR=...  default: <repo>/build/fuzz (ignored by git)
#   FUZZ_JOBS=2         parallel compile jobs
#   FUZZ_TARGETS="fuzz_proto ..."  run only these
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build/fuzz}
seconds=${FUZZ_SECONDS:-30}
jobs=${FUZZ_JOBS:-2}
san="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"

cmake -S "$root" -B "$build" \
	-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS="$san" \
	-DRG_FUZZ=ON -DRG_BUILD_TESTS=ON -DRG_WITH_RDMA=OFF >/dev/null
cmake --build "$build" --target rg_fuzz_all -j "$jobs"

targets=${FUZZ_TARGETS:-$(tr ';' ' ' <"$build/tests/fuzz/fuzz_targets.txt")}
mkdir -p "$build/fuzz-artifacts"
failed=()
for t in $targets; do
	name=${t#fuzz_}
	work="$build/fuzz-corpus/$name" # new inputs go here, not into the repo
	mkdir -p "$work"
	dirs=("$work")
	[ -d "$here/corpus_$name" ] && dirs+=("$here/corpus_$name")
	echo "== $t: ${seconds}s"
	if ! "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$t-" "${dirs[@]}"; then
		failed+=("$t")
	fi
done

if [ ${#failed[@]} -gt 0 ]; then
	echo "FAILED: ${failed[*]} (inputs in $build/fuzz-artifacts)" >&2
	exit 1
fi
echo "fuzz: all targets ran ${seconds}s without a crash"
