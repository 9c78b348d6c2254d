#include "ipc_cache.hpp"

#include <cstdlib>
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

}  // namespace

IpcCacheResult measure_ipc_cache(Store& store, Lockstep& lockstep, MemoryKind kind, int device, int steady) {
  IpcCacheResult result;
  result.bytes = kMessageBytes;
  const int rank = store.self().rank;
  const bool active = rank < 2;
  std::optional<Communicator> comm;
  std::optional<Stream> stream;
  Buffer buffer;  // rank 0: the message; rank 1: where it lands, the same allocation every time

  lockstep.begin_step();
  auto set_up = lockstep.phase("cache setup", [&] {
    if (!active) return std::string();
    comm.emplace(connect_pair_communicator(store, kind, device, kPortKey));
    stream.emplace(comm->make_stream());
    buffer = comm->alloc(kMessageBytes);
    if (rank == 0) fill_pattern(stream->impl(), buffer.data(), kMessageBytes, 0);
    return std::string(device::alloc_method_name(device::find_allocation(buffer.data()).method));
  });
  if (set_up.ok) {
    result.method = kind == MemoryKind::Host ? std::string("memfd") : set_up.payloads[1];
    for (int transfer = 0; transfer <= steady && !lockstep.failed(); ++transfer) {
      Request send;
      std::uint64_t opens_before = 0;
      lockstep.phase(cat("cache post ", transfer), [&] {
        if (!active) return std::string();
        opens_before = comm->stats().ipc.ipc_opens;
        if (rank == 0) send = comm->send(1, kTag, buffer.data(), kMessageBytes);  // waits for the receive
        if (rank == 1) poison(stream->impl(), buffer.data(), kMessageBytes);
        return std::string();
      });
      auto received = lockstep.phase(cat("cache recv ", transfer), [&] {
        if (rank != 1) return std::string();
        Stopwatch watch;
        comm->recv(0, kTag, buffer.data(), kMessageBytes).wait();
        double us = watch.micros();
        return cat(us, " ", count_wrong_at(stream->impl(), buffer.data(), kMessageBytes, /*sender=*/0));
      });
      auto done = lockstep.phase(cat("cache done ", transfer), [&] {
        if (!active) return std::string();
        if (rank == 0) send.wait();
        return cat(comm->stats().ipc.ipc_opens - opens_before);
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
  result.ran = true;
  if (lockstep.failed()) result.error = lockstep.error();

  // The communicator's teardown is collective (its last barrier), and rank 0's mapping of rank 1's buffer goes
  // with it, before either buffer is freed.
  lockstep.begin_step();
  lockstep.phase("cache close", [&] {
    if (stream) stream->synchronize();
    comm.reset();
    return std::string();
  });
  lockstep.phase("cache free", [&] {
    buffer = Buffer();
    stream.reset();
    return std::string();
  });
  return result;
}

}  // namespace pickle::bench
