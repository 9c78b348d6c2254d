#include "core/env.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>

#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "core/format.hpp"

namespace pickle::env {
namespace {

// Keep docs/env.md in step with this table (tests/unit/test_env_doc.cpp checks it).
constexpr std::array kTable = {
    Variable{"PICKLE_ALLGATHER_OWN_COPY", "local",
             "How an out-of-place allgather fills the rank's own slot of recv: local (the rank copies its block "
             "there itself; CUDA runs a copy inside one GPU as SM work, which a busy GPU holds back: 19-20 GB/s "
             "beside cuDNN attention, docs/results/2026-11-28k-h200.md, and no same-GPU copy path of CUDA 13.0 "
             "runs on a copy engine, docs/results/2026-11-29-h200.md) or relay (rank + 1, which gets the block "
             "anyway, copies it back from its recv with its copy engine after its own sends: 0 SMs, at the cost of "
             "one more block over each GPU's links, a step more than world - 1; a rank in place gets the same "
             "bytes back). A pair relays only over ipc; over shm or net, and in the two-level allgather, the rank "
             "copies locally. Every rank must set the same value (compared at creation). See docs/collectives.md, "
             "\"Allgather\"."},
    Variable{"PICKLE_ALLGATHER_SCHEDULE", "staggered",
             "How allgather sends a rank's block to its peers (every peer of a direct allgather, of each step of the "
             "two-level one): staggered (one peer after another on the caller's stream, rank + 1 first, so that at "
             "each step every rank receives from one peer only: the faster on NVSwitch, 1.13-1.15x NCCL on 4 H200s "
             "from 512 MiB) or parallel (each peer's copy on its own copy queue, all at once: for GPUs joined by "
             "direct links, one set per peer). With PICKLE_IPC_STREAMS above 1 the ipc copies leave for the "
             "transport's own streams, and both run like parallel. The ranks may differ. See docs/collectives.md, "
             "\"Allgather\"."},
    Variable{"PICKLE_ALLREDUCE_LL_MAX", "131072",
             "Allreduces through the mailboxes of up to this many bytes, on GPUs where no two ranks share one, take "
             "the LL form (after NCCL's LL protocol) before the loads form: one kernel (a CTA of 1024 threads per 16 "
             "KiB of the call, up to PICKLE_REDUCE_CTAS) writes the rank's input into every peer's cell as 16-byte "
             "lines of 8 data bytes beside two copies of the call's flag, and polls the peers' lines in its own "
             "memory, so that no fence, announcement or remote load comes between a peer's stores and the reduction; "
             "the data travels twice its size, and the cells take twice this per peer and cell. 0: none. At most "
             "262144. On two H200s (bf16, docs/results/2026-11-30h-h200x2.md) back-to-back calls of 32-128 KB "
             "(bench coll) took 9.8-11.2 us against the loads form's 11.5-17.8 (NCCL 9.4-9.5), and a Llama-2 7B "
             "decode step with 64 and 128 KB allreduces 2.86 and 2.97 ms against the loads form's 3.02 and 3.05 "
             "(NCCL 2.75 and 2.80); at 256 KB the loads form was as fast or faster, hence 131072. Under an MPS thread "
             "limit or green contexts with fewer free SMs than its CTAs, set 16384 (one CTA) or 0, as for the loads "
             "form. "
             "Every rank must set the same value (compared at creation). See docs/collectives.md, \"Mailboxes\"."},
    Variable{"PICKLE_ALLREDUCE_LOADS_MAX", "4194304",
             "Allreduces through the mailboxes (see PICKLE_ALLREDUCE_SCHEDULE) of up to this many bytes, on GPUs "
             "where no two ranks share one, take the loads form: one kernel of the reduction's CTAs "
             "(PICKLE_REDUCE_CTAS) copies the rank's input into its own cell, announces it, and reads the peers' "
             "cells where they lie, over NVLink (from PICKLE_ALLREDUCE_PUSH_MIN on it stores the input into the "
             "peers' cells instead), rather than copy engines writing every peer's cell. Small calls cost the copy "
             "engine's hop and the stream's flag operations more than their bytes (measured over NVLink only; under "
             "an MPS thread limit or green contexts with fewer free SMs than the kernel's CTAs, set 0). 0: copy "
             "engines only. At most a mailbox cell (4 MiB / (n - 1)): the default takes the whole cell (on two H200s "
             "the loads form was the faster or equal at every size up to it, docs/results/2026-11-30e-h200x2.md). "
             "Every rank must set the same value (compared at creation). See docs/collectives.md, \"Mailboxes\"."},
    Variable{"PICKLE_ALLREDUCE_PUSH_MIN", "65536",
             "Allreduces in the loads form (PICKLE_ALLREDUCE_LOADS_MAX) of at least this many bytes are pushed: the "
             "kernel stores the rank's input into each peer's cell for it, over NVLink, and reduces from its own "
             "cells in local memory, instead of copying the input into its own cell and reading the peers' cells "
             "where they lie (a store crosses NVLink without waiting for a reply; a load waits for one). On two "
             "H200s (bf16, bench coll, docs/results/2026-11-30g-h200x2.md) pushed against pulled: 12.7 against 14.0 "
             "us at 64 KB, 18.6 against 22.0 at 1 MB, 38.8 against 48.5 at 4 MB (NCCL 34.2); equal at 32 KB. 0: "
             "every call in the loads form is pushed. Every rank must set the same value (compared at creation). "
             "See docs/collectives.md, \"Mailboxes\"."},
    Variable{"PICKLE_ALLREDUCE_SCHEDULE", "auto",
             "How allreduce runs: fused (reduce_scatter, then allgather of the reduced blocks, in one pipeline: "
             "each reduced chunk goes on to the peers while later chunks still arrive), phased (a whole "
             "reduce_scatter, then a whole allgather in place, each on its own schedule; wherever every rank has a "
             "non-empty block), oneshot (every rank sends its whole input to every peer and reduces all of them: "
             "half the steps, n - 1 times the input sent, two-sided), mailbox (oneshot through cells that every rank "
             "keeps for each peer, mapped once: no message and no host wait per call; for messages up to 4 MiB / "
             "(n - 1) where every pair of ranks is on one host and uses ipc, else as auto) or auto (mailbox where it "
             "applies: on four H200s 34-49 against oneshot's 54-67 us per call up to 1 MiB, "
             "docs/results/2026-11-28i-h200x4.md; else oneshot where the ranks are on one host and each "
             "sends at most 4 MiB in it, (n - 1) x the message; else phased with three or more ranks on one host when "
             "a rank's block is at least 32 MiB; else fused: docs/results/2026-11-28h-h200x4.md and "
             "2026-11-28c-h200x4.md). Every rank "
             "must set the same value (the ranks' messages must match; a communicator whose ranks differ fails at "
             "creation), and any other value fails the communicator's first collective, whichever it is. See "
             "docs/collectives.md, \"Allreduce\"."},
    Variable{"PICKLE_BENCH_CHECK_THREADS", "",
             "Threads per rank that compute `pickle bench coll`'s (and `scenario`'s) inputs and expected results on "
             "the host (1 to 64); unset: the CPUs this process may run on shared by the ranks of its host, 1 to 16."},
    Variable{"PICKLE_BENCH_CORRUPT", "0",
             "Test hook of `pickle bench` (p2p, memcpy): 1 makes every sender flip one byte of each message (coll, "
             "scenario: one rank's input element of each checked call), so that the check must report wrong data "
             "and the run must fail."},
    Variable{"PICKLE_COLL_CHUNK", "",
             "Bytes per pipeline chunk of reduce_scatter, allreduce and alltoall (a multiple of 4096, at least 4096), "
             "to tune the pipeline against the host's cost per chunk; unset: on CUDA a quarter of a rank's block "
             "rounded down to 16, 32 or 64 MiB (the whole block when under 16 MiB), and about an eighth of it within "
             "64 KiB-1 MiB on host memory. Every rank must set the same value (the ranks cut the same chunks). The "
             "communicator's scratch ceiling (1 GiB on CUDA, 32 MiB on host memory, over 4 stages and all peers) "
             "still applies."},
    Variable{"PICKLE_COLL_HIERARCHY", "1",
             "Collectives of a communicator whose ranks span several hosts with the same number of ranks on each: 1 "
             "runs allreduce, broadcast, allgather and reduce_scatter in two levels (a step among a host's ranks over "
             "copy engines, a step with the ranks of the same local index on the other hosts over the network), so "
             "that each byte crosses the network once per host rather than once per remote rank; 0 exchanges with "
             "every rank directly (alltoall always does). Every rank must set the same value."},
    Variable{"PICKLE_HOST_STREAM_DEPTH", "1024",
             "Operations a stream of the host backend (host memory: machines without a GPU, --memory host) queues "
             "before the caller waits, as a CUDA stream's queue does; a host callback counts two (pickle's CUDA "
             "callback is two stream operations, and a CUDA stream took 510 of them). Code that queues stream work "
             "while holding what the stream needs to move on then hangs on CPU too, where the tests see it. 0: no "
             "bound. See docs/transports.md, \"The rule that follows\"."},
    Variable{"PICKLE_IPC_COMPLETION", "lanes",
             "Where an ipc send's completion write (the fenced write-value into the receiver's word) goes on CUDA: "
             "lanes: on a second stream (a completion lane), behind an event after the copy, when the send directly "
             "follows another on the same stream whose write has not run yet, so that the next copy need not wait "
             "for it (back-to-back sends: two H200s, 1 MiB, 6.0-6.3 against 8.6-8.8 us per message); a send after "
             "a wait (a ping-pong) writes on its own stream, the lowest latency. stream: always on the copy's stream "
             "(as before 2026-12-01). Host memory always writes on the copy's stream. See docs/p2p.md, \"Completion "
             "lanes\"."},
    Variable{"PICKLE_IPC_STREAMS", "1",
             "Copy streams per peer for the ipc transport's sends (1 to 8). 1: a send matched at call time runs on "
             "the caller's stream (fewest operations per message, the lowest latency). More: every ipc send takes its "
             "turn on these streams, after an event on the caller's stream, so that one message's completion write "
             "overlaps the next one's copy. Between two H200s 2 streams take back-to-back messages from 8.3 to 6.5 "
             "us (1 MiB: 1.62x NCCL instead of 1.33x) and the one-way latency from 9.2 to 14.8 us (the event "
             "hand-off); 4 add nothing over 2 (docs/results/2026-11-28c-h200x4.md). With two ranks on one H100 the "
             "gain did not show (docs/results/2026-11-24-h100x1.md)."},
    Variable{"PICKLE_LOG", "warn", "Log level: error, warn, info or debug."},
    Variable{"PICKLE_LOG_SUBSYS", "",
             "Comma-separated subsystems to log (core, bootstrap, launch, device, topology, ...); empty logs all."},
    Variable{"PICKLE_NET_CHUNK", "524288",
             "Bytes per RMA write of the net transport (4 KiB to 1 GiB): a message is cut into chunks of this size, "
             "striped over the lanes, each chunk carrying the message's remote CQ data."},
    Variable{"PICKLE_NET_IFACE", "",
             "Network interface (tcp: lo, eth0, ...) or fabric domain (verbs: mlx5_0, efa: rdmap0s31-rdm) of the net "
             "transport; unset: the provider's first choice. A name the provider does not offer is an error that "
             "lists the ones it does."},
    Variable{"PICKLE_NET_LANES", "4",
             "Endpoints the net transport opens per peer (1 to 64), like the QP count of an RDMA library: a message's "
             "chunks are spread over them."},
    Variable{"PICKLE_NET_PROVIDER", "tcp",
             "libfabric provider of the net transport, as fi_getinfo names it: tcp (layered under ofi_rxm where the "
             "provider needs it), verbs, efa, shm, or an explicit stack such as tcp;ofi_rxm."},
    Variable{"PICKLE_NET_STAGING", "0",
             "1: the communicator stages host memory through pinned buffers on the net transport as it always does GPU "
             "memory (copy engine to a pinned buffer, RMA write, copy into place): to test and measure that path on "
             "host memory."},
    Variable{"PICKLE_PIPELINE_SCHEDULE", "ordered",
             "How the pipelined collectives (reduce_scatter, allreduce, alltoall) send each chunk to its peers: "
             "ordered (one side stream per lane for all peers, rank + 1 first, and each copy into a peer waits, on "
             "the stream, for the copy into that peer just before it in the schedule to be done, so that the ranks "
             "stay in step: on 4 H200s 1.29-1.50x staggered at 2 GiB, reduce_scatter 338 against 226 GB/s busbw), "
             "staggered (the same without the waits; with two ranks the two are the same) or parallel (a side "
             "stream per peer and lane, every peer at once). With PICKLE_IPC_STREAMS above 1 staggered runs like "
             "parallel (ordered keeps its order). The same on every rank. See docs/collectives.md, \"Pipeline\"."},
    Variable{"PICKLE_PYTHON", "",
             "Python interpreter that `pickle report` runs (it must import matplotlib); unset: python3 on PATH, "
             "then /usr/bin/python3."},
    Variable{"PICKLE_REDUCE_CTAS", "8",
             "Most CTAs (thread blocks) a reduction of reduce_scatter or allreduce may occupy on CUDA: the data moves "
             "by copy engines, and the reduction should leave the SMs to the application (1 to 1024). The "
             "mailboxes' gated kernels (allreduces up to a mailbox cell on GPUs of their own) hold their CTAs while "
             "they wait for the peers and take at most 32, and no more than the GPU holds at once; where SMs can be "
             "spared, more are faster there: on two "
             "H200s a 4 MB bf16 allreduce took 40.4 us on 8 CTAs, 31.7 on 16 and 28.0 on 32 (NCCL 33.9), and a "
             "Llama-2 7B prefill step (4 MB allreduces) 7.06 ms on 16 against 7.63 on 8 (NCCL 7.38; "
             "docs/results/2026-11-30g-h200x2.md)."},
    Variable{"PICKLE_SHM_CHUNK", "4194304",
             "Bytes per chunk of the shm transport's staging ring (pinned shared host memory between two ranks): "
             "a message is copied device-to-host and host-to-device one chunk at a time, the chunks pipelined."},
    Variable{"PICKLE_SHM_SLOTS", "4",
             "Chunks the shm transport's staging ring holds per direction and pair (at least 2: double buffering)."},
    Variable{"PICKLE_SWITCH_PACKET_NUMEL", "64",
             "int32 elements per packet of `pickle bench scenario switchml`'s software switch (SwitchML's "
             "packet_numel; the seed's 64), 1 to 2048."},
    Variable{"PICKLE_SWITCH_SLOTS", "256",
             "Slots of `pickle bench scenario switchml`'s software switch: chunks each worker keeps in flight "
             "(SwitchML's max_outstanding_packets; the seed's 256), 1 to 65536."},
    Variable{"PICKLE_TEST_FAIL_NET_WRITE", "0",
             "Test hook of the net transport: n > 0 makes the n-th RMA write call (a send's, or a staged send's piece, "
             "or a put's) of each net transport in the process throw, as a source registration that the provider "
             "refuses would, so that tests can fail a write on tcp. 0: never."},
    Variable{"PICKLE_TEST_SWITCH_DROP", "0",
             "Test hook of `pickle bench scenario switchml`'s software switch: n > 0 drops every n-th datagram it "
             "receives and every n-th it sends, so that tests exercise the workers' resends and the switch's answers "
             "to them. 0: never."},
    Variable{"PICKLE_TIMEOUT", "60",
             "Seconds any wait on a peer may take (store connect, barrier, transfers) before it fails with an error "
             "naming the peer; also how long a TCP connection to a peer host that acknowledges nothing lives (at "
             "least 25 s). Values above 2e6 (23 days) mean 2e6."},
    Variable{"PICKLE_TOKEN", "",
             "Shared secret that store clients present to rank 0; unset: derived from the job (MASTER_ADDR, "
             "MASTER_PORT, WORLD_SIZE, and the Slurm/Open MPI job id when present)."},
    Variable{"PICKLE_TRANSPORT", "",
             "Forces the transport of every pair of ranks: ipc (copy engine into the peer's mapped memory), shm "
             "(staged through pinned shared host memory) or net; unset: ipc where peer access works, else shm. A "
             "choice that cannot work for some pair is an error, never a silent fallback."},
};

const Variable& lookup(std::string_view name) {
  for (const auto& var : kTable) {
    if (var.name == name) return var;
  }
  throw Error(ErrorCode::Internal, cat("environment variable ", name, " is read but missing from the env table"));
}

}  // namespace

std::span<const Variable> table() { return kTable; }

std::optional<std::string> get_if_set(std::string_view name) {
  const Variable& var = lookup(name);
  const char* value = std::getenv(std::string(var.name).c_str());
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::string get(std::string_view name) {
  auto value = get_if_set(name);
  return value ? *value : std::string(lookup(name).default_value);
}

long long get_int(std::string_view name) {
  std::string text = get(name);
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0') {
    throw InvalidArgument(cat(name, "='", text, "' is not an integer"));
  }
  return value;
}

double get_double(std::string_view name) {
  std::string text = get(name);
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || errno != 0 || *end != '\0') {
    throw InvalidArgument(cat(name, "='", text, "' is not a number"));
  }
  return value;
}

bool get_bool(std::string_view name) {
  std::string text = get(name);
  if (text == "1" || text == "true" || text == "yes" || text == "on") return true;
  if (text == "0" || text == "false" || text == "no" || text == "off" || text.empty()) return false;
  throw InvalidArgument(cat(name, "='", text, "' is not a boolean (use 1/0, true/false, yes/no, on/off)"));
}

std::optional<std::string> foreign(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::vector<std::string> path_folders() {
  std::vector<std::string> folders;
  const std::optional<std::string> path = foreign("PATH");
  if (!path) return folders;
  for (std::size_t start = 0; start <= path->size();) {
    const std::size_t end = std::min(path->find(':', start), path->size());
    if (end > start) folders.push_back(path->substr(start, end - start));
    start = end + 1;
  }
  return folders;
}

double timeout_seconds() {
  double seconds = get_double("PICKLE_TIMEOUT");
  if (!(seconds > 0)) throw InvalidArgument(cat("PICKLE_TIMEOUT=", seconds, " must be a positive number of seconds"));
  return std::min(seconds, kMaxWaitSeconds);
}

}  // namespace pickle::env
