#!/usr/bin/env bash
# Tests the Raspberry Pi package (make deb-arm64's) on arm64 Debian trixie under qemu-user, and
# the arm64 build against this machine's x86-64 one. Needs root (chroot); make test-arm64 runs it.
#
#   1. lintian (trixie's, in the build root) reports no error and no warning on the package;
#   2. in a copy of the arm64 trixie root of scripts/trixie/root.sh, apt installs the package
#      and pulls in its Depends; `vigil --version` and `vigil check` (the shipped configuration);
#   3. `vigil analyze` on arm64 and with the x86-64 binary, on 20 s of the synthetic scene and on
#      the real footage of the tests (opencv-doc's tree.avi and vtest.avi, in
#      ~/.cache/vigil-test-footage): the events, the per-frame CSV (time, score, threshold,
#      state, auto-masked share, as printed) and the auto-mask image must be the same;
#   4. `vigil run` on arm64 over 20 s of vtest.avi as a file source, to the end of the file: it
#      exits 0, each clip decodes with this machine's ffprobe, ffmpeg and GStreamer, and the
#      events journal holds the same clips (times, frames, peak) as the x86-64 run;
#   5. the unit tests of Media, QuickTime, Recorder, MotionDetection, Configuration and Logging,
#      built for aarch64 with trixie's Swift (the Swift SDK of the build root; optimised, with
#      -enable-testing) and run under qemu-user in the build root, whose x86-64 ffprobe, ffmpeg
#      and GStreamer read their movies; the detector's exact results on the synthetic scene
#      (ExactScoresTests' digests) must be the x86-64 ones, bit for bit.
#
# Usage: scripts/trixie/test-arm64.sh --x86 VIGIL [--x86-tests DIR] [--deb-dir DIR]
#   --x86 VIGIL      an x86-64 vigil built from the same source (make test-arm64 passes the
#                    debug build of make build)
#   --x86-tests DIR  SwiftPM's x86-64 bin directory holding VigilPackageTests.xctest, for the
#                    digest (default: VIGIL's directory)
#   --deb-dir DIR    where make deb-arm64 put vigil_VERSION_arm64.deb (default dist/)
# Environment: VIGIL_TRIXIE_CACHE (see root.sh); KEEP=1 keeps the work directory.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
. "$here/lib.sh"
x86=""
x86_tests=""
deb_dir="$repo/dist"
while [ $# -gt 0 ]; do
    case "$1" in
        --x86) x86="${2:?--x86 needs a vigil binary}"; shift 2 ;;
        --x86-tests) x86_tests="${2:?--x86-tests needs a directory}"; shift 2 ;;
        --deb-dir) deb_dir="${2:?--deb-dir needs a directory}"; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
        *) echo "test-arm64: unknown argument $1 — see $0 --help" >&2; exit 64 ;;
    esac
done

steps_name=test-arm64
. "$repo/scripts/steps.sh"

[ "$(id -u)" = 0 ] || fail "needs root (chroot does) — run it as root, or with sudo"
[ -n "$x86" ] && [ -x "$x86" ] || fail "give the x86-64 vigil to compare with: --x86 PATH (make test-arm64 builds it)"
x86="$(realpath "$x86")"
x86_tests="$(realpath "${x86_tests:-$(dirname "$x86")}")"
version="$("$x86" --version | sed -n 's/^vigil //p')"
deb="$deb_dir/vigil_${version}_arm64.deb"
[ -f "$deb" ] || fail "$deb is missing — make deb-arm64 makes it"
deb="$(realpath "$deb")"
case "$deb" in "$repo"/*) ;; *) fail "$deb is outside the repository, which is all the build root sees" ;; esac
for tool in ffmpeg ffprobe gst-launch-1.0 dpkg-deb; do
    command -v "$tool" >/dev/null || fail "$tool is missing — make deps installs the readers the tests use"
done

work="$(mktemp -d "${TMPDIR:-/var/tmp}/vigil-test-arm64.XXXXXX")"
cleanup() {
    local status=$?
    set +e
    if [ "${KEEP:-}" = 1 ]; then note "kept $work"; else rm -rf "$work"; fi
    echo "test-arm64: $([ $status = 0 ] && echo passed || echo FAILED) in $(($(date +%s) - started)) s" >&2
}
trap cleanup EXIT
out="$work/out"
mkdir -p "$out"
chmod 0755 "$work" "$out"

echo "== the roots" >&2
build="$("$here/root.sh" build)"
base="$("$here/root.sh" arm64)"
"$here/binfmt.sh" >&2
cache="$(dirname "$build")"

# --- 1. lintian ---------------------------------------------------------------------------------
step "lintian (trixie's) on $(basename "$deb")"
if ! in_root "$build" lintian --fail-on error,warning -I --pedantic --tag-display-limit 0 "/src/${deb#$repo/}" \
        >"$work/lintian.txt" 2>&1; then
    cat "$work/lintian.txt" >&2
    fail "lintian found errors or warnings in $(basename "$deb") (above)"
fi
grep -v '^running with root privileges' "$work/lintian.txt" | sed 's/^/  /' >&2 || true

# --- 2. Install with apt, on arm64 -----------------------------------------------------------------
step "apt install $(basename "$deb") in an arm64 trixie root (qemu-user)"
root="$work/root"
cp -a "$base" "$root"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"
cp "$deb" "$root/root/"
arm=(--bind "$cache/archives:/var/cache/apt/archives" --bind "$out:/out")
# With the root's package lists first (apt-get update takes minutes under qemu); when they are
# out of date (a dependency's version gone from the mirror), read anew and tried again.
install() { in_root "$root" "${arm[@]}" apt-get install -y -q --no-install-recommends "/root/$(basename "$deb")"; }
if ! install </dev/null >"$work/install.log" 2>&1; then
    note "apt-get install with the cached package lists failed: reading them anew"
    if ! { in_root "$root" "${arm[@]}" apt-get update -q && install; } </dev/null >>"$work/install.log" 2>&1; then
        tail -30 "$work/install.log" >&2
        fail "apt-get install of the package failed in the arm64 root (log above)"
    fi
fi
[ "$(in_root "$root" dpkg-query -W -f '${Status} ${Version} ${Architecture}' vigil)" = "install ok installed $version arm64" ] \
    || fail "vigil $version arm64 is not installed after apt-get install"
for dep in $(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/(.*//; s/ //g'); do
    in_root "$root" dpkg-query -W -f '${Status}' "$dep" 2>/dev/null | grep 'install ok installed' >/dev/null \
        || fail "dependency $dep is not installed"
done
note "installed with $(grep -c '^Setting up' "$work/install.log") packages: $(dpkg-deb -f "$deb" Depends)"
[ "$(in_root "$root" vigil --version)" = "vigil $version" ] || fail "the installed vigil does not say 'vigil $version'"
in_root "$root" vigil check >"$work/check.out" 2>&1 || { cat "$work/check.out" >&2; fail "vigil check rejects the shipped /etc/vigil/vigil.conf on arm64"; }
head -1 "$work/check.out" | grep 'configuration OK' >/dev/null || fail "vigil check did not say 'configuration OK': $(head -3 "$work/check.out")"

# --- 3. vigil analyze: arm64 against x86-64 ----------------------------------------------------------
step "footage"
footage="${HOME:-/root}/.cache/vigil-test-footage"
# As Tests/AnalysisTests/RealFootageTests.swift makes them (the same files, shared with it).
mkdir -p "$footage"
data=usr/share/doc/opencv-doc/examples/data
for name in tree vtest; do
    [ -f "$footage/$name.y4m" ] && continue
    if [ ! -f "$footage/$data/$name.avi" ]; then
        if ! ls "$footage"/opencv-doc_*.deb >/dev/null 2>&1; then
            (cd "$footage" && apt-get download -q opencv-doc) >"$work/download.log" 2>&1 \
                || { cat "$work/download.log" >&2; fail "apt-get download opencv-doc failed (the real footage of the tests)"; }
        fi
        dpkg-deb --fsys-tarfile "$(ls "$footage"/opencv-doc_*.deb | sort | tail -1)" \
            | tar -x -C "$footage" "./$data/tree.avi" "./$data/vtest.avi"
    fi
    ffmpeg -nostdin -v error -y -i "$footage/$data/$name.avi" -pix_fmt yuv420p -f yuv4mpegpipe "$footage/$name.y4m.new"
    mv "$footage/$name.y4m.new" "$footage/$name.y4m"
done
# 20 s of the square for vigil run.
ffmpeg -nostdin -v error -i "$footage/vtest.y4m" -t 20 -f yuv4mpegpipe "$out/vtest-20s.y4m"
chmod 0644 "$out/vtest-20s.y4m"
# The same configuration on both sides, for the paths each side sees.
config() { # PREFIX STORAGE
    cat <<EOF
camera = { device = "file:$1/vtest-20s.y4m"; name = "arm64test"; width = 640; height = 480; fps = 15.0; };
recording = { pre_roll = 2.0; post_roll = 2.0; };
storage = { path = "$2"; min_free_mb = 0; };
log = { stats_interval = 5; };
EOF
}
config /out /out/clips-arm64 >"$out/arm64.conf"
config "$out" "$out/clips-x86" >"$out/x86.conf"
chmod 0644 "$out"/*.conf
in_root "$root" "${arm[@]}" vigil check --config /out/arm64.conf >/dev/null || fail "vigil check rejects the test configuration on arm64"

step "vigil analyze on arm64 and on x86-64"
sources=("synthetic|synthetic|synthetic|--seconds 20" "tree|file:/footage/tree.y4m|file:$footage/tree.y4m|" "vtest|file:/footage/vtest.y4m|file:$footage/vtest.y4m|")
compared=0
for entry in "${sources[@]}"; do
    IFS='|' read -r name arm_source x86_source extra <<<"$entry"
    t0=$(date +%s)
    in_root "$root" "${arm[@]}" --bind "$footage:/footage:ro" vigil analyze --config /out/arm64.conf --source "$arm_source" \
        $extra --csv "/out/$name-arm64.csv" --mask-image "/out/$name-arm64.pgm" >"$out/$name-arm64.events" 2>"$work/analyze.err" \
        || { cat "$work/analyze.err" >&2; fail "vigil analyze --source $arm_source failed on arm64"; }
    t1=$(date +%s)
    "$x86" analyze --config "$out/x86.conf" --source "$x86_source" $extra --csv "$out/$name-x86.csv" \
        --mask-image "$out/$name-x86.pgm" >"$out/$name-x86.events" 2>"$work/analyze.err" \
        || { cat "$work/analyze.err" >&2; fail "vigil analyze --source $x86_source failed on x86-64"; }
    frames=$(($(wc -l <"$out/$name-x86.csv") - 1))
    events=$(($(wc -l <"$out/$name-x86.events") - 1))
    [ "$frames" -gt 100 ] || fail "$name: the x86-64 analysis has only $frames frames"
    for kind in events csv pgm; do
        cmp -s "$out/$name-arm64.$kind" "$out/$name-x86.$kind" || {
            diff "$out/$name-x86.$kind" "$out/$name-arm64.$kind" 2>/dev/null | head -10 >&2 || true
            fail "$name: the $kind of arm64's analysis differs from x86-64's (first differences above: < x86-64, > arm64)"
        }
    done
    note "$name: $frames frames, $events events, the same scores, thresholds, states and auto-mask on arm64 (analysed in $((t1 - t0)) s under qemu)"
    sed 's/^/    /' "$out/$name-arm64.events" >&2
    compared=$((compared + frames))
done

# --- 4. vigil run ----------------------------------------------------------------------------------
step "vigil run on arm64: 20 s of vtest.avi as a file source"
t0=$(date +%s)
in_root "$root" "${arm[@]}" vigil run --config /out/arm64.conf >"$work/run-arm64.log" 2>&1 \
    || { tail -30 "$work/run-arm64.log" >&2; fail "vigil run exited $? on arm64 (log above)"; }
t1=$(date +%s)
"$x86" run --config "$out/x86.conf" >"$work/run-x86.log" 2>&1 || { tail -30 "$work/run-x86.log" >&2; fail "vigil run failed on x86-64"; }
grep -q 'msg="clip saved"' "$work/run-arm64.log" || fail "vigil run on arm64 logged no 'clip saved'"
mapfile -t clips < <(find "$out/clips-arm64" -name '*.mov' -type f | sort)
[ ${#clips[@]} -ge 1 ] || fail "vigil run on arm64 wrote no clip"
# The journal's clips, without what differs between two runs (the wall-clock names and times).
events() { sed -E 's/"(file|start|end|trigger_time|bytes|snapshot)": *("[^"]*"|[0-9.]+),? *//g' "$1/events.jsonl"; }
events "$out/clips-arm64" >"$work/events-arm64"
events "$out/clips-x86" >"$work/events-x86"
cmp -s "$work/events-arm64" "$work/events-x86" || {
    diff "$work/events-x86" "$work/events-arm64" >&2 || true
    fail "the clips arm64 recorded are not those x86-64 recorded from the same file (< x86-64, > arm64)"
}
for clip in "${clips[@]}"; do
    name="${clip#$out/clips-arm64/}"
    probe="$(ffprobe -v error -select_streams v:0 -count_frames -show_entries stream=codec_name,width,height,nb_read_frames:format=duration \
        -of default=nw=1 "$clip")" || fail "ffprobe cannot read $name"
    grep -qx 'codec_name=h264' <<<"$probe" && grep -qx 'width=768' <<<"$probe" && grep -qx 'height=576' <<<"$probe" \
        || fail "$name is not 768x576 H.264: $probe"
    frames="$(sed -n 's/^nb_read_frames=//p' <<<"$probe")"
    journal_frames="$(grep -F "\"$name\"" "$out/clips-arm64/events.jsonl" | grep -o '"frames": *[0-9]*' | grep -o '[0-9]*$')"
    [ -n "$journal_frames" ] && [ "$frames" = "$journal_frames" ] \
        || fail "$name: ffprobe reads $frames frames, the journal says ${journal_frames:-nothing}"
    decode="$(ffmpeg -nostdin -v error -i "$clip" -f null - 2>&1)"
    [ -z "$decode" ] || fail "ffmpeg reports errors decoding $name: $decode"
    gst="$(gst-launch-1.0 -q filesrc location="$clip" ! qtdemux ! h264parse ! avdec_h264 ! fakesink 2>&1)" \
        || fail "GStreamer cannot decode $name: $gst"
    note "clip $name: $frames frames, $(sed -n 's/^duration=//p' <<<"$probe") s; ffprobe, ffmpeg and GStreamer decode it"
done
note "recorded in $((t1 - t0)) s under qemu; the same clips as x86-64: $(wc -l <"$work/events-x86")"

# --- 5. libcamera: the arm64 binary without the plugin, the plugin against trixie's libcamera -------
step "camera.device = libcamera on arm64 without vigil-libcamera"
# The package works without libcamera: probe says what to install, run stops with exit 69 and
# the same words, as on x86-64 (CommandTests.LibcameraCommandTests).
in_root "$root" "${arm[@]}" vigil probe >"$work/probe.out" 2>&1 || true
grep -A2 '^Cameras (libcamera)' "$work/probe.out" | grep -q 'vigil-libcamera package is not installed' \
    || fail "vigil probe on arm64 does not say vigil-libcamera is missing: $(grep -A3 '^Cameras (libcamera)' "$work/probe.out")"
sed 's/device = "file:[^"]*"/device = "libcamera"/' "$out/arm64.conf" >"$out/libcamera.conf"
chmod 0644 "$out/libcamera.conf"
set +e
in_root "$root" "${arm[@]}" vigil run --config /out/libcamera.conf >"$work/run-libcamera.log" 2>&1
status=$?
set -e
[ $status = 69 ] && grep -q 'needs the vigil-libcamera package' "$work/run-libcamera.log" \
    || fail "vigil run with camera.device = libcamera and no plugin exited $status on arm64, not 69 naming vigil-libcamera: $(head -3 "$work/run-libcamera.log")"
note "probe names the missing package; run exits 69: $(head -1 "$work/run-libcamera.log")"

step "the libcamera plugin built against trixie's libcamera (the build root, x86-64)"
# libcamera's API moves between releases: the plugin must still compile against the newer one
# (trixie's) as against bookworm's. (On a Raspberry Pi it is built against Raspberry Pi OS's
# libcamera with make deb-libcamera, as docs/guide/cameras.md says.)
mkdir -p "$out/plugin"
chmod 0777 "$out/plugin"
in_root "$build" --bind "$out/plugin:/plugin" env CXX=/usr/libexec/swift/bin/clang++ \
    /src/packaging/build-deb-libcamera.sh --out /plugin >"$work/plugin.out" 2>"$work/plugin.log" \
    || { tail -30 "$work/plugin.log" >&2; fail "the libcamera plugin does not build against trixie's libcamera (log above)"; }
plugin_deb="$out/plugin/$(basename "$(cat "$work/plugin.out")")"
[ -f "$plugin_deb" ] || fail "build-deb-libcamera.sh printed $(cat "$work/plugin.out"), which is not there"
note "$(basename "$plugin_deb"): Depends $(dpkg-deb -f "$plugin_deb" Depends)"

# --- 6. Unit tests for aarch64 -----------------------------------------------------------------------
step "unit tests built for aarch64 (trixie's Swift) and run under qemu-user"
# Optimised, with @testable imports allowed: a debug build runs these tests for over half an
# hour under qemu-user, this one in about two minutes.
# In the copy of the sources kept in the cache (lib.sh's build_tree), whose build directory stays
# between runs: only what changed is rebuilt, whichever checkout runs this.
use_build_tree "$build"
tests=/build/.build/trixie-arm64-tests-release
swift_tests="swift build -c release --build-tests -Xswiftc -enable-testing --scratch-path $tests --swift-sdks-path /opt/swift-sdks --swift-sdk trixie-arm64"
# Without the libcamera plugin (Package.swift): libcamera-dev is the build root's amd64 one.
export VIGIL_ROOT_ENV="PKG_CONFIG_PATH=/usr/lib/aarch64-linux-gnu/pkgconfig VIGIL_NO_LIBCAMERA_PLUGIN=1"
t0=$(date +%s)
in_root "$build" --bind "$tree:/build" sh -c "cd /build && exec $swift_tests" \
    >"$work/tests-build.log" 2>&1 || { tail -30 "$work/tests-build.log" >&2; fail "the tests do not build for aarch64 (log above)"; }
bin="$(in_root "$build" --bind "$tree:/build" sh -c "cd /build && exec $swift_tests --show-bin-path")"
t1=$(date +%s)
note "built in $((t1 - t0)) s"
suites='^(MediaTests|QuickTimeTests|RecorderTests|MotionDetectionTests|ConfigurationTests|LoggingTests)\.'
export VIGIL_ROOT_ENV="LD_LIBRARY_PATH=/opt/swift-arm64/usr/libexec/swift/lib/swift/linux"
set +e
in_root "$build" --bind "$tree:/build" sh -c "cd /build && exec $bin/VigilPackageTests.xctest --testing-library swift-testing --filter '$suites'" \
    >"$work/tests.log" 2>&1
status=$?
set -e
grep -E '^(✘|􀢄)|Test run with' "$work/tests.log" >&2 || true
if [ $status != 0 ]; then
    { grep -B2 -A10 -E '✘|recorded an issue' "$work/tests.log" || tail -20 "$work/tests.log"; } | head -60 >&2 || true
    fail "the unit tests failed on aarch64 (exit $status)"
fi
grep -q 'Test run with [0-9]* tests.* passed' "$work/tests.log" || fail "the aarch64 test run did not report its tests passed"
note "run in $(($(date +%s) - t1)) s under qemu"
digest_arm64="$(grep -o 'detector digest .*' "$work/tests.log" | sort)"
digest_x86="$("$x86_tests/VigilPackageTests.xctest" --testing-library swift-testing --filter 'exactScoresAreReproducible' 2>&1 | grep -o 'detector digest .*' | sort)"
[ -n "$digest_x86" ] || fail "the x86-64 tests in $x86_tests printed no detector digest (build them: swift build --build-tests)"
[ "$digest_arm64" = "$digest_x86" ] || fail "the detector's exact scores differ: x86-64 $digest_x86, aarch64 $digest_arm64"
note "the detector's exact scores are the same on aarch64 and x86-64: $digest_arm64"
step "done: $compared frames analysed on both, with the same results"
