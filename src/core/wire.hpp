#pragma once
// Little-endian wire encoding shared by pickle's protocols (the bootstrap store, the communicator's control channel):
// a writer and a reader that checks every length before it trusts it.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pickle {

/// Reads a little-endian integer.
template <class T>
T load_le(const std::byte* p) {
  T value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    value |= static_cast<T>(static_cast<T>(std::to_integer<std::uint8_t>(p[i])) << (8 * i));
  }
  return value;
}

/// Appends a little-endian integer.
template <class T>
void store_le(std::vector<std::byte>& out, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<std::byte>((value >> (8 * i)) & 0xFF));
}

/// Builds a payload field by field (little-endian; byte strings carry a u64 length, strings a u32 length).
class PayloadWriter {
 public:
  PayloadWriter& u8(std::uint8_t value);
  PayloadWriter& u32(std::uint32_t value);
  PayloadWriter& i32(std::int32_t value) { return u32(static_cast<std::uint32_t>(value)); }
  PayloadWriter& u64(std::uint64_t value);
  PayloadWriter& i64(std::int64_t value) { return u64(static_cast<std::uint64_t>(value)); }
  PayloadWriter& bytes(std::span<const std::byte> value);
  PayloadWriter& string(std::string_view value);
  std::vector<std::byte> take() { return std::move(out_); }

 private:
  std::vector<std::byte> out_;
};

/// Reads a payload field by field. Every read checks the bytes left and every length against its limit, so that no
/// field can make the reader run past the payload or allocate more than the payload holds. Errors are ProtocolError
/// naming the message (`what`, e.g. "store message Hello") and field.
class PayloadReader {
 public:
  PayloadReader(std::string what, std::span<const std::byte> payload) : what_(std::move(what)), data_(payload) {}

  std::uint8_t u8(const char* field);
  std::uint32_t u32(const char* field);
  std::int32_t i32(const char* field) { return static_cast<std::int32_t>(u32(field)); }
  std::uint64_t u64(const char* field);
  std::int64_t i64(const char* field) { return static_cast<std::int64_t>(u64(field)); }
  /// A u64-length-prefixed byte string of at most max_bytes; a view into the payload.
  std::span<const std::byte> bytes(const char* field, std::size_t max_bytes);
  /// A u32-length-prefixed string of at most max_bytes.
  std::string string(const char* field, std::size_t max_bytes);
  std::size_t remaining() const noexcept { return data_.size() - offset_; }
  /// Trailing bytes after the last field are a ProtocolError too.
  void expect_end();

 private:
  std::span<const std::byte> take(const char* field, std::size_t count);

  std::string what_;
  std::span<const std::byte> data_;
  std::size_t offset_ = 0;
};

}  // namespace pickle
