#!/usr/bin/env bash
# Packs this machine's libfabric headers into .deps/libfabric/include, so that a build on the device machine (which
# has libfabric's runtime, libfabric.so.1, but not its headers) includes the net transport: src/transport/net's
# CMakeLists.txt looks there when pkg-config finds no libfabric. Carry it with the device call:
#   carry [".deps/googletest", ".deps/libfabric"]
set -euo pipefail
cd "$(dirname "$0")/../.."
version=$(pkg-config --modversion libfabric)
includedir=$(pkg-config --variable=includedir libfabric)
rm -rf .deps/libfabric
mkdir -p .deps/libfabric/include/rdma
cp "$includedir"/rdma/fabric.h "$includedir"/rdma/fi_*.h .deps/libfabric/include/rdma/
echo "$version" > .deps/libfabric/VERSION
echo "packed libfabric $version headers into .deps/libfabric ($(du -sh .deps/libfabric | cut -f1))"
