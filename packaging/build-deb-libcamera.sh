#!/usr/bin/env bash
# Builds vigil-libcamera_VERSION_ARCH.deb: the libcamera plugin (libvigil-libcamera.so, from
# Sources/VigilLibcamera/plugin.cpp) that `vigil` loads for camera.device = "libcamera", compiled
# here with the system's C++ compiler against the system's libcamera. `make deb-libcamera` runs it.
#
# Usage: packaging/build-deb-libcamera.sh [--out DIR] [--version VERSION]
#   --out DIR          where the .deb goes (default: dist/ at the top of the repository)
#   --version VERSION  package version (default: vigil's, from Sources/vigil/main.swift); the
#                      package Depends on vigil of exactly this version
# libcamera's ABI changes with every release (its soname names the version), so the plugin is
# built against the libcamera of the system it is for, and its Depends (from dpkg-shlibdeps)
# name that libcamera: build it on the Pi (or a system of the same release) that runs vigil.
# Needs g++ (or CXX), pkg-config, libcamera-dev, dpkg-dev and binutils.
# Environment: CXX (default c++), CXXFLAGS (default -O2 -g), VIGIL_MAINTAINER (as build-deb.sh).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=packaging/deb-lib.sh
. "$here/deb-lib.sh"
repo="$(cd "$here/.." && pwd)"
deb_options build-deb-libcamera "$@"
[ "${#deb_operands[@]}" = 0 ] || { echo "build-deb-libcamera: unknown argument ${deb_operands[0]} — see $0 --help" >&2; exit 64; }
fail() { echo "build-deb-libcamera: $*" >&2; exit 1; }
cxx="${CXX:-c++}"
for tool in "$cxx" pkg-config dpkg-deb dpkg-shlibdeps dpkg-parsechangelog dpkg-architecture objdump strip gzip md5sum; do
    command -v "$tool" >/dev/null || fail "$tool is missing — install g++ pkg-config dpkg-dev binutils (apt-get install g++ pkg-config dpkg-dev binutils)"
done
pkg-config --exists libcamera || fail "libcamera's development files are missing — apt-get install libcamera-dev"

version="${version:-$(sed -n 's/^let version = "\(.*\)"$/\1/p' "$repo/Sources/vigil/main.swift")}"
[ -n "$version" ] || fail "cannot read vigil's version from Sources/vigil/main.swift"
dpkg --validate-version "$version" >/dev/null 2>&1 || fail "'$version' is not a valid Debian version"
arch="$(dpkg --print-architecture)"
multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH)"
libcamera="$(pkg-config --modversion libcamera)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
changelog_version="$(dpkg-parsechangelog -l "$here/changelog" -S Version)"
test_entry=""
[ "$version" = "$changelog_version" ] || test_entry="Test build numbered $version."
deb_changelog "$version" "$test_entry" "$work"

# --- The plugin -----------------------------------------------------------------------------------
# Only the entry point is exported; full RELRO; only the libraries it calls are linked.
plugin="$work/libvigil-libcamera.so"
# shellcheck disable=SC2046,SC2086
"$cxx" -std=c++17 ${CXXFLAGS:--O2 -g} -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fPIC -shared -fvisibility=hidden -Wall -Wextra \
    $(pkg-config --cflags libcamera) "$repo/Sources/VigilLibcamera/plugin.cpp" -o "$plugin" \
    -Wl,--as-needed -Wl,-z,relro -Wl,-z,now -Wl,-z,defs $(pkg-config --libs libcamera) \
    || fail "compiling the plugin against libcamera $libcamera failed (above)"
exported="$(objdump -T "$plugin" | awk '$2 == "g" && $4 == ".text" {print $NF}')"
[ "$exported" = vigil_libcamera_plugin ] || fail "the plugin exports '$(echo $exported)', not just vigil_libcamera_plugin"

# --- The tree -----------------------------------------------------------------------------------
umask 022
root="$work/root"
libdir="usr/lib/$multiarch/vigil"
# The service's sandbox lets vigil reach cameras and sound cards only: libcamera also needs the
# media controller and the DMA heaps it allocates frames from. A drop-in for each unit (in the
# directory the main package puts them).
unitdir="$(deb_unitdir)"
install -d "$root/DEBIAN" "$root/$libdir" "$root/usr/share/doc/vigil-libcamera" \
    "$root/$unitdir/vigil.service.d" "$root/$unitdir/vigil@.service.d"
for unit in vigil.service vigil@.service; do
    printf '%s\n' "# Installed by vigil-libcamera: libcamera reaches a camera through the media controller" \
        "# and allocates its frames from the DMA heaps." "[Service]" "DeviceAllow=char-media rw" \
        "DeviceAllow=char-dma_heap rw" >"$root/$unitdir/$unit.d/libcamera.conf"
    chmod 0644 "$root/$unitdir/$unit.d/libcamera.conf"
done
install -m 0644 "$plugin" "$root/$libdir/libvigil-libcamera.so"
strip --remove-section=.comment --remove-section=.note --strip-unneeded "$root/$libdir/libvigil-libcamera.so"
install -m 0644 "$here/copyright" "$root/usr/share/doc/vigil-libcamera/copyright"
gzip -9n <"$work/changelog" >"$root/usr/share/doc/vigil-libcamera/changelog.gz"
chmod 0644 "$root/usr/share/doc/vigil-libcamera/changelog.gz"

# --- Depends: the libcamera it was built against, and this very vigil -------------------------
depends="$(deb_shlibdeps vigil-libcamera "$root/$libdir/libvigil-libcamera.so" "$arch" "$work")" \
    || fail "dpkg-shlibdeps could not find the packages of the libraries the plugin links"
echo "$depends" | grep -q 'libcamera' || fail "dpkg-shlibdeps names no libcamera package: $depends"

installed_size="$(deb_installed_size "$root")"
cat >"$root/DEBIAN/control" <<EOF
Package: vigil-libcamera
Source: vigil
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $installed_size
Depends: vigil (= $version), $depends
Section: video
Priority: optional
Description: libcamera cameras for Vigil (Raspberry Pi camera modules)
 The plugin through which Vigil records from cameras that only libcamera
 drives, such as the Raspberry Pi's CSI camera modules: set
 camera.device = "libcamera" in /etc/vigil/vigil.conf.
 .
 Built against libcamera $libcamera: libcamera's ABI changes with each
 release, so this package goes with that libcamera only.
EOF
deb="$out/vigil-libcamera_${version}_${arch}.deb"
deb_pack "$root" "$deb"
echo "build-deb-libcamera: $deb ($(du -k "$deb" | cut -f1) KiB), built against libcamera $libcamera" >&2
echo "build-deb-libcamera: Depends: $(dpkg-deb -f "$deb" Depends)" >&2
echo "$deb"
