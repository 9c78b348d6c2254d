#pragma once
// IEEE half (float16) and bfloat16 on the host, as raw 16-bit patterns: the benchmark fills and checks buffers of
// these types without a GPU or a compiler extension (GCC 12 has no std::float16_t on every target). Conversions to
// 16 bits round to nearest, ties to even, like the GPU's; infinities and NaN are kept.

#include <cstdint>

namespace pickle::bench {

/// float -> IEEE binary16, round to nearest even (overflow gives infinity, tiny values subnormals or zero).
std::uint16_t float_to_half(float value) noexcept;
/// IEEE binary16 -> float (exact).
float half_to_float(std::uint16_t bits) noexcept;
/// float -> bfloat16 (the float's top 16 bits), round to nearest even.
std::uint16_t float_to_bfloat16(float value) noexcept;
/// bfloat16 -> float (exact).
float bfloat16_to_float(std::uint16_t bits) noexcept;

}  // namespace pickle::bench
