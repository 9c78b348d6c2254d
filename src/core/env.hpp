#pragma once
// The one place that reads PICKLE_* environment variables. Every variable pickle reads is a row of the table in
// env.cpp (name, default, meaning); docs/env.md shows the same table and a test keeps the two in sync.
// Reading a name that is not in the table is a bug and throws.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pickle::env {

struct Variable {
  std::string_view name;
  std::string_view default_value;  ///< "" means unset / derived (the meaning says how)
  std::string_view meaning;
};

/// Every PICKLE_* variable, in the order docs/env.md lists them.
std::span<const Variable> table();

/// The variable's value, or its default when unset or empty.
std::string get(std::string_view name);
/// The value only when the user set it (non-empty).
std::optional<std::string> get_if_set(std::string_view name);
/// Numeric and boolean readers; a value that does not parse is an InvalidArgument naming the variable.
long long get_int(std::string_view name);
double get_double(std::string_view name);
bool get_bool(std::string_view name);

/// Variables owned by other tools (RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK, ...): read through here too,
/// so that grepping for getenv finds one file.
std::optional<std::string> foreign(const char* name);
/// The folders of PATH, in order, empty entries left out.
std::vector<std::string> path_folders();

/// Seconds of PICKLE_TIMEOUT: how long any wait on a peer may take before it fails.
double timeout_seconds();

}  // namespace pickle::env
