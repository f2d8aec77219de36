#!/usr/bin/env bash
# guest.sh: the rdma test suite, run inside the Soft-RoCE guest of
# tools/rdma-vm (ctest rdma.vm does that):
#
#   tools/rdma-vm/rdma-vm.sh run "$PWD" -- tests/rdma/guest.sh --build build
#
# 1. the verbs stack answers (ibv_devices, rxe0 ACTIVE);
# 2. test_rdma: the transport over real verbs (frames, paths, concurrency,
#    closes, faults);
# 3. run_rdma_e2e.sh: CUDA test programs through libremote.so over rdma://
#    against remote-gpud on the driver test double, and its fault cases;
# 4. run_rdma_tls.sh: rdma+tls:// (sessions set up inside TLS): programs, a
#    wrong token, wrong/absent/reused/late cookies, a capture of the TCP side.
#
# Exit status 0 when all passed, 1 otherwise, 77 when not in an RDMA guest.
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$here/../../build
only=${RDMA_GUEST_ONLY:-transport,e2e,tls}
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "guest.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
ip=${RDMA_VM_IP:-${RDMA_TEST_IP:-}}
if [ -z "$ip" ]; then
  echo "SKIP: not inside the rdma guest (run it with tools/rdma-vm/rdma-vm.sh run)"
  exit 77
fi
export RDMA_TEST_IP=$ip

fails=0
step() { echo; echo "== $* ($(date +%T))"; }

step "verbs devices"
ibv_devices 2>&1 | sed 's/^/  /'
ibv_devinfo -d "${RDMA_VM_DEV:-rxe0}" 2>/dev/null | grep -E 'state|link_layer|active_mtu' | sed 's/^/  /'

if [[ ,$only, == *,transport,* ]]; then
  step "transport: test_rdma"
  t=$build/tests/rdma/test_rdma
  [ -x "$t" ] || t=$build/test_rdma
  if [ -x "$t" ]; then
    timeout 900 "$t"
    rc=$?
    [ $rc -eq 0 ] || { echo "test_rdma: exit status $rc"; fails=$((fails + 1)); }
  else
    echo "test_rdma not built under $build"; fails=$((fails + 1))
  fi
fi

if [[ ,$only, == *,e2e,* ]]; then
  step "end to end: CUDA programs over rdma://$ip"
  timeout 1200 "$here/run_rdma_e2e.sh" --build "$build" --ip "$ip"
  rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 77 ] || fails=$((fails + 1))
  [ $rc -eq 77 ] && echo "(end-to-end part skipped)"
fi

if [[ ,$only, == *,tls,* ]]; then
  step "rdma+tls: sessions set up inside TLS at $ip"
  timeout 600 "$here/run_rdma_tls.sh" --build "$build" --ip "$ip"
  rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 77 ] || fails=$((fails + 1))
  [ $rc -eq 77 ] && echo "(rdma+tls part skipped)"
fi

echo
if [ $fails -eq 0 ]; then echo "rdma guest suite: all passed"; exit 0; fi
echo "rdma guest suite: $fails part(s) FAILED"
exit 1
