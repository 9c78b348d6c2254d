#include "bootstrap/store_state.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include <pickle/error.hpp>

#include "bootstrap/token.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "core/overloaded.hpp"

namespace pickle::bootstrap {
namespace {

std::string seconds_text(std::uint32_t ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(ms) / 1000.0);
  return text;
}

std::string format_key_list(const std::vector<std::string>& keys) {
  constexpr std::size_t kShown = 8;
  std::string text = keys.size() == 1 ? "key " : "keys ";
  for (std::size_t i = 0; i < keys.size() && i < kShown; ++i) text += cat(i ? ", '" : "'", keys[i], "'");
  if (keys.size() > kShown) text += cat(", ... (", keys.size(), " in all)");
  return text;
}

}  // namespace

std::string format_rank_list(const std::vector<int>& ranks, int world_size) {
  constexpr std::size_t kShown = 16;
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size() && i < kShown; ++i) text += cat(i ? ", " : "", ranks[i]);
  if (ranks.size() > kShown) text += cat(", ... (", ranks.size(), " in all)");
  return cat(text, " of ", world_size);
}

StoreState::StoreState(int world_size, std::string token)
    : world_size_(world_size), token_(std::move(token)), ranks_(static_cast<std::size_t>(world_size), RankStatus::Absent),
      unresponsive_(static_cast<std::size_t>(world_size), false) {}

void StoreState::reply(ConnId conn, const Response& response, std::vector<Outgoing>& out, bool close_after) {
  out.push_back(Outgoing{conn, encode(response), close_after});
}

void StoreState::fail(ConnId conn, ErrorCode code, int peer, const std::string& message, std::vector<Outgoing>& out,
                      bool close_after) {
  // Clients take error messages of up to 16 KiB; a message naming several 4 KiB keys could exceed that and turn a
  // clear timeout into a malformed frame. Cut it well below.
  constexpr std::size_t kMaxMessageBytes = 8192;
  std::string text = message.size() > kMaxMessageBytes ? message.substr(0, kMaxMessageBytes) + " ..." : message;
  reply(conn, ErrorResponse{static_cast<std::uint32_t>(code), peer, std::move(text)}, out, close_after);
}

void StoreState::on_frame(ConnId conn, const Frame& frame, TimePoint now, const std::string& peer,
                          std::vector<Outgoing>& out) {
  Request request = decode_request(frame);
  Connection& c = conns_[conn];
  if (auto* hello = std::get_if<HelloRequest>(&request)) {
    if (c.rank >= 0) throw ProtocolError(cat("rank ", c.rank, " sent a second Hello"));
    on_hello(conn, std::move(*hello), now, peer, out);
    return;
  }
  if (auto* attach = std::get_if<AttachRequest>(&request)) {
    if (c.rank >= 0) throw ProtocolError(cat("rank ", c.rank, " sent Attach on a connection that already has a rank"));
    on_attach(conn, *attach, peer, out);
    return;
  }
  if (c.rank < 0) throw ProtocolError(cat("a ", type_name(frame.type), " request before Hello"));
  if (c.left) throw ProtocolError(cat("rank ", c.rank, " sent a ", type_name(frame.type), " request after Bye"));
  if (c.attached && ranks_[static_cast<std::size_t>(c.rank)] != RankStatus::Joined) {
    // The rank's first connection is gone (it left, or it was lost): its further ones speak for nobody.
    fail(conn, ErrorCode::Peer, c.rank, cat("rank ", c.rank, "'s first connection to the store is gone"), out);
    return;
  }
  if (c.parked) {
    throw ProtocolError(cat("rank ", c.rank, " sent a ", type_name(frame.type),
                            " request while its previous request still waits for an answer"));
  }
  const int rank = c.rank;
  auto park = [&](ParkKind kind, std::uint32_t wait_ms, std::string key, std::vector<std::string> keys) {
    c.parked = Parked{kind, now + std::chrono::milliseconds(wait_ms), wait_ms, std::move(key), std::move(keys)};
  };
  std::visit(
      Overloaded{
          [&](HelloRequest&) {},
          [&](AttachRequest&) {},
          [&](SetRequest& m) {
            data_[m.key] = std::move(m.value);
            reply(conn, OkResponse{}, out);
            key_arrived(m.key, out);
          },
          [&](GetRequest& m) {
            if (auto it = data_.find(m.key); it != data_.end()) {
              reply(conn, ValueResponse{it->second}, out);
            } else if (first_lost_ >= 0) {
              fail(conn, ErrorCode::Peer, first_lost_, gone_message(first_lost_), out);
            } else {
              park(ParkKind::Get, m.wait_ms, std::move(m.key), {});
            }
          },
          [&](CheckRequest& m) { reply(conn, BoolResponse{data_.contains(m.key)}, out); },
          [&](WaitRequest& m) {
            std::vector<std::string> missing;
            for (auto& key : m.keys) {
              if (!data_.contains(key)) missing.push_back(std::move(key));
            }
            if (missing.empty()) {
              reply(conn, OkResponse{}, out);
            } else if (first_lost_ >= 0) {
              fail(conn, ErrorCode::Peer, first_lost_, gone_message(first_lost_), out);
            } else {
              park(ParkKind::Wait, m.wait_ms, {}, std::move(missing));
            }
          },
          [&](AddRequest& m) {
            std::int64_t current = 0;
            if (auto it = data_.find(m.key); it != data_.end()) {
              const char* first = reinterpret_cast<const char*>(it->second.data());
              const char* last = first + it->second.size();
              auto [end, error] = std::from_chars(first, last, current);
              if (it->second.empty() || error != std::errc() || end != last) {
                fail(conn, ErrorCode::InvalidArgument, -1,
                     cat("key '", m.key, "' holds ", it->second.size(), " bytes that are not a decimal integer"), out);
                return;
              }
            }
            std::int64_t result = 0;
            if (__builtin_add_overflow(current, m.delta, &result)) {
              fail(conn, ErrorCode::InvalidArgument, -1, cat("adding ", m.delta, " to ", current, " overflows"), out);
              return;
            }
            // Stored as decimal text, so that get() of a counter reads as a number.
            const std::string text = std::to_string(result);
            const auto* bytes = reinterpret_cast<const std::byte*>(text.data());
            data_[m.key] = std::vector<std::byte>(bytes, bytes + text.size());
            reply(conn, IntegerResponse{result}, out);
            key_arrived(m.key, out);
          },
          [&](GatherRequest& m) { on_gather(conn, rank, std::move(m), now, out); },
          [&](ByeRequest&) { on_bye(conn, rank, out); },
      },
      request);
}

bool StoreState::admit(ConnId conn, const std::string& token, int rank, int world_size, bool hello,
                       const std::string& peer, std::vector<Outgoing>& out) {
  if (!constant_time_equal(token, token_)) {
    PICKLE_LOG(Warn, "bootstrap",
               "store: rejected a client at " << peer << " claiming rank " << rank
                                              << ": wrong token (another job on this port, or a different PICKLE_TOKEN)");
    fail(conn, ErrorCode::Protocol, -1, std::string(kWrongTokenMessage), out, true);
    return false;
  }
  std::string refusal;
  if (world_size != world_size_) {
    refusal = cat("world size ", world_size, " differs from rank 0's ", world_size_);
  } else if (rank < 0 || rank >= world_size_) {
    refusal = cat("rank ", rank, " is outside a world of ", world_size_);
  } else if (hello && ranks_[static_cast<std::size_t>(rank)] != RankStatus::Absent) {
    refusal = cat("rank ", rank, " already joined the store (two processes with the same rank?)");
  } else if (!hello && ranks_[static_cast<std::size_t>(rank)] != RankStatus::Joined) {
    refusal = cat("rank ", rank, " sent Attach but is not a member of the store (it never joined, left, or was lost)");
  } else if (!hello && std::count_if(conns_.begin(), conns_.end(), [&](const auto& entry) {
                         return entry.second.attached && entry.second.rank == rank;
                       }) >= kMaxAttachedPerRank) {
    refusal = cat("rank ", rank, " already holds ", kMaxAttachedPerRank, " further connections to the store: at most ",
                  kMaxAttachedPerRank, " threads of one rank may use the store at once");
  }
  if (refusal.empty()) return true;
  PICKLE_LOG(Warn, "bootstrap", "store: refused a client at " << peer << ": " << refusal);
  fail(conn, ErrorCode::InvalidArgument, -1, refusal, out, true);
  return false;
}

void StoreState::on_attach(ConnId conn, const AttachRequest& attach, const std::string& peer,
                           std::vector<Outgoing>& out) {
  if (!admit(conn, attach.token, attach.rank, attach.world_size, /*hello=*/false, peer, out)) return;
  Connection& c = conns_[conn];
  c.rank = attach.rank;
  c.attached = true;
  PICKLE_LOG(Debug, "bootstrap", "store: rank " << attach.rank << " attached a further connection from " << peer);
  reply(conn, OkResponse{}, out);
}

void StoreState::on_hello(ConnId conn, HelloRequest hello, TimePoint now, const std::string& peer,
                          std::vector<Outgoing>& out) {
  if (!admit(conn, hello.token, hello.rank, hello.world_size, /*hello=*/true, peer, out)) return;

  Connection& c = conns_[conn];
  c.rank = hello.rank;
  ranks_[static_cast<std::size_t>(hello.rank)] = RankStatus::Joined;
  ++joined_;
  PICKLE_LOG(Info, "bootstrap",
             "store: rank " << hello.rank << " joined from " << peer << " (" << joined_ << " of " << world_size_ << ")");
  if (first_lost_ >= 0) {
    fail(conn, ErrorCode::Peer, first_lost_, gone_message(first_lost_), out);
    return;
  }
  if (joined_ < world_size_) {
    c.parked = Parked{ParkKind::Hello, now + std::chrono::milliseconds(hello.wait_ms), hello.wait_ms, {}, {}};
    return;
  }
  // Everyone is here: the rendezvous completes for all ranks at once.
  for (auto& [id, other] : conns_) {
    if (other.parked && other.parked->kind == ParkKind::Hello) {
      other.parked.reset();
      reply(id, OkResponse{}, out);
    }
  }
  reply(conn, OkResponse{}, out);
}

void StoreState::on_gather(ConnId conn, int rank, GatherRequest gather, TimePoint now, std::vector<Outgoing>& out) {
  Gathering& gathering = gatherings_[gather.name];
  if (gathering.blobs.empty()) gathering.blobs.resize(static_cast<std::size_t>(world_size_));
  auto& slot = gathering.blobs[static_cast<std::size_t>(rank)];
  if (slot) {
    fail(conn, ErrorCode::InvalidArgument, rank, cat("rank ", rank, " joined this collective twice"), out);
    return;
  }
  slot = std::move(gather.blob);
  ++gathering.arrived;
  if (gathering.arrived == world_size_) {
    std::size_t total = 4;
    for (const auto& blob : gathering.blobs) total += 8 + blob->size();
    Response answer;
    if (total > kMaxPayloadBytes) {
      answer = ErrorResponse{static_cast<std::uint32_t>(ErrorCode::InvalidArgument), -1,
                             cat("the gathered blobs total ", total, " bytes, above the store's limit of ",
                                 kMaxPayloadBytes)};
    } else {
      BlobsResponse blobs;
      blobs.blobs.reserve(gathering.blobs.size());
      for (auto& blob : gathering.blobs) blobs.blobs.push_back(std::move(*blob));
      answer = std::move(blobs);
    }
    const std::vector<std::byte> bytes = encode(answer);
    for (auto& [id, other] : conns_) {
      if (other.parked && other.parked->kind == ParkKind::Gather && other.parked->key == gather.name) {
        other.parked.reset();
        out.push_back(Outgoing{id, bytes, false});
      }
    }
    out.push_back(Outgoing{conn, bytes, false});
    gatherings_.erase(gather.name);
    return;
  }
  if (int gone = gone_rank_missing_from(gathering); gone >= 0) {
    fail(conn, ErrorCode::Peer, gone, gone_message(gone), out);
    return;
  }
  conns_[conn].parked =
      Parked{ParkKind::Gather, now + std::chrono::milliseconds(gather.wait_ms), gather.wait_ms, gather.name, {}};
}

void StoreState::on_bye(ConnId conn, int rank, std::vector<Outgoing>& out) {
  conns_[conn].left = true;
  if (conns_[conn].attached) return;  // one of the rank's further connections: the rank is still here
  ranks_[static_cast<std::size_t>(rank)] = RankStatus::Left;
  PICKLE_LOG(Debug, "bootstrap", "store: rank " << rank << " left");
  rank_gone(rank, false, out);
}

void StoreState::key_arrived(const std::string& key, std::vector<Outgoing>& out) {
  for (auto& [id, c] : conns_) {
    if (!c.parked) continue;
    if (c.parked->kind == ParkKind::Get && c.parked->key == key) {
      c.parked.reset();
      reply(id, ValueResponse{data_.at(key)}, out);
    } else if (c.parked->kind == ParkKind::Wait) {
      std::erase(c.parked->keys, key);
      if (c.parked->keys.empty()) {
        c.parked.reset();
        reply(id, OkResponse{}, out);
      }
    }
  }
}

int StoreState::gone_rank_missing_from(const Gathering& gathering) const {
  for (int r = 0; r < world_size_; ++r) {
    const RankStatus status = ranks_[static_cast<std::size_t>(r)];
    if ((status == RankStatus::Lost || status == RankStatus::Left) && !gathering.blobs[static_cast<std::size_t>(r)]) {
      return r;
    }
  }
  return -1;
}

std::string StoreState::gone_message(int rank) const {
  if (ranks_[static_cast<std::size_t>(rank)] == RankStatus::Left) {
    return cat("rank ", rank, " already left the store without taking part");
  }
  return cat("rank ", rank, " disconnected from the store");
}

void StoreState::rank_gone(int rank, bool lost, std::vector<Outgoing>& out) {
  for (auto& [id, c] : conns_) {
    if (!c.parked) continue;
    bool fails = false;
    switch (c.parked->kind) {
      case ParkKind::Hello:
      case ParkKind::Get:
      case ParkKind::Wait:
        // Nobody can tell which rank would have set a key: once a rank died, the job is broken, so fail fast.
        fails = lost;
        break;
      case ParkKind::Gather: {
        auto it = gatherings_.find(c.parked->key);
        fails = it != gatherings_.end() && !it->second.blobs[static_cast<std::size_t>(rank)];
        break;
      }
    }
    if (fails) {
      c.parked.reset();
      fail(id, ErrorCode::Peer, rank, gone_message(rank), out);
    }
  }
}

void StoreState::on_disconnect(ConnId conn, std::vector<Outgoing>& out) {
  auto it = conns_.find(conn);
  if (it == conns_.end()) return;
  const Connection c = std::move(it->second);
  conns_.erase(it);
  // A further connection (Attach) closing loses its parked request, not the rank: the rank's first connection
  // tells whether it is alive.
  if (c.rank < 0 || c.attached || c.left || ranks_[static_cast<std::size_t>(c.rank)] != RankStatus::Joined) return;
  ranks_[static_cast<std::size_t>(c.rank)] = RankStatus::Lost;
  if (first_lost_ < 0) first_lost_ = c.rank;
  // Before the rendezvous completes, ranks whose join failed (timeout, refusal) leave this way: not news.
  if (joined_ == world_size_) {
    PICKLE_LOG(Warn, "bootstrap", "store: rank " << c.rank << " disconnected without leaving; waits that need it fail");
  } else {
    PICKLE_LOG(Info, "bootstrap", "store: rank " << c.rank << " disconnected before every rank had joined");
  }
  rank_gone(c.rank, true, out);
}

void StoreState::on_tick(TimePoint now, std::vector<Outgoing>& out) {
  std::string rendezvous_failure;
  for (auto& [id, c] : conns_) {
    if (!c.parked || c.parked->deadline > now) continue;
    const Parked parked = std::move(*c.parked);
    c.parked.reset();
    const std::string within = cat(" within ", seconds_text(parked.wait_ms));
    std::string message;
    switch (parked.kind) {
      case ParkKind::Hello: {
        std::vector<int> absent;
        for (int r = 0; r < world_size_; ++r) {
          if (ranks_[static_cast<std::size_t>(r)] == RankStatus::Absent) absent.push_back(r);
        }
        message = cat(format_rank_list(absent, world_size_), " never arrived", within);
        rendezvous_failure = message;
        break;
      }
      case ParkKind::Get: message = cat("key '", parked.key, "' was not set", within); break;
      case ParkKind::Wait:
        message = cat(format_key_list(parked.keys), parked.keys.size() == 1 ? " was" : " were", " not set", within);
        break;
      case ParkKind::Gather: {
        std::vector<int> missing;
        auto it = gatherings_.find(parked.key);
        for (int r = 0; r < world_size_; ++r) {
          if (it == gatherings_.end() || !it->second.blobs[static_cast<std::size_t>(r)]) missing.push_back(r);
        }
        for (int r : missing) unresponsive_[static_cast<std::size_t>(r)] = true;
        message = cat(format_rank_list(missing, world_size_), " never arrived", within);
        break;
      }
    }
    fail(id, ErrorCode::Timeout, -1, message, out);
  }
  // The rendezvous is collective: once one rank gives up, the job cannot start, so everyone hears why at once
  // (instead of some ranks later seeing only that rank 0 went away).
  if (!rendezvous_failure.empty()) {
    for (auto& [id, c] : conns_) {
      if (c.parked && c.parked->kind == ParkKind::Hello) {
        c.parked.reset();
        fail(id, ErrorCode::Timeout, -1, rendezvous_failure, out);
      }
    }
  }
}

std::optional<TimePoint> StoreState::next_deadline() const {
  std::optional<TimePoint> earliest;
  for (const auto& [id, c] : conns_) {
    if (c.parked && (!earliest || c.parked->deadline < *earliest)) earliest = c.parked->deadline;
  }
  return earliest;
}

bool StoreState::is_member(ConnId conn) const {
  auto it = conns_.find(conn);
  return it != conns_.end() && it->second.rank >= 0;
}

bool StoreState::no_rank_connected() const {
  return std::none_of(ranks_.begin(), ranks_.end(), [](RankStatus s) { return s == RankStatus::Joined; });
}

bool StoreState::only_unresponsive_ranks_connected() const {
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    if (ranks_[r] == RankStatus::Joined && !unresponsive_[r]) return false;
  }
  return true;
}

std::string StoreState::connected_ranks() const {
  std::vector<int> connected;
  for (int r = 0; r < world_size_; ++r) {
    if (ranks_[static_cast<std::size_t>(r)] == RankStatus::Joined) connected.push_back(r);
  }
  return format_rank_list(connected, world_size_);
}

}  // namespace pickle::bootstrap
