#include "ipc_cache.hpp"

#include <cstdlib>
#include <memory>
#include <optional>

#include <pickle/communicator.hpp>
#include <pickle/stream.hpp>

#include "bench_communicator.hpp"
#include "core/clock.hpp"
#include "core/format.hpp"
#include "device/memory.hpp"
#include "memcpy_buffers.hpp"

namespace pickle::bench {
namespace {

constexpr const char* kPortKey = "bench/ipc/pickle/port";
constexpr int kTag = 11;
constexpr std::size_t kMessageBytes = 4096;

/// What the measurement holds on ranks 0 and 1 from set-up to teardown.
struct CacheSession {
  std::optional<Communicator> comm;
  std::optional<Stream> stream;
  Buffer buffer;  // rank 0: the message; rank 1: where it lands, the same allocation every time
};

/// The transfers: the first, then `steady` more, each in three agreed phases; the first failure ends them.
void measure_transfers(CacheSession& session, Lockstep& lockstep, int rank, int steady, IpcCacheResult& result) {
  const bool active = rank < 2;
  for (int transfer = 0; transfer <= steady && !lockstep.failed(); ++transfer) {
    Request send;
    std::uint64_t opens_before = 0;
    lockstep.phase(cat("cache post ", transfer), [&] {
      if (!active) return std::string();
      opens_before = session.comm->stats().ipc.ipc_opens;
      if (rank == 0) send = session.comm->send(1, kTag, session.buffer.data(), kMessageBytes);  // waits for the receive
      if (rank == 1) poison(session.stream->impl(), session.buffer.data(), kMessageBytes);
      return std::string();
    });
    auto received = lockstep.phase(cat("cache recv ", transfer), [&] {
      if (rank != 1) return std::string();
      Stopwatch watch;
      session.comm->recv(0, kTag, session.buffer.data(), kMessageBytes).wait();
      double us = watch.micros();
      return cat(us, " ", count_wrong_at(session.stream->impl(), session.buffer.data(), kMessageBytes, /*sender=*/0));
    });
    auto done = lockstep.phase(cat("cache done ", transfer), [&] {
      if (!active) return std::string();
      if (rank == 0) send.wait();
      return cat(session.comm->stats().ipc.ipc_opens - opens_before);
    });
    if (lockstep.failed()) break;
    char* end = nullptr;
    double us = std::strtod(received.payloads[1].c_str(), &end);
    result.wrong += std::strtoull(end, nullptr, 10);
    std::uint64_t opens = std::strtoull(done.payloads[0].c_str(), nullptr, 10) +
                          std::strtoull(done.payloads[1].c_str(), nullptr, 10);
    if (transfer == 0) {
      result.first_us = us;
      result.first_opens = opens;
    } else {
      result.steady_us.push_back(us);
      result.steady_opens += opens;
    }
  }
}

}  // namespace

void measure_ipc_cache(Store& store, Lockstep& lockstep, MemoryKind kind, int device, int steady,
                       IpcCacheResult& result) {
  result = IpcCacheResult{};
  result.bytes = kMessageBytes;
  const int rank = store.self().rank;
  const bool active = rank < 2;
  auto session = std::make_unique<CacheSession>();
  try {
    lockstep.begin_step();
    auto set_up = lockstep.phase("cache setup", [&] {
      if (!active) return std::string();
      session->comm.emplace(connect_pair_communicator(store, kind, device, kPortKey));
      session->stream.emplace(session->comm->make_stream());
      session->buffer = session->comm->alloc(kMessageBytes);
      if (rank == 0) fill_pattern(session->stream->impl(), session->buffer.data(), kMessageBytes, 0);
      return std::string(device::alloc_method_name(device::find_allocation(session->buffer.data()).method));
    });
    if (set_up.ok) {
      result.method = kind == MemoryKind::Host ? std::string("memfd") : set_up.payloads[1];
      measure_transfers(*session, lockstep, rank, steady, result);
    }
    result.ran = true;
    if (lockstep.failed()) result.error = lockstep.error();

    // The communicator's teardown is collective (its last barrier), and rank 0's mapping of rank 1's buffer goes
    // with it, before either buffer is freed.
    lockstep.begin_step();
    lockstep.phase("cache close", [&] {
      if (session->stream) session->stream->synchronize();
      session->comm.reset();
      return std::string();
    });
    lockstep.phase("cache free", [&] {
      session->buffer = Buffer();
      session->stream.reset();
      return std::string();
    });
  } catch (const LockstepBroken& e) {
    result.ran = true;
    result.error = e.message();
    // Not torn down: a send may still wait for the peer that is gone, and the communicator's goodbye (or a
    // stream's synchronize) with it (end_broken_run).
    (void)session.release();
    throw;
  }
}

}  // namespace pickle::bench
