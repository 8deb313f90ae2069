# shellcheck shell=bash
# What build-deb.sh and build-deb-libcamera.sh share: sourced, not run.
#
# deb_installed_size ROOT   prints Installed-Size in KiB as dpkg-gencontrol counts it: each
#                           file rounded up, plus one per directory, DEBIAN/ left out.
# deb_pack ROOT DEB         writes ROOT/DEBIAN/md5sums, makes the control files 0644, and
#                           builds DEB from ROOT (owned by root, xz), making its directory.

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
