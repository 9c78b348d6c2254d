#include "pattern.hpp"

#include <cstring>

namespace pickle::bench {
namespace {

std::uint64_t mix(std::uint64_t x) noexcept {  // splitmix64's finaliser: every input bit reaches every output bit
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Word `word` of `rank`'s stream, in the byte order of the machine (the stream is defined by its bytes in memory).
std::uint64_t source_word(int rank, std::uint64_t word) noexcept {
  return mix(word ^ mix(static_cast<std::uint64_t>(rank) + 0x5eed));
}

std::uint64_t fnv(std::string_view text, std::uint64_t hash) noexcept {
  for (char c : text) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  return hash;
}

}  // namespace

std::uint8_t source_byte(int rank, std::uint64_t index) noexcept {
  std::uint64_t word = source_word(rank, index / 8);
  std::uint8_t bytes[8];
  std::memcpy(bytes, &word, 8);
  return bytes[index % 8];
}

void fill_source(int rank, std::uint64_t first, std::uint8_t* out, std::size_t bytes) noexcept {
  std::uint64_t word = first / 8;
  std::size_t done = 0;
  for (; done + 8 <= bytes; done += 8, ++word) {
    std::uint64_t value = source_word(rank, word);
    std::memcpy(out + done, &value, 8);
  }
  if (done < bytes) {
    std::uint64_t value = source_word(rank, word);
    std::memcpy(out + done, &value, bytes - done);
  }
}

std::uint64_t window_shift(std::string_view backend, Mode mode, std::size_t bytes, int repeat, int sender) noexcept {
  std::uint64_t hash = fnv(backend, 0xCBF29CE484222325ull);
  hash = mix(hash ^ (static_cast<std::uint64_t>(mode) << 56) ^ bytes);
  hash = mix(hash ^ static_cast<std::uint64_t>(static_cast<std::int64_t>(repeat)) ^
             (static_cast<std::uint64_t>(sender) << 48));
  return (hash % (kShiftSpan / 8)) * 8;
}

std::uint64_t count_wrong(const std::uint8_t* data, std::size_t bytes, int sender, std::uint64_t first) noexcept {
  std::uint64_t wrong = 0;
  std::uint64_t word = first / 8;
  std::size_t done = 0;
  for (; done + 8 <= bytes; done += 8, ++word) {
    std::uint64_t expected = source_word(sender, word), actual;
    std::memcpy(&actual, data + done, 8);
    if (actual == expected) continue;
    for (std::uint64_t diff = actual ^ expected; diff != 0; diff >>= 8) wrong += (diff & 0xFF) != 0;
  }
  if (done < bytes) {
    std::uint64_t expected = source_word(sender, word);
    std::uint8_t expected_bytes[8];
    std::memcpy(expected_bytes, &expected, 8);
    for (std::size_t i = 0; done + i < bytes; ++i) wrong += data[done + i] != expected_bytes[i];
  }
  return wrong;
}

}  // namespace pickle::bench
