#!/usr/bin/env bash
# Runs on the lent GPU machine after gpu-check.sh (which builds build-gpu): pickle bench p2p with all backends,
# results as JSON and text in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-gpu-check-out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
nccl_dir=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])" 2>/dev/null || true)
[ -n "$nccl_dir" ] && export LD_LIBRARY_PATH="$nccl_dir/lib:${LD_LIBRARY_PATH:-}"
build-gpu/tools/pickle/pickle bench p2p --backend pickle,nccl,ce "$@" --json "$out/p2p.json" 2> "$out/p2p.err" \
  | tee "$out/p2p.txt"
status=${PIPESTATUS[0]}
tail -5 "$out/p2p.err"
exit "$status"
