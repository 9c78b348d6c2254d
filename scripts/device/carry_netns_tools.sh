#!/usr/bin/env bash
# Packs this machine's ip, tc and nft, with the shared libraries they load, into .deps/netns-tools, so that the device
# machine (root, network namespaces and veth in its kernel, but no iproute2 or nftables installed) can run the
# namespace tests and scripts/netns-p2p.sh. Each .deps/netns-tools/bin/NAME is a wrapper that starts the packed binary
# through the machine's own dynamic loader with --library-path: no LD_LIBRARY_PATH is exported, so the programs that
# `ip netns exec` starts (pickle itself) load the machine's libraries, not these. scripts/device/session.sh puts the
# wrappers first on PATH when the folder is carried:
#   carry [".deps/googletest", ".deps/libfabric", ".deps/netns-tools"]
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=.deps/netns-tools
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/libexec" "$dest/lib"
for tool in ip tc nft; do
  path=$(command -v "$tool" || true)
  [ -n "$path" ] || { echo "carry_netns_tools: $tool is not installed here (apt-get install iproute2 nftables)" >&2; exit 1; }
  cp "$path" "$dest/libexec/$tool"
  # Every library but glibc's own and the loader: the device machine has them in a newer version (2.39 against
  # bookworm's 2.36), and parts of two glibc versions do not mix.
  { ldd "$path" | awk '$3 ~ /^\// {print $3}' |
      grep -v -E '/(libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|libanl|ld-linux[^/]*)\.so' || true; } |
    while read -r lib; do cp -L "$lib" "$dest/lib/"; done
  cat > "$dest/bin/$tool" <<WRAPPER
#!/bin/sh
here=\$(dirname "\$(readlink -f "\$0")")/..
exec /lib64/ld-linux-x86-64.so.2 --library-path "\$here/lib" "\$here/libexec/$tool" "\$@"
WRAPPER
  chmod +x "$dest/bin/$tool"
done
ip -V > "$dest/VERSION"; nft --version >> "$dest/VERSION"
echo "packed $(tr '\n' ' ' < "$dest/VERSION")into $dest ($(du -sh "$dest" | cut -f1))"
