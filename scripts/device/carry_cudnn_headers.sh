#!/usr/bin/env bash
# Packs this machine's cuDNN 9 headers (cudnn*.h from the CUDA toolkit's include folder) into .deps/cudnn/include, for
# a device machine whose cuDNN came as a runtime only (PyTorch's wheel may ship no headers): the attention
# foreground's cuDNN SDPA is built when tools/pickle/bench/cudnn_frontend.cmake finds cudnn.h, and it looks there.
# The frontend's own headers come from scripts/fetch-cudnn-frontend.sh. Carry both with the device call:
#   carry [".deps/googletest", ".deps/cudnn", ".deps/cudnn-frontend"]
set -euo pipefail
cd "$(dirname "$0")/../.."
includedir=${1:-/usr/local/cuda/include}
[ -f "$includedir/cudnn_version.h" ] || { echo "carry_cudnn_headers: no cudnn_version.h in $includedir" >&2; exit 1; }
version=$(awk '/#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) / {printf "%s%s", sep, $3; sep="."}' "$includedir/cudnn_version.h")
rm -rf .deps/cudnn
mkdir -p .deps/cudnn/include
cp "$includedir"/cudnn*.h .deps/cudnn/include/
echo "$version" > .deps/cudnn/VERSION
echo "packed cuDNN $version headers into .deps/cudnn ($(du -sh .deps/cudnn | cut -f1))"
