// The store's wire format: round trips of every message, and every way a frame can be wrong (header, truncation,
// oversized lengths, bad fields), plus a few thousand random and mutated buffers through the decoder.

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include <pickle/error.hpp>

#include "bootstrap/frame.hpp"
#include "bootstrap/messages.hpp"

namespace pickle::bootstrap {
namespace {

std::vector<std::byte> bytes_of(std::string_view text) {
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}

/// A raw header with arbitrary fields, to build frames that encode_frame refuses to build.
std::vector<std::byte> raw_header(std::uint32_t magic, std::uint16_t version, std::uint16_t type, std::uint64_t length) {
  PayloadWriter w;
  w.u32(magic);
  w.u8(static_cast<std::uint8_t>(version & 0xFF)).u8(static_cast<std::uint8_t>(version >> 8));
  w.u8(static_cast<std::uint8_t>(type & 0xFF)).u8(static_cast<std::uint8_t>(type >> 8));
  w.u64(length);
  return w.take();
}

/// Feeds the bytes one at a time and returns every frame the parser yields.
std::vector<Frame> parse_bytewise(const std::vector<std::byte>& stream) {
  FrameParser parser;
  std::vector<Frame> frames;
  for (std::byte b : stream) {
    parser.feed({&b, 1});
    while (auto frame = parser.next()) frames.push_back(std::move(*frame));
  }
  EXPECT_EQ(parser.buffered(), 0u);
  return frames;
}

template <class T>
T round_trip_request(const Request& request) {
  auto frames = parse_bytewise(encode(request));
  EXPECT_EQ(frames.size(), 1u);
  Request decoded = decode_request(frames.at(0));
  EXPECT_TRUE(std::holds_alternative<T>(decoded));
  return std::get<T>(decoded);
}

template <class T>
T round_trip_response(const Response& response) {
  auto frames = parse_bytewise(encode(response));
  EXPECT_EQ(frames.size(), 1u);
  Response decoded = decode_response(frames.at(0));
  EXPECT_TRUE(std::holds_alternative<T>(decoded));
  return std::get<T>(decoded);
}

TEST(BootstrapFrame, HeaderLayoutIsLittleEndianPKST) {
  auto frame = encode_frame(MessageType::Set, bytes_of("abc"));
  ASSERT_EQ(frame.size(), kFrameHeaderBytes + 3);
  EXPECT_EQ(std::memcmp(frame.data(), "PKST", 4), 0);
  EXPECT_EQ(std::to_integer<int>(frame[4]), kFrameVersion);
  EXPECT_EQ(std::to_integer<int>(frame[6]), static_cast<int>(MessageType::Set));
  EXPECT_EQ(std::to_integer<int>(frame[8]), 3);
  for (int i = 9; i < 16; ++i) EXPECT_EQ(std::to_integer<int>(frame[static_cast<std::size_t>(i)]), 0);
}

TEST(BootstrapFrame, RequestsRoundTrip) {
  auto hello = round_trip_request<HelloRequest>(HelloRequest{3, 8, "secret", 1500});
  EXPECT_EQ(hello.rank, 3);
  EXPECT_EQ(hello.world_size, 8);
  EXPECT_EQ(hello.token, "secret");
  EXPECT_EQ(hello.wait_ms, 1500u);

  std::vector<std::byte> value(1000);
  for (std::size_t i = 0; i < value.size(); ++i) value[i] = static_cast<std::byte>(i * 7 + 1);
  auto set = round_trip_request<SetRequest>(SetRequest{"key/1", value});
  EXPECT_EQ(set.key, "key/1");
  EXPECT_EQ(set.value, value);

  auto get = round_trip_request<GetRequest>(GetRequest{"k", 42});
  EXPECT_EQ(get.key, "k");
  EXPECT_EQ(get.wait_ms, 42u);
  EXPECT_EQ(round_trip_request<CheckRequest>(CheckRequest{""}).key, "");
  auto wait = round_trip_request<WaitRequest>(WaitRequest{{"a", "bb", ""}, 7});
  EXPECT_EQ(wait.keys, (std::vector<std::string>{"a", "bb", ""}));
  EXPECT_EQ(wait.wait_ms, 7u);
  auto add = round_trip_request<AddRequest>(AddRequest{"counter", -5});
  EXPECT_EQ(add.key, "counter");
  EXPECT_EQ(add.delta, -5);
  auto gather = round_trip_request<GatherRequest>(GatherRequest{"barrier|x|1", bytes_of("blob"), 9});
  EXPECT_EQ(gather.name, "barrier|x|1");
  EXPECT_EQ(gather.blob, bytes_of("blob"));
  round_trip_request<ByeRequest>(ByeRequest{});
  auto attach = round_trip_request<AttachRequest>(AttachRequest{2, 4, "secret"});
  EXPECT_EQ(attach.rank, 2);
  EXPECT_EQ(attach.world_size, 4);
  EXPECT_EQ(attach.token, "secret");
}

TEST(BootstrapFrame, ResponsesRoundTrip) {
  round_trip_response<OkResponse>(OkResponse{});
  EXPECT_EQ(round_trip_response<ValueResponse>(ValueResponse{bytes_of("v")}).value, bytes_of("v"));
  EXPECT_EQ(round_trip_response<IntegerResponse>(IntegerResponse{INT64_MIN}).value, INT64_MIN);
  EXPECT_TRUE(round_trip_response<BoolResponse>(BoolResponse{true}).value);
  EXPECT_FALSE(round_trip_response<BoolResponse>(BoolResponse{false}).value);
  auto blobs = round_trip_response<BlobsResponse>(BlobsResponse{{bytes_of("a"), {}, bytes_of("ccc")}});
  EXPECT_EQ(blobs.blobs, (std::vector<std::vector<std::byte>>{bytes_of("a"), {}, bytes_of("ccc")}));
  auto error = round_trip_response<ErrorResponse>(ErrorResponse{5, 2, "rank 2 disconnected from the store"});
  EXPECT_EQ(error.code, 5u);
  EXPECT_EQ(error.peer, 2);
  EXPECT_EQ(error.message, "rank 2 disconnected from the store");
}

TEST(BootstrapFrame, SeveralFramesInOneChunk) {
  std::vector<std::byte> stream;
  for (int i = 0; i < 5; ++i) {
    auto frame = encode(SetRequest{"k" + std::to_string(i), bytes_of(std::string(static_cast<std::size_t>(i), 'x'))});
    stream.insert(stream.end(), frame.begin(), frame.end());
  }
  FrameParser parser;
  parser.feed(stream);
  for (int i = 0; i < 5; ++i) {
    auto frame = parser.next();
    ASSERT_TRUE(frame);
    EXPECT_EQ(std::get<SetRequest>(decode_request(*frame)).key, "k" + std::to_string(i));
  }
  EXPECT_FALSE(parser.next());
  EXPECT_EQ(parser.buffered(), 0u);
}

TEST(BootstrapFrame, BadMagicVersionAndType) {
  auto expect_rejected = [](const std::vector<std::byte>& header, const char* needle) {
    FrameParser parser;
    parser.feed(header);
    try {
      parser.next();
      ADD_FAILURE() << "accepted a header that should fail with '" << needle << "'";
    } catch (const ProtocolError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_THROW(decode_frame(header), ProtocolError);
  };
  expect_rejected(raw_header(0x12345678, kFrameVersion, 3, 0), "bad magic");
  expect_rejected(raw_header(kFrameMagic, 2, 3, 0), "version 2");
  expect_rejected(raw_header(kFrameMagic, 0, 3, 0), "version 0");
  for (std::uint16_t type : {0, 10, 63, 70, 0xFFFF}) expect_rejected(raw_header(kFrameMagic, 1, type, 0), "unknown message type");
}

TEST(BootstrapFrame, TruncatedHeaderAndPayload) {
  auto frame = encode(SetRequest{"key", bytes_of("value")});
  // Every strict prefix is truncated: the stream parser waits for more, the one-shot decoder rejects it.
  for (std::size_t n = 0; n < frame.size(); ++n) {
    std::span<const std::byte> prefix(frame.data(), n);
    EXPECT_THROW(decode_frame(prefix), ProtocolError) << n << " bytes";
    FrameParser parser;
    parser.feed(prefix);
    EXPECT_FALSE(parser.next());
    EXPECT_EQ(parser.buffered(), n);
  }
  EXPECT_THROW(decode_header(std::span<const std::byte>(frame.data(), kFrameHeaderBytes - 1)), ProtocolError);
  // A frame followed by stray bytes is not exactly one frame.
  frame.push_back(std::byte{0});
  EXPECT_THROW(decode_frame(frame), ProtocolError);
}

TEST(BootstrapFrame, OversizedLengthRejectedBeforeAnyPayloadIsKept) {
  for (std::uint64_t length : {std::uint64_t{4} << 30, std::uint64_t{kMaxPayloadBytes} + 1, ~std::uint64_t{0}}) {
    FrameParser parser;
    parser.feed(raw_header(kFrameMagic, kFrameVersion, static_cast<std::uint16_t>(MessageType::Set), length));
    EXPECT_THROW(parser.next(), ProtocolError) << length;
    // Only the 16 header bytes are held: the 4 GiB it announces were never reserved.
    EXPECT_EQ(parser.buffered(), kFrameHeaderBytes);
  }
  // The limit is exact, and a smaller per-connection limit (a client that has not said Hello) applies the same way.
  EXPECT_NO_THROW(decode_header(raw_header(kFrameMagic, 1, 2, kMaxPayloadBytes)));
  FrameParser stranger(kMaxHelloPayloadBytes);
  stranger.feed(raw_header(kFrameMagic, 1, 1, kMaxHelloPayloadBytes + 1));
  EXPECT_THROW(stranger.next(), ProtocolError);
}

TEST(BootstrapFrame, PayloadFieldsAreLengthChecked) {
  // A Set whose key claims 1 GiB inside a 10-byte payload.
  {
    PayloadWriter w;
    w.u32(1u << 30).u32(0).u8(0).u8(0);
    auto payload = w.take();
    EXPECT_THROW(decode_request(Frame{MessageType::Set, payload}), ProtocolError);
  }
  // A key longer than kMaxKeyBytes, even when the bytes are present.
  EXPECT_THROW(decode_request(decode_frame(encode(CheckRequest{std::string(kMaxKeyBytes + 1, 'k')}))), ProtocolError);
  // A value whose u64 length exceeds the value limit.
  {
    PayloadWriter w;
    w.string("k").u64(std::uint64_t{kMaxValueBytes} + 1);
    EXPECT_THROW(decode_request(Frame{MessageType::Set, w.take()}), ProtocolError);
  }
  // Wait and Blobs counts that the payload cannot possibly hold are rejected before any reserve().
  {
    PayloadWriter w;
    w.u32(0xFFFFFFFFu).u32(0);
    EXPECT_THROW(decode_request(Frame{MessageType::Wait, w.take()}), ProtocolError);
    PayloadWriter b;
    b.u32(0xFFFFFFFFu);
    EXPECT_THROW(decode_response(Frame{MessageType::Blobs, b.take()}), ProtocolError);
  }
  // A too long token, trailing bytes, a non-boolean Bool, missing fields.
  EXPECT_THROW(decode_request(decode_frame(encode(HelloRequest{0, 1, std::string(kMaxTokenBytes + 1, 't'), 1}))),
               ProtocolError);
  {
    auto frame = decode_frame(encode(GetRequest{"k", 1}));
    frame.payload.push_back(std::byte{1});
    EXPECT_THROW(decode_request(frame), ProtocolError);
  }
  EXPECT_THROW(decode_response(Frame{MessageType::Bool, {std::byte{2}}}), ProtocolError);
  EXPECT_THROW(decode_request(Frame{MessageType::Hello, {std::byte{1}, std::byte{0}}}), ProtocolError);
  // A request is not a response and the other way round.
  EXPECT_THROW(decode_response(decode_frame(encode(ByeRequest{}))), ProtocolError);
  EXPECT_THROW(decode_request(decode_frame(encode(OkResponse{}))), ProtocolError);
}

/// Decodes whatever the parser yields; ProtocolError is the only acceptable failure.
void decode_everything(std::span<const std::byte> stream, std::mt19937& rng) {
  FrameParser parser;
  std::size_t offset = 0;
  try {
    while (offset < stream.size()) {
      const std::size_t chunk = std::min<std::size_t>(stream.size() - offset, 1 + rng() % 64);
      parser.feed(stream.subspan(offset, chunk));
      offset += chunk;
      while (auto frame = parser.next()) {
        try {
          decode_request(*frame);
        } catch (const ProtocolError&) {
        }
        try {
          decode_response(*frame);
        } catch (const ProtocolError&) {
        }
      }
    }
  } catch (const ProtocolError&) {
  }
  try {
    decode_frame(stream);
  } catch (const ProtocolError&) {
  }
}

TEST(BootstrapFrame, RandomAndMutatedBuffersOnlyEverFailWithProtocolError) {
  std::mt19937 rng(20240611);
  const std::vector<std::vector<std::byte>> seeds = {
      encode(HelloRequest{1, 4, "job-0123456789abcdef", 60000}),
      encode(SetRequest{"addr/3", bytes_of("10.0.0.3:4455")}),
      encode(GetRequest{"addr/0", 1000}),
      encode(CheckRequest{"x"}),
      encode(WaitRequest{{"a", "b", "c"}, 5}),
      encode(AddRequest{"n", 1}),
      encode(GatherRequest{"allgather|1", bytes_of("blob"), 5}),
      encode(ByeRequest{}),
      encode(AttachRequest{1, 4, "job-0123456789abcdef"}),
      encode(ValueResponse{bytes_of("value")}),
      encode(IntegerResponse{7}),
      encode(BoolResponse{true}),
      encode(BlobsResponse{{bytes_of("a"), bytes_of("bc")}}),
      encode(ErrorResponse{5, 1, "msg"}),
  };
  for (int iteration = 0; iteration < 4000; ++iteration) {
    std::vector<std::byte> buffer = seeds[rng() % seeds.size()];
    switch (rng() % 5) {
      case 0:  // flip a few bits anywhere
        for (int i = 0, n = 1 + static_cast<int>(rng() % 4); i < n; ++i) {
          buffer[rng() % buffer.size()] ^= static_cast<std::byte>(1u << (rng() % 8));
        }
        break;
      case 1:  // truncate
        buffer.resize(rng() % buffer.size());
        break;
      case 2:  // random bytes after a valid header prefix
        buffer.resize(kFrameHeaderBytes);
        for (int i = 0, n = static_cast<int>(rng() % 100); i < n; ++i) buffer.push_back(static_cast<std::byte>(rng()));
        break;
      case 3: {  // overwrite a 4-byte field inside the payload with a random (often huge) length
        if (buffer.size() >= kFrameHeaderBytes + 4) {
          std::size_t at = kFrameHeaderBytes + rng() % (buffer.size() - kFrameHeaderBytes - 3);
          std::uint32_t value = static_cast<std::uint32_t>(rng());
          for (int i = 0; i < 4; ++i) buffer[at + static_cast<std::size_t>(i)] = static_cast<std::byte>(value >> (8 * i));
        }
        break;
      }
      default:  // pure noise
        buffer.resize(rng() % 200);
        for (auto& b : buffer) b = static_cast<std::byte>(rng());
        break;
    }
    ASSERT_NO_FATAL_FAILURE(decode_everything(buffer, rng));
  }
}

}  // namespace
}  // namespace pickle::bootstrap
