#!/usr/bin/env bash
# Sets up, builds, and runs every test that needs no GPU: generated stubs current,
# unit tests, driver test double, cubin-tools, end-to-end over real TCP, the
# end-to-end suite again under ASan+UBSan (SKIP_ASAN=1 leaves it out), the
# docker-compose cluster of deploy/ in podman (about 30 s; SKIP_COMPOSE=1 leaves
# it out), and the fuzzers for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
python3 api/gen.py --check
python3 api/gen_rt_stubs.py --check
python3 api/gen_drv.py --check
status=0
(cd build && ctest --output-on-failure -j"$(nproc)") || status=1
if [ -z "${SKIP_ASAN:-}" ]; then
	tests/asan/run.sh || status=1
fi
if [ -z "${SKIP_COMPOSE:-}" ]; then
	rc=0
	deploy/ci/compose-test.sh --build build || rc=$?
	[ $rc = 0 ] || [ $rc = 77 ] || status=1 # 77: skipped, and said why
fi
if [ -x tests/fuzz/run.sh ]; then
	FUZZ_SECONDS=${FUZZ_SECONDS:-30} tests/fuzz/run.sh || status=1
fi
exit $status
