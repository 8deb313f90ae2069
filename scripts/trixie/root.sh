#!/usr/bin/env bash
# Makes, or finds in the cache, a Debian trixie root for the Raspberry Pi package, and prints its
# path. Needs root (debootstrap, chroot). Used by build-deb.sh, test-arm64.sh and test-suite.sh here.
#
#   scripts/trixie/root.sh build   an amd64 trixie root to build in: Debian's own Swift (swiftlang,
#                                  6.0.3), the Makefile's build, run and test packages, the same -dev
#                                  packages for arm64 beside them (multiarch: what the cross build
#                                  links and dpkg-shlibdeps reads), the arm64 Swift runtime and static
#                                  standard library (from the arm64 swiftlang and libswiftlang) in
#                                  /opt/swift-arm64, and a Swift SDK for aarch64 made of those
#                                  (/opt/swift-sdks/trixie-arm64.artifactbundle; ld.lld links).
#   scripts/trixie/root.sh arm64   an arm64 trixie root (minbase), run under qemu-user: what a
#                                  Raspberry Pi OS 64-bit or Debian arm64 machine starts from. Use a
#                                  copy: the cached one must stay as debootstrap left it.
#
# Each root is kept in ~/.cache/vigil-trixie (VIGIL_TRIXIE_CACHE) under a key: the hash of this
# script's commands (its comments aside) and of the package lists it installs (BUILD_DEPS,
# RUN_DEPS and TEST_DEPS of the Makefile). When an input changes, the root is made anew and the
# old one deleted. Age alone does not: a root made before one of trixie's point releases still
# builds a package that installs on it (Depends names minimum versions), and making both anew
# takes half an hour, which CI must not meet by surprise; delete the cache directory to start
# from trixie as it is today. The downloaded packages are kept in the cache's archives/, so
# making a root anew downloads only what changed. From nothing: about 6 minutes for the build
# root, 4 for the arm64 root (its second stage runs emulated) on an idle machine; a cached root
# is found at once.
#
# The arm64 root needs qemu-user-static (installed with apt-get when missing) registered with
# binfmt_misc: it is mounted and qemu-aarch64 registered when they are not (until the next boot).
# Environment: VIGIL_TRIXIE_CACHE the cache directory; VIGIL_TRIXIE_MIRROR the Debian mirror
# (default http://deb.debian.org/debian).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=scripts/apt-install.sh
. "$here/../apt-install.sh"
repo="$(cd "$here/../.." && pwd)"
suite=trixie
mirror="${VIGIL_TRIXIE_MIRROR:-http://deb.debian.org/debian}"
fail() { echo "trixie-root: $*" >&2; exit 1; }
note() { echo "trixie-root: $*" >&2; }

kind="${1:-}"
case "$kind" in
    build|arm64) ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "usage: $0 build|arm64 — see $0 --help" >&2; exit 64 ;;
esac
[ "$(id -u)" = 0 ] || fail "needs root (debootstrap and chroot do) — run it as root, or with sudo"
[ "$(dpkg --print-architecture)" = amd64 ] || fail "builds on an x86-64 (amd64) Debian machine; this one is $(dpkg --print-architecture) — on a Pi, run make deb there"

home="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
cache="${VIGIL_TRIXIE_CACHE:-${XDG_CACHE_HOME:-$home/.cache}/vigil-trixie}"
mkdir -p "$cache/archives/partial"

# --- What goes in ---------------------------------------------------------------------------------
make_list() { sed -n "s/^$1 := //p" "$repo/Makefile"; }
build_deps="$(make_list BUILD_DEPS)"
run_deps="$(make_list RUN_DEPS)"
test_deps="$(make_list TEST_DEPS)"
[ -n "$build_deps" ] && [ -n "$run_deps" ] && [ -n "$test_deps" ] \
    || fail "cannot read BUILD_DEPS, RUN_DEPS and TEST_DEPS from $repo/Makefile"
# The build root: Debian's Swift; the tools of packaging/build-deb.sh for both architectures
# (aarch64 binutils: its strip, and the objdump dpkg-shlibdeps runs on an arm64 binary); lintian;
# libstdc++ (the static Swift runtime links it; swiftlang does not depend on it); and each -dev
# package for arm64 too, with the C and C++ runtime the aarch64 link needs (crt files, libgcc,
# libstdc++) and libxml2, which the arm64 Foundation the unit tests link (FoundationXML) loads.
# libcamera-dev is not among them: it cannot be installed for two architectures at once, and
# only the libcamera plugin (not cross-built: VIGIL_NO_LIBCAMERA_PLUGIN) needs it.
arm64_dev="$(for p in $build_deps; do
    case $p in pkg-config | libcamera-dev) ;; *) printf '%s:arm64 ' "$p" ;; esac
done)"
build_packages="swiftlang libstdc++-14-dev dpkg-dev binutils binutils-aarch64-linux-gnu lintian $build_deps $run_deps $test_deps $arm64_dev libc6-dev:arm64 libgcc-14-dev:arm64 libstdc++-14-dev:arm64 libxml2:arm64"
key_input="$(grep -v '^[[:space:]]*#' "$0"; echo "$build_packages")"
key="$(printf '%s' "$key_input" | sha256sum | cut -c1-12)"
root="$cache/$kind-$key"

# One maker of each root at a time; a second run waits, then finds the root made.
exec 9>"$cache/$kind.lock"
flock 9

if [ -d "$root" ]; then
    echo "$root"
    exit 0
fi

# --- Tools ------------------------------------------------------------------------------------------
export DEBIAN_FRONTEND=noninteractive
missing=""
command -v debootstrap >/dev/null || missing="$missing debootstrap"
[ "$kind" = arm64 ] && { [ -x /usr/bin/qemu-aarch64-static ] || missing="$missing qemu-user-static"; }
[ -f /usr/share/keyrings/debian-archive-trixie-stable.gpg ] || [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] \
    || missing="$missing debian-archive-keyring"
if [ -n "$missing" ]; then
    note "installing:$missing"
    # shellcheck disable=SC2086 # one word per package
    APT_LOG="$cache/tools.log" apt_install $missing || fail "could not install$missing with apt-get (log above)"
fi
if [ "$kind" = arm64 ]; then
    "$here/binfmt.sh" >&2
fi

# --- debootstrap ------------------------------------------------------------------------------------
started=$(date +%s)
new="$root.new"
# Whatever is left mounted from an interrupted run goes first.
{ findmnt -rn -o TARGET | grep -F "$new/" || true; } | sort -r | while read -r m; do umount -l "$m"; done
rm -rf "$new"
log="$cache/$kind.log"
: >"$log"
arch=amd64
[ "$kind" = arm64 ] && arch=arm64
note "debootstrap $suite $arch into $new (log: $log)"
# Foreign (arm64): the first stage unpacks here, the second runs in the root under qemu-user.
foreign=""
[ "$arch" = arm64 ] && foreign=--foreign
debootstrap --variant=minbase --arch="$arch" $foreign --cache-dir="$cache/archives" "$suite" "$new" "$mirror" \
    >>"$log" 2>&1 || { tail -20 "$log" >&2; fail "debootstrap $suite $arch failed (log above) — check the network and the mirror (VIGIL_TRIXIE_MIRROR)"; }
if [ "$arch" = arm64 ]; then
    chroot "$new" /debootstrap/debootstrap --second-stage >>"$log" 2>&1 \
        || { tail -20 "$log" >&2; fail "debootstrap's second stage in the arm64 root failed under qemu-user (log above)"; }
fi
# Packages come from the cache's archives/; nothing of this machine leaks in but resolv.conf.
rm -f "$new/etc/apt/sources.list"
printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb\nURIs: http://deb.debian.org/debian-security\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$mirror" "$suite" "$suite" "$suite" >"$new/etc/apt/sources.list.d/debian.sources"
note "debootstrap done in $(($(date +%s) - started)) s"

# Runs a command in the new root with /proc, /sys, /dev and the package cache mounted, in a
# mount namespace of its own: the mounts end with it, whatever happens.
in_new() {
    unshare --mount --propagation private sh -c '
        root="$1"; archives="$2"; shift 2
        mount -t proc proc "$root/proc" && mount -t sysfs sysfs "$root/sys" && mount --rbind /dev "$root/dev" \
            && mount --bind "$archives" "$root/var/cache/apt/archives" || exit 1
        cp /etc/resolv.conf "$root/etc/resolv.conf"
        exec chroot "$root" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
            DEBIAN_FRONTEND=noninteractive HOME=/root "$@"' sh "$new" "$cache/archives" "$@"
}

if [ "$kind" = build ]; then
    started=$(date +%s)
    note "installing Debian's Swift and the build and test packages for amd64 and arm64"
    in_new dpkg --add-architecture arm64
    # No manual pages: a -dev package installed for both architectures must ship the same
    # shared files, and a binNMU's gzipped page differs (libpsl-dev, which libcurl's pulls in).
    echo 'path-exclude=/usr/share/man/*' >"$new/etc/dpkg/dpkg.cfg.d/vigil-no-man"
    { in_new apt-get update -q && in_new apt-get install -y -q --no-install-recommends $build_packages; } \
        </dev/null >>"$log" 2>&1 || { tail -30 "$log" >&2; fail "apt-get install in the build root failed (log above)"; }
    version="$(in_new dpkg-query -W -f '${Version}' swiftlang)"
    note "swiftlang $version and $(echo $build_packages | wc -w) packages installed in $(($(date +%s) - started)) s"

    # The arm64 Swift runtime and static standard library: the same version's arm64 packages,
    # unpacked (not installed: they would replace the amd64 ones) into /opt/swift-arm64.
    started=$(date +%s)
    in_new sh -c "cd /var/cache/apt/archives && apt-get download -q -o APT::Sandbox::User=root swiftlang:arm64=$version libswiftlang:arm64=$version" \
        >>"$log" 2>&1 || { tail -20 "$log" >&2; fail "apt-get download of the arm64 swiftlang $version failed (log above)"; }
    mkdir -p "$new/opt/swift-arm64"
    # The target's modules, runtime and resources (clang's headers among them), not the
    # compiler's host plugins.
    lib=./usr/libexec/swift/lib
    for unpack in "swiftlang:$lib/swift* $lib/clang*" "libswiftlang:$lib/swift*"; do
        deb="$cache/archives/${unpack%%:*}_${version/:/%3a}_arm64.deb"
        [ -f "$deb" ] || fail "$deb is missing after apt-get download"
        dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$new/opt/swift-arm64" --wildcards --exclude="$lib/swift/host*" \
            ${unpack#*:} 2>>"$log" || fail "cannot unpack the Swift runtime from $deb"
    done
    resources=/opt/swift-arm64/usr/libexec/swift/lib
    [ -f "$new$resources/swift/linux/libswiftCore.so" ] && [ -f "$new$resources/swift_static/linux/libswiftCore.a" ] \
        || fail "the arm64 swiftlang $version has no libswiftCore.so or libswiftCore.a under $resources"

    # The Swift SDK: the root itself is the sysroot (its arm64 libraries are in their multiarch
    # directories), reached through a directory of links so that the package's own modules are
    # not taken for the SDK's; the arm64 resources; the toolchain's clang and ld.lld compile and
    # link. Debian's Swift names its host x86_64-pc-linux-gnu.
    bundle="$new/opt/swift-sdks/trixie-arm64.artifactbundle"
    mkdir -p "$bundle/aarch64/sysroot"
    ln -s /usr "$bundle/aarch64/sysroot/usr"
    ln -s usr/lib "$bundle/aarch64/sysroot/lib"
    printf '{ "CanonicalName": "trixie-arm64", "DisplayName": "Debian trixie arm64", "Version": "13" }\n' \
        >"$bundle/aarch64/sysroot/SDKSettings.json"
    cat >"$bundle/info.json" <<EOF
{
  "schemaVersion": "1.0",
  "artifacts": {
    "trixie-arm64": {
      "type": "swiftSDK",
      "version": "$version",
      "variants": [{ "path": "aarch64", "supportedTriples": ["x86_64-pc-linux-gnu", "x86_64-unknown-linux-gnu"] }]
    }
  }
}
EOF
    cat >"$bundle/aarch64/swift-sdk.json" <<EOF
{
  "schemaVersion": "4.0",
  "targetTriples": {
    "aarch64-unknown-linux-gnu": {
      "sdkRootPath": "sysroot",
      "swiftResourcesPath": "$resources/swift",
      "swiftStaticResourcesPath": "$resources/swift_static",
      "toolsetPaths": ["toolset.json"]
    }
  }
}
EOF
    cat >"$bundle/aarch64/toolset.json" <<EOF
{
  "schemaVersion": "1.0",
  "rootPath": "/usr/libexec/swift/bin",
  "swiftCompiler": { "extraCLIOptions": ["-use-ld=lld"] }
}
EOF
    note "arm64 Swift runtime and SDK made in $(($(date +%s) - started)) s"
fi

if [ "$kind" = arm64 ]; then
    # The package lists, read once here: apt-get update takes minutes under qemu-user, and
    # test-arm64.sh installs into a copy of this root (it updates them only when an install
    # with them fails).
    started=$(date +%s)
    in_new apt-get update -q >>"$log" 2>&1 || { tail -20 "$log" >&2; fail "apt-get update in the arm64 root failed (log above)"; }
    note "package lists read in $(($(date +%s) - started)) s"
    rm -f "$new/etc/resolv.conf"
fi
mv "$new" "$root"
# Roots of other keys are out of date.
for old in "$cache/$kind"-*; do
    [ "$old" = "$root" ] || [ ! -d "$old" ] || { note "deleting the out-of-date $old"; rm -rf "$old"; }
done
note "made $root"
echo "$root"
