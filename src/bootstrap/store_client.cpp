#include "bootstrap/store_client.hpp"

#include <algorithm>
#include <optional>
#include <variant>

#include <pickle/error.hpp>

#include "bootstrap/store_state.hpp"
#include "core/error_text.hpp"
#include "core/format.hpp"
#include "core/log.hpp"

namespace pickle::bootstrap {
namespace {

/// Extra time the client gives the server beyond the server-side wait: the server answers a parked request with a
/// timeout that names what is missing; the client's own timeout only fires when rank 0 itself stopped answering.
std::chrono::milliseconds grace(std::uint32_t wait_ms) { return std::chrono::milliseconds(1000 + wait_ms / 20); }

}  // namespace

StoreClient::StoreClient(const RankInfo& self, const std::string& token, double timeout_seconds, Role role)
    : self_(self),
      address_(cat(self.master_addr, ":", self.master_port)),
      timeout_seconds_(timeout_seconds),
      wait_ms_(static_cast<std::uint32_t>(std::clamp(timeout_seconds * 1000.0, 1.0, 4294967295.0))),
      parser_(kMaxPayloadBytes),
      recv_buffer_(256 * 1024) {
  // A further connection goes to a store that is known to be up: a few seconds of retries, not the whole timeout,
  // before a refusal means that rank 0 went away.
  const Deadline deadline = Deadline::after_seconds(role == Role::Join ? timeout_seconds : std::min(timeout_seconds, 5.0));
  std::string last_error;
  fd_ = connect_tcp(self.master_addr, self.master_port, deadline, last_error);
  if (!fd_.valid() && role == Role::Attach) {
    throw PeerError(cat("rank ", self.rank, ": could not open a further connection to the store at ", address_,
                        " (rank 0; is it gone?): ", last_error),
                    0);
  }
  if (!fd_.valid()) {
    throw TimeoutError(cat("rank ", self.rank, ": rank 0 at ", address_, " never answered within ", timeout_seconds,
                           " s (last attempt: ", last_error, ")"));
  }
  const auto left = static_cast<std::uint32_t>(std::max(1, deadline.remaining_ms()));
  const bool join = role == Role::Join;
  const Request request = join ? Request(HelloRequest{self.rank, self.world_size, token, left})
                               : Request(AttachRequest{self.rank, self.world_size, token});
  Response answer = exchange(request,
                             cat("rank ", self.rank, join ? ": store rendezvous at " : ": store attach at ", address_),
                             left);
  if (!std::holds_alternative<OkResponse>(answer)) {
    throw ProtocolError(cat("rank ", self.rank, ": the store at ", address_, " answered ", join ? "Hello" : "Attach",
                            " with something else"));
  }
  if (join) PICKLE_LOG(Info, "bootstrap", "rank " << self.rank << " joined the store at " << address_);
}

StoreClient::~StoreClient() {
  if (!fd_.valid() || broken_) return;
  try {
    // Tells rank 0 that this rank is done, so that closing is not mistaken for a crash.
    const auto bytes = encode(ByeRequest{});
    send_all(fd_.get(), bytes, Deadline(std::chrono::seconds(1)), "store bye");
  } catch (const std::exception& e) {
    PICKLE_LOG(Debug, "bootstrap", "rank " << self_.rank << ": leaving the store: " << e.what());
  }
}

Response StoreClient::call(const Request& request, const std::string& what) { return exchange(request, what, wait_ms_); }

Response StoreClient::exchange(const Request& request, const std::string& what, std::uint32_t wait_ms) {
  if (broken_) {
    throw PeerError(cat(what, ": the connection to the store at ", address_, " broke earlier"), 0);
  }
  auto closed = [&] {
    broken_ = true;
    return PeerError(cat(what, ": the store at ", address_, " (rank 0) closed the connection"), 0);
  };
  const auto bytes = encode(request);
  IoStatus status = IoStatus::Done;
  try {
    status = send_all(fd_.get(), bytes, Deadline::after_seconds(timeout_seconds_), what);
  } catch (...) {
    broken_ = true;
    throw;
  }
  if (status == IoStatus::Closed) throw closed();
  if (status == IoStatus::TimedOut) {
    broken_ = true;
    throw TimeoutError(cat(what, ": rank 0 at ", address_, " took no data for ", timeout_seconds_, " s"));
  }

  const bool hello = std::holds_alternative<HelloRequest>(request) || std::holds_alternative<AttachRequest>(request);
  const Deadline deadline(std::chrono::milliseconds(wait_ms) + grace(wait_ms));
  while (true) {
    std::optional<Response> response;
    try {
      if (auto frame = parser_.next()) response = decode_response(*frame);
    } catch (const ProtocolError& e) {
      broken_ = true;
      throw ProtocolError(
          cat(what, ": the store at ", address_, " answered with a malformed frame: ", without_head(e.what())));
    }
    if (response) {
      if (auto* error = std::get_if<ErrorResponse>(&*response)) throw_remote(*error, what, hello);
      return std::move(*response);
    }
    std::size_t received = 0;
    try {
      status = recv_some(fd_.get(), recv_buffer_, received, deadline, what);
    } catch (...) {
      broken_ = true;
      throw;
    }
    if (status == IoStatus::Closed) throw closed();
    if (status == IoStatus::TimedOut) {
      broken_ = true;
      throw TimeoutError(cat(what, ": rank 0 at ", address_, " never answered within ",
                             std::chrono::duration<double>(deadline.timeout()).count(), " s"));
    }
    parser_.feed({recv_buffer_.data(), received});
  }
}

void StoreClient::throw_remote(const ErrorResponse& error, const std::string& what, bool hello) {
  const auto code = static_cast<ErrorCode>(error.code);
  // The server closes the connection after a protocol error and after refusing a Hello.
  if (hello || code == ErrorCode::Protocol) broken_ = true;
  if (hello && code == ErrorCode::Protocol && error.message == kWrongTokenMessage) {
    throw ProtocolError(cat("rank ", self_.rank, ": store at ", address_,
                            " rejected our token (PICKLE_TOKEN, or the token derived from the job, differs from "
                            "rank 0's)"));
  }
  const std::string message = cat(what, ": ", error.message);
  switch (code) {
    case ErrorCode::Timeout: throw TimeoutError(message);
    case ErrorCode::Peer: throw PeerError(message, error.peer);
    case ErrorCode::InvalidArgument: throw InvalidArgument(message);
    case ErrorCode::Protocol: throw ProtocolError(message);
    default: break;
  }
  throw ProtocolError(cat(message, " (unexpected error code ", error.code, " from the store)"));
}

}  // namespace pickle::bootstrap
