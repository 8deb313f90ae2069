#!/usr/bin/env bash
# Builds the Debian package vigil_VERSION_ARCH.deb from a release `vigil` binary and the
# files in packaging/. `make deb` runs it after
#   swift build -c release --static-swift-stdlib
# Usage: packaging/build-deb.sh [--out DIR] [--version VERSION] VIGIL-BINARY
#   --out DIR          where the .deb goes (default: dist/ at the top of the repository)
#   --version VERSION  package version; default: what `VIGIL-BINARY --version` prints.
#                      Any other version gets a changelog entry of its own saying so (the
#                      upgrade test builds an older-numbered package this way).
# The architecture is the binary's (amd64, arm64, armhf, ...), so a cross-built binary is
# packaged for its target. Depends lists the Debian packages of the shared libraries the
# binary really links, as dpkg-shlibdeps finds them; plus adduser (for the postinst) and
# procps (/bin/kill, the unit's ExecReload).
# Environment: VIGIL_MAINTAINER overrides the Maintainer field (default: the newest
# entry of packaging/changelog); STRIP the strip program.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=packaging/deb-lib.sh
. "$here/deb-lib.sh"
repo="$(cd "$here/.." && pwd)"
deb_options build-deb "$@"
[ "${#deb_operands[@]}" -le 1 ] || { echo "build-deb: give one binary, not '${deb_operands[0]}' and '${deb_operands[1]}'" >&2; exit 64; }
binary="${deb_operands[0]:-}"
fail() { echo "build-deb: $*" >&2; exit 1; }
[ -n "$binary" ] || fail "no binary given — usage: $0 [--out DIR] [--version V] PATH/TO/vigil (make deb passes the release build's)"
[ -x "$binary" ] || fail "$binary is not an executable — build it with: swift build -c release --static-swift-stdlib"
for tool in dpkg-deb dpkg-shlibdeps dpkg-parsechangelog objdump readelf gzip md5sum; do
    command -v "$tool" >/dev/null || fail "$tool is missing — install dpkg-dev and binutils (apt-get install dpkg-dev binutils)"
done

# --- What the binary is ---------------------------------------------------------------------
machine="$(readelf -h "$binary" | sed -n 's/^ *Machine: *//p')"
case "$machine" in
    *X86-64*) arch=amd64 ;;
    AArch64) arch=arm64 ;;
    ARM) arch=armhf ;;
    RISC-V) arch=riscv64 ;;
    *) fail "$binary is built for '$machine', which this script cannot name as a Debian architecture — add it to the case in $0" ;;
esac
host_arch="$(dpkg --print-architecture)"
# Whether the binary runs here: built for this machine, or a cross build that qemu-user runs
# through binfmt_misc (as in scripts/trixie's build root).
runs=false
if [ "$arch" = "$host_arch" ] || "$binary" --version >/dev/null 2>&1; then runs=true; fi
# The version: the binary's own, so main.swift stays the one place it is written.
if $runs; then
    binary_version="$("$binary" --version | sed -n 's/^vigil //p')"
else
    # A cross-built binary that cannot run here: read the literal from main.swift instead.
    binary_version="$(sed -n 's/^let version = "\(.*\)"$/\1/p' "$repo/Sources/vigil/main.swift")"
fi
[ -n "$binary_version" ] || fail "cannot tell the version of $binary (\`$binary --version\` should print 'vigil X.Y.Z')"
version="${version:-$binary_version}"
dpkg --validate-version "$version" >/dev/null 2>&1 || fail "'$version' is not a valid Debian version"
# A static Swift runtime: nothing of the toolchain may be needed at run time.
needed="$(objdump -p "$binary" | awk '$1 == "NEEDED" {print $2}')"
dynamic_swift="$(echo "$needed" | grep -E '^lib(swift|Foundation|dispatch|BlocksRuntime|_Foundation)' || true)"
[ -z "$dynamic_swift" ] || fail "$binary links the Swift runtime dynamically ($(echo $dynamic_swift)) — build it with swift build -c release --static-swift-stdlib"

# --- The documentation must say what the program does -----------------------------------------
if $runs; then
    "$here/check-man-pages.sh" "$binary" >&2
else
    echo "build-deb: cross build for $arch that cannot run here: the man pages are not checked against the binary" >&2
fi

# --- The changelog's newest entry must be this version --------------------------------------
changelog_version="$(dpkg-parsechangelog -l "$here/changelog" -S Version)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
test_entry=""
if [ "$version" != "$binary_version" ]; then
    # A test build numbered apart from the program: say so in its own changelog entry.
    test_entry="Test build of vigil $binary_version, numbered $version."
elif [ "$changelog_version" != "$version" ]; then
    fail "packaging/changelog's newest entry is $changelog_version but the binary is vigil $version — add an entry for $version at the top of packaging/changelog (dch -c packaging/changelog -v $version, or by hand)"
fi
deb_changelog "$version" "$test_entry" "$work"

# --- The tree -----------------------------------------------------------------------------------
umask 022
root="$work/root"
# The units go where the building release's own packages put theirs (deb_unitdir).
unitdir="$(deb_unitdir)"
install -d "$root/DEBIAN" "$root/usr/bin" "$root/etc/vigil" "$root/$unitdir" \
    "$root/usr/share/man/man8" "$root/usr/share/man/man5" "$root/usr/share/doc/vigil"
install -m 0755 "$binary" "$root/usr/bin/vigil"
if [ -z "${STRIP:-}" ]; then
    if [ "$arch" = "$host_arch" ]; then STRIP=strip; else STRIP="$(dpkg-architecture -a"$arch" -qDEB_HOST_GNU_TYPE 2>/dev/null)-strip"; fi
fi
command -v "$STRIP" >/dev/null || fail "$STRIP is missing — install binutils for $arch, or set STRIP"
# As dh_strip does: no symbol table or notes in the installed binary.
"$STRIP" --remove-section=.comment --remove-section=.note --strip-unneeded "$root/usr/bin/vigil"
install -m 0644 "$repo/etc/vigil/vigil.conf" "$root/etc/vigil/vigil.conf"
install -m 0644 "$here/vigil.service" "$root/$unitdir/vigil.service"
# One agent per camera: vigil@NAME.service runs `vigil run --config /etc/vigil/NAME.conf`,
# everything else as vigil.service (made from it, so the two never drift apart).
sed -e 's|^# The Vigil agent as a system service (installed as /lib/systemd/system/vigil.service).|# One Vigil agent per camera (installed as /lib/systemd/system/vigil@.service): vigil@NAME\n# records with /etc/vigil/NAME.conf, which needs its own camera.name and storage.path.|' \
    -e 's|`systemctl edit vigil`|`systemctl edit vigil@NAME`|' \
    -e 's|^Description=Vigil motion-triggered video recorder$|Description=Vigil motion-triggered video recorder (camera %i)|' \
    -e 's|^ExecStart=/usr/bin/vigil run --config /etc/vigil/vigil.conf$|ExecStart=/usr/bin/vigil run --config /etc/vigil/%i.conf|' \
    "$here/vigil.service" >"$root/$unitdir/vigil@.service"
grep -q '^ExecStart=/usr/bin/vigil run --config /etc/vigil/%i.conf$' "$root/$unitdir/vigil@.service" \
    && grep -q '(camera %i)$' "$root/$unitdir/vigil@.service" \
    || fail "vigil@.service: vigil.service's ExecStart or Description changed — update the sed above"
chmod 0644 "$root/$unitdir/vigil@.service"
gzip -9n <"$here/vigil.8" >"$root/usr/share/man/man8/vigil.8.gz"
gzip -9n <"$here/vigil.conf.5" >"$root/usr/share/man/man5/vigil.conf.5.gz"
install -m 0644 "$here/copyright" "$root/usr/share/doc/vigil/copyright"
# A native package (no Debian revision): the changelog is changelog.gz.
gzip -9n <"$work/changelog" >"$root/usr/share/doc/vigil/changelog.gz"
chmod 0644 "$root"/usr/share/man/man*/*.gz "$root/usr/share/doc/vigil/changelog.gz"
install -m 0644 "$here/conffiles" "$root/DEBIAN/conffiles"
for script in postinst prerm postrm; do
    install -m 0755 "$here/$script" "$root/DEBIAN/$script"
done

# --- Depends: the packages of the libraries the binary links ------------------------------
depends="$(deb_shlibdeps vigil "$root/usr/bin/vigil" "$arch" "$work")" \
    || fail "dpkg-shlibdeps could not find the packages of the libraries $binary links ($(echo $needed)) — install the runtime and -dev packages of each (make deps does, for this machine's architecture)"
[ -n "$depends" ] || fail "dpkg-shlibdeps found no dependencies for $binary"

# --- Control file, checksums, package ---------------------------------------------------------
# Installed-Size in KiB, as dpkg-gencontrol counts it: each file rounded up, plus one per directory.
installed_size="$(deb_installed_size "$root")"
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@MAINTAINER@|$maintainer|" \
    -e "s|@INSTALLED_SIZE@|$installed_size|" -e "s|@SHLIBS_DEPENDS@|$depends|" \
    "$here/control.in" >"$root/DEBIAN/control"
grep -q '@[A-Z_]*@' "$root/DEBIAN/control" && fail "control.in has a placeholder this script does not fill: $(grep -o '@[A-Z_]*@' "$root/DEBIAN/control" | head -1)"
deb="$out/vigil_${version}_${arch}.deb"
deb_pack "$root" "$deb"
echo "build-deb: $deb ($(du -k "$deb" | cut -f1) KiB; installed $installed_size KiB)" >&2
echo "build-deb: Depends: $(dpkg-deb -f "$deb" Depends)" >&2
echo "$deb"
