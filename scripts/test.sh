#!/usr/bin/env bash
# The test command: installs dependencies, builds, runs every test. GPU tests (label gpu) skip with a reason on a
# machine without a GPU and run for real where there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
ctest --test-dir "${PICKLE_BUILD_DIR:-build}" -j "$(nproc)" --output-on-failure "$@"
