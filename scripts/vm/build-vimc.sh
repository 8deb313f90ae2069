#!/usr/bin/env bash
# Builds the kernel's virtual media controller driver (vimc: a sensor, a debayer, a scaler and
# capture nodes behind a media device, the camera pipeline libcamera's `vimc` handler drives) as
# an out-of-tree module for the kernel the test VM boots (scripts/vm/run-vm.sh), so the libcamera
# source is tested against a real kernel camera. Debian's amd64 kernel does not build it
# (CONFIG_VIDEO_VIMC is off).
#
# Usage: scripts/vm/build-vimc.sh [--check]
#   Prints the directory holding vimc.ko; everything else goes to stderr. The VM sees this
#   machine's / read-only, so a command there loads it from that directory:
#     d=$(scripts/vm/build-vimc.sh)
#     scripts/vm/run-vm.sh DIR "modprobe v4l2-tpg && insmod $d/vimc.ko && cam -l"
#   Its other dependencies (mc, videodev, videobuf2-*, v4l2-tpg) are those vivid loads.
#   --check also boots the VM and lists and captures a few frames with libcamera's `cam`
#   (libcamera-tools, installed when missing).
#
# Built exactly as scripts/vm/build-vicodec.sh builds vicodec: from Debian's linux-source-X.Y
# against linux-headers of the VM kernel's exact version (fetched with apt-get download and
# unpacked in a scratch directory, not installed), with a short Kbuild; vermagic and
# dependencies are checked against that kernel. The result is kept in
# $cache/vimc-<kernel release>_<package version>/ (.complete marks it done, build-info says what
# went in): a second run only prints the path.
#
# Environment: VIGIL_VM_CACHE, VM_KERNEL_PKG (as run-vm.sh), VIMC_JOBS (make -j, 1),
# VM_TIMEOUT (--check: 300 s).
#
# What vimc is (Linux 6.1; seen in the VM with libcamera 0.0.3): one platform device, vimc.0,
# with a media device (/dev/media0 after vivid's) and four video nodes ("Raw Capture 0/1",
# "RGB/YUV Capture" behind the debayer and scaler). libcamera's vimc handler makes one camera of
# the "RGB/YUV Capture" path, id "platform/vimc.0 Sensor B", offering BGR888, RGB888 and
# ARGB8888 (no YUV), sizes 48x48 to 4096x2160 (rounded to what the scaler makes: a multiple of
# its factor); no FrameDurationLimits, no AfMode. Unbinding vimc.0 (echo vimc.0 >
# /sys/bus/platform/drivers/vimc/unbind) removes its nodes; binding it makes them again.
set -euo pipefail

check=0
case ${1:-} in
    "") ;;
    --check) check=1 ;;
    *) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
cache=${VIGIL_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vigil-vm}
jobs=${VIMC_JOBS:-1}
sudo=""; [[ $(id -u) == 0 ]] || sudo=sudo

fail() { echo "build-vimc: $*" >&2; exit 1; }
say() { echo "build-vimc: $*" >&2; }

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

out=$cache/vimc-${kver}_$pkgver
cached() { [[ -e $out/.complete && -f $out/vimc.ko ]]; }

build() ( # in a subshell: its lock, scratch directory and trap end with it
    exec 9>"$cache/.vimc.lock"
    flock 9 # one build at a time (a separate lock: run-vm.sh's own is not held for this long)
    cached && exit 0 # built while we waited
    say "building vimc for $kpkg $pkgver (once; kept in $out)"
    start=$(date +%s)

    work=$(mktemp -d "$cache/vimc-build.XXXXXX")
    trap 'rm -rf "$work"' EXIT

    # -------------------------------------------------------------- packages
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

    # -------------------------------------------------------------- headers and sources
    root=$work/root
    for d in "$work"/debs/linux-headers-*.deb "$work"/debs/linux-kbuild-*.deb; do dpkg-deb -x "$d" "$root"; done
    hdr=$root/usr/src/linux-headers-$kver
    # Its Makefile includes the -common one by absolute path: point it at ours.
    sed -i "s|^include /usr/src/|include $root/usr/src/|" "$hdr/Makefile"
    grep -q "^include $root/" "$hdr/Makefile" || fail "unexpected $hdr/Makefile: $(cat "$hdr/Makefile")"

    src=linux-source-$series
    driver=drivers/media/test-drivers/vimc
    say "unpacking $driver from $src.tar.xz"
    dpkg-deb --fsys-tarfile "$work/debs/linux-source-${series}_${pkgver}_all.deb" |
        tar -xO "./usr/src/$src.tar.xz" | nice xz -dc |
        nice tar -C "$work" -x "$src/$driver" "$src/include/media/tpg/v4l2-tpg.h"
    # The sources and the headers must be the same kernel.
    cmp -s "$work/$src/include/media/tpg/v4l2-tpg.h" "$root/usr/src/${common%=*}/include/media/tpg/v4l2-tpg.h" ||
        fail "include/media/tpg/v4l2-tpg.h differs between $src and ${common%=*}"

    # -------------------------------------------------------------- build
    build=$work/build
    mkdir -p "$build"
    cp "$work/$src/$driver"/*.[ch] "$build/"
    # The driver's own Makefile, with VIDEO_VIMC=m as Kconfig would set it.
    grep -q 'obj-$(CONFIG_VIDEO_VIMC) += vimc.o' "$work/$src/$driver/Makefile" ||
        fail "unexpected $driver/Makefile: $(cat "$work/$src/$driver/Makefile")"
    { echo 'CONFIG_VIDEO_VIMC := m'; echo 'ccflags-y := -DCONFIG_VIDEO_VIMC_MODULE=1'; cat "$work/$src/$driver/Makefile"; } > "$build/Kbuild"
    for c in CONFIG_MEDIA_CONTROLLER CONFIG_VIDEO_V4L2_SUBDEV_API CONFIG_VIDEOBUF2_VMALLOC CONFIG_VIDEO_V4L2_TPG CONFIG_VIDEO_DEV; do
        grep -Eq "^$c=[ym]$" "$hdr/.config" || fail "$kpkg was built without $c"
    done
    say "compiling (make -j$jobs, nice)"
    nice make -s -C "$hdr" M="$build" -j"$jobs" modules >"$work/make.log" 2>&1 || { cat "$work/make.log" >&2; fail "the build failed"; }
    grep -v 'Skipping BTF generation' "$work/make.log" >&2 || true

    # -------------------------------------------------------------- checks
    # vermagic as the kernel's own modules have it; each dependency a module of that kernel.
    kdir=$cache/$kpkg
    want="$kver SMP"
    ref=$kdir/lib/modules/$kver/kernel/drivers/media/v4l2-core/videodev.ko
    [[ -e $kdir/.complete && -f $ref ]] && want=$(modinfo -F vermagic "$ref")
    magic=$(modinfo -F vermagic "$build/vimc.ko")
    [[ $magic == "$want"* ]] || fail "vimc.ko has vermagic '$magic', the kernel '$want'"
    if [[ -e $kdir/.complete ]]; then
        for d in $(modinfo -F depends "$build/vimc.ko" | tr , ' '); do
            grep -Eq "/$d\.ko(\.[a-z]+)?:" "$kdir/lib/modules/$kver/modules.dep" || fail "vimc.ko needs $d, which $kpkg lacks"
        done
    fi

    rm -rf "$out"
    mkdir -p "$out"
    cp "$build/vimc.ko" "$out/"
    {
        echo "kernel: $kpkg $pkgver"
        echo "headers: linux-headers-$kver $pkgver, ${common/=/ }, $kbuild $pkgver"
        echo "source: linux-source-$series $pkgver ($driver)"
        echo "compiler: $("$gcc" --version | head -n 1)"
        echo "vermagic: $(modinfo -F vermagic "$out/vimc.ko")"
        echo "vimc depends: $(modinfo -F depends "$out/vimc.ko")"
    } > "$out/build-info"
    touch "$out/.complete"
    say "done in $(($(date +%s) - start)) s"
)

# ------------------------------------------------------------------ --check
# Boots the VM (run-vm.sh), loads vimc, and has libcamera's `cam` list the camera and capture 10
# frames of it.
check_in_vm() {
    dpkg-query -W -f='${Status}\n' libcamera-tools 2>/dev/null | grep -q '^install ok installed' || {
        say "installing libcamera-tools libcamera-ipa"
        $sudo apt-get update -q >&2
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libcamera-tools libcamera-ipa </dev/null >&2
    }
    local share status
    share=$(mktemp -d /tmp/vimc-check.XXXXXX)
    # shellcheck disable=SC2016 # expanded in the VM
    printf '%s\n' 'set -e
modprobe v4l2-tpg
insmod "$1/vimc.ko"
cam -l
timeout 120 cam -c 1 -C 10 --stream pixelformat=BGR888,width=640,height=480 2>&1 | tail -n 3
echo "vimc: ok"' > "$share/probe.sh"
    set +e
    VM_TIMEOUT=${VM_TIMEOUT:-300} "$(dirname "$0")/run-vm.sh" "$share" "sh ./probe.sh '$out'" >&2
    status=$?
    set -e
    rm -rf "$share"
    ((status == 0)) || fail "the check in the VM failed (exit $status)"
}

cached || build
((check)) && check_in_vm
echo "$out"
