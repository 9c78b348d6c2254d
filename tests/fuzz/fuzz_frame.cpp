// libFuzzer target for the store's frame parser and message decoders: arbitrary bytes, split into chunks the way
// recv() might deliver them, must only ever yield frames or a ProtocolError; never a crash, a hang, an
// out-of-bounds read (ASan) or an allocation larger than the bytes received.
//
// Build: CC=clang CXX=clang++ cmake -S . -B build-fuzz -DPICKLE_BUILD_FUZZERS=ON -DPICKLE_ENABLE_CUDA=OFF
//        cmake --build build-fuzz --target fuzz_frame && build-fuzz/tests/fuzz/fuzz_frame -max_total_time=60

#include <cstddef>
#include <cstdint>
#include <span>

#include <pickle/error.hpp>

#include "bootstrap/frame.hpp"
#include "bootstrap/messages.hpp"

namespace {

using namespace pickle::bootstrap;

void decode_payload(const Frame& frame) {
  try {
    Request request = decode_request(frame);
    // What decodes must encode back to the same bytes: the encoder and decoder agree on every field.
    if (encode(request) != encode_frame(frame.type, frame.payload)) __builtin_trap();
  } catch (const pickle::ProtocolError&) {
  }
  try {
    Response response = decode_response(frame);
    if (encode(response) != encode_frame(frame.type, frame.payload)) __builtin_trap();
  } catch (const pickle::ProtocolError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  // The first byte picks the chunk size and the parser's limit (a stranger's or a rank's).
  const std::size_t chunk = 1 + (data[0] & 0x3F);
  const std::size_t limit = (data[0] & 0x40) != 0 ? kMaxHelloPayloadBytes : kMaxPayloadBytes;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data + 1), size - 1);

  FrameParser parser(limit);
  try {
    for (std::size_t offset = 0; offset < bytes.size(); offset += chunk) {
      parser.feed(bytes.subspan(offset, std::min(chunk, bytes.size() - offset)));
      while (auto frame = parser.next()) decode_payload(*frame);
    }
  } catch (const pickle::ProtocolError&) {
  }
  try {
    decode_payload(decode_frame(bytes, limit));
  } catch (const pickle::ProtocolError&) {
  }
  return 0;
}
