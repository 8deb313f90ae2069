#!/usr/bin/env bash
# Lets this machine run arm64 programs, in a chroot too: qemu-aarch64 from qemu-user-static,
# registered with binfmt_misc with the F flag (the kernel opens the emulator once, so a chroot
# needs no copy of it). Mounts binfmt_misc and registers qemu-aarch64 when they are not (as
# systemd-binfmt does at boot where systemd runs); both last until the next boot. Needs root.
set -euo pipefail
fail() { echo "binfmt: $*" >&2; exit 1; }
# shellcheck source=scripts/apt-install.sh
. "$(dirname "$0")/../apt-install.sh"
binfmt=/proc/sys/fs/binfmt_misc
conf=/usr/lib/binfmt.d/qemu-aarch64.conf
# The emulator and its registration come with qemu-user-static: installed when missing (a fresh
# machine, where the arm64 package is built before any arm64 root is made).
if [ ! -f "$conf" ]; then
    apt_ensure binfmt qemu-user-static || fail "could not install qemu-user-static with apt-get (above)"
fi
[ -f "$conf" ] || fail "$conf is missing — install qemu-user-static (apt-get install qemu-user-static)"
if [ ! -e "$binfmt/register" ]; then
    mount -t binfmt_misc binfmt_misc "$binfmt" || fail "cannot mount binfmt_misc on $binfmt (a container without it cannot run arm64 programs)"
fi
if [ ! -e "$binfmt/qemu-aarch64" ]; then
    line="$(grep -v '^#' "$conf" | head -1)"
    [ -n "$line" ] || fail "$conf holds no registration"
    printf '%s' "$line" >"$binfmt/register" || fail "cannot register qemu-aarch64 with binfmt_misc ($conf)"
    echo "binfmt: registered qemu-aarch64 ($(sed -n 's/^interpreter //p' "$binfmt/qemu-aarch64"))"
fi
grep -q '^enabled' "$binfmt/qemu-aarch64" || fail "qemu-aarch64 is registered with binfmt_misc but disabled — echo 1 > $binfmt/qemu-aarch64"
grep -q '^flags: .*F' "$binfmt/qemu-aarch64" || fail "qemu-aarch64 is registered without the F flag, so it cannot run in a chroot — echo -1 > $binfmt/qemu-aarch64 and run this again"
