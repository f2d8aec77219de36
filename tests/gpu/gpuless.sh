# shellcheck shell=bash
# tests/gpu/gpuless.sh, sourced by the GPU scripts (run.sh, multigpu.sh): the
# GPU-less mount namespace in which clients run.
#
#   source tests/gpu/gpuless.sh
#   hidelist=$(rg_gpuless_setup WORKDIR)   # writes WORKDIR/hidden-paths, WORKDIR/gpuless.sh
#   unshare -m --propagation private bash WORKDIR/gpuless.sh PROGRAM ARGS...
#
# gpuless.sh bind-mounts /dev/null over every libcuda.so* and libnvidia-ml.so* the
# dynamic linker could find and over /dev/nvidia*, then execs the program: it runs
# with no way to reach the GPU but through libremote.so.

rg_gpuless_setup() {
  local w=$1 hidelist=$1/hidden-paths d dirs ldp
  # Every path the dynamic linker could find libcuda.so* / libnvidia-ml.so* at
  # (ldconfig's cache, its configured folders, LD_LIBRARY_PATH, the usual driver
  # and CUDA folders including compat and stubs), resolved through symlinks, and
  # the NVIDIA device nodes.
  {
    ldconfig -p 2>/dev/null | awk '/(libcuda|libnvidia-ml)\.so/ {print $NF}'
    dirs=(/lib /lib64 /usr/lib /usr/lib64 /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /usr/local/lib
          /usr/local/nvidia/lib /usr/local/nvidia/lib64 /usr/lib/wsl/lib)
    dirs+=(/usr/local/cuda*/compat /usr/local/cuda*/lib64 /usr/local/cuda*/lib64/stubs /usr/local/cuda*/targets/*/lib
           /usr/local/cuda*/targets/*/lib/stubs)
    IFS=: read -r -a ldp <<<"${LD_LIBRARY_PATH:-}"
    dirs+=("${ldp[@]}")
    while read -r d; do dirs+=("$d"); done < <(cat /etc/ld.so.conf /etc/ld.so.conf.d/*.conf 2>/dev/null | sed 's/#.*//' | grep '^/')
    for d in "${dirs[@]}"; do
      [ -d "$d" ] && find "$d" -maxdepth 1 \( -name 'libcuda.so*' -o -name 'libnvidia-ml.so*' \) 2>/dev/null
    done
    # and anywhere under the usual roots (a dlopen with a full path, a venv's copy)
    find /usr /lib /lib64 /opt /etc \( -name 'libcuda.so*' -o -name 'libnvidia-ml.so*' \) 2>/dev/null
    ls -d /dev/nvidia* 2>/dev/null
  } | while read -r f; do
    [ -n "$f" ] && [ -e "$f" ] && readlink -f "$f"
  done | sort -u >"$hidelist"

  cat >"$w/gpuless.sh" <<EOF
#!/bin/bash
# Runs inside unshare -m: hides the NVIDIA driver, then execs "\$@".
while IFS= read -r f; do
  if [ -d "\$f" ]; then
    mount -t tmpfs -o size=4k,mode=755 rg-hidden "\$f"
  else
    mount --bind /dev/null "\$f"
  fi || { echo "gpuless: cannot hide \$f" >&2; exit 125; }
done <"$hidelist"
exec "\$@"
EOF
  echo "$hidelist"
}
