#include "bootstrap/frame.hpp"

#include <cstring>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "core/wire.hpp"

namespace pickle::bootstrap {

bool is_known_type(std::uint16_t type) noexcept {
  return (type >= static_cast<std::uint16_t>(MessageType::Hello) && type <= static_cast<std::uint16_t>(MessageType::Attach)) ||
         (type >= static_cast<std::uint16_t>(MessageType::Ok) && type <= static_cast<std::uint16_t>(MessageType::Error));
}

const char* type_name(MessageType type) noexcept {
  switch (type) {
    case MessageType::Hello: return "Hello";
    case MessageType::Set: return "Set";
    case MessageType::Get: return "Get";
    case MessageType::Check: return "Check";
    case MessageType::Wait: return "Wait";
    case MessageType::Add: return "Add";
    case MessageType::Gather: return "Gather";
    case MessageType::Bye: return "Bye";
    case MessageType::Attach: return "Attach";
    case MessageType::Ok: return "Ok";
    case MessageType::Value: return "Value";
    case MessageType::Integer: return "Integer";
    case MessageType::Bool: return "Bool";
    case MessageType::Blobs: return "Blobs";
    case MessageType::Error: return "Error";
  }
  return "unknown";
}

FrameHeader decode_header(std::span<const std::byte> header, std::size_t max_payload) {
  if (header.size() != kFrameHeaderBytes) {
    throw ProtocolError(cat("store frame header of ", header.size(), " bytes, expected ", kFrameHeaderBytes));
  }
  const auto magic = load_le<std::uint32_t>(header.data());
  if (magic != kFrameMagic) {
    throw ProtocolError(cat("store frame with bad magic 0x", std::hex, magic, " (not a pickle store peer?)"));
  }
  const auto version = load_le<std::uint16_t>(header.data() + 4);
  if (version != kFrameVersion) {
    throw ProtocolError(cat("store frame of protocol version ", version, ", this pickle speaks ", kFrameVersion));
  }
  const auto type = load_le<std::uint16_t>(header.data() + 6);
  if (!is_known_type(type)) throw ProtocolError(cat("store frame of unknown message type ", type));
  const auto length = load_le<std::uint64_t>(header.data() + 8);
  if (length > max_payload) {
    throw ProtocolError(cat("store frame ", type_name(static_cast<MessageType>(type)), " announces ", length,
                            " payload bytes, above the limit of ", max_payload));
  }
  return FrameHeader{static_cast<MessageType>(type), length};
}

std::vector<std::byte> encode_frame(MessageType type, std::span<const std::byte> payload) {
  std::vector<std::byte> out;
  out.reserve(kFrameHeaderBytes + payload.size());
  store_le<std::uint32_t>(out, kFrameMagic);
  store_le<std::uint16_t>(out, kFrameVersion);
  store_le<std::uint16_t>(out, static_cast<std::uint16_t>(type));
  store_le<std::uint64_t>(out, payload.size());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

Frame decode_frame(std::span<const std::byte> bytes, std::size_t max_payload) {
  if (bytes.size() < kFrameHeaderBytes) {
    throw ProtocolError(cat("store frame truncated: ", bytes.size(), " bytes, shorter than the ", kFrameHeaderBytes,
                            "-byte header"));
  }
  FrameHeader header = decode_header(bytes.first(kFrameHeaderBytes), max_payload);
  const std::size_t available = bytes.size() - kFrameHeaderBytes;
  if (available < header.payload_bytes) {
    throw ProtocolError(cat("store frame ", type_name(header.type), " truncated: ", available, " of ",
                            header.payload_bytes, " payload bytes"));
  }
  if (available > header.payload_bytes) {
    throw ProtocolError(cat("store frame ", type_name(header.type), " followed by ", available - header.payload_bytes,
                            " stray bytes"));
  }
  auto payload = bytes.subspan(kFrameHeaderBytes);
  return Frame{header.type, std::vector<std::byte>(payload.begin(), payload.end())};
}

void FrameParser::feed(std::span<const std::byte> bytes) {
  // Compact before growing, so that a long-lived connection's buffer stays the size of one frame.
  if (offset_ > 0 && offset_ >= buffer_.size() / 2) {
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(offset_));
    offset_ = 0;
  }
  buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
}

std::optional<Frame> FrameParser::next() {
  if (buffered() < kFrameHeaderBytes) return std::nullopt;
  const std::byte* start = buffer_.data() + offset_;
  FrameHeader header = decode_header({start, kFrameHeaderBytes}, max_payload_);
  // payload_bytes <= max_payload_ here, so the addition cannot overflow.
  if (buffered() - kFrameHeaderBytes < header.payload_bytes) return std::nullopt;
  const std::byte* payload = start + kFrameHeaderBytes;
  Frame frame{header.type, std::vector<std::byte>(payload, payload + header.payload_bytes)};
  offset_ += kFrameHeaderBytes + header.payload_bytes;
  if (offset_ == buffer_.size()) {
    buffer_.clear();
    offset_ = 0;
  }
  return frame;
}

}  // namespace pickle::bootstrap
