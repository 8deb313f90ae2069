#!/usr/bin/env bash
# Tests the Debian package the way a user meets it. Needs root (debootstrap, chroot, mount);
# `make test-deb` runs it after `make deb`.
#
#   1. lintian reports no error and no warning on the package;
#   2. the man-page check catches a page that drifted from the program;
#   3. in a fresh Debian root (this machine's release) made with debootstrap, apt installs the package with
#      its dependencies while policy-rc.d forbids starting services: the service is enabled
#      but not started, the user vigil (groups video, audio) and /var/lib/vigil exist;
#   4. there `vigil check` accepts the shipped configuration, and `vigil run` with the
#      synthetic source, as user vigil, records a clip that ffprobe and a full ffmpeg
#      decode on this machine accept; systemd-analyze verifies the unit;
#   4b. booted with systemd-nspawn, systemd runs the service in its sandbox: it reports
#      ready, runs as vigil with no capabilities, keeps the watchdog fed, reloads, stops
#      with status 0, and its clips decode; its web server (web.enabled) serves the page, the
#      journal and a clip, byte for byte, from inside the sandbox, and its camera over RTSP
#      (rtsp.enabled) plays in GStreamer's rtspsrc;
#   5. an upgrade keeps an edited /etc/vigil/vigil.conf without asking, and restarts the
#      service; remove keeps configuration and clips; purge then leaves the root exactly as
#      it was before the installation (files, owners, modes, users and groups).
#
# Usage: packaging/test-deb.sh [--deb-dir DIR] VIGIL-BINARY
#   VIGIL-BINARY  the release binary the package was built from (make deb's)
#   --deb-dir DIR where make deb put vigil_VERSION_ARCH.deb (default dist/); without the
#                 package there, it is built from VIGIL-BINARY.
# The package upgraded from is built here from the same binary, numbered VERSION~test1.
# Environment:
#   VIGIL_TEST_DEB_CACHE  where the debootstrap root and downloaded packages are kept
#                         between runs (default ~/.cache/vigil-test-deb); delete it to
#                         start from nothing. A root older than 30 days is made anew.
#   VIGIL_TEST_MIRROR     the Debian mirror for debootstrap (default: debootstrap's own)
#   VIGIL_TEST_SUITE      the Debian release to install into (default: this machine's)
#   KEEP=1                keep the work directory (the chroot) for a look afterwards
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=scripts/apt-install.sh
. "$here/../scripts/apt-install.sh"
repo="$(cd "$here/.." && pwd)"
# The Debian release to install into: the build machine's own, which the package's
# Depends were derived on (bookworm here).
suite="${VIGIL_TEST_SUITE:-$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")}"
suite="${suite:-bookworm}"
deb_dir="$repo/dist"
binary=""
command_line="$0 $*"
while [ $# -gt 0 ]; do
    case "$1" in
        --deb-dir) deb_dir="${2:?--deb-dir needs a directory}"; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
        -*) echo "test-deb: unknown option $1 — see $0 --help" >&2; exit 64 ;;
        *) binary="$1"; shift ;;
    esac
done

steps_name=test-deb
. "$repo/scripts/steps.sh"

[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, chroot and mount do) — run it as root, or with sudo: sudo $command_line"
[ -n "$binary" ] || fail "no binary given — usage: $0 [--deb-dir DIR] PATH/TO/vigil (make test-deb passes make deb's)"
[ -x "$binary" ] || fail "$binary is not an executable — run make deb first"
arch="$(dpkg --print-architecture)"
version="$("$binary" --version | sed -n 's/^vigil //p')"
[ -n "$version" ] || fail "$binary --version does not print 'vigil VERSION'"

echo "== tools" >&2
export DEBIAN_FRONTEND=noninteractive
missing=""
for tool in lintian:lintian debootstrap:debootstrap ffprobe:ffmpeg systemd-analyze:systemd systemd-nspawn:systemd-container dpkg-shlibdeps:dpkg-dev c++:g++; do
    command -v "${tool%%:*}" >/dev/null || missing="$missing ${tool#*:}"
done
if [ -n "$missing" ]; then
    note "installing:$missing"
    # shellcheck disable=SC2086 # one word per package
    APT_LOG=/tmp/vigil-test-deb-tools.log apt_install $missing || fail "could not install$missing with apt-get (log above)"
    rm -f /tmp/vigil-test-deb-tools.log
fi

# --- The packages -------------------------------------------------------------------------------
step "packages"
work="$(mktemp -d "${TMPDIR:-/var/tmp}/vigil-test-deb.XXXXXX")"
root="$work/root"
cleanup() {
    local status=$?
    set +e
    # Unmount whatever is mounted inside the root, deepest first.
    findmnt -rn -o TARGET | grep -F "$work/" | sort -r | while read -r m; do umount -l "$m"; done
    if [ -n "${nspawn_tmpfs:-}" ]; then umount "$nspawn_tmpfs" && rmdir "$nspawn_tmpfs" || true; fi
    if [ "${KEEP:-}" = 1 ]; then
        note "kept $work"
    else
        rm -rf "$work"
    fi
    echo "test-deb: $([ $status = 0 ] && echo passed || echo FAILED) in $(($(date +%s) - started)) s" >&2
}
trap cleanup EXIT

deb_new="$deb_dir/vigil_${version}_${arch}.deb"
if [ ! -f "$deb_new" ]; then
    note "$deb_new does not exist: building it from $binary"
    deb_new="$("$here/build-deb.sh" --out "$work/debs" "$binary")"
fi
[ "$(dpkg-deb -f "$deb_new" Version)" = "$version" ] || fail "$deb_new is not version $version — run make deb again"
old_version="${version}~test1"
deb_old="$("$here/build-deb.sh" --out "$work/debs" --version "$old_version" "$binary" 2>/dev/null)"
dpkg --compare-versions "$old_version" lt "$version" || fail "$old_version does not sort before $version"
note "testing $(basename "$deb_new") ($(du -k "$deb_new" | cut -f1) KiB), upgraded from $(basename "$deb_old")"
note "Depends: $(dpkg-deb -f "$deb_new" Depends)"

step "lintian"
lintian_out="$work/lintian.txt"
# --fail-on error,warning: warnings count too; info and pedantic tags are shown, not fatal.
if ! lintian --fail-on error,warning -I --pedantic --tag-display-limit 0 "$deb_new" >"$lintian_out" 2>&1; then
    cat "$lintian_out" >&2
    fail "lintian found errors or warnings in $(basename "$deb_new") (above)"
fi
grep -v '^running with root privileges' "$lintian_out" | sed 's/^/  /' >&2 || true
errors_warnings="$(grep -cE '^[EW]: ' "$lintian_out" || true)"
note "lintian: $errors_warnings errors and warnings; $(grep -cE '^[IP]: ' "$lintian_out" || true) info and pedantic tags"

step "man-page check catches drift"
"$here/check-man-pages.sh" "$binary" >/dev/null
# A page that lost a setting, a wrong default, a missing command: each must be caught.
sed '/^\.B despeckle$/,/^Default:/d' "$here/vigil.conf.5" >"$work/lost-setting.5"
sed 's/^Default: \\fB\\%300\.0\\fR$/Default: \\fB\\%301.0\\fR/' "$here/vigil.conf.5" >"$work/wrong-default.5"
sed 's/^\.SS "vigil clips"$/.SS "vigil clip"/' "$here/vigil.8" >"$work/lost-command.8"
sed '/^\.BI \\-\\-plot /d' "$here/vigil.8" >"$work/lost-option.8"
for mutant in "lost-setting.5|motion.despeckle" "wrong-default.5|recording.max_clip" "lost-command.8|'clips'" "lost-option.8|--plot"; do
    file="${mutant%%|*}" expect="${mutant#*|}"
    cmp -s "$work/$file" "$here/vigil.${file##*.}" 2>/dev/null && fail "the $file mutation changed nothing — update this test to the page"
    if [ "${file##*.}" = 5 ]; then args=("$here/vigil.8" "$work/$file"); else args=("$work/$file" "$here/vigil.conf.5"); fi
    if "$here/check-man-pages.sh" "$binary" "${args[@]}" >/dev/null 2>"$work/check.err"; then
        fail "check-man-pages.sh accepted $file"
    fi
    grep -q -- "$expect" "$work/check.err" || { cat "$work/check.err" >&2; fail "check-man-pages.sh rejected $file without naming $expect"; }
done

# --- A fresh Debian -------------------------------------------------------------------------------
step "debootstrap $suite ($arch)"
home="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
cache="${VIGIL_TEST_DEB_CACHE:-${XDG_CACHE_HOME:-$home/.cache}/vigil-test-deb}"
# minbase (dpkg, apt and the Essential packages) plus what every real target has and the
# unit needs to be verified: systemd (systemctl, systemd-analyze, its targets), D-Bus and
# libpam-systemd and dbus-user-session (what systemd, D-Bus and libpam-systemd recommend: there
# on every real install) and man-db.
# libqrencode4 too, which systemd suggests: a package's dependencies may install these, and
# apt's autoremove keeps what an installed package recommends or suggests, so a root without
# them would keep them after the purge.
include="systemd,dbus,libpam-systemd,dbus-user-session,libqrencode4,man-db"
base="$cache/$suite-$arch-minbase+${include//,/+}"
mkdir -p "$cache/archives/partial"
if [ -d "$base" ] && [ -n "$(find "$base" -maxdepth 0 -mtime +30)" ]; then
    note "$base is older than 30 days: making it anew"
    rm -rf "$base"
fi
if [ ! -d "$base" ]; then
    rm -rf "$base.new"
    if ! debootstrap --variant=minbase --include="$include" --arch="$arch" --cache-dir="$cache/archives" \
            "$suite" "$base.new" ${VIGIL_TEST_MIRROR:-} >"$work/debootstrap.log" 2>&1; then
        tail -20 "$work/debootstrap.log" >&2
        fail "debootstrap $suite failed (log above) — check the network and the mirror (VIGIL_TEST_MIRROR)"
    fi
    mv "$base.new" "$base"
    note "made $base"
else
    note "using $base"
fi
cp -a "$base" "$root"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --bind /dev "$root/dev"
mount --bind "$cache/archives" "$root/var/cache/apt/archives"
cp /etc/resolv.conf "$root/etc/resolv.conf"
in_dir() { local dir="$1"; shift; chroot "$dir" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }
in_root() { in_dir "$root" "$@"; }
in_root apt-get update -q >"$work/apt-update.log" 2>&1 || { cat "$work/apt-update.log" >&2; fail "apt-get update in the root failed"; }

# What the root holds before the package comes: every path with its type, mode and owner,
# and every file's content. Left out, as not the package's to clean up: /proc, /sys, /dev;
# /run and /tmp (emptied at every boot); apt's and dpkg's own records and logs (/var/lib/apt,
# /var/lib/dpkg, /var/log); caches (/var/cache: man-db's formatted pages, apt's downloads);
# and the content (not the presence) of ld.so.cache and of the shadow tools' backups
# /etc/passwd- /etc/group- /etc/shadow- /etc/gshadow-, which by design hold the files as
# they were before the last change. /etc/passwd, /etc/group and the rest are compared.
snapshot() {
    local skip=(-path ./proc -o -path ./sys -o -path ./dev -o -path ./run -o -path ./tmp
                -o -path ./var/lib/apt -o -path ./var/lib/dpkg -o -path ./var/log -o -path ./var/cache)
    (cd "$root" && find . -xdev \( "${skip[@]}" \) -prune -o -printf '%p %y %m %U %G\n' | LC_ALL=C sort
     cd "$root" && find . -xdev \( "${skip[@]}" -o -path ./etc/ld.so.cache -o -path './etc/*-' \) -prune \
            -o -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum)
}
# Getting the root ready (resolv.conf) comes before the "before" picture.
snapshot >"$work/before.txt"

# (A grep that reads a pipe reads all of it, never -q: with pipefail, a writer cut off by
# an early exit would fail the test.)
# Test fixtures: a policy-rc.d (switched between deny and allow), and /run/systemd/system
# so the maintainer scripts take their "systemd is running" branch. systemctl is wrapped
# (bind-mounted over, so no file changes) to record every call the scripts make; the real
# one does the work: enabling acts on the files, is-enabled reads them, starting and
# stopping are ignored in a chroot. No service runs here, so is-active says inactive.
policy() { printf '#!/bin/sh\n# test-deb: %s\nexit %s\n' "$1" "$2" >"$root/usr/sbin/policy-rc.d"; chmod 0755 "$root/usr/sbin/policy-rc.d"; }
policy "no service may start" 101
mkdir -p "$root/run/systemd/system"
cp "$root/usr/bin/systemctl" "$root/run/systemctl.real"
cat >"$work/systemctl" <<'EOF'
#!/bin/sh
# test-deb: records the call, then lets the real systemctl do it.
echo "$*" >>/run/systemctl.log
case " $* " in
    *" is-active "*) exit 3 ;;
    *" is-enabled "*) exec /run/systemctl.real --root=/ "$@" ;;
esac
exec /run/systemctl.real "$@"
EOF
chmod 0755 "$work/systemctl"
mount --bind "$work/systemctl" "$root/usr/bin/systemctl"
: >"$root/run/systemctl.log"
cp "$deb_old" "$deb_new" "$root/tmp/"

# --- Install -------------------------------------------------------------------------------------------
step "install $(basename "$deb_old") with apt (services forbidden)"
if ! in_root apt-get install -y -q --no-install-recommends "/tmp/$(basename "$deb_old")" </dev/null >"$work/install.log" 2>&1; then
    cat "$work/install.log" >&2
    fail "apt-get install of the package failed"
fi
grep -E '^(Setting up|Unpacking|.*policy-rc.d)' "$work/install.log" | sed 's/^/  /' >&2 || true
[ "$(in_root dpkg-query -W -f '${Status} ${Version}' vigil)" = "install ok installed $old_version" ] || fail "vigil $old_version is not installed after apt-get install"
# Every package in Depends is there (apt resolved them).
for dep in $(dpkg-deb -f "$deb_old" Depends | tr ',' '\n' | sed 's/(.*//; s/ //g'); do
    in_root dpkg-query -W -f '${Status}' "$dep" 2>/dev/null | grep 'install ok installed' >/dev/null || fail "dependency $dep is not installed"
done
grep -q 'policy-rc.d returned 101' "$work/install.log" || fail "postinst did not ask policy-rc.d before starting the service"
grep -qE '(^| )(start|restart) vigil\.service' "$root/run/systemctl.log" && fail "the service was started although policy-rc.d forbade it: $(cat "$root/run/systemctl.log")"
grep -q 'daemon-reload' "$root/run/systemctl.log" || fail "postinst did not reload systemd: $(cat "$root/run/systemctl.log")"
[ "$(readlink "$root/etc/systemd/system/multi-user.target.wants/vigil.service")" = /lib/systemd/system/vigil.service ] \
    || fail "the service is not enabled (no multi-user.target.wants/vigil.service link)"
passwd_line="$(in_root getent passwd vigil)" || fail "there is no user vigil"
IFS=: read -r _ _ uid gid _ home shell <<<"$passwd_line"
[ "$uid" -lt 1000 ] || fail "user vigil is not a system user (uid $uid)"
[ "$home" = /var/lib/vigil ] || fail "user vigil's home is $home, not /var/lib/vigil"
case "$shell" in */nologin|/bin/false) ;; *) fail "user vigil can log in (shell $shell)" ;; esac
groups="$(in_root id -nG vigil)"
for g in vigil video audio; do
    grep -qw "$g" <<<"$groups" || fail "user vigil is not in group $g (groups: $groups)"
done
for dir in /var/lib/vigil /var/lib/vigil/clips; do
    owner="$(in_root stat -c '%U:%G %a' "$dir")"
    [ "$owner" = "vigil:vigil 750" ] || fail "$dir is $owner, not vigil:vigil 750"
done
in_root dpkg-query -W -f '${Conffiles}\n' vigil | grep '^ /etc/vigil/vigil.conf ' >/dev/null || fail "/etc/vigil/vigil.conf is not a conffile"
for f in /usr/bin/vigil /etc/vigil/vigil.conf /lib/systemd/system/vigil.service /lib/systemd/system/vigil@.service \
         /usr/share/man/man8/vigil.8.gz \
         /usr/share/man/man5/vigil.conf.5.gz /usr/share/doc/vigil/copyright /usr/share/doc/vigil/changelog.gz; do
    [ -f "$root$f" ] || fail "$f is not installed"
done
cmp -s "$root/etc/vigil/vigil.conf" "$repo/etc/vigil/vigil.conf" || fail "the installed /etc/vigil/vigil.conf is not the repository's etc/vigil/vigil.conf"

step "vigil check, and vigil run as user vigil"
[ "$(in_root vigil --version)" = "vigil $version" ] || fail "the installed vigil does not say 'vigil $version'"
if ! in_root runuser -u vigil -- vigil check >"$work/check.out" 2>&1; then
    cat "$work/check.out" >&2
    fail "vigil check rejects the shipped /etc/vigil/vigil.conf"
fi
head -1 "$work/check.out" | grep 'configuration OK' >/dev/null || fail "vigil check did not say 'configuration OK': $(head -3 "$work/check.out")"
# The synthetic scene has an object crossing 5 to 9 s after the start: 14 s of recording
# hold one whole event. A small picture keeps the encoder quick on any machine.
cat >"$root/tmp/vigil-test.conf" <<'EOF'
camera = { device = "synthetic"; name = "debtest"; width = 320; height = 240; fps = 15.0; };
recording = { pre_roll = 2.0; post_roll = 1.0; };
storage = { path = "/var/lib/vigil/clips"; min_free_mb = 0; };
log = { stats_interval = 5; };
EOF
chmod 0644 "$root/tmp/vigil-test.conf"
set +e
in_root runuser -u vigil -- timeout --preserve-status -s TERM 14 vigil run --config /tmp/vigil-test.conf >"$work/run.log" 2>&1
status=$?
set -e
sed 's/^/  /' "$work/run.log" >&2
[ $status = 0 ] || fail "vigil run as user vigil exited $status, not 0, on SIGTERM (log above)"
grep -q 'msg="clip saved"' "$work/run.log" || fail "vigil run logged no 'clip saved' in 14 s of the synthetic scene"
mapfile -t clips < <(find "$root/var/lib/vigil/clips" -name '*.mov' -type f)
[ ${#clips[@]} -ge 1 ] || fail "vigil run wrote no .mov under /var/lib/vigil/clips"
for clip in "${clips[@]}"; do
    # Owners are names inside the root (the host may give the same number another name).
    [ "$(in_root stat -c %U "${clip#$root}")" = vigil ] || fail "${clip#$root} is not owned by vigil"
    probe="$(ffprobe -v error -select_streams v:0 -show_entries stream=codec_name,width,height:format=duration -of default=nw=1 "$clip")" \
        || fail "ffprobe cannot read ${clip#$root}"
    grep -qx 'codec_name=h264' <<<"$probe" && grep -qx 'width=320' <<<"$probe" && grep -qx 'height=240' <<<"$probe" \
        || fail "${clip#$root} is not 320x240 H.264: $probe"
    duration="$(sed -n 's/^duration=//p' <<<"$probe")"
    awk -v d="$duration" 'BEGIN {exit !(d >= 2)}' || fail "${clip#$root} lasts $duration s, less than the 2 s of pre-roll"
    decode="$(ffmpeg -nostdin -v error -i "$clip" -f null - 2>&1)"
    [ -z "$decode" ] || fail "ffmpeg reports errors decoding ${clip#$root}: $decode"
    note "clip ${clip#$root}: ${duration} s, decodes cleanly"
done
grep -q '"file"' "$root/var/lib/vigil/clips/events.jsonl" || fail "the events journal has no clip"
in_root runuser -u vigil -- vigil clips --config /tmp/vigil-test.conf | grep 'debtest-' >/dev/null || fail "vigil clips does not list the clip"

step "systemd-analyze verify and security"
# Inside the root, with bookworm's systemd: the commands the unit runs must exist there
# (/usr/bin/vigil, /bin/kill from procps) and its Documentation= man pages must open.
if ! in_root systemd-analyze verify /lib/systemd/system/vigil.service >"$work/verify.log" 2>&1; then
    cat "$work/verify.log" >&2
    fail "systemd-analyze verify rejects vigil.service"
fi
[ ! -s "$work/verify.log" ] || { cat "$work/verify.log" >&2; fail "systemd-analyze verify warns about vigil.service (above)"; }
# The sandbox must not weaken unnoticed: 1.5 when written; 2.0 leaves room for systemd's
# own re-weighting between versions, not for dropping a protection.
in_root systemd-analyze security --offline=yes --threshold=20 /lib/systemd/system/vigil.service >"$work/security.log" 2>&1 \
    || { tail -30 "$work/security.log" >&2; fail "systemd-analyze security: vigil.service's exposure is above 2.0 (above)"; }
note "$(grep -o 'Overall exposure level.*' "$work/security.log")"

# --- Under systemd ---------------------------------------------------------------------------------------
step "the service under systemd (a booted container)"
# Another root with the package installed, booted with systemd-nspawn: systemd starts the
# enabled service as at boot, with its whole sandbox. The user's edit points it at the
# synthetic scene. A unit of the test's, ordered after vigil.service (so after READY=1),
# watches it for longer than WatchdogSec, reloads it, stops it and powers off; what it
# saw is read here afterwards.
boot="$work/boot"
cp -a "$base" "$boot"
mount -t proc proc "$boot/proc"
mount --bind /dev "$boot/dev"
mount --bind "$cache/archives" "$boot/var/cache/apt/archives"
cp /etc/resolv.conf "$boot/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$boot/usr/sbin/policy-rc.d"
chmod 0755 "$boot/usr/sbin/policy-rc.d"
cp "$deb_new" "$boot/tmp/"
# With a broker on the machine: two cameras' instances (vigil@cam1, vigil@cam2) report to it;
# GStreamer's rtspsrc plays the service's RTSP stream.
if ! in_dir "$boot" sh -c "apt-get update -q && apt-get install -y -q --no-install-recommends /tmp/$(basename "$deb_new") mosquitto mosquitto-clients curl gstreamer1.0-tools gstreamer1.0-plugins-good" </dev/null >"$work/boot-install.log" 2>&1; then
    cat "$work/boot-install.log" >&2
    fail "apt-get install into the root to boot failed"
fi
rm -f "$boot/usr/sbin/policy-rc.d" "$boot/tmp/"*.deb
umount "$boot/var/cache/apt/archives" "$boot/dev" "$boot/proc"
sed -i -e 's|^  device = "/dev/video0";|  device = "synthetic";|' -e 's|^  width = 1280;|  width = 320;|' \
    -e 's|^  height = 720;|  height = 240;|' -e 's|^  fps = 30.0;|  fps = 15.0;|' -e 's|^  pre_roll = 5.0;|  pre_roll = 2.0;|' \
    -e 's|^  post_roll = 5.0;|  post_roll = 1.0;|' -e 's|^  min_free_mb = 500;|  min_free_mb = 0;|' "$boot/etc/vigil/vigil.conf"
grep -q '^  device = "synthetic";' "$boot/etc/vigil/vigil.conf" || fail "could not set camera.device in /etc/vigil/vigil.conf — update this test to the file"
# (The broker by address: the minimal root has no /etc/hosts to name localhost.)
# More than one camera: an instance per camera, each with its own configuration (its own
# camera.name, storage.path, lock, journal and MQTT device), both on the local broker.
for cam in cam1 cam2; do
    sed -e "s|^  name = \"camera\";|  name = \"$cam\";|" -e "s|^  path = \"/var/lib/vigil/clips\";|  path = \"/var/lib/vigil/$cam\";|" \
        -e '/^mqtt = {/,/^};/s|^  enabled = false;|  enabled = true;|' \
        -e '/^mqtt = {/,/^};/s|^  host = "localhost";|  host = "127.0.0.1";|' "$boot/etc/vigil/vigil.conf" >"$boot/etc/vigil/$cam.conf"
    grep -q "^  name = \"$cam\";" "$boot/etc/vigil/$cam.conf" && grep -q "^  path = \"/var/lib/vigil/$cam\";" "$boot/etc/vigil/$cam.conf" \
        || fail "could not set camera.name and storage.path in /etc/vigil/$cam.conf — update this test to the file"
    ln -s /lib/systemd/system/vigil@.service "$boot/etc/systemd/system/multi-user.target.wants/vigil@$cam.service"
done
# The main instance serves its page on the loopback, as web.enabled does (the others do not:
# they would ask for the same port).
sed -i -e '/^web = {/,/^};/s|^  enabled = false;|  enabled = true;|' "$boot/etc/vigil/vigil.conf"
grep -q '^  enabled = true;' <(sed -n '/^web = {/,/^};/p' "$boot/etc/vigil/vigil.conf") \
    || fail "could not set web.enabled in /etc/vigil/vigil.conf — update this test to the file"
# …and its camera over RTSP (rtsp.enabled), on the loopback's port 8554.
sed -i -e '/^rtsp = {/,/^};/s|^  enabled = false;|  enabled = true;|' "$boot/etc/vigil/vigil.conf"
grep -q '^  enabled = true;' <(sed -n '/^rtsp = {/,/^};/p' "$boot/etc/vigil/vigil.conf") \
    || fail "could not set rtsp.enabled in /etc/vigil/vigil.conf — update this test to the file"
cat >"$boot/usr/local/sbin/vigil-selftest" <<'EOF'
#!/bin/sh
# test-deb: watches vigil.service from inside the booted container, then powers off.
show() {
    echo "== $1"
    systemctl show vigil.service -p ActiveState -p SubState -p StatusText -p NRestarts -p Result -p ExecMainStatus \
        -p WatchdogUSec -p WatchdogTimestampMonotonic
}
{
    sleep 3
    show started
    for cam in cam1 cam2; do
        echo "== instance $cam"
        systemctl show "vigil@$cam.service" -p ActiveState -p SubState -p StatusText
    done
    echo "== process"
    grep -E '^(Uid|Groups|CapEff|NoNewPrivs|Seccomp):' "/proc/$(systemctl show vigil.service -p MainPID --value)/status"
    # Past WatchdogSec=30: the service is alive only if it pings the watchdog.
    sleep 37
    show watchdog
    # The page, the journal and a clip, over HTTP from the sandboxed service.
    echo "== web"
    curl -sS -o /root/page.html -w 'page=%{http_code}\n' http://127.0.0.1:8080/
    curl -sS -o /root/clips.json -w 'api=%{http_code}\n' http://127.0.0.1:8080/api/clips
    clip="$(grep -o '"file":"[^"]*"' /root/clips.json | head -1 | cut -d'"' -f4)"
    curl -sS -o /root/clip.mov -w 'clip=%{http_code}\n' "http://127.0.0.1:8080/clips/$clip"
    [ -n "$clip" ] && cmp -s /root/clip.mov "/var/lib/vigil/clips/$clip" && echo "clip-same=yes"
    grep -q '<h1><a href="/">camera</a></h1>' /root/page.html && echo "page-camera=yes"
    # The camera over RTSP, as an NVR takes it: GStreamer's rtspsrc, the H.264 as it comes
    # (read on the host by ffmpeg).
    echo "== rtsp"
    timeout 8 gst-launch-1.0 -q rtspsrc location=rtsp://127.0.0.1:8554/camera protocols=tcp ! rtph264depay \
        ! video/x-h264,stream-format=byte-stream ! filesink location=/root/rtsp.h264
    echo "rtsp-bytes=$(stat -c %s /root/rtsp.h264 2>/dev/null || echo 0)"
    # What the broker holds for Home Assistant: one device per camera.
    echo "== discovery"
    mosquitto_sub -h 127.0.0.1 -t 'homeassistant/binary_sensor/+/motion/config' -v -W 3 2>&1
    echo "== availability"
    mosquitto_sub -h 127.0.0.1 -t 'vigil/+/availability' -v -W 3 2>&1
    systemctl stop vigil@cam1.service vigil@cam2.service && echo "instances-stop=ok"
    for cam in cam1 cam2; do
        echo "== instance $cam stopped"
        systemctl show "vigil@$cam.service" -p Result -p ExecMainStatus
    done
    systemctl reload vigil.service && echo "reload=ok"
    sleep 2
    show reloaded
    systemctl stop vigil.service && echo "stop=ok"
    show stopped
    journalctl -u vigil.service -o cat --no-pager >/root/journal.txt
    journalctl -u vigil.service -p info..info -o cat --no-pager >/root/journal-info.txt
    journalctl -u vigil@cam1.service -u vigil@cam2.service -o cat --no-pager >/root/journal-instances.txt
    echo "== end"
} >/root/selftest.txt 2>&1
systemctl poweroff
EOF
chmod 0755 "$boot/usr/local/sbin/vigil-selftest"
cat >"$boot/etc/systemd/system/vigil-selftest.service" <<'EOF'
[Unit]
Description=test-deb: watch vigil.service
After=vigil.service
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/vigil-selftest
EOF
ln -s /etc/systemd/system/vigil-selftest.service "$boot/etc/systemd/system/multi-user.target.wants/vigil-selftest.service"
# On a machine that does not run systemd itself, nspawn needs a tmpfs for its own state.
if [ "$(findmnt -n -o FSTYPE --target /run/systemd/nspawn)" != tmpfs ]; then
    mkdir -p /run/systemd/nspawn
    mount -t tmpfs tmpfs /run/systemd/nspawn
    nspawn_tmpfs=/run/systemd/nspawn
fi
if ! timeout 180 systemd-nspawn -q -D "$boot" --boot --register=no --keep-unit --console=pipe </dev/null >"$work/boot.log" 2>&1; then
    tail -30 "$work/boot.log" >&2
    fail "the container did not boot and power off within 180 s (systemd-nspawn's output above)"
fi
selftest="$boot/root/selftest.txt"
[ -f "$selftest" ] || { tail -30 "$work/boot.log" >&2; fail "vigil-selftest did not run in the booted container"; }
sed 's/^/  /' "$selftest" >&2
section() { awk -v s="== $1" '$0 == s {on = 1; next} /^== / {on = 0} on' "$selftest"; }
section started | grep -x 'ActiveState=active' >/dev/null && section started | grep -x 'SubState=running' >/dev/null \
    || fail "vigil.service is not running 3 s after boot"
section started | grep '^StatusText=recording from synthetic' >/dev/null || fail "vigil.service did not report READY=1 with its status"
uid="$(in_dir "$boot" id -u vigil)"
section process | grep -P "^Uid:\t$uid\t" >/dev/null || fail "the service does not run as user vigil ($uid)"
for g in video audio; do
    gid="$(in_dir "$boot" getent group "$g" | cut -d: -f3)"
    section process | grep '^Groups:' | grep -w "$gid" >/dev/null || fail "the service does not run in group $g ($gid)"
done
section process | grep -P '^CapEff:\t0+$' >/dev/null || fail "the service has capabilities"
for said in page=200 api=200 clip=200 clip-same=yes page-camera=yes; do
    section web | grep -x "$said" >/dev/null || fail "the service's web server: no $said (the web section above)"
done
rtsp_frames="$(ffprobe -v error -f h264 -count_frames -select_streams v:0 -show_entries stream=nb_read_frames \
    -of csv=p=0 "$boot/root/rtsp.h264" 2>/dev/null || echo 0)"
[ "${rtsp_frames:-0}" -ge 30 ] || fail "the service's RTSP stream: $rtsp_frames frames read by GStreamer's rtspsrc in 8 s (the rtsp section above)"
ffmpeg_errors="$(ffmpeg -nostdin -v error -f h264 -i "$boot/root/rtsp.h264" -f null - 2>&1)"
[ -z "$ffmpeg_errors" ] || fail "the service's RTSP stream does not decode: $ffmpeg_errors"
section process | grep -P '^NoNewPrivs:\t1$' >/dev/null || fail "the service runs without NoNewPrivileges"
section process | grep -P '^Seccomp:\t2$' >/dev/null || fail "the service runs without a system-call filter"
section started | grep -x 'WatchdogUSec=30s' >/dev/null || fail "vigil.service has no 30 s watchdog"
section watchdog | grep -x 'SubState=running' >/dev/null && section watchdog | grep -x 'NRestarts=0' >/dev/null \
    || fail "vigil.service did not stay up past WatchdogSec (watchdog pings missing?)"
ping_started="$(section started | sed -n 's/^WatchdogTimestampMonotonic=//p')"
ping_later="$(section watchdog | sed -n 's/^WatchdogTimestampMonotonic=//p')"
[ "${ping_later:-0}" -gt "${ping_started:-0}" ] || fail "no watchdog ping reached systemd between 3 s and 40 s after the start"
grep -qx 'reload=ok' "$selftest" && section reloaded | grep -x 'StatusText=configuration reloaded' >/dev/null \
    || fail "systemctl reload vigil did not reload the configuration"
grep -qx 'stop=ok' "$selftest" && section stopped | grep -x 'Result=success' >/dev/null && section stopped | grep -x 'ExecMainStatus=0' >/dev/null \
    || fail "systemctl stop vigil did not end the service cleanly"
grep -q 'msg="vigil starting"' "$boot/root/journal-info.txt" || fail "the journal does not file vigil's info lines at priority info"
grep -q '^<[0-7]>' "$boot/root/journal.txt" && fail "the journal shows vigil's <N> priority prefixes instead of taking them"
mapfile -t booted_clips < <(find "$boot/var/lib/vigil/clips" -name '*.mov' -type f)
[ ${#booted_clips[@]} -ge 1 ] || fail "the service recorded no clip in the booted container"
for clip in "${booted_clips[@]}"; do
    decode="$(ffmpeg -nostdin -v error -i "$clip" -f null - 2>&1)"
    [ -z "$decode" ] || fail "ffmpeg reports errors decoding ${clip#$boot}: $decode"
done
# The two cameras' instances: both ran, both recorded into their own storage, both are
# devices on the broker, and both stopped cleanly.
for cam in cam1 cam2; do
    section "instance $cam" | grep -x 'SubState=running' >/dev/null \
        || { cat "$boot/root/journal-instances.txt" >&2; fail "vigil@$cam.service is not running 3 s after boot"; }
    section discovery | grep "^homeassistant/binary_sensor/vigil_$cam/motion/config " | grep '"identifiers":\["vigil_'"$cam"'"\]' >/dev/null \
        || { cat "$boot/root/journal-instances.txt" >&2; fail "vigil@$cam is not a device on the broker (no Home Assistant discovery config for vigil_$cam)"; }
    section availability | grep -x "vigil/$cam/availability online" >/dev/null || fail "vigil@$cam is not online on the broker"
    mapfile -t cam_clips < <(find "$boot/var/lib/vigil/$cam" -name '*.mov' -type f)
    [ ${#cam_clips[@]} -ge 1 ] || { cat "$boot/root/journal-instances.txt" >&2; fail "vigil@$cam recorded no clip"; }
    [ -f "$boot/var/lib/vigil/$cam/events.jsonl" ] || fail "vigil@$cam has no events journal of its own"
    for clip in "${cam_clips[@]}"; do
        decode="$(ffmpeg -nostdin -v error -i "$clip" -f null - 2>&1)"
        [ -z "$decode" ] || fail "ffmpeg reports errors decoding ${clip#$boot}: $decode"
    done
    section "instance $cam stopped" | grep -x 'ExecMainStatus=0' >/dev/null \
        || fail "vigil@$cam.service did not stop cleanly"
done
note "under systemd: ready, sandboxed as vigil, watchdog kept, reloaded, stopped with status 0; ${#booted_clips[@]} clip(s) decode cleanly"
note "two cameras: vigil@cam1 and vigil@cam2 recorded into their own directories and are two devices on the broker"
rm -rf "$boot"

# --- Upgrade -------------------------------------------------------------------------------------------
step "upgrade to $(basename "$deb_new") keeping an edited conffile"
sed -i 's/^  stats_interval = 60;$/  stats_interval = 30;/' "$root/etc/vigil/vigil.conf"
echo "# edited by test-deb" >>"$root/etc/vigil/vigil.conf"
grep -q '^  stats_interval = 30;$' "$root/etc/vigil/vigil.conf" || fail "could not edit stats_interval in /etc/vigil/vigil.conf — update this test to the file"
edited="$(md5sum <"$root/etc/vigil/vigil.conf")"
policy "services may start" 0
: >"$root/run/systemctl.log"
# No --force-conf* option: what a user gets. A conffile prompt would read standard input,
# which is /dev/null, and fail the upgrade.
if ! in_root apt-get install -y -q --no-install-recommends "/tmp/$(basename "$deb_new")" </dev/null >"$work/upgrade.log" 2>&1; then
    cat "$work/upgrade.log" >&2
    fail "apt-get install of the newer package failed"
fi
[ "$(in_root dpkg-query -W -f '${Status} ${Version}' vigil)" = "install ok installed $version" ] || fail "vigil $version is not installed after the upgrade"
grep -q "Configuration file '/etc/vigil/vigil.conf'" "$work/upgrade.log" && fail "dpkg asked about /etc/vigil/vigil.conf during the upgrade"
[ "$(md5sum <"$root/etc/vigil/vigil.conf")" = "$edited" ] || fail "the upgrade changed the edited /etc/vigil/vigil.conf"
leftovers="$(find "$root/etc/vigil" -name '*.dpkg-*')"
[ -z "$leftovers" ] || fail "the upgrade left $leftovers"
in_root vigil check | grep '^  stats_interval = 30;$' >/dev/null || fail "vigil check does not see the edited stats_interval after the upgrade"
grep -q 'restart vigil.service' "$root/run/systemctl.log" || fail "the upgrade did not restart the service (systemctl calls: $(tr '\n' ';' <"$root/run/systemctl.log"))"
[ ${#clips[@]} -le "$(find "$root/var/lib/vigil/clips" -name '*.mov' | wc -l)" ] || fail "the upgrade lost clips"

# --- The libcamera plugin: a package of its own, beside vigil and gone again ----------------------
step "vigil-libcamera beside vigil, then purged"
case "$(dpkg-deb -f "$deb_new" Depends)" in *libcamera*) fail "vigil itself depends on libcamera: $(dpkg-deb -f "$deb_new" Depends)" ;; esac
deb_plugin="$("$here/build-deb-libcamera.sh" --out "$work/debs" --version "$version")" || fail "build-deb-libcamera.sh failed (above)"
cp "$deb_plugin" "$root/tmp/"
note "$(basename "$deb_plugin"): Depends $(dpkg-deb -f "$deb_plugin" Depends)"
if ! in_root apt-get install -y -q --no-install-recommends "/tmp/$(basename "$deb_plugin")" </dev/null >"$work/plugin.log" 2>&1; then
    cat "$work/plugin.log" >&2
    fail "apt-get install of the vigil-libcamera package failed"
fi
# The plugin loads (built against this system's libcamera) and finds no camera in the root.
in_root vigil probe >"$work/probe.out" 2>&1 || true
grep -A2 '^Cameras (libcamera)' "$work/probe.out" | grep -q 'none found' \
    || fail "vigil probe with vigil-libcamera installed does not say it found no libcamera camera: $(grep -A3 '^Cameras (libcamera)' "$work/probe.out")"
for unit in vigil.service vigil@.service; do
    find "$root/lib/systemd/system/$unit.d" "$root/usr/lib/systemd/system/$unit.d" -name libcamera.conf 2>/dev/null | grep -q . \
        || fail "vigil-libcamera did not install the $unit drop-in that lets the service reach the media controller"
done
in_root apt-get purge -y -q --autoremove vigil-libcamera </dev/null >"$work/plugin-purge.log" 2>&1 \
    || { cat "$work/plugin-purge.log" >&2; fail "apt-get purge vigil-libcamera failed"; }
[ "$(in_root dpkg-query -W -f '${Status}' vigil)" = "install ok installed" ] || fail "purging vigil-libcamera removed vigil"
in_root vigil probe >"$work/probe.out" 2>&1 || true
grep -A2 '^Cameras (libcamera)' "$work/probe.out" | grep -q 'vigil-libcamera package is not installed' \
    || fail "vigil probe after purging vigil-libcamera does not say the package is missing: $(grep -A3 '^Cameras (libcamera)' "$work/probe.out")"
rm -f "$root/tmp/$(basename "$deb_plugin")"

# --- Remove, then purge ----------------------------------------------------------------------------------
step "remove keeps configuration and clips"
: >"$root/run/systemctl.log"
in_root apt-get remove -y -q vigil </dev/null >"$work/remove.log" 2>&1 || { cat "$work/remove.log" >&2; fail "apt-get remove vigil failed"; }
grep -q 'stop vigil.service' "$root/run/systemctl.log" || fail "remove did not stop the service (systemctl calls: $(tr '\n' ';' <"$root/run/systemctl.log"))"
[ ! -e "$root/usr/bin/vigil" ] || fail "remove left /usr/bin/vigil"
[ -f "$root/etc/vigil/vigil.conf" ] || fail "remove deleted the configuration"
[ -n "$(find "$root/var/lib/vigil/clips" -name '*.mov')" ] || fail "remove deleted the clips"
in_root getent passwd vigil >/dev/null || fail "remove deleted the user vigil (only purge may)"

step "purge leaves nothing behind"
in_root apt-get purge -y -q --autoremove vigil </dev/null >"$work/purge.log" 2>&1 || { cat "$work/purge.log" >&2; fail "apt-get purge vigil failed"; }
status="$(in_root dpkg-query -W -f '${Status}' vigil 2>/dev/null || true)"
case "$status" in ""|*" not-installed") ;; *) fail "vigil is not purged: dpkg says '$status'" ;; esac
# The test's own fixtures go before the "after" picture.
umount "$root/usr/bin/systemctl"
rm -f "$root/usr/sbin/policy-rc.d" "$root/run/systemctl.real" "$root/run/systemctl.log" "$root/tmp/vigil-test.conf" "$root/tmp/"vigil_*.deb
rmdir "$root/run/systemd/system" 2>/dev/null || true
snapshot >"$work/after.txt"
if ! diff -u "$work/before.txt" "$work/after.txt" >"$work/leftovers.diff"; then
    grep '^[-+][^-+]' "$work/leftovers.diff" | head -40 >&2
    fail "the root after purge differs from the root before install (- before, + after)"
fi
note "purge: no user, no group, no file left; $(wc -l <"$work/before.txt") paths and files compared"
step "all done"
