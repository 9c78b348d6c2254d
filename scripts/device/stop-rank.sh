#!/usr/bin/env bash
# A rank that stops in the middle of a GPU run: `bash scripts/device/stop-rank.sh NAME AFTER SUITE ARGS...` starts
# `pickle bench SUITE ARGS... --json DIR/NAME.json` (two ranks: memcpy and ipc always, others with --ranks 2 in
# ARGS), stops (SIGSTOP: alive, holding its connections,
# answering nothing) the rank whose RANK is 1 AFTER seconds in, and waits for the run to end. It writes NAME.out,
# NAME.err, NAME.json and NAME.gpu (the processes left on the GPUs afterwards: there should be none) into DIR
# ($OUT/session, or session-out/session), and a line "NAME rc=R after T s (stopped at AFTER s)" to summary.txt.
# Then it kills the stopped rank if the run left it behind. Run it after `session.sh build` (it uses build-gpu).
# PICKLE_TIMEOUT is the caller's (10 makes the run end within a minute).
set -uo pipefail
cd "$(dirname "$0")/../.."
name=$1 after=$2 suite=$3
shift 3
dir=${OUT:-session-out}/session
mkdir -p "$dir"
export NCCL_NVLS_ENABLE=0
nccl_dir=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])" 2>/dev/null || true)
[ -n "$nccl_dir" ] && export LD_LIBRARY_PATH="$nccl_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
pickle=${PICKLE_BIN:-build-gpu/tools/pickle/pickle}  # PICKLE_BIN: another build (host memory, to try it)

# The pid of the process whose environment has RANK=1 and whose parent is `launcher` (pickle's own launch).
rank1_of() {
  local launcher=$1 pid
  for pid in $(pgrep -P "$launcher"); do
    if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx 'RANK=1'; then echo "$pid"; return; fi
  done
}

start=$(date +%s.%N)
"$pickle" bench "$suite" "$@" --json "$dir/$name.json" > "$dir/$name.out" 2> "$dir/$name.err" &
launcher=$!
sleep "$after"
victim=$(rank1_of "$launcher")
if [ -n "$victim" ]; then kill -STOP "$victim"; else echo "$name: no rank 1 found after $after s" >> "$dir/summary.txt"; fi
wait "$launcher"
rc=$?
elapsed=$(awk -v end="$(date +%s.%N)" -v begin="$start" 'BEGIN { print end - begin }')
printf '%s rc=%d after %.1f s (stopped at %s s)\n' "$name" "$rc" "$elapsed" "$after" | tee -a "$dir/summary.txt"
[ -n "$victim" ] && kill -KILL "$victim" 2>/dev/null
sleep 1
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$dir/$name.gpu" 2>&1
