#!/usr/bin/env bash
# Builds the Debian trixie package of Vigil with trixie's own Swift (swiftlang 6.0.3), in the
# build root of scripts/trixie/root.sh (made, or found in ~/.cache/vigil-trixie): a release
# build with the Swift runtime linked statically and full RELRO, as make deb does, packaged by
# packaging/build-deb.sh there, so that dpkg-shlibdeps names trixie's packages in Depends.
#   arm64: cross-built for aarch64 with the root's Swift SDK, for Raspberry Pi OS (trixie,
#          64-bit) and Debian trixie arm64 (make deb-arm64);
#   amd64: built natively, for Debian trixie on x86-64 (make deb-trixie-amd64).
# Needs root (chroot). Prints the package's path.
# Usage: scripts/trixie/build-deb.sh [--out DIR] arm64|amd64
#   --out DIR  where the .deb goes, inside the repository (default dist/ for arm64,
#              dist/trixie/ for amd64, apart from make deb's bookworm package)
# It builds in a copy of the sources kept in the cache (lib.sh's build_tree), in .build/trixie-ARCH
# there (SwiftPM's, kept between runs, whichever checkout asks): only what changed is rebuilt.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
. "$here/lib.sh"
fail() { echo "trixie-deb: $*" >&2; exit 1; }
out=""
arch=""
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out="${2:?--out needs a directory}"; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
        arm64|amd64) arch="$1"; shift ;;
        *) echo "usage: $0 [--out DIR] arm64|amd64 — see $0 --help" >&2; exit 64 ;;
    esac
done
[ -n "$arch" ] || { echo "usage: $0 [--out DIR] arm64|amd64" >&2; exit 64; }
if [ -z "$out" ]; then
    if [ "$arch" = arm64 ]; then out=dist; else out=dist/trixie; fi
fi
# The output directory as the root sees the repository (at /src).
case "$(cd "$repo" && realpath -m "$out")" in
    "$repo"/*) inside="/src/$(cd "$repo" && realpath -m --relative-to=. "$out")" ;;
    *) fail "--out $out is outside the repository, which is all the build root sees" ;;
esac

started=$(date +%s)
root="$("$here/root.sh" build)"
use_build_tree "$root"
scratch=/build/.build/trixie-$arch
release=(-c release --static-swift-stdlib --product vigil --scratch-path "$scratch"
    -Xlinker -z -Xlinker relro -Xlinker -z -Xlinker now)
if [ "$arch" = arm64 ]; then
    "$here/binfmt.sh" >&2
    # The arm64 libraries' pkg-config files come first; the SDK is the root's.
    release+=(--swift-sdks-path /opt/swift-sdks --swift-sdk trixie-arm64)
    export VIGIL_ROOT_ENV="PKG_CONFIG_PATH=/usr/lib/aarch64-linux-gnu/pkgconfig"
fi
echo "trixie-deb: building vigil for $arch with $(in_root "$root" swift --version 2>/dev/null | head -1)" >&2
in_root "$root" --bind "$tree:/build" sh -c 'cd /build && exec swift build "$@" >&2' sh "${release[@]}" \
    || fail "swift build for $arch in the trixie root failed (above)"
binary="$(in_root "$root" --bind "$tree:/build" sh -c 'cd /build && exec swift build "$@" --show-bin-path' sh "${release[@]}")/vigil"
echo "trixie-deb: built $binary in $(($(date +%s) - started)) s" >&2
deb="$(in_root "$root" --bind "$tree:/build" /src/packaging/build-deb.sh --out "$inside" "$binary")" \
    || fail "packaging/build-deb.sh failed in the trixie root (above)"
echo "$repo/${deb#/src/}"
