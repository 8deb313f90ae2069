# Sourced by the long test scripts (packaging/test-deb.sh, scripts/trixie/test-arm64.sh): their
# report lines, each led by the name given in steps_name. step says how long the last step took
# and names the next; note adds a line; fail says what failed and exits 1.
# Set steps_name before sourcing; started holds the start time (date +%s).
started=$(date +%s)
step_started=$started
step() {
    local now
    now=$(date +%s)
    echo "$steps_name: ($((now - step_started)) s) done" >&2
    step_started=$now
    echo "== $*" >&2
}
fail() { echo "$steps_name: FAIL: $*" >&2; exit 1; }
note() { echo "$steps_name: $*" >&2; }
