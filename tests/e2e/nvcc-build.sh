#!/usr/bin/env bash
# nvcc-build.sh: the one place that says how test programs and examples are compiled.
# Used by tests/e2e/CMakeLists.txt, examples/CMakeLists.txt, run_e2e.sh and
# tests/gpu/run.sh.
#
#   nvcc-build.sh [--nvcc PATH] [--static] -o OUT SRC.cu
#
# -cudart shared: libremote.so interposes libcudart.so's symbols. --static builds
# with nvcc's default instead, the static runtime, which reaches only the driver
# (libremote.so answering as libcuda.so.1), and links -lcuda against the
# toolkit's stub so the program may call the driver API itself. The fatbin carries an sm_90 cubin and compute_90 PTX
# (RG_CUDA_ARCH=NN picks another architecture). The runtime's directory goes into
# the rpath so the program starts without LD_LIBRARY_PATH, also in the GPU-less
# namespace (which hides the driver, not the runtime).
set -euo pipefail

nvcc=${RG_NVCC:-}
out=
src=
cudart=(-cudart shared)
while [ $# -gt 0 ]; do
  case $1 in
    --nvcc) nvcc=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    --static) cudart=(-cudart static); static=1; shift ;;
    *) src=$1; shift ;;
  esac
done
[ -n "$out" ] && [ -n "$src" ] || { echo "usage: $0 [--nvcc PATH] -o OUT SRC.cu" >&2; exit 2; }
if [ -z "$nvcc" ]; then
  nvcc=$(command -v nvcc || true)
  [ -n "$nvcc" ] || { [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc; }
fi
[ -n "$nvcc" ] && [ -x "$nvcc" ] || { echo "nvcc-build: nvcc not found (set RG_NVCC)" >&2; exit 77; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cuda_root=$(cd "$(dirname "$nvcc")/.." && pwd)
libdir=$cuda_root/lib64
[ -e "$libdir/libcudart.so" ] || libdir=$cuda_root/targets/x86_64-linux/lib
arch=${RG_CUDA_ARCH:-90}

# A program names the extra libraries it links in a "rg-build-libs: -lfoo" line.
libs=$(sed -n 's/.*rg-build-libs:\(.*\)/\1/p' "$src" | head -n 1)
[ "${static:-0}" = 1 ] && libs="$libs -L$cuda_root/lib64/stubs -L$cuda_root/targets/x86_64-linux/lib/stubs -lcuda"

mkdir -p "$(dirname "$out")"
exec "$nvcc" "${cudart[@]}" -O2 -std=c++17 \
  -gencode "arch=compute_$arch,code=[sm_$arch,compute_$arch]" \
  -I"$here" -Xcompiler -Wall -Xlinker -rpath,"$libdir" \
  -o "$out" "$src" $libs -lpthread -ldl
