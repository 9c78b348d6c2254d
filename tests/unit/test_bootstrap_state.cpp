// The store server's decisions without sockets: rendezvous, refusals, parked requests, timeouts and lost ranks.
// (tests/mp/test_store*.cpp check the same behaviour end to end between real processes.)

#include <gtest/gtest.h>

#include <pickle/error.hpp>

#include "bootstrap/messages.hpp"
#include "bootstrap/store_state.hpp"

namespace pickle::bootstrap {
namespace {

std::vector<std::byte> bytes_of(std::string_view text) {
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}

struct Answer {
  ConnId conn;
  Response response;
  bool close_after;
};

class StateHarness {
 public:
  explicit StateHarness(int world) : state(world, "tok") {}

  /// Sends a request from a connection and returns the answers it caused (to any connection).
  std::vector<Answer> send(ConnId conn, const Request& request) {
    std::vector<Outgoing> out;
    state.on_frame(conn, decode_frame(encode(request)), now, "test-peer", out);
    return decode(out);
  }
  std::vector<Answer> disconnect(ConnId conn) {
    std::vector<Outgoing> out;
    state.on_disconnect(conn, out);
    return decode(out);
  }
  std::vector<Answer> tick(std::chrono::milliseconds later) {
    std::vector<Outgoing> out;
    state.on_tick(now + later, out);
    return decode(out);
  }
  /// Connections 100 + rank join as every rank of the world.
  void join_all(int world) {
    for (int r = 0; r < world; ++r) send(100 + static_cast<ConnId>(r), HelloRequest{r, world, "tok", 1000});
  }

  StoreState state;
  TimePoint now = Clock::now();

 private:
  static std::vector<Answer> decode(const std::vector<Outgoing>& out) {
    std::vector<Answer> answers;
    for (const auto& o : out) answers.push_back({o.conn, decode_response(decode_frame(o.bytes)), o.close_after});
    return answers;
  }
};

const ErrorResponse& error_of(const Answer& answer) {
  static const ErrorResponse none{0, -1, "<not an error>"};
  auto* error = std::get_if<ErrorResponse>(&answer.response);
  return error ? *error : none;
}

TEST(StoreState, RendezvousCompletesWhenTheLastRankJoins) {
  StateHarness h(3);
  EXPECT_TRUE(h.send(1, HelloRequest{0, 3, "tok", 1000}).empty());
  EXPECT_TRUE(h.send(2, HelloRequest{2, 3, "tok", 1000}).empty());
  auto answers = h.send(3, HelloRequest{1, 3, "tok", 1000});
  ASSERT_EQ(answers.size(), 3u);
  for (const auto& a : answers) EXPECT_TRUE(std::holds_alternative<OkResponse>(a.response));
  EXPECT_TRUE(h.state.is_member(3));
  EXPECT_FALSE(h.state.no_rank_connected());
}

TEST(StoreState, RendezvousTimeoutNamesTheMissingRanksToEveryone) {
  StateHarness h(4);
  h.send(1, HelloRequest{0, 4, "tok", 100});
  h.send(2, HelloRequest{1, 4, "tok", 5000});
  EXPECT_TRUE(h.tick(std::chrono::milliseconds(50)).empty());
  auto answers = h.tick(std::chrono::milliseconds(150));
  ASSERT_EQ(answers.size(), 2u);  // rank 0's wait expired; rank 1 hears the same at once
  for (const auto& a : answers) {
    EXPECT_EQ(error_of(a).code, static_cast<std::uint32_t>(ErrorCode::Timeout));
    EXPECT_EQ(error_of(a).message, "ranks 2, 3 of 4 never arrived within 0.1 s");
  }
}

TEST(StoreState, RefusesWrongTokenBadWorldAndDuplicateRankButKeepsServing) {
  StateHarness h(2);
  h.send(1, HelloRequest{0, 2, "tok", 1000});
  auto wrong = h.send(7, HelloRequest{1, 2, "nope", 1000});
  ASSERT_EQ(wrong.size(), 1u);
  EXPECT_EQ(error_of(wrong[0]).code, static_cast<std::uint32_t>(ErrorCode::Protocol));
  EXPECT_EQ(error_of(wrong[0]).message, kWrongTokenMessage);
  EXPECT_TRUE(wrong[0].close_after);
  EXPECT_FALSE(h.state.is_member(7));

  auto world = h.send(8, HelloRequest{1, 3, "tok", 1000});
  EXPECT_NE(error_of(world.at(0)).message.find("world size 3 differs from rank 0's 2"), std::string::npos);
  auto outside = h.send(9, HelloRequest{2, 2, "tok", 1000});
  EXPECT_NE(error_of(outside.at(0)).message.find("rank 2 is outside a world of 2"), std::string::npos);
  auto duplicate = h.send(10, HelloRequest{0, 2, "tok", 1000});
  EXPECT_NE(error_of(duplicate.at(0)).message.find("rank 0 already joined"), std::string::npos);
  EXPECT_TRUE(duplicate[0].close_after);
  // Closing the refused connections disturbs nobody, and the real rank 1 still completes the rendezvous.
  for (ConnId c : {7, 8, 9, 10}) EXPECT_TRUE(h.disconnect(c).empty());
  EXPECT_EQ(h.send(2, HelloRequest{1, 2, "tok", 1000}).size(), 2u);
}

TEST(StoreState, MisbehavingConnectionsAreProtocolErrors) {
  StateHarness h(2);
  EXPECT_THROW(h.send(1, SetRequest{"k", {}}), ProtocolError);  // before Hello
  h.join_all(2);
  EXPECT_THROW(h.send(100, HelloRequest{0, 2, "tok", 1}), ProtocolError);  // second Hello
  h.send(100, GetRequest{"never", 1000});
  EXPECT_THROW(h.send(100, CheckRequest{"k"}), ProtocolError);  // a new request while one is parked
  h.send(101, ByeRequest{});
  EXPECT_THROW(h.send(101, CheckRequest{"k"}), ProtocolError);  // after Bye
}

TEST(StoreState, GetAndWaitParkUntilTheKeyIsSet) {
  StateHarness h(2);
  h.join_all(2);
  EXPECT_TRUE(h.send(101, GetRequest{"k", 1000}).empty());
  auto check = h.send(100, CheckRequest{"k"});
  EXPECT_FALSE(std::get<BoolResponse>(check.at(0).response).value);
  auto set = h.send(100, SetRequest{"k", bytes_of("value")});
  ASSERT_EQ(set.size(), 2u);
  EXPECT_EQ(set[0].conn, 100u);
  EXPECT_TRUE(std::holds_alternative<OkResponse>(set[0].response));
  EXPECT_EQ(set[1].conn, 101u);
  EXPECT_EQ(std::get<ValueResponse>(set[1].response).value, bytes_of("value"));

  EXPECT_TRUE(h.send(101, WaitRequest{{"k", "a", "b"}, 1000}).empty());
  EXPECT_EQ(h.send(100, SetRequest{"a", {}}).size(), 1u);
  auto last = h.send(100, AddRequest{"b", 5});
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(std::get<IntegerResponse>(last[0].response).value, 5);
  EXPECT_TRUE(std::holds_alternative<OkResponse>(last[1].response));
  // The counter reads back as decimal text.
  EXPECT_EQ(std::get<ValueResponse>(h.send(101, GetRequest{"b", 1}).at(0).response).value, bytes_of("5"));
}

TEST(StoreState, GetTimeoutNamesTheKey) {
  StateHarness h(1);
  h.join_all(1);
  h.send(100, GetRequest{"missing", 200});
  EXPECT_TRUE(h.tick(std::chrono::milliseconds(150)).empty());
  auto answers = h.tick(std::chrono::milliseconds(250));
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(error_of(answers[0]).code, static_cast<std::uint32_t>(ErrorCode::Timeout));
  EXPECT_EQ(error_of(answers[0]).message, "key 'missing' was not set within 0.2 s");
  h.send(100, WaitRequest{{"a", "b"}, 200});
  EXPECT_EQ(error_of(h.tick(std::chrono::milliseconds(250)).at(0)).message, "keys 'a', 'b' were not set within 0.2 s");
}

TEST(StoreState, ATimeoutNamingManyLongKeysStaysWithinTheClientsMessageLimit) {
  // Clients refuse error messages above 16 KiB (a malformed frame): 5 keys of 4000 bytes must still come back as a
  // Timeout that names them.
  StateHarness h(1);
  h.join_all(1);
  std::vector<std::string> keys;
  for (char c : std::string("abcde")) keys.push_back(std::string(4000, c));
  h.send(100, WaitRequest{keys, 200});
  const auto answers = h.tick(std::chrono::milliseconds(250));
  ASSERT_EQ(answers.size(), 1u);
  const auto& error = error_of(answers[0]);
  EXPECT_EQ(error.code, static_cast<std::uint32_t>(ErrorCode::Timeout));
  EXPECT_LE(error.message.size(), 8192u + 4u);
  EXPECT_EQ(error.message.rfind("keys 'aaaa", 0), 0u);
}

TEST(StoreState, AddRejectsNonIntegersAndOverflow) {
  StateHarness h(1);
  h.join_all(1);
  h.send(100, SetRequest{"text", bytes_of("12a")});
  EXPECT_EQ(error_of(h.send(100, AddRequest{"text", 1}).at(0)).code, static_cast<std::uint32_t>(ErrorCode::InvalidArgument));
  EXPECT_EQ(std::get<IntegerResponse>(h.send(100, AddRequest{"n", INT64_MAX}).at(0).response).value, INT64_MAX);
  EXPECT_NE(error_of(h.send(100, AddRequest{"n", 1}).at(0)).message.find("overflows"), std::string::npos);
  EXPECT_EQ(std::get<IntegerResponse>(h.send(100, AddRequest{"n", -1}).at(0).response).value, INT64_MAX - 1);
}

TEST(StoreState, GatherAnswersEveryRankWithBlobsInRankOrder) {
  StateHarness h(3);
  h.join_all(3);
  EXPECT_TRUE(h.send(102, GatherRequest{"g", bytes_of("two"), 1000}).empty());
  EXPECT_TRUE(h.send(100, GatherRequest{"g", bytes_of("zero"), 1000}).empty());
  auto answers = h.send(101, GatherRequest{"g", bytes_of("one"), 1000});
  ASSERT_EQ(answers.size(), 3u);
  for (const auto& a : answers) {
    EXPECT_EQ(std::get<BlobsResponse>(a.response).blobs,
              (std::vector<std::vector<std::byte>>{bytes_of("zero"), bytes_of("one"), bytes_of("two")}));
  }
  // The same name again is a new round.
  EXPECT_TRUE(h.send(100, GatherRequest{"g", {}, 1000}).empty());
  auto late = h.tick(std::chrono::milliseconds(1001));
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(error_of(late[0]).message, "ranks 1, 2 of 3 never arrived within 1.0 s");
}

// A finishing server need not wait for a rank that a gather already gave up on (stopped, hung): only ranks that
// never missed one keep it waiting. A Get that timed out does not count: the key may come from anyone.
TEST(StoreState, RanksAGatherGaveUpOnAreNotWaitedForAtTheEnd) {
  StateHarness h(3);
  h.join_all(3);
  EXPECT_FALSE(h.state.only_unresponsive_ranks_connected());
  h.send(100, GetRequest{"never", 100});
  h.tick(std::chrono::milliseconds(200));
  EXPECT_FALSE(h.state.only_unresponsive_ranks_connected());
  h.send(100, GatherRequest{"g", {}, 100});
  h.send(101, GatherRequest{"g", {}, 100});
  auto late = h.tick(std::chrono::milliseconds(200));
  ASSERT_EQ(late.size(), 2u);
  EXPECT_EQ(error_of(late[0]).message, "rank 2 of 3 never arrived within 0.1 s");
  EXPECT_FALSE(h.state.only_unresponsive_ranks_connected());  // ranks 0 and 1 are still connected and answered
  h.send(100, ByeRequest{});
  EXPECT_FALSE(h.state.only_unresponsive_ranks_connected());
  h.send(101, ByeRequest{});
  EXPECT_TRUE(h.state.only_unresponsive_ranks_connected());  // rank 2 alone: the gather gave up on it
  EXPECT_FALSE(h.state.no_rank_connected());
}

TEST(StoreState, LostRankFailsPendingWaitsNamingIt) {
  StateHarness h(3);
  h.join_all(3);
  h.send(100, GatherRequest{"barrier|x|1", {}, 5000});
  h.send(101, GetRequest{"never", 5000});
  h.send(102, GatherRequest{"barrier|y|1", {}, 5000});  // rank 2 took part in y, but not in x
  auto answers = h.disconnect(102);
  ASSERT_EQ(answers.size(), 2u);
  for (const auto& a : answers) {
    EXPECT_EQ(error_of(a).code, static_cast<std::uint32_t>(ErrorCode::Peer));
    EXPECT_EQ(error_of(a).peer, 2);
    EXPECT_EQ(error_of(a).message, "rank 2 disconnected from the store");
  }
  // Later waits fail at once; requests that need nobody still work.
  EXPECT_EQ(error_of(h.send(100, GetRequest{"other", 5000}).at(0)).peer, 2);
  EXPECT_EQ(error_of(h.send(101, GatherRequest{"barrier|x|1", {}, 5000}).at(0)).peer, 2);
  EXPECT_TRUE(std::holds_alternative<OkResponse>(h.send(100, SetRequest{"k", {}}).at(0).response));
}

TEST(StoreState, RankThatLeftFailsOnlyCollectivesItMissed) {
  StateHarness h(2);
  h.join_all(2);
  h.send(101, ByeRequest{});
  EXPECT_TRUE(h.disconnect(101).empty());  // a clean exit is not a loss
  EXPECT_TRUE(h.send(100, GetRequest{"k", 1000}).empty());
  h.tick(std::chrono::milliseconds(2000));
  auto gather = h.send(100, GatherRequest{"b", {}, 1000});
  EXPECT_EQ(error_of(gather.at(0)).message, "rank 1 already left the store without taking part");
  EXPECT_FALSE(h.state.no_rank_connected());
  h.send(100, ByeRequest{});
  EXPECT_TRUE(h.state.no_rank_connected());
}

TEST(StoreState, AnAttachedConnectionServesItsRankWithoutStandingForIt) {
  StateHarness h(2);
  // Before the rank joined, and with a wrong token: refused and closed.
  auto early = h.send(7, AttachRequest{1, 2, "tok"});
  ASSERT_EQ(early.size(), 1u);
  EXPECT_EQ(error_of(early[0]).code, static_cast<std::uint32_t>(ErrorCode::InvalidArgument));
  EXPECT_NE(error_of(early[0]).message.find("not a member"), std::string::npos) << error_of(early[0]).message;
  EXPECT_TRUE(early[0].close_after);
  h.join_all(2);
  auto wrong = h.send(8, AttachRequest{1, 2, "nope"});
  EXPECT_EQ(error_of(wrong.at(0)).message, kWrongTokenMessage);

  // Rank 1's first connection waits for a key; its attached one sets it (the case a single connection deadlocked).
  auto attached = h.send(9, AttachRequest{1, 2, "tok"});
  ASSERT_EQ(attached.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<OkResponse>(attached[0].response));
  EXPECT_TRUE(h.send(101, GetRequest{"k", 5000}).empty());
  auto set = h.send(9, SetRequest{"k", bytes_of("v")});
  ASSERT_EQ(set.size(), 2u);  // Ok to the setter, the value to the waiting get
  EXPECT_EQ(set[1].conn, 101u);
  EXPECT_EQ(std::get<ValueResponse>(set[1].response).value, bytes_of("v"));

  // A gather from the attached connection counts as its rank's.
  EXPECT_TRUE(h.send(100, GatherRequest{"g", bytes_of("0"), 5000}).empty());
  EXPECT_EQ(h.send(9, GatherRequest{"g", bytes_of("1"), 5000}).size(), 2u);

  // Its Bye and its loss are not the rank's: rank 1's parked get on its first connection keeps waiting.
  EXPECT_TRUE(h.send(101, GetRequest{"later", 5000}).empty());
  h.send(9, ByeRequest{});
  EXPECT_TRUE(h.disconnect(9).empty());
  auto other = h.send(10, AttachRequest{1, 2, "tok"});
  EXPECT_TRUE(h.disconnect(10).empty());
  EXPECT_TRUE(std::holds_alternative<OkResponse>(other.at(0).response));
  EXPECT_EQ(h.send(100, SetRequest{"later", {}}).size(), 2u);
  // The first connection's loss still is.
  EXPECT_TRUE(h.send(100, GetRequest{"never", 5000}).empty());
  auto lost = h.disconnect(101);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(error_of(lost[0]).peer, 1);
}

TEST(StoreState, AttachedConnectionsAreCappedPerRankAndSpeakForNobodyOnceTheRankLeft) {
  StateHarness h(2);
  h.join_all(2);
  for (int i = 0; i < StoreState::kMaxAttachedPerRank; ++i) {
    auto ok = h.send(200 + static_cast<ConnId>(i), AttachRequest{1, 2, "tok"});
    ASSERT_TRUE(std::holds_alternative<OkResponse>(ok.at(0).response)) << "attach " << i;
  }
  auto refused = h.send(300, AttachRequest{1, 2, "tok"});
  EXPECT_NE(error_of(refused.at(0)).message.find("at most 16 threads"), std::string::npos)
      << error_of(refused.at(0)).message;
  EXPECT_TRUE(refused.at(0).close_after);
  // Rank 0 may still attach; rank 1's first connection leaves, and its further ones are answered with a Peer error.
  EXPECT_TRUE(std::holds_alternative<OkResponse>(h.send(301, AttachRequest{0, 2, "tok"}).at(0).response));
  h.send(101, ByeRequest{});
  auto orphan = h.send(200, SetRequest{"k", {}});
  EXPECT_EQ(error_of(orphan.at(0)).code, static_cast<std::uint32_t>(ErrorCode::Peer));
  EXPECT_EQ(error_of(orphan.at(0)).peer, 1);
}

}  // namespace
}  // namespace pickle::bootstrap
