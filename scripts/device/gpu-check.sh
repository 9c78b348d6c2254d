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
ctest --test-dir build-gpu -j 4 --output-on-failure "$@" > "$out/ctest.log" 2>&1
status=$?
ctest --test-dir build-gpu -L gpu -j 1 -V > "$out/ctest-gpu-verbose.log" 2>&1
cat "$out/machine.txt" "$out/info.txt"
tail -30 "$out/ctest.log"
exit $status
