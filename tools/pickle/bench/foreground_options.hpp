#pragma once
// What `pickle bench interference` and `pickle bench compute` share about their foregrounds: the names they accept
// (--foreground) and which attention implementation runs (--attention).

#include <cstddef>
#include <string>
#include <string_view>

#include "sweep_options.hpp"

namespace pickle::bench {

/// --foreground's choices, in the default order.
inline constexpr std::string_view kForegroundNames[] = {"gemm", "attention"};

/// --attention: cuDNN's SDPA when it loads and supports the graph, else the own kernel (auto); cuDNN or nothing
/// (cudnn: its absence is an UnavailableError that fails the run); pickle's own fused kernel (own).
enum class AttentionImpl { Auto, Cudnn, Own };
/// The names of AttentionImpl's values, in its order.
inline constexpr std::string_view kAttentionImplNames[] = {"auto", "cudnn", "own"};

inline AttentionImpl parse_attention_impl(const std::string& text) {
  return static_cast<AttentionImpl>(parse_choice(text, "--attention", kAttentionImplNames));
}

inline std::string_view attention_impl_name(AttentionImpl impl) {
  return kAttentionImplNames[static_cast<std::size_t>(impl)];
}

}  // namespace pickle::bench
