#!/usr/bin/env bash
# The main job: installs dependencies, builds, describes the machine and runs pickle's end-to-end check across ranks
# (one per GPU; on a machine without GPUs, 2 host-memory ranks, and it says so).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
pickle=${PICKLE_BUILD_DIR:-build}/tools/pickle/pickle
"$pickle" info
echo
"$pickle" selftest
