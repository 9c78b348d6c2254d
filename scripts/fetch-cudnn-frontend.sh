#!/usr/bin/env bash
# Puts NVIDIA's cuDNN frontend headers (header-only, MIT) into .deps/cudnn-frontend/include, for the attention
# foreground's cuDNN SDPA (tools/pickle/bench/interference_attention_cudnn.cpp). They come from PyPI's
# nvidia-cudnn-frontend wheel, whose include/ folder holds them; its Python module is not used. Nothing is linked:
# pickle loads libcudnn.so.9 at run time. Skips the download when the pinned version is already there. A machine
# without a registry (the GPU machine) gets the folder carried from one that has it.
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.32.0
dest=.deps/cudnn-frontend
if [ -f "$dest/VERSION" ] && [ "$(cat "$dest/VERSION")" = "$version" ] && [ -f "$dest/include/cudnn_frontend.h" ]; then
  echo "fetch-cudnn-frontend: $version already in $dest"
  exit 0
fi
pip=()
if command -v pip3 > /dev/null; then pip=(pip3); elif python3 -m pip --version > /dev/null 2>&1; then pip=(python3 -m pip); fi
if ((${#pip[@]} == 0)); then
  echo "fetch-cudnn-frontend: no pip (apt-get install python3-pip)" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The wheel carries a compiled Python module, so pip must be told which interpreter and platform to pick it for;
# the headers inside are the same in every build of the wheel.
"${pip[@]}" download --quiet --no-deps --only-binary=:all: --dest "$work" \
  --python-version 3.12 --implementation cp --abi cp312 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  "nvidia-cudnn-frontend==$version"
wheel=$(find "$work" -name 'nvidia_cudnn_frontend-*.whl' | head -1)
[ -n "$wheel" ] || { echo "fetch-cudnn-frontend: pip downloaded no wheel" >&2; exit 1; }
python3 - "$wheel" "$work/x" << 'EOF'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    keep = [n for n in z.namelist() if n.startswith("include/") or "/licenses/" in n]
    z.extractall(out, keep)
EOF
[ -f "$work/x/include/cudnn_frontend.h" ] || { echo "fetch-cudnn-frontend: the wheel has no include/" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest"
mv "$work/x/include" "$dest/include"
cp "$work"/x/*.dist-info/licenses/* "$dest/" 2> /dev/null || true
echo "$version" > "$dest/VERSION"
echo "fetch-cudnn-frontend: cuDNN frontend $version headers in $dest ($(du -sh "$dest" | cut -f1))"
