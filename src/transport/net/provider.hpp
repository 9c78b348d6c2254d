#pragma once
// Choosing the libfabric provider and interface: one fi_getinfo for reliable-datagram (RDM) endpoints that can
// RMA-write with remote CQ data, filtered by PICKLE_NET_IFACE. What the chosen provider requires of us (local
// registration, virtual or offset addressing, receive buffers for CQ data) is read from the answer.

#include <string>

#include "transport/net/fabric_objects.hpp"
#include "transport/net/net_options.hpp"

namespace pickle::transport::net {

/// The libfabric API version pickle asks for (FI_MR_* mode bits, FI_CONTEXT2, FI_HMEM all exist since 1.10).
constexpr std::uint32_t kFabricApiVersion = FI_VERSION(1, 10);

/// The fi_info of the first endpoint type that fits `options` (provider, interface), preferring IPv4 addresses
/// among several (an IPv6 link-local address needs a scope that peers cannot use). A provider or interface that is
/// not there is an UnavailableError naming what was asked for and every provider/interface fi_getinfo offers;
/// `rank` goes into the message.
InfoPtr select_provider(const NetOptions& options, int rank);

/// "tcp;ofi_rxm on lo (fabric 127.0.0.1/32)": for logs and `pickle info`.
std::string describe_provider(const fi_info& info);

}  // namespace pickle::transport::net
