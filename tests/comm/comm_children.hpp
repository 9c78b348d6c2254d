#pragma once
// Rank programs of the communicator tests, shared by the CPU tests (host memory) and the GPU tests (CUDA memory):
// the same children run with "host" or "cuda" as their first argument.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <pickle/communicator.hpp>

#include "core/format.hpp"

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

}  // namespace pickle::test
