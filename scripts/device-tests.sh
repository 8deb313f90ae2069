#!/usr/bin/env bash
# `make test-devices`: Vigil against real kernel drivers. Builds vigil and the device tests,
# boots Debian's kernel under qemu with vivid (V4L2) and snd-aloop (ALSA) loaded
# (scripts/vm/run-vm.sh), and vicodec for the hardware encoder's session layer
# (scripts/vm/build-vicodec.sh), and vimc under libcamera for the libcamera source
# (scripts/vm/build-vimc.sh), runs the scenarios there (Tests/DeviceTests), then checks the
# clips they recorded on this machine with ffprobe and ffmpeg.
#
# Usage: scripts/device-tests.sh [SCENARIO...]   (default: all; see Tests/DeviceTests/main.swift)
# Environment: SWIFT (the swift command), SWIFT_FLAGS (e.g. --scratch-path .build-dev);
# DEVICE_TESTS_STRESS=1 runs `stress-ng --cpu 2` in the VM beside the scenarios (a board at
# 100% CPU: the checks must hold there too; stress-ng is installed with apt-get when missing).
# Results go to var/device-tests/<time>/: figures-vm.txt, figures-host.txt, probe.txt, the
# agents' logs and clips.
set -euo pipefail
cd "$(dirname "$0")/.."
swift=${SWIFT:-swift}
# shellcheck disable=SC2206
flags=(${SWIFT_FLAGS:-})
start=$(date +%s)

# Release builds: under emulation a debug build is too slow to keep up with the camera.
"$swift" build -c release --product vigil "${flags[@]}"
"$swift" build -c release --product vigil-device-tests "${flags[@]}"
# The libcamera plugin, beside them: the libcamera scenario's source and agent load it from there.
"$swift" build -c release --product vigil-libcamera "${flags[@]}"
bin=$("$swift" build -c release --show-bin-path "${flags[@]}")

out=$(pwd)/var/device-tests/$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
built=$(date +%s)
echo "device tests: results in $out"

# The codec scenario's vicodec and v4l2-mem2mem, built for the VM's kernel (Debian builds
# neither) once, and cached beside it; the VM loads them from here.
vicodec=$(scripts/vm/build-vicodec.sh | tail -n 1)
# The libcamera scenario's vimc (scripts/vm/build-vimc.sh), likewise.
vimc=$(scripts/vm/build-vimc.sh | tail -n 1)
# The codec and libcamera scenarios' 10,000 frames take minutes each under emulation: more than
# run-vm.sh's default.
export VM_TIMEOUT=${VM_TIMEOUT:-3000}
command="VIGIL_VICODEC_DIR='$vicodec' VIGIL_VIMC_DIR='$vimc' '$bin/vigil-device-tests' inside '$out' '$bin/vigil' $*"
if [[ ${DEVICE_TESTS_STRESS:-0} == 1 ]]; then
    # shellcheck source=scripts/apt-install.sh
    . scripts/apt-install.sh
    apt_ensure "device tests" stress-ng || { echo "device tests: could not install stress-ng" >&2; exit 1; }
    # The guest runs the host's binaries: stress-ng keeps both virtual CPUs busy until the
    # scenarios end (its timeout only guards against it outliving them).
    command="nice -n 10 stress-ng --cpu 2 --timeout 1800 --quiet & stress=\$!; $command; status=\$?; kill \$stress; wait \$stress; exit \$status"
    echo "device tests: stress-ng --cpu 2 runs in the VM beside the scenarios"
fi
set +e
scripts/vm/run-vm.sh "$out" "$command"
inside=$?
ran=$(date +%s)
"$bin/vigil-device-tests" check "$out"
checked=$?
set -e
end=$(date +%s)
echo "device tests: build $((built - start)) s, VM $((ran - built)) s, host checks $((end - ran)) s, total $((end - start)) s"
if [[ $inside != 0 || $checked != 0 ]]; then
    echo "device tests: FAILED (in the VM: exit $inside; on the host: exit $checked) — see $out" >&2
    exit 1
fi
echo "device tests: passed"
