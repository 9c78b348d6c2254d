#include "bootstrap/messages.hpp"

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "core/overloaded.hpp"

namespace pickle::bootstrap {
namespace {

std::vector<std::byte> to_vector(std::span<const std::byte> view) { return {view.begin(), view.end()}; }

}  // namespace

std::vector<std::byte> encode(const Request& request) {
  PayloadWriter w;
  MessageType type = std::visit(
      Overloaded{
          [&](const HelloRequest& m) {
            w.i32(m.rank).i32(m.world_size).string(m.token).u32(m.wait_ms);
            return MessageType::Hello;
          },
          [&](const SetRequest& m) {
            w.string(m.key).bytes(m.value);
            return MessageType::Set;
          },
          [&](const GetRequest& m) {
            w.string(m.key).u32(m.wait_ms);
            return MessageType::Get;
          },
          [&](const CheckRequest& m) {
            w.string(m.key);
            return MessageType::Check;
          },
          [&](const WaitRequest& m) {
            w.u32(static_cast<std::uint32_t>(m.keys.size()));
            for (const auto& key : m.keys) w.string(key);
            w.u32(m.wait_ms);
            return MessageType::Wait;
          },
          [&](const AddRequest& m) {
            w.string(m.key).i64(m.delta);
            return MessageType::Add;
          },
          [&](const GatherRequest& m) {
            w.string(m.name).bytes(m.blob).u32(m.wait_ms);
            return MessageType::Gather;
          },
          [&](const ByeRequest&) { return MessageType::Bye; },
          [&](const AttachRequest& m) {
            w.i32(m.rank).i32(m.world_size).string(m.token);
            return MessageType::Attach;
          },
      },
      request);
  auto payload = w.take();
  return encode_frame(type, payload);
}

std::vector<std::byte> encode(const Response& response) {
  PayloadWriter w;
  MessageType type = std::visit(Overloaded{
                                    [&](const OkResponse&) { return MessageType::Ok; },
                                    [&](const ValueResponse& m) {
                                      w.bytes(m.value);
                                      return MessageType::Value;
                                    },
                                    [&](const IntegerResponse& m) {
                                      w.i64(m.value);
                                      return MessageType::Integer;
                                    },
                                    [&](const BoolResponse& m) {
                                      w.u8(m.value ? 1 : 0);
                                      return MessageType::Bool;
                                    },
                                    [&](const BlobsResponse& m) {
                                      w.u32(static_cast<std::uint32_t>(m.blobs.size()));
                                      for (const auto& blob : m.blobs) w.bytes(blob);
                                      return MessageType::Blobs;
                                    },
                                    [&](const ErrorResponse& m) {
                                      w.u32(m.code).i32(m.peer).string(m.message);
                                      return MessageType::Error;
                                    },
                                },
                                response);
  auto payload = w.take();
  return encode_frame(type, payload);
}

Request decode_request(const Frame& frame) {
  PayloadReader r(cat("store message ", type_name(frame.type)), frame.payload);
  Request request;
  switch (frame.type) {
    case MessageType::Hello: {
      HelloRequest m;
      m.rank = r.i32("rank");
      m.world_size = r.i32("world_size");
      m.token = r.string("token", kMaxTokenBytes);
      m.wait_ms = r.u32("wait_ms");
      request = std::move(m);
      break;
    }
    case MessageType::Set: {
      SetRequest m;
      m.key = r.string("key", kMaxKeyBytes);
      m.value = to_vector(r.bytes("value", kMaxValueBytes));
      request = std::move(m);
      break;
    }
    case MessageType::Get: {
      GetRequest m;
      m.key = r.string("key", kMaxKeyBytes);
      m.wait_ms = r.u32("wait_ms");
      request = std::move(m);
      break;
    }
    case MessageType::Check: request = CheckRequest{r.string("key", kMaxKeyBytes)}; break;
    case MessageType::Wait: {
      WaitRequest m;
      const std::uint32_t count = r.u32("key_count");
      // Each key takes at least its 4-byte length: a count that the payload cannot hold is rejected before reserve.
      if (count > kMaxListEntries || count > r.remaining() / 4) {
        throw ProtocolError(cat("store message Wait claims ", count, " keys in ", r.remaining(), " bytes"));
      }
      m.keys.reserve(count);
      for (std::uint32_t i = 0; i < count; ++i) m.keys.push_back(r.string("key", kMaxKeyBytes));
      m.wait_ms = r.u32("wait_ms");
      request = std::move(m);
      break;
    }
    case MessageType::Add: {
      AddRequest m;
      m.key = r.string("key", kMaxKeyBytes);
      m.delta = r.i64("delta");
      request = std::move(m);
      break;
    }
    case MessageType::Gather: {
      GatherRequest m;
      m.name = r.string("name", kMaxKeyBytes);
      m.blob = to_vector(r.bytes("blob", kMaxValueBytes));
      m.wait_ms = r.u32("wait_ms");
      request = std::move(m);
      break;
    }
    case MessageType::Bye: request = ByeRequest{}; break;
    case MessageType::Attach: {
      AttachRequest m;
      m.rank = r.i32("rank");
      m.world_size = r.i32("world_size");
      m.token = r.string("token", kMaxTokenBytes);
      request = std::move(m);
      break;
    }
    default: throw ProtocolError(cat("store server received a ", type_name(frame.type), " frame, which is not a request"));
  }
  r.expect_end();
  return request;
}

Response decode_response(const Frame& frame) {
  PayloadReader r(cat("store message ", type_name(frame.type)), frame.payload);
  Response response;
  switch (frame.type) {
    case MessageType::Ok: response = OkResponse{}; break;
    case MessageType::Value: response = ValueResponse{to_vector(r.bytes("value", kMaxValueBytes))}; break;
    case MessageType::Integer: response = IntegerResponse{r.i64("value")}; break;
    case MessageType::Bool: {
      const std::uint8_t value = r.u8("value");
      if (value > 1) throw ProtocolError(cat("store message Bool carries ", int{value}, ", expected 0 or 1"));
      response = BoolResponse{value == 1};
      break;
    }
    case MessageType::Blobs: {
      BlobsResponse m;
      const std::uint32_t count = r.u32("blob_count");
      // Each blob takes at least its 8-byte length.
      if (count > kMaxListEntries || count > r.remaining() / 8) {
        throw ProtocolError(cat("store message Blobs claims ", count, " blobs in ", r.remaining(), " bytes"));
      }
      m.blobs.reserve(count);
      for (std::uint32_t i = 0; i < count; ++i) m.blobs.push_back(to_vector(r.bytes("blob", kMaxValueBytes)));
      response = std::move(m);
      break;
    }
    case MessageType::Error: {
      ErrorResponse m;
      m.code = r.u32("code");
      m.peer = r.i32("peer");
      m.message = r.string("message", kMaxKeyBytes * 4);
      response = std::move(m);
      break;
    }
    default: throw ProtocolError(cat("store client received a ", type_name(frame.type), " frame, which is not a response"));
  }
  r.expect_end();
  return response;
}

}  // namespace pickle::bootstrap
