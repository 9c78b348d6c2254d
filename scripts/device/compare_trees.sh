#!/usr/bin/env bash
# A/B of one program between two source trees, in one device call: the working tree ("new") and a tarball of another
# commit ("old", made here with `git archive REV -o old-tree.tar` and sent along as an untracked file; a branch's
# tip works as well as an earlier commit). Both are built (Release, sm_90, the program's target only; the old tree
# without its tests), then the program runs new, old, new, old, ... ROUNDS times (default 2), so that drift of the
# machine shows as a difference between the runs of one tree. Output: $OUT/compare.txt (and both build logs).
#   bash scripts/device/compare_trees.sh old-tree.tar PROBE [ARGS...]      a probe of tools/probes
#   bash scripts/device/compare_trees.sh old-tree.tar pickle [ARGS...]     the pickle command, e.g. `bench p2p ...`
# The old tree gets this tree's .deps/libfabric (carry it) so that both build the net transport.
# Example, the staged send ring of the branch exp/send-ring-v2 against main, one lane (docs/rdma.md):
#   git archive exp/send-ring-v2 -o old-tree.tar   (here), then with carry [".deps/googletest", ".deps/libfabric"]:
#   PICKLE_TRANSPORT=net PICKLE_NET_LANES=1 PICKLE_NET_IFACE=lo ROUNDS=3 bash scripts/device/compare_trees.sh \
#     old-tree.tar pickle bench p2p --backend pickle --mode uni -b 1G -e 1G -n 5 -w 1 --repeats 3
set -uo pipefail
cd "$(dirname "$0")/../.."
tarball=$1 program=$2
shift 2
case "$program" in
  pickle) target=pickle_cli binary=tools/pickle/pickle ;;
  *) target=$program binary=tools/probes/$program ;;
esac
out=${OUT:-compare-out}
export NCCL_NVLS_ENABLE=0 PICKLE_TIMEOUT=${PICKLE_TIMEOUT:-60}
# A warm machine keeps /tmp and build-gpu between calls: no binary that this build did not make, and a fresh old tree
# unless it came from this very tarball (a second comparison in one call, with other settings, rebuilds nothing).
rm -f "build-gpu/$binary"
mkdir -p "$out"
sum=$(sha256sum "$tarball" | cut -d' ' -f1)
if [ "$(cat /tmp/old-tree/.tarball-sum 2>/dev/null)" != "$sum" ]; then
  rm -rf /tmp/old-tree
  mkdir -p /tmp/old-tree
  tar -xf "$tarball" -C /tmp/old-tree || exit 1
  [ -d .deps/libfabric ] && mkdir -p /tmp/old-tree/.deps && cp -r .deps/libfabric /tmp/old-tree/.deps/
  echo "$sum" > /tmp/old-tree/.tarball-sum
fi
# Builds tree $1 into $2 (log $3), with further cmake options after.
build() {
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "${@:4}" > "$3" 2>&1 &&
    cmake --build "$2" -j 8 --target "$target" >> "$3" 2>&1
}
rm -f "/tmp/old-tree/build/$binary"
build . build-gpu "$out/new-build.log" &
new_build=$!
build /tmp/old-tree /tmp/old-tree/build "$out/old-build.log" -DPICKLE_BUILD_TESTS=OFF &
old_build=$!
built=0
wait "$new_build" || { echo "the new tree's build failed"; tail -20 "$out/new-build.log"; built=1; }
wait "$old_build" || { echo "the old tree's build failed"; tail -20 "$out/old-build.log"; built=1; }
[ "$built" -eq 0 ] || exit 1
for round in $(seq 1 "${ROUNDS:-2}"); do
  echo "== new (round $round)"; "build-gpu/$binary" "$@"
  echo "== old (round $round)"; "/tmp/old-tree/build/$binary" "$@"
done 2>&1 | tee "$out/compare.txt"
