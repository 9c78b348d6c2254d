#pragma once
// Messages on the control channel between two ranks of a communicator (a Unix socket per pair, which also carries
// file descriptors). The data never travels here: only announcements of memory and of posted receives.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace pickle::comm {

/// "This allocation of mine exists; map it." The fd (memfd or VMM handle) travels with the message.
struct ExportMessage {
  std::vector<std::byte> descriptor;  ///< device::serialize(MemoryDescriptor)
};

/// "My next receive from you on `tag` (the seq-th) goes to allocation `alloc_id` at `offset`; when you have
/// copied `bytes` there, write `generation` into completion slot `slot` that I keep for you."
struct RecvPostMessage {
  std::int32_t tag = 0;
  std::uint64_t seq = 0;
  std::uint64_t alloc_id = 0;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
  std::uint32_t slot = 0;
  std::uint32_t generation = 0;
  std::uint64_t net_addr = 0;  ///< net transport: where an RMA write lands, and the registration's key
  std::uint64_t net_key = 0;
};

/// "Your receive (tag, seq) cannot be served": the matching send failed.
struct SendFailedMessage {
  /// Why, which decides what the receiver does.
  enum class Failure : std::uint8_t {
    Mismatch = 0,       ///< the send does not fit the post (sizes): the receive fails with InvalidArgument
    NotWritten = 1,     ///< the send's write (net) or copy (ipc, shm: its stream refused it) could not be made, and
                        ///< nothing of it was: the receive fails with PeerError, and the pair goes on
    PartlyWritten = 2,  ///< net: a later piece's write could not be made after earlier ones left, which may still
                        ///< land: the receiver fails the pair (the sender has failed it already)
    CollectiveNotWritten = 3,  ///< net: a collective's send (tag < 0) could not be written: the collective cannot
                               ///< complete anywhere, so the receiver fails the pair (the sender has already)
  };
  std::int32_t tag = 0;
  std::uint64_t seq = 0;
  std::uint64_t send_bytes = 0;
  std::string reason;  ///< the sender's error message, for the receiver's error
  Failure failure = Failure::Mismatch;
};

/// "I am closing normally": an end of stream after this is not a failure.
struct GoodbyeMessage {};

/// shm transport: "the data of my send (tag, seq), matched with your post, starts at chunk `first_chunk` of my ring".
struct ShmSendMessage {
  std::int32_t tag = 0;
  std::uint64_t seq = 0;
  std::uint64_t bytes = 0;  ///< so that the receiver can skip the chunks of a receive it no longer has
  std::uint64_t first_chunk = 0;
};

/// shm transport: "a put of `bytes` into your part of window `window` at `offset` starts at chunk `first_chunk`".
struct ShmPutMessage {
  std::int32_t window = 0;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
  std::uint64_t first_chunk = 0;
};

/// shm transport: "once chunk `first_chunk` (a marker behind my earlier puts) arrived, set signal `slot` to `value`".
struct ShmSignalMessage {
  std::uint32_t slot = 0;
  std::uint32_t value = 0;
  std::uint64_t first_chunk = 0;
};

/// net transport: "a put of `bytes` carrying message id `message` is on its way into window `window` at `offset`"
/// (the receiver copies it into place from its staging buffer when the window is staged).
struct NetPutMessage {
  std::uint32_t message = 0;
  std::int32_t window = -1;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
};

/// net transport: "my put `message`, announced by a NetPutMessage, of `bytes` will never be written, for `reason`".
/// Its number was taken, and every later signal of the sender counts it, so the pair cannot stay in step: the receiver
/// fails the pair with this reason (the sender has failed it already), and the signals that waited for the put fail.
struct NetPutFailedMessage {
  std::uint32_t message = 0;
  std::uint64_t bytes = 0;
  std::string reason;  ///< the sender's error message, for the receiver's errors
};

/// net transport: "once my first `puts_before` puts to you have landed, set signal `slot` to `value`".
struct NetSignalMessage {
  std::uint32_t slot = 0;
  std::uint32_t value = 0;
  std::uint64_t puts_before = 0;
};

/// net transport: "my send matched your zero-byte recv in `slot`: set its word to `generation`" (nothing to write, and
/// the word may be on another host).
struct NetEmptySendMessage {
  std::uint32_t slot = 0;
  std::uint32_t generation = 0;
};

/// "The allocation `alloc_id` that I announced is gone (freed, and no receive into it is outstanding): unmap it."
/// Sent before the announcement of a new allocation, so that a peer's mappings follow the allocations that live.
struct ReleaseMessage {
  std::uint64_t alloc_id = 0;
};

using ControlMessage = std::variant<ExportMessage, RecvPostMessage, SendFailedMessage, GoodbyeMessage, ShmSendMessage,
                                    ShmPutMessage, ShmSignalMessage, NetPutMessage, NetSignalMessage,
                                    NetEmptySendMessage, ReleaseMessage, NetPutFailedMessage>;

std::vector<std::byte> encode(const ControlMessage& message);
/// Length-checked: anything malformed is a ProtocolError.
ControlMessage decode(std::span<const std::byte> bytes);

}  // namespace pickle::comm
