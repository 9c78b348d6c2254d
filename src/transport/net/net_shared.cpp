#include "transport/net/net_shared.hpp"

#include "core/clock.hpp"
#include "core/format.hpp"
#include "core/log.hpp"

namespace pickle::transport::net {

void SharedState::on_arrival(int peer, std::uint32_t message, Callbacks& callbacks) {
  std::lock_guard lock(mutex);
  PeerLink* link = this->peer(peer);
  if (link == nullptr || link->failed.load()) return;
  link->last_progress_ns = now_ns();
  const std::uint64_t landed = ++link->arrived[message];
  auto expected = link->expected.find(message);
  // expect() completes a message whose chunks all landed before it, so an expectation never sees more than its count.
  if (expected != link->expected.end() && landed == expected->second.chunks) {
    callbacks.push_back(std::move(expected->second.on_arrived));
    if (expected->second.owed) --link->owed_expectations;
    link->expected.erase(expected);
    link->arrived.erase(message);
  }
}

void SharedState::on_write_completed(OutMessage& message, std::size_t bytes_written, Callbacks& callbacks) {
  if (message.with_data) bytes.fetch_add(bytes_written);  // not the set-up handshake's: stats count the traffic
  const bool last = message.completed.fetch_add(1) + 1 == message.chunks;
  std::lock_guard lock(mutex);
  PeerLink* link = peer(message.peer);
  if (link == nullptr || link->failed.load()) return;
  link->last_progress_ns = now_ns();
  if (!last) return;
  if (message.with_data) operations.fetch_add(1);
  if (link->unfinished_writes > 0) --link->unfinished_writes;
  if (message.on_sent) callbacks.push_back(std::move(message.on_sent));
}

void SharedState::touch(int peer) {
  std::lock_guard lock(mutex);
  if (PeerLink* link = this->peer(peer)) link->last_progress_ns = now_ns();
}

bool SharedState::fail(int peer, const std::string& reason, bool report) {
  std::map<std::uint32_t, Expectation> dropped;  // destroyed after the lock: they hold user callbacks
  std::string message;
  {
    std::lock_guard lock(mutex);
    PeerLink* link = this->peer(peer);
    if (link == nullptr || link->failed.load()) return false;
    link->failed.store(true);
    dropped = std::move(link->expected);
    link->expected.clear();
    link->arrived.clear();
    link->unfinished_writes = 0;
    link->owed_expectations = 0;
    message = cat("rank ", rank_, " -> peer ", peer, ": net transport: ", reason);
    link->failure = message;
    link->report_failure = report;
  }
  if (report) {
    PICKLE_LOG(Warn, "transport", message);
  } else {
    PICKLE_LOG(Debug, "transport", message);
  }
  if (wake_rails) wake_rails();  // each rail closes its endpoints to the peer, then calls rail_closed
  return true;
}

void SharedState::rail_closed(int peer, Callbacks& callbacks) {
  std::string message;
  {
    std::lock_guard lock(mutex);
    PeerLink* link = this->peer(peer);
    if (link == nullptr || --link->rails_open != 0 || !link->report_failure || setting_up) return;
    message = link->failure;
  }
  callbacks.push_back([this, peer, message] {
    if (on_peer_failed_) on_peer_failed_(peer, message);
  });
}

bool SharedState::closed(int peer) {
  std::lock_guard lock(mutex);
  const PeerLink* link = this->peer(peer);
  return link == nullptr || link->rails_open == 0;
}

bool SharedState::failed_peers_closed() {
  std::lock_guard lock(mutex);
  for (const auto& link : peers) {
    if (!link) continue;
    if (link->failed.load() && link->rails_open != 0) return false;
  }
  return true;
}

bool SharedState::check_timeouts() {
  const std::int64_t now = now_ns();
  const auto limit = static_cast<std::int64_t>(timeout_seconds_ * 1e9);
  std::vector<std::pair<int, std::string>> overdue;
  {
    std::lock_guard lock(mutex);
    for (const auto& link : peers) {
      if (!link || link->failed.load() || !owes_progress(*link) || now - link->last_progress_ns <= limit) continue;
      overdue.emplace_back(link->rank, cat("no progress for ", timeout_seconds_, " s (PICKLE_TIMEOUT) with ",
                                           link->unfinished_writes, " write(s) unfinished, ", link->arrived.size(),
                                           " message(s) partly landed and ", link->owed_expectations,
                                           " more owed"));
    }
  }
  for (const auto& [peer, reason] : overdue) fail(peer, reason);
  return !overdue.empty();
}

}  // namespace pickle::transport::net
