#pragma once
// Handing a buffer of this process to a peer process over a file-descriptor channel (device::export_memory's
// descriptor and file descriptor), and mapping one the peer handed over: the raw copy engine's backends map the
// peer's receive buffer and flag words this way (p2p_context.cpp, interference_traffic_ce.cpp).

#include <memory>

#include "core/clock.hpp"
#include "device/export.hpp"
#include "device/fd_channel.hpp"

namespace pickle::bench {

/// Sends `ptr`'s allocation, which must start at `ptr` (the bench's buffers come from device::allocate).
void send_export(device::FdChannel& channel, const void* ptr, const Deadline& deadline);
/// Receives what the peer's send_export sent and maps it on `device`.
std::unique_ptr<device::ImportedMemory> recv_import(device::FdChannel& channel, int device, const Deadline& deadline);

}  // namespace pickle::bench
