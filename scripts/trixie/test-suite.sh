#!/usr/bin/env bash
# The whole test suite with Debian trixie's own Swift (swiftlang 6.0.3, the Swift of the Raspberry
# Pi package) in the build root of scripts/trixie/root.sh (amd64): the sources and tests are
# built there (debug, in the copy of the sources kept in the cache by lib.sh's build_tree, in its
# .build/trixie-amd64-tests: only what changed is rebuilt), then run as on this machine: every
# suite but FaultTests in parallel, then FaultTests one test at a time. Its readers (ffprobe, ffmpeg,
# GStreamer, mediainfo), mosquitto, openssl and console fonts are trixie's. Needs root (chroot);
# make test-trixie runs it.
# Usage: scripts/trixie/test-suite.sh [--filter REGEX] [--skip-faults | --faults-only]
#   --filter REGEX  run only the tests it matches (swift test --filter), in parallel: not for
#                   FaultTests, which must run one at a time (use --faults-only)
#   --skip-faults   leave FaultTests out
#   --faults-only   FaultTests alone, one test at a time
# Environment: VIGIL_TRIXIE_CACHE (see root.sh).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
filter=""
faults=true
others=true
while [ $# -gt 0 ]; do
    case "$1" in
        --filter) filter="${2:?--filter needs a pattern}"; shift 2 ;;
        --skip-faults) faults=false; shift ;;
        --faults-only) others=false; shift ;;
        -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
        *) echo "test-trixie: unknown argument $1 — see $0 --help" >&2; exit 64 ;;
    esac
done
fail() { echo "test-trixie: FAIL: $*" >&2; exit 1; }
note() { echo "test-trixie: $*" >&2; }
[ "$(id -u)" = 0 ] || fail "needs root (chroot does) — run it as root, or with sudo"

started=$(date +%s)
root="$("$here/root.sh" build)"
use_build_tree "$root"
scratch=/build/.build/trixie-amd64-tests
swift() { in_root "$root" --bind "$tree:/build" sh -c 'cd /build && exec swift "$@"' sh "$@"; }
note "$(swift --version 2>/dev/null | head -1)"

t0=$(date +%s)
scratch_log="$(mktemp "${TMPDIR:-/var/tmp}/vigil-test-trixie-build.XXXXXX")"
if ! swift build --build-tests --scratch-path "$scratch" </dev/null >"$scratch_log" 2>&1; then
    grep -aE 'error:' "$scratch_log" | sort -u | head -40 >&2 || tail -40 "$scratch_log" >&2
    fail "the sources or tests do not build with trixie's Swift (above; the log: $scratch_log)"
fi
rm -f "$scratch_log"
note "built in $(($(date +%s) - t0)) s"

# Runs swift test with ARGS, its summary and failures printed; fails when a test fails.
run() {
    local what="$1"; shift
    local t0 status log
    t0=$(date +%s)
    log="$(mktemp "${TMPDIR:-/var/tmp}/vigil-test-trixie.XXXXXX")"
    set +e
    swift test --skip-build --scratch-path "$scratch" "$@" </dev/null >"$log" 2>&1
    status=$?
    set -e
    grep -aE '^(✘|􀢄) |Test run with|Executed [0-9]+ tests' "$log" >&2 || true
    if [ $status != 0 ]; then
        note "the log of $what: $log"
        fail "$what failed with trixie's Swift (exit $status)"
    fi
    grep -aq 'Test run with [0-9]* tests.* passed' "$log" || { note "the log: $log"; fail "$what: no passing test run reported"; }
    note "$what passed in $(($(date +%s) - t0)) s"
    rm -f "$log"
}
if [ -n "$filter" ]; then
    run "the tests matching $filter" --filter "$filter"
else
    if $others; then run "the suite (without FaultTests)" --skip FaultTests; fi
    if $faults; then run "FaultTests" --no-parallel --filter FaultTests; fi
fi
note "passed in $(($(date +%s) - started)) s"
