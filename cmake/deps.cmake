# Third-party dependencies. libuv, msgpack-c and xxhash are linked statically when
# their static archives exist, so the binaries run on a GPU machine that has none of
# them installed (see tools/device-deps.sh, which unpacks Debian's packages into
# .deps/ for such a machine: pass -DCMAKE_PREFIX_PATH=$PWD/.deps/usr).

set(_rg_libdirs lib/x86_64-linux-gnu lib lib64)

function(rg_find_static var header)
  # ARGN: library names, static archive first.
  find_path(${var}_INCLUDE_DIR ${header})
  find_library(${var}_LIBRARY NAMES ${ARGN} PATH_SUFFIXES ${_rg_libdirs})
  if(NOT ${var}_INCLUDE_DIR OR NOT ${var}_LIBRARY)
    message(FATAL_ERROR "${var} not found (header ${header}, library ${ARGN}). "
      "On Debian: apt-get install libuv1-dev libmsgpack-dev libxxhash-dev nettle-dev")
  endif()
  set(${var}_INCLUDE_DIR ${${var}_INCLUDE_DIR} PARENT_SCOPE)
  set(${var}_LIBRARY ${${var}_LIBRARY} PARENT_SCOPE)
endfunction()

rg_find_static(LIBUV uv.h libuv_a.a libuv.a uv)
rg_find_static(MSGPACK msgpack.h libmsgpackc.a msgpackc)
rg_find_static(XXHASH xxhash.h libxxhash.a xxhash)
# nettle: MD2 and HMAC for the driver's integrity check table (frontend/src/drv_export.c)
rg_find_static(NETTLE nettle/md2.h libnettle.a nettle)

find_package(Threads REQUIRED)

add_library(rg_uv INTERFACE)
target_include_directories(rg_uv INTERFACE ${LIBUV_INCLUDE_DIR})
target_link_libraries(rg_uv INTERFACE ${LIBUV_LIBRARY} Threads::Threads dl)

add_library(rg_msgpack INTERFACE)
target_include_directories(rg_msgpack INTERFACE ${MSGPACK_INCLUDE_DIR})
target_link_libraries(rg_msgpack INTERFACE ${MSGPACK_LIBRARY})

add_library(rg_nettle INTERFACE)
target_include_directories(rg_nettle INTERFACE ${NETTLE_INCLUDE_DIR})
target_link_libraries(rg_nettle INTERFACE ${NETTLE_LIBRARY})

add_library(rg_xxhash INTERFACE)
target_include_directories(rg_xxhash INTERFACE ${XXHASH_INCLUDE_DIR})
target_link_libraries(rg_xxhash INTERFACE ${XXHASH_LIBRARY})

# CUDA: headers always (types for the driver table and the runtime API we implement);
# nvcc only for test programs and examples.
set(RG_CUDA_ROOT "/usr/local/cuda" CACHE PATH "CUDA toolkit root")
find_path(CUDA_INCLUDE_DIR cuda.h HINTS ${RG_CUDA_ROOT}/include)
if(NOT CUDA_INCLUDE_DIR)
  message(FATAL_ERROR "CUDA toolkit headers (cuda.h) not found under ${RG_CUDA_ROOT}/include. "
    "Install the CUDA 13 toolkit or pass -DRG_CUDA_ROOT=/path/to/cuda")
endif()
find_program(RG_NVCC nvcc HINTS ${RG_CUDA_ROOT}/bin)
add_library(rg_cuda_headers INTERFACE)
target_include_directories(rg_cuda_headers INTERFACE ${CUDA_INCLUDE_DIR})

if(RG_WITH_RDMA)
  find_library(IBVERBS_LIBRARY ibverbs)
  find_library(RDMACM_LIBRARY rdmacm)
  find_path(RDMACM_INCLUDE_DIR rdma/rdma_cma.h)
  if(NOT IBVERBS_LIBRARY OR NOT RDMACM_LIBRARY OR NOT RDMACM_INCLUDE_DIR)
    message(STATUS "rdma-core not found: the rdma transport is left out (apt-get install libibverbs-dev librdmacm-dev)")
    set(RG_WITH_RDMA OFF CACHE BOOL "" FORCE)
  endif()
endif()
