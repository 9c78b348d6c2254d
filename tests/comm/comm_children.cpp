#include "comm_children.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <cstdio>
#include <cstring>
#include <random>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "core/env.hpp"
#include "core/format.hpp"
#include "device/memory.hpp"
#include "device/stream.hpp"
#include "subprocess.hpp"

namespace pickle::test {

Communicator make_comm(const std::string& memory) {
  Communicator::Options options;
  options.memory = memory == "cuda" ? MemoryKind::Cuda : MemoryKind::Host;
  return Communicator(options);
}

namespace {

std::uint64_t pattern_word(std::size_t word, std::uint64_t seed) {
  std::uint64_t x = word * 0x9E3779B97F4A7C15ull + (seed + 1) * 0xD1B54A32D192ED03ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 27);
}

/// The pattern as bytes (computed a word at a time: GPU tests fill gigabytes).
std::vector<std::uint8_t> pattern(std::size_t bytes, std::uint64_t seed) {
  std::vector<std::uint8_t> host(bytes);
  for (std::size_t i = 0; i < bytes; i += 8) {
    std::uint64_t x = pattern_word(i / 8, seed);
    for (std::size_t b = 0; b < 8 && i + b < bytes; ++b) host[i + b] = static_cast<std::uint8_t>(x >> (8 * b));
  }
  return host;
}

}  // namespace

std::uint8_t pattern_byte(std::size_t index, std::uint64_t seed) {
  return static_cast<std::uint8_t>(pattern_word(index / 8, seed) >> (8 * (index % 8)));
}

void fill(Communicator& comm, void* ptr, std::size_t bytes, std::uint64_t seed) {
  std::vector<std::uint8_t> host = pattern(bytes, seed);
  auto stream = device::make_stream(comm.memory_kind(), std::max(0, comm.device()));
  stream->copy(ptr, host.data(), bytes);
  stream->synchronize();
}

std::vector<std::uint8_t> read_back(Communicator& comm, const void* ptr, std::size_t bytes) {
  std::vector<std::uint8_t> host(bytes);
  auto stream = device::make_stream(comm.memory_kind(), std::max(0, comm.device()));
  stream->copy(host.data(), ptr, bytes);
  stream->synchronize();
  return host;
}

std::size_t count_wrong(Communicator& comm, const void* ptr, std::size_t bytes, std::uint64_t seed) {
  auto host = read_back(comm, ptr, bytes);
  auto expected = pattern(bytes, seed);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < bytes; ++i) wrong += host[i] != expected[i];
  return wrong;
}

void fill_messages(Communicator& comm, void* base, int count, std::size_t bytes, std::uint64_t first_seed) {
  for (int i = 0; i < count; ++i) {
    fill(comm, static_cast<char*>(base) + static_cast<std::size_t>(i) * bytes, bytes, first_seed + i);
  }
}

std::string first_wrong_message(Communicator& comm, const void* base, int count, std::size_t bytes,
                                std::uint64_t first_seed) {
  for (int i = 0; i < count; ++i) {
    const void* message = static_cast<const char*>(base) + static_cast<std::size_t>(i) * bytes;
    const std::size_t wrong = count_wrong(comm, message, bytes, first_seed + i);
    if (wrong != 0) return cat("message ", i, ": ", wrong, " wrong bytes");
  }
  return "";
}

std::size_t await_posted_receives(Communicator& comm, int peer, int tag, std::size_t count, double seconds) {
  const Deadline deadline = Deadline::after_seconds(seconds);
  while (comm.posted_receives(peer, tag) < count && !deadline.expired()) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return comm.posted_receives(peer, tag);
}

namespace {

std::uint64_t seed_of(int from, int to, std::uint64_t size, int round) {
  return (static_cast<std::uint64_t>(from) << 48) ^ (static_cast<std::uint64_t>(to) << 40) ^ (size << 8) ^
         static_cast<std::uint64_t>(round);
}

}  // namespace

// Every rank sends to its right neighbour and receives from its left one, at once, for sizes from 1 byte up to
// args[1], at unaligned offsets; half of the receives are observed from a stream, half from the host.
PICKLE_CHILD(comm_sizes) {
  Communicator comm = make_comm(args.at(0));
  const std::size_t max_bytes = std::stoull(args.at(1));
  const int rank = comm.rank(), world = comm.world_size();
  const int right = (rank + 1) % world, left = (rank + world - 1) % world;
  std::vector<std::size_t> sizes = {0, 1, 3, 4095, 4096, 4097, 65537, (1u << 20) + 7};
  for (std::size_t s = 2u << 20; s <= max_bytes; s *= 4) sizes.push_back(s + 1);
  sizes.push_back(max_bytes);
  constexpr std::size_t kOffset = 13;  // unaligned on purpose
  Buffer send_buffer = comm.alloc(max_bytes + 64), recv_buffer = comm.alloc(max_bytes + 64);
  auto* send_ptr = static_cast<char*>(send_buffer.data()) + kOffset;
  auto* recv_ptr = static_cast<char*>(recv_buffer.data()) + kOffset;
  Stream stream = comm.make_stream();
  int round = 0;
  for (std::size_t size : sizes) {
    ++round;
    fill(comm, send_ptr, size, seed_of(rank, right, size, round));
    fill(comm, recv_ptr, size, 0xdead);  // poison
    Request r = comm.recv(left, 7, recv_ptr, size);
    Request s = comm.send(right, 7, send_ptr, size);
    if (round % 2 == 0) {
      r.on_stream(stream);
      stream.synchronize();
    } else {
      r.wait();
    }
    s.wait();
    CHILD_CHECK(r.test() && s.test(), "size ", size);
    std::size_t wrong = count_wrong(comm, recv_ptr, size, seed_of(left, rank, size, round));
    CHILD_CHECK(wrong == 0, "rank ", rank, ": ", wrong, " wrong bytes of ", size, " from rank ", left);
  }
  comm.barrier();
  return 0;
}

// Hundreds of tagged messages in flight both ways, posted and sent in different shuffled orders.
PICKLE_CHILD(comm_many_tags) {
  Communicator comm = make_comm(args.at(0));
  const int rank = comm.rank(), peer = 1 - rank;
  constexpr int kTags = 10, kPerTag = 30;
  constexpr std::size_t kSlot = 4096;
  auto size_of = [](int tag, int i) { return static_cast<std::size_t>(1000 + tag * 97 + i * 13); };
  Buffer send_buffer = comm.alloc(kTags * kPerTag * kSlot), recv_buffer = comm.alloc(kTags * kPerTag * kSlot);
  for (int tag = 0; tag < kTags; ++tag) {
    for (int i = 0; i < kPerTag; ++i) {
      fill(comm, static_cast<char*>(send_buffer.data()) + (tag * kPerTag + i) * kSlot, size_of(tag, i),
           seed_of(rank, tag, i, 1));
    }
  }
  // A shuffled sequence of tags; the k-th occurrence of a tag is that tag's k-th message.
  auto shuffled_tags = [&](unsigned seed) {
    std::vector<int> order;
    for (int tag = 0; tag < kTags; ++tag) order.insert(order.end(), kPerTag, tag);
    std::shuffle(order.begin(), order.end(), std::mt19937(seed));
    return order;
  };
  std::vector<Request> recvs, sends;
  std::vector<int> next(kTags, 0);
  for (int tag : shuffled_tags(11 + rank)) {
    int i = next[tag]++;
    recvs.push_back(comm.recv(peer, tag, static_cast<char*>(recv_buffer.data()) + (tag * kPerTag + i) * kSlot,
                              size_of(tag, i)));
  }
  std::fill(next.begin(), next.end(), 0);
  for (int tag : shuffled_tags(99 + rank)) {
    int i = next[tag]++;
    sends.push_back(comm.send(peer, tag, static_cast<char*>(send_buffer.data()) + (tag * kPerTag + i) * kSlot,
                              size_of(tag, i)));
  }
  for (auto& r : recvs) r.wait();
  for (auto& s : sends) s.wait();
  for (int tag = 0; tag < kTags; ++tag) {
    for (int i = 0; i < kPerTag; ++i) {
      std::size_t wrong = count_wrong(comm, static_cast<char*>(recv_buffer.data()) + (tag * kPerTag + i) * kSlot,
                                      size_of(tag, i), seed_of(peer, tag, i, 1));
      CHILD_CHECK(wrong == 0, "tag ", tag, " message ", i, ": ", wrong, " wrong bytes");
    }
  }
  comm.barrier();
  return 0;
}

// The second transfer into an allocation opens nothing; a buffer inside a larger allocation reuses its mapping.
PICKLE_CHILD(comm_cache) {
  Communicator comm = make_comm(args.at(0));
  const int rank = comm.rank();
  constexpr std::size_t kBytes = 1 << 20;
  // The receiver hands out sub-ranges of one allocation, as a caching allocator does; with "cudaMalloc" the
  // allocation is legacy cudaMalloc memory (cudaIpc handles), else the communicator's own (VMM / memfd).
  const bool legacy = args.size() > 1 && args[1] == "cudaMalloc";
  auto big = device::allocate(comm.memory_kind(), 8 * kBytes, std::max(0, comm.device()),
                              legacy ? device::AllocMethod::CudaMalloc : device::AllocMethod::Default);
  Buffer src = comm.alloc(kBytes);
  fill(comm, src.data(), kBytes, 5);
  for (int round = 0; round < 4; ++round) {
    char* part = static_cast<char*>(big->data()) + round * kBytes + round;  // interior, unaligned
    if (rank == 1) {
      comm.recv(0, 1, part, kBytes - 8).wait();
      std::size_t wrong = count_wrong(comm, part, kBytes - 8, 5);
      CHILD_CHECK(wrong == 0, "round ", round, ": ", wrong, " wrong bytes");
    } else {
      comm.send(1, 1, src.data(), kBytes - 8).wait();
      CommStats stats = comm.stats();
      CHILD_CHECK(stats.ipc.ipc_opens == 1, "round ", round, ": ", stats.ipc.ipc_opens, " opens, expected 1");
      CHILD_CHECK(stats.ipc.cache_hits == static_cast<std::uint64_t>(round + 1), "round ", round, ": ",
                  stats.ipc.cache_hits, " cache hits");
      CHILD_CHECK(stats.ipc.bytes == (round + 1) * (kBytes - 8), "bytes counted ", stats.ipc.bytes);
    }
  }
  comm.barrier();
  return 0;
}

/// Whether `stats` counts `opens` mappings (registrations, for net) and `closes` of them closed again; `counted` then
/// says what it counts.
bool opened_and_closed(const TransportStats& stats, int opens, int closes, std::string& counted) {
  counted = cat(stats.ipc_opens, " opened and ", stats.ipc_closes, " closed, expected ", opens, " and ", closes);
  return stats.ipc_opens == static_cast<std::uint64_t>(opens) && stats.ipc_closes == static_cast<std::uint64_t>(closes);
}

// Buffers allocated, received into and freed in turn, as a program without a caching allocator does: the sender
// unmaps each freed one when the receiver announces its next allocation, so its mappings (and the receiver's memory
// they hold) follow what lives. A freed buffer that a receive still waits on stays mapped until that receive is done.
PICKLE_CHILD(comm_cache_release) {
  Communicator comm = make_comm(args.at(0));
  const int rank = comm.rank();
  const bool legacy = args.size() > 1 && args[1] == "cudaMalloc";
  constexpr int kRounds = 12;
  constexpr std::size_t kBytes = (1 << 20) + 3;
  auto fresh_buffer = [&] {
    return device::allocate(comm.memory_kind(), kBytes, std::max(0, comm.device()),
                            legacy ? device::AllocMethod::CudaMalloc : device::AllocMethod::Default);
  };
  std::string counted;
  Buffer src = comm.alloc(kBytes);
  for (int round = 0; round < kRounds; ++round) {
    if (rank == 1) {
      auto dst = fresh_buffer();
      comm.recv(0, 1, dst->data(), kBytes).wait();
      std::size_t wrong = count_wrong(comm, dst->data(), kBytes, 100 + round);
      CHILD_CHECK(wrong == 0, "round ", round, ": ", wrong, " wrong bytes");
      comm.barrier();  // the next buffer (whose announcement releases this one) only once rank 0 has counted
    } else {
      fill(comm, src.data(), kBytes, 100 + round);
      comm.send(1, 1, src.data(), kBytes).wait();
      // Round r's post came after the release of round r - 1's buffer on the control channel.
      CHILD_CHECK(opened_and_closed(comm.stats().ipc, round + 1, round, counted), "after round ", round, ": ", counted);
      comm.barrier();
    }
  }
  comm.barrier();
  if (legacy) return 0;  // freeing a cudaMalloc buffer that a peer may still write into is undefined: not tried

  // A receive posted into a buffer that is then freed (the application's error) keeps that buffer mapped: the
  // sender's copy may still come, and must land in memory that its mapping holds, not fault.
  if (rank == 1) {
    auto early = fresh_buffer();  // its announcement releases the last round's buffer
    Request into_freed = comm.recv(0, 2, early->data(), kBytes);
    early.reset();
    auto next = fresh_buffer();  // its announcement finds `early` freed but awaited
    Request into_next = comm.recv(0, 3, next->data(), kBytes);
    comm.barrier();
    into_freed.wait();
    into_next.wait();
    std::size_t wrong = count_wrong(comm, next->data(), kBytes, 3);
    CHILD_CHECK(wrong == 0, wrong, " wrong bytes after a receive into a freed buffer");
    comm.barrier();  // rank 0 has counted
    next.reset();
    auto last = fresh_buffer();  // now both are released
    comm.recv(0, 4, last->data(), kBytes).wait();
    wrong = count_wrong(comm, last->data(), kBytes, 4);
    CHILD_CHECK(wrong == 0, wrong, " wrong bytes in the last buffer");
  } else {
    comm.barrier();
    fill(comm, src.data(), kBytes, 2);
    comm.send(1, 2, src.data(), kBytes).wait();
    fill(comm, src.data(), kBytes, 3);
    comm.send(1, 3, src.data(), kBytes).wait();
    CHILD_CHECK(opened_and_closed(comm.stats().ipc, kRounds + 2, kRounds, counted),
                "after the receive into a freed buffer: ", counted);
    comm.barrier();
    fill(comm, src.data(), kBytes, 4);
    comm.send(1, 4, src.data(), kBytes).wait();
    CHILD_CHECK(opened_and_closed(comm.stats().ipc, kRounds + 3, kRounds + 2, counted), "at the end: ", counted);
  }
  comm.barrier();
  return 0;
}

// The net transport's registrations follow the receiver's allocations: buffers allocated, received into and freed in
// turn are each registered once, and each is closed (with the mapping it kept) when the next one is registered.
PICKLE_CHILD(comm_net_registrations_released) {
  Communicator comm = make_comm(args.at(0));
  const int rank = comm.rank();
  constexpr int kRounds = 10;
  constexpr std::size_t kBytes = (1 << 20) + 5;
  std::string counted;
  Buffer src = comm.alloc(kBytes);
  for (int round = 0; round < kRounds; ++round) {
    if (rank == 1) {
      Buffer dst = comm.alloc(kBytes);
      comm.recv(0, 1, dst.data(), kBytes).wait();
      std::size_t wrong = count_wrong(comm, dst.data(), kBytes, 200 + round);
      CHILD_CHECK(wrong == 0, "round ", round, ": ", wrong, " wrong bytes");
      CHILD_CHECK(opened_and_closed(comm.stats().net, round + 1, round, counted), "round ", round, ": ", counted);
    } else {
      fill(comm, src.data(), kBytes, 200 + round);
      comm.send(1, 1, src.data(), kBytes).wait();
    }
  }
  comm.barrier();
  return 0;
}

// As comm_net_registrations_released, with the next receive always posted before the previous one is waited for and
// its buffer freed (a pipeline): something is always expected, and the freed buffers are still deregistered, each at
// the second registration after it was freed (the one in between is still expected).
PICKLE_CHILD(comm_net_registrations_released_pipelined) {
  Communicator comm = make_comm(args.at(0));
  const int rank = comm.rank();
  constexpr int kRounds = 10;
  constexpr std::size_t kBytes = (1 << 20) + 7;
  // Rank 0 sends each message only when rank 1 says "go" (a zero-byte message), which it does after posting the
  // next receive: so that registration always finds the pending receive still expected.
  if (rank == 0) {
    Buffer src = comm.alloc(kBytes);
    for (int round = 0; round <= kRounds; ++round) {
      comm.recv(1, 2, nullptr, 0).wait();
      fill(comm, src.data(), kBytes, 300 + round);
      comm.send(1, 1, src.data(), kBytes).wait();
    }
  } else {
    std::unique_ptr<Buffer> pending = std::make_unique<Buffer>(comm.alloc(kBytes));
    Request receive = comm.recv(0, 1, pending->data(), kBytes);
    for (int round = 1; round <= kRounds + 1; ++round) {
      std::unique_ptr<Buffer> next;
      Request next_receive;
      if (round <= kRounds) {  // posted before the pending one is waited for: its registration sees that one expected
        next = std::make_unique<Buffer>(comm.alloc(kBytes));
        next_receive = comm.recv(0, 1, next->data(), kBytes);
      }
      comm.send(0, 2, nullptr, 0).wait();  // go: the pending receive's message may come now
      receive.wait();
      std::size_t wrong = count_wrong(comm, pending->data(), kBytes, 300 + round - 1);
      CHILD_CHECK(wrong == 0, "message ", round - 1, ": ", wrong, " wrong bytes");
      pending = std::move(next);  // frees the buffer just checked
      receive = next_receive;
    }
    // kRounds + 1 buffers registered; at the registration of buffer r, buffers 0 .. r - 2 were freed.
    std::string counted;
    CHILD_CHECK(opened_and_closed(comm.stats().net, kRounds + 1, kRounds - 1, counted), counted);
  }
  comm.barrier();
  return 0;
}

// One-sided: rank 0 puts into rank 1's window and signals; rank 1's stream waits for the signal and reads.
PICKLE_CHILD(comm_put_signal) {
  Communicator comm = make_comm(args.at(0));
  const int rank = comm.rank();
  constexpr std::size_t kBytes = 300001;
  Buffer window_memory = comm.alloc(kBytes + 100);
  Window window = comm.register_memory(static_cast<char*>(window_memory.data()) + 5, kBytes);
  CHILD_CHECK(window.bytes(0) == kBytes && window.bytes(1) == kBytes, "window sizes");
  Buffer src = comm.alloc(kBytes);
  Stream stream = comm.make_stream();
  for (int round = 1; round <= 3; ++round) {
    if (rank == 0) {
      fill(comm, src.data(), kBytes, 100 + round);
      comm.put(stream, window, 1, 0, src.data(), kBytes);
      comm.put(stream, window, 1, 0, src.data(), 0);  // a no-op
      comm.signal(stream, 1, 3);
      stream.synchronize();
    } else {
      comm.wait(stream, 0, 3, static_cast<std::uint32_t>(round));
      stream.synchronize();
      std::size_t wrong = count_wrong(comm, window.local(), kBytes, 100 + round);
      CHILD_CHECK(wrong == 0, "round ", round, ": ", wrong, " wrong bytes");
    }
    comm.barrier();  // rank 0 refills src only after rank 1 has read
  }
  std::string what;
  CHILD_CHECK(throws_with([&] { comm.put(stream, window, 1 - rank, kBytes - 10, src.data(), 11); },
                          ErrorCode::InvalidArgument, "past the", what),
              what);
  comm.barrier();
  return 0;
}

// A put and a signal whose stream waits on the peer must not hold up a later message to that peer: the peer sends
// the signal that the stream waits for only after it has received that message (rank 0's host send). Over ipc
// nothing orders them; over shm the staging ring did once (puts and signals took their ring places at call time).
PICKLE_CHILD(comm_put_held_by_stream) {
  Communicator comm = make_comm(args.at(0));
  const int rank = comm.rank();
  constexpr std::size_t kBytes = 200003, kMessage = 4096;
  Buffer window_memory = comm.alloc(kBytes);
  Window window = comm.register_memory(window_memory.data(), kBytes);
  Buffer src = comm.alloc(kBytes);
  Buffer message = comm.alloc(kMessage);
  Stream stream = comm.make_stream();
  for (std::uint32_t round = 1; round <= 3; ++round) {
    if (rank == 0) {
      fill(comm, src.data(), kBytes, 40 + round);
      fill(comm, message.data(), kMessage, 80 + round);
      comm.wait(stream, 1, 0, round);  // held until rank 1 has the message sent below
      comm.put(stream, window, 1, 0, src.data(), kBytes);
      comm.signal(stream, 1, 1);
      comm.send(1, 7, message.data(), kMessage).wait();
      stream.synchronize();
    } else {
      comm.recv(0, 7, message.data(), kMessage).wait();
      std::size_t wrong = count_wrong(comm, message.data(), kMessage, 80 + round);
      CHILD_CHECK(wrong == 0, "round ", round, ": the message has ", wrong, " wrong bytes");
      comm.signal(stream, 0, 0);
      comm.wait(stream, 0, 1, round);
      stream.synchronize();
      wrong = count_wrong(comm, window.local(), kBytes, 40 + round);
      CHILD_CHECK(wrong == 0, "round ", round, ": the put left ", wrong, " wrong bytes");
    }
    comm.barrier();  // rank 0 refills its buffers only after rank 1 has read
  }
  return 0;
}

// A signal is ordered after the puts of its own stream only: a put on another stream, held up by a wait on the very
// peer that waits for the signal, must not hold the signal back. Rank 0's stream A waits for rank 1, then puts the
// first half; stream B puts the second half and signals; rank 1 waits for B's signal before it releases A. args: memory.
PICKLE_CHILD(comm_signal_independent_of_other_streams) {
  Communicator comm = make_comm(args.at(0));
  const int rank = comm.rank();
  constexpr std::size_t kHalf = 65537;
  Buffer window_memory = comm.alloc(2 * kHalf);
  Window window = comm.register_memory(window_memory.data(), 2 * kHalf);
  Buffer src = comm.alloc(2 * kHalf);
  if (rank == 0) {
    fill(comm, src.data(), 2 * kHalf, 90);
    Stream a = comm.make_stream(), b = comm.make_stream();
    comm.wait(a, 1, 0, 1);
    comm.put(a, window, 1, 0, src.data(), kHalf);
    comm.signal(a, 1, 2);
    comm.put(b, window, 1, kHalf, static_cast<char*>(src.data()) + kHalf, kHalf);
    comm.signal(b, 1, 1);
    b.synchronize();
    a.synchronize();
  } else {
    Stream stream = comm.make_stream();
    comm.wait(stream, 0, 1, 1);  // stream B's put and signal
    stream.synchronize();
    Buffer expected = comm.alloc(2 * kHalf);
    fill(comm, expected.data(), 2 * kHalf, 90);
    const auto* got = static_cast<const char*>(window.local());
    const auto* want = static_cast<const char*>(expected.data());
    if (comm.memory_kind() == MemoryKind::Host) {  // GPU memory is compared below, after both halves
      CHILD_CHECK(std::memcmp(got + kHalf, want + kHalf, kHalf) == 0, "stream B's put did not land before its signal");
    }
    comm.signal(stream, 0, 0);   // releases rank 0's stream A
    comm.wait(stream, 0, 2, 1);  // stream A's put and signal
    stream.synchronize();
    std::size_t wrong = count_wrong(comm, window.local(), 2 * kHalf, 90);
    CHILD_CHECK(wrong == 0, wrong, " wrong bytes in the window");
  }
  comm.barrier();
  return 0;
}

// More puts to one peer than it has "source read" words for shm puts (1024): the words are reused in turn, each at
// a new generation; every put's bytes land where they should. args: memory.
PICKLE_CHILD(comm_put_many) {
  Communicator comm = make_comm(args.at(0));
  const int rank = comm.rank();
  constexpr std::size_t kPuts = 2600, kPiece = 8, kBytes = kPuts * kPiece;
  Buffer window_memory = comm.alloc(kBytes);
  Window window = comm.register_memory(window_memory.data(), kBytes);
  Buffer src = comm.alloc(kBytes);
  Stream stream = comm.make_stream();
  for (std::uint32_t round = 1; round <= 2; ++round) {
    if (rank == 0) {
      fill(comm, src.data(), kBytes, 60 + round);
      for (std::size_t i = 0; i < kPuts; ++i) {
        comm.put(stream, window, 1, i * kPiece, static_cast<char*>(src.data()) + i * kPiece, kPiece);
      }
      comm.signal(stream, 1, 2);
      stream.synchronize();
    } else {
      comm.wait(stream, 0, 2, round);
      stream.synchronize();
      const std::size_t wrong = count_wrong(comm, window.local(), kBytes, 60 + round);
      CHILD_CHECK(wrong == 0, "round ", round, ": ", kPuts, " puts left ", wrong, " wrong bytes");
    }
    comm.barrier();
  }
  return 0;
}

// Bad input is a clear error naming rank, peer, operation and size.
PICKLE_CHILD(comm_errors) {
  Communicator comm = make_comm(args.at(0));
  const int rank = comm.rank(), peer = 1 - rank;
  Buffer buffer = comm.alloc(4096);
  std::string what;
  CHILD_CHECK(throws_with([&] { comm.send(2, 0, buffer.data(), 16); }, ErrorCode::InvalidArgument, "peer 2", what),
              what);
  CHILD_CHECK(throws_with([&] { comm.recv(rank, 0, buffer.data(), 16); }, ErrorCode::InvalidArgument, "not another rank",
                          what),
              what);
  std::vector<char> plain(64);
  CHILD_CHECK(throws_with([&] { comm.recv(peer, 0, plain.data(), 64); }, ErrorCode::InvalidArgument,
                          "not memory pickle can share", what),
              what);
  // Past the end of the allocation (VMM rounds allocations up to its granularity, so overshoot by far).
  constexpr std::size_t kTooMany = 64u << 20;
  CHILD_CHECK(throws_with([&] { comm.recv(peer, 0, static_cast<char*>(buffer.data()) + 4000, kTooMany); },
                          ErrorCode::InvalidArgument, "only", what),
              what);
  CHILD_CHECK(what.find(cat("rank ", rank, " -> peer ", peer, ": recv of ", kTooMany, " bytes")) != std::string::npos,
              what);

  // Size 0 is a valid no-op that still matches.
  Request r0 = comm.recv(peer, 5, nullptr, 0);
  Request s0 = comm.send(peer, 5, nullptr, 0);
  r0.wait();
  s0.wait();

  // A size mismatch fails both sides.
  if (rank == 0) {
    Request s = comm.send(peer, 9, buffer.data(), 100);
    CHILD_CHECK(throws_with([&] { s.wait(); }, ErrorCode::InvalidArgument, "posted a recv of 200 bytes", what), what);
  } else {
    Request r = comm.recv(peer, 9, buffer.data(), 200);
    CHILD_CHECK(throws_with([&] { r.wait(); }, ErrorCode::InvalidArgument,
                            "peer 0's send of 100 bytes failed: rank 0 -> peer 1: send of 100 bytes (tag 9): peer 1 "
                            "posted a recv of 200 bytes; sizes of a send and its recv must match",
                            what),
                what);
  }
  // The same mismatch seen only through a stream that waits for the receive (Request::on_stream): the failure lets
  // the stream through, and its synchronize throws the receive's error; once, then the stream goes on. The send
  // comes after the stream's wait, so that the failure cannot have arrived before on_stream (which would throw it).
  Stream stream = comm.make_stream();
  if (rank == 0) {
    comm.barrier();
    Request s = comm.send(peer, 10, buffer.data(), 150);
    CHILD_CHECK(throws_with([&] { s.wait(); }, ErrorCode::InvalidArgument, "posted a recv of 300 bytes", what), what);
  } else {
    comm.recv(peer, 10, buffer.data(), 300).on_stream(stream);
    comm.barrier();
    CHILD_CHECK(throws_with([&] { stream.synchronize(); }, ErrorCode::InvalidArgument,
                            "rank 1 -> peer 0: recv of 300 bytes (tag 10): peer 0's send of 150 bytes failed", what),
                what);
    stream.synchronize();
  }
  comm.barrier();
  return 0;
}

// A send whose stream refuses its copy fails on both sides as the sender's failure: the receive with a PeerError
// that names the peer, the send's size and the stream's error (before, the receiver took it for a size mismatch and
// threw InvalidArgument), and the pair goes on. The refusing stream is a host stream that gave a wait up (it waited
// for an event whose record a stream destroyed while stuck dropped); a CUDA stream with an error refuses likewise.
// Rank 1's receive is posted first, so that the send is matched at call time and queues on the caller's stream.
// Over net the pair fails instead (the transport cannot tell whether a host callback that threw was queued in part,
// and so whether a write may still go out: docs/p2p.md), and the peer is told why. args: memory kind ("host": the
// stream is a host stream), "pair-goes-on" or "pair-fails".
PICKLE_CHILD(comm_send_on_a_refusing_stream) {
  Communicator comm = make_comm(args.at(0));
  const bool pair_goes_on = args.at(1) == "pair-goes-on";
  const int rank = comm.rank(), peer = 1 - rank;
  constexpr std::size_t kBytes = 4099;
  constexpr int kTag = 12;
  Buffer buffer = comm.alloc(kBytes);
  std::string what;
  if (rank == 0) {
    CHILD_CHECK(await_posted_receives(comm, peer, kTag, 1, env::timeout_seconds()) == 1,
                "rank 1's receive never arrived");
    HostStreamThatGivesUp refusing;
    CHILD_CHECK(refusing.give_up(), "the stream never gave its wait up");
    Stream stream(refusing.stream);
    fill(comm, buffer.data(), kBytes, 5);
    Request send = comm.send(peer, kTag, buffer.data(), kBytes, &stream);
    CHILD_CHECK(throws_with([&] { send.wait(); }, ErrorCode::System,
                            cat("rank 0 -> peer 1: send of ", kBytes, " bytes (tag ", kTag,
                                "): queuing the send on its stream"),
                            what),
                what);
    CHILD_CHECK(what.find("host stream: a wait for an event whose record was dropped") != std::string::npos, what);
    CHILD_CHECK(throws_with([&] { stream.synchronize(); }, ErrorCode::System, "record was dropped", what), what);
    stream.synchronize();  // reported: the stream goes on
  } else {
    Request recv = comm.recv(peer, kTag, buffer.data(), kBytes);
    CHILD_CHECK(throws_with([&] { recv.wait(); }, ErrorCode::Peer, cat("peer 0's send of ", kBytes, " bytes"), what),
                what);
    CHILD_CHECK(what.find(cat("rank 1 -> peer 0: recv of ", kBytes, " bytes")) != std::string::npos, what);
    CHILD_CHECK(what.find("queuing the send on its stream") != std::string::npos, what);
    CHILD_CHECK(what.find("record was dropped") != std::string::npos, what);
  }
  if (!pair_goes_on) {
    CHILD_CHECK(throws_with([&] { comm.send(peer, kTag + 1, buffer.data(), kBytes).wait(); }, ErrorCode::Peer,
                            "queuing the send on its stream", what),
                what);
    return 0;
  }
  if (rank == 0) {
    fill(comm, buffer.data(), kBytes, 6);
    comm.send(peer, kTag + 1, buffer.data(), kBytes).wait();
  } else {
    comm.recv(peer, kTag + 1, buffer.data(), kBytes).wait();
    const std::size_t wrong = count_wrong(comm, buffer.data(), kBytes, 6);
    CHILD_CHECK(wrong == 0, wrong, " wrong bytes after the failed send");
  }
  comm.barrier();
  return 0;
}

// The same with the send first and rank 1's receive posted after it. Over ipc and net the send needs its stream's
// point (an event, for a copy queued once the receive is posted); recording it is refused, and send() throws before
// the send took its sequence number: nothing was sent, the receive stays posted, and a send repeated from a working
// stream fills it ("throws"). Over shm the send takes its number first and waits for its stream by a host callback,
// which is refused: the send fails, and the receive fails too once it is posted ("fails"). args: memory kind
// ("host"), "throws" or "fails".
PICKLE_CHILD(comm_send_on_a_refusing_stream_late) {
  Communicator comm = make_comm(args.at(0));
  const bool send_throws = args.at(1) == "throws";
  const int rank = comm.rank(), peer = 1 - rank;
  constexpr std::size_t kBytes = 4099;
  constexpr int kTag = 13;
  Buffer buffer = comm.alloc(kBytes);
  std::string what;
  if (rank == 0) {
    HostStreamThatGivesUp refusing;
    CHILD_CHECK(refusing.give_up(), "the stream never gave its wait up");
    Stream stream(refusing.stream);
    fill(comm, buffer.data(), kBytes, 7);
    if (send_throws) {
      CHILD_CHECK(throws_with([&] { comm.send(peer, kTag, buffer.data(), kBytes, &stream); }, ErrorCode::System,
                              cat("rank 0 -> peer 1: send of ", kBytes, " bytes (tag ", kTag,
                                  "): recording its stream's point (nothing was sent): host stream: a wait for an "
                                  "event whose record was dropped"),
                              what),
                  what);
      comm.barrier();  // rank 1 posts its receive
      comm.send(peer, kTag, buffer.data(), kBytes).wait();
    } else {
      Request send = comm.send(peer, kTag, buffer.data(), kBytes, &stream);
      CHILD_CHECK(throws_with([&] { send.wait(); }, ErrorCode::System, "record was dropped", what), what);
      comm.barrier();
    }
    CHILD_CHECK(throws_with([&] { stream.synchronize(); }, ErrorCode::System, "record was dropped", what), what);
  } else {
    comm.barrier();
    Request recv = comm.recv(peer, kTag, buffer.data(), kBytes);
    if (send_throws) {
      recv.wait();
      const std::size_t wrong = count_wrong(comm, buffer.data(), kBytes, 7);
      CHILD_CHECK(wrong == 0, wrong, " wrong bytes from the repeated send");
    } else {
      CHILD_CHECK(throws_with([&] { recv.wait(); }, ErrorCode::Peer,
                              cat("peer 0's send of ", kBytes, " bytes failed: rank 0 -> peer 1: send of ", kBytes,
                                  " bytes (tag ", kTag, "): queuing the send on its stream"),
                              what),
                  what);
    }
  }
  comm.barrier();
  return 0;
}

// A send whose stream gives up after the call, dropping the point that the send's copy is to follow (its receive is
// posted later, so the copy goes on a copy stream of the pair once it is): the send fails alone when it is matched,
// its receive with a PeerError, and later sends to the peer go through. Before, the pair's copy stream waited for the
// dropped point, gave up in turn and refused every later send to that peer. args: memory kind ("host").
PICKLE_CHILD(comm_send_whose_point_its_stream_dropped) {
  Communicator comm = make_comm(args.at(0));
  const int rank = comm.rank(), peer = 1 - rank;
  constexpr std::size_t kBytes = 4099;
  constexpr int kTag = 20, kLater = 3;
  Buffer buffer = comm.alloc(kBytes * (1 + kLater));
  auto part = [&](int i) { return static_cast<char*>(buffer.data()) + i * kBytes; };
  std::string what;
  if (rank == 0) {
    HostStreamThatGivesUp dropping;
    Stream stream(dropping.stream);
    fill(comm, part(0), kBytes, 20);
    Request send = comm.send(peer, kTag, part(0), kBytes, &stream);  // its point is recorded behind the wait
    CHILD_CHECK(dropping.give_up(), "the stream never gave its wait up");  // and it drops the send's point
    comm.barrier();  // rank 1 posts its receives
    CHILD_CHECK(throws_with([&] { send.wait(); }, ErrorCode::System,
                            cat("rank 0 -> peer 1: send of ", kBytes, " bytes (tag ", kTag,
                                "): queuing the send on its stream"),
                            what),
                what);
    for (int i = 1; i <= kLater; ++i) {
      fill(comm, part(i), kBytes, 20 + static_cast<std::uint64_t>(i));
      comm.send(peer, kTag + i, part(i), kBytes).wait();
    }
    CHILD_CHECK(throws_with([&] { stream.synchronize(); }, ErrorCode::System, "record was dropped", what), what);
  } else {
    comm.barrier();
    Request first = comm.recv(peer, kTag, part(0), kBytes);
    std::vector<Request> later;
    for (int i = 1; i <= kLater; ++i) later.push_back(comm.recv(peer, kTag + i, part(i), kBytes));
    CHILD_CHECK(throws_with([&] { first.wait(); }, ErrorCode::Peer, cat("peer 0's send of ", kBytes, " bytes failed"),
                            what),
                what);
    for (int i = 1; i <= kLater; ++i) {
      later[static_cast<std::size_t>(i - 1)].wait();
      const std::size_t wrong = count_wrong(comm, part(i), kBytes, 20 + static_cast<std::uint64_t>(i));
      CHILD_CHECK(wrong == 0, "later send ", i, ": ", wrong, " wrong bytes");
    }
  }
  comm.barrier();
  return 0;
}

// Sends matched at call time (their receives posted first), queued on a stream behind a wait that then gives up:
// the stream drops them unrun. Over shm the step that says the source is ready is a host callback on that stream,
// and over net so are the pieces' writes (an empty send's message too): dropped, each fails its send alone, and its
// receive with a PeerError, at once; before, both sides waited PICKLE_TIMEOUT and then timed out. Over ipc the
// dropped operations are the copy and its completion write, and a callback queued behind them hears of the drop. With
// PICKLE_IPC_STREAMS=2 the sends queue on the pair's copy streams instead, whose waits for the caller's point give up
// when that point is dropped: the same failure, and the copy stream takes the next sends again. A second stream that
// waits for the first send (Request::on_stream) is let go with its error. Two later sends go through (with two copy
// streams, one on each). args: memory kind ("host").
PICKLE_CHILD(comm_sends_their_stream_dropped_unrun) {
  Communicator comm = make_comm(args.at(0));
  const int rank = comm.rank(), peer = 1 - rank;
  constexpr std::size_t kBytes = 5003;
  constexpr int kTag = 30, kEmptyTag = 31, kLaterTag = 32;
  constexpr int kLaterSends = 2;
  Buffer buffer = comm.alloc((1 + kLaterSends) * kBytes);
  const auto later = [&](int i) { return static_cast<char*>(buffer.data()) + (1 + i) * kBytes; };
  std::string what;
  if (rank == 0) {
    CHILD_CHECK(await_posted_receives(comm, peer, kTag, 1, env::timeout_seconds()) == 1,
                "rank 1's receive never arrived");
    CHILD_CHECK(await_posted_receives(comm, peer, kEmptyTag, 1, env::timeout_seconds()) == 1,
                "rank 1's empty receive never arrived");
    HostStreamThatGivesUp dropping;
    Stream stream(dropping.stream);
    fill(comm, buffer.data(), kBytes, 30);
    Request send = comm.send(peer, kTag, buffer.data(), kBytes, &stream);  // behind the wait, matched
    Request empty = comm.send(peer, kEmptyTag, buffer.data(), 0, &stream);
    // A second stream that waits for the send (on the receiver's completion word, which rank 1 releases when it
    // hears of the failure) is let go with the send's error, not after PICKLE_TIMEOUT with a TimeoutError.
    Stream watcher = comm.make_stream();
    send.on_stream(watcher);
    CHILD_CHECK(dropping.give_up(), "the stream never gave its wait up");  // and drops both sends
    CHILD_CHECK(throws_with([&] { watcher.synchronize(); }, ErrorCode::System,
                            cat("rank 0 -> peer 1: send of ", kBytes, " bytes (tag ", kTag,
                                "): queuing the send on its stream: its stream dropped the send before running it"),
                            what),
                what);
    CHILD_CHECK(throws_with([&] { send.wait(); }, ErrorCode::System,
                            cat("rank 0 -> peer 1: send of ", kBytes, " bytes (tag ", kTag,
                                "): queuing the send on its stream: its stream dropped the send before running it"),
                            what),
                what);
    CHILD_CHECK(throws_with([&] { empty.wait(); }, ErrorCode::System,
                            cat("rank 0 -> peer 1: send of 0 bytes (tag ", kEmptyTag,
                                "): queuing the send on its stream: its stream dropped the send before running it"),
                            what),
                what);
    CHILD_CHECK(throws_with([&] { stream.synchronize(); }, ErrorCode::System, "record was dropped", what), what);
    stream.synchronize();  // reported: the stream goes on
    for (int i = 0; i < kLaterSends; ++i) {
      fill(comm, later(i), kBytes, 40 + static_cast<std::uint64_t>(i));
      comm.send(peer, kLaterTag, later(i), kBytes, &stream).wait();
    }
  } else {
    Request recv = comm.recv(peer, kTag, buffer.data(), kBytes);
    Request empty = comm.recv(peer, kEmptyTag, buffer.data(), 0);
    std::vector<Request> next;
    for (int i = 0; i < kLaterSends; ++i) next.push_back(comm.recv(peer, kLaterTag, later(i), kBytes));
    CHILD_CHECK(throws_with([&] { recv.wait(); }, ErrorCode::Peer,
                            cat("rank 1 -> peer 0: recv of ", kBytes, " bytes (tag ", kTag, "): peer 0's send of ",
                                kBytes, " bytes failed"),
                            what),
                what);
    CHILD_CHECK(what.find("its stream dropped the send before running it") != std::string::npos, what);
    CHILD_CHECK(throws_with([&] { empty.wait(); }, ErrorCode::Peer, "its stream dropped the send before running it",
                            what),
                what);
    for (int i = 0; i < kLaterSends; ++i) {
      next[static_cast<std::size_t>(i)].wait();
      const std::size_t wrong = count_wrong(comm, later(i), kBytes, 40 + static_cast<std::uint64_t>(i));
      CHILD_CHECK(wrong == 0, wrong, " wrong bytes in later send ", i);
    }
  }
  comm.barrier();
  return 0;
}

// Rank 0 dies (SIGKILL) in the middle of a series of transfers; rank 1's pending operations fail with PeerError
// long before the timeout.
PICKLE_CHILD(comm_peer_death) {
  Communicator comm = make_comm(args.at(0));
  constexpr int kMessages = 40;
  constexpr std::size_t kBytes = 256 << 10;
  Buffer buffer = comm.alloc(kMessages * kBytes);
  if (comm.rank() == 0) {
    comm.barrier();
    for (int i = 0; i < kMessages / 2; ++i) comm.send(1, 0, static_cast<char*>(buffer.data()) + i * kBytes, kBytes).wait();
    ::kill(::getpid(), SIGKILL);
  }
  std::vector<Request> recvs;
  for (int i = 0; i < kMessages; ++i) recvs.push_back(comm.recv(0, 0, static_cast<char*>(buffer.data()) + i * kBytes, kBytes));
  Request pending_send = comm.send(0, 1, buffer.data(), 64);  // never matched
  comm.barrier();
  Stopwatch watch;
  int completed = 0, failed = 0;
  for (auto& r : recvs) {
    try {
      r.wait();
      ++completed;
    } catch (const PeerError& e) {
      ++failed;
      CHILD_CHECK(std::string(e.what()).find("peer 0") != std::string::npos, e.what());
    }
  }
  std::string what;
  CHILD_CHECK(throws_with([&] { pending_send.wait(); }, ErrorCode::Peer, "send of 64 bytes", what), what);
  // On one host a send completes when the receiver's completion word is written, so exactly the sends rank 0 saw
  // complete arrive. Over the net transport a send completes when its writes left (the source is reusable, as with
  // NCCL), so the last few may die with the sender in transit: at most those, and every other receive fails.
  if (comm.transport(0) == "net") {
    CHILD_CHECK(completed <= kMessages / 2 && completed + failed == kMessages, completed, " completed, ", failed,
                " failed (net)");
  } else {
    CHILD_CHECK(completed == kMessages / 2 && failed == kMessages / 2, completed, " completed, ", failed, " failed");
  }
  CHILD_CHECK(watch.seconds() < 10, "took ", watch.seconds(), " s to notice");
  CHILD_CHECK(throws_with([&] { comm.send(0, 2, buffer.data(), 8); }, ErrorCode::Peer, "peer 0", what), what);
  return 0;
}

// comm_peer_death, with rank 1 looking only at a stream that waits for its receives (Request::on_stream), as
// kernels that consume the messages would: the death releases the stream (it must not hang), and its synchronize
// throws PeerError naming a receive that never arrived. The messages that did arrive are intact.
PICKLE_CHILD(comm_peer_death_seen_on_a_stream) {
  Communicator comm = make_comm(args.at(0));
  constexpr int kMessages = 40, kSent = kMessages / 2;
  constexpr std::size_t kBytes = 256 << 10;
  Buffer buffer = comm.alloc(kMessages * kBytes);
  auto message = [&](int i) { return static_cast<char*>(buffer.data()) + static_cast<std::size_t>(i) * kBytes; };
  if (comm.rank() == 0) {
    comm.barrier();
    for (int i = 0; i < kSent; ++i) {
      fill(comm, message(i), kBytes, 100 + static_cast<std::uint64_t>(i));
      comm.send(1, 0, message(i), kBytes).wait();
    }
    ::kill(::getpid(), SIGKILL);
  }
  Stream stream = comm.make_stream();
  std::vector<Request> recvs;  // dropped before the communicator (a Request must not outlive it)
  for (int i = 0; i < kMessages; ++i) recvs.push_back(comm.recv(0, 0, message(i), kBytes));
  for (auto& r : recvs) r.on_stream(stream);
  comm.barrier();
  Stopwatch watch;
  std::string what;
  CHILD_CHECK(throws_with([&] { stream.synchronize(); }, ErrorCode::Peer, "rank 1 -> peer 0: recv of 262144 bytes",
                          what),
              what);
  std::fprintf(stderr, "rank 1: %s\n", what.c_str());
  CHILD_CHECK(watch.seconds() < 10, "took ", watch.seconds(), " s to notice");
  stream.synchronize();  // reported once; the stream goes on
  // What completed is intact: on one host exactly what rank 0 sent; over net the last sends may have completed at
  // rank 0 with their writes still in transit (comm_peer_death).
  int completed = 0;
  for (int i = 0; i < kMessages; ++i) {
    try {
      if (!recvs[static_cast<std::size_t>(i)].test()) continue;
    } catch (const PeerError&) {
      continue;
    }
    ++completed;
    const std::size_t wrong = count_wrong(comm, message(i), kBytes, 100 + static_cast<std::uint64_t>(i));
    CHILD_CHECK(wrong == 0, "message ", i, ", which arrived before the death, has ", wrong, " wrong bytes");
  }
  CHILD_CHECK(comm.transport(0) == "net" ? completed <= kSent : completed == kSent, completed, " of ", kSent,
              " messages completed");
  recvs.clear();
  return 0;
}

// Rank 1's stream is first synchronized after its communicator is gone; the checks that Request::on_stream left on
// it read what they need without the communicator. args: memory, then
// - "mismatch": a receive of 300 bytes on the stream, a send of 150 (seen failing on the host first): the stream
//   throws the mismatch's InvalidArgument (before: the teardown took the failed receive for one still awaited,
//   logged an error, and replaced its error with "the communicator was destroyed before this receive completed").
// - "mismatch_at_close": the same mismatch, arriving while rank 1 destroys its communicator (rank 0 sends 300 ms
//   into it): the stream still throws the mismatch's error (before, the peer's goodbye, which fails the pair, made the
//   teardown replace it in most runs).
// - "completed": 300 receives and 300 sends of 0-6000 bytes on the stream, each completed (waited for on the host):
//   the stream passes, twice.
PICKLE_CHILD(comm_stream_synchronized_after_its_communicator) {
  const std::string what_ran = args.at(1);
  std::optional<Stream> stream;
  bool continue_to_teardown = false;  // no barrier first: the teardown's own is where the mismatch arrives
  {
    Communicator comm = make_comm(args.at(0));
    const int rank = comm.rank(), peer = 1 - rank;
    Buffer buffer = comm.alloc(1 << 20);
    stream.emplace(comm.make_stream());
    if (what_ran == "mismatch") {
      std::string what;
      if (rank == 0) {
        comm.barrier();
        Request send = comm.send(peer, 10, buffer.data(), 150);
        CHILD_CHECK(throws_with([&] { send.wait(); }, ErrorCode::InvalidArgument, "posted a recv of 300 bytes", what),
                    what);
      } else {
        Request recv = comm.recv(peer, 10, buffer.data(), 300);
        recv.on_stream(*stream);
        comm.barrier();
        CHILD_CHECK(throws_with([&] { recv.wait(); }, ErrorCode::InvalidArgument, "must match", what), what);
      }
    } else if (what_ran == "mismatch_at_close") {
      comm.barrier();
      if (rank == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 1's teardown is under way
        Request send = comm.send(peer, 10, buffer.data(), 150);
        std::string what;
        CHILD_CHECK(throws_with([&] { send.wait(); }, ErrorCode::InvalidArgument, "posted a recv of 300 bytes", what),
                    what);
      } else {
        comm.recv(peer, 10, buffer.data(), 300).on_stream(*stream);
      }
      continue_to_teardown = true;
    } else {
      std::vector<Request> requests;  // dropped before the communicator (a Request must not outlive it)
      for (int i = 0; i < 300; ++i) {
        const std::size_t bytes = static_cast<std::size_t>(i % 7) * 1000;
        char* at = static_cast<char*>(buffer.data()) + static_cast<std::size_t>(i % 16) * 8192;
        if (rank == 1) {
          requests.push_back(comm.recv(peer, i % 3, at, bytes));
          requests.back().on_stream(*stream);
          requests.push_back(comm.send(peer, 100 + i % 3, at + 200000, bytes, &*stream));
          requests.back().on_stream(*stream);
        } else {
          requests.push_back(comm.send(peer, i % 3, at, bytes));
          requests.push_back(comm.recv(peer, 100 + i % 3, at + 200000, bytes));
        }
      }
      for (auto& request : requests) request.wait();
    }
    if (!continue_to_teardown) comm.barrier();
  }
  if (what_ran == "mismatch" || what_ran == "mismatch_at_close") {
    if (std::stoi(env::foreign("RANK").value()) == 0) return 0;
    std::string what;
    CHILD_CHECK(throws_with([&] { stream->synchronize(); }, ErrorCode::InvalidArgument,
                            "rank 1 -> peer 0: recv of 300 bytes (tag 10): peer 0's send of 150 bytes failed", what),
                what);
  }
  stream->synchronize();
  stream->synchronize();
  return 0;
}

// Staged net receives that their sender fails by message (a size mismatch: nothing is ever written into their staging
// buffers) give the buffer back at once: 300 of them in turn register one or two, not one each (until 2026-11-29 a
// failed receive kept its buffer until its completion slot came round again, 4096 receives later). The pair goes on:
// a matching message arrives intact after them.
PICKLE_CHILD(comm_staged_receives_failed_by_their_sender_give_back_their_buffers) {
  Communicator comm = make_comm(args.at(0));
  constexpr int kMessages = 300;
  constexpr std::size_t kBytes = 64 << 10;
  Buffer buffer = comm.alloc(kBytes);
  const int rank = comm.rank(), peer = 1 - rank;
  const std::uint64_t registered_before = comm.stats().net.ipc_opens;
  for (int i = 0; i < kMessages; ++i) {
    Request request =
        rank == 0 ? comm.send(peer, 0, buffer.data(), kBytes / 2) : comm.recv(peer, 0, buffer.data(), kBytes);
    std::string what;
    CHILD_CHECK(throws_with([&] { request.wait(); }, ErrorCode::InvalidArgument, "must match", what), what);
  }
  if (rank == 0) {
    fill(comm, buffer.data(), kBytes, 5);
    comm.send(peer, 0, buffer.data(), kBytes).wait();
  } else {
    comm.recv(peer, 0, buffer.data(), kBytes).wait();
    const std::size_t wrong = count_wrong(comm, buffer.data(), kBytes, 5);
    CHILD_CHECK(wrong == 0, "the message after the failed ones: ", wrong, " bytes wrong");
    const std::uint64_t registered = comm.stats().net.ipc_opens - registered_before;
    std::fprintf(stderr, "rank 1: %llu memory registrations for %d failed staged receives and one that arrived\n",
                 static_cast<unsigned long long>(registered), kMessages);
    CHILD_CHECK(registered <= 4, registered, " memory registrations: the failed receives kept their staging buffers");
  }
  comm.barrier();
  return 0;
}

// Two communicators of the same ranks at once (e.g. a data-parallel and a pipeline group) keep their traffic apart,
// and a third made after both are gone works too.
PICKLE_CHILD(comm_two_communicators) {
  const int rank = std::stoi(env::foreign("RANK").value());
  const int peer = 1 - rank;
  auto exchange = [&](Communicator& comm, std::uint64_t seed) -> std::size_t {
    constexpr std::size_t kBytes = 100003;
    Buffer src = comm.alloc(kBytes), dst = comm.alloc(kBytes);
    fill(comm, src.data(), kBytes, seed + static_cast<std::uint64_t>(rank));
    Request r = comm.recv(peer, 0, dst.data(), kBytes);
    Request s = comm.send(peer, 0, src.data(), kBytes);
    r.wait();
    s.wait();
    return count_wrong(comm, dst.data(), kBytes, seed + static_cast<std::uint64_t>(peer));
  };
  {
    Communicator first = make_comm(args.at(0));
    Communicator second = make_comm(args.at(0));
    std::size_t wrong_second = exchange(second, 2000);
    std::size_t wrong_first = exchange(first, 1000);
    CHILD_CHECK(wrong_first == 0 && wrong_second == 0, wrong_first, " and ", wrong_second, " wrong bytes");
    // A window belongs to the communicator that registered it: using it on another is a clear error, not a read of
    // that communicator's state by index.
    Buffer window_memory = first.alloc(64);
    Window window = first.register_memory(window_memory.data(), 64);
    Stream stream = second.make_stream();
    std::string what;
    CHILD_CHECK(throws_with([&] { second.put(stream, window, peer, 0, window_memory.data(), 8); },
                            ErrorCode::InvalidArgument, "registered on another communicator", what),
                what);
    first.barrier();
  }
  Communicator third = make_comm(args.at(0));
  std::size_t wrong_third = exchange(third, 3000);
  CHILD_CHECK(wrong_third == 0, wrong_third, " wrong bytes");
  third.barrier();
  return 0;
}

// Two live communicators of one process receive into two parts of one allocation (a caching allocator's segment
// shared by, say, a data-parallel and a pipeline group): each imports the same peer allocation. args: memory,
// method ("cudaMalloc" for legacy cudaIpc handles, else the communicator's own kind of memory).
PICKLE_CHILD(comm_two_communicators_one_allocation) {
  const int rank = std::stoi(env::foreign("RANK").value());
  const int peer = 1 - rank;
  Communicator first = make_comm(args.at(0));
  Communicator second = make_comm(args.at(0));
  constexpr std::size_t kBytes = 1 << 20;
  const bool legacy = args.size() > 1 && args[1] == "cudaMalloc";
  auto segment = device::allocate(first.memory_kind(), 4 * kBytes, std::max(0, first.device()),
                                  legacy ? device::AllocMethod::CudaMalloc : device::AllocMethod::Default);
  Buffer src = first.alloc(kBytes);
  for (int round = 0; round < 2; ++round) {
    char* part_first = static_cast<char*>(segment->data()) + round * kBytes;
    char* part_second = static_cast<char*>(segment->data()) + 2 * kBytes + round * kBytes;
    fill(first, src.data(), kBytes, 70 + round + rank);
    Request r1 = first.recv(peer, 0, part_first, kBytes);
    Request r2 = second.recv(peer, 0, part_second, kBytes);
    Request s1 = first.send(peer, 0, src.data(), kBytes);
    Request s2 = second.send(peer, 0, src.data(), kBytes);
    r1.wait();
    r2.wait();
    s1.wait();
    s2.wait();
    const std::size_t wrong = count_wrong(first, part_first, kBytes, 70 + round + peer) +
                              count_wrong(first, part_second, kBytes, 70 + round + peer);
    CHILD_CHECK(wrong == 0, "round ", round, ": ", wrong, " wrong bytes");
    first.barrier();
  }
  second.barrier();
  return 0;
}

// Copies queued into a peer's memory (a matched send behind a slow producer, a put) when the peer dies must still
// run safely: the mappings stay until the communicator goes. Host memory only (the gate is a plain host word).
PICKLE_CHILD(comm_copy_into_dead_peer) {
  Communicator comm = make_comm("host");
  constexpr std::size_t kBytes = 16 << 20;
  Buffer buf = comm.alloc(kBytes);
  Window window = comm.register_memory(buf.data(), kBytes);
  if (comm.rank() == 1) {
    Request r = comm.recv(0, 0, buf.data(), kBytes);
    comm.barrier();  // the post is out
    comm.barrier();  // rank 0 has queued its copies
    ::kill(::getpid(), SIGKILL);
  }
  comm.barrier();
  Stream producer = comm.make_stream();
  alignas(64) static std::uint32_t gate = 0;
  producer.impl().wait_value(&gate, 1);  // a producer that is still busy
  // Give the progress thread time to take the post, so that the send is matched at once and its copy is queued
  // behind the producer (were it not, the send would fail with PeerError below, which is fine too).
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Request s = comm.send(1, 0, buf.data(), kBytes, &producer);
  comm.put(producer, window, 1, 0, buf.data(), kBytes);
  Deadline deadline = Deadline::after_seconds(10);
  comm.barrier();
  // Rank 1 dies now; let this rank notice, then let the queued copies run into its (still mapped) memory.
  std::string what;
  while (!throws_with([&] { comm.send(1, 9, buf.data(), 8); }, ErrorCode::Peer, "peer 1", what)) {
    CHILD_CHECK(!deadline.expired(), "the peer's death was not noticed: ", what);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::atomic_ref<std::uint32_t>(gate).store(1, std::memory_order_release);
  producer.synchronize();
  return 0;
}

// A rank whose communicator is destroyed while unwinding from an error does not say goodbye: its peer's pending
// operations fail with PeerError at once, not at the timeout.
PICKLE_CHILD(comm_unwind) {
  Communicator comm = make_comm(args.at(0));
  Buffer buf = comm.alloc(4096);
  if (comm.rank() == 1) {
    comm.barrier();
    try {
      Communicator doomed = std::move(comm);
      throw std::runtime_error("an application error on rank 1");
    } catch (const std::runtime_error&) {
    }
    std::this_thread::sleep_for(std::chrono::seconds(3));  // stay alive: only the communicator is gone
    return 0;
  }
  Request r = comm.recv(1, 0, buf.data(), 4096);
  comm.barrier();
  Stopwatch watch;
  std::string what;
  CHILD_CHECK(throws_with([&] { r.wait(); }, ErrorCode::Peer, "peer 1", what), what);
  CHILD_CHECK(watch.seconds() < env::timeout_seconds() / 2, "took ", watch.seconds(), " s");
  return 0;
}

// A stream waiting for a signal from a peer that dies is released, and its synchronize reports the PeerError (the
// signal never came, on every transport); a wait named after the death is a PeerError.
PICKLE_CHILD(comm_signal_dead_peer) {
  Communicator comm = make_comm(args.at(0));
  if (comm.rank() == 1) {
    comm.barrier();
    ::kill(::getpid(), SIGKILL);
  }
  Stream stream = comm.make_stream();
  comm.wait(stream, 1, 0, 1);  // enqueued while the peer lives; it never signals
  comm.barrier();
  Stopwatch watch;
  std::string what;
  // Released when the death is noticed, well before the timeout, and reported: the signal never came.
  CHILD_CHECK(throws_with([&] { stream.synchronize(); }, ErrorCode::Peer,
                          "rank 0 -> peer 1: wait for signal 0 to reach 1: the pair with peer 1 failed", what),
              what);
  CHILD_CHECK(watch.seconds() < env::timeout_seconds() / 2, "stream released after ", watch.seconds(), " s");
  stream.synchronize();  // reported once; the stream goes on
  CHILD_CHECK(throws_with([&] { comm.wait(stream, 1, 0, 2); }, ErrorCode::Peer, "rank 0 -> peer 1: wait", what), what);
  CHILD_CHECK(throws_with([&] { comm.signal(stream, 1, 0); }, ErrorCode::Peer, "peer 1", what), what);
  return 0;
}

// A stream that reaches a wait for a signal value the peer had raised only after the peer died (the wait queued
// behind a gate, as the ordered pipeline queues its token waits chunks ahead): the failure's release must leave the
// wait satisfied, and the stream's synchronize succeeds, since the signal came. Until 2026-11-28 the release moved
// the word 2^31 - 1 ahead, where the cyclic comparison reads a value already passed as not reached: the stream then
// waited until the teardown. args: memory (host: the gate is a host word).
PICKLE_CHILD(comm_signal_reached_before_a_peer_died) {
  std::uint32_t gate = 0;  // declared before the stream, which may still wait on it when an early check returns
  Communicator comm = make_comm(args.at(0));
  CHILD_CHECK(comm.memory_kind() == MemoryKind::Host, "a gate needs a host stream");
  Stream stream = comm.make_stream();
  if (comm.rank() == 1) {
    for (int i = 0; i < 3; ++i) comm.signal(stream, 0, 0);
    stream.synchronize();  // the word of rank 0 reads 3
    comm.barrier();
    ::kill(::getpid(), SIGKILL);
  }
  stream.impl().wait_value(&gate, 1);
  comm.wait(stream, 1, 0, 2);  // reached before the death, but not by the stream: it is at its gate
  comm.barrier();
  // Until the death is noticed (a signal to the peer is refused then); the stream stays at its gate meanwhile.
  Stream probe = comm.make_stream();
  Stopwatch watch;
  std::string what;
  bool noticed = false;
  while (!noticed && watch.seconds() < env::timeout_seconds() / 2) {
    noticed = throws_with([&] { comm.signal(probe, 1, 1); }, ErrorCode::Peer, "peer 1", what);
    if (!noticed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHILD_CHECK(noticed, "the death of peer 1 was not noticed in ", watch.seconds(), " s");
  std::atomic_ref<std::uint32_t>(gate).store(1, std::memory_order_release);
  Stopwatch passed;
  stream.synchronize();  // the signal had come: no error
  CHILD_CHECK(passed.seconds() < env::timeout_seconds() / 2, "the stream passed the wait after ", passed.seconds(),
              " s");
  probe.synchronize();
  return 0;
}

// A communicator destroyed while a stream still holds a wait on a peer's signal, behind work that has not run (a
// gate): the teardown does not wait for that stream (the check after the wait reads a record of the pair, not the
// communicator), and the stream is left at its gate. args: memory.
PICKLE_CHILD(comm_teardown_with_a_pending_wait) {
  std::optional<Communicator> held(make_comm(args.at(0)));
  std::uint32_t gate = 0;  // host memory: only host streams wait on it
  Stream stream = held->make_stream();
  if (held->rank() == 1 && stream.kind() == MemoryKind::Host) {
    stream.impl().wait_value(&gate, 1);
    held->wait(stream, 0, 0, 1);  // rank 0 never signals
  }
  held->barrier();
  Stopwatch teardown;
  held.reset();
  CHILD_CHECK(teardown.seconds() < env::timeout_seconds() / 2, "teardown took ", teardown.seconds(), " s");
  return 0;  // the stream, never opened, is dropped at its gate when it goes
}

// A communicator destroyed while rank 1's stream still waits on one of its words (the misuse that the contract
// forbids): the stream must neither crash nor hang, and what the wait stood for decides what its synchronize says.
// args: memory, then what rank 1's stream waits on:
// - "recv": Request::on_stream of a receive that rank 0 never sends: synchronize throws PeerError naming the receive
//   (the teardown released the wait without the data).
// - "signal": Communicator::wait for a signal that rank 0 never raises: synchronize throws PeerError naming the wait.
// - "recv_done": on_stream of a receive that completed (waited for on the host first): synchronize succeeds.
// Options after that:
// - "gated" (host memory only): the stream first waits on a word of this child that it opens only once the
//   communicator is gone, so that the stream reads the communicator's word after the teardown: the words must
//   outlive the communicator, not just be released.
// - "unwinding": both ranks destroy their communicators while unwinding from an error, rank 0 a second after rank 1:
//   no barrier and no goodbye, so that rank 1's teardown itself must release the waits (otherwise rank 0's goodbye
//   does).
PICKLE_CHILD(comm_destroyed_while_a_stream_waits) {
  const std::string what_waits = args.at(1);
  const bool gated = std::find(args.begin() + 2, args.end(), "gated") != args.end();
  const bool unwinding = std::find(args.begin() + 2, args.end(), "unwinding") != args.end();
  std::uint32_t gate = 0;  // declared before the stream, which may still wait on it
  std::optional<Communicator> held(make_comm(args.at(0)));
  const int rank = held->rank();
  CHILD_CHECK(!gated || held->memory_kind() == MemoryKind::Host, "a gate needs a host stream");
  Stream stream = held->make_stream();
  constexpr std::size_t kBytes = 1024;
  Buffer buffer = held->alloc(kBytes);
  if (what_waits == "recv_done" && rank == 0) {
    fill(*held, buffer.data(), kBytes, 7);
    held->send(1, 7, buffer.data(), kBytes).wait();
  }
  if (rank == 1) {
    if (gated) stream.impl().wait_value(&gate, 1);
    if (what_waits == "signal") {
      held->wait(stream, 0, 3, 1);  // rank 0 never signals
    } else {
      Request recv = held->recv(0, 7, buffer.data(), kBytes);  // rank 0 sends only for "recv_done"
      if (what_waits == "recv_done") {
        recv.wait();
        CHILD_CHECK(count_wrong(*held, buffer.data(), kBytes, 7) == 0, "the received data is wrong");
      }
      recv.on_stream(stream);
    }
  }
  held->barrier();
  Stopwatch watch;
  // Without synchronizing the stream.
  if (unwinding) {
    if (rank == 0) std::this_thread::sleep_for(std::chrono::seconds(1));  // alive until rank 1's teardown is done
    try {
      Communicator doomed = std::move(*held);
      throw std::runtime_error("an application error");
    } catch (const std::runtime_error&) {
    }
  }
  held.reset();
  std::atomic_ref<std::uint32_t>(gate).store(1, std::memory_order_release);
  if (rank == 0) return 0;
  std::string what;
  if (what_waits == "recv_done") {
    stream.synchronize();
  } else {
    const std::string needle =
        what_waits == "signal" ? "rank 1 -> peer 0: wait for signal 3 to reach 1: the pair with peer 0 failed"
                               : "rank 1 -> peer 0: recv of 1024 bytes (tag 7): the communicator was destroyed "
                                 "before this receive completed";
    CHILD_CHECK(throws_with([&] { stream.synchronize(); }, ErrorCode::Peer, needle, what), what);
    std::fprintf(stderr, "rank 1: %s\n", what.c_str());
    // Unwinding, no goodbye came: the failure is the teardown's own.
    CHILD_CHECK(!unwinding || what.find("rank 1 destroyed its communicator") != std::string::npos, what);
    stream.synchronize();  // reported once; the stream goes on
  }
  CHILD_CHECK(watch.seconds() < env::timeout_seconds() / 2, "teardown and synchronize took ", watch.seconds(), " s");
  return 0;
}

// Over shm, the sender dies while its stream is still copying a large message into the staging ring (small chunks,
// two slots: it takes seconds). The release of the failed pair lets queued copies run through the released ring
// flags; the receive must then fail with PeerError, not complete with whatever the ring held. (Were the message all
// there before the death, the data must be exact.) args: memory.
PICKLE_CHILD(shm_sender_dies_mid_copy) {
  Communicator comm = make_comm(args.at(0));
  const std::size_t bytes = std::size_t{128} << 20;
  const std::uint64_t seed = 77;
  Buffer buffer = comm.alloc(bytes);
  if (comm.rank() == 1) {
    fill(comm, buffer.data(), bytes, seed + 1);  // not the sender's pattern
    Request recv = comm.recv(0, 0, buffer.data(), bytes);
    comm.barrier();
    try {
      recv.wait();
    } catch (const PeerError& e) {
      std::fprintf(stderr, "rank 1: the receive failed: %s\n", e.what());
      return 0;
    }
    const std::size_t wrong = count_wrong(comm, buffer.data(), bytes, seed);
    CHILD_CHECK(wrong == 0, "the receive completed, but ", wrong, " of ", bytes, " bytes are not the sender's");
    return 0;
  }
  fill(comm, buffer.data(), bytes, seed);
  comm.barrier();
  Request send = comm.send(1, 0, buffer.data(), bytes);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ::kill(::getpid(), SIGKILL);
  return 0;
}

// More receives than completion slots (4096 per peer) in flight: a receive waits for an earlier one's slot to free,
// without blocking the sender, and every message still lands in its own buffer.
PICKLE_CHILD(comm_slot_reuse) {
  Communicator comm = make_comm(args.at(0));
  constexpr int kMessages = 5000;
  constexpr std::size_t kBytes = 8;
  Buffer buffer = comm.alloc(kMessages * kBytes);
  if (comm.rank() == 0) {
    std::vector<std::uint64_t> values(kMessages);
    for (int i = 0; i < kMessages; ++i) values[i] = 0x5107000000000000ull + static_cast<std::uint64_t>(i);
    auto stream = device::make_stream(comm.memory_kind(), std::max(0, comm.device()));
    stream->copy(buffer.data(), values.data(), kMessages * kBytes);
    stream->synchronize();
    comm.barrier();
    std::vector<Request> sends;
    for (int i = 0; i < kMessages; ++i) sends.push_back(comm.send(1, 0, static_cast<char*>(buffer.data()) + i * kBytes, kBytes));
    for (auto& s : sends) s.wait();
  } else {
    comm.barrier();
    std::vector<Request> recvs;
    for (int i = 0; i < kMessages; ++i) recvs.push_back(comm.recv(0, 0, static_cast<char*>(buffer.data()) + i * kBytes, kBytes));
    for (auto& r : recvs) r.wait();
    auto host = read_back(comm, buffer.data(), kMessages * kBytes);
    for (int i = 0; i < kMessages; ++i) {
      std::uint64_t value;
      std::memcpy(&value, host.data() + i * kBytes, kBytes);
      CHILD_CHECK(value == 0x5107000000000000ull + static_cast<std::uint64_t>(i), "message ", i, " holds ", value);
    }
  }
  comm.barrier();
  return 0;
}

// Staged net receives (GPU memory, or PICKLE_NET_STAGING=1), each waited on before the next is posted: each one's
// pinned staging buffer goes back to the pool once its copy into place is done, so the loop reuses one or two of them
// (the next receive may come before the previous one's return has run on the staging stream, never before the one
// ahead of it) and registers no more memory with the net transport, whatever the number of receives.
PICKLE_CHILD(comm_staged_recv_reuse) {
  Communicator comm = make_comm(args.at(0));
  constexpr int kMessages = 100;
  constexpr std::size_t kBytes = 1 << 20;
  Buffer buffer = comm.alloc(kBytes);
  if (comm.rank() == 0) {
    for (int i = 0; i < kMessages; ++i) {
      fill(comm, buffer.data(), kBytes, 700 + i);
      comm.send(1, 0, buffer.data(), kBytes).wait();
    }
  } else {
    const std::uint64_t registered_before = comm.stats().net.ipc_opens;
    for (int i = 0; i < kMessages; ++i) {
      comm.recv(0, 0, buffer.data(), kBytes).wait();
      const std::size_t wrong = count_wrong(comm, buffer.data(), kBytes, 700 + i);
      CHILD_CHECK(wrong == 0, "message ", i, ": ", wrong, " wrong bytes");
    }
    const std::uint64_t registered = comm.stats().net.ipc_opens - registered_before;
    std::fprintf(stderr, "rank 1: %d staged receives registered %llu staging buffers\n", kMessages,
                 static_cast<unsigned long long>(registered));
    CHILD_CHECK(registered <= 2, kMessages, " receives, one at a time, registered ", registered,
                " staging buffers: they are not going back to the pool");
  }
  // Then a burst of receives at once, twice: the pool grows to hold those in use at once (buffers return, on GPU
  // memory, from a CUDA host callback, which must not free them there and then) and keeps them for the second burst.
  constexpr int kBurst = 12;
  std::uint64_t registered_after_first_burst = 0;
  for (int round = 0; round < 2; ++round) {
    Buffer burst = comm.alloc(kBurst * kBytes);
    std::vector<Request> requests;
    for (int i = 0; i < kBurst; ++i) {
      char* part = static_cast<char*>(burst.data()) + i * kBytes;
      if (comm.rank() == 0) fill(comm, part, kBytes, 900 + i);
      requests.push_back(comm.rank() == 0 ? comm.send(1, 1, part, kBytes) : comm.recv(0, 1, part, kBytes));
    }
    for (auto& request : requests) request.wait();
    for (int i = 0; i < kBurst && comm.rank() == 1; ++i) {
      const std::size_t wrong = count_wrong(comm, static_cast<char*>(burst.data()) + i * kBytes, kBytes, 900 + i);
      CHILD_CHECK(wrong == 0, "round ", round, ", burst message ", i, ": ", wrong, " wrong bytes");
    }
    comm.barrier();  // every buffer of the burst is back (a receive's returns from its copy, just after it completed)
    const std::uint64_t registered = comm.stats().net.ipc_opens;
    std::fprintf(stderr, "rank %d: after burst %d: %llu registrations, %llu closed, %llu hits\n", comm.rank(), round,
                 static_cast<unsigned long long>(registered),
                 static_cast<unsigned long long>(comm.stats().net.ipc_closes),
                 static_cast<unsigned long long>(comm.stats().net.cache_hits));
    if (round == 0) registered_after_first_burst = registered;
    // Every buffer stays in the pool: none is closed, and the pool never holds more than were in use at once (at most
    // the burst), over both bursts: a second burst that could not reuse the first's buffers would register its own
    // again and pass the burst. How many are in use at once depends on timing, on both memories: on GPU memory a
    // receive's buffer returns from the staging stream after its copy out (one H100: 7-8 at once in the first burst,
    // 11-12 in the second, docs/results/2026-11-25d-h100x1.md); on host memory an early message's receive may
    // complete, and give its buffer back, before the last receive of the burst is posted (a loaded 2-core machine:
    // 11 buffers registered after the first burst, 12 after the second, so an earlier check that the second burst
    // register none was wrong and failed one run in fifteen there).
    const std::uint64_t closed = comm.stats().net.ipc_closes;
    CHILD_CHECK(closed == 0, "rank ", comm.rank(), ": ", closed, " staging buffer registrations were closed");
    CHILD_CHECK(registered <= kBurst, "rank ", comm.rank(), ": ", registered,
                " staging buffers registered for bursts of ", kBurst, " (", registered_after_first_burst,
                " after the first): buffers are not going back to the pool, or the first burst's were not kept");
  }
  comm.barrier();
  return 0;
}

// A mapping released while a stream of the sender waits for the receiver: rank 1 frees the buffer it received into
// and posts a receive into a new one (whose announcement releases the old one), while rank 0's stream waits for rank
// 1's signal, which rank 1 raises only once that receive has its data. Closing the old mapping waits until every
// stream of rank 0's device is idle (on GPU memory); done on rank 0's progress thread, it held up the new post
// behind it, so the send never matched and both ranks timed out. args: memory, then "cudaMalloc" for rank 1's
// buffers to come from cudaMalloc (closed with cudaIpcCloseMemHandle) rather than VMM.
PICKLE_CHILD(comm_release_while_a_stream_waits) {
  Communicator comm = make_comm(args.at(0));
  constexpr std::size_t kBytes = (1 << 20) + 5;
  const bool legacy = args.size() > 1 && args[1] == "cudaMalloc";
  auto fresh_buffer = [&] {
    return device::allocate(comm.memory_kind(), kBytes, std::max(0, comm.device()),
                            legacy ? device::AllocMethod::CudaMalloc : device::AllocMethod::Default);
  };
  Stream stream = comm.make_stream();
  if (comm.rank() == 0) {
    Buffer src = comm.alloc(kBytes);
    fill(comm, src.data(), kBytes, 51);
    comm.send(1, 0, src.data(), kBytes).wait();
    comm.wait(stream, 1, 0, 1);  // held until rank 1 has the second message
    comm.barrier();              // rank 1 frees the first buffer and posts into a new one
    fill(comm, src.data(), kBytes, 52);
    Stopwatch watch;
    comm.send(1, 0, src.data(), kBytes).wait();
    stream.synchronize();
    std::fprintf(stderr, "rank 0: the second send and the stream's wait took %.3f s\n", watch.seconds());
    CHILD_CHECK(comm.stats().ipc.ipc_closes == 1 || comm.transport(1) != "ipc", "closes: ", comm.stats().ipc.ipc_closes);
  } else {
    auto first = fresh_buffer();
    comm.recv(0, 0, first->data(), kBytes).wait();
    CHILD_CHECK(count_wrong(comm, first->data(), kBytes, 51) == 0, "wrong bytes in the first message");
    comm.barrier();
    first.reset();
    auto second = fresh_buffer();  // its announcement releases the first
    comm.recv(0, 0, second->data(), kBytes).wait();
    CHILD_CHECK(count_wrong(comm, second->data(), kBytes, 52) == 0, "wrong bytes in the second message");
    comm.signal(stream, 0, 0);
    stream.synchronize();
  }
  comm.barrier();
  return 0;
}

// Receives posted while a stream of the receiver waits for the sender (a stream wait on the sender's signal, as a
// consumer's stream would, or a benchmark's gate), in bursts larger than any before: posting them must not wait for
// that stream. Freeing pinned staging memory there (cudaHostUnregister) waits until every stream of the device is
// idle, so the receives never went out, the sender never heard of them and never signalled: `pickle bench p2p` over
// net on GPU memory hung that way at its second repeat. Rank 0 raises the signal only once it has heard of every
// receive of the burst. args: memory.
PICKLE_CHILD(comm_staged_recv_while_a_stream_waits) {
  Communicator comm = make_comm(args.at(0));
  constexpr std::size_t kBytes = 256 << 10;
  constexpr int kTag = 3;
  const int sizes[] = {10, 3, 16};  // each burst returns its buffers; a larger one then needs more
  Stream stream = comm.make_stream();
  std::uint32_t signals = 0;
  for (int burst = 0; burst < 3; ++burst) {
    const int count = sizes[burst];
    Buffer data = comm.alloc(count * kBytes);
    std::vector<Request> requests;
    if (comm.rank() == 0) {
      fill_messages(comm, data.data(), count, kBytes, 40 * burst);
      const std::size_t heard = await_posted_receives(comm, 1, kTag, count, env::timeout_seconds());
      CHILD_CHECK(heard == static_cast<std::size_t>(count), "burst ", burst, ": heard of ", heard, " of ", count,
                  " receives while rank 1's stream waited for rank 0");
      comm.signal(stream, 1, 0);
      for (int i = 0; i < count; ++i) {
        requests.push_back(comm.send(1, kTag, static_cast<char*>(data.data()) + i * kBytes, kBytes));
      }
    } else {
      comm.wait(stream, 0, 0, ++signals);  // held until rank 0 has heard of this burst's receives
      for (int i = 0; i < count; ++i) {
        requests.push_back(comm.recv(0, kTag, static_cast<char*>(data.data()) + i * kBytes, kBytes));
      }
    }
    for (auto& request : requests) request.wait();
    stream.synchronize();
    if (comm.rank() == 1) {
      const std::string wrong = first_wrong_message(comm, data.data(), count, kBytes, 40 * burst);
      CHILD_CHECK(wrong.empty(), "burst ", burst, ", ", wrong);
    }
    comm.barrier();
  }
  return 0;
}

// Staged sends queued behind a stream that waits for the peer, as `pickle bench p2p` queues them behind its gate:
// every call must return before the stream runs. Each staged send puts a few operations per piece on the caller's
// stream, and a CUDA stream's queue holds about a thousand: with fixed 4 MiB pieces, ten 256 MiB sends blocked in
// the enqueue for good, since the stream waited for a signal that rank 0 would send only once all were enqueued.
// args: memory kind, bytes per message, messages.
PICKLE_CHILD(comm_staged_sends_behind_a_waiting_stream) {
  Communicator comm = make_comm(args.at(0));
  const std::size_t bytes = std::stoull(args.at(1));
  const int count = std::stoi(args.at(2));
  constexpr int kTag = 5;
  Buffer data = comm.alloc(bytes * static_cast<std::size_t>(count));
  auto message = [&](int i) { return static_cast<char*>(data.data()) + static_cast<std::size_t>(i) * bytes; };
  Stream stream = comm.make_stream();
  std::vector<Request> requests;
  if (comm.rank() == 0) {
    fill_messages(comm, data.data(), count, bytes, 70);
    // Every receive heard of first, so that each send is matched at call time and joins the stream.
    const std::size_t heard = await_posted_receives(comm, 1, kTag, count, env::timeout_seconds());
    CHILD_CHECK(heard == static_cast<std::size_t>(count), "heard of ", heard, " of ", count, " receives");
    comm.wait(stream, 1, 0, 1);  // the gate: rank 1 opens it once this rank has enqueued every send
    for (int i = 0; i < count; ++i) requests.push_back(comm.send(1, kTag, message(i), bytes, &stream));
    std::fprintf(stderr, "rank 0: %d sends of %zu bytes enqueued behind the closed gate\n", count, bytes);
    comm.barrier();  // rank 1 opens the gate after this: a send that blocked in its enqueue never gets here
  } else {
    for (int i = 0; i < count; ++i) requests.push_back(comm.recv(0, kTag, message(i), bytes));
    comm.barrier();
    comm.signal(stream, 0, 0);
  }
  for (auto& request : requests) request.wait();
  stream.synchronize();
  if (comm.rank() == 1) {
    const std::string wrong = first_wrong_message(comm, data.data(), count, bytes, 70);
    CHILD_CHECK(wrong.empty(), wrong);
  }
  comm.barrier();
  return 0;
}

// A net receive whose preparation fails for want of a resource fails alone, naming itself, and the pair stays in
// step: the same receive posted again gets the peer's message. The resource here is its staging buffer (host memory,
// PICKLE_NET_STAGING=1): the process may not make files as large as the buffer (RLIMIT_FSIZE), so the memfd behind
// it cannot be sized; on a GPU the same place fails when pinned memory runs out.
PICKLE_CHILD(comm_net_recv_refused) {
  Communicator comm = make_comm(args.at(0));
  constexpr std::size_t kBytes = (2u << 20) + 1;  // staged through a 4 MiB buffer
  Buffer buffer = comm.alloc(kBytes);
  if (comm.rank() == 0) {
    fill(comm, buffer.data(), kBytes, 31);
    comm.barrier();
    comm.send(1, 0, buffer.data(), kBytes).wait();
  } else {
    ::signal(SIGXFSZ, SIG_IGN);  // ftruncate past the limit fails with EFBIG instead of killing the process
    rlimit saved{};
    CHILD_CHECK(::getrlimit(RLIMIT_FSIZE, &saved) == 0, "getrlimit");
    rlimit low = saved;
    low.rlim_cur = 3u << 20;
    CHILD_CHECK(::setrlimit(RLIMIT_FSIZE, &low) == 0, "setrlimit");
    std::string what;
    const bool refused = throws_with([&] { comm.recv(0, 0, buffer.data(), kBytes); }, ErrorCode::System,
                                     cat("rank 1 -> peer 0: recv of ", kBytes, " bytes"), what);
    CHILD_CHECK(::setrlimit(RLIMIT_FSIZE, &saved) == 0, "setrlimit back");
    CHILD_CHECK(refused, what);
    std::fprintf(stderr, "rank 1: refused: %s\n", what.c_str());
    comm.barrier();
    try {
      comm.recv(0, 0, buffer.data(), kBytes).wait();
    } catch (const Error& e) {
      CHILD_CHECK(false, "the receive posted again failed: ", e.what());
    }
    const std::size_t wrong = count_wrong(comm, buffer.data(), kBytes, 31);
    CHILD_CHECK(wrong == 0, wrong, " wrong bytes");
  }
  comm.barrier();
  return 0;
}

// posted_receives: rank 0 hears of rank 1's posts, counts them down as its sends match them, and the data of the
// sends that matched at call time (copied on the caller's stream) arrives intact.
PICKLE_CHILD(comm_posted_receives) {
  Communicator comm = make_comm(args.at(0));
  constexpr int kPosts = 5, kTag = 9;
  constexpr std::size_t kBytes = 4096 + 3;
  Buffer buffer = comm.alloc(kPosts * kBytes);
  std::string what;
  CHILD_CHECK(throws_with([&] { (void)comm.posted_receives(comm.rank(), kTag); }, ErrorCode::InvalidArgument,
                          "posted_receives", what),
              what);
  if (comm.rank() == 1) {
    std::vector<Request> recvs;
    for (int i = 0; i < kPosts; ++i) recvs.push_back(comm.recv(0, kTag, static_cast<char*>(buffer.data()) + i * kBytes, kBytes));
    CHILD_CHECK(comm.posted_receives(0, kTag) == 0, "rank 0 posted nothing, yet ", comm.posted_receives(0, kTag));
    for (auto& r : recvs) r.wait();
    const std::string wrong = first_wrong_message(comm, buffer.data(), kPosts, kBytes, 100);
    CHILD_CHECK(wrong.empty(), wrong);
  } else {
    fill_messages(comm, buffer.data(), kPosts, kBytes, 100);
    const std::size_t heard = await_posted_receives(comm, 1, kTag, kPosts, 20);
    CHILD_CHECK(heard == kPosts, "heard of ", heard, " posts");
    CHILD_CHECK(comm.posted_receives(1, kTag + 1) == 0, "posts on another tag");
    Stream stream = comm.make_stream();
    std::vector<Request> sends;
    for (int i = 0; i < 2; ++i) sends.push_back(comm.send(1, kTag, static_cast<char*>(buffer.data()) + i * kBytes, kBytes, &stream));
    CHILD_CHECK(comm.posted_receives(1, kTag) == kPosts - 2, "after 2 sends: ", comm.posted_receives(1, kTag));
    for (int i = 2; i < kPosts; ++i) sends.push_back(comm.send(1, kTag, static_cast<char*>(buffer.data()) + i * kBytes, kBytes));
    CHILD_CHECK(comm.posted_receives(1, kTag) == 0, "after every send: ", comm.posted_receives(1, kTag));
    for (auto& s : sends) s.wait();
  }
  comm.barrier();
  return 0;
}

// A send's on_stream() lets later work on the stream overwrite the source buffer only after the copy read it: when
// the copy ran on that same stream (matched at call time: no wait is enqueued, stream order suffices) and when it
// ran on a copy stream (matched late, once the post arrived: the stream waits for the completion word). The
// receiver must see the first pattern, never the second.
PICKLE_CHILD(comm_send_on_stream_then_reuse) {
  Communicator comm = make_comm(args.at(0));
  constexpr std::size_t kBytes = (128u << 20) + 5;  // a copy that takes milliseconds, even on host memory
  constexpr int kTag = 12;
  Buffer buffer = comm.alloc(kBytes), second = comm.alloc(kBytes);
  for (int round = 0; round < 2; ++round) {
    const bool late = round == 1;
    if (comm.rank() == 0) {
      fill(comm, buffer.data(), kBytes, 500 + round);
      fill(comm, second.data(), kBytes, 900 + round);
    }
    comm.barrier();  // filling takes a while: rank 1's late post must come well after the send below
    if (comm.rank() == 0) {
      Stream stream = comm.make_stream();
      if (!late) {
        CHILD_CHECK(await_posted_receives(comm, 1, kTag, 1, 20) == 1, "round ", round, ": the post never arrived");
      }
      Request s = comm.send(1, kTag, buffer.data(), kBytes, &stream);
      s.on_stream(stream);  // late: returns once the peer's post (made 200 ms from now) matched the send
      // The source's next contents, at both ends: a small overwrite that raced ahead would finish long before the
      // send's copy reaches one of them, whichever way that copy runs (memcpy may copy from the end).
      constexpr std::size_t kEnd = 1u << 20;
      stream.impl().copy(buffer.data(), second.data(), kEnd);
      stream.impl().copy(static_cast<char*>(buffer.data()) + kBytes - kEnd, second.data(), kEnd);
      stream.synchronize();
      s.wait();
    } else {
      if (late) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      Request r = comm.recv(0, kTag, second.data(), kBytes);
      r.wait();
      const std::size_t wrong = count_wrong(comm, second.data(), kBytes, 500 + round);
      CHILD_CHECK(wrong == 0, "round ", round, (late ? " (late)" : " (at call time)"), ": ", wrong,
                  " bytes differ from what was sent");
    }
    comm.barrier();
  }
  return 0;
}

// Back-to-back sends on one stream, held behind a signal wait (rank 1 signals 300 ms later), then each on_stream() on
// that stream and the source overwritten there: every message arrives intact, and once the stream has synchronized
// every send has completed (with completion lanes, on CUDA, their writes went to the stream's lane, which on_stream
// joins). Then a ping-pong, where each send follows a wait: no write goes to a lane. args[1]: the lane writes expected
// of the burst: "all-but-the-first" (CUDA with completion lanes, the default) or "none".
PICKLE_CHILD(comm_burst_completion_lanes) {
  Communicator comm = make_comm(args.at(0));
  const bool lanes_expected = args.at(1) == "all-but-the-first";
  constexpr int kMessages = 48, kTag = 21, kPingTag = 22, kRounds = 20;
  constexpr std::size_t kBytes = (1u << 20) + 7;
  Buffer buffer = comm.alloc(kMessages * kBytes), overwrite = comm.alloc(kBytes), ping = comm.alloc(4096);
  Stream stream = comm.make_stream();
  if (comm.rank() == 0) {
    fill_messages(comm, buffer.data(), kMessages, kBytes, 300);
    fill(comm, overwrite.data(), kBytes, 999);
    CHILD_CHECK(await_posted_receives(comm, 1, kTag, kMessages, 20) == kMessages, "the posts never arrived");
    const std::uint64_t lane_writes_before = comm.stats().ipc.completion_lane_writes;
    comm.wait(stream, 1, 0, 1);  // held until rank 1 signals, once every send below is enqueued
    std::vector<Request> sends;
    for (int i = 0; i < kMessages; ++i) {
      sends.push_back(comm.send(1, kTag, static_cast<char*>(buffer.data()) + i * kBytes, kBytes, &stream));
    }
    for (auto& s : sends) s.on_stream(stream);
    // Right after the stream passed its waits on the sends (nothing queued after them that would give a lane time):
    // every send is complete, its word written.
    stream.synchronize();
    int incomplete = 0;
    for (auto& s : sends) incomplete += s.test() ? 0 : 1;
    CHILD_CHECK(incomplete == 0, incomplete,
                " sends not complete once their stream, which waited on them, synchronized");
    // The sources rewritten: the receiver checks that what it got is what was sent, not this.
    for (int i = 0; i < kMessages; ++i) {
      stream.impl().copy(static_cast<char*>(buffer.data()) + i * kBytes, overwrite.data(), kBytes);
    }
    stream.synchronize();
    const std::uint64_t lane_writes = comm.stats().ipc.completion_lane_writes - lane_writes_before;
    const std::uint64_t expected = lanes_expected ? kMessages - 1 : 0;
    CHILD_CHECK(lane_writes == expected, "the burst wrote ", lane_writes, " completions on a lane, expected ",
                expected);
  } else {
    std::vector<Request> recvs;
    for (int i = 0; i < kMessages; ++i) {
      recvs.push_back(comm.recv(0, kTag, static_cast<char*>(buffer.data()) + i * kBytes, kBytes));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 0 enqueues its burst meanwhile
    comm.signal(stream, 0, 0);                                    // and opens rank 0's gate
    stream.synchronize();
    for (auto& r : recvs) r.wait();
    const std::string wrong = first_wrong_message(comm, buffer.data(), kMessages, kBytes, 300);
    CHILD_CHECK(wrong.empty(), wrong);
  }
  comm.barrier();
  // The ping-pong: each send waits (on the stream) for the answer to the one before.
  const std::uint64_t before = comm.stats().ipc.completion_lane_writes;
  const int peer = 1 - comm.rank();
  Request last;
  for (int round = 0; round < kRounds; ++round) {
    if (comm.rank() == 0) {
      last = comm.send(peer, kPingTag, ping.data(), 4096, &stream);
      comm.recv(peer, kPingTag, ping.data(), 4096).on_stream(stream);
    } else {
      comm.recv(peer, kPingTag, ping.data(), 4096).on_stream(stream);
      last = comm.send(peer, kPingTag, ping.data(), 4096, &stream);
    }
  }
  last.on_stream(stream);
  stream.synchronize();
  const std::uint64_t ping_lane_writes = comm.stats().ipc.completion_lane_writes - before;
  CHILD_CHECK(ping_lane_writes == 0, "a ping-pong wrote ", ping_lane_writes, " completions on a lane");
  comm.barrier();
  return 0;
}

// A recv whose sender never sends times out (PICKLE_TIMEOUT of a second or two) instead of hanging.
PICKLE_CHILD(comm_timeout) {
  Communicator comm = make_comm(args.at(0));
  Buffer buffer = comm.alloc(1024);
  const double timeout = env::timeout_seconds();
  if (comm.rank() == 0) {
    // Stay alive (and silent) past rank 1's timeout, since leaving earlier would be a peer failure, not a timeout;
    // but reach the barrier below well within a timeout of rank 1 reaching it (at about `timeout`).
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(timeout * 1500)));
  } else {
    Request r = comm.recv(0, 3, buffer.data(), 1024);
    Stopwatch watch;
    std::string what;
    CHILD_CHECK(throws_with([&] { r.wait(); }, ErrorCode::Timeout, "rank 1 -> peer 0: recv of 1024 bytes", what), what);
    CHILD_CHECK(watch.seconds() < timeout + 3, "timeout took ", watch.seconds(), " s");
  }
  comm.barrier();
  return 0;
}

// Every pair uses transport args[1] (e.g. "net" between ranks in separate network namespaces, which count as
// separate hosts); then a float allreduce over it must be exact.
PICKLE_CHILD(comm_transport_and_allreduce) {
  Communicator comm = make_comm(args.at(0));
  const int rank = comm.rank(), world = comm.world_size();
  for (int peer = 0; peer < world; ++peer) {
    if (peer == rank) continue;
    CHILD_CHECK(comm.transport(peer) == args.at(1), "rank ", rank, " -> peer ", peer, " uses ", comm.transport(peer),
                ", expected ", args.at(1));
  }
  constexpr std::size_t kCount = 300007;  // several chunks, not a multiple of the rank count
  Buffer data = comm.alloc(kCount * sizeof(float));
  auto* values = static_cast<float*>(data.data());
  for (std::size_t i = 0; i < kCount; ++i) values[i] = static_cast<float>((i % 1000) * (rank + 1));
  Stream stream = comm.make_stream();
  comm.allreduce(stream, values, values, kCount, DataType::F32, ReduceOp::Sum);
  stream.synchronize();
  const float ranks_sum = static_cast<float>(world * (world + 1) / 2);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < kCount; ++i) wrong += values[i] != static_cast<float>(i % 1000) * ranks_sum ? 1 : 0;
  CHILD_CHECK(wrong == 0, "rank ", rank, ": ", wrong, " wrong elements of ", kCount, " after the allreduce");
  comm.barrier();
  return 0;
}

// A rank's thread that blocks in a synchronous copy (GPU memory into pageable host memory, as tensor.cpu() does) on
// a stream that waits for a transfer must not hold that transfer up: pickle's own threads must not need a CUDA call
// that such a copy holds back. args[1]: which side blocks: "recv" (rank 0's stream waits for the receive, then copies
// the data out), "send" (rank 1 copies its source out behind the send on its stream) or "put" (rank 0's stream waits
// for rank 1's signal after a put, then copies the window out). Rank 0 checks the copied bytes.
PICKLE_CHILD(comm_blocking_copy_behind_transfer) {
  Communicator comm = make_comm(args.at(0));
  const std::string mode = args.at(1);
  const int rank = comm.rank();
  constexpr std::size_t kBytes = (4u << 20) + 3;  // several staging pieces and net chunks
  constexpr std::uint64_t kSeed = 4242;
  Buffer src = comm.alloc(kBytes), dst = comm.alloc(kBytes);
  Window window = comm.register_memory(dst.data(), kBytes);
  Stream stream = comm.make_stream();
  std::vector<std::uint8_t> copied(kBytes);
  if (rank == 1) fill(comm, src.data(), kBytes, kSeed);
  comm.barrier();
  if (rank == 1) {
    if (mode == "put") {
      comm.put(stream, window, 0, 0, src.data(), kBytes);
      comm.signal(stream, 0, 2);
      stream.synchronize();
    } else {
      Request sent = comm.send(0, 5, src.data(), kBytes, &stream);
      if (mode == "send") stream.impl().copy(copied.data(), src.data(), kBytes);  // blocks until the stream is there
      sent.wait();
    }
  } else {
    if (mode == "put") {
      comm.wait(stream, 1, 2, 1);
    } else {
      Request received = comm.recv(1, 5, dst.data(), kBytes);
      received.on_stream(stream);
    }
    if (mode == "send") stream.synchronize();
    stream.impl().copy(copied.data(), dst.data(), kBytes);  // blocks until the stream has the data
    stream.synchronize();
    const auto expected = pattern(kBytes, kSeed);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < kBytes; ++i) wrong += copied[i] != expected[i] ? 1 : 0;
    CHILD_CHECK(wrong == 0, "mode ", mode, ": ", wrong, " wrong bytes of ", kBytes, " copied out after the transfer");
  }
  comm.barrier();
  return 0;
}

}  // namespace pickle::test
