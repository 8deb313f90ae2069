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
#   --check also boots the VM, starts udev there (libcamera finds only the devices udev has
#   seen), and lists and captures a few frames with libcamera's `cam` (libcamera-tools,
#   installed when missing).
#
# Built as scripts/vm/build-vicodec.sh builds vicodec, by scripts/vm/module-build.sh (from
# Debian's linux-source-X.Y against the VM kernel's exact linux-headers, checked against that
# kernel), with the driver's own Makefile as its Kbuild. The result is kept in
# $cache/vimc-<kernel release>_<package version>/ (.complete marks it done, build-info says what
# went in): a second run only prints the path.
#
# Environment: VIGIL_VM_CACHE, VM_KERNEL_PKG (as run-vm.sh), VIMC_JOBS (make -j, 1),
# VM_TIMEOUT (--check: 300 s).
#
# What vimc is (Linux 6.1; seen in the VM with libcamera 0.0.3): one platform device, vimc.0,
# with a media device (/dev/media1 after vivid's), video nodes ("Raw Capture 0/1", "RGB/YUV
# Capture" behind the debayer and scaler) and subdevices ("Sensor A/B", whose "Test Pattern"
# control makes the picture). libcamera finds it only once udev has seen it (run udevd before
# loading vimc). Its vimc handler makes one camera of the "RGB/YUV Capture" path, id
# "platform/vimc.0 Sensor B", offering BGR888 and RGB888 (no YUV), 48x48 to 4096x2160 in
# multiples of 6 (640x480 becomes 636x480, 648x480 is exact), at vimc's own rate (no
# FrameDurationLimits, no AfMode). Unbinding vimc.0 (echo vimc.0 >
# /sys/bus/platform/drivers/vimc/unbind) removes its nodes, but libcamera 0.0.3 does not tell
# the camera (its vimc handler asks for no hot-unplug notice): stopping the camera then aborts
# the process; binding it again makes the nodes, and the camera, again.
set -euo pipefail

name=vimc
modules=vimc
usage=2,16
# shellcheck source=scripts/vm/module-build.sh
. "$(dirname "$0")/module-build.sh" "$@"

# The driver's own Makefile, with VIDEO_VIMC=m as Kconfig would set it.
vimc_kbuild() {
    local makefile=$1/drivers/media/test-drivers/vimc/Makefile
    grep -q 'obj-$(CONFIG_VIDEO_VIMC) += vimc.o' "$makefile" || fail "unexpected $makefile: $(cat "$makefile")"
    { echo 'CONFIG_VIDEO_VIMC := m'; echo 'ccflags-y := -DCONFIG_VIDEO_VIMC_MODULE=1'; cat "$makefile"; } > "$2/Kbuild"
}

# ------------------------------------------------------------------ --check
# Boots the VM (run-vm.sh), starts udev, loads vimc, and has libcamera's `cam` list the camera
# and capture 10 frames of it at 648x480 (vimc's sizes are multiples of 6).
# shellcheck disable=SC2016 # expanded in the VM
probe='set -e
modprobe v4l2-tpg
mkdir -p /run/udev
/lib/systemd/systemd-udevd --daemon --resolve-names=never
insmod "$1/vimc.ko"
udevadm settle -t 30
cam -l 2>/dev/null | grep -F "(platform/vimc.0 Sensor B)"
timeout 120 cam -c 1 -C 10 -s pixelformat=BGR888,width=648,height=480 > cam.log 2>&1 || { cat cam.log; exit 1; }
frames=$(grep -c "seq:" cam.log || true)
echo "cam captured $frames frames"
[ "$frames" -ge 10 ] || { cat cam.log; exit 1; }
echo "vimc: ok"'

cached || module_build drivers/media/test-drivers/vimc include/media/tpg/v4l2-tpg.h \
    "CONFIG_MEDIA_CONTROLLER CONFIG_VIDEO_V4L2_SUBDEV_API CONFIG_VIDEOBUF2_VMALLOC CONFIG_VIDEO_V4L2_TPG CONFIG_VIDEO_DEV" vimc_kbuild
((check)) && module_check_in_vm libcamera-tools "$probe"
echo "$out"
