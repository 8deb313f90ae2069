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
# The modules are compiled by scripts/vm/module-build.sh (from Debian's linux-source-X.Y against
# the VM kernel's exact linux-headers, checked against that kernel) with a three-line Kbuild.
# The result is kept in $cache/vicodec-<kernel release>_<package version>/ (.complete marks it
# done, build-info says what went in): a second run only prints the path.
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

name=vicodec
modules="v4l2-mem2mem vicodec"
usage=2,15
# shellcheck source=scripts/vm/module-build.sh
. "$(dirname "$0")/module-build.sh" "$@"

# What Kconfig would give (VIDEO_VICODEC=m selects V4L2_MEM2MEM_DEV=m; MEDIA_CONTROLLER and
# MEDIA_CONTROLLER_REQUEST_API, which it also selects, are =y in Debian's config). No source
# tests the first two, but they are defined as Kconfig would define them.
vicodec_kbuild() {
    cat > "$2/Kbuild" <<'KBUILD'
obj-m := v4l2-mem2mem.o vicodec.o
vicodec-y := vicodec-core.o codec-fwht.o codec-v4l2-fwht.o
ccflags-y := -DCONFIG_V4L2_MEM2MEM_DEV_MODULE=1 -DCONFIG_VIDEO_VICODEC_MODULE=1
KBUILD
}

# ------------------------------------------------------------------ --check
# Boots the VM (run-vm.sh), loads the modules with multiplanar=0 then 1, encodes 8 flat frames
# of 640x480 YU12 with v4l2-ctl's M2M streaming (EOF sends V4L2_ENC_CMD_STOP), requires 8
# encoded frames and one LAST flag, decodes the stream back through the stateful decoder and
# checks that 8 frames come back, the last one of the shade sent.
# shellcheck disable=SC2016 # expanded in the VM
probe='set -e
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

cached || module_build "drivers/media/v4l2-core/v4l2-mem2mem.c drivers/media/test-drivers/vicodec" \
    include/media/v4l2-mem2mem.h \
    "CONFIG_MEDIA_CONTROLLER CONFIG_MEDIA_CONTROLLER_REQUEST_API CONFIG_VIDEOBUF2_VMALLOC CONFIG_VIDEO_DEV" vicodec_kbuild
((check)) && module_check_in_vm v4l-utils "$probe"
echo "$out"
