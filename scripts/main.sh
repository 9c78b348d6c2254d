#!/usr/bin/env bash
# The main job: installs dependencies, builds, describes the machine, runs pickle's end-to-end check across ranks and
# then `pickle bench` with its default suite (one rank per GPU; on a machine without GPUs, 2 host-memory ranks, and
# it says so), and `pickle report` turns its results (results/bench-p2p.json) into results/report/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
pickle=${PICKLE_BUILD_DIR:-build}/tools/pickle/pickle
"$pickle" info
echo
"$pickle" selftest
echo
mkdir -p results
"$pickle" bench --json results/bench-p2p.json
echo
"$pickle" report results/bench-p2p.json -o results/report
echo "main: report in results/report/report.md"
