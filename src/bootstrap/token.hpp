#pragma once
// The store's admission token. It keeps a foreign client (another job that reuses the port, a stale rank of an
// earlier run, a port scanner) out of the store; it is not a defence against an attacker on the same network
// unless PICKLE_TOKEN is set to a secret.

#include <cstdint>
#include <string>
#include <string_view>

#include <pickle/bootstrap.hpp>

namespace pickle::bootstrap {

/// 64-bit FNV-1a: fixed, so that every rank of a job computes the same token and the same derived port.
std::uint64_t fnv1a64(std::string_view text) noexcept;

/// The token of a job: PICKLE_TOKEN when set, else derived from what every rank of the job agrees on
/// (master address and port, world size, launcher job id).
std::string job_token(const RankInfo& info);

/// The derived token alone (no environment).
std::string derive_token(const RankInfo& info);

/// Compares in time that depends only on the lengths, not on where the first difference is.
bool constant_time_equal(std::string_view a, std::string_view b) noexcept;

}  // namespace pickle::bootstrap
