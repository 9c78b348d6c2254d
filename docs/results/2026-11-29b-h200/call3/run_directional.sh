#!/usr/bin/env bash
# A/B of directional rails (working tree, "new") against f990279 ("old"): bench p2p over the net transport, host
# memory, two local ranks over loopback, then between two network namespaces; then the same over GPU memory.
set -uo pipefail
export PATH="$PWD/.deps/netns-tools/bin:$PATH" PICKLE_TIMEOUT=60 NCCL_NVLS_ENABLE=0
base=$OUT
for lanes in 1 2 4; do
  OUT=$base/lo-l$lanes PICKLE_TRANSPORT=net PICKLE_NET_IFACE=lo PICKLE_NET_LANES=$lanes ROUNDS=2 timeout 150 \
    bash scripts/device/compare_trees.sh .deps/old-tree.tar pickle bench p2p --ranks 2 --memory host \
    --backend pickle --mode uni,bi -b 256M -e 256M -n 4 -w 1 > /dev/null 2>&1
  echo "== lo, $lanes lane(s), host memory"; grep -E "^== |^ +(uni|bi) " "$base/lo-l$lanes/compare.txt"
done
OUT=$base/lo-l1-cuda PICKLE_TRANSPORT=net PICKLE_NET_IFACE=lo PICKLE_NET_LANES=1 ROUNDS=2 timeout 150 \
  bash scripts/device/compare_trees.sh .deps/old-tree.tar pickle bench p2p --ranks 2 --memory cuda \
  --backend pickle --mode uni,bi -b 256M -e 256M -n 4 -w 1 > /dev/null 2>&1
echo "== lo, 1 lane, GPU memory (both ranks on GPU 0)"; grep -E "^== |^ +(uni|bi) " "$base/lo-l1-cuda/compare.txt"
for tree in new old; do
  dir=build-gpu; [ $tree = old ] && dir=/tmp/old-tree/build
  PICKLE_BUILD_DIR=$dir timeout 200 bash scripts/netns-p2p.sh "$base/netns-$tree" 1 2 4 -- --mode uni,bi \
    -b 1G -e 1G -n 4 -w 1 > "$base/netns-$tree.txt" 2>&1
  echo "== netns, $tree"; grep -E "lane|^ +(uni|bi) " "$base/netns-$tree.txt"
done
