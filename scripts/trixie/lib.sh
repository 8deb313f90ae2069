# Sourced by the scripts of scripts/trixie: running commands in a root made by root.sh.

# in_root ROOT [--bind HOST:PATH[:ro]]... COMMAND...: runs COMMAND in ROOT with /proc, /sys and
# /dev mounted, the repository at /src, and each --bind, in a mount namespace of its own (the
# mounts end with the command, whatever happens), as root, with a clean environment (PATH,
# LANG, HOME=/root, CI and what VIGIL_ROOT_ENV names, as NAME=VALUE words).
in_root() {
    local root="$1"; shift
    local binds=()
    while [ "${1:-}" = --bind ]; do binds+=("$2"); shift 2; done
    local repo
    repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    unshare --mount --propagation private bash -c '
        set -e
        root="$1"; repo="$2"; count="$3"; shift 3
        # The root a mount point of its own, so that unshare --mount works in it (the MQTT
        # tests give the agent its own /etc/hosts that way).
        mount --bind "$root" "$root"
        mount -t proc proc "$root/proc"
        mount -t sysfs sysfs "$root/sys"
        mount --rbind /dev "$root/dev"
        mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
        mkdir -p "$root/src"
        mount --bind "$repo" "$root/src"
        for ((i = 0; i < count; i++)); do
            IFS=: read -r from to mode <<<"$1"; shift
            mkdir -p "$root$to"
            mount --bind "$from" "$root$to"
            [ "$mode" != ro ] || mount -o remount,bind,ro "$root$to"
        done
        cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
        exec chroot "$root" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
            HOME=/root DEBIAN_FRONTEND=noninteractive ${CI:+CI=$CI} ${VIGIL_ROOT_ENV:-} "$@"' \
        bash "$root" "$repo" "${#binds[@]}" "${binds[@]}" "$@"
}

. "$(dirname "${BASH_SOURCE[0]}")/../build-tree.sh"

# use_build_tree ROOT: takes the lock of the build tree beside ROOT (on file descriptor 8, held
# until the script ends) and brings the tree up to date (build_tree); sets tree to its path.
use_build_tree() {
    local cache
    cache="$(dirname "$1")"
    exec 8>"$cache/tree.lock"
    flock 8
    tree="$(build_tree "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)" "$cache")"
}
