// The bootstrap store when things go wrong, between real processes: a rank that never arrives, a rank 0 that never
// answers, a foreign client with the wrong token, a duplicate rank, raw sockets sending malformed and oversized
// frames, and a rank killed with SIGKILL. The ranks are the store_scenario child of test_store.cpp.

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <pickle/error.hpp>

#include "bootstrap/frame.hpp"
#include "bootstrap/messages.hpp"
#include "core/clock.hpp"
#include "core/format.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::vector<std::string> env_for(int rank, int world, int port, const std::string& timeout,
                                 std::vector<std::string> extra = {}) {
  auto env = rank_env(rank, world, port);
  env.push_back("PICKLE_TIMEOUT=" + timeout);
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

/// Waits until a child's file exists (the child writes it once it has joined the store).
bool wait_for_file(const std::string& path, std::chrono::milliseconds timeout) {
  Deadline deadline(timeout);
  while (!fs::exists(path)) {
    if (deadline.expired()) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

/// A child's recorded outcome: "ok", or "<code name>\n<message>".
std::string outcome(const std::string& path) { return read_file(path); }

/// A plain blocking TCP client for talking to the store without the library: how a confused or hostile peer looks.
class RawClient {
 public:
  /// Connects to 127.0.0.1:port, retrying until rank 0 listens.
  explicit RawClient(int port) {
    Deadline deadline(20s);
    while (true) {
      fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<std::uint16_t>(port));
      if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) break;
      ::close(fd_);
      fd_ = -1;
      if (deadline.expired()) throw std::runtime_error("the store never listened");
      std::this_thread::sleep_for(20ms);
    }
    timeval tv{5, 0};  // a server that does not drop us within 5 s fails the test instead of hanging it
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  void send(const std::vector<std::byte>& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }

  /// Reads until the server closes the connection; returns what it sent. closed is false when it did not close
  /// within the receive timeout.
  std::vector<std::byte> read_until_closed(bool& closed) {
    std::vector<std::byte> received;
    std::byte buffer[4096];
    while (true) {
      ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n > 0) {
        received.insert(received.end(), buffer, buffer + n);
        continue;
      }
      closed = n == 0 || errno == ECONNRESET;
      return received;
    }
  }

 private:
  int fd_ = -1;
};

std::vector<std::byte> raw_header(std::uint16_t type, std::uint64_t length, std::uint32_t magic = bootstrap::kFrameMagic) {
  PayloadWriter w;
  w.u32(magic).u8(static_cast<std::uint8_t>(bootstrap::kFrameVersion)).u8(0).u8(static_cast<std::uint8_t>(type)).u8(0).u64(length);
  return w.take();
}

/// Sends the bytes on a fresh connection and checks that the server closes it, answering with a Protocol error
/// whose message contains `needle` (when given).
void expect_dropped(int port, const std::vector<std::byte>& bytes, const std::string& needle, bool half_close = false) {
  RawClient client(port);
  client.send(bytes);
  if (half_close) client.shutdown_write();
  bool closed = false;
  auto received = client.read_until_closed(closed);
  EXPECT_TRUE(closed) << "the server kept a connection that sent " << needle;
  if (needle.empty()) return;
  bootstrap::FrameParser parser;
  parser.feed(received);
  auto frame = parser.next();
  ASSERT_TRUE(frame) << "no answer before the close (" << needle << ")";
  auto answer = bootstrap::decode_response(*frame);
  auto* error = std::get_if<bootstrap::ErrorResponse>(&answer);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, static_cast<std::uint32_t>(ErrorCode::Protocol));
  EXPECT_NE(error->message.find(needle), std::string::npos) << error->message;
}

TEST(StoreFaults, TimeoutNamesTheRankThatNeverArrived) {
  TempDir dir("store");
  const int port = free_tcp_port();
  Stopwatch watch;
  // World of 3, only ranks 0 and 1 started.
  Child rank0("store_scenario", {"join", dir / "r0"}, env_for(0, 3, port, "2"));
  Child rank1("store_scenario", {"join", dir / "r1"}, env_for(1, 3, port, "2"));
  ASSERT_TRUE(rank0.wait(20s).ok());
  ASSERT_TRUE(rank1.wait(20s).ok());
  EXPECT_LT(watch.seconds(), 8.0);
  for (const char* name : {"r0", "r1"}) {
    const std::string text = outcome(dir / name);
    EXPECT_EQ(text.rfind("Timeout\n", 0), 0u) << name << ": " << text;
    EXPECT_NE(text.find("rank 2 of 3 never arrived"), std::string::npos) << name << ": " << text;
  }
  EXPECT_NE(outcome(dir / "r0").find("rank 0: store rendezvous"), std::string::npos);
  EXPECT_NE(outcome(dir / "r1").find("rank 1: store rendezvous"), std::string::npos);
}

TEST(StoreFaults, RankZeroThatNeverAnswersIsNamed) {
  TempDir dir("store");
  const int port = free_tcp_port();
  Child rank1("store_scenario", {"join", dir / "r1"}, env_for(1, 2, port, "1"));
  ASSERT_TRUE(rank1.wait(20s).ok());
  const std::string text = outcome(dir / "r1");
  EXPECT_EQ(text.rfind("Timeout\n", 0), 0u) << text;
  EXPECT_NE(text.find(cat("rank 1: rank 0 at 127.0.0.1:", port, " never answered")), std::string::npos) << text;
}

TEST(StoreFaults, ForeignTokenAndDuplicateRankAreRejectedWhileTheJobCompletes) {
  TempDir dir("store");
  const int port = free_tcp_port();
  Child rank0("store_scenario", {"ops_after_go", dir / "r0", dir / "go"}, env_for(0, 2, port, "20"));
  // Another job's process (different token) claiming rank 1, before the real rank 1 arrives.
  Child foreign("store_scenario", {"join", dir / "foreign"}, env_for(1, 2, port, "20", {"PICKLE_TOKEN=other-job"}));
  ASSERT_TRUE(foreign.wait(20s).ok());
  const std::string rejected = outcome(dir / "foreign");
  EXPECT_EQ(rejected, cat("Protocol\npickle Protocol error: rank 1: store at 127.0.0.1:", port,
                          " rejected our token (PICKLE_TOKEN, or the token derived from the job, differs from rank 0's)"));

  Child rank1("store_scenario", {"ops_after_go", dir / "r1", dir / "go"}, env_for(1, 2, port, "20"));
  ASSERT_TRUE(wait_for_file(dir / "r0.joined", 20s));
  ASSERT_TRUE(wait_for_file(dir / "r1.joined", 20s));
  // A second process with the right token and a rank that is already taken.
  Child duplicate("store_scenario", {"join", dir / "dup"}, env_for(1, 2, port, "20"));
  ASSERT_TRUE(duplicate.wait(20s).ok());
  const std::string refused = outcome(dir / "dup");
  EXPECT_EQ(refused.rfind("InvalidArgument\n", 0), 0u) << refused;
  EXPECT_NE(refused.find("rank 1 already joined the store"), std::string::npos) << refused;

  std::ofstream(dir / "go") << "go";
  ASSERT_TRUE(rank0.wait(30s).ok());
  ASSERT_TRUE(rank1.wait(30s).ok());
  EXPECT_EQ(outcome(dir / "r0"), "ok");
  EXPECT_EQ(outcome(dir / "r1"), "ok");
}

TEST(StoreFaults, MalformedAndOversizedFramesAreDroppedWhileTheJobCompletes) {
  TempDir dir("store");
  const int port = free_tcp_port();
  Child rank0("store_scenario", {"ops_after_go", dir / "r0", dir / "go"}, env_for(0, 2, port, "20"));

  using bootstrap::MessageType;
  std::vector<std::byte> garbage(16);
  for (std::size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<std::byte>("GET / HTTP/1.1\r\n"[i]);
  expect_dropped(port, garbage, "bad magic");
  expect_dropped(port, raw_header(static_cast<std::uint16_t>(MessageType::Set), std::uint64_t{4} << 30), "above the limit");
  // Before Hello a client may not announce more than a Hello's worth of bytes.
  expect_dropped(port, raw_header(static_cast<std::uint16_t>(MessageType::Hello), 1 << 20), "above the limit");
  expect_dropped(port, raw_header(static_cast<std::uint16_t>(MessageType::Set), 0, 0xDEADBEEF), "bad magic");
  expect_dropped(port, bootstrap::encode(bootstrap::OkResponse{}), "not a request");
  expect_dropped(port, bootstrap::encode(bootstrap::SetRequest{"k", {}}), "before Hello");
  {
    // A Hello whose fields lie about their lengths.
    auto frame = raw_header(static_cast<std::uint16_t>(MessageType::Hello), 12);
    PayloadWriter w;
    w.u32(0).u32(2).u32(1000);  // rank 0, world 2, a 1000-byte token in a 12-byte payload
    auto payload = w.take();
    frame.insert(frame.end(), payload.begin(), payload.end());
    expect_dropped(port, frame, "truncated");
  }
  {
    // A truncated frame followed by the end of the stream.
    auto frame = raw_header(static_cast<std::uint16_t>(MessageType::Hello), 100);
    frame.resize(frame.size() + 10);
    expect_dropped(port, frame, "", /*half_close=*/true);
  }

  Child rank1("store_scenario", {"ops_after_go", dir / "r1", dir / "go"}, env_for(1, 2, port, "20"));
  ASSERT_TRUE(wait_for_file(dir / "r1.joined", 20s));
  // Noise on a connection while the real ranks are joined.
  {
    std::vector<std::byte> noise(4096);
    for (std::size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<std::byte>(i * 2654435761u >> 13);
    expect_dropped(port, noise, "");
  }
  std::ofstream(dir / "go") << "go";
  ASSERT_TRUE(rank0.wait(30s).ok());
  ASSERT_TRUE(rank1.wait(30s).ok());
  EXPECT_EQ(outcome(dir / "r0"), "ok");
  EXPECT_EQ(outcome(dir / "r1"), "ok");
}

TEST(StoreFaults, KilledRankMakesTheOthersFailNamingItWellWithinTheTimeout) {
  TempDir dir("store");
  const int port = free_tcp_port();
  // A long timeout: the failure must come from the disconnect, not from waiting it out.
  Child rank0("store_scenario", {"barrier", dir / "r0"}, env_for(0, 3, port, "60"));
  Child rank1("store_scenario", {"barrier", dir / "r1"}, env_for(1, 3, port, "60"));
  Child rank2("store_scenario", {"join_then_sleep", dir / "r2"}, env_for(2, 3, port, "60"));
  ASSERT_TRUE(wait_for_file(dir / "r2", 20s));
  Stopwatch watch;
  rank2.kill(SIGKILL);
  ASSERT_TRUE(rank0.wait(20s).ok());
  ASSERT_TRUE(rank1.wait(20s).ok());
  EXPECT_LT(watch.seconds(), 10.0);
  for (const char* name : {"r0", "r1"}) {
    const std::string text = outcome(dir / name);
    EXPECT_EQ(text.rfind("Peer\n", 0), 0u) << name << ": " << text;
    EXPECT_NE(text.find("barrier 'after-join' (call 1): rank 2 disconnected from the store"), std::string::npos)
        << name << ": " << text;
  }
}

}  // namespace
}  // namespace pickle::test
