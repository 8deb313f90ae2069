#!/usr/bin/env bash
# `make run`: the agent on the demo configuration, recording into var/clips.
# Usage: scripts/run-demo.sh BIN_DIR  (the directory holding the built `vigil`)
set -euo pipefail
bin="${1:?usage: run-demo.sh BIN_DIR}"
cd "$(dirname "$0")/.."
mkdir -p var
device="synthetic"
for node in /dev/video*; do
    if [ -c "$node" ] && [ "${VIGIL_DEMO_SYNTHETIC:-0}" != 1 ]; then device="$node"; break; fi
done
sed "s|device = \"synthetic\";|device = \"$device\";|" etc/vigil/demo.conf > var/demo.conf
"$bin/vigil" check --config var/demo.conf > /dev/null
if [ "$device" = synthetic ]; then
    echo "vigil: no camera attached — running on the synthetic scene (something moves about every 20 s)."
else
    echo "vigil: recording from $device (VIGIL_DEMO_SYNTHETIC=1 make run uses the synthetic scene instead)."
fi
echo "vigil: clips go to $(pwd)/var/clips; list them with: $bin/vigil clips --config var/demo.conf"
echo "vigil: watch it live and play the clips at http://127.0.0.1:8080/ (the agent logs \"web server off\" if the port is taken)."
echo "vigil: Ctrl-C stops the agent (the open clip is finished first)."
exec "$bin/vigil" run --config var/demo.conf
