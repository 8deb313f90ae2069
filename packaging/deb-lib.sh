# shellcheck shell=bash
# What build-deb.sh and build-deb-libcamera.sh share: sourced, not run.
#
# deb_options TOOL ARG...   parses the options both take: --out DIR into `out` (default dist/
#                           at the top of the repository), --version VERSION into `version`
#                           (default empty), -h/--help (prints the script's header comment and
#                           exits 0); other arguments go to the array `deb_operands`; an
#                           unknown option exits 64, its message starting with TOOL.
# deb_changelog VERSION ENTRY WORK
#                           writes WORK/changelog: packaging/changelog, under an UNRELEASED
#                           entry for VERSION saying ENTRY when ENTRY is not empty (a test
#                           build numbered apart from the program); exports SOURCE_DATE_EPOCH
#                           (unless set) from its newest entry and sets `maintainer` from it
#                           (VIGIL_MAINTAINER overrides).
# deb_unitdir               prints where the building release's packages put systemd units.
# deb_shlibdeps PACKAGE FILE ARCH WORK
#                           prints the Depends dpkg-shlibdeps finds for FILE of PACKAGE built
#                           for ARCH, in WORK; returns 1 (its errors on stderr) where it fails.
# deb_installed_size ROOT   prints Installed-Size in KiB as dpkg-gencontrol counts it: each
#                           file rounded up, plus one per directory, DEBIAN/ left out.
# deb_pack ROOT DEB         writes ROOT/DEBIAN/md5sums, makes the control files 0644, and
#                           builds DEB from ROOT (owned by root, xz), making its directory.

deb_options() {
    local tool=$1
    shift
    out="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/dist"
    version=""
    deb_operands=()
    while [ $# -gt 0 ]; do
        case "$1" in
            --out) out="${2:?--out needs a directory}"; shift 2 ;;
            --version) version="${2:?--version needs a version}"; shift 2 ;;
            -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
            -*) echo "$tool: unknown option $1 — see $0 --help" >&2; exit 64 ;;
            *) deb_operands+=("$1"); shift ;;
        esac
    done
}

deb_changelog() {
    local version=$1 entry=$2 work=$3 changelog maintainer_line
    changelog="$(dirname "${BASH_SOURCE[0]}")/changelog"
    if [ -n "$entry" ]; then
        maintainer_line="$(sed -n '0,/^ -- /s/^ -- \(.*\)  .*$/\1/p' "$changelog")"
        { printf 'vigil (%s) UNRELEASED; urgency=medium\n\n  * %s\n\n -- %s  %s\n\n' \
            "$version" "$entry" "$maintainer_line" "$(date -R)"
          cat "$changelog"; } >"$work/changelog"
    else
        cp "$changelog" "$work/changelog"
    fi
    # Dates inside the package come from the changelog, so the same input builds the same .deb.
    SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(dpkg-parsechangelog -l "$work/changelog" -S Timestamp)}"
    export SOURCE_DATE_EPOCH
    maintainer="${VIGIL_MAINTAINER:-$(dpkg-parsechangelog -l "$work/changelog" -S Maintainer)}"
}

# /lib/systemd/system up to bookworm; from trixie (dpkg 1.22) on, files of a package are under
# /usr only (the merged /usr, DEP 17: lintian's aliased-location). /lib is a link to /usr/lib
# on both, so either path works.
deb_unitdir() {
    if dpkg --compare-versions "$(dpkg-query -W -f '${Version}' dpkg)" ge 1.22; then
        echo usr/lib/systemd/system
    else
        echo lib/systemd/system
    fi
}

# dpkg-shlibdeps wants a source package around the file: it gets a minimal one.
deb_shlibdeps() {
    local package=$1 file=$2 arch=$3 work=$4 shlibs
    mkdir -p "$work/shlibs/debian"
    printf 'Source: vigil\n\nPackage: %s\nArchitecture: any\n' "$package" >"$work/shlibs/debian/control"
    shlibs="$(cd "$work/shlibs" && DEB_HOST_ARCH="$arch" dpkg-shlibdeps -O -e"$file" 2>"$work/shlibdeps.err")" || {
        cat "$work/shlibdeps.err" >&2
        return 1
    }
    echo "$shlibs" | sed -n 's/^shlibs:Depends=//p'
}

deb_installed_size() {
    find "$1" -path "$1/DEBIAN" -prune -o \( -type f -printf '%s\n' -o -type d -printf '1024\n' \) |
        awk '{k += int(($1 + 1023) / 1024)} END {print k}'
}

deb_pack() {
    local root=$1 deb=$2
    (cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\n' | LC_ALL=C sort | xargs md5sum) >"$root/DEBIAN/md5sums"
    chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"
    mkdir -p "$(dirname "$deb")"
    dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
}
