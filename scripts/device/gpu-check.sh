#!/usr/bin/env bash
# Runs on the lent GPU machine (nvidia-h200-x2): builds for sm_90 with the machine's nvcc, runs every test (the gpu
# label included) and `pickle info`, and leaves logs in $OUT (or ./gpu-check-out). No registry there: GoogleTest comes
# from .deps/googletest (copy /usr/src/googletest there first and carry it).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-gpu-check-out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0   # never NVLink multicast on shared machines
nccl_dir=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])" 2>/dev/null || true)
[ -n "$nccl_dir" ] && export LD_LIBRARY_PATH="$nccl_dir/lib:${LD_LIBRARY_PATH:-}"
{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  nvidia-smi topo -m
  nvcc --version | tail -1
} > "$out/machine.txt" 2>&1
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DPICKLE_WERROR=ON \
  > "$out/build.log" 2>&1 && cmake --build build-gpu -j 16 >> "$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
build-gpu/tools/pickle/pickle info > "$out/info.txt" 2>&1
build-gpu/tools/pickle/pickle info --json > "$out/info.json" 2>&1
# CPU tests in parallel (skipped with PICKLE_GPU_ONLY=1), then the GPU tests one at a time, verbosely, since they
# print informational figures.
status=0
if [ "${PICKLE_GPU_ONLY:-0}" != 1 ]; then
  ctest --test-dir build-gpu -LE gpu -j 8 --output-on-failure > "$out/ctest.log" 2>&1 || status=1
fi
ctest --test-dir build-gpu -L gpu -j 1 -V --output-on-failure "$@" > "$out/ctest-gpu.log" 2>&1 || status=1
cat "$out/machine.txt" "$out/info.txt"
[ -f "$out/ctest.log" ] && tail -5 "$out/ctest.log"
grep -E "\[info\]|tests passed|Failed|\*\*\*|check failed|Test +#" "$out/ctest-gpu.log" | tail -40
exit $status
