#pragma once
// The background's data checks of `pickle bench interference`, on the GPU (16 GiB messages need neither host memory
// nor minutes of host time): the pattern kernels' self-check before the first row, and the count of wrong bytes in
// what a rank received. CUDA builds only.

#include <cstddef>
#include <cstdint>
#include <string>

#include "interference_plan.hpp"
#include "interference_rank_state.hpp"

namespace pickle::bench {

/// Wrong bytes of `data[0, bytes)` (any address) against `rank`'s pattern from byte 0, counted on the GPU.
std::uint64_t count_wrong_on_gpu(RankState& s, const void* data, std::size_t bytes, int rank, const std::string& what);

/// The device pattern kernels must produce and check exactly the host's pattern (pattern.hpp): fill a region,
/// compare it on the host, count it on the GPU (0), flip one byte, count again (1); and the same count at an odd
/// address (an allgather's section need not be 8-byte aligned). `scratch` holds at least `scratch_bytes`.
void self_check_pattern(RankState& s, void* scratch, std::size_t scratch_bytes);

/// Wrong bytes in what this rank received for one message of `bytes` under `roles`: p2p, rank 0's pattern over the
/// whole message; allgather, section r (of bytes/N, at r x bytes/N) holding rank r's pattern from byte 0, summed
/// over every section.
std::uint64_t count_received_wrong(RankState& s, const BackgroundRoles& roles, std::size_t bytes,
                                   const std::string& what);

}  // namespace pickle::bench
