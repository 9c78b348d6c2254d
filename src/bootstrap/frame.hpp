#pragma once
// The store's wire format. Every message is a frame: a fixed 16-byte header followed by a payload.
//
//   offset 0  u32 magic    0x54534B50, the bytes "PKST"
//   offset 4  u16 version  kFrameVersion
//   offset 6  u16 type     a MessageType
//   offset 8  u64 length   payload bytes that follow, at most the parser's limit
//
// All integers are little-endian. The parser validates a header completely before it keeps a single payload byte,
// so a header claiming 4 GiB costs 16 bytes, not 4 GiB. Payload fields are read through PayloadReader, which checks
// every length against what is left.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/wire.hpp"

namespace pickle::bootstrap {

inline constexpr std::uint32_t kFrameMagic = 0x54534B50u;  // "PKST" on the wire
inline constexpr std::uint16_t kFrameVersion = 1;
inline constexpr std::size_t kFrameHeaderBytes = 16;

/// Longest key (and barrier / gather name) the store accepts.
inline constexpr std::size_t kMaxKeyBytes = 4096;
/// Largest value of one key, and of one rank's allgather blob.
inline constexpr std::size_t kMaxValueBytes = std::size_t{64} << 20;
/// Largest payload of any frame: a value plus its key and fields, or an allgather answer.
inline constexpr std::size_t kMaxPayloadBytes = kMaxValueBytes + 64 * 1024;
/// Limit for a connection that has not said HELLO yet: a stranger cannot make the server buffer megabytes.
inline constexpr std::size_t kMaxHelloPayloadBytes = 8 * 1024;

/// Message types. Requests go from a client to rank 0's server, responses come back; each request gets exactly one
/// response except Bye, which gets none.
enum class MessageType : std::uint16_t {
  Hello = 1,   ///< rank, world size, token, wait ms: join the store; answered when every rank has joined
  Set = 2,     ///< key, value
  Get = 3,     ///< key, wait ms: answered with Value once the key exists
  Check = 4,   ///< key: answered with Bool at once
  Wait = 5,    ///< keys, wait ms: answered with Ok once every key exists
  Add = 6,     ///< key, delta: answered with Integer, the new value
  Gather = 7,  ///< name, blob, wait ms: answered with Blobs once every rank sent the same name (barrier, allgather)
  Bye = 8,     ///< the rank is done and will close its connection
  Attach = 9,  ///< rank, world size, token: one more connection of a rank that joined (concurrent calls); Ok at once

  Ok = 64,
  Value = 65,    ///< bytes
  Integer = 66,  ///< i64
  Bool = 67,     ///< u8 0 or 1
  Blobs = 68,    ///< u32 count, then count byte strings
  Error = 69,    ///< u32 ErrorCode, i32 peer rank (-1: none), message
};

/// Whether the number is a MessageType this version knows.
bool is_known_type(std::uint16_t type) noexcept;
/// "Hello", "Set", ... ("unknown" for anything else).
const char* type_name(MessageType type) noexcept;

struct FrameHeader {
  MessageType type{};
  std::uint64_t payload_bytes = 0;
};

/// Decodes and validates a header (exactly kFrameHeaderBytes bytes): bad magic, version or type, or a length above
/// max_payload, is a ProtocolError.
FrameHeader decode_header(std::span<const std::byte> header, std::size_t max_payload = kMaxPayloadBytes);

struct Frame {
  MessageType type{};
  std::vector<std::byte> payload;
};

/// Header + payload, ready to send.
std::vector<std::byte> encode_frame(MessageType type, std::span<const std::byte> payload);

/// Decodes a buffer that must hold exactly one frame: a truncated header or payload, or bytes after the frame,
/// is a ProtocolError (as are the header errors of decode_header).
Frame decode_frame(std::span<const std::byte> bytes, std::size_t max_payload = kMaxPayloadBytes);

/// Turns a byte stream into frames. Feed it whatever recv() returned; next() yields each complete frame.
/// A bad header throws ProtocolError from next(), before any of the payload it announces is kept.
class FrameParser {
 public:
  explicit FrameParser(std::size_t max_payload = kMaxPayloadBytes) : max_payload_(max_payload) {}

  void feed(std::span<const std::byte> bytes);
  /// The next complete frame, or nullopt when more bytes are needed.
  std::optional<Frame> next();
  /// Bytes received but not yet returned as a frame (a truncated frame at end of stream leaves this non-zero).
  std::size_t buffered() const noexcept { return buffer_.size() - offset_; }
  void set_max_payload(std::size_t max_payload) noexcept { max_payload_ = max_payload; }

 private:
  std::vector<std::byte> buffer_;
  std::size_t offset_ = 0;  // start of the unconsumed bytes in buffer_
  std::size_t max_payload_;
};


}  // namespace pickle::bootstrap
