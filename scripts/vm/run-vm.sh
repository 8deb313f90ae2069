#!/usr/bin/env bash
# Runs a command inside a throw-away qemu VM that boots Debian's own kernel with the kernel's
# virtual video test driver (vivid: /dev/video0 ...) and the ALSA loopback (snd-aloop: card
# "Loopback") loaded — real V4L2 ioctls and real PCM paths on a machine that has no camera and
# cannot load modules into its own kernel.
#
# Usage: scripts/vm/run-vm.sh [-v] SHARED_DIR COMMAND
#
# The host's / is the guest's root, read-only, with a RAM overlay on top (so /tmp too shows the
# host's files, and what the guest writes there stays in the VM): host-built binaries (the
# Swift runtime, libx264, libv4l2, ...) run unchanged. SHARED_DIR is mounted read-write
# at the same path and COMMAND (run by /bin/sh, as root) starts there. COMMAND's stdout and
# stderr come out on ours; the exit status is COMMAND's (124: VM_TIMEOUT reached, 125: the
# VM failed). With -v the guest's kernel log is printed on stderr afterwards.
#
# Everything comes from Debian packages, installed with apt-get when missing; the kernel
# package is downloaded once and kept, with the initramfs built from it, in
# ${VIGIL_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vigil-vm}.
#
# Environment: VM_MEM (MB, 1024), VM_SMP (2), VM_TIMEOUT (seconds, 600), VM_ACCEL (tcg),
# VM_KERNEL_PKG (default: what linux-image-amd64 depends on), VM_VIVID_OPTS, VM_ALOOP_OPTS,
# VM_MODULES (more kernel modules, by name, put in the initramfs and loaded before COMMAND,
# e.g. "loop dm-log-writes ext4"; their dependencies come along).
set -euo pipefail

verbose=0
if [[ ${1:-} == -v ]]; then verbose=1; shift; fi
if [[ $# -ne 2 ]]; then
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
share=$(realpath -e -- "$1" 2>/dev/null) || { echo "run-vm: no such directory: $1" >&2; exit 2; }
[[ -d $share ]] || { echo "run-vm: not a directory: $share" >&2; exit 2; }
command=$2

cache=${VIGIL_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vigil-vm}
mem=${VM_MEM:-1024}
smp=${VM_SMP:-2}
timeout_s=${VM_TIMEOUT:-600}
accel=${VM_ACCEL:-tcg}
sudo=""; [[ $(id -u) == 0 ]] || sudo=sudo

fail() { echo "run-vm: $*" >&2; exit 125; }
say() { echo "run-vm: $*" >&2; }

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9 # one VM image build at a time; released before the VM starts

# ------------------------------------------------------------------ host packages
# shellcheck source=scripts/apt-install.sh
. "$(dirname "$0")/../apt-install.sh"
apt_ensure run-vm qemu-system-x86 busybox-static cpio kmod xz-utils || fail "could not install the VM's host packages"

# ------------------------------------------------------------------ kernel
kpkg=${VM_KERNEL_PKG:-}
[[ -z $kpkg && -s $cache/kernel-package ]] && kpkg=$(cat "$cache/kernel-package")
if [[ -z $kpkg ]]; then
    depends() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }'; }
    kpkg=$(depends)
    if [[ -z $kpkg ]]; then $sudo apt-get update -q >&2; kpkg=$(depends); fi
    [[ -n $kpkg ]] || fail "cannot tell which Debian kernel package to use (apt-cache depends linux-image-amd64)"
    echo "$kpkg" > "$cache/kernel-package"
fi
kdir=$cache/$kpkg
if [[ ! -e $kdir/.complete ]]; then
    deb=$(ls "$cache/${kpkg}"_*.deb 2>/dev/null | tail -n 1 || true)
    if [[ -z $deb ]]; then
        say "downloading $kpkg (once; kept in $cache)"
        (cd "$cache" && apt-get download "$kpkg" >&2) || { $sudo apt-get update -q >&2; (cd "$cache" && apt-get download "$kpkg" >&2); }
        deb=$(ls "$cache/${kpkg}"_*.deb | tail -n 1)
    fi
    rm -rf "$kdir"
    mkdir -p "$kdir"
    dpkg-deb -x "$deb" "$kdir"
    depmod -b "$kdir" "$(ls "$kdir/lib/modules")"
    touch "$kdir/.complete"
fi
kver=$(ls "$kdir/lib/modules")
kernel=$kdir/boot/vmlinuz-$kver
[[ -f $kernel ]] || fail "no kernel image in $kdir"
# The bzImage decompresses itself slowly under emulation; the kernel can be booted as the plain
# ELF vmlinux through its PVH entry point instead (CONFIG_PVH): extract it once.
if [[ ! -s $kdir/vmlinux ]]; then
    offset=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$kernel" | head -n 1 | cut -d: -f1 || true)
    if [[ -n $offset ]] && (set +o pipefail; tail -c +$((offset + 1)) "$kernel" | xz -dc --single-stream > "$kdir/vmlinux.part" 2>/dev/null) &&
       [[ $(head -c 4 "$kdir/vmlinux.part" | od -An -tx1 | tr -d ' \n') == 7f454c46 ]]; then
        mv "$kdir/vmlinux.part" "$kdir/vmlinux"
    else
        rm -f "$kdir/vmlinux.part"
    fi
fi
[[ -s $kdir/vmlinux ]] && kernel=$kdir/vmlinux

# ------------------------------------------------------------------ initramfs
extra_modules=${VM_MODULES:-}
wanted="virtio_pci virtio_console 9pnet_virtio 9p overlay vivid snd-aloop $extra_modules"
modules=$(for m in $wanted; do modprobe -d "$kdir" -S "$kver" --show-depends "$m" | awk '$1 == "insmod" { print $2 }'; done | awk '!seen[$0]++')

read -r -d '' init <<'EOF_INIT' || true
#!/bin/sh
# /init of the vigil test VM (busybox): modules, the host's root as ours, the command.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm /ctl /host /overlay /root-rw
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /tmp
stop() { echo "$1" > /ctl/rc; sync; poweroff -f; }
fail() { echo "vm: $*" > /dev/console; stop 125; }
for m in virtio_pci virtio_console 9pnet_virtio 9p overlay; do modprobe "$m" || fail "modprobe $m"; done
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 ctl /ctl || fail "mount ctl"
. /ctl/env
modprobe vivid $VM_VIVID_OPTS || fail "modprobe vivid $VM_VIVID_OPTS"
modprobe snd-aloop $VM_ALOOP_OPTS || fail "modprobe snd-aloop $VM_ALOOP_OPTS"
for m in $VM_MODULES; do modprobe "$m" || fail "modprobe $m"; done
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=loose,ro hostroot /host || fail "mount the host's root"
mount -t tmpfs tmpfs /overlay && mkdir -p /overlay/upper /overlay/work
mount -t overlay overlay -o lowerdir=/host,upperdir=/overlay/upper,workdir=/overlay/work /root-rw || fail "overlay"
r=/root-rw
mount -t proc proc $r/proc
mount -t sysfs sysfs $r/sys
mount --bind /dev $r/dev
mount -t devpts devpts $r/dev/pts
mount -t tmpfs tmpfs $r/dev/shm
mount -t tmpfs tmpfs $r/run
mkdir -p $r/lib/modules && mount --bind /lib/modules $r/lib/modules
mkdir -p "$r$VM_SHARE" && mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=mmap share "$r$VM_SHARE" || fail "mount $VM_SHARE"
mkdir -p $r/run/vm && cp /ctl/command $r/run/vm/command
# The console ports and device nodes appear asynchronously: wait for them (5 s at most).
out=; err=; i=0
while [ $i -lt 50 ]; do
    for p in /sys/class/virtio-ports/*; do
        [ -e "$p/name" ] || continue
        case $(cat "$p/name") in vm.stdout) out=/dev/${p##*/} ;; vm.stderr) err=/dev/${p##*/} ;; esac
    done
    [ -n "$out" ] && [ -e "$out" ] && [ -n "$err" ] && [ -e "$err" ] && [ -e /dev/video0 ] && [ -e /dev/snd/controlC0 ] && break
    sleep 0.1; i=$((i + 1))
done
[ -e /dev/video0 ] || fail "vivid made no /dev/video0"
[ -n "$out" ] && [ -e "$out" ] || out=/dev/console
[ -n "$err" ] && [ -e "$err" ] || err=/dev/console
chroot $r /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    VM_SHARE="$VM_SHARE" /bin/sh -c 'cd "$VM_SHARE" && exec /bin/sh /run/vm/command' </dev/null >"$out" 2>"$err"
rc=$?
umount "$r$VM_SHARE" 2>/dev/null
stop $rc
EOF_INIT

key=$({ echo "$kpkg"; echo "$init"; echo "$modules"; stat -L -c '%n %s %Y' /bin/busybox; } | sha256sum | cut -c1-16)
initrd=$cache/initrd-$key.cpio
if [[ ! -s $initrd ]]; then
    stage=$(mktemp -d "$cache/stage.XXXXXX")
    mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,etc,lib/modules/"$kver"}
    cp /bin/busybox "$stage/bin/busybox"
    for applet in $(/bin/busybox --list); do [[ $applet == busybox ]] || ln -sf busybox "$stage/bin/$applet"; done
    for m in $modules; do
        relative=${m#"$kdir"/}
        mkdir -p "$stage/$(dirname "$relative")"
        cp "$m" "$stage/$relative"
    done
    cp "$kdir/lib/modules/$kver"/modules.{order,builtin,builtin.modinfo} "$stage/lib/modules/$kver/"
    depmod -b "$stage" "$kver"
    printf '%s\n' "$init" > "$stage/init"
    chmod 755 "$stage/init"
    (cd "$stage" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > "$initrd.part"
    mv "$initrd.part" "$initrd"
    rm -rf "$stage"
fi
ls -t "$cache"/initrd-*.cpio | tail -n +4 | xargs -r rm -f # keep the three newest
flock -u 9
exec 9>&-

# ------------------------------------------------------------------ run
run=$(mktemp -d "$cache/run.XXXXXX")
readers=()
cleanup() {
    local fifo
    # A FIFO qemu never opened leaves its reader blocked in open(): open it to release it.
    for fifo in "$run"/out.out "$run"/err.out; do [[ -p $fifo ]] && { exec 8<>"$fifo"; exec 8>&-; }; done
    ((${#readers[@]})) && wait "${readers[@]}" 2>/dev/null
    rm -rf "$run"
}
trap cleanup EXIT
mkdir -p "$run/ctl"
printf '%s\n' "$command" > "$run/ctl/command"
{
    printf 'VM_SHARE=%q\n' "$share"
    printf 'VM_VIVID_OPTS=%q\n' "${VM_VIVID_OPTS:-}"
    printf 'VM_ALOOP_OPTS=%q\n' "${VM_ALOOP_OPTS:-}"
    printf 'VM_MODULES=%q\n' "$extra_modules"
} > "$run/ctl/env"
# Guest stdout/stderr go through virtio-serial ports to qemu "pipe" character devices (which
# write to PATH.out), then FIFOs, to ours. The kernel's own messages stay on the serial console.
mkfifo "$run/out.in" "$run/out.out" "$run/err.in" "$run/err.out"
cat "$run/out.out" &
readers+=($!)
cat "$run/err.out" >&2 &
readers+=($!)

qemu=(qemu-system-x86_64 -accel "$accel" -cpu max -m "$mem" -smp "$smp"
      -nodefaults -no-reboot -display none -monitor none
      -serial "file:$run/console.log"
      -kernel "$kernel" -initrd "$initrd"
      -append "console=ttyS0 panic=-1 mitigations=off rdinit=/init quiet"
      -device virtio-serial-pci,id=serial
      -chardev "pipe,id=out,path=$run/out" -device virtserialport,bus=serial.0,chardev=out,name=vm.stdout
      -chardev "pipe,id=err,path=$run/err" -device virtserialport,bus=serial.0,chardev=err,name=vm.stderr
      -virtfs "local,path=$run/ctl,mount_tag=ctl,security_model=none"
      -virtfs "local,path=$share,mount_tag=share,security_model=none"
      -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap")
set +e
timeout -k 5 "$timeout_s" "${qemu[@]}" </dev/null 2>"$run/qemu.log"
qemu_status=$?
set -e

status=125
[[ -s $run/ctl/rc ]] && status=$(cat "$run/ctl/rc")
if [[ $status == 125 ]]; then
    if [[ $qemu_status == 124 || $qemu_status == 137 ]]; then
        status=124
        say "timed out after ${timeout_s}s"
    fi
    say "the VM gave no exit status (qemu exited $qemu_status); qemu's messages and the end of the guest console:"
    cat "$run/qemu.log" >&2
    tail -n 40 "$run/console.log" >&2 || true
elif [[ $verbose == 1 ]]; then
    echo "----- guest console -----" >&2
    cat "$run/console.log" "$run/qemu.log" >&2
fi
exit "$status"
