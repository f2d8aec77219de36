# bench/rdma/guest.sh: sourced by the one-boot guest benchmarks (quick.sh,
# instr.sh). On the host, `rdma_in_guest NAME TIMEOUT [--build DIR]` boots one
# guest (tools/rdma-vm) that runs the calling script again inside it with
# RG_BUILD, RG_OUT (and RG_ROUNDS and RG_BUILD_B, quick.sh's --rounds and --against) set, and exits with its status; inside the guest
# (RDMA_VM_IP set) it returns at once and the script goes on measuring.
rdma_in_guest() {
  local name=$1 timeout=$2 build script rc out
  script=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)/$(basename "${BASH_SOURCE[1]}")
  build=$(cd "$(dirname "$script")/../.." && pwd)/build
  [ "${3:-}" = --build ] && build=$(cd "$4" && pwd)
  [ -n "${RDMA_VM_IP:-}" ] && return 0
  out=$(mktemp -d "${TMPDIR:-/tmp}/rg-rdma-$name.XXXXXX")
  RDMA_VM_TIMEOUT=$timeout "$(dirname "$script")/../../tools/rdma-vm/rdma-vm.sh" run \
    -e "RG_BUILD=$build" -e "RG_OUT=$out" -e "RG_ROUNDS=${RG_ROUNDS:-1}" -e "RG_BUILD_B=${RG_BUILD_B:-}" "$out" -- "$script"
  rc=$?
  rm -rf "$out"
  exit $rc
}
