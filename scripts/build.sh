#!/usr/bin/env bash
# Configures and builds pickle into ${PICKLE_BUILD_DIR:-build}. Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${PICKLE_BUILD_DIR:-build}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
cmake -S . -B "$build_dir" -G Ninja -DPICKLE_WERROR=ON "$@"
cmake --build "$build_dir" -j "$(nproc)"
