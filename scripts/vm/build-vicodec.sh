#!/usr/bin/env bash
# Builds the kernel's virtual codec driver (vicodec, a stateful V4L2 memory-to-memory FWHT
# encoder/decoder) and the V4L2 mem2mem core it needs (v4l2-mem2mem) as out-of-tree modules for
# the kernel the test VM boots (scripts/vm/run-vm.sh), so the M2M session layer of the hardware
# H.264 encoder can be exercised on a machine without one. Debian's amd64 kernel builds neither.
#
# Usage: scripts/vm/build-vicodec.sh [--check]
#   Prints the directory holding v4l2-mem2mem.ko and vicodec.ko; everything else goes to stderr.
#   The VM sees this machine's / read-only, so a command there loads them from that directory:
#     d=$(scripts/vm/build-vicodec.sh)
#     scripts/vm/run-vm.sh DIR "insmod $d/v4l2-mem2mem.ko && insmod $d/vicodec.ko multiplanar=1 && ..."
#   Their other dependencies (mc, videodev, videobuf2-common/-v4l2/-vmalloc) are loaded there
#   already, for vivid. --check also boots the VM and encodes and decodes a few frames through
#   them, single- then multi-planar (v4l2-ctl; v4l-utils is installed when missing).
#
# The modules are compiled from Debian's linux-source-X.Y against linux-headers of exactly the
# version of the VM's kernel package (both fetched with apt-get download and unpacked in a
# scratch directory, not installed), with a three-line Kbuild; their vermagic and dependencies
# are checked against that kernel. The result is kept in
# $cache/vicodec-<kernel release>_<package version>/ (.complete marks it done, build-info says
# what went in): a second run only prints the path. gcc-N (the compiler the kernel was built
# with), make, kmod and xz-utils are installed with apt-get when missing.
#
# Environment: VIGIL_VM_CACHE (as run-vm.sh: ${XDG_CACHE_HOME:-$HOME/.cache}/vigil-vm),
# VM_KERNEL_PKG (as run-vm.sh; default: $cache/kernel-package, else what linux-image-amd64
# depends on), VICODEC_JOBS (make -j, 1), VM_TIMEOUT (--check: 300 s).
#
# What vicodec is (Linux 6.1; seen in the VM with v4l-utils 1.22.1). Module parameters
# multiplanar (bool, 0444) and debug. One platform device, vicodec.0, makes three nodes after
# vivid's (/dev/video4..6), each with driver and card "vicodec", bus "platform:vicodec": they are
# told apart by /sys/class/video4linux/videoN/name: stateful-encoder, stateful-decoder,
# stateless-decoder. Device caps 0x04208000 (VIDEO_M2M | STREAMING | EXT_PIX_FORMAT), with
# multiplanar=1 0x04204000 (VIDEO_M2M_MPLANE instead). Encoder: OUTPUT (raw) queue offers YU12
# YV12 422P NV12 NV21 NV16 NV61 NV24 NV42 YUYV YVYU UYVY VYUY BGR3 RGB3 HSV3 BGR4 XR24 AR24 RGB4
# BX24 BA24 RX24 RA24 XB24 AB24 HSV4 GREY, sizes 640x360..4096x2160 step 8; CAPTURE queue FWHT
# only; one plane either way. 640x480 YU12 or NV12: bytesperline 640, sizeimage 460800; FWHT
# sizeimage 1228844. Formats belong to the open file (the default is 1280x720 at each open).
# Controls: min_number_of_output_buffers (1, read-only), video_gop_size (1..16, 10),
# fwht_i_frame_qp_value and fwht_p_frame_qp_value (1..31, 20); no FORCE_KEY_FRAME, no H.264
# ones. V4L2_ENC_CMD_STOP (a no-op unless both queues stream): the last encoded buffer carries
# V4L2_BUF_FLAG_LAST, or, when the stop comes after the last frame was done, an extra empty
# (bytesused 0) one does; V4L2_EVENT_EOS is queued too, possibly before the last buffers are
# dequeued. Timestamps are copied from OUTPUT to CAPTURE buffers. rmmod or modprobe -r while a
# node is open fails ("Module vicodec is in use"); unbinding the device instead makes the nodes
# vanish and the next VIDIOC_QBUF fail with ENODEV.
set -euo pipefail

check=0
case ${1:-} in
    "") ;;
    --check) check=1 ;;
    *) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
cache=${VIGIL_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vigil-vm}
jobs=${VICODEC_JOBS:-1}
sudo=""; [[ $(id -u) == 0 ]] || sudo=sudo

# shellcheck source=scripts/apt-install.sh
. "$(dirname "$0")/../apt-install.sh"

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
cached() { [[ -e $out/.complete && -f $out/vicodec.ko && -f $out/v4l2-mem2mem.ko ]]; }

build() ( # in a subshell: its lock, scratch directory and trap end with it
    exec 9>"$cache/.vicodec.lock"
    flock 9 # one build at a time (a separate lock: run-vm.sh's own is not held for this long)
    cached && exit 0 # built while we waited
    say "building vicodec and v4l2-mem2mem for $kpkg $pkgver (once; kept in $out)"
    start=$(date +%s)

    work=$(mktemp -d "$cache/vicodec-build.XXXXXX")
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

    apt_ensure build-vicodec "$gcc" make kmod xz-utils || fail "could not install $gcc, make, kmod and xz-utils"

    # -------------------------------------------------------------- headers and sources
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

    # -------------------------------------------------------------- build
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

    # -------------------------------------------------------------- checks
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
)

# ------------------------------------------------------------------ --check
# Boots the VM (run-vm.sh), loads the modules with multiplanar=0 then 1, encodes 8 flat frames
# of 640x480 YU12 with v4l2-ctl's M2M streaming (EOF sends V4L2_ENC_CMD_STOP), requires 8
# encoded frames and one LAST flag, decodes the stream back through the stateful decoder and
# checks that 8 frames come back, the last one of the shade sent.
check_in_vm() {
    apt_ensure build-vicodec v4l-utils || fail "could not install v4l-utils"
    local share status
    share=$(mktemp -d /tmp/vicodec-check.XXXXXX)
    # shellcheck disable=SC2016 # expanded in the VM
    local probe='set -e
M=$1; frame=$((640 * 480 * 3 / 2))
i=0; : > in.yuv # 8 flat frames, each a shade lighter
while [ $i -lt 8 ]; do head -c $frame /dev/zero | tr "\\0" "\\$(printf %o $((40 + 20 * i)))" >> in.yuv; i=$((i + 1)); done
insmod "$M/v4l2-mem2mem.ko"
for mp in 0 1; do
    insmod "$M/vicodec.ko" multiplanar=$mp
    enc=; dec=
    for v in /sys/class/video4linux/video*; do
        case $(cat "$v/name") in stateful-encoder) enc=/dev/${v##*/} ;; stateful-decoder) dec=/dev/${v##*/} ;; esac
    done
    [ -n "$enc" ] && [ -n "$dec" ] || { echo "multiplanar=$mp: no stateful-encoder/-decoder node" >&2; exit 1; }
    caps=$(v4l2-ctl -d "$enc" -D | sed -n "/Device Caps/{n;s/^[[:space:]]*//;p;q}")
    timeout 120 v4l2-ctl -d "$enc" --verbose --set-fmt-video-out=width=640,height=480,pixelformat=YU12 \
        --set-fmt-video=pixelformat=FWHT --stream-mmap --stream-out-mmap --stream-from=in.yuv --stream-to=out.fwht >enc.log 2>&1 ||
        { cat enc.log >&2; echo "multiplanar=$mp: encoding failed" >&2; exit 1; }
    frames=$(grep -c "^cap dqbuf:.*bytesused: [1-9]" enc.log || true)
    last=$(grep -c "^cap dqbuf:.*(last" enc.log || true)
    timeout 120 v4l2-ctl -d "$dec" --set-fmt-video=pixelformat=YU12 --stream-mmap --stream-out-mmap \
        --stream-from=out.fwht --stream-to=back.yuv >dec.log 2>&1 || { cat dec.log >&2; echo "multiplanar=$mp: decoding failed" >&2; exit 1; }
    back=$(($(wc -c < back.yuv) / frame))
    y=$(od -An -tu1 -j $((frame * 7 + 1000)) -N1 back.yuv | tr -d " ")
    echo "multiplanar=$mp: $enc stateful-encoder ($caps): $frames frames encoded, $(wc -c < out.fwht) bytes of FWHT, LAST flag $last time(s); $dec decoded $back frames back, the last one of luma ${y:-?} (sent: 180)"
    [ "$frames" = 8 ] && [ "$last" = 1 ] && [ "$back" = 8 ] && [ "${y:-0}" -ge 176 ] && [ "${y:-0}" -le 184 ] || { cat enc.log >&2; exit 1; }
    rmmod vicodec
done
rmmod v4l2_mem2mem
echo "vicodec: ok"'
    printf '%s\n' "$probe" > "$share/probe.sh"
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
