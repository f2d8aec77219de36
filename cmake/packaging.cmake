# CPack: `cpack -G DEB` in the build directory makes two packages from the
# install components, with the version of project() (the one --version prints):
#   remote-gpu-server  bin/remote-gpud, remote-smi, remote-cubin,
#                      share/remote-gpu/ (systemd unit, deploy guide)
#   remote-gpu-client  lib/libremote.so, lib/remote-gpu/driver/, bin/remote-gpu
# Installed under /usr. remote-bench (component bench) is left out: it links
# the CUDA toolkit's libcudart.so.13, which no Debian package provides.
# Dependencies are written here, not computed (dpkg-shlibdeps): the binaries
# need only libc and OpenSSL 3.
set(CPACK_PACKAGE_NAME remote-gpu)
set(CPACK_PACKAGE_VENDOR "remote-gpu")
set(CPACK_PACKAGE_CONTACT "remote-gpu maintainers <remote-gpu@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "run CUDA programs on GPUs of other hosts")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL server client)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_SERVER_PACKAGE_NAME remote-gpu-server)
set(CPACK_DEBIAN_CLIENT_PACKAGE_NAME remote-gpu-client)
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "libc6 (>= 2.34), libssl3 | libssl3t64")
set(CPACK_DEBIAN_CLIENT_PACKAGE_DEPENDS "libc6 (>= 2.34), libssl3 | libssl3t64")
set(CPACK_COMPONENT_SERVER_DESCRIPTION
  "remote-gpu server: remote-gpud serves a GPU to remote clients\n remote-gpud replays the CUDA calls of remote programs on this host's GPU;\n remote-smi shows its sessions, remote-cubin builds its kernel image store.\n Needs the NVIDIA driver (libcuda.so.1).")
set(CPACK_COMPONENT_CLIENT_DESCRIPTION
  "remote-gpu client: run CUDA programs on remote GPUs\n libremote.so, preloaded into a program on a host without a GPU, forwards\n its CUDA calls to remote-gpud; remote-gpu run/info/doctor starts programs\n with it and checks a setup.")
include(CPack)
