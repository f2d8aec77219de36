# The rdma verbs transport (rdma/rdma_*.c, README.md "RDMA"). Included by
# CMakeLists.txt when RG_WITH_RDMA is on (cmake/deps.cmake turns it off when
# the rdma-core headers are missing).
#
# rdma-core is loaded at run time (rdma/rdma_lib.c: dlopen of libibverbs.so.1 and
# librdmacm.so.1), so only its headers are needed here and neither library is
# linked: libremote.so keeps starting on hosts without an RDMA stack.
target_sources(rg_transport_client PRIVATE
  rdma/rdma_lib.c
  rdma/rdma_mr.c
  rdma/rdma_ep.c
  rdma/rdma_tx.c
  rdma/rdma_rx.c
  rdma/rdma_client.c)
target_sources(rg_transport PRIVATE
  rdma/rdma_server.c)
target_compile_definitions(rg_transport_client PRIVATE RG_TRANSPORT_RDMA)
target_compile_definitions(rg_transport PRIVATE RG_TRANSPORT_RDMA)
target_include_directories(rg_transport_client PRIVATE ${RDMACM_INCLUDE_DIR})
target_link_libraries(rg_transport_client PUBLIC ${CMAKE_DL_LIBS})

# Test hooks (rdma/rdma_test_hooks.c): functions that break a connection on
# purpose. Only test programs link this library, so release builds of
# libremote.so and remote-gpud do not contain them.
if(RG_BUILD_TESTS)
  add_library(rg_transport_test STATIC rdma/rdma_test_hooks.c)
  target_include_directories(rg_transport_test PRIVATE ${RDMACM_INCLUDE_DIR})
  target_link_libraries(rg_transport_test PUBLIC rg_transport rg_transport_internal)
endif()
