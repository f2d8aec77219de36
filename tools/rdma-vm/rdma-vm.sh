#!/bin/bash
# rdma-vm.sh - run a command inside a small throw-away QEMU VM that has
# Soft-RoCE (rdma_rxe) devices, so that real libibverbs/librdmacm code can be
# tested on machines whose own kernel has no RDMA support.
#
# remote-gpu's own copy of the harness (tools/rdma-vm/README.md): the rdma
# tests (tests/rdma, ctest rdma.vm) and the rdma benchmark (bench/rdma) boot
# their guest with it, so a fresh checkout needs nothing outside the repository.
# It installs what it lacks with apt-get (as root): qemu-system-x86, rdma-core's
# tools, perftest; the guest kernel is Debian's linux-image-amd64, downloaded
# (not installed) once and cached.
#
# How it works
#   * The guest kernel is Debian's own linux-image-amd64 (it ships rdma_rxe).
#     Its .deb is fetched with `apt-get download` and unpacked; nothing is
#     installed into the host's /boot.
#   * The guest "image" is only a tiny initramfs: static busybox, the kernel
#     modules that are needed (virtio, 9p, ib_core, rdma_rxe, ...) and an /init
#     script.  It is cached under $RDMA_VM_CACHE (~/.cache/rdma-vm by default),
#     so only the first run builds it.
#   * Userland comes from the HOST: the host's / is exported read-only to the
#     guest over virtio-9p and the command runs chrooted into it.  So the host's
#     libibverbs, rxe provider, perftest, compilers, test binaries ... are all
#     available at their usual paths.  The command runs as root.  Writes
#     outside <host-dir> never reach the host: /tmp and /var/tmp show the
#     host's files through an overlay whose upper layer is a guest tmpfs, /run
#     is a fresh tmpfs, everything else is read-only; HOME=/tmp/home.
#   * <host-dir> is exported read-write and mounted at the same absolute path,
#     so build trees with absolute paths (rpath, ctest files) keep working.
#   * A third 9p share (a private temp dir on the host) carries the command,
#     its output (streamed back live) and its exit code.
#   * The VM has no NIC at all (-nic none): RoCE traffic never leaves the guest.
#
# Usage
#   rdma-vm.sh build                         build/refresh the cached guest image
#   rdma-vm.sh run <host-dir> [--] <cmd...>  boot, run <cmd> in <host-dir>, exit with its status
#   rdma-vm.sh shell [<host-dir>]            interactive shell in the VM (serial console;
#                                            `exit` powers off, Ctrl-A x kills QEMU)
#   rdma-vm.sh selftest                      ibv_devices, ibv_rc_pingpong, ib_write_bw, ib_send_lat, rping
#   rdma-vm.sh clean                         delete the cache
#
# Options for run/shell (before <host-dir>):
#   -e NAME=VALUE   export a variable to the command (repeatable)
#
# Environment knobs
#   RDMA_VM_CACHE    cache dir              (default ${XDG_CACHE_HOME:-~/.cache}/remote-gpu-rdma-vm)
#   RDMA_VM_ACCEL    auto | kvm | tcg       (default auto: kvm only with real VT-x/AMD-V)
#   RDMA_VM_CPUS     guest vCPUs            (default: host cores, at least 2)
#   RDMA_VM_MEM      guest RAM in MiB       (default 2048)
#   RDMA_VM_TIMEOUT  seconds before the VM is killed (default 3600)
#   RDMA_VM_BOOT_TIMEOUT  seconds allowed from start to the command (default 300)
#   RDMA_VM_RXE      number of rxe devices  (default 1; 2 adds rxe1 on the veth peer)
#   RDMA_VM_VERBOSE  1 = copy the guest kernel console to stderr
#   RDMA_VM_KERNEL_PKG  kernel package (default: whatever linux-image-amd64 depends on)
#   RDMA_VM_CPU      QEMU -cpu model (default: host with KVM, x86-64-v2 qemu64 with TCG)
#   RDMA_VM_MACHINE  QEMU -machine (default q35);  RDMA_VM_APPEND  extra kernel args
#   RDMA_VM_SETUP_FAIL_STATUS  exit status when the VM cannot be set up (default 125)
#
# Inside the guest the command sees:
#   RDMA_VM_DEV=rxe0  RDMA_VM_GID_INDEX=1 (IPv4-mapped GID)  RDMA_VM_IP=10.99.0.1
#   (RDMA_VM_DEV2=rxe1 RDMA_VM_IP2=10.99.0.2 when RDMA_VM_RXE=2)
#
# Exit status of `run`: the command's own status; 124 if the VM timed out;
# 125 if the VM failed before the command could report a status.

set -u
set -o pipefail

# Bump when the layout of the guest image or /init changes: forces a rebuild.
IMAGE_FORMAT=6

CACHE_ROOT=${RDMA_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/remote-gpu-rdma-vm}
IMAGE_DIR=$CACHE_ROOT/image-v$IMAGE_FORMAT
ACCEL=${RDMA_VM_ACCEL:-auto}
CPUS=${RDMA_VM_CPUS:-$(nproc)}
[ "$CPUS" -lt 2 ] && CPUS=2          # server + client processes need 2 vCPUs
MEM=${RDMA_VM_MEM:-2048}
TIMEOUT=${RDMA_VM_TIMEOUT:-3600}
BOOT_TIMEOUT=${RDMA_VM_BOOT_TIMEOUT:-300}
NRXE=${RDMA_VM_RXE:-1}
VERBOSE=${RDMA_VM_VERBOSE:-0}

# Host packages.  The guest runs the host's userland, so the RDMA tools and
# libraries must be installed on the host (your build needs libibverbs-dev
# anyway).  kmod (depmod/modprobe) and cpio are only used to build the image.
HOST_PKGS="qemu-system-x86 kmod cpio xz-utils iproute2 libibverbs1 ibverbs-providers
           librdmacm1 ibverbs-utils rdmacm-utils perftest"

# Kernel modules to put into the initramfs (their dependencies are added
# automatically, in load order).  crc32 is needed by rxe for the RoCE ICRC.
GUEST_MODULES="virtio_pci 9pnet_virtio 9p overlay crc32_generic crc32-pclmul
               veth ib_core ib_uverbs rdma_rxe ib_cm iw_cm rdma_cm rdma_ucm ib_umad"

msg() { echo "rdma-vm: $*" >&2; }
# Setup failures (packages, guest image) exit with RDMA_VM_SETUP_FAIL_STATUS,
# 125 by default; ctest passes 77, its "skipped".
die() { msg "error: $*"; exit "${RDMA_VM_SETUP_FAIL_STATUS:-125}"; }

# Temporary files and processes; cleanup() runs on every exit (trap EXIT).
QPID=""     # the `timeout qemu-system-x86_64 ...` process
TPID=""     # the `tail -f` that streams the command's output
CTL=""      # host side of the "ctl" 9p share (a temp dir)
WORK=""     # image build directory
ENVFILE=""  # -e NAME=VALUE assignments
cleanup() {
    [ -n "$QPID" ] && kill "$QPID" 2>/dev/null   # timeout passes it on to QEMU
    [ -n "$TPID" ] && kill "$TPID" 2>/dev/null
    [ -n "$CTL" ] && rm -rf "$CTL"
    [ -n "$WORK" ] && rm -rf "$WORK"
    [ -n "$ENVFILE" ] && rm -f "$ENVFILE"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------------------
# Host preparation
# ---------------------------------------------------------------------------

# Install any of $HOST_PKGS that is missing (needs root).
ensure_host_packages() {
    local missing="" p
    for p in $HOST_PKGS; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
            missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    [ "$(id -u)" = 0 ] || die "missing packages:$missing (run as root or install them)"
    msg "installing host packages:$missing"
    apt-get update -qq >/dev/null || die "apt-get update failed"
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
        die "apt-get install failed"
}

# Name of the concrete kernel image package, e.g. linux-image-6.1.0-56-amd64.
kernel_package() {
    if [ -n "${RDMA_VM_KERNEL_PKG:-}" ]; then echo "$RDMA_VM_KERNEL_PKG"; return; fi
    local k
    k=$(apt-cache depends linux-image-amd64 2>/dev/null |
        awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }')
    if [ -z "$k" ]; then              # empty apt lists: refresh once
        apt-get update -qq >/dev/null 2>&1
        k=$(apt-cache depends linux-image-amd64 2>/dev/null |
            awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }')
    fi
    [ -n "$k" ] || die "cannot resolve linux-image-amd64 to a kernel package"
    echo "$k"
}

# ---------------------------------------------------------------------------
# Guest image: vmlinux (+ vmlinuz fallback) + initrd.cpio in $IMAGE_DIR
# ---------------------------------------------------------------------------

# The guest's /init (busybox sh).  Written into the initramfs verbatim.
write_init() {
    cat >"$1" <<'INIT_EOF'
#!/bin/busybox sh
# PID 1 of the rdma-vm guest.  Talks to the host through the 9p share "ctl":
#   ctl/config  (in)  shell variables: MODE, PROJ_DIR, NRXE
#   ctl/cmd.sh  (in)  bash script to run (chrooted into the host's /)
#   ctl/booted  (out) created as soon as the guest is up (boot watchdog)
#   ctl/started (out) created just before the command starts
#   ctl/out     (out) stdout+stderr of the command
#   ctl/rc      (out) exit status of the command
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

halt() { sync; poweroff -f; sleep 10; }
fail() {
    echo "rdma-vm guest: FAILED: $*"
    [ -d /ctl/. ] && echo 125 >/ctl/rc 2>/dev/null
    halt
}

# 1. kernel modules, in dependency order (computed on the host)
while read -r m; do
    insmod "/modules/$m" 2>/dev/null && continue
    # crc32-pclmul needs PCLMULQDQ, which the TCG cpu model lacks: optional
    [ "$m" = crc32-pclmul.ko ] || echo "rdma-vm guest: insmod $m failed"
done </modules/load.order

# 2. the control share and the host's root filesystem
O9P=trans=virtio,version=9p2000.L,msize=262144
mount -t 9p -o $O9P,cache=none ctl /ctl || fail "mount ctl"
: >/ctl/booted
. /ctl/config
R=/host
mount -t 9p -o $O9P,ro,cache=loose hostroot $R || fail "mount host root"
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount -t devtmpfs devtmpfs $R/dev
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts devpts $R/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $R/dev/shm
# /tmp and /var/tmp: the host's content stays visible (a source tree may live
# there), but writes land in a guest-only tmpfs (overlayfs upper layer).
# /run: a fresh tmpfs.
mkdir -p /rw
mount -t tmpfs -o mode=755 tmpfs /rw
for d in /tmp /var/tmp; do
    [ -d $R$d ] || continue
    mkdir -p /rw$d/upper /rw$d/work && chmod 1777 /rw$d/upper
    mount -t overlay -o lowerdir=$R$d,upperdir=/rw$d/upper,workdir=/rw$d/work overlay $R$d ||
        mount -t tmpfs -o mode=1777 tmpfs $R$d
done
mount -t tmpfs -o mode=755 tmpfs $R/run
mkdir -p $R/run/lock $R/tmp/home
if [ -n "$PROJ_DIR" ]; then
    mkdir -p "$R$PROJ_DIR" 2>/dev/null
    mount -t 9p -o $O9P,cache=mmap proj "$R$PROJ_DIR" || fail "mount $PROJ_DIR"
fi

# Run a program from the host's userland.
hostrun() {
    chroot $R /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}

# 3. network + Soft-RoCE.  A veth pair rdmavm0 (10.99.0.1) <-> rdmavm1
#    (10.99.0.2); the VM has no NIC, so nothing can leave it.  rxe0 sits on
#    rdmavm0; with NRXE=2 rxe1 sits on rdmavm1.  Both addresses are local, so
#    the kernel would normally shortcut traffic between them through "lo",
#    where rxe cannot receive it (and address resolution fails).  Policy
#    routing (the local table moved behind two rules) plus accept_local sends
#    it over the veth "wire" instead (then rdma_cm connections between the
#    two IPs always cross the wire, e.g. a client for 10.99.0.1 uses rxe1).
#    rxe0 talking to itself needs none of this: rxe loops those packets back
#    internally.
cat >$R/tmp/.rdma-vm-net <<NET_EOF
link set lo up
link add rdmavm0 type veth peer name rdmavm1
addr add 10.99.0.1/24 dev rdmavm0
addr add 10.99.0.2/24 dev rdmavm1
link set rdmavm0 up
link set rdmavm1 up
NET_EOF
# Only with two devices: with one, rdma_cm must see 10.99.0.1 as plain local
# (the rules below would route it out via rdmavm1, which has no rxe then).
if [ "$NRXE" -ge 2 ]; then
    cat >>$R/tmp/.rdma-vm-net <<NET_EOF
rule add pref 100 lookup local
rule del pref 0
rule add pref 10 iif lo to 10.99.0.2 lookup 100
rule add pref 11 iif lo to 10.99.0.1 lookup 101
route add 10.99.0.2 dev rdmavm0 src 10.99.0.1 table 100
route add 10.99.0.1 dev rdmavm1 src 10.99.0.2 table 101
NET_EOF
fi
hostrun ip -batch /tmp/.rdma-vm-net || fail "network setup (ip -batch)"
for c in all rdmavm0 rdmavm1; do
    echo 1 >/proc/sys/net/ipv4/conf/$c/accept_local
    echo 0 >/proc/sys/net/ipv4/conf/$c/rp_filter
done
echo "link add rxe0 type rxe netdev rdmavm0" >$R/tmp/.rdma-vm-rdma
[ "$NRXE" -ge 2 ] && echo "link add rxe1 type rxe netdev rdmavm1" >>$R/tmp/.rdma-vm-rdma
hostrun rdma -b /tmp/.rdma-vm-rdma || fail "rdma link add"
rm -f $R/tmp/.rdma-vm-net $R/tmp/.rdma-vm-rdma

# wait until each port is ACTIVE and its IPv4 GID (index 1) is populated
for dev in rxe0 rxe1; do
    [ "$dev" = rxe1 ] && [ "$NRXE" -lt 2 ] && break
    i=0
    while [ $i -lt 100 ]; do
        st=$(cat /sys/class/infiniband/$dev/ports/1/state 2>/dev/null)
        gid=$(cat /sys/class/infiniband/$dev/ports/1/gids/1 2>/dev/null)
        case "$st" in
            *ACTIVE*) case "$gid" in ''|0000:0000:0000:0000:0000:0000:0000:0000) ;; *) break ;; esac ;;
        esac
        sleep 0.1; i=$((i + 1))
    done
    [ $i -lt 100 ] || echo "rdma-vm guest: warning: $dev not ACTIVE with an IPv4 GID (state=$st gid=$gid)"
done

# 4. run the command (or a shell), report its status, power off
cp /ctl/cmd.sh $R/tmp/.rdma-vm-cmd.sh
: >/ctl/started
ENVS="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp/home"
ENVS="$ENVS TERM=${TERM:-linux} LANG=C.UTF-8"
ENVS="$ENVS RDMA_VM=1 RDMA_VM_DEV=rxe0 RDMA_VM_GID_INDEX=1 RDMA_VM_IP=10.99.0.1"
[ "$NRXE" -ge 2 ] && ENVS="$ENVS RDMA_VM_DEV2=rxe1 RDMA_VM_IP2=10.99.0.2"
if [ "$MODE" = shell ]; then
    echo "rdma-vm guest: interactive shell; 'exit' powers the VM off"
    setsid sh -c "exec chroot $R /usr/bin/env -i $ENVS /bin/bash /tmp/.rdma-vm-cmd.sh <>/dev/ttyS0 >&0 2>&1"
    rc=$?
else
    chroot $R /usr/bin/env -i $ENVS /bin/bash /tmp/.rdma-vm-cmd.sh </dev/null >/ctl/out 2>&1
    rc=$?
fi
echo $rc >/ctl/rc
halt
INIT_EOF
    chmod 755 "$1"
}

# extract_vmlinux <bzImage> <out>: find the compressed payload inside the
# bzImage by its magic bytes and decompress it (xz for Debian; gzip and zstd
# handled too).  The result must be an ELF file.
extract_vmlinux() {
    local img=$1 out=$2 off magic tool
    for magic in 'xz:\xfd7zXZ\x00' 'zstd:\x28\xb5\x2f\xfd' 'gzip:\x1f\x8b\x08\x00'; do
        tool=${magic%%:*}
        off=$(LC_ALL=C grep -obUaP "${magic#*:}" "$img" 2>/dev/null | head -n1 | cut -d: -f1)
        [ -n "$off" ] || continue
        case "$tool" in
            xz)   tail -c +"$((off + 1))" "$img" | xz -dc --single-stream >"$out" 2>/dev/null ;;
            zstd) tail -c +"$((off + 1))" "$img" | zstd -dcq >"$out" 2>/dev/null ;;
            gzip) tail -c +"$((off + 1))" "$img" | gzip -dc >"$out" 2>/dev/null ;;
        esac
        # accept the result if it starts with the ELF magic
        [ "$(head -c 4 "$out" | od -An -c | tr -d ' ')" = '177ELF' ] && return 0
    done
    return 1
}

build_image() {
    ensure_host_packages
    local work kpkg kdir kver m path
    work=$(mktemp -d /tmp/rdma-vm-build.XXXXXX) || die "mktemp"
    WORK=$work                                # removed by cleanup on any exit
    kpkg=$(kernel_package) || exit "${RDMA_VM_SETUP_FAIL_STATUS:-125}"
    msg "building guest image with $kpkg (cache: $IMAGE_DIR)"

    # Download (not install) the kernel and busybox-static packages.  The
    # chown lets apt's sandbox user write there (avoids a warning).
    mkdir -p "$work/dl" && chown _apt "$work/dl" 2>/dev/null
    (cd "$work/dl" && apt-get download -qq "$kpkg" busybox-static 2>&1 | grep -v unsandboxed)
    ls "$work"/dl/linux-image-*.deb "$work"/dl/busybox-static_*.deb >/dev/null 2>&1 ||
        die "apt-get download $kpkg busybox-static failed"
    mkdir -p "$work/k" "$work/bb"
    dpkg-deb -x "$work"/dl/linux-image-*.deb "$work/k" || die "unpack kernel"
    dpkg-deb -x "$work"/dl/busybox-static_*.deb "$work/bb" || die "unpack busybox"
    # bookworm ships /lib/modules, newer releases /usr/lib/modules
    if [ ! -d "$work/k/lib/modules" ] && [ -d "$work/k/usr/lib/modules" ]; then
        mkdir -p "$work/k/lib" && ln -s ../usr/lib/modules "$work/k/lib/modules"
    fi
    kdir=$(find "$work/k/lib/modules/" -mindepth 1 -maxdepth 1 -type d | head -n1)
    kver=${kdir##*/}
    [ -f "$work/k/boot/vmlinuz-$kver" ] || die "unexpected layout in $kpkg"
    depmod -b "$work/k" "$kver" || die "depmod"

    # initramfs tree
    local root=$work/root
    mkdir -p "$root"/{bin,dev,proc,sys,ctl,host,modules}
    cp "$(find "$work/bb" -type f -path '*bin/busybox' | head -n1)" "$root/bin/busybox" || die "no busybox binary"
    write_init "$root/init"

    # Resolve module dependencies with the host's modprobe against the
    # unpacked tree (-C /dev/null: ignore the host's modprobe.d options).
    : >"$work/order"
    for m in $GUEST_MODULES; do
        modprobe -C /dev/null -d "$work/k" -S "$kver" --show-depends "$m" ||
            die "module $m not found in $kpkg"
    done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }' >"$work/order" ||
        die "could not resolve the kernel modules"
    : >"$root/modules/load.order"
    while read -r path; do
        cp "$path" "$root/modules/" || die "copy $path"
        echo "${path##*/}" >>"$root/modules/load.order"
    done <"$work/order"

    # Uncompressed cpio: bigger, but the guest does not have to decompress it
    # (which is slow without KVM).
    mkdir -p "$IMAGE_DIR.new"
    (cd "$root" && find . | cpio -o -H newc -R 0:0 --quiet) >"$IMAGE_DIR.new/initrd.cpio" || die "cpio"
    cp "$work/k/boot/vmlinuz-$kver" "$IMAGE_DIR.new/vmlinuz" || die "no vmlinuz"
    # Without KVM, decompressing the bzImage inside the guest takes ~3 s.
    # Debian's kernel has CONFIG_PVH=y, so QEMU can boot the uncompressed ELF
    # vmlinux directly (PVH entry point): unpack it once here.
    if grep -q '^CONFIG_PVH=y' "$work/k/boot/config-$kver" 2>/dev/null; then
        extract_vmlinux "$work/k/boot/vmlinuz-$kver" "$IMAGE_DIR.new/vmlinux" ||
            { msg "could not extract vmlinux, will boot the bzImage (slower)"; rm -f "$IMAGE_DIR.new/vmlinux"; }
    fi
    echo "$kpkg $kver" >"$IMAGE_DIR.new/kernel"
    rm -rf "$IMAGE_DIR" && mv "$IMAGE_DIR.new" "$IMAGE_DIR"
    rm -rf "$work"; WORK=""
    msg "guest image ready: $(cat "$IMAGE_DIR/kernel"), $(du -sh "$IMAGE_DIR" | cut -f1)"
}

image_ok() { [ -s "$IMAGE_DIR/kernel" ] && [ -s "$IMAGE_DIR/initrd.cpio" ]; }

# ensure_image [force]: build the image unless cached; a lock file keeps
# parallel runs from building at the same time.
ensure_image() {
    mkdir -p "$CACHE_ROOT" || die "cannot create $CACHE_ROOT"
    exec 9>"$CACHE_ROOT/build.lock"
    flock 9
    if [ "${1:-}" = force ] || ! image_ok; then build_image; fi
    exec 9>&-
}

# ---------------------------------------------------------------------------
# Running the VM
# ---------------------------------------------------------------------------

# Decide between KVM and TCG.  /dev/kvm alone is not enough: on some nested
# setups (e.g. PVM, "kvm_pvm") /dev/kvm exists but cannot run a stock kernel
# at useful speed, so also require the VT-x/AMD-V cpu flag.
pick_accel() {
    case "$ACCEL" in
        kvm|tcg) echo "$ACCEL" ;;
        *) if [ -r /dev/kvm ] && [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo &&
              [ ! -d /sys/module/kvm_pvm ]; then echo kvm; else echo tcg; fi ;;
    esac
}

# alive <pid>: process exists and is not a zombie (kill -0 is true for zombies)
alive() {
    local st
    st=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null)
    [ -n "$st" ] && [ "$st" != Z ]
}

# start_qemu <accel> <mode> <proj-dir>: starts QEMU in the background, sets QPID.
start_qemu() {
    local accel=$1 mode=$2 proj=$3 cpu serial kernel
    local -a args
    kernel=$IMAGE_DIR/vmlinux                 # uncompressed, PVH boot (fast)
    [ -s "$kernel" ] || kernel=$IMAGE_DIR/vmlinuz
    # TCG: a plain x86-64-v2 model.  "max" emulates AVX2/AVX-512/PCLMUL and
    # made rxe ~2x slower (ib_write_bw 49 vs 92 MB/s).  Binaries built with
    # -march=native may need RDMA_VM_CPU=max.
    if [ "$accel" = kvm ]; then cpu=host
    else cpu="qemu64,+ssse3,+sse4.1,+sse4.2,+popcnt"; accel="tcg,thread=multi"; fi
    cpu=${RDMA_VM_CPU:-$cpu}
    if [ "$mode" = shell ]; then serial=mon:stdio
    elif [ "$VERBOSE" = 1 ]; then serial=file:/dev/stderr
    else serial="file:$CTL/console.log"; fi
    args=(-nodefaults -no-user-config -display none -nic none
          -machine "${RDMA_VM_MACHINE:-q35}" -accel "$accel" -cpu "$cpu" -smp "$CPUS" -m "$MEM"
          -kernel "$kernel" -initrd "$IMAGE_DIR/initrd.cpio"
          -append "console=ttyS0 quiet loglevel=4 panic=-1 rdinit=/init ${RDMA_VM_APPEND:-}"
          -no-reboot -serial "$serial"
          -fsdev "local,id=fsctl,path=$CTL,security_model=none"
          -device "virtio-9p-pci,fsdev=fsctl,mount_tag=ctl"
          -fsdev "local,id=fsroot,path=/,security_model=none,readonly=on,multidevs=remap"
          -device "virtio-9p-pci,fsdev=fsroot,mount_tag=hostroot")
    if [ -n "$proj" ]; then
        args+=(-fsdev "local,id=fsproj,path=$proj,security_model=none,multidevs=remap"
               -device "virtio-9p-pci,fsdev=fsproj,mount_tag=proj")
    fi
    if [ "$mode" = shell ]; then
        # fd 3 = our stdin: bash would give a background job /dev/null instead
        timeout --foreground "$TIMEOUT" qemu-system-x86_64 "${args[@]}" <&3 3<&- &
    else
        timeout "$TIMEOUT" qemu-system-x86_64 "${args[@]}" </dev/null &
    fi
    QPID=$!
}

# run_vm <mode> <proj-dir> <env-assignments-file> <cmd...>
run_vm() {
    local mode=$1 proj=$2 envfile=$3; shift 3
    ensure_host_packages      # cheap when all are there (a few dpkg-query calls)
    ensure_image

    exec 3<&0       # keep our stdin reachable for the interactive shell
    CTL=$(mktemp -d /tmp/rdma-vm-run.XXXXXX) || die "mktemp"
    {
        echo "MODE=$mode"
        printf 'PROJ_DIR=%q\n' "$proj"
        echo "NRXE=$NRXE"
        printf 'TERM=%q\n' "${TERM:-dumb}"
    } >"$CTL/config"
    # The command, as a bash script run inside the chroot.
    {
        echo "# generated by rdma-vm.sh"
        cat "$envfile"
        [ -n "$proj" ] && printf 'cd %q || exit 125\n' "$proj"
        if [ "$mode" = shell ]; then
            echo 'exec /bin/bash -i'
        else
            printf 'exec'; printf ' %q' "$@"; printf '\n'
        fi
    } >"$CTL/cmd.sh"
    : >"$CTL/out"

    local accel t0 ticks qrc
    accel=$(pick_accel)
    t0=$(date +%s)
    start_qemu "$accel" "$mode" "$proj"
    [ "$VERBOSE" = 1 ] && msg "VM starting (accel=$accel, $CPUS vCPUs, ${MEM} MiB)"

    # Boot watchdog, polled every 0.1 s until the guest starts the command:
    #  * KVM picked automatically but /init not reached within 60 s (broken
    #    nested virtualisation): start again with TCG;
    #  * command not started within $BOOT_TIMEOUT s (e.g. a kernel oops):
    #    kill the VM and show the console.
    ticks=0
    while [ ! -e "$CTL/started" ] && alive "$QPID"; do
        if [ "$accel" = kvm ] && [ "$ACCEL" = auto ] && [ ! -e "$CTL/booted" ] && [ $ticks -ge 600 ]; then
            msg "KVM guest did not boot within 60 s, retrying with TCG"
            kill "$QPID" 2>/dev/null; wait "$QPID" 2>/dev/null
            accel=tcg; ticks=0
            start_qemu tcg "$mode" "$proj"
            continue
        fi
        if [ $ticks -ge $((BOOT_TIMEOUT * 10)) ]; then
            msg "guest did not start the command within $BOOT_TIMEOUT s, killing it"
            kill "$QPID" 2>/dev/null
            break
        fi
        sleep 0.1; ticks=$((ticks + 1))
    done
    [ "$VERBOSE" = 1 ] && [ -e "$CTL/started" ] && msg "command started after $(( $(date +%s) - t0 )) s"

    # Stream the command's output while the VM runs; tail exits once QEMU has.
    # (Background + `wait` so that Ctrl-C/TERM reach our trap at once.)
    if [ "$mode" != shell ]; then
        tail -n +1 -s 0.2 -f --pid="$QPID" "$CTL/out" &
        TPID=$!
    fi
    wait "$QPID"; qrc=$?
    QPID=""
    if [ -n "$TPID" ]; then wait "$TPID"; TPID=""; fi
    [ "$VERBOSE" = 1 ] && msg "VM exited after $(( $(date +%s) - t0 )) s (qemu status $qrc)"

    if [ -s "$CTL/rc" ]; then
        return "$(cat "$CTL/rc")"
    fi
    if [ "$qrc" = 124 ]; then
        msg "VM timed out after $TIMEOUT s"
    else
        msg "VM ended without reporting an exit status (qemu status $qrc)"
    fi
    if [ -s "$CTL/console.log" ]; then
        msg "last lines of the guest console:"
        tail -n 30 "$CTL/console.log" >&2
    fi
    [ "$qrc" = 124 ] && return 124
    return 125
}

# Commands used by `selftest`: exercises the verbs stack end to end.
selftest_script() {
    cat <<'EOF'
# Runs inside the guest.  Every step is bounded by `timeout`.
set -u
fails=0
step() { echo; echo "== $*"; }
# wait_tcp <port>: until something listens on the TCP port (server ready)
wait_tcp() {
    local i=0
    while ! ss -Hltn "sport = :$1" | grep -q .; do
        sleep 0.1; i=$((i + 1)); [ $i -lt 300 ] || return 1
    done
}
# pair <server-dev> <client-dev> <server-ip> <tool> [args...]:
# run the tool as server on one device and as client on the other.
pair() {
    local sdev=$1 cdev=$2 ip=$3; shift 3
    timeout 120 "$@" -d "$sdev" >/tmp/server.log 2>&1 &
    local spid=$!
    wait_tcp 18515 || { echo "server did not start"; cat /tmp/server.log; fails=$((fails + 1)); return; }
    if timeout 120 "$@" -d "$cdev" "$ip" && wait $spid; then
        echo "-> ok"
    else
        kill $spid 2>/dev/null
        echo "-> FAILED; server log:"; cat /tmp/server.log; fails=$((fails + 1))
    fi
}
G=$RDMA_VM_GID_INDEX
step "ibv_devices"; ibv_devices
step "rdma link"; rdma link show
step "ibv_devinfo $RDMA_VM_DEV"
ibv_devinfo -d "$RDMA_VM_DEV" | grep -E 'hca_id|transport|fw_ver|state|active_mtu|link_layer'
# 1. both ends on rxe0 (rxe loops the packets back internally)
# 2. with RDMA_VM_RXE=2: server on rxe1, client on rxe0, over the veth pair
set -- "$RDMA_VM_DEV $RDMA_VM_DEV $RDMA_VM_IP"
[ -n "${RDMA_VM_DEV2:-}" ] && set -- "$@" "${RDMA_VM_DEV2} $RDMA_VM_DEV ${RDMA_VM_IP2}"
for p in "$@"; do
    set -- $p
    step "ibv_rc_pingpong 4 KiB x 1000, server $1, client $2"
    pair "$1" "$2" "$3" ibv_rc_pingpong -g "$G" -n 1000
    step "ibv_rc_pingpong 64 B x 5000, server $1, client $2"
    pair "$1" "$2" "$3" ibv_rc_pingpong -g "$G" -n 5000 -s 64
    step "ib_write_bw 64 KiB, 5 s, server $1, client $2"
    pair "$1" "$2" "$3" ib_write_bw -x "$G" -F -s 65536 -D 5
    step "ib_send_lat 64 B x 5000, server $1, client $2"
    pair "$1" "$2" "$3" ib_send_lat -x "$G" -F -s 64 -n 5000
done
for ip in "$RDMA_VM_IP" ${RDMA_VM_IP2:-}; do
    step "rping (librdmacm, rdma_cm address resolution) to $ip"
    timeout 60 rping -s -a "$ip" -C 10 >/tmp/rping-server.log 2>&1 &
    spid=$!
    sleep 2
    if timeout 60 rping -c -a "$ip" -C 10 -v >/tmp/rping-client.log 2>&1 && wait $spid; then
        tail -n 1 /tmp/rping-client.log; echo "-> ok"
    else
        kill $spid 2>/dev/null
        echo "-> FAILED"; cat /tmp/rping-client.log /tmp/rping-server.log; fails=$((fails + 1))
    fi
done
echo
[ $fails -eq 0 ] && { echo "selftest: all passed"; exit 0; }
echo "selftest: $fails step(s) FAILED"; exit 1
EOF
}

usage() {
    sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

main() {
    [ $# -ge 1 ] || usage
    local sub=$1; shift
    case "$sub" in
        build)
            ensure_image force ;;
        clean)
            rm -rf "$CACHE_ROOT" ;;
        run|shell|selftest)
            local envfile proj=""
            envfile=$(mktemp /tmp/rdma-vm-env.XXXXXX) || die mktemp
            ENVFILE=$envfile
            while [ $# -gt 0 ]; do
                case "$1" in
                    -e) [ $# -ge 2 ] || usage
                        [[ $2 =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "-e wants NAME=VALUE"
                        printf 'export %s=%q\n' "${2%%=*}" "${2#*=}" >>"$envfile"; shift 2 ;;
                    *) break ;;
                esac
            done
            if [ "$sub" = run ]; then
                [ $# -ge 1 ] || usage
                proj=$1; shift
                [ "${1:-}" = "--" ] && shift
                [ $# -ge 1 ] || usage
            elif [ "$sub" = shell ]; then
                proj=${1:-}
            fi
            if [ -n "$proj" ]; then
                [ -d "$proj" ] || die "not a directory: $proj"
                proj=$(realpath "$proj")
            fi
            local rc=0
            case "$sub" in
                run)      run_vm run "$proj" "$envfile" "$@"; rc=$? ;;
                shell)    run_vm shell "$proj" "$envfile"; rc=$? ;;
                selftest) run_vm run "" "$envfile" bash -c "$(selftest_script)"; rc=$? ;;
            esac
            exit $rc ;;
        -h|--help|help) usage ;;
        *) usage ;;
    esac
}

main "$@"
