# The shm transport (shm/shm_*.c, README.md "Shared memory"): a client on the
# server's host, frames through rings in a memfd segment. Linux only; it needs
# nothing but the C library, so it is always built there.
target_sources(rg_transport_client PRIVATE
  shm/shm_ring.c
  shm/shm_seg.c
  shm/shm_region.c
  shm/shm_client.c)
target_sources(rg_transport PRIVATE
  shm/shm_server.c)
target_compile_definitions(rg_transport_client PRIVATE RG_TRANSPORT_SHM)
target_compile_definitions(rg_transport PRIVATE RG_TRANSPORT_SHM)
