#pragma once
// The packets of pickle's software switch (`pickle bench scenario switchml`, seed 002): SwitchML's in-network
// aggregation protocol over UDP. A worker cuts its int32 tensor into chunks of `numel` elements; chunk c travels in
// slot c % slots, and a slot carries one chunk at a time: a worker sends the next chunk of a slot only once the
// switch has returned the sum of the previous one. The switch adds the workers' chunks of a slot element by element
// and, when every worker's has arrived, sends the sum to all of them.
//
// Losses (UDP may drop, and the tests drop on purpose) are recovered as SwitchML recovers them: a worker resends a
// chunk whose sum has not come back within a while; the switch ignores a contribution it has counted already and
// answers a chunk it has finished with the sum again. To answer a late resend after faster workers have moved the
// slot on, the switch keeps two generations of each slot (SwitchML's "shadow copy"): the n-th use of a slot (its
// round) lives in generation n % 2, and round n + 2 can only start once every worker has sent round n + 1, which each
// sends only after it got round n's sum, so no worker can still need round n then.
//
// Fields are in the host's byte order: the switch and its workers are one job's processes on machines of one kind.

#include <cstddef>
#include <cstdint>

namespace pickle::bench::switchml {

inline constexpr std::uint32_t kMagic = 0x4C4D5350;  // "PSML" in little-endian memory

struct Header {
  std::uint32_t magic = kMagic;
  std::uint32_t slot = 0;
  std::uint32_t round = 0;   ///< how many times the sender used this slot before (across calls)
  std::uint32_t offset = 0;  ///< the chunk's first element in the tensor (echoed in the sum)
  std::uint16_t worker = 0;  ///< the sender's index; in a sum, the number of workers in it
  std::uint16_t numel = 0;   ///< int32 elements after the header
};
static_assert(sizeof(Header) == 20);

/// The largest chunk: 8 KiB of payload, within one loopback datagram (Ethernet's 1500-byte MTU takes 360).
inline constexpr std::size_t kMaxNumel = 2048;
/// Workers one switch serves (a slot's contributions are a bitmask).
inline constexpr int kMaxWorkers = 64;

}  // namespace pickle::bench::switchml
