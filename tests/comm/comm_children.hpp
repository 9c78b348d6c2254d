#pragma once
// Rank programs of the communicator tests, shared by the CPU tests (host memory) and the GPU tests (CUDA memory):
// the same children run with "host" or "cuda" as their first argument.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <pickle/communicator.hpp>

namespace pickle::test {

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

}  // namespace pickle::test
