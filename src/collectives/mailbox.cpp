#include "collectives/mailbox.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include <pickle/error.hpp>

#include "collectives/ll_allreduce.hpp"
#include "collectives/pipeline.hpp"
#include "collectives/reduce.hpp"
#include "comm/comm_impl.hpp"
#include "core/log.hpp"
#include "device/host/backoff.hpp"

namespace pickle::coll {
namespace {

/// The words of a label entry.
enum LabelWord { kLabelBytes = 0, kLabelKind = 1, kLabelSequence = 2, kLabelNumber = 3 };
constexpr int label_word(int entry, LabelWord word) {
  return comm::kMailboxLabelBase + entry * comm::kMailboxLabelWords + word;
}

int label_entry(std::uint64_t call) { return static_cast<int>(call % comm::kMailboxLabels); }

/// What the number word holds for mailbox call `call`: 1 to 2^32 - 1, never 0, which marks an entry being written.
std::uint32_t label_number(std::uint64_t call) { return static_cast<std::uint32_t>(call % 0xffffffffu) + 1; }

/// A peer's label of mailbox call `call` as it stands: empty when the entry does not hold that call's label (not
/// written yet, being written, or overwritten by a later call). Read as a sequence lock (send_labels).
std::optional<Mailbox::Label> read_label(const Communicator::Impl& c, int peer, std::uint64_t call) {
  const int entry = label_entry(call);
  const std::uint32_t number = label_number(call);
  if (c.signals->load(peer, label_word(entry, kLabelNumber)) != number) return std::nullopt;
  const Mailbox::Label label{c.signals->load(peer, label_word(entry, kLabelBytes)),
                             c.signals->load(peer, label_word(entry, kLabelKind)),
                             c.signals->load(peer, label_word(entry, kLabelSequence))};
  std::atomic_thread_fence(std::memory_order_acquire);
  if (c.signals->load(peer, label_word(entry, kLabelNumber)) != number) return std::nullopt;
  return label;
}

Mailbox::Label label_of(std::size_t bytes, DataType type, ReduceOp op, std::uint64_t sequence) {
  return {static_cast<std::uint32_t>(bytes), static_cast<std::uint32_t>(type) | static_cast<std::uint32_t>(op) << 8,
          static_cast<std::uint32_t>(sequence)};
}

std::string describe_label(const Mailbox::Label& label) {
  return cat(label.bytes, " bytes of ", datatype_name(static_cast<DataType>(label.kind & 0xff)), " ",
             reduce_op_name(static_cast<ReduceOp>(label.kind >> 8)), " (collective number ", label.sequence, ")");
}

/// Where `sender`'s cell of `call` is in `owner`'s cells of `cell_bytes` from `begin` (kMailboxDepth per peer, in
/// peer_slot order): the copy form's cells and the LL form's are laid out alike.
std::size_t per_peer_cell_offset(std::size_t begin, std::size_t cell_bytes, int sender, int owner, std::uint64_t call) {
  const std::size_t cell = static_cast<std::size_t>(call % kMailboxDepth);
  const std::size_t slot = static_cast<std::size_t>(peer_slot(sender, owner));
  return begin + (slot * kMailboxDepth + cell) * cell_bytes;
}

std::size_t cell_offset(const Mailbox& box, int sender, int owner, std::uint64_t call) {
  return per_peer_cell_offset(box.cells_offset, box.cell_bytes, sender, owner, call);
}

std::size_t ll_cell_offset(const Mailbox& box, int sender, int owner, std::uint64_t call) {
  return per_peer_cell_offset(box.ll_offset, box.ll_cell_bytes(), sender, owner, call);
}

/// Where this rank's own cell of `call` is in its mailbox memory (the loads form: the peers read it).
std::size_t outbox_offset(const Mailbox& box, std::uint64_t call) {
  return box.outbox_offset + static_cast<std::size_t>(call % kMailboxDepth) * box.outbox_cell_bytes();
}

/// The device words at the start of a gated mailbox (Mailbox::gated), 32 bits each: per sender rank the count of
/// cells it filled (written by that rank's stream, or its kernel in the loads form, beside the host word), the
/// gated reduction's two CTA counts (read its inputs; published its own cell), then per rank the count of calls it
/// has reduced (its kernel writes it beside the host word: the loads form's kernel waits on it before it publishes).
std::size_t filled_word_offset(int sender) { return 4 * static_cast<std::size_t>(sender); }
std::size_t ctas_done_offset(int world) { return 4 * static_cast<std::size_t>(world); }
std::size_t ctas_published_offset(int world) { return ctas_done_offset(world) + 4; }
std::size_t emptied_word_offset(int world, int reader) {
  return ctas_published_offset(world) + 4 + 4 * static_cast<std::size_t>(reader);
}
/// The device words' bytes, rounded up so that the cells stay 256-byte aligned.
std::size_t device_words_bytes(int world) { return (emptied_word_offset(world, world) + 255) / 256 * 256; }

/// `offset` in this rank's own mailbox memory (in_peer_mailbox's twin).
char* in_own_mailbox(const Mailbox& box, std::size_t offset) { return static_cast<char*>(box.memory->data()) + offset; }

std::uint32_t* own_device_word(const Mailbox& box, std::size_t offset) {
  return reinterpret_cast<std::uint32_t*>(in_own_mailbox(box, offset));
}

/// `bytes` at `offset` in `peer`'s mailbox memory, through this rank's mapping of it.
void* in_peer_mailbox(Call& call, const Mailbox& box, int peer, std::size_t offset, std::size_t bytes) {
  const WindowState::Entry& entry = box.window->ranks[static_cast<std::size_t>(peer)];
  const OpContext ctx{.rank = call.rank(), .peer = peer, .op = call.ctx().op, .bytes = bytes};
  return call.comm().ipc->remote_address(peer, entry.alloc_id, entry.offset + offset, bytes, ctx);
}

/// The counts a call raised (or a kernel will), indexed by rank, must be the call's: anything else is a bug here.
void expect_counts(const Call& call, const std::vector<std::uint32_t>& counts, std::uint32_t expected,
                   const char* which) {
  for (int peer = 0; peer < call.world(); ++peer) {
    if (peer != call.rank() && counts[static_cast<std::size_t>(peer)] != expected) {
      throw Error(ErrorCode::Internal,
                  cat(describe(call.ctx()), ": the mailbox's ", which, " counts are out of step with its calls"));
    }
  }
}

/// Zeroes a gated mailbox's device words and LL cells on a stream of its own, before the window is registered (no
/// peer writes them before), and waits for it. The LL cells too: memory that an earlier communicator's LL cells had
/// holds lines flagged 1, 2, ..., which this one's first calls would take for their own.
void zero_gated_memory(const Mailbox& box, int world, MemoryKind kind, int device) {
  std::vector<device::Stream::Flag> zeros;
  for (std::size_t offset = 0; offset < device_words_bytes(world); offset += 4) {
    zeros.push_back({own_device_word(box, offset), 0});
  }
  const std::unique_ptr<device::Stream> stream = device::make_stream(kind, device);
  stream->write_values(zeros);
  const std::size_t ll_bytes = box.memory->bytes() - box.ll_offset;
  const std::vector<char> zero_cells(ll_bytes, 0);
  stream->copy(in_own_mailbox(box, box.ll_offset), zero_cells.data(), ll_bytes);
  stream->synchronize();
}

/// Labels of this rank's calls kept for comparison at most: a peer's host that falls further behind than this loses
/// the comparison of the oldest (the stream waits still keep the calls in step).
constexpr std::size_t kOwnLabelsKept = 4096;

/// Compares every peer's labels that have come, up to call `upto`, with this rank's own. The sender never waits for
/// the comparison (that would be a host wait per call again), so an entry that a sender more than kMailboxLabels calls
/// ahead has overwritten is skipped. On a mismatch, tells every peer (their progress threads fail the pair, releasing
/// their streams) and throws.
void compare_labels(Call& call, Mailbox& box, std::uint64_t upto) {
  Communicator::Impl& c = call.comm();
  for (int peer = 0; peer < call.world(); ++peer) {
    if (peer == call.rank()) continue;
    std::uint64_t& checked = box.checked[static_cast<std::size_t>(peer)];
    while (checked <= upto) {
      const std::optional<Mailbox::Label> theirs = read_label(c, peer, checked);
      if (!theirs) {
        const std::uint32_t number = c.signals->load(peer, label_word(label_entry(checked), kLabelNumber));
        // A later call's label (overwritten): skipped. Not written yet, being written, or written just now: looked
        // at next time.
        if (number != 0 && number != label_number(checked) &&
            device::host::flag_reached(number, label_number(checked))) {
          ++checked;
          continue;
        }
        break;
      }
      const Mailbox::Label& ours = box.own[static_cast<std::size_t>(checked - box.own_first)];
      // The sequence number of the collective is compared too: the same allreduce at another place in the ranks'
      // sequences of collectives is out of step as well.
      if (theirs->bytes != ours.bytes || theirs->kind != ours.kind || theirs->sequence != ours.sequence) {
        announce_out_of_step(call, comm::kOutOfStep);
        throw InvalidArgument(cat(describe(call.ctx()), ": peer ", peer, "'s allreduce number ", checked,
                                  " through the mailboxes was ", describe_label(*theirs), ", this rank's ",
                                  describe_label(ours), ": the ranks' collectives are out of step"));
      }
      ++checked;
    }
  }
  std::uint64_t all_checked = *std::min_element(box.checked.begin(), box.checked.end());
  if (box.own.size() > kOwnLabelsKept) {
    all_checked = std::max(all_checked, box.own_first + (box.own.size() - kOwnLabelsKept));
    for (auto& peer_checked : box.checked) peer_checked = std::max(peer_checked, all_checked);
  }
  while (box.own_first < all_checked && !box.own.empty()) {
    box.own.pop_front();
    ++box.own_first;
  }
}

/// Writes this rank's label of call `number` into every peer's entry for it. As a sequence lock: the number goes to 0
/// first, so that a reader that sees the same number before and after reading the label has read one call's label.
/// The entry held the label of call number - kMailboxLabels: first waits (host, bounded) until the peer's stream has
/// reduced that call (its emptied count), so that its host enqueued it, having compared the labels up to it, or this
/// rank compared the peer's (of two ranks, one compares each call: allreduce_through_mailbox). Only a host that runs
/// kMailboxLabels calls ahead of a peer's stream waits here: its own stream stopped kMailboxDepth calls ahead.
void send_labels(Call& call, std::uint64_t number, const Mailbox::Label& label) {
  Communicator::Impl& c = call.comm();
  const int entry = label_entry(number);
  for (int peer = 0; peer < call.world(); ++peer) {
    if (peer == call.rank()) continue;
    if (number >= comm::kMailboxLabels) {
      const auto emptied = static_cast<std::uint32_t>(number - comm::kMailboxLabels + 1);
      const OpContext ctx{.rank = call.rank(), .peer = peer, .op = call.ctx().op, .bytes = label.bytes};
      const bool reduced = Communicator::Impl::poll_until(Deadline::after_seconds(call.timeout()), [&] {
        c.check_peer_alive(peer, ctx);
        return device::host::flag_reached(c.signals->load(peer, comm::kMailboxEmptiedSlot), emptied);
      });
      if (!reduced) {
        throw TimeoutError(cat(describe(ctx), ": peer ", peer, " has not reduced allreduce number ", emptied - 1,
                               " through the mailboxes within ", call.timeout(), " s, while this rank is at number ",
                               number, "; is it in the same collectives?"));
      }
    }
    c.signals->store_remote(peer, label_word(entry, kLabelNumber), 0);
    std::atomic_thread_fence(std::memory_order_release);
    c.signals->store_remote(peer, label_word(entry, kLabelBytes), label.bytes);
    c.signals->store_remote(peer, label_word(entry, kLabelKind), label.kind);
    c.signals->store_remote(peer, label_word(entry, kLabelSequence), label.sequence);
    c.signals->store_remote(peer, label_word(entry, kLabelNumber), label_number(number));
  }
}

/// Calls go in order whatever streams they are given: the counts they raise must reach the peers in call order, and
/// a cell's next copy must follow the previous call's wait for it. Every call marks its end (finish_call); a call on
/// another stream than the previous one waits for that. Marked at the end of each call rather than at the next
/// call's start on the old stream: that would also wait for whatever the application queued there since (a wait for
/// a peer's later signal, say, which could never come), and an old stream destroyed meanwhile could not be recorded.
void follow_previous_call(Mailbox& box, device::Stream& stream) {
  if (box.last_stream_serial != 0 && box.last_stream_serial != stream.serial()) box.last_end->order_after(stream);
}

/// Finishes `call` and marks its end for the next call: its error check, which every mailbox call has (the waits for
/// the peers' filled counts are checked).
void finish_call(Call& call, Mailbox& box) {
  box.last_end = call.finish();
  if (!box.last_end) {
    throw Error(ErrorCode::Internal, cat(describe(call.ctx()), ": a mailbox call finished without an error check"));
  }
  box.last_stream_serial = call.stream().serial();
}

/// `waits` (counts of signal `slot`) as the gated kernel's own, in `into`: each peer's GPU word, at
/// device_offset(peer) in this rank's mailbox memory, and its host word; noted for the watch and the end check.
template <class DeviceOffset>
void await_in_kernel(Call& call, GateWaits& into, const Mailbox& box, int slot,
                     const std::vector<comm::SignalTarget>& waits, DeviceOffset device_offset) {
  for (const comm::SignalTarget& wait : waits) {
    into.add(own_device_word(box, device_offset(wait.peer)),
             call.comm().signals->local_word_for_streams(wait.peer, slot), wait.expected);
  }
  call.awaited_by_kernel_for_all(slot, waits);
}

/// The emptied raises of a gated call, written by its kernel's last CTA once every CTA has read its inputs: each
/// peer's host word (its host and a failed pair's release read it) and its GPU word (its loads and LL forms' kernels
/// wait on it before they write into what this call read).
void raise_emptied_in_kernel(Call& call, const Mailbox& box, ReduceGate& gate, std::uint32_t count_after) {
  Communicator::Impl& c = call.comm();
  const int world = call.world();
  expect_counts(call, call.count_raised_by_kernel_for_all(comm::kMailboxEmptiedSlot), count_after, "emptied");
  for (int peer = 0; peer < world; ++peer) {
    if (peer == call.rank()) continue;
    gate.raise_word[gate.raises] = c.signals->remote_word_for_streams(peer, comm::kMailboxEmptiedSlot);
    gate.raise_value[gate.raises++] = count_after;
    gate.raise_word[gate.raises] = static_cast<std::uint32_t*>(
        in_peer_mailbox(call, box, peer, emptied_word_offset(world, call.rank()), sizeof(std::uint32_t)));
    gate.raise_value[gate.raises++] = count_after;
  }
  gate.ctas_done = own_device_word(box, ctas_done_offset(world));
}

/// The filled counts that a loads or LL call's kernel raises: each peer's GPU word, which its loads form's kernel
/// polls, and its host word, which its host (the watch) reads and a failed pair releases.
std::vector<std::uint32_t*> filled_words_raised_in_kernel(Call& call, const Mailbox& box, std::uint32_t count_after) {
  expect_counts(call, call.count_raised_by_kernel_for_all(comm::kMailboxFilledSlot), count_after, "filled");
  std::vector<std::uint32_t*> words;
  for (int peer = 0; peer < call.world(); ++peer) {
    if (peer == call.rank()) continue;
    words.push_back(static_cast<std::uint32_t*>(in_peer_mailbox(call, box, peer, filled_word_offset(call.rank()), 4)));
    words.push_back(call.comm().signals->remote_word_for_streams(peer, comm::kMailboxFilledSlot));
  }
  return words;
}

/// A gated call's wait for the filled counts, reduction and emptied raise: one kernel (ReduceGate), with `gate`'s
/// publication (the loads form) if the caller set one.
void enqueue_gated_call_end(Call& call, const Mailbox& box, ReduceGate gate,
                            const std::vector<comm::SignalTarget>& filled_waits, void* recv,
                            const std::vector<const void*>& inputs, std::size_t count, DataType type, ReduceOp op,
                            std::uint32_t count_after, int max_ctas = kMaxGatedCtas) {
  await_in_kernel(call, gate.waits, box, comm::kMailboxFilledSlot, filled_waits, filled_word_offset);
  raise_emptied_in_kernel(call, box, gate, count_after);
  enqueue_gated_reduce(call, type, op, recv, inputs, count, gate, max_ctas);
}

/// The gate of a loads or LL call, with its kernel's own wait until the peers have emptied what this call fills (a
/// stream wait before the kernel cost a call about 2 us whenever the host ran ahead of the stream: a TP step's
/// allreduces between its GEMMs).
ReduceGate gate_after_emptied(Call& call, const Mailbox& box, const std::vector<comm::SignalTarget>& emptied_waits) {
  ReduceGate gate;
  const int world = call.world();
  await_in_kernel(call, gate.pre_waits, box, comm::kMailboxEmptiedSlot, emptied_waits,
                  [world](int peer) { return emptied_word_offset(world, peer); });
  return gate;
}

/// The LL form of a gated call (Mailbox::ll_max_bytes, ll_allreduce.hpp): one kernel that waits (GPU words) until
/// the peers have emptied this rank's LL cells of kMailboxDepth calls ago, writes its input into them as flagged
/// lines, announces it (the filled words, for the host and the other forms), polls the peers' lines in its own
/// memory, reduces, and raises the emptied words.
void enqueue_ll_call(Call& call, Mailbox& box, const void* send, void* recv, std::size_t count, DataType type,
                     ReduceOp op, std::uint64_t number, const std::vector<comm::SignalTarget>& emptied_waits,
                     const std::vector<comm::SignalTarget>& filled_waits) {
  Communicator::Impl& c = call.comm();
  const int rank = call.rank(), world = call.world();
  const std::size_t bytes = count * datatype_size(type);
  const auto count_after = static_cast<std::uint32_t>(number + 1);
  ReduceGate gate = gate_after_emptied(call, box, emptied_waits);
  // A cell's first LL call, and one at least every kLlRefreshCalls of its calls, writes it in full: no line of it is
  // then old enough to carry the flag of a later call (ll_allreduce.hpp).
  const bool refresh = take_ll_refresh(box.ll_refreshed[number % kMailboxDepth], number);
  // The lines written, and so the CTAs (a cell's first call may be a few bytes with a whole cell to write).
  const std::size_t written = refresh ? box.ll_max_bytes : bytes;
  LlAllreduce ll{.type = type,
                 .op = op,
                 .nranks = world,
                 .rank = rank,
                 .send = send,
                 .recv = recv,
                 .count = count,
                 .flag = ll_flag(number),
                 .filled_count = count_after,
                 .ctas = ll_ctas_for(written, gated_cta_budget(call)),
                 .push_lines = ll_lines(written)};
  for (int peer = 0; peer < world; ++peer) {
    if (peer == rank) continue;
    c.check_peer_alive(peer, OpContext{.rank = rank, .peer = peer, .op = call.ctx().op, .bytes = bytes});
    const auto at = static_cast<std::size_t>(peer);
    ll.push_to[at] = in_peer_mailbox(call, box, peer, ll_cell_offset(box, rank, peer, number), box.ll_cell_bytes());
    ll.pull_from[at] = in_own_mailbox(box, ll_cell_offset(box, peer, rank, number));
    ll.release[at] = c.signals->local_word_for_streams(peer, comm::kMailboxFilledSlot);
  }
  // Written by the last CTA's watcher once every CTA's lines are out (the polls read the lines, not these words).
  for (std::uint32_t* word : filled_words_raised_in_kernel(call, box, count_after)) {
    gate.announce_word[gate.announces++] = word;
  }
  gate.announce_value = count_after;
  gate.ctas_published = own_device_word(box, ctas_published_offset(world));
  // The watch and a timeout's message name the filled counts, as for the other forms; a synchronize that times out
  // names the last peer's host word, which the kernel's watchers read once the call has gone on for 50 us.
  GateWaits named;
  await_in_kernel(call, named, box, comm::kMailboxFilledSlot, filled_waits, filled_word_offset);
  raise_emptied_in_kernel(call, box, gate, count_after);
#if PICKLE_HAVE_CUDA
  launch_ll_allreduce_cuda(ll, call.stream().native_handle(), call.device(), gate);
  const int last = named.count - 1;
  if (last >= 0) call.stream().note_wait_in_kernel(named.host[last], named.value[last], named.count);
#else
  throw UnavailableError(cat(describe(call.ctx()), ": the LL form in a build without CUDA"));
#endif
}

/// The loads form of a gated call (Mailbox::loads_max_bytes): one kernel that publishes the input, announces it in
/// the peers' filled words, waits for the peers' announcements, reduces, and raises the peers' emptied words. No copy
/// engine and no stream operation between the emptied wait and the next call: on two H200s the copy engine's hop and
/// the stream's flag operations were most of a small call's 21 us (docs/collectives.md, "Mailboxes"). Pulled (below
/// Mailbox::push_min_bytes) it copies the input into this rank's own cell and reads the peers' own cells where they
/// lie, over NVLink; pushed it stores the input into each peer's cell for this rank (the copy form's cells) and reads
/// its own cells in local memory: stores cross NVLink without waiting for a reply, where each load waits for one.
void enqueue_loads_call(Call& call, const Mailbox& box, const void* send, void* recv, std::size_t count, DataType type,
                        ReduceOp op, std::uint64_t number, const std::vector<comm::SignalTarget>& emptied_waits,
                        const std::vector<comm::SignalTarget>& filled_waits) {
  Communicator::Impl& c = call.comm();
  const int rank = call.rank(), world = call.world();
  const std::size_t bytes = count * datatype_size(type);
  const auto count_after = static_cast<std::uint32_t>(number + 1);
  const bool pushed = bytes >= box.push_min_bytes;
  ReduceGate gate = gate_after_emptied(call, box, emptied_waits);
  gate.publish_from = send;
  gate.publish_bytes = bytes;
  if (!pushed) gate.publish_to[gate.publishes++] = in_own_mailbox(box, outbox_offset(box, number));
  std::vector<const void*> inputs(static_cast<std::size_t>(world));
  inputs[static_cast<std::size_t>(rank)] = send;
  for (int step = 1; step < world; ++step) {  // rank + 1 first, as the copy form's copies
    const int peer = (rank + step) % world;
    c.check_peer_alive(peer, OpContext{.rank = rank, .peer = peer, .op = call.ctx().op, .bytes = bytes});
    if (pushed) {
      gate.publish_to[gate.publishes++] = in_peer_mailbox(call, box, peer, cell_offset(box, rank, peer, number), bytes);
      inputs[static_cast<std::size_t>(peer)] = in_own_mailbox(box, cell_offset(box, peer, rank, number));
    } else {
      inputs[static_cast<std::size_t>(peer)] = in_peer_mailbox(call, box, peer, outbox_offset(box, number), bytes);
    }
  }
  // The peers' kernels poll these words before they read what this rank published: the last CTA to publish writes
  // them.
  for (std::uint32_t* word : filled_words_raised_in_kernel(call, box, count_after)) {
    gate.announce_word[gate.announces++] = word;
  }
  gate.announce_value = count_after;
  gate.ctas_published = own_device_word(box, ctas_published_offset(world));
  // In place, the reduction overwrites the input that the kernel publishes. Where the input is 16-byte aligned, the
  // thread that publishes a vector (or a tail element, all in CTA 0) is the one that reduces it, after its own copy;
  // elsewhere the byte-wise copy and the element-wise reduction map to different threads, and across CTAs nothing
  // orders one's copy before the other's store: one CTA then (found by review).
  const bool in_place_unaligned = send == recv && reinterpret_cast<std::uintptr_t>(send) % 16 != 0;
  enqueue_gated_call_end(call, box, gate, filled_waits, recv, inputs, count, type, op, count_after,
                         in_place_unaligned ? 1 : kMaxGatedCtas);
}

void enqueue_call(Call& call, Mailbox& box, const void* send, void* recv, std::size_t count, DataType type,
                  ReduceOp op, std::uint64_t number) {
  Communicator::Impl& c = call.comm();
  const int rank = call.rank(), world = call.world();
  const std::size_t bytes = count * datatype_size(type);
  device::Stream& stream = call.stream();
  follow_previous_call(box, stream);
  const auto count_after = static_cast<std::uint32_t>(number + 1);
  // The flags of all peers go as one batched stream operation each (waits for emptied cells, filled counts, waits for
  // the peers' filled counts, emptied counts): on four H200s a call was about 14 us per peer with one operation per
  // flag, which the stream's operations, not the copies, took (docs/collectives.md, "Mailboxes").
  std::vector<comm::SignalTarget> emptied_waits;
  if (number >= kMailboxDepth) {
    // The peers must have reduced what this rank put into the cell kMailboxDepth calls ago. Usually the host can see
    // that they have, and the stream needs no wait.
    const auto emptied = static_cast<std::uint32_t>(number - kMailboxDepth + 1);
    for (int peer = 0; peer < world; ++peer) {
      if (peer != rank && !device::host::flag_reached(c.signals->load(peer, comm::kMailboxEmptiedSlot), emptied)) {
        emptied_waits.push_back({peer, emptied});
      }
    }
  }
  std::vector<comm::SignalTarget> filled_waits;
  for (int peer = 0; peer < world; ++peer) {
    if (peer != rank) filled_waits.push_back({peer, count_after});
  }
  // 0 bytes never get here (Communicator::allreduce).
  if (bytes <= box.ll_max_bytes || bytes <= box.loads_max_bytes) {
    if (bytes <= box.ll_max_bytes) {
      enqueue_ll_call(call, box, send, recv, count, type, op, number, emptied_waits, filled_waits);
    } else {
      enqueue_loads_call(call, box, send, recv, count, type, op, number, emptied_waits, filled_waits);
    }
    box.calls = number + 1;
    return;
  }
  call.await_on_stream_for_all(comm::kMailboxEmptiedSlot, emptied_waits);
  // The copies as one batch too: the driver may run them at once (one after another on the stream, each peer added
  // a copy's latency to every call).
  std::vector<device::Stream::Copy> copies;
  for (int step = 1; step < world; ++step) {
    const int peer = (rank + step) % world;
    c.check_peer_alive(peer, OpContext{.rank = rank, .peer = peer, .op = call.ctx().op, .bytes = bytes});
    copies.push_back({in_peer_mailbox(call, box, peer, cell_offset(box, rank, peer, number), bytes), send, bytes});
  }
  c.ipc->copies(stream, copies);
  // Gated: the peers' device filled words go in the same batched write as their host words.
  std::vector<device::Stream::Flag> filled_device;
  if (box.gated) {
    for (int peer = 0; peer < world; ++peer) {
      if (peer == rank) continue;
      void* word = in_peer_mailbox(call, box, peer, filled_word_offset(rank), sizeof(std::uint32_t));
      filled_device.push_back({static_cast<std::uint32_t*>(word), count_after});
    }
  }
  expect_counts(call, call.raise_on_stream_for_all(comm::kMailboxFilledSlot, filled_device), count_after, "filled");
  std::vector<const void*> inputs(static_cast<std::size_t>(world));
  for (int peer = 0; peer < world; ++peer) {
    inputs[static_cast<std::size_t>(peer)] =
        peer == rank ? send : in_own_mailbox(box, cell_offset(box, peer, rank, number));
  }
  if (box.gated) {
    enqueue_gated_call_end(call, box, ReduceGate{}, filled_waits, recv, inputs, count, type, op, count_after);
  } else {
    call.await_on_stream_for_all(comm::kMailboxFilledSlot, filled_waits);
    enqueue_reduce(call, type, op, recv, inputs, count);
    call.raise_on_stream_for_all(comm::kMailboxEmptiedSlot);
  }
  box.calls = number + 1;
}

}  // namespace

void announce_out_of_step(Call& call, std::uint32_t why) noexcept {
  Communicator::Impl& c = call.comm();
  for (int peer = 0; peer < call.world(); ++peer) {
    if (peer != call.rank() && c.same_host[static_cast<std::size_t>(peer)]) {
      c.signals->store_remote(peer, comm::kOutOfStepWord, why);
    }
  }
}

bool peer_in_mailbox_call_here(const Call& call, int peer) {
  const Mailbox* box = call.state().mailbox.get();
  if (box == nullptr || !box->usable) return false;
  const std::optional<Mailbox::Label> label = read_label(call.comm(), peer, box->calls);
  // In step, this rank's next mailbox call comes after the collective it is in: a peer's label of that call at this
  // place or an earlier one cannot be.
  return label && device::host::flag_reached(static_cast<std::uint32_t>(call.sequence()), label->sequence);
}

void decide_mailboxes(Communicator::Impl& comm, Stream& stream, const OpContext& ctx) {
  CollectiveState& state = state_of(comm);
  {
    std::lock_guard lock(state.call_mutex);
    if (state.mailbox && state.mailbox->decided) return;
  }
  run_collective(comm, stream, ctx, [](Call& call) { mailbox_ready(call); });
}

bool mailbox_ready(Call& call) {
  CollectiveState& state = call.state();
  if (!state.mailbox) state.mailbox = std::make_shared<Mailbox>();
  Mailbox& box = *state.mailbox;
  if (box.decided) return box.usable;
  // Every rank is in this step; one that fails it leaves the others' sequences out of step with its own.
  call.mark_out_of_step();
  box.decided = true;
  Communicator::Impl& c = call.comm();
  bool all_ipc = true;
  for (int peer = 0; peer < call.world(); ++peer) {
    if (peer == call.rank()) continue;
    all_ipc = all_ipc && c.same_host[static_cast<std::size_t>(peer)] && !c.uses_shm(peer) && !c.uses_net(peer);
  }
  // "2": every peer over ipc, none on this rank's GPU; "1": every peer over ipc; "0": not.
  const bool own_gpu = std::none_of(c.same_gpu.begin(), c.same_gpu.end(), [](bool shared) { return shared; });
  const std::vector<std::string> rows =
      c.gather_rows(cat(c.key_prefix, "mailbox/"), !all_ipc ? "0" : own_gpu ? "2" : "1");
  if (std::any_of(rows.begin(), rows.end(), [](const std::string& row) { return row == "0"; })) {
    PICKLE_LOG(Debug, "coll", describe(call.ctx()) << ": some rank reaches a peer other than over ipc: small "
                                                      "allreduces go two-sided one-shot instead of through mailboxes");
    return false;
  }
  box.cell_bytes = mailbox_cell_bytes(call.world());
  // Gated (the reduction waits for the peers itself) only where no two ranks share a GPU: a waiting kernel holds its
  // CTAs, and a peer on the same GPU would compete with it for the SMs (ranks as threads) or the time slice (ranks as
  // processes) that the peer needs to fill its cells. The same decision on every rank: the layout depends on it.
  box.gated = call.kind() == MemoryKind::Cuda && call.world() - 1 <= kMaxGatePeers &&
              std::all_of(rows.begin(), rows.end(), [](const std::string& row) { return row == "2"; });
  box.cells_offset = box.gated ? device_words_bytes(call.world()) : 0;
  box.outbox_offset = box.cells_offset + static_cast<std::size_t>(call.world() - 1) * kMailboxDepth * box.cell_bytes;
  // The loads form needs the gated kernel (it announces and waits itself). Its cells lie apart from the copy form's:
  // a peer's copy into this rank's cells waits for this rank's emptied count only, not for the other peers' reads of
  // this rank's own cell (three ranks or more, calls of both forms).
  const std::size_t loads_max = std::min(call.state().allreduce_loads_max, box.cell_bytes);
  box.loads_max_bytes = box.gated ? loads_max : 0;
  box.push_min_bytes = call.state().allreduce_push_min;
  box.ll_offset = box.outbox_offset + kMailboxDepth * box.outbox_cell_bytes();
  box.ll_max_bytes = box.gated ? std::min({call.state().allreduce_ll_max, box.cell_bytes, kLlMaxBytes}) : 0;
  const std::size_t bytes =
      box.ll_offset + static_cast<std::size_t>(call.world() - 1) * kMailboxDepth * box.ll_cell_bytes();
  box.memory = device::allocate(call.kind(), bytes, std::max(0, call.device()));
  if (box.gated) zero_gated_memory(box, call.world(), call.kind(), std::max(0, call.device()));
  box.window = c.register_window(box.memory->data(), bytes);
  box.checked.assign(static_cast<std::size_t>(call.world()), 0);
  box.checked[static_cast<std::size_t>(call.rank())] = UINT64_MAX;  // no labels from itself: never the least
  box.usable = true;
  return true;
}

void allreduce_through_mailbox(Call& call, const void* send, void* recv, std::size_t count, DataType type,
                               ReduceOp op) {
  Mailbox& box = *call.state().mailbox;
  const int world = call.world();
  const std::size_t bytes = count * datatype_size(type);
  if (bytes > box.cell_bytes) {
    throw Error(ErrorCode::Internal, cat(describe(call.ctx()), ": ", bytes, " bytes do not fit a mailbox cell of ",
                                         box.cell_bytes));
  }
  check_reduction_fits(call.ctx(), call.kind(), world);
  const std::uint64_t number = box.calls;
  const Mailbox::Label label = label_of(bytes, type, op, call.sequence());
  // From here on a failure leaves the ranks out of step (this rank's label is out, or its count of calls is behind).
  call.mark_out_of_step();
  box.own.push_back(label);
  // Labels out first, then the peers' compared, with a full fence between (as Dekker's): of two ranks that differ in
  // this very call, at least one sees the other's label, fails before its copies, and tells the other, whose stream
  // then waits for counts that never come until its progress thread fails the pair. Compared first, both could miss
  // each other's label and both return wrong data.
  send_labels(call, number, label);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  compare_labels(call, box, number);
  try {
    enqueue_call(call, box, send, recv, count, type, op, number);
    finish_call(call, box);
  } catch (...) {
    announce_out_of_step(call, comm::kGaveUp);  // the peers' streams would wait for its counts until PICKLE_TIMEOUT
    throw;
  }
}

}  // namespace pickle::coll
