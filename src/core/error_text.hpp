#pragma once
// Errors that carry another error on: its message without its "pickle <Code> error: " head (the outer error gets a
// head of its own), or the same error again with context in front.

#include <string>

#include <pickle/error.hpp>

namespace pickle {

/// "pickle Peer error: rank 0 ..." -> "rank 0 ...". Text without such a head is returned as it is.
std::string without_head(const char* what);

/// The same error (same class, code, peer or CUDA code) with "<prefix>: " in front of its message (not twice).
[[noreturn]] void rethrow_with_prefix(const Error& error, const std::string& prefix);

}  // namespace pickle
