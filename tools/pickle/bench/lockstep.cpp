#include "lockstep.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>

#include <pickle/bootstrap.hpp>
#include <pickle/error.hpp>

#include "comm/store_registry.hpp"
#include "core/format.hpp"
#include "result_file.hpp"

namespace pickle::bench {
namespace {

// Wire form of one rank's report: status byte, phase name, NUL, then the payload or the error message.
constexpr char kOk = 'O', kFailed = 'F', kSkipped = 'S';

/// `message` headed by "rank N: ", unless it names its rank so already (most errors do): the rank named once.
std::string with_rank(int rank, const std::string& message) {
  const std::string head = cat("rank ", rank, ": ");
  return message.starts_with(head) ? message : head + message;
}

std::vector<std::byte> encode(char status, std::string_view phase, const std::string& text) {
  std::vector<std::byte> blob(2 + phase.size() + text.size());
  blob[0] = static_cast<std::byte>(status);
  std::memcpy(blob.data() + 1, phase.data(), phase.size());
  blob[1 + phase.size()] = std::byte{0};
  std::memcpy(blob.data() + 2 + phase.size(), text.data(), text.size());
  return blob;
}

}  // namespace

Lockstep::Lockstep(Store& store) : store_(&store), rank_(store.self().rank) {}

PhaseOutcome Lockstep::phase(std::string_view name, const std::function<std::string()>& fn) {
  char status = kSkipped;
  std::string text;
  ErrorCode own_code = ErrorCode::Internal;
  std::string own_error;  // this rank's failure of the phase, if any
  if (!failed_) {
    try {
      text = fn();
      status = kOk;
    } catch (const std::exception& e) {
      status = kFailed;
      const auto* error = dynamic_cast<const Error*>(&e);
      own_code = error != nullptr ? error->code() : ErrorCode::Internal;
      own_error = plain_message(e);
      text = cat(static_cast<int>(own_code), "|", own_error);
    }
  }
  std::vector<std::vector<std::byte>> blobs;
  try {
    blobs = store_->allgather(encode(status, name, text));
  } catch (const Error& e) {
    // The job is over: on rank 0, the stores' servers (the lockstep's and the communicators') close at exit without
    // waiting PICKLE_TIMEOUT more for ranks that will never leave them.
    store_->mark_job_failed();
    comm::mark_shared_stores_failed();
    // A rank stopped, died or lost its connection, most often in this very phase: this rank's own failure of it
    // (a timeout that names the peer, operation and size) says more than the store's "rank N never arrived", so it
    // comes first, and its code wins.
    const std::string exchange = cat("the ranks could not exchange how phase '", name, "' went (a rank stopped, died "
                                     "or lost its connection): ", e.message());
    if (status != kFailed) throw LockstepBroken(e.code(), exchange);
    throw LockstepBroken(own_code, cat(with_rank(rank_, own_error), "; then ", exchange));
  }
  PhaseOutcome outcome;
  outcome.payloads.resize(blobs.size());
  for (std::size_t r = 0; r < blobs.size(); ++r) {
    const auto& blob = blobs[r];
    const char* bytes = reinterpret_cast<const char*>(blob.data());
    std::string_view view(bytes, blob.size());
    std::size_t nul = view.find('\0', 1);
    if (blob.empty() || nul == std::string_view::npos || view.substr(1, nul - 1) != name) {
      throw ProtocolError(cat(describe({.rank = rank_, .peer = static_cast<int>(r), .op = "benchmark lockstep"}),
                              ": expected phase '", name, "', the peer reported '",
                              nul == std::string_view::npos ? view : view.substr(1, nul - 1), "'"));
    }
    std::string body(view.substr(nul + 1));
    if (view[0] == kOk) {
      outcome.payloads[r] = std::move(body);
    } else if (view[0] == kFailed && outcome.ok) {
      std::size_t bar = body.find('|');
      outcome.ok = false;
      outcome.code = static_cast<ErrorCode>(std::atoi(body.substr(0, bar).c_str()));
      std::string reason = bar == std::string::npos ? body : body.substr(bar + 1);
      outcome.error = with_rank(static_cast<int>(r), reason);
    }
  }
  if (!outcome.ok && !failed_) {
    failed_ = true;
    code_ = outcome.code;
    error_ = outcome.error;
  }
  // A phase that every rank skipped still counts as failed: its step failed earlier.
  if (failed_) {
    outcome.ok = false;
    outcome.code = code_;
    outcome.error = error_;
  }
  return outcome;
}

void Lockstep::rethrow(std::string_view what) const {
  throw Error(code_, cat(what, ": ", error_));
}

void Lockstep::end_broken_run(const LockstepBroken& broken, std::string_view suite,
                              const std::function<void()>& write_report) {
  constexpr const char* kReported = "bench/lockstep/broken-run-reported";
  const auto say = [&](const std::string& what) {
    std::fprintf(stderr, "pickle bench %s: %s\n", std::string(suite).c_str(), what.c_str());
  };
  if (rank_ == 0) {
    mark_run_broken(broken.message());  // the file's exit code is this process's, whatever its rows say
    try {
      write_report();
    } catch (const std::exception& e) {
      say(cat("writing what was measured before the run broke: ", plain_message(e)));
    }
    say(broken.message());
    std::fflush(nullptr);
    try {
      store_->set(kReported, "1");
      // This process hosts the store's server: a moment for its answers to reach the ranks that wait for them.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    } catch (const std::exception&) {
      // The store is gone too: the other ranks say their own errors.
    }
    std::_Exit(1);
  }
  bool reported = false;
  try {
    store_->get(kReported);
    reported = true;
  } catch (const std::exception&) {
    // Rank 0 stopped or died, or left before its answer went out: this rank says what it saw.
  }
  if (!reported) say(broken.message());
  std::fflush(nullptr);
  std::_Exit(1);
}

void Lockstep::run_then_report(std::string_view suite, const std::function<void()>& work,
                               const std::function<void()>& write_report) {
  try {
    work();
  } catch (const LockstepBroken& broken) {
    end_broken_run(broken, suite, write_report);
  }
  if (rank_ == 0) write_report();
}

void require_agreed(const PhaseOutcome& outcome, std::string_view what) {
  if (!outcome.ok) throw AgreedFailure(outcome.code, cat(what, ": ", outcome.error));
}

std::string plain_message(const std::exception& e) {
  const auto* error = dynamic_cast<const Error*>(&e);
  return error != nullptr ? error->message() : std::string(e.what());
}

std::string exact_payload(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

double largest_payload(const PhaseOutcome& outcome) {
  double largest = 0;
  for (const auto& payload : outcome.payloads) {
    if (!payload.empty()) largest = std::max(largest, std::strtod(payload.c_str(), nullptr));
  }
  return largest;
}

std::optional<std::uint64_t> summed(Lockstep& lockstep, std::string_view name,
                                    const std::function<std::uint64_t()>& fn) {
  auto outcome = lockstep.phase(name, [&] { return cat(fn()); });
  if (!outcome.ok) return std::nullopt;
  std::uint64_t total = 0;
  for (const auto& payload : outcome.payloads) total += std::strtoull(payload.c_str(), nullptr, 10);
  return total;
}

}  // namespace pickle::bench
