// The choice of transport per pair (transport/select.hpp) on made-up facts: what a box without P2P, a forced
// transport, or ranks on two hosts get, and the errors for choices that cannot work.
#include <gtest/gtest.h>

#include <string>

#include <pickle/error.hpp>

#include "transport/select.hpp"

namespace pickle::transport {
namespace {

PairFacts gpus(bool peer_access) {
  PairFacts facts;
  facts.memory = MemoryKind::Cuda;
  facts.peer_access = peer_access;
  if (!peer_access) facts.no_peer_access_why = "CUDA has no peer access from GPU 0 to GPU 1";
  return facts;
}

std::string error_of(const PairFacts& facts, std::optional<Kind> forced, bool net) {
  try {
    choose(facts, forced, "rank 0 -> peer 1", net);
  } catch (const UnavailableError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TransportSelect, PeerAccessGivesIpcAndItsAbsenceShm) {
  EXPECT_EQ(choose(gpus(true), std::nullopt, "p").kind, Kind::Ipc);
  Choice shm = choose(gpus(false), std::nullopt, "p");
  EXPECT_EQ(shm.kind, Kind::Shm);
  EXPECT_NE(shm.reason.find("no peer access: CUDA has no peer access"), std::string::npos) << shm.reason;
  PairFacts host;
  EXPECT_EQ(choose(host, std::nullopt, "p").kind, Kind::Ipc);
}

TEST(TransportSelect, ForcedTransportsAreHonouredOrRefusedWithTheReason) {
  EXPECT_EQ(choose(gpus(true), Kind::Shm, "p").kind, Kind::Shm);
  EXPECT_EQ(choose(gpus(true), Kind::Shm, "p").reason, "forced by PICKLE_TRANSPORT");
  std::string what = error_of(gpus(false), Kind::Ipc, false);
  EXPECT_NE(what.find("rank 0 -> peer 1: PICKLE_TRANSPORT=ipc cannot be used: CUDA has no peer access"),
            std::string::npos)
      << what;
  what = error_of(PairFacts{}, Kind::Net, false);
  EXPECT_NE(what.find("PICKLE_TRANSPORT=net cannot be used: this build has no net transport"), std::string::npos)
      << what;
  EXPECT_EQ(choose(PairFacts{}, Kind::Net, "p", true).kind, Kind::Net);
  EXPECT_EQ(choose(gpus(true), Kind::Net, "p", true).kind, Kind::Net);  // GPU memory: staged
}

TEST(TransportSelect, RanksOnTwoHostsNeedTheNetTransport) {
  PairFacts facts;
  facts.same_host = false;
  EXPECT_EQ(choose(facts, std::nullopt, "p", true).kind, Kind::Net);
  PairFacts gpus_apart = gpus(true);
  gpus_apart.same_host = false;
  Choice staged = choose(gpus_apart, std::nullopt, "p", true);
  EXPECT_EQ(staged.kind, Kind::Net);
  EXPECT_NE(staged.reason.find("staged"), std::string::npos) << staged.reason;
  std::string what = error_of(facts, std::nullopt, false);
  EXPECT_NE(what.find("different hosts, which needs the net transport"), std::string::npos) << what;
  what = error_of(facts, Kind::Shm, true);
  EXPECT_NE(what.find("PICKLE_TRANSPORT=shm cannot be used: the ranks are on different hosts"), std::string::npos)
      << what;
}

TEST(TransportSelect, NamesRoundTrip) {
  for (Kind kind : {Kind::Ipc, Kind::Shm, Kind::Net}) EXPECT_EQ(parse_kind(kind_name(kind)), kind);
  EXPECT_FALSE(parse_kind("carrier-pigeon"));
}

}  // namespace
}  // namespace pickle::transport
