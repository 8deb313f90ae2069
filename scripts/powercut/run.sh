#!/usr/bin/env bash
# `make test-powercut`: what a power cut leaves of a recording, on real file systems.
# Builds vigil (release), boots Debian's kernel under qemu (scripts/vm/run-vm.sh) with
# dm-log-writes and the file systems' modules, and there, per file system, records the
# block writes of the agent recording clips (killed while it writes the third), replays
# them to flush points and to torn states between flushes, and checks each state
# (scripts/powercut/inside.py); then decodes the clips and gives the verdicts on this
# machine (scripts/powercut/check.py).
#
# Usage: scripts/powercut/run.sh
# Environment: SWIFT, SWIFT_FLAGS (as make passes them);
#   POWERCUT_SEED (the random choices; printed, default 14),
#   POWERCUT_FS (default "ext4-ordered ext4-writeback vfat exfat f2fs"),
#   POWERCUT_INTERVALS (flush points tested per file system, default 10),
#   POWERCUT_TORN (torn states after each, default 3),
#   POWERCUT_OUT (default var/powercut/<time>),
#   POWERCUT_VIGIL (a vigil binary to test instead of building this checkout's).
# Results: report.txt, summary.json, per file system the agent's log while recording,
# the log of block writes and the image before it (log.gz, base.img.gz: any state can be
# rebuilt with scripts/powercut/logwrites.py), every state's record (states.jsonl), and
# the failing states' images (failed/*.img.gz).
set -euo pipefail
cd "$(dirname "$0")/../.."
swift=${SWIFT:-swift}
# shellcheck disable=SC2206
flags=(${SWIFT_FLAGS:-})
seed=${POWERCUT_SEED:-14}
filesystems=${POWERCUT_FS:-ext4-ordered ext4-writeback vfat exfat f2fs}
intervals=${POWERCUT_INTERVALS:-10}
torn=${POWERCUT_TORN:-3}
start=$(date +%s)
sudo=""; [[ $(id -u) == 0 ]] || sudo=sudo

# The file systems' tools run in the VM from this machine's root.
missing=""
for p in dmsetup e2fsprogs dosfstools exfatprogs f2fs-tools ffmpeg python3; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || missing="$missing $p"
done
if [[ -n $missing ]]; then
    echo "power-cut suite: installing$missing"
    $sudo apt-get update -q
    # shellcheck disable=SC2086
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing </dev/null
fi

# Release build: under emulation a debug build is too slow to keep up with the camera.
if [[ -n ${POWERCUT_VIGIL:-} ]]; then
    vigil=$(realpath -e "$POWERCUT_VIGIL")
else
    "$swift" build -c release --product vigil "${flags[@]}"
    vigil=$("$swift" build -c release --show-bin-path "${flags[@]}")/vigil
fi

out=${POWERCUT_OUT:-$(pwd)/var/powercut/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(realpath "$out")
built=$(date +%s)
echo "power-cut suite: seed $seed (POWERCUT_SEED), file systems: $filesystems; results in $out"
printf '{"seed": "%s", "filesystems": [%s], "intervals": %s, "torn": %s, "vigil": "%s", "commit": "%s"}\n' "$seed" \
    "$(printf '"%s",' $filesystems | sed 's/,$//')" "$intervals" "$torn" "$vigil" "$(git rev-parse HEAD 2>/dev/null || echo unknown)" > "$out/run.json"

set +e
VM_MODULES="loop dm-log-writes crc32c_generic ext4 vfat nls_cp437 nls_ascii nls_utf8 exfat crc32_generic f2fs" \
VM_MEM=${VM_MEM:-2048} VM_TIMEOUT=${VM_TIMEOUT:-1200} \
    scripts/vm/run-vm.sh "$out" "python3 '$(pwd)/scripts/powercut/inside.py' --vigil '$vigil' --out '$out' \
        --seed '$seed' --fs '$filesystems' --intervals '$intervals' --torn '$torn'"
inside=$?
ran=$(date +%s)
python3 scripts/powercut/check.py "$out"
checked=$?
set -e
end=$(date +%s)
echo "power-cut suite: build $((built - start)) s, VM $((ran - built)) s, host checks $((end - ran)) s, total $((end - start)) s"
if [[ $inside != 0 || $checked != 0 ]]; then
    echo "power-cut suite: FAILED (in the VM: exit $inside; verdicts: exit $checked) — see $out" >&2
    exit 1
fi
echo "power-cut suite: passed"
