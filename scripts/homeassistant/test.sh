#!/usr/bin/env bash
# `make test-homeassistant`: a real Home Assistant against real Vigil agents, on loopback, as a
# user adds the camera: what Home Assistant shows of it is checked, not what Vigil says.
#
#   scripts/homeassistant/test.sh VIGIL     VIGIL: the `vigil` built on this machine
#
# Home Assistant 2026.2.3 (the last release for Python 3.13) runs in the amd64 Debian trixie root
# of scripts/trixie/root.sh (made when missing), from a venv kept in ~/.cache/vigil-homeassistant
# (VIGIL_HA_CACHE) under the hash of requirements.txt, every package of which is pinned. The
# venv is made once (300 MB downloaded, 40 s here; 1.1 GB on disk); Home Assistant then runs
# with --skip-pip and installs nothing.
#
# On this machine, four agents record the synthetic camera (320×240, 15 fps) with rtsp.enabled,
# web.enabled and snapshot.live_interval: "open" with no password, "digest" with
# web.password_file (user viewer), "onvif" with onvif.enabled and no password, "onvifpw" with
# onvif.enabled and onvif.password_file (user viewer, set in both files by
# `vigil passwd --onvif`). In the root, Home Assistant starts with a configuration of its
# own (http on a free loopback port, stream; no default_config, so no go2rtc: its own stream
# integration serves HLS), and driver.py, with Home Assistant's Python, onboards its owner and
# adds each agent's camera through the Generic Camera config flow, or ONVIF's for the last two
# (REST, as the frontend does):
# the camera entity in /api/states, its picture through /api/camera_proxy (a 320×240 JPEG), its
# stream (websocket camera/stream: Home Assistant's HLS URL) read by ffprobe (h264, 320×240) and
# 4 s of it decoded by ffmpeg with nothing said. Home Assistant's log must hold no ERROR line and each
# agent must stop cleanly (exit 0, no level=error line).
#
# Needs root (chroot, mount namespaces). Prints what it saw; exits 1 with the reason on any
# failure (with the logs' tails), and stops every process it started whatever happens. With the
# root and the venv cached: about a minute.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/trixie/lib.sh
. "$here/../trixie/lib.sh"
fail() { echo "ha-test: FAILED: $*" >&2; exit 1; }
note() { echo "ha-test: $*" >&2; }

vigil="${1:-}"
[ -n "$vigil" ] || { echo "usage: $0 VIGIL (the built vigil, e.g. .build/debug/vigil)" >&2; exit 64; }
[ -x "$vigil" ] || fail "$vigil is not an executable — build it first (swift build, or make test-homeassistant)"
vigil="$(cd "$(dirname "$vigil")" && pwd)/$(basename "$vigil")"
[ "$(id -u)" = 0 ] || fail "needs root (chroot and mount namespaces) — run it as root, or with sudo"

# --- The root and Home Assistant's venv ----------------------------------------------------------
root="$("$here/../trixie/root.sh" build)" || fail "could not make the trixie build root (scripts/trixie/root.sh build, above)"
home="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
cache="${VIGIL_HA_CACHE:-${XDG_CACHE_HOME:-$home/.cache}/vigil-homeassistant}"
mkdir -p "$cache/pip"
key="$(sha256sum <"$here/requirements.txt" | cut -c1-12)"
venv="venv-$key"
# pip in the root trusts what this machine trusts: a proxy's CA may be in the host's bundle only.
pip_env="PIP_CACHE_DIR=/ha/pip PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1"
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    cp /etc/ssl/certs/ca-certificates.crt "$cache/ca.crt"
    pip_env="$pip_env PIP_CERT=/ha/ca.crt SSL_CERT_FILE=/ha/ca.crt"
fi
exec 7>"$cache/venv.lock"
flock 7
if [ ! -f "$cache/$venv/complete" ]; then
    started=$(date +%s)
    note "making Home Assistant's venv ($cache/$venv; log: $cache/pip.log)"
    rm -rf "${cache:?}/$venv"
    # shellcheck disable=SC2086 # NAME=VALUE words
    VIGIL_ROOT_ENV="$pip_env" in_root "$root" --bind "$cache:/ha" sh -c "
        python3 -m venv /ha/$venv && /ha/$venv/bin/pip install --no-deps --prefer-binary \
            -r /src/scripts/homeassistant/requirements.txt" >"$cache/pip.log" 2>&1 \
        || { tail -20 "$cache/pip.log" >&2; fail "pip could not install Home Assistant (log above) — check the network (PyPI) and requirements.txt"; }
    touch "$cache/$venv/complete"
    # Older venvs (another requirements.txt) go.
    for old in "$cache"/venv-*; do [ "$old" = "$cache/$venv" ] || rm -rf "$old"; done
    note "venv made in $(($(date +%s) - started)) s"
fi
flock -u 7

# --- The agents --------------------------------------------------------------------------------
work="$(mktemp -d /tmp/vigil-homeassistant.XXXXXX)"
pids=()
names=()
ha_group=""
passed=0
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    if [ -n "$ha_group" ]; then
        kill -TERM -- "-$ha_group" 2>/dev/null || true
        for _ in $(seq 60); do kill -0 -- "-$ha_group" 2>/dev/null || break; sleep 0.5; done
        kill -KILL -- "-$ha_group" 2>/dev/null || true
    fi
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    if [ "$passed" != 1 ]; then
        for log in "$work"/*/agent.log "$work/ha.log"; do
            [ -f "$log" ] && { echo "--- the last lines of $log" >&2; tail -25 "$log" >&2; }
        done
    fi
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_agent NAME PASSWORD [LINES]: `vigil run` on the synthetic camera NAME (320×240) in
# $work/NAME with rtsp.enabled, web.enabled, live pictures and free ports; with PASSWORD "yes",
# web.password_file with the user viewer (password secret); with "onvif", the same set by
# `vigil passwd --onvif` in onvif.password_file too (LINES give it); LINES are more settings
# (another group). Sets web_url, web_port and rtsp_url from its log, once latest.jpg is there.
start_agent() {
    local name="$1" password="$2" lines="${3:-}" dir="$work/$1" file="" onvif=()
    mkdir -p "$dir"
    [ "$password" = no ] || file='password_file = "passwords";'
    [ "$password" = onvif ] && onvif=(--onvif)
    cat >"$dir/vigil.conf" <<EOF
camera = { device = "synthetic"; name = "$name"; width = 320; height = 240; fps = 15.0; };
storage = { path = "clips"; min_free_mb = 1; };
log = { level = "info"; stats_interval = 0; };
snapshot = { live_interval = 1.0; };
web = { enabled = true; port = 0; $file };
rtsp = { enabled = true; port = 0; };
$lines
EOF
    if [ "$password" != no ]; then
        echo secret | "$vigil" passwd "${onvif[@]}" --user viewer --config "$dir/vigil.conf" >/dev/null \
            || fail "vigil passwd ${onvif[*]} could not set the password of $name"
    fi
    # The log exists before the agent does: the loop below reads it at once.
    : >"$dir/agent.log"
    VIGIL_RUNTIME_DIR="$dir" "$vigil" run --config "$dir/vigil.conf" >>"$dir/agent.log" 2>&1 </dev/null &
    pids+=($!)
    names+=("$name")
    for _ in $(seq 120); do
        web_url="$(sed -n 's/.*msg="web server listening".* url=\(http[^ ]*\).*/\1/p' "$dir/agent.log")"
        rtsp_url="$(sed -n 's/.*msg="rtsp server listening".* url=\(rtsp[^ ]*\).*/\1/p' "$dir/agent.log")"
        [ -n "$web_url" ] && [ -n "$rtsp_url" ] && [ -f "$dir/clips/latest.jpg" ] && break
        kill -0 "${pids[-1]}" 2>/dev/null || fail "vigil run ($name) exited (its log below)"
        sleep 0.5
    done
    [ -f "$dir/clips/latest.jpg" ] && [ -n "$rtsp_url" ] \
        || fail "gave up waiting 60 s for $name's servers and latest.jpg (its log below)"
    web_port="${web_url##*:}"
    web_port="${web_port%/}"
    note "agent $name: $rtsp_url, ${web_url}latest.jpg"
}

# The cameras driver.py adds, one JSON object each (its docstring says what they hold).
cameras=()
start_agent open no
cameras+=("{\"name\": \"open\", \"integration\": \"generic\", \"width\": 320, \"height\": 240,
  \"stream_source\": \"$rtsp_url\", \"still_image_url\": \"${web_url}latest.jpg\"}")
start_agent digest yes
digest_web_url="$web_url"
cameras+=("{\"name\": \"digest\", \"integration\": \"generic\", \"width\": 320, \"height\": 240,
  \"stream_source\": \"$rtsp_url\", \"still_image_url\": \"${web_url}latest.jpg\",
  \"username\": \"viewer\", \"password\": \"secret\", \"authentication\": \"digest\"}")
# ONVIF, added by hand (discovery off: the test's agents must not answer the network's probes).
start_agent onvif no 'onvif = { enabled = true; discovery = false; };'
cameras+=("{\"name\": \"onvif\", \"integration\": \"onvif\", \"width\": 320, \"height\": 240,
  \"host\": \"127.0.0.1\", \"port\": $web_port}")
# With a password: Home Assistant signs every call with a WS-Security PasswordDigest
# (onvif.password_file), fetches the picture with HTTP Digest and plays the stream with RTSP
# Digest (web.password_file), all as viewer.
start_agent onvifpw onvif 'onvif = { enabled = true; discovery = false; password_file = "onvif-passwords"; };'
cameras+=("{\"name\": \"onvifpw\", \"integration\": \"onvif\", \"width\": 320, \"height\": 240,
  \"host\": \"127.0.0.1\", \"port\": $web_port, \"username\": \"viewer\", \"password\": \"secret\"}")
(IFS=,; echo "[${cameras[*]}]") >"$work/cameras.json"

# --- Home Assistant ----------------------------------------------------------------------------
# A free port, found by the root's Python (the root shares this machine's network).
port="$(in_root "$root" python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
mkdir -p "$work/ha"
cat >"$work/ha/configuration.yaml" <<EOF
homeassistant:
  name: Vigil test
  latitude: 0
  longitude: 0
  elevation: 0
  unit_system: metric
  time_zone: UTC
  country: GB
http:
  server_host: 127.0.0.1
  server_port: $port
stream:
EOF
# Its own session and process group, all of which the cleanup stops (in_root execs the rest).
setsid bash -c '. "$1"; shift; in_root "$@"' in_root "$here/../trixie/lib.sh" "$root" \
    --bind "$cache:/ha" --bind "$work/ha:/config" \
    "/ha/$venv/bin/hass" --config /config --skip-pip --log-no-color >"$work/ha.log" 2>&1 </dev/null &
ha_group=$!
note "Home Assistant starting on http://127.0.0.1:$port (its group $ha_group)"

# --- The checks --------------------------------------------------------------------------------
in_root "$root" --bind "$cache:/ha" --bind "$work:/work" \
    timeout -s KILL 900 "/ha/$venv/bin/python3" /src/scripts/homeassistant/driver.py \
    --ha "http://127.0.0.1:$port" --cameras /work/cameras.json </dev/null \
    || fail "Home Assistant did not show Vigil's cameras as a user would see them (driver.py above)"

# What Home Assistant logged: no error but the one the wrong password's still image makes (once);
# its warnings are printed.
grep -E '^[0-9-]+ [0-9:.]+ WARNING' "$work/ha.log" | cut -c1-300 | sed 's/^/ha-test: Home Assistant warned: /' >&2 || true
expected="ERROR (MainThread) [homeassistant.components.generic.config_flow] Error getting camera image from ${digest_web_url}latest.jpg: HTTPStatusError"
grep -F "$expected" "$work/ha.log" | sed 's/^/ha-test: Home Assistant logged, as expected: /' >&2 \
    || fail "Home Assistant did not log the wrong password's refused still image ($expected)"
errors="$(grep -E '^[0-9-]+ [0-9:.]+ (ERROR|CRITICAL)' "$work/ha.log" | grep -vF "$expected" || true)"
if [ -n "$errors" ]; then
    echo "$errors" >&2
    fail "Home Assistant logged errors (above; $work/ha.log's tail below)"
fi

# The agents stop cleanly.
for i in "${!pids[@]}"; do
    kill -TERM "${pids[$i]}"
    status=0
    wait "${pids[$i]}" || status=$?
    log="$work/${names[$i]}/agent.log"
    [ "$status" = 0 ] || fail "vigil run exited $status on SIGTERM ($log)"
    if grep -E 'level=(error|warning)' "$log" >&2; then fail "the agent logged the problems above ($log)"; fi
done
pids=()
passed=1
note "passed: Home Assistant 2026.2.3 showed every camera, its picture and its stream"
