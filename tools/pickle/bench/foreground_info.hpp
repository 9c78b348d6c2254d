#pragma once
// What a foreground of `pickle bench interference` and `pickle bench compute` reports about itself once set up: who
// computes it, how it was checked, and whether it could run; as the line of the suites' tables and as the JSON
// object of their result files (and of interference's store messages).

#include <optional>
#include <string>
#include <string_view>

#include "core/json.hpp"

namespace pickle::bench {

/// ok, unavailable (absent hardware or library: a fact about the machine, not a failure) or failed.
enum class RunStatus { Ok, Unavailable, Failed };
const char* run_status_name(RunStatus status) noexcept;
/// The status of that name; ProtocolError naming `what` for any other.
RunStatus parse_run_status(const std::string& name, std::string_view what);

/// One foreground kernel as set up (on rank 1 of interference; on the one GPU of compute).
struct ForegroundInfo {
  std::string name;         ///< "gemm", "attention"
  /// Who computes it, short: "cuBLASLt 13.0.0", "cuDNN SDPA (cudnn 9.19.0, frontend 1.32.0)", "pickle fused
  /// attention (own kernel)".
  std::string kernel;
  std::string description;  ///< what runs, named as in the output ("pickle fused attention (own kernel): ...")
  RunStatus status = RunStatus::Ok;
  std::string detail;       ///< why unavailable or failed, or the library that ran
  /// The user asked for exactly this implementation (--attention cudnn): unavailable then fails the run, since what
  /// was asked for did not run.
  bool required = false;
  double flops = 0;         ///< floating-point operations of one iteration
  /// The check against a simple reference kernel: max abs error (attention) or max error relative to the bound
  /// (gemm's sampled entries), the tolerance it must stay under, and the shape it ran on.
  std::optional<double> verify_error;
  double verify_tolerance = 0;
  std::string verify_shape;
};

/// As a result file's "foregrounds" entry and back; from_json throws ProtocolError on a malformed object.
json::Value foreground_to_json(const ForegroundInfo& info);
ForegroundInfo foreground_from_json(const json::Value& value);

/// A foreground that failed, or that was required and is unavailable: the run's exit code is 1.
bool foreground_fails_run(const ForegroundInfo& info) noexcept;

/// "# attention  ok: <description> [<detail>]; verified on <shape>: max error 0.00230 (tolerance 0.01000)": the
/// foreground's line in the head of a suite's table.
std::string foreground_line(const ForegroundInfo& info);

}  // namespace pickle::bench
