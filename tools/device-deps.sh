#!/usr/bin/env bash
# device-deps.sh: unpack the Debian packages the build needs into .deps/, for a
# machine that has none of them and no network (the GPU machine).
#
# Run it HERE (Debian 12, apt works), in the repository root or from anywhere:
#
#     tools/device-deps.sh                # libuv1-dev libmsgpack-dev libxxhash-dev
#                                         # libzstd-dev liblz4-dev (cubin-tools) nettle-dev
#                                         # libssl-dev (tls://; libssl3 is linked shared)
#     tools/device-deps.sh libfoo-dev     # ... plus these
#
# then, on the other machine (with .deps carried along):
#
#     cmake -S . -B build -DCMAKE_PREFIX_PATH=$PWD/.deps/usr
#
# cmake/deps.cmake and cubin-tools look for the static archives first (libuv_a.a,
# libmsgpackc.a, libxxhash.a, libzstd.a, liblz4.a, libnettle.a), so the binaries need nothing from
# .deps at run time.
#
# Packages are fetched with `apt-get download` and unpacked with `dpkg -x` into .deps/;
# nothing is installed into /. Each -dev package brings the runtime packages built from
# the same source (libuv1 for libuv1-dev, ...) so that its lib*.so links resolve; other
# dependencies (libc6, ...) are left out: the target machine has them.
# Documentation, man pages and shared objects' debug links are dropped to keep the tree
# small (it travels with every device call, 64 MiB in all).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.deps"
default_pkgs=(libuv1-dev libmsgpack-dev libxxhash-dev libzstd-dev liblz4-dev nettle-dev libssl-dev)
pkgs=("${default_pkgs[@]}" "$@")

die() { echo "device-deps: $*" >&2; exit 1; }
command -v apt-get >/dev/null || die "apt-get not found: run this on a Debian/Ubuntu host"
command -v dpkg >/dev/null || die "dpkg not found"

# The GPU machine is x86-64. On another host architecture, use amd64 package lists of
# our own (kept in /tmp, the system's lists are left alone).
apt_opts=()
if [ "$(dpkg --print-architecture)" != amd64 ]; then
  lists=/tmp/device-deps-amd64-lists
  mkdir -p "$lists/partial"
  apt_opts=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists="$lists")
  apt-get "${apt_opts[@]}" update -qq
fi

# source package of $1 (the "Source:" field, or the package's own name)
src_of() {
  apt-cache "${apt_opts[@]}" show --no-all-versions "$1" 2>/dev/null |
    awk -F': ' '/^Package:/ {p=$2} /^Source:/ {split($2, s, " "); print s[1]; found=1; exit}
                END {if (!found) print p}'
}

# -dev package -> itself plus the packages it depends on that come from its source
expand() {
  local pkg=$1 src dep
  echo "$pkg"
  src=$(src_of "$pkg")
  for dep in $(apt-cache "${apt_opts[@]}" depends "$pkg" 2>/dev/null |
               awk '$1 == "Depends:" || $1 == "|Depends:" {print $2}' | sed 's/:any$//' | grep -v '^<' | sort -u); do
    [ "$(src_of "$dep")" = "$src" ] && echo "$dep"
  done
}

if ! apt-cache "${apt_opts[@]}" show --no-all-versions "${default_pkgs[0]}" >/dev/null 2>&1; then
  echo "device-deps: package lists missing, running apt-get update" >&2
  apt-get "${apt_opts[@]}" update -qq
fi

all=()
for p in "${pkgs[@]}"; do
  apt-cache "${apt_opts[@]}" show --no-all-versions "$p" >/dev/null 2>&1 || die "unknown package: $p"
  while read -r q; do all+=("$q"); done < <(expand "$p")
done
mapfile -t all < <(printf '%s\n' "${all[@]}" | sort -u)

tmp=$(mktemp -d /tmp/device-deps.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
echo "device-deps: downloading ${all[*]}"
if ! (cd "$tmp" && apt-get "${apt_opts[@]}" download -q "${all[@]}") >"$tmp/download.log" 2>&1; then
  cat "$tmp/download.log" >&2
  die "apt-get download failed"
fi
# apt warns that root downloads unsandboxed into a folder its _apt user cannot write
grep -v '^W: Download is performed unsandboxed' "$tmp/download.log" || true
debs=("$tmp"/*.deb)
[ -e "${debs[0]}" ] || die "apt-get download fetched nothing"
[ "${#debs[@]}" -eq "${#all[@]}" ] || die "asked for ${#all[@]} packages, got ${#debs[@]}"

rm -rf "$dest"
mkdir -p "$dest"
for d in "${debs[@]}"; do
  dpkg -x "$d" "$dest"
  echo "  $(basename "$d")"
done
rm -rf "$dest/usr/share/doc" "$dest/usr/share/man" "$dest/usr/share/lintian"
rmdir "$dest/usr/share" 2>/dev/null || true

# what cmake/deps.cmake will pick up
for a in libuv_a.a libmsgpackc.a libxxhash.a libzstd.a liblz4.a; do
  f=$(find "$dest" -name "$a" -print -quit)
  [ -n "$f" ] || die "$a missing from $dest"
done
echo "device-deps: $(du -sh "$dest" | cut -f1) in $dest"

# Check that cmake/deps.cmake finds everything in .deps alone: a throwaway project that
# includes it and looks up every static archive in .deps the same way, with /usr and /
# ignored as search prefixes (as on the GPU machine, where they hold none of these).
archives=$(find "$dest" -name '*.a' -printf '%f ')
if command -v cmake >/dev/null && [ -f "$root/cmake/deps.cmake" ]; then
  mkdir -p "$tmp/check"
  cat >"$tmp/check/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.20)
project(device_deps_check C)
include("$root/cmake/deps.cmake")
set(vars LIBUV_LIBRARY MSGPACK_LIBRARY XXHASH_LIBRARY LIBUV_INCLUDE_DIR)
foreach(a $archives)
  string(MAKE_C_IDENTIFIER "\${a}" v)
  find_library(\${v} NAMES \${a} PATH_SUFFIXES lib/x86_64-linux-gnu lib)
  list(APPEND vars \${v})
endforeach()
foreach(h zstd.h lz4.h)
  string(MAKE_C_IDENTIFIER "\${h}" v)
  find_path(\${v} \${h})
  list(APPEND vars \${v})
endforeach()
foreach(v \${vars})
  message(STATUS "device-deps check: \${v} = \${\${v}}")
  if(NOT "\${\${v}}" MATCHES "^$dest/")
    message(FATAL_ERROR "\${v} is not under $dest")
  endif()
endforeach()
EOF
  if cmake -S "$tmp/check" -B "$tmp/check/build" -DCMAKE_PREFIX_PATH="$dest/usr" \
       -DCMAKE_IGNORE_PREFIX_PATH="/usr;/" -DCMAKE_SYSTEM_IGNORE_PREFIX_PATH="/usr;/" \
       >"$tmp/check.log" 2>&1; then
    grep 'device-deps check:' "$tmp/check.log" | sed 's/^-- /  /'
  else
    cat "$tmp/check.log" >&2
    die "cmake/deps.cmake does not find everything in $dest alone (log above)"
  fi
fi
echo "device-deps: configure with -DCMAKE_PREFIX_PATH=$dest/usr (on the device: \$PWD/.deps/usr, carry .deps)"
