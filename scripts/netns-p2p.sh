#!/usr/bin/env bash
# `pickle bench p2p` between two "hosts" on one machine: two network namespaces joined by a veth link (made here,
# removed on exit), rank 0 in one and rank 1 in the other, so that pickle's communicator sees two hosts and moves the
# data over its net transport (libfabric tcp over the veth), as between two machines. Needs root and iproute2.
#   bash scripts/netns-p2p.sh OUTDIR [LANES...] [-- extra bench p2p arguments]
# Environment: LOSS=1 drops 1% of TCP packets each way (netem where the kernel has it, else nftables), DELAY=1ms adds
# delay (netem only). One result file per lane count: OUTDIR/netns-lanes-L.json and .txt.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: netns-p2p.sh OUTDIR [LANES...] [-- bench p2p arguments]}
shift
lanes=()
while (($#)) && [ "$1" != "--" ]; do lanes+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
((${#lanes[@]})) || lanes=(1 2 4)
# `env -i` below searches its own PATH: name ip by its full path (packed tools first on PATH where the machine has none:
# scripts/device/carry_netns_tools.sh).
ip_command=$(command -v ip) || { echo "netns-p2p: iproute2 (ip) is not installed" >&2; exit 1; }
pickle=$(realpath "${PICKLE_BUILD_DIR:-build}/tools/pickle/pickle")
mkdir -p "$out"
tag=pk$$
ns=("$tag-a" "$tag-b") ifs=("${tag}a" "${tag}b") addr=(10.78.0.1 10.78.0.2)
cleanup() { ip netns del "${ns[0]}" 2>/dev/null || true; ip netns del "${ns[1]}" 2>/dev/null || true; }
trap cleanup EXIT
for s in 0 1; do ip netns add "${ns[$s]}"; done
ip link add "${ifs[0]}" type veth peer name "${ifs[1]}"
for s in 0 1; do
  ip link set "${ifs[$s]}" netns "${ns[$s]}"
  ip -n "${ns[$s]}" addr add "${addr[$s]}/24" dev "${ifs[$s]}"
  ip -n "${ns[$s]}" link set "${ifs[$s]}" up
  ip -n "${ns[$s]}" link set lo up
done
impairment=none
if [ -n "${LOSS:-}${DELAY:-}" ]; then
  netem=(netem ${DELAY:+delay "$DELAY"} ${LOSS:+loss "${LOSS}%"})
  if ip netns exec "${ns[0]}" tc qdisc add dev "${ifs[0]}" root "${netem[@]}" 2>/dev/null; then
    ip netns exec "${ns[1]}" tc qdisc add dev "${ifs[1]}" root "${netem[@]}"
    impairment="${netem[*]}"
  elif [ -n "${LOSS:-}" ]; then
    for s in 0 1; do
      ip netns exec "${ns[$s]}" nft add table inet pickle
      ip netns exec "${ns[$s]}" nft add chain inet pickle out '{ type filter hook output priority 0 ; }'
      ip netns exec "${ns[$s]}" nft add rule inet pickle out meta l4proto tcp numgen random mod 100 '<' "$LOSS" drop
    done
    impairment="nftables drops ${LOSS}% of TCP packets each way (no netem in this kernel${DELAY:+: no delay})"
  fi
fi
echo "netns-p2p: link ${ifs[0]} <-> ${ifs[1]}, impairment: $impairment"
for l in "${lanes[@]}"; do
  port=$((20000 + RANDOM % 20000))
  pids=()
  for r in 0 1; do
    env -i PATH="$PATH" LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" \
      RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=${addr[0]} MASTER_PORT=$port \
      PICKLE_NET_PROVIDER=tcp PICKLE_NET_IFACE=${ifs[$r]} PICKLE_NET_LANES=$l \
      "$ip_command" netns exec "${ns[$r]}" "$pickle" bench p2p --memory host --backend pickle "$@" \
      --json "$out/netns-lanes-$l.json" > "$out/netns-lanes-$l.rank$r.txt" 2>&1 &
    pids+=($!)
  done
  status=0
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  mv "$out/netns-lanes-$l.rank0.txt" "$out/netns-lanes-$l.txt"
  echo "netns-p2p: $l lane(s): exit $status"
  grep -E "^ +(uni|bi|lat) " "$out/netns-lanes-$l.txt" | tail -3 || true
  [ $status = 0 ] || { echo "netns-p2p: rank 1 said:"; tail -20 "$out/netns-lanes-$l.rank1.txt"; exit 1; }
  rm -f "$out/netns-lanes-$l.rank1.txt"
done
