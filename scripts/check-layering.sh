#!/usr/bin/env bash
# The layering rules of docs/ARCHITECTURE.md, checked on the sources:
# - pure modules import no C module (Glibc, the C* system libraries) and no Foundation;
# - adapters reach C only with `internal import`, so no C type can appear in a public signature;
# - the agent imports no x264 type (it knows encoders through Media's VideoEncoder seam).
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
fail() { echo "layering: $*" >&2; status=1; }

for module in Media Logging QuickTime MotionDetection Recorder Analysis; do
    while IFS= read -r hit; do
        fail "$hit — the pure module $module imports C or Foundation"
    done < <(grep -nE '^\s*(@_exported |internal |public )?import (Glibc|Foundation$|Foundation\b[^E]|C[A-Z][A-Za-z0-9]*|POSIX|Dispatch)' \
        Sources/"$module"/*.swift || true)
done
for module in POSIX V4L2 H264 Capture Configuration Storage MQTT Snapshot Overlay; do
    while IFS= read -r hit; do
        fail "$hit — an adapter imports a C module without \`internal import\`"
    done < <(grep -nE '^\s*(public )?import (Glibc|C[A-Z][A-Za-z0-9]*)$' Sources/"$module"/*.swift || true)
done
while IFS= read -r hit; do
    fail "$hit — the agent imports an encoder backend"
done < <(grep -rnE '^\s*(internal |public )?import (H264|CX264)$' Sources/Agent || true)
exit $status
