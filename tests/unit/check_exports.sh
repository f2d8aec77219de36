#!/usr/bin/env bash
# check_exports.sh LIBREMOTE [STATIC_LIB...]
#
# libremote.so is preloaded into programs that are not ours: every name it
# exports can take a call meant for another library, so it exports only the
# APIs it implements (frontend/exports.map). This check reads the built
# library's dynamic symbol table and fails on any defined name outside these
# patterns; keep them in step with exports.map.
#
# The static transport libraries given after it go into libremote.so and
# remote-gpud: they must define no name in rdma-core's namespaces (rdma_*,
# ibv_*: librdmacm and libibverbs are loaded into the same process), no test
# hook (*_test_*: those are in rg_transport_test, linked by tests only) and no
# name outside the interface (transport_*) and the internal prefix (tp_*).
set -euo pipefail
lib=${1:?usage: check_exports.sh LIBREMOTE [STATIC_LIB...]}
shift
allowed='^(cu[A-Z]|cuda[A-Z]|cublas[A-Z]|__cuda[A-Z]|nvml[A-Z]|nccl[A-Z])|^(dlopen|remote_gpu_stats_dump|remote_gpu_set_release_hook)$'
status=0

names=$(nm -D --defined-only "$lib" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' | sort -u)
for must in cuInit cudaMalloc __cudaRegisterFatBinary nvmlInit_v2 ncclAllReduce dlopen; do
	if ! grep -qx "$must" <<<"$names"; then
		echo "check_exports: $lib does not export $must (is this libremote.so?)" >&2
		status=1
	fi
done
bad=$(grep -vE "$allowed" <<<"$names" || true)
if [ -n "$bad" ]; then
	echo "check_exports: $lib exports names outside its APIs (frontend/exports.map):" >&2
	sed 's/^/  /' <<<"$bad" >&2
	status=1
fi

for a in "$@"; do
	defined=$(nm --defined-only -g "$a" 2>/dev/null | awk 'NF == 3 { print $3 }')
	bad=$({ grep -E '^(rdma_|ibv_)|_test_' <<<"$defined"; grep -vE '^(transport_|tp_)|^$' <<<"$defined"; } | sort -u || true)
	if [ -n "$bad" ]; then
		echo "check_exports: $a defines names in rdma-core's namespaces, test hooks or names outside transport_*/tp_*:" >&2
		sed 's/^/  /' <<<"$bad" >&2
		status=1
	fi
done
[ $status = 0 ] && echo "check_exports: $(wc -l <<<"$names") names exported by $(basename "$lib"), all within its APIs"
exit $status
