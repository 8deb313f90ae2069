#!/usr/bin/env bash
# The power-cut suite: what a power cut leaves of a recording, on real file systems.
# Builds vigil (release, this checkout), boots Debian's kernel under qemu
# (scripts/vm/run-vm.sh) with dm-log-writes and the file systems' modules, and there checks
# states of a power cut (scripts/powercut/inside.py): each state is a disk image rebuilt
# from a recording of the agent's block writes (scripts/powercut/logwrites.py), checked with
# the file system's fsck, mounted, repaired (`vigil repair`), started on and stopped; then
# decodes the clips and gives the verdicts on this machine (scripts/powercut/check.py).
#
# Usage: scripts/powercut/run.sh [gate|explore|record]
#   gate     (make test-powercut; CI) the states listed in scripts/powercut/states.list,
#            rebuilt from the recordings kept in scripts/powercut/fixtures/: the same states,
#            byte for byte, on every run (each one's digest is checked before the VM starts).
#            Nothing is recorded: what is tested is what this checkout's repair and start-up
#            make of those states.
#   explore  (make test-powercut-explore SEED=N) a new recording per file system (every file
#            system at once, the agent killed while it writes its third clip) and new random
#            states drawn from it: run it before a change to the writer, repair or storage
#            is submitted, with a few seeds. A failing state's image is kept, and the
#            report prints the command (scripts/powercut/states.py add) and the lines that
#            keep its recording as a fixture and add it to the listed set for good.
#   record   (make powercut-record) re-records the fixtures on purpose — when the writer's
#            on-disk format or the recording's configuration changes, or a file system is
#            added: a new recording per file system (one at a time, so the agent has the VM
#            to itself), states drawn with seed 14 (POWERCUT_SEED), checked; then the
#            recordings replace fixtures/<fs>/ and their states the drawn block of
#            states.list (the states that failed once stay, with their own recordings).
#            Review and commit the new fixtures and list.
# Environment: SWIFT, SWIFT_FLAGS (as make passes them);
#   POWERCUT_SEED (explore: the random choices, default a new one, printed; record: 14),
#   POWERCUT_FS (explore, record: default "ext4-ordered ext4-writeback vfat exfat f2fs";
#     gate: only the listed states of these file systems, default all),
#   POWERCUT_INTERVALS (explore, record: flush points per file system, default 10),
#   POWERCUT_TORN (explore, record: torn states after each, default 3),
#   POWERCUT_OUT (default var/powercut/<time>-<mode>),
#   POWERCUT_VIGIL (a vigil binary to test instead of building this checkout's).
# Results: report.txt, verdicts.txt (one line a state: two runs of the gate give the same
# file), summary.json; per recording its log and the image before it (any state can be
# rebuilt with scripts/powercut/logwrites.py), every state's record (states.jsonl), the
# failing states' images (failed/*.img.gz); explore and record: the agent's log while
# recording (record.log).
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=${1:-gate}
case $mode in
    gate | explore | record) ;;
    *) sed -n '10,41p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 64 ;;
esac
swift=${SWIFT:-swift}
# shellcheck disable=SC2206
flags=(${SWIFT_FLAGS:-})
case $mode in
    explore) seed=${POWERCUT_SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')} ;;
    record) seed=${POWERCUT_SEED:-14} ;;
    gate) seed="" ;;
esac
all_filesystems="ext4-ordered ext4-writeback vfat exfat f2fs"
filesystems=${POWERCUT_FS:-}
intervals=${POWERCUT_INTERVALS:-10}
torn=${POWERCUT_TORN:-3}
start=$(date +%s)
sudo=""; [[ $(id -u) == 0 ]] || sudo=sudo

# The file systems' tools run in the VM from this machine's root; xz keeps the fixtures.
# shellcheck source=scripts/apt-install.sh
. scripts/apt-install.sh
apt_ensure "power-cut suite" dmsetup e2fsprogs dosfstools exfatprogs f2fs-tools ffmpeg python3 xz-utils ||
    { echo "power-cut suite: could not install its tools" >&2; exit 1; }

# The suite's own tests (the list, the digests, the verdicts): seconds, before the VM. The
# committed list's are left out when it is being made anew.
tests=test_powercut
[[ $mode == record ]] && tests="test_powercut.StatesListTests test_powercut.DamagedClipTests"
# shellcheck disable=SC2086
(cd scripts/powercut && python3 -B -m unittest -q $tests)

# Release build: under emulation a debug build is too slow to keep up with the camera.
if [[ -n ${POWERCUT_VIGIL:-} ]]; then
    vigil=$(realpath -e "$POWERCUT_VIGIL")
else
    "$swift" build -c release --product vigil "${flags[@]}"
    vigil=$("$swift" build -c release --show-bin-path "${flags[@]}")/vigil
fi

out=${POWERCUT_OUT:-$(pwd)/var/powercut/$(date +%Y%m%d-%H%M%S)-$mode}
mkdir -p "$out"
out=$(realpath "$out")
commit=${VIGIL_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
built=$(date +%s)
if [[ $mode == gate ]]; then
    # shellcheck disable=SC2086
    python3 scripts/powercut/states.py prepare "$out" $filesystems
    echo "power-cut gate: the listed states (scripts/powercut/states.list), this checkout's vigil; results in $out"
    printf '{"mode": "gate", "vigil": "%s", "commit": "%s"}\n' "$vigil" "$commit" > "$out/run.json"
    command="python3 '$(pwd)/scripts/powercut/inside.py' replay --vigil '$vigil' --out '$out'"
else
    filesystems=${filesystems:-$all_filesystems}
    echo "power-cut suite ($mode): seed $seed (POWERCUT_SEED), file systems: $filesystems; results in $out"
    # shellcheck disable=SC2086
    printf '{"mode": "%s", "seed": "%s", "recordings": {%s}, "intervals": %s, "torn": %s, "vigil": "%s", "commit": "%s"}\n' \
        "$mode" "$seed" "$(for f in $filesystems; do printf '"%s": "%s",' "$f" "$f"; done | sed 's/,$//')" \
        "$intervals" "$torn" "$vigil" "$commit" > "$out/run.json"
    command="python3 '$(pwd)/scripts/powercut/inside.py' record --vigil '$vigil' --out '$out' \
        --seed '$seed' --fs '$filesystems' --intervals '$intervals' --torn '$torn'"
    [[ $mode == record ]] && command="$command --one-at-a-time"
fi

set +e
VM_MODULES="loop dm-log-writes crc32c_generic ext4 vfat nls_cp437 nls_ascii nls_utf8 exfat crc32_generic f2fs" \
VM_MEM=${VM_MEM:-2048} VM_TIMEOUT=${VM_TIMEOUT:-3000} \
    scripts/vm/run-vm.sh "$out" "$command"
inside=$?
ran=$(date +%s)
python3 scripts/powercut/check.py "$out"
checked=$?
set -e
adopted=0
if [[ $mode == record && $inside == 0 ]]; then
    python3 scripts/powercut/states.py adopt "$out" && adopted=1
fi
end=$(date +%s)
echo "power-cut suite ($mode): build $((built - start)) s, VM $((ran - built)) s, host checks $((end - ran)) s, total $((end - start)) s"
if [[ $mode == record ]]; then
    if [[ $adopted == 1 ]]; then
        echo "power-cut suite: new fixtures in scripts/powercut/fixtures/ and a new draw in scripts/powercut/states.list: review and commit them"
    else
        echo "power-cut suite: the fixtures were NOT replaced" >&2
    fi
fi
if [[ $inside != 0 || $checked != 0 ]]; then
    echo "power-cut suite ($mode): FAILED (in the VM: exit $inside; verdicts: exit $checked) — see $out" >&2
    exit 1
fi
echo "power-cut suite ($mode): passed"
