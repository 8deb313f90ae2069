# shellcheck shell=bash
# The one way the scripts install what they need from Debian: sourced, not run.
#   . "$(dirname "$0")/apt-install.sh"    (from scripts/; adjust the path from elsewhere)
#
# apt_missing PKG…   prints those of the packages dpkg does not have installed, each after a
#                    space (" a b"), nothing when all are.
# apt_install PKG…   installs the packages with apt-get, as root or through sudo, without
#                    questions (DEBIAN_FRONTEND=noninteractive, stdin from /dev/null) and
#                    without recommends; when that fails with the package lists there are, it
#                    reads them anew (apt-get update) and tries once more. apt's output goes
#                    to stderr, or is appended to the file $APT_LOG when it is set (the last
#                    20 lines of it are printed when the install fails). Returns non-zero when
#                    the install failed.
# apt_ensure WHO PKG… installs those of the packages that are missing, saying
#                    "WHO: installing PKG…" on stderr first; returns non-zero when that failed.

apt_missing() {
    local p missing=""
    for p in "$@"; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || missing="$missing $p"
    done
    printf '%s' "$missing"
}

apt_install() {
    [ $# -gt 0 ] || return 0
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    local log=${APT_LOG:-/dev/stderr}
    {
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" ||
            { $sudo apt-get update -q &&
                $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"; }
    } </dev/null >>"$log" 2>&1 && return 0
    [ -z "${APT_LOG:-}" ] || tail -20 "$APT_LOG" >&2
    return 1
}

apt_ensure() {
    local who=$1
    shift
    local missing
    missing=$(apt_missing "$@")
    [ -n "$missing" ] || return 0
    echo "$who: installing$missing" >&2
    # shellcheck disable=SC2086 # one word per package
    apt_install $missing
}
