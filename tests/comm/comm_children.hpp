#pragma once
// Rank programs of the communicator tests, shared by the CPU tests (host memory) and the GPU tests (CUDA memory):
// the same children run with "host" or "cuda" as their first argument.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <pickle/communicator.hpp>
#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "core/env.hpp"
#include "core/format.hpp"
#include "device/memory.hpp"
#include "device/stream.hpp"

namespace pickle::test {

/// In a rank program (PICKLE_CHILD): when `cond` is false, prints where and why (the rest of the arguments, joined
/// by cat) to stderr and returns 1 from the child, so that the parent test sees the rank fail.
#define CHILD_CHECK(cond, ...)                                                                        \
  do {                                                                                                \
    if (!(cond)) {                                                                                    \
      std::fprintf(stderr, "check failed at %s:%d: %s: %s\n", __FILE__, __LINE__, #cond,             \
                   ::pickle::cat(__VA_ARGS__).c_str());                                               \
      return 1;                                                                                       \
    }                                                                                                 \
  } while (0)

/// A communicator from the torchrun variables the test set, of the kind named by `memory` ("host" or "cuda").
Communicator make_comm(const std::string& memory);

/// Byte `index` of the pattern identified by `seed`: position- and seed-dependent, never constant.
std::uint8_t pattern_byte(std::size_t index, std::uint64_t seed);

/// Writes the pattern into `bytes` at `ptr` (memory of the communicator's kind) and waits for it.
void fill(Communicator& comm, void* ptr, std::size_t bytes, std::uint64_t seed);
/// Copies `bytes` at `ptr` to the host.
std::vector<std::uint8_t> read_back(Communicator& comm, const void* ptr, std::size_t bytes);
/// Number of bytes at `ptr` that differ from the pattern.
std::size_t count_wrong(Communicator& comm, const void* ptr, std::size_t bytes, std::uint64_t seed);
/// `count` messages of `bytes` each, laid one after another from `base`: message i gets the pattern of seed
/// `first_seed` + i.
void fill_messages(Communicator& comm, void* base, int count, std::size_t bytes, std::uint64_t first_seed);
/// For messages laid out as fill_messages lays them: "message i: N wrong bytes" for the first that differs from its
/// pattern, or "" when every one is right.
std::string first_wrong_message(Communicator& comm, const void* base, int count, std::size_t bytes,
                                std::uint64_t first_seed);
/// Waits until this rank has heard of at least `count` receives that `peer` posted on `tag`, or `seconds` passed;
/// returns how many it has heard of (the caller checks it).
std::size_t await_posted_receives(Communicator& comm, int peer, int tag, std::size_t count, double seconds);

/// True when `fn` throws an Error of `code` whose message contains `needle`; `what` gets the message (or says that
/// nothing was thrown).
template <class Fn>
bool throws_with(Fn&& fn, ErrorCode code, const std::string& needle, std::string& what) {
  try {
    fn();
  } catch (const Error& e) {
    what = e.what();
    return e.code() == code && what.find(needle) != std::string::npos;
  }
  what = "(no exception)";
  return false;
}

/// A host stream that will refuse work. It waits for an event recorded behind a wait that nothing satisfies, on a
/// stream of its own; give_up() destroys that stream while it is stuck, which drops the record: `stream` then gives
/// its wait up, drops what was queued behind it, and takes nothing until its error is reported.
struct HostStreamThatGivesUp {
  std::uint32_t never = 0;
  std::unique_ptr<device::Event> event = device::make_event(MemoryKind::Host);  // kept as long as the wait on it
  std::unique_ptr<device::Stream> stuck = device::make_stream(MemoryKind::Host);
  std::shared_ptr<device::Stream> stream = device::make_stream(MemoryKind::Host);

  HostStreamThatGivesUp() {
    stuck->wait_value(&never, 1);
    stuck->record(*event);
    stream->wait(*event);
  }
  /// True once `stream` has given its wait up (false if it had not by PICKLE_TIMEOUT).
  bool give_up() {
    stuck.reset();
    const Deadline deadline = Deadline::after_seconds(env::timeout_seconds());
    while (!stream->idle_now() && !deadline.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return stream->idle_now();
  }
};

}  // namespace pickle::test
