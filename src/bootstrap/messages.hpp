#pragma once
// The store's messages as types, and their encoding into frames (frame.hpp). Decoding is strict: every field is
// length-checked, trailing bytes are rejected, and any failure is a ProtocolError, so that the server can drop a
// misbehaving connection and keep serving everyone else.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "bootstrap/frame.hpp"

namespace pickle::bootstrap {

/// Longest token a client may present.
inline constexpr std::size_t kMaxTokenBytes = 1024;
/// Most keys in one Wait and most blobs in one Blobs answer (the largest world the store serves).
inline constexpr std::size_t kMaxListEntries = 1 << 16;

// Requests (client -> server). wait_ms is how long the server parks the request before it answers with a timeout.
struct HelloRequest {
  std::int32_t rank = 0;
  std::int32_t world_size = 0;
  std::string token;
  std::uint32_t wait_ms = 0;
};
struct SetRequest {
  std::string key;
  std::vector<std::byte> value;
};
struct GetRequest {
  std::string key;
  std::uint32_t wait_ms = 0;
};
struct CheckRequest {
  std::string key;
};
struct WaitRequest {
  std::vector<std::string> keys;
  std::uint32_t wait_ms = 0;
};
struct AddRequest {
  std::string key;
  std::int64_t delta = 0;
};
/// Every rank sends the same name once; all are answered with every rank's blob. A barrier is a gather of empty blobs.
struct GatherRequest {
  std::string name;
  std::vector<std::byte> blob;
  std::uint32_t wait_ms = 0;
};
struct ByeRequest {};
/// A further connection of a rank that already joined, so that calls from several threads of one process do not
/// queue behind each other's waits. Checked like a Hello; answered with Ok at once; its loss is not the rank's.
struct AttachRequest {
  std::int32_t rank = 0;
  std::int32_t world_size = 0;
  std::string token;
};

using Request = std::variant<HelloRequest, SetRequest, GetRequest, CheckRequest, WaitRequest, AddRequest,
                             GatherRequest, ByeRequest, AttachRequest>;

// Responses (server -> client).
struct OkResponse {};
struct ValueResponse {
  std::vector<std::byte> value;
};
struct IntegerResponse {
  std::int64_t value = 0;
};
struct BoolResponse {
  bool value = false;
};
struct BlobsResponse {
  std::vector<std::vector<std::byte>> blobs;
};
/// A failed request: code is a pickle::ErrorCode, peer the rank it concerns (-1: none).
struct ErrorResponse {
  std::uint32_t code = 0;
  std::int32_t peer = -1;
  std::string message;
};

using Response = std::variant<OkResponse, ValueResponse, IntegerResponse, BoolResponse, BlobsResponse, ErrorResponse>;

/// Encodes a message into a complete frame (header + payload).
std::vector<std::byte> encode(const Request& request);
std::vector<std::byte> encode(const Response& response);

/// Decodes a frame that must be a request (resp. a response); anything else is a ProtocolError.
Request decode_request(const Frame& frame);
Response decode_response(const Frame& frame);

}  // namespace pickle::bootstrap
