#pragma once
// How two ranks learn each other's endpoints: each publishes, per peer, a card in the job's store (the provider it
// chose, its lanes and chunk size, one endpoint name per lane, or two where each lane has an endpoint per direction,
// and where the set-up handshake writes) and reads the card the peer published for it.
// Cards are checked before anything is inserted: ranks that chose different providers, lane counts or directions
// cannot talk, and that is an InvalidArgument naming both choices, not a hang.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <pickle/bootstrap.hpp>

#include "core/clock.hpp"

namespace pickle::transport::net {

struct EndpointCard {
  std::string provider;  ///< fi_info's prov_name, e.g. "tcp;ofi_rxm"
  std::uint32_t lanes = 0;
  std::uint64_t chunk = 0;  ///< the publisher's chunk size: the receiver counts the publisher's chunks with it
  /// Each lane has an endpoint for each direction (CPU providers, net_transport.cpp): `names` holds the endpoints
  /// the peer writes into (one per lane), then those this rank writes from (one per lane).
  bool directional = false;
  std::vector<std::vector<std::byte>> names;  ///< one endpoint name per lane, twice that when directional
  /// Where the peer's set-up handshake writes (NetTransport's constructor): a few bytes of the publisher's, exposed.
  std::uint64_t hello_addr = 0;
  std::uint64_t hello_key = 0;
};

std::vector<std::byte> encode_card(const EndpointCard& card);
/// ProtocolError (naming `what`) for anything malformed; at most 64 lanes of names of at most 4 KiB each.
EndpointCard decode_card(std::span<const std::byte> bytes, const std::string& what);

/// The store key of the card that `from` publishes for `to`.
std::string card_key(const std::string& prefix, int from, int to);

/// Waits (polling the store, bounded by `deadline`) for the card `peer` published for `rank` and decodes it.
/// TimeoutError names the peer and the key when it never comes.
EndpointCard fetch_card(Store& store, const std::string& prefix, int rank, int peer, const Deadline& deadline);

/// InvalidArgument naming both ranks' choices when `theirs` cannot talk to `mine`.
void check_compatible(const EndpointCard& mine, const EndpointCard& theirs, int rank, int peer);

}  // namespace pickle::transport::net
