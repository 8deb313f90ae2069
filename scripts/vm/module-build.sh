# Sourced by scripts/vm/build-vicodec.sh and scripts/vm/build-vimc.sh: builds drivers that
# Debian's amd64 kernel leaves out as out-of-tree modules for the kernel the test VM boots
# (scripts/vm/run-vm.sh), from Debian's linux-source-X.Y against linux-headers of exactly the
# version of the VM's kernel package (both fetched with apt-get download and unpacked in a
# scratch directory, not installed); their vermagic and dependencies are checked against that
# kernel. gcc-N (the compiler the kernel was built with), make, kmod and xz-utils are installed
# with apt-get when missing.
#
# The script that sources it sets `name` (for messages, its lock and its cache directory),
# `modules` (the .ko files it builds, without .ko) and `usage` (the sed range of its header to
# print for a wrong argument), and sources it with its own arguments; it then has `check` (1
# for --check), `cache`, `kpkg`, `kver`, `pkgver`, `jobs`, `sudo`, `fail` and `say`, `out`
# (where the modules are kept) and `cached` (whether they are built), and calls `module_build`
# and `module_check_in_vm` below.
#
# Environment: VIGIL_VM_CACHE (as run-vm.sh: ${XDG_CACHE_HOME:-$HOME/.cache}/vigil-vm),
# VM_KERNEL_PKG (as run-vm.sh; default: $cache/kernel-package, else what linux-image-amd64
# depends on), NAME_JOBS (make -j, 1: VICODEC_JOBS, VIMC_JOBS), VM_TIMEOUT (module_check_in_vm:
# 300 s).

check=0
case ${1:-} in
    "") ;;
    --check) check=1 ;;
    *) sed -n "${usage}p" "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
cache=${VIGIL_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vigil-vm}
jobs_variable=${name^^}_JOBS
jobs=${!jobs_variable:-1}
sudo=""; [[ $(id -u) == 0 ]] || sudo=sudo

# shellcheck source=scripts/apt-install.sh
. "$(dirname "${BASH_SOURCE[0]}")/../apt-install.sh"

fail() { echo "build-$name: $*" >&2; exit 1; }
say() { echo "build-$name: $*" >&2; }

mkdir -p "$cache"

# ------------------------------------------------------------------ which kernel
kpkg=${VM_KERNEL_PKG:-}
[[ -z $kpkg && -s $cache/kernel-package ]] && kpkg=$(cat "$cache/kernel-package")
if [[ -z $kpkg ]]; then
    kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
    [[ -n $kpkg ]] || fail "cannot tell which kernel the VM boots: run scripts/vm/run-vm.sh once, or set VM_KERNEL_PKG"
fi
kver=${kpkg#linux-image-}                 # 6.1.0-57-amd64
# The package version: that of the .deb run-vm.sh downloaded, else apt's candidate.
deb=$(ls "$cache/${kpkg}"_*.deb 2>/dev/null | tail -n 1 || true)
if [[ -n $deb ]]; then
    pkgver=$(dpkg-deb -f "$deb" Version)
else
    pkgver=$(apt-cache policy "$kpkg" 2>/dev/null | awk '/Candidate:/ { print $2 }')
    [[ -n $pkgver && $pkgver != "(none)" ]] || fail "no cached $kpkg .deb and apt knows no version of it (apt-get update?)"
fi

out=$cache/$name-${kver}_$pkgver
# Whether $out holds a finished build of every module.
cached() {
    [[ -e $out/.complete ]] || return 1
    local m
    for m in $modules; do [[ -f $out/$m.ko ]] || return 1; done
}

# module_build "SOURCE..." HEADER "CONFIG..." KBUILD
#   Builds $modules (each MODULE.ko) into $out from the SOURCE paths of linux-source (files, or
#   directories whose *.[ch] are taken), after checking that HEADER (include/...) is the same
#   in the sources and in the headers package, and that the kernel was built with each CONFIG.
#   KBUILD is a function called with the unpacked source tree and the build directory, which
#   writes the build directory's Kbuild.
module_build() ( # in a subshell: its lock, scratch directory and trap end with it
    sources=$1 header=$2 configs=$3 kbuild_writer=$4
    exec 9>"$cache/.$name.lock"
    flock 9 # one build at a time (a separate lock: run-vm.sh's own is not held for this long)
    cached && exit 0 # built while we waited
    say "building $modules for $kpkg $pkgver (once; kept in $out)"
    start=$(date +%s)

    work=$(mktemp -d "$cache/$name-build.XXXXXX")
    trap 'rm -rf "$work"' EXIT

    # -------------------------------------------------------------- packages
    # The exact headers version; the -common headers, kbuild and compiler it depends on.
    download() { # PACKAGE=VERSION...
        (cd "$work/debs" && apt-get download "$@" >&2 2>"$work/apt.err") && return 0
        $sudo apt-get update -q >&2
        (cd "$work/debs" && apt-get download "$@" >&2 2>"$work/apt.err") && return 0
        cat "$work/apt.err" >&2
        return 1
    }
    mkdir -p "$work/debs"
    download "linux-headers-$kver=$pkgver" ||
        fail "linux-headers-$kver $pkgver cannot be downloaded (apt-cache madison linux-headers-$kver); the VM's kernel must be one whose headers the archive still has: remove $cache/kernel-package and the cached $kpkg (run-vm.sh then takes what linux-image-amd64 depends on), or set VM_KERNEL_PKG"
    hdeb=$(ls "$work/debs/linux-headers-${kver}_"*.deb)
    depends=$(dpkg-deb -f "$hdeb" Depends)
    common=$(sed -n 's/.*\(linux-headers-[^ ,]*-common\) (= \([^)]*\)).*/\1=\2/p' <<<"$depends")
    kbuild=$(sed -n 's/.*\(linux-kbuild-[0-9.]*\) .*/\1/p' <<<"$depends")
    gcc=$(sed -n 's/.*linux-compiler-\(gcc-[0-9]*\)-.*/\1/p' <<<"$depends")
    [[ -n $common && -n $kbuild && -n $gcc ]] || fail "unexpected Depends of $(basename "$hdeb"): $depends"
    series=${kbuild#linux-kbuild-}            # 6.1
    download "$common" "$kbuild=$pkgver" "linux-source-$series=$pkgver" ||
        fail "cannot download $common $kbuild=$pkgver linux-source-$series=$pkgver"

    apt_ensure "build-$name" "$gcc" make kmod xz-utils || fail "could not install $gcc, make, kmod and xz-utils"

    # -------------------------------------------------------------- headers and sources
    root=$work/root
    for d in "$work"/debs/linux-headers-*.deb "$work"/debs/linux-kbuild-*.deb; do dpkg-deb -x "$d" "$root"; done
    hdr=$root/usr/src/linux-headers-$kver
    # Its Makefile includes the -common one by absolute path: point it at ours.
    sed -i "s|^include /usr/src/|include $root/usr/src/|" "$hdr/Makefile"
    grep -q "^include $root/" "$hdr/Makefile" || fail "unexpected $hdr/Makefile: $(cat "$hdr/Makefile")"

    src=linux-source-$series
    say "unpacking $sources from $src.tar.xz"
    paths=("$src/$header")
    for s in $sources; do paths+=("$src/$s"); done
    dpkg-deb --fsys-tarfile "$work/debs/linux-source-${series}_${pkgver}_all.deb" |
        tar -xO "./usr/src/$src.tar.xz" | nice xz -dc | nice tar -C "$work" -x "${paths[@]}"
    # The sources and the headers must be the same kernel.
    cmp -s "$work/$src/$header" "$root/usr/src/${common%=*}/$header" ||
        fail "$header differs between $src and ${common%=*}"

    # -------------------------------------------------------------- build
    build=$work/build
    mkdir -p "$build"
    for s in $sources; do
        if [[ -d $work/$src/$s ]]; then cp "$work/$src/$s"/*.[ch] "$build/"; else cp "$work/$src/$s" "$build/"; fi
    done
    "$kbuild_writer" "$work/$src" "$build"
    for c in $configs; do
        grep -Eq "^$c=[ym]$" "$hdr/.config" || fail "$kpkg was built without $c"
    done
    say "compiling (make -j$jobs, nice)"
    nice make -s -C "$hdr" M="$build" -j"$jobs" modules >"$work/make.log" 2>&1 || { cat "$work/make.log" >&2; fail "the build failed"; }
    grep -v 'Skipping BTF generation' "$work/make.log" >&2 || true

    # -------------------------------------------------------------- checks
    # vermagic as the kernel's own modules have it; each dependency a module of that kernel,
    # or one built here.
    kdir=$cache/$kpkg
    want="$kver SMP"
    ref=$kdir/lib/modules/$kver/kernel/drivers/media/v4l2-core/videodev.ko
    [[ -e $kdir/.complete && -f $ref ]] && want=$(modinfo -F vermagic "$ref")
    for m in $modules; do
        magic=$(modinfo -F vermagic "$build/$m.ko")
        [[ $magic == "$want"* ]] || fail "$m.ko has vermagic '$magic', the kernel '$want'"
        if [[ -e $kdir/.complete ]]; then
            for d in $(modinfo -F depends "$build/$m.ko" | tr , ' '); do
                [[ " $modules " == *" $d "* ]] && continue
                grep -Eq "/$d\.ko(\.[a-z]+)?:" "$kdir/lib/modules/$kver/modules.dep" || fail "$m.ko needs $d, which $kpkg lacks"
            done
        fi
    done

    rm -rf "$out"
    mkdir -p "$out"
    {
        echo "kernel: $kpkg $pkgver"
        echo "headers: linux-headers-$kver $pkgver, ${common/=/ }, $kbuild $pkgver"
        echo "source: linux-source-$series $pkgver ($sources)"
        echo "compiler: $("$gcc" --version | head -n 1)"
        for m in $modules; do
            cp "$build/$m.ko" "$out/"
            echo "$m: vermagic $(modinfo -F vermagic "$out/$m.ko"); depends: $(modinfo -F depends "$out/$m.ko")"
        done
    } > "$out/build-info"
    touch "$out/.complete"
    say "done in $(($(date +%s) - start)) s"
)

# module_check_in_vm PACKAGE SCRIPT
#   Boots the VM (run-vm.sh) and runs SCRIPT there with /bin/sh, its first argument $out;
#   PACKAGE (the tools SCRIPT uses) is installed on this machine when missing.
module_check_in_vm() {
    local package=$1 script=$2 share status
    apt_ensure "build-$name" "$package" || fail "could not install $package"
    share=$(mktemp -d "/tmp/$name-check.XXXXXX")
    printf '%s\n' "$script" > "$share/probe.sh"
    set +e
    VM_TIMEOUT=${VM_TIMEOUT:-300} "$(dirname "${BASH_SOURCE[0]}")/run-vm.sh" "$share" "sh ./probe.sh '$out'" >&2
    status=$?
    set -e
    rm -rf "$share"
    ((status == 0)) || fail "the check in the VM failed (exit $status)"
}
