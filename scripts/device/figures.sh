#!/usr/bin/env bash
# The figures the open issues still need from the two-GPU machine (nvidia-h200-x2), one group per device call (each
# fits one 10-minute call, the build included): `bash scripts/device/figures.sh GROUP`, with carry
#   [".deps/googletest", ".deps/libfabric", ".deps/cudnn", ".deps/cudnn-frontend"]
# (made here by: cp -r /usr/src/googletest .deps/; bash scripts/device/carry_libfabric.sh;
#  bash scripts/fetch-cudnn-frontend.sh; bash scripts/device/carry_cudnn_headers.sh).
# Everything lands in $OUT/session.tgz (scripts/device/session.sh). Groups:
#   link          issue 3 and 6: p2p pickle/NCCL/raw CE 4K-1G (uni, bi, lat); pickle with 2 and 4 copy streams per peer
#                 (PICKLE_IPC_STREAMS: slower on one H100, docs/results/2026-11-24-h100x1.md; to confirm on two GPUs);
#                 comm_latency_probe between the two GPUs (late vs posted receives); allreduce and allgather vs NCCL;
#                 pickle's allreduce with 4 and 8 MiB pipeline chunks (PICKLE_COLL_CHUNK; by default 16 MiB, the best
#                 of the three on one H100), to confirm the default between two GPUs
#   coll          issue 6: coll_time_probe between the two GPUs (stream time against host enqueue time per call: which
#                 of the two bounds a size), then allgather (1M-1G) and allreduce (16M-1G, every power of two: each
#                 chunk size of the rule, 16/32/64 MiB) vs NCCL (both modes)
#   transports    issue 5: seed 000's NCCL P2P/SHM vs pickle ipc/shm table (3 runs, 64M-1G; about 5 minutes)
#   lanes         issue 8: seed 001's network comparison (NCCL Socket vs pickle net, pickle's 512 KiB chunks since
#                 2026-11-28): bandwidth vs lanes 1-4 at 64 MiB, 256 MiB and 1 GiB (the figure's ">= 64 MiB"; 3 runs
#                 each, about 4 minutes), then bandwidth vs size at 4 lanes, 4K-4G (about 1 minute)
#   netraw        issue 8's one-lane gap: one plain TCP stream against one libfabric endpoint pair over loopback
#                 (tools/probes/net_stream_probe: 1, 2 and 4 at once, 1 MiB writes, 4 in flight; then one pair with
#                 its source and target in memory (1G), and with a CPU-cached source into memory (4M/1G): 3.7-4.7
#                 against 5.5-5.9 GB/s on 2026-11-28, docs/results/2026-11-28d-h200x2.md), then pickle and NCCL at 1
#                 and 2 lanes/sockets, 1 GiB (bench transports --lanes)
#   net16g        issue 8: the 16 GiB point of the 4-lane size sweep (about 1.5 s per message over loopback)
#   netinterference  issue 8, seed 001 item 4: GEMM under each library's network p2p background at 1, 2 and 4
#                 lanes, 1 GiB messages (bench interference --lanes: 6 children; its own call, to stay within 10 min)
#   tests         every GPU test on the two GPUs
#   interference  issue 4: GEMM and cuDNN attention under pickle's, NCCL's and the raw copy engine's p2p background
#                 (the anchors' "CE copies" column, measured in the same run), 16M-4G
#   allgather     issue 6: attention under an allgather background, pickle vs NCCL
#   four          issue 7 on nvidia-h200-x4 (4 GPUs): allreduce 32M-8G on 4 ranks with NCCL beside (the default: phased
#                 from 32 MiB blocks), then fused (PICKLE_ALLREDUCE_SCHEDULE=fused) to compare, 20 iterations x 3
#                 repeats (5 x 2 left the 32-128 MiB rows noisy on 2026-11-28c); allgather and alltoall 32M-8G with
#                 NCCL beside, seed 000's P2P-vs-SHM allreduce on 4 ranks (to 512 MiB: NCCL SHM alone takes 51 s
#                 to 2 GiB), attention under a 4-rank allgather (1 GiB per GPU), the all-pairs matrix; two calls'
#                 worth: run it with a 600 s limit and rerun what the limits stopped
#   patterns      issue 7 on nvidia-h200-x4: the collectives' copy patterns with raw copies and nothing of pickle
#                 (tools/probes/copy_pattern_probe: alltoall staggered/parallel, allgather staggered, 64 MiB chunks and
#                 whole 512 MiB blocks, with and without a completion write per copy): is the ~225 GB/s of pickle's
#                 chunked patterns on 4 GPUs the switch's or pickle's?
#   rs4           issue 7 on nvidia-h200-x4: why the 4-rank reduce_scatter stays at ~220 GB/s busbw with 64 MiB chunks
#                 (the 1 GiB scratch ceiling since 2026-11-28) where the alltoall's same copies reach ~300: the
#                 reduction kernel's CTAs (8, 16, 32), the parallel schedule, 32 MiB chunks (a deeper pipeline), and
#                 the same sizes as an alltoall, in one call (pickle only, 512M-2G, about 20 s per line)
#   pipeline      issue 7 on nvidia-h200-x4: the ordered schedule's GPU test, then
#                 PICKLE_PIPELINE_SCHEDULE=ordered against staggered (reduce_scatter,
#                 allreduce and alltoall on 4 ranks, 512 MiB and 2 GiB, twice each, alternating: the model of
#                 tools/models/pipeline_model.py predicts ~360 against ~220 GB/s busbw when the ranks are out of step);
#                 then the reduce_scatter's pipeline rebuilt from raw CUDA, every dependency an
#                 event and no host in the loop (tools/probes/pipeline_probe): with the reduction (8 and 32 CTAs) and
#                 with a copy as consumer, with and without the call start's wait for the caller's stream and the
#                 sends' wait for the sender's own reduction three chunks back (pickle's host does that), and with
#                 the ordered schedule's tokens as events; on four
#                 GPUs, then on two (CUDA_VISIBLE_DEVICES=0,1) beside pickle's two-rank reduce_scatter, at 8 and 16
#                 CTAs: at 8 it should be reduction-bound (8 x 0.22 ms per 1 GiB call)
#   small4        issue 7 on nvidia-h200-x4: the four-rank collectives below 512 MiB, where NCCL stays ahead (0.60-0.85x
#                 at 32-128 MiB on 2026-11-28g): pickle and NCCL 8M-512M, then pickle alone with 2, 4 and 8 MiB
#                 pipeline chunks (PICKLE_COLL_CHUNK) and with the staggered schedule (no tokens: their cost per
#                 copy shows at small chunks), about 30 s per line (2026-11-28h: smaller chunks lost everywhere;
#                 the gap is a cost per call: docs/results/2026-11-28h-h200x4.md)
#   allgather8    seed 001 item 6, on the eight-GPU machine (nvidia-h200-x8): attention (batch 8, heads 64, seq 4096,
#                 head dim 128) on every GPU under an 8-rank allgather of 1 GiB per GPU (8G gathered), pickle and NCCL,
#                 100 iterations after 20 warm-up; relative = the mean over the 8 ranks (the seed: 0.858 for both)
# session.sh exports NCCL_NVLS_ENABLE=0 for every group (NVLink multicast stays off).
set -euo pipefail
cd "$(dirname "$0")/../.."
group=${1:?usage: figures.sh link|coll|transports|lanes|netraw|netinterference|tests|interference|allgather|net16g|four|patterns|rs4|pipeline|small4|allgather8}
session=(bash scripts/device/session.sh build info)
case "$group" in
  link)
    exec "${session[@]}" \
      bench:p2p:-b+4K+-e+1G+-f+4 \
      env:PICKLE_IPC_STREAMS=2 bench:p2p:--backend+pickle+--mode+uni,bi+-b+64K+-e+256M+-f+4 \
      env:PICKLE_IPC_STREAMS=4 bench:p2p:--backend+pickle+--mode+uni,bi+-b+64K+-e+256M+-f+4 \
      env:PICKLE_IPC_STREAMS= \
      probe:comm_latency_probe:200+7 \
      bench:coll:-c+allreduce+-b+1M+-e+1G+-f+4 bench:coll:-c+allgather+-b+1M+-e+1G+-f+4 \
      env:PICKLE_COLL_CHUNK=4194304 bench:coll:-c+allreduce+--backend+pickle+-b+16M+-e+1G+-f+4 \
      env:PICKLE_COLL_CHUNK=8388608 bench:coll:-c+allreduce+--backend+pickle+-b+16M+-e+1G+-f+4 \
      env:PICKLE_COLL_CHUNK= ;;
  coll)
    exec "${session[@]}" \
      probe:coll_time_probe:20+5+allgather,allreduce+1M+16M+64M+256M+1G \
      bench:coll:-c+allgather+-b+1M+-e+1G+-f+4 bench:coll:-c+allreduce+-b+16M+-e+1G+-f+2 ;;
  transports)
    exec "${session[@]}" bench:transports:--runs+3+-b+64M+-e+1G ;;
  lanes)
    exec "${session[@]}" \
      limit:330 bench:transports:--lanes+1,2,3,4+--ops+p2p+-b+64M+-e+1G+-f+4+-n+5+-w+1+--repeats+2+--runs+3 \
      limit:150 bench:transports:--lanes+4+--ops+p2p+-b+4K+-e+4G+-f+4+-n+5+-w+1+--repeats+2+--runs+1 ;;
  netraw)
    exec "${session[@]}" probe:net_stream_probe:3+1M+4+1,2,4 \
      probe:net_stream_probe:3+1M+4+1+tcp+lo+1G probe:net_stream_probe:3+1M+4+1+tcp+lo+4M/1G \
      limit:200 bench:transports:--lanes+1,2+--ops+p2p+-b+1G+-e+1G+-n+5+-w+1+--repeats+2+--runs+2 ;;
  net16g)
    exec "${session[@]}" limit:300 bench:transports:--lanes+4+--ops+p2p+-b+16G+-e+16G+-n+3+-w+1+--repeats+1+--runs+1 ;;
  netinterference)
    exec "${session[@]}" bench:interference:--lanes+1,2,4+--foreground+gemm+-b+1G+-e+1G ;;
  tests)
    exec "${session[@]}" gpu-tests ;;
  interference)
    exec "${session[@]}" \
      bench:interference:--foreground+gemm,attention+--background+p2p+--backend+pickle,nccl,ce+-b+16M+-e+4G+-f+4 ;;
  allgather)
    exec "${session[@]}" bench:interference:--foreground+attention+--background+allgather+-b+16M+-e+1G+-f+4 ;;
  four)
    exec "${session[@]}" limit:150 bench:coll:-c+allreduce+--ranks+4+-b+32M+-e+8G+-f+4+-n+20+-w+3+--repeats+3 \
      env:PICKLE_ALLREDUCE_SCHEDULE=fused \
      limit:90 bench:coll:-c+allreduce+--ranks+4+--backend+pickle+-b+32M+-e+8G+-f+4+-n+20+-w+3+--repeats+3 \
      env:PICKLE_ALLREDUCE_SCHEDULE= \
      limit:150 bench:coll:-c+allgather,alltoall+--ranks+4+-b+32M+-e+8G+-f+4+-n+10+-w+2+--repeats+3 \
      limit:150 bench:transports:--ranks+4+--ops+allreduce+--runs+1+-b+32M+-e+512M+-f+4 \
      limit:90 bench:interference:--ranks+4+--background+allgather+--foreground+attention+-b+4G+-e+4G+-n+100+-w+20 \
      limit:150 bench:matrix:--backend+pickle,nccl,ce+-b+1G+-n+10+-w+3+--repeats+3 ;;
  patterns)
    exec "${session[@]}" probe:copy_pattern_probe:512M+64M,16M,512M+5 ;;
  rs4)
    sizes=--ranks+4+--backend+pickle+-b+512M+-e+2G+-f+4+-n+10+-w+2+--repeats+3
    rs=bench:coll:-c+reduce_scatter+$sizes
    exec "${session[@]}" limit:60 bench:coll:-c+alltoall,reduce_scatter+$sizes \
      env:PICKLE_REDUCE_CTAS=16 limit:40 "$rs" env:PICKLE_REDUCE_CTAS=32 limit:40 "$rs" env:PICKLE_REDUCE_CTAS= \
      env:PICKLE_PIPELINE_SCHEDULE=parallel limit:40 "$rs" env:PICKLE_PIPELINE_SCHEDULE= \
      env:PICKLE_COLL_CHUNK=33554432 limit:40 "$rs" ;;
  pipeline)
    # PICKLE_PIPELINE_SCHEDULE staggered against ordered, alternating (drift shows as a difference between runs of one)
    four=bench:coll:-c+reduce_scatter,allreduce,alltoall+--ranks+4+--backend+pickle+-b+512M+-e+2G+-f+4+-n+10+-w+2
    rs2=bench:coll:-c+reduce_scatter+--ranks+2+--backend+pickle+-b+1G+-e+1G+-n+10+-w+2+--repeats+3
    ab=(env:PICKLE_PIPELINE_SCHEDULE=staggered "$four" env:PICKLE_PIPELINE_SCHEDULE=ordered "$four")
    runs=(probe:pipeline_probe:512M+64M+reduce+8+1+0 probe:pipeline_probe:512M+64M+reduce+8+1+3
          probe:pipeline_probe:512M+64M+reduce+8+1+3+1 probe:pipeline_probe:512M+64M+reduce+32+1+3
          probe:pipeline_probe:512M+64M+copy+8+1+3 probe:pipeline_probe:512M+64M+copy+8+1+0
          probe:pipeline_probe:512M+64M+reduce+8+0+0)
    exec bash scripts/device/session.sh build gpu-tests:CollCuda.TheOrdered limit:60 "${ab[@]}" "${ab[@]}" \
      env:PICKLE_PIPELINE_SCHEDULE= "${runs[@]}" \
      env:CUDA_VISIBLE_DEVICES=0,1 probe:pipeline_probe:512M+64M+reduce+8+1+3 \
      probe:pipeline_probe:512M+64M+copy+8+1+3 "$rs2" env:PICKLE_REDUCE_CTAS=16 "$rs2" ;;
  small4)
    colls=bench:coll:-c+reduce_scatter,allreduce,alltoall+--ranks+4+-b+8M+-e+512M+-f+4+-n+20+-w+5
    mine=$colls+--backend+pickle
    exec bash scripts/device/session.sh build:pickle_cli limit:90 "$colls" limit:45 \
      env:PICKLE_COLL_CHUNK=2097152 "$mine" env:PICKLE_COLL_CHUNK=4194304 "$mine" \
      env:PICKLE_COLL_CHUNK=8388608 "$mine" env:PICKLE_COLL_CHUNK= \
      env:PICKLE_PIPELINE_SCHEDULE=staggered "$mine" ;;
  allgather8)
    exec "${session[@]}" \
      bench:interference:--ranks+8+--background+allgather+--backend+pickle,nccl+--foreground+attention+-b+8G+-e+8G+-n+100+-w+20 ;;
  *) echo "figures.sh: unknown group $group (link, coll, transports, lanes, netraw, netinterference, tests, interference, allgather, net16g, four, patterns, rs4, pipeline, small4, allgather8)" >&2; exit 2 ;;
esac
