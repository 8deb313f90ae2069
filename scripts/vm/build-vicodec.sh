#!/usr/bin/env bash
# Builds the kernel's virtual codec driver (vicodec, a stateful V4L2 memory-to-memory FWHT
# encoder/decoder) and the V4L2 mem2mem core it needs (v4l2-mem2mem) as out-of-tree modules for
# the kernel the test VM boots (scripts/vm/run-vm.sh), so the M2M session layer of the hardware
# encoder can be exercised on a machine without one. Debian's amd64 kernel builds neither.
#
# Usage: scripts/vm/build-vicodec.sh
#   Prints the directory holding v4l2-mem2mem.ko and vicodec.ko; everything else goes to stderr.
#   Inside the VM (which sees this machine's / read-only) load them with, e.g.:
#     scripts/vm/run-vm.sh DIR "insmod $d/v4l2-mem2mem.ko && insmod $d/vicodec.ko [multiplanar=1] && ..."
#   Their other dependencies (mc, videodev, videobuf2-common/-v4l2/-vmalloc) are already
#   loaded there for vivid.
#
# The modules are compiled from Debian's linux-source-X.Y against linux-headers of exactly the
# version of the cached VM kernel package (both downloaded with apt-get download and unpacked in
# a scratch directory, nothing installed), with a two-line Kbuild; their vermagic and
# dependencies are checked against that kernel. The result is kept in
# $cache/vicodec-<kernel release>_<package version>/ (.complete marks it done): a second run only
# prints the path. gcc-N (the compiler the kernel was built with), make, kmod and xz-utils are
# installed with apt-get when missing.
#
# Environment: VIGIL_VM_CACHE (as run-vm.sh: ${XDG_CACHE_HOME:-$HOME/.cache}/vigil-vm),
# VM_KERNEL_PKG (as run-vm.sh; default: $cache/kernel-package, else what linux-image-amd64
# depends on), VICODEC_JOBS (make -j, 1).
#
# What the modules offer (6.1, seen in the VM with v4l2-ctl 1.22.1): one platform device makes
# three nodes, each with driver and card "vicodec", bus "platform:vicodec", told apart by their
# sysfs name (/sys/class/video4linux/videoN/name): stateful-encoder, stateful-decoder,
# stateless-decoder. Caps: V4L2_CAP_VIDEO_M2M | STREAMING, or V4L2_CAP_VIDEO_M2M_MPLANE with
# multiplanar=1. Encoder: OUTPUT (raw) queue YU12 YV12 422P NV12 NV21 NV16 NV61 NV24 NV42 YUYV
# YVYU UYVY VYUY BGR3 RGB3 HSV3 BGR4 XBGR RGB4 XRGB BGRX RGBX HSV4 GREY; CAPTURE queue FWHT only.
# Controls: video_gop_size, fwht_i_frame_qp, fwht_p_frame_qp, min_number_of_output_buffers; no
# H.264 ones. V4L2_ENC_CMD_STOP ends the stream with the LAST flag on the final capture buffer.
set -euo pipefail

cache=${VIGIL_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vigil-vm}
jobs=${VICODEC_JOBS:-1}
sudo=""; [[ $(id -u) == 0 ]] || sudo=sudo

fail() { echo "build-vicodec: $*" >&2; exit 1; }
say() { echo "build-vicodec: $*" >&2; }

mkdir -p "$cache"

# ------------------------------------------------------------------ which kernel
kpkg=${VM_KERNEL_PKG:-}
[[ -z $kpkg && -s $cache/kernel-package ]] && kpkg=$(cat "$cache/kernel-package")
if [[ -z $kpkg ]]; then
    kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
    [[ -n $kpkg ]] || fail "cannot tell which kernel the VM boots: run scripts/vm/run-vm.sh once, or set VM_KERNEL_PKG"
fi
kver=${kpkg#linux-image-}                 # 6.1.0-57-amd64
# The package version: that of the .deb run-vm.sh downloaded, else apt's candidate.
deb=$(ls "$cache/${kpkg}"_*.deb 2>/dev/null | tail -n 1 || true)
if [[ -n $deb ]]; then
    pkgver=$(dpkg-deb -f "$deb" Version)
else
    pkgver=$(apt-cache policy "$kpkg" 2>/dev/null | awk '/Candidate:/ { print $2 }')
    [[ -n $pkgver && $pkgver != "(none)" ]] || fail "no cached $kpkg .deb and apt knows no version of it (apt-get update?)"
fi

out=$cache/vicodec-${kver}_$pkgver
if [[ -e $out/.complete && -f $out/vicodec.ko && -f $out/v4l2-mem2mem.ko ]]; then
    echo "$out"
    exit 0
fi

exec 9>"$cache/.vicodec.lock"
flock 9 # one build at a time (a separate lock: run-vm.sh's own is not held for this long)
if [[ -e $out/.complete ]]; then echo "$out"; exit 0; fi
say "building vicodec and v4l2-mem2mem for $kpkg $pkgver (once; kept in $out)"
start=$(date +%s)

work=$(mktemp -d "$cache/vicodec-build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# ------------------------------------------------------------------ packages
# The exact headers version; the -common headers, kbuild and compiler it depends on.
download() { # PACKAGE=VERSION...
    (cd "$work/debs" && apt-get download "$@" >&2 2>"$work/apt.err") && return 0
    $sudo apt-get update -q >&2
    (cd "$work/debs" && apt-get download "$@" >&2 2>"$work/apt.err") && return 0
    cat "$work/apt.err" >&2
    return 1
}
mkdir -p "$work/debs"
download "linux-headers-$kver=$pkgver" ||
    fail "linux-headers-$kver $pkgver cannot be downloaded (apt-cache madison linux-headers-$kver); the VM's kernel must be one whose headers the archive still has: remove $cache/kernel-package and the cached $kpkg (run-vm.sh then takes what linux-image-amd64 depends on), or set VM_KERNEL_PKG"
hdeb=$(ls "$work/debs/linux-headers-${kver}_"*.deb)
depends=$(dpkg-deb -f "$hdeb" Depends)
common=$(sed -n 's/.*\(linux-headers-[^ ,]*-common\) (= \([^)]*\)).*/\1=\2/p' <<<"$depends")
kbuild=$(sed -n 's/.*\(linux-kbuild-[0-9.]*\) .*/\1/p' <<<"$depends")
gcc=$(sed -n 's/.*linux-compiler-\(gcc-[0-9]*\)-.*/\1/p' <<<"$depends")
[[ -n $common && -n $kbuild && -n $gcc ]] || fail "unexpected Depends of $(basename "$hdeb"): $depends"
series=${kbuild#linux-kbuild-}            # 6.1
download "$common" "$kbuild=$pkgver" "linux-source-$series=$pkgver" ||
    fail "cannot download $common $kbuild=$pkgver linux-source-$series=$pkgver"

missing=""
for p in "$gcc" make kmod xz-utils; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || missing="$missing $p"
done
if [[ -n $missing ]]; then
    say "installing$missing"
    $sudo apt-get update -q >&2
    # shellcheck disable=SC2086
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing </dev/null >&2
fi

# ------------------------------------------------------------------ headers and sources
root=$work/root
for d in "$work"/debs/linux-headers-*.deb "$work"/debs/linux-kbuild-*.deb; do dpkg-deb -x "$d" "$root"; done
hdr=$root/usr/src/linux-headers-$kver
# Its Makefile includes the -common one by absolute path: point it at ours.
sed -i "s|^include /usr/src/|include $root/usr/src/|" "$hdr/Makefile"
grep -q "^include $root/" "$hdr/Makefile" || fail "unexpected $hdr/Makefile: $(cat "$hdr/Makefile")"

src=linux-source-$series
core=drivers/media/v4l2-core/v4l2-mem2mem.c
codec=drivers/media/test-drivers/vicodec
say "unpacking $core and $codec from $src.tar.xz"
dpkg-deb --fsys-tarfile "$work/debs/linux-source-${series}_${pkgver}_all.deb" |
    tar -xO "./usr/src/$src.tar.xz" | nice xz -dc |
    nice tar -C "$work" -x "$src/$core" "$src/$codec" "$src/include/media/v4l2-mem2mem.h"
# The sources and the headers must be the same kernel.
cmp -s "$work/$src/include/media/v4l2-mem2mem.h" "$root/usr/src/${common%=*}/include/media/v4l2-mem2mem.h" ||
    fail "include/media/v4l2-mem2mem.h differs between $src and ${common%=*}"

# ------------------------------------------------------------------ build
build=$work/build
mkdir -p "$build"
cp "$work/$src/$core" "$work/$src/$codec"/*.[ch] "$build/"
# What Kconfig would give (VIDEO_VICODEC=m selects V4L2_MEM2MEM_DEV=m; MEDIA_CONTROLLER and
# MEDIA_CONTROLLER_REQUEST_API, which it also selects, are =y in Debian's config). No source
# tests the first two, but they are defined as Kconfig would define them.
cat > "$build/Kbuild" <<'EOF'
obj-m := v4l2-mem2mem.o vicodec.o
vicodec-y := vicodec-core.o codec-fwht.o codec-v4l2-fwht.o
ccflags-y := -DCONFIG_V4L2_MEM2MEM_DEV_MODULE=1 -DCONFIG_VIDEO_VICODEC_MODULE=1
EOF
for c in CONFIG_MEDIA_CONTROLLER CONFIG_MEDIA_CONTROLLER_REQUEST_API CONFIG_VIDEOBUF2_VMALLOC CONFIG_VIDEO_DEV; do
    grep -Eq "^$c=[ym]$" "$hdr/.config" || fail "$kpkg was built without $c"
done
say "compiling (make -j$jobs, nice)"
nice make -s -C "$hdr" M="$build" -j"$jobs" modules >"$work/make.log" 2>&1 || { cat "$work/make.log" >&2; fail "the build failed"; }
grep -v 'Skipping BTF generation' "$work/make.log" >&2 || true

# ------------------------------------------------------------------ checks
# vermagic as the kernel's own modules have it; each dependency a module of that kernel.
kdir=$cache/$kpkg
want="$kver SMP"
ref=$kdir/lib/modules/$kver/kernel/drivers/media/v4l2-core/videodev.ko
[[ -e $kdir/.complete && -f $ref ]] && want=$(modinfo -F vermagic "$ref")
for m in v4l2-mem2mem vicodec; do
    magic=$(modinfo -F vermagic "$build/$m.ko")
    [[ $magic == "$want"* ]] || fail "$m.ko has vermagic '$magic', the kernel '$want'"
    if [[ -e $kdir/.complete ]]; then
        for d in $(modinfo -F depends "$build/$m.ko" | tr , ' '); do
            [[ $d == v4l2-mem2mem ]] && continue
            grep -Eq "/$d\.ko(\.[a-z]+)?:" "$kdir/lib/modules/$kver/modules.dep" || fail "$m.ko needs $d, which $kpkg lacks"
        done
    fi
done

rm -rf "$out"
mkdir -p "$out"
cp "$build/v4l2-mem2mem.ko" "$build/vicodec.ko" "$out/"
{
    echo "kernel: $kpkg $pkgver"
    echo "headers: linux-headers-$kver $pkgver, ${common/=/ }, $kbuild $pkgver"
    echo "source: linux-source-$series $pkgver ($core, $codec)"
    echo "compiler: $("$gcc" --version | head -n 1)"
    echo "vermagic: $(modinfo -F vermagic "$out/vicodec.ko")"
    echo "vicodec depends: $(modinfo -F depends "$out/vicodec.ko")"
    echo "v4l2-mem2mem depends: $(modinfo -F depends "$out/v4l2-mem2mem.ko")"
} > "$out/build-info"
touch "$out/.complete"
say "done in $(($(date +%s) - start)) s"
echo "$out"
