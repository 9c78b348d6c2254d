#include "core/wire.hpp"

#include <pickle/error.hpp>

#include "core/format.hpp"

namespace pickle {

PayloadWriter& PayloadWriter::u8(std::uint8_t value) {
  out_.push_back(static_cast<std::byte>(value));
  return *this;
}

PayloadWriter& PayloadWriter::u32(std::uint32_t value) {
  store_le(out_, value);
  return *this;
}

PayloadWriter& PayloadWriter::u64(std::uint64_t value) {
  store_le(out_, value);
  return *this;
}

PayloadWriter& PayloadWriter::bytes(std::span<const std::byte> value) {
  store_le<std::uint64_t>(out_, value.size());
  out_.insert(out_.end(), value.begin(), value.end());
  return *this;
}

PayloadWriter& PayloadWriter::string(std::string_view value) {
  store_le<std::uint32_t>(out_, static_cast<std::uint32_t>(value.size()));
  const auto* p = reinterpret_cast<const std::byte*>(value.data());
  out_.insert(out_.end(), p, p + value.size());
  return *this;
}

std::span<const std::byte> PayloadReader::take(const char* field, std::size_t count) {
  if (count > remaining()) {
    throw ProtocolError(cat(what_, " is truncated in field '", field, "': needs ", count,
                            " bytes, ", remaining(), " left"));
  }
  auto view = data_.subspan(offset_, count);
  offset_ += count;
  return view;
}

std::uint8_t PayloadReader::u8(const char* field) { return std::to_integer<std::uint8_t>(take(field, 1)[0]); }

std::uint32_t PayloadReader::u32(const char* field) { return load_le<std::uint32_t>(take(field, 4).data()); }

std::uint64_t PayloadReader::u64(const char* field) { return load_le<std::uint64_t>(take(field, 8).data()); }

std::span<const std::byte> PayloadReader::bytes(const char* field, std::size_t max_bytes) {
  const std::uint64_t length = u64(field);
  if (length > max_bytes) {
    throw ProtocolError(cat(what_, " field '", field, "' claims ", length,
                            " bytes, above the limit of ", max_bytes));
  }
  return take(field, static_cast<std::size_t>(length));
}

std::string PayloadReader::string(const char* field, std::size_t max_bytes) {
  const std::uint32_t length = u32(field);
  if (length > max_bytes) {
    throw ProtocolError(cat(what_, " field '", field, "' claims ", length,
                            " bytes, above the limit of ", max_bytes));
  }
  auto view = take(field, length);
  return std::string(reinterpret_cast<const char*>(view.data()), view.size());
}

void PayloadReader::expect_end() {
  if (remaining() != 0) {
    throw ProtocolError(cat(what_, " has ", remaining(), " unexpected trailing bytes"));
  }
}

}  // namespace pickle
