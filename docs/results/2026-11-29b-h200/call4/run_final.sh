#!/usr/bin/env bash
# The session's head on the GPU machine: every GPU test (the namespace tools carried, so none skips for want of ip),
# then bench coll over the net transport (host memory, loopback) with directional rails against the tree before them.
set -uo pipefail
export PATH="$PWD/.deps/netns-tools/bin:$PATH" PICKLE_TIMEOUT=60 NCCL_NVLS_ENABLE=0
base=$OUT
OUT=$base/coll PICKLE_TRANSPORT=net PICKLE_NET_IFACE=lo PICKLE_NET_LANES=1 ROUNDS=2 timeout 170 \
  bash scripts/device/compare_trees.sh .deps/old-tree.tar pickle bench coll -c allreduce,allgather --ranks 2 \
  --memory host --backend pickle -b 64M -e 256M -f 4 -n 5 -w 2 > /dev/null 2>&1
echo "== bench coll over net, 1 lane, host memory"; grep -E "^== |^ +[0-9]+ " "$base/coll/compare.txt"
OUT=$base timeout 380 bash scripts/device/session.sh build gpu-tests > /dev/null 2>&1
tail -5 "$base/session/summary.txt"; grep -E "Skipped|Failed|tests passed" "$base/session/ctest-gpu.log" | tail -8
rm -f "$base/session/build.log" "$base/coll/"*build.log
