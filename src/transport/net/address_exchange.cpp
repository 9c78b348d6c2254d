#include "transport/net/address_exchange.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "core/wire.hpp"
#include "transport/net/net_options.hpp"

namespace pickle::transport::net {
namespace {
constexpr std::uint32_t kCardMagic = 0x504e4533;  // "PNE3": the card with the handshake's region and directions
constexpr std::size_t kMaxName = 4096;
constexpr std::uint32_t kMaxLanes = 64;
}  // namespace

std::vector<std::byte> encode_card(const EndpointCard& card) {
  PayloadWriter out;
  out.u32(kCardMagic).string(card.provider).u32(card.lanes).u64(card.chunk).u32(card.directional ? 1 : 0);
  out.u32(static_cast<std::uint32_t>(card.names.size()));
  for (const auto& name : card.names) out.bytes(name);
  out.u64(card.hello_addr).u64(card.hello_key);
  return out.take();
}

EndpointCard decode_card(std::span<const std::byte> bytes, const std::string& what) {
  PayloadReader in(what, bytes);
  if (in.u32("magic") != kCardMagic) throw ProtocolError(cat(what, ": not a net transport endpoint card of this version (does every rank run the same pickle?)"));
  EndpointCard card;
  card.provider = in.string("provider", 256);
  card.lanes = in.u32("lanes");
  card.chunk = in.u64("chunk");
  if (card.chunk < NetOptions::kMinChunk || card.chunk > NetOptions::kMaxChunk) {
    throw ProtocolError(cat(what, ": chunk size ", card.chunk, " out of range"));
  }
  const std::uint32_t directional = in.u32("directional");
  if (directional > 1) throw ProtocolError(cat(what, ": directional flag ", directional));
  card.directional = directional == 1;
  const std::uint32_t count = in.u32("name count");
  const std::uint32_t per_lane = card.directional ? 2 : 1;
  if (card.lanes == 0 || card.lanes > kMaxLanes || count != card.lanes * per_lane) {
    throw ProtocolError(cat(what, ": ", count, " endpoint names for ", card.lanes, " lanes",
                            card.directional ? " of two directions" : ""));
  }
  for (std::uint32_t i = 0; i < count; ++i) {
    auto name = in.bytes("endpoint name", kMaxName);
    card.names.emplace_back(name.begin(), name.end());
  }
  card.hello_addr = in.u64("handshake address");
  card.hello_key = in.u64("handshake key");
  in.expect_end();
  return card;
}

std::string card_key(const std::string& prefix, int from, int to) { return cat(prefix, "/net/card/", from, "->", to); }

EndpointCard fetch_card(Store& store, const std::string& prefix, int rank, int peer, const Deadline& deadline) {
  const std::string key = card_key(prefix, peer, rank);
  // Poll with check() rather than a blocking get(): the store's own timeout may be longer than our deadline.
  auto pause = std::chrono::microseconds(200);
  while (!store.check(key)) {
    if (deadline.expired()) {
      throw TimeoutError(cat("rank ", rank, " -> peer ", peer, ": net transport set-up: the peer did not publish its "
                             "endpoints (store key '", key, "') within ", deadline.timeout().count(), " ms"));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  return decode_card(store.get(key), cat("rank ", rank, " -> peer ", peer, ": endpoint card"));
}

void check_compatible(const EndpointCard& mine, const EndpointCard& theirs, int rank, int peer) {
  if (mine.provider != theirs.provider) {
    throw InvalidArgument(cat("rank ", rank, " -> peer ", peer, ": net transport: this rank uses provider '",
                              mine.provider, "' and the peer '", theirs.provider,
                              "' (set PICKLE_NET_PROVIDER and PICKLE_NET_IFACE alike on every rank)"));
  }
  if (mine.lanes != theirs.lanes) {
    throw InvalidArgument(cat("rank ", rank, " -> peer ", peer, ": net transport: this rank opens ", mine.lanes,
                              " lanes per peer and the peer ", theirs.lanes,
                              " (set PICKLE_NET_LANES alike on every rank)"));
  }
  if (mine.directional != theirs.directional) {
    throw InvalidArgument(cat("rank ", rank, " -> peer ", peer, ": net transport: this rank ",
                              mine.directional ? "opens" : "does not open", " an endpoint per lane and direction and "
                              "the peer ", theirs.directional ? "does" : "does not", " (does every rank run the same "
                              "pickle with the same provider?)"));
  }
}

}  // namespace pickle::transport::net
