#pragma once
// Keeps the ranks of a benchmark in step through failures. Every rank runs the same sequence of phases; after each
// one they exchange (through the store) whether it worked and a small payload. A rank whose phase threw reports
// the error instead of leaving the others waiting, and once a phase failed anywhere, the later phases of the same
// step are skipped on every rank alike. So a failing backend costs one report, never a hang or a desync.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <pickle/error.hpp>
#include <string_view>
#include <vector>

namespace pickle {
class Store;
}

namespace pickle::bench {

/// What every rank said after one phase.
struct PhaseOutcome {
  bool ok = true;
  ErrorCode code = ErrorCode::Internal;  ///< the first failing rank's error code (Internal for non-pickle errors)
  std::string error;                  ///< the first failing rank's message, prefixed with "rank N: "
  std::vector<std::string> payloads;  ///< every rank's payload (empty where a rank failed or skipped), by rank
};

/// The ranks can no longer agree: the store's exchange after a phase failed (a rank stopped, died or lost its
/// connection). Its message leads with this rank's own failure of the phase, when it had one (a timeout naming the
/// peer, operation and size), then the exchange's. No later phase can run: every suite ends its run with it, rank 0
/// after printing and writing what it measured before.
class LockstepBroken : public Error {
 public:
  LockstepBroken(ErrorCode code, const std::string& message) : Error(code, message) {}
};

class Lockstep {
 public:
  explicit Lockstep(Store& store);

  /// Starts a new step: phases run again even if the previous step failed.
  void begin_step() {
    failed_ = false;
    code_ = ErrorCode::Internal;
    error_.clear();
  }

  /// Runs `fn` (unless an earlier phase of this step failed), then exchanges the outcome with every rank. `fn`
  /// returns this rank's payload. Exceptions from `fn` are caught and reported, never propagated. Every rank must
  /// call phase() with the same names in the same order (a mismatch is a ProtocolError: a bug in the caller).
  /// Throws LockstepBroken when the exchange itself fails.
  PhaseOutcome phase(std::string_view name, const std::function<std::string()>& fn);

  /// Whether a phase of the current step failed on some rank, and the first error.
  bool failed() const { return failed_; }
  const std::string& error() const { return error_; }
  ErrorCode code() const { return code_; }

  /// Throws the current step's failure as a pickle::Error with the failing rank's code.
  [[noreturn]] void rethrow(std::string_view what) const;

  /// Ends the process after `broken`, exit 1, with no teardown: a backend cut off mid-step may still have work queued
  /// on its stream against the peer that is gone, and destroying its communicator would release those waits and let
  /// what follows them (a reduction reading scratch memory) run on freed memory.
  /// Rank 0 first writes what was measured (`write_report`; its own failure is said, not thrown), prints
  /// "pickle bench <suite>: <error>" and says in the store that it has. Every other rank waits (at most the store's
  /// timeout) for that before it exits: a launcher stops the whole job at the first rank that exits non-zero, which
  /// would cut rank 0 short while it writes. A rank that never hears it (rank 0 is the one that stopped) prints its
  /// own error.
  [[noreturn]] void end_broken_run(const LockstepBroken& broken, std::string_view suite,
                                   const std::function<void()>& write_report);
  /// A suite's end: runs `work` (its measurements and the teardown phases after them), then `write_report` on rank
  /// 0. When the ranks can no longer agree (`work` throws LockstepBroken), the run ends in end_broken_run instead,
  /// which writes what `work` recorded before it stopped.
  void run_then_report(std::string_view suite, const std::function<void()>& work,
                       const std::function<void()>& write_report);

 private:
  Store* store_;
  int rank_;
  bool failed_ = false;
  ErrorCode code_ = ErrorCode::Internal;
  std::string error_;
};

/// A phase failed somewhere: every rank ends the run with this same error, and rank 0 alone reports it (the suites'
/// rank frames: run_pair_rank, run_coll_session, p2p's).
class AgreedFailure : public Error {
 public:
  AgreedFailure(ErrorCode code, const std::string& message) : Error(code, message) {}
};

/// Throws AgreedFailure("<what>: <the first failing rank's error>") when `outcome` failed on any rank.
void require_agreed(const PhaseOutcome& outcome, std::string_view what);

/// An exception's message without pickle's "pickle <Code> error: " prefix (the code travels separately).
std::string plain_message(const std::exception& e);

/// `value` as a payload that reads back exactly ("%.17g"): how a rank hands a time to a phase.
std::string exact_payload(double value);

/// The largest of `outcome`'s payloads read as numbers (0 when none has one, e.g. every rank skipped): the slowest
/// rank's time.
double largest_payload(const PhaseOutcome& outcome);

/// Runs `fn` (this rank's count) as one agreed phase; the sum over ranks, or nullopt when it failed.
std::optional<std::uint64_t> summed(Lockstep& lockstep, std::string_view name,
                                    const std::function<std::uint64_t()>& fn);

}  // namespace pickle::bench
