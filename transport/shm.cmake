# The shm transport (src/shm_*.c, README.md "Shared memory"): a client on the
# server's host, frames through rings in a memfd segment. Linux only; it needs
# nothing but the C library, so it is always built there.
target_sources(rg_transport_client PRIVATE
  src/shm_ring.c
  src/shm_seg.c
  src/shm_region.c
  src/shm_client.c)
target_sources(rg_transport PRIVATE
  src/shm_server.c)
target_compile_definitions(rg_transport_client PRIVATE RG_TRANSPORT_SHM)
target_compile_definitions(rg_transport PRIVATE RG_TRANSPORT_SHM)
