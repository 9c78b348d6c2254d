#!/usr/bin/env bash
# One device-machine call: `bash scripts/device/session.sh STEP...` runs the named steps in order, each with its own
# time limit, and leaves everything in $OUT/session.tgz (the device tool brings back at most 8 files) plus a summary
# on stdout. Steps:
#   build            configure build-gpu (Release, sm_90) and build everything
#   build:T1,T2      build only those targets
#   gpu-tests[:RE]   ctest -L gpu (optionally -R RE), verbose
#   bench:NAME ARGS  `pickle bench NAME ARGS --json` (ARGS separated by '+', e.g. bench:p2p:-b+4K+-e+1G)
#   tests:RE         ctest -LE gpu -R RE: CPU tests on the device machine's cores (e.g. the namespace tests)
#   netns:ARGS       scripts/netns-p2p.sh into netns/, netns-2/, ... (ARGS separated by '+': lane counts, then -- and bench p2p's)
#   info             pickle info and --json
#   probe:NAME:ARGS  build-gpu/tools/probes/NAME ARGS (separated by '+'); output appended to NAME.txt
#   env:NAME=VALUE   export NAME=VALUE for the steps after it (env:NAME= unsets it)
#   limit:SECONDS    bench and probe steps after it are stopped after SECONDS (limit:0: no limit, the default), so
#                    that one slow step cannot take the rest of the call's time with it
# .deps/netns-tools, when carried (scripts/device/carry_netns_tools.sh), goes first on PATH: the device machine has
# no iproute2 or nftables of its own.
# NCCL comes from Python's nvidia.nccl; NVLink multicast stays off. libfabric's headers come from .deps/libfabric
# when carried (scripts/device/carry_libfabric.sh), so that the net transport and its GPU tests are built.
# Result files record the sources' commit (versions.pickle_revision); the device machine's copy of the tree does not
# carry its history, so call this with PICKLE_SOURCE_REVISION=<the commit of the tree you sent>, written out: a
# `git rev-parse` run there answered a stale commit (2026-11-29i, call 5).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-session-out}
work=$out/session
mkdir -p "$work"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
nccl_dir=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])" 2>/dev/null || true)
# No empty entry when LD_LIBRARY_PATH was unset: the loader reads one as the current folder.
[ -n "$nccl_dir" ] && export LD_LIBRARY_PATH="$nccl_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# cuDNN (the attention foreground) and the libraries it loads at run time (NVRTC, cuBLASLt) from Python's wheels.
wheel_libs=$(python3 -c "import glob,site;print(':'.join(d for p in site.getsitepackages() for d in glob.glob(p+'/nvidia/*/lib')))" 2>/dev/null || true)
[ -n "$wheel_libs" ] && export LD_LIBRARY_PATH="$wheel_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -d .deps/netns-tools/bin ] && export PATH="$PWD/.deps/netns-tools/bin:$PATH"
pickle=build-gpu/tools/pickle/pickle
status=0
step_limit=0
start=$(date +%s)
# Runs "$@" under the current step limit: SIGTERM at the limit, SIGKILL 15 s later (a bench's own children stop with it).
limited() { if [ "$step_limit" -gt 0 ]; then timeout -k 15 "$step_limit" "$@"; else "$@"; fi; }
note() { echo "[$(( $(date +%s) - start ))s] $*" | tee -a "$work/summary.txt"; }
for step in "$@"; do
  case "$step" in
    build|build:*)
      targets=()
      [ "$step" != build ] && IFS=, read -r -a targets <<< "${step#build:}"
      cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DPICKLE_WERROR=ON \
        > "$work/build.log" 2>&1
      args=()
      for t in "${targets[@]}"; do args+=(--target "$t"); done
      if cmake --build build-gpu -j 16 "${args[@]}" >> "$work/build.log" 2>&1; then
        note "build ok"
        # What the configure step found (CUDA, the net transport, cuDNN SDPA): a tree sent without .deps/libfabric
        # builds no net transport, and its net GPU tests skip; say so where the summary is read.
        grep '^-- pickle: ' "$work/build.log" | sed 's/^-- /  /' | tee -a "$work/summary.txt"
      else
        note "build FAILED"; tail -40 "$work/build.log"; status=1; break
      fi ;;
    gpu-tests*)
      filter=()
      [ "$step" != gpu-tests ] && filter=(-R "${step#gpu-tests:}")
      if ctest --test-dir build-gpu -L gpu -j 1 -V --output-on-failure "${filter[@]}" > "$work/ctest-gpu.log" 2>&1; then
        note "gpu tests ok: $(grep -c 'Passed' "$work/ctest-gpu.log") passed"
      else
        note "gpu tests FAILED"; grep -E "Failed|\*\*\*|check failed" "$work/ctest-gpu.log" | head -20; status=1
      fi ;;
    tests:*)
      log=ctest-cpu; n=1; while [ -e "$work/$log.log" ]; do n=$((n + 1)); log=ctest-cpu-$n; done
      if ctest --test-dir build-gpu -LE gpu -j 4 -V --output-on-failure -R "${step#tests:}" \
        > "$work/$log.log" 2>&1; then
        note "cpu tests ${step#tests:} ok: $(grep -c 'Passed' "$work/$log.log") passed ($log.log)"
      else
        note "cpu tests ${step#tests:} FAILED ($log.log)"; grep -E "Failed|\*\*\*|check failed" "$work/$log.log" | head -20
        status=1
      fi ;;
    netns:*)
      args=()
      IFS=+ read -r -a args <<< "${step#netns:}"
      dir=netns; n=1; while [ -e "$work/$dir" ]; do n=$((n + 1)); dir=netns-$n; done
      note "netns ${args[*]}: into $dir/ (${LOSS:+LOSS=$LOSS})"
      if PICKLE_BUILD_DIR=build-gpu limited bash scripts/netns-p2p.sh "$work/$dir" "${args[@]}" \
        >> "$work/netns.txt" 2>&1; then
        note "netns ${args[*]}: ok"
      else
        note "netns ${args[*]}: FAILED"; status=1
      fi
      tail -20 "$work/netns.txt" ;;
    info)
      $pickle info > "$work/info.txt" 2>&1; $pickle info --json > "$work/info.json" 2>&1; note "info"; cat "$work/info.txt" ;;
    bench:*)
      spec=${step#bench:}; name=${spec%%:*}; args=()
      [ "$spec" != "$name" ] && IFS=+ read -r -a args <<< "${spec#*:}"
      tag=$name; n=1; while [ -e "$work/$tag.json" ]; do n=$((n + 1)); tag=$name-$n; done
      if limited $pickle bench "$name" "${args[@]}" --json "$work/$tag.json" > "$work/$tag.txt" 2> "$work/$tag.err"; then
        note "bench $name ${args[*]}: ok"
      else
        code=$?
        [ "$code" = 124 ] && note "bench $name ${args[*]}: STOPPED at the ${step_limit} s limit"
        note "bench $name ${args[*]}: FAILED (exit $code)"; tail -15 "$work/$tag.err"; status=1
      fi
      tail -30 "$work/$tag.txt" ;;
    probe:*)
      spec=${step#probe:}; name=${spec%%:*}; args=()
      [ "$spec" != "$name" ] && IFS=+ read -r -a args <<< "${spec#*:}"
      if limited "build-gpu/tools/probes/$name" "${args[@]}" >> "$work/$name.txt" 2>&1; then
        note "probe $name ${args[*]}: ok"
      else
        note "probe $name ${args[*]}: FAILED"; status=1
      fi
      tail -20 "$work/$name.txt" ;;
    limit:*)
      step_limit=${step#limit:}; note "limit ${step_limit} s per step" ;;
    env:*)
      assignment=${step#env:}
      if [ -n "${assignment#*=}" ]; then export "$assignment"; else unset "${assignment%%=}"; fi
      note "env $assignment" ;;
    *) note "unknown step $step"; status=2 ;;
  esac
done
tar -czf "$out/session.tgz" -C "$out" session
cat "$work/summary.txt"
exit $status
