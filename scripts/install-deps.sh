#!/usr/bin/env bash
# Installs what pickle needs to build and test on Debian (run as root). The CUDA toolkit is optional: without nvcc
# pickle builds its host backend only. NCCL is optional at run time (loaded with dlopen).
set -euo pipefail
packages=(cmake ninja-build g++ ccache libgtest-dev python3 python3-matplotlib libfabric-dev iproute2 nftables)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all packages present"
fi
# CUDA builds: the cuDNN frontend's headers for the attention foreground's cuDNN SDPA. Optional: without them the
# attention foreground runs pickle's own kernel, so a failed download only warns.
if command -v nvcc > /dev/null; then
  bash "$(dirname "$0")/fetch-cudnn-frontend.sh" ||
    echo "install-deps: warning: no cuDNN frontend headers; the attention foreground will use pickle's own kernel" >&2
fi
