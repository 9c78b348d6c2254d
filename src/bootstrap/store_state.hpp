#pragma once
// What rank 0's store knows and decides, without any socket: the keys, which rank is on which connection, and the
// requests parked until a key arrives, every rank joins, or every rank reaches a gather. The server (store_server)
// feeds it frames, disconnects and clock ticks, and sends the answers it returns.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <pickle/error.hpp>

#include "bootstrap/frame.hpp"
#include "bootstrap/messages.hpp"
#include "core/clock.hpp"

namespace pickle::bootstrap {

using ConnId = std::uint64_t;
using TimePoint = Clock::time_point;

/// An encoded frame for one connection; close_after: close that connection once the frame is sent.
struct Outgoing {
  ConnId conn = 0;
  std::vector<std::byte> bytes;
  bool close_after = false;
};

/// The message a server sends with a rejected token; the client turns it into "store at host:port rejected our token".
inline constexpr std::string_view kWrongTokenMessage = "wrong token";

class StoreState {
 public:
  /// Most further connections (Attach) one rank may hold: threads of one rank waiting in the store at once.
  static constexpr int kMaxAttachedPerRank = 16;

  StoreState(int world_size, std::string token);

  /// Handles one frame from a connection (`peer` names it in log lines). A frame that is not a valid request in the
  /// connection's state throws ProtocolError: the caller then drops the connection and calls on_disconnect.
  void on_frame(ConnId conn, const Frame& frame, TimePoint now, const std::string& peer, std::vector<Outgoing>& out);
  /// The connection is gone. A rank that leaves without Bye is lost: every wait that may need it fails.
  void on_disconnect(ConnId conn, std::vector<Outgoing>& out);
  /// Answers the parked requests whose deadline has passed with a TimeoutError naming what is missing.
  void on_tick(TimePoint now, std::vector<Outgoing>& out);

  /// The earliest deadline of a parked request, if any.
  std::optional<TimePoint> next_deadline() const;
  /// Whether the connection belongs to a rank (said a valid Hello).
  bool is_member(ConnId conn) const;
  /// Whether no rank is still connected (every rank left, was lost, or never came): the server may stop.
  bool no_rank_connected() const;
  /// Whether every rank still connected is one that a gather gave up waiting for (it never arrived within the
  /// wait: stopped, hung, or far behind): a server that is finishing need not wait for it again.
  bool only_unresponsive_ranks_connected() const;
  /// "ranks 1, 3 of 4" still connected, for the log of a shutdown that did not wait for everyone.
  std::string connected_ranks() const;

 private:
  enum class RankStatus { Absent, Joined, Left, Lost };
  enum class ParkKind { Hello, Get, Wait, Gather };
  struct Parked {
    ParkKind kind;
    TimePoint deadline;
    std::uint32_t wait_ms = 0;
    std::string key;                // Get: the key; Gather: the gather's name
    std::vector<std::string> keys;  // Wait: the keys still missing
  };
  struct Connection {
    int rank = -1;
    bool attached = false;  // a further connection of the rank (Attach): its loss or Bye is not the rank's
    bool left = false;      // sent Bye
    std::optional<Parked> parked;
  };
  struct Gathering {
    std::vector<std::optional<std::vector<std::byte>>> blobs;  // index = rank
    int arrived = 0;
  };

  void on_hello(ConnId conn, HelloRequest hello, TimePoint now, const std::string& peer, std::vector<Outgoing>& out);
  void on_attach(ConnId conn, const AttachRequest& attach, const std::string& peer, std::vector<Outgoing>& out);
  /// Checks a Hello's (`hello`) or Attach's token, world size and rank; false after queuing the refusal (and the
  /// close).
  bool admit(ConnId conn, const std::string& token, int rank, int world_size, bool hello,
             const std::string& peer, std::vector<Outgoing>& out);
  void on_gather(ConnId conn, int rank, GatherRequest gather, TimePoint now, std::vector<Outgoing>& out);
  void on_bye(ConnId conn, int rank, std::vector<Outgoing>& out);
  /// Answers Get and Wait requests parked on this key.
  void key_arrived(const std::string& key, std::vector<Outgoing>& out);
  /// Fails every parked request that can no longer complete because `rank` is gone.
  void rank_gone(int rank, bool lost, std::vector<Outgoing>& out);
  /// The first lost or departed rank that has not contributed to the gathering, or -1.
  int gone_rank_missing_from(const Gathering& gathering) const;
  std::string gone_message(int rank) const;

  void reply(ConnId conn, const Response& response, std::vector<Outgoing>& out, bool close_after = false);
  void fail(ConnId conn, ErrorCode code, int peer, const std::string& message, std::vector<Outgoing>& out,
            bool close_after = false);

  int world_size_;
  std::string token_;
  std::vector<RankStatus> ranks_;
  int joined_ = 0;
  int first_lost_ = -1;  // the first rank lost without Bye: pending gets and waits fail naming it
  std::vector<bool> unresponsive_;  // by rank: a gather timed out without it
  std::map<ConnId, Connection> conns_;
  std::unordered_map<std::string, std::vector<std::byte>> data_;
  std::map<std::string, Gathering> gatherings_;
};

/// "rank 2 of 3" or "ranks 2, 3 of 4" (long lists are shortened).
std::string format_rank_list(const std::vector<int>& ranks, int world_size);

}  // namespace pickle::bootstrap
