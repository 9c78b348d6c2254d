#include "comm/control.hpp"

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "core/overloaded.hpp"
#include "core/wire.hpp"

namespace pickle::comm {
namespace {

enum class ControlType : std::uint8_t {
  Export = 1,
  RecvPost = 2,
  SendFailed = 3,
  Goodbye = 4,
  ShmSend = 5,
  ShmPut = 6,
  ShmSignal = 7,
  NetPut = 8,
  NetSignal = 9,
  NetEmptySend = 10,
  Release = 11,
  NetPutFailed = 12,
};
constexpr std::uint32_t kControlMagic = 0x50434B43;  // "PCKC"
constexpr std::size_t kMaxDescriptorBytes = 4096;
constexpr std::size_t kMaxReasonBytes = 4096;

}  // namespace

std::vector<std::byte> encode(const ControlMessage& message) {
  PayloadWriter w;
  w.u32(kControlMagic);
  std::visit(Overloaded{
                 [&](const ExportMessage& m) { w.u8(static_cast<std::uint8_t>(ControlType::Export)).bytes(m.descriptor); },
                 [&](const RecvPostMessage& m) {
                   w.u8(static_cast<std::uint8_t>(ControlType::RecvPost))
                       .i32(m.tag).u64(m.seq).u64(m.alloc_id).u64(m.offset).u64(m.bytes).u32(m.slot).u32(m.generation).u64(m.net_addr).u64(m.net_key);
                 },
                 [&](const SendFailedMessage& m) {
                   w.u8(static_cast<std::uint8_t>(ControlType::SendFailed)).i32(m.tag).u64(m.seq).u64(m.send_bytes).string(m.reason)
                       .u8(static_cast<std::uint8_t>(m.failure));
                 },
                 [&](const GoodbyeMessage&) { w.u8(static_cast<std::uint8_t>(ControlType::Goodbye)); },
                 [&](const ShmSendMessage& m) {
                   w.u8(static_cast<std::uint8_t>(ControlType::ShmSend)).i32(m.tag).u64(m.seq).u64(m.bytes).u64(m.first_chunk);
                 },
                 [&](const ShmPutMessage& m) {
                   w.u8(static_cast<std::uint8_t>(ControlType::ShmPut)).i32(m.window).u64(m.offset).u64(m.bytes).u64(m.first_chunk);
                 },
                 [&](const NetPutMessage& m) {
                   w.u8(static_cast<std::uint8_t>(ControlType::NetPut)).u32(m.message).i32(m.window).u64(m.offset).u64(m.bytes);
                 },
                 [&](const NetSignalMessage& m) {
                   w.u8(static_cast<std::uint8_t>(ControlType::NetSignal)).u32(m.slot).u32(m.value).u64(m.puts_before);
                 },
                 [&](const ShmSignalMessage& m) {
                   w.u8(static_cast<std::uint8_t>(ControlType::ShmSignal)).u32(m.slot).u32(m.value).u64(m.first_chunk);
                 },
                 [&](const NetEmptySendMessage& m) {
                   w.u8(static_cast<std::uint8_t>(ControlType::NetEmptySend)).u32(m.slot).u32(m.generation);
                 },
                 [&](const ReleaseMessage& m) { w.u8(static_cast<std::uint8_t>(ControlType::Release)).u64(m.alloc_id); },
                 [&](const NetPutFailedMessage& m) {
                   w.u8(static_cast<std::uint8_t>(ControlType::NetPutFailed)).u32(m.message).u64(m.bytes).string(m.reason);
                 },
             },
             message);
  return w.take();
}

ControlMessage decode(std::span<const std::byte> bytes) {
  PayloadReader r("control message", bytes);
  if (r.u32("magic") != kControlMagic) throw ProtocolError("control message with a wrong magic number");
  const auto type = static_cast<ControlType>(r.u8("type"));
  ControlMessage result;
  switch (type) {
    case ControlType::Export: {
      auto descriptor = r.bytes("descriptor", kMaxDescriptorBytes);
      result = ExportMessage{{descriptor.begin(), descriptor.end()}};
      break;
    }
    case ControlType::RecvPost: {
      RecvPostMessage m;
      m.tag = r.i32("tag");
      m.seq = r.u64("seq");
      m.alloc_id = r.u64("alloc_id");
      m.offset = r.u64("offset");
      m.bytes = r.u64("bytes");
      m.slot = r.u32("slot");
      m.generation = r.u32("generation");
      m.net_addr = r.u64("net_addr");
      m.net_key = r.u64("net_key");
      result = m;
      break;
    }
    case ControlType::SendFailed: {
      SendFailedMessage m;
      m.tag = r.i32("tag");
      m.seq = r.u64("seq");
      m.send_bytes = r.u64("send_bytes");
      m.reason = r.string("reason", kMaxReasonBytes);
      const std::uint8_t failure = r.u8("failure");
      if (failure > static_cast<std::uint8_t>(SendFailedMessage::Failure::CollectiveNotWritten)) {
        throw ProtocolError(cat("control message: send failure of unknown kind ", static_cast<int>(failure)));
      }
      m.failure = static_cast<SendFailedMessage::Failure>(failure);
      result = m;
      break;
    }
    case ControlType::Goodbye: result = GoodbyeMessage{}; break;
    case ControlType::ShmSend: {
      ShmSendMessage m;
      m.tag = r.i32("tag");
      m.seq = r.u64("seq");
      m.bytes = r.u64("bytes");
      m.first_chunk = r.u64("first_chunk");
      result = m;
      break;
    }
    case ControlType::ShmPut: {
      ShmPutMessage m;
      m.window = r.i32("window");
      m.offset = r.u64("offset");
      m.bytes = r.u64("bytes");
      m.first_chunk = r.u64("first_chunk");
      result = m;
      break;
    }
    case ControlType::NetPut: {
      NetPutMessage m;
      m.message = r.u32("message");
      m.window = r.i32("window");
      m.offset = r.u64("offset");
      m.bytes = r.u64("bytes");
      result = m;
      break;
    }
    case ControlType::NetSignal: {
      NetSignalMessage m;
      m.slot = r.u32("slot");
      m.value = r.u32("value");
      m.puts_before = r.u64("puts_before");
      result = m;
      break;
    }
    case ControlType::ShmSignal: {
      ShmSignalMessage m;
      m.slot = r.u32("slot");
      m.value = r.u32("value");
      m.first_chunk = r.u64("first_chunk");
      result = m;
      break;
    }
    case ControlType::NetEmptySend: {
      NetEmptySendMessage m;
      m.slot = r.u32("slot");
      m.generation = r.u32("generation");
      result = m;
      break;
    }
    case ControlType::Release: result = ReleaseMessage{r.u64("alloc_id")}; break;
    case ControlType::NetPutFailed: {
      NetPutFailedMessage m;
      m.message = r.u32("message");
      m.bytes = r.u64("bytes");
      m.reason = r.string("reason", kMaxReasonBytes);
      result = m;
      break;
    }
    default: throw ProtocolError(cat("control message of unknown type ", static_cast<int>(type)));
  }
  r.expect_end();
  return result;
}

}  // namespace pickle::comm
