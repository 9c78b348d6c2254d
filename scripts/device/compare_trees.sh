#!/usr/bin/env bash
# A/B of one probe between two source trees, in one device call: the working tree ("new") and a tarball of an
# earlier commit ("old", made here with `git archive REV -o old-tree.tar` and sent along as an untracked file).
# Both are built (Release, sm_90, the probe's target only), then the probe runs new, old, new, old, so that drift
# of the machine shows as a difference between the two runs of one tree. Output: $OUT/compare.txt.
#   bash scripts/device/compare_trees.sh old-tree.tar PROBE [ARGS...]
set -uo pipefail
cd "$(dirname "$0")/../.."
tarball=$1 probe=$2
shift 2
out=${OUT:-compare-out}
mkdir -p "$out" /tmp/old-tree
export NCCL_NVLS_ENABLE=0 PICKLE_TIMEOUT=${PICKLE_TIMEOUT:-60}
tar -xf "$tarball" -C /tmp/old-tree || exit 1
configure() { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$2.log" 2>&1; }
(configure . build-gpu && cmake --build build-gpu -j 8 --target "$probe" >> build-gpu.log 2>&1) &
(configure /tmp/old-tree /tmp/old-tree/build && cmake --build /tmp/old-tree/build -j 8 --target "$probe" \
  >> /tmp/old-tree/build.log 2>&1) &
wait
for binary in build-gpu/tools/probes/$probe /tmp/old-tree/build/tools/probes/$probe; do
  [ -x "$binary" ] || { echo "build of $binary failed"; tail -20 build-gpu.log /tmp/old-tree/build.log; exit 1; }
done
for round in 1 2; do
  echo "== new (round $round)"; build-gpu/tools/probes/$probe "$@"
  echo "== old (round $round)"; /tmp/old-tree/build/tools/probes/$probe "$@"
done 2>&1 | tee "$out/compare.txt"
