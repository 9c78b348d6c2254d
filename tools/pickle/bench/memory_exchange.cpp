#include "memory_exchange.hpp"

#include <pickle/error.hpp>

#include "device/descriptor.hpp"

namespace pickle::bench {

void send_export(device::FdChannel& channel, const void* ptr, const Deadline& deadline) {
  auto exported = device::export_memory(ptr);
  if (exported.offset != 0) {
    throw Error(ErrorCode::Internal, "bench: a buffer from device::allocate does not start its allocation");
  }
  channel.send(device::serialize(exported.descriptor), exported.fd.get(), deadline);
}

std::unique_ptr<device::ImportedMemory> recv_import(device::FdChannel& channel, int device, const Deadline& deadline) {
  auto message = channel.recv(deadline);
  return device::import_memory(device::parse_descriptor(message.bytes), std::move(message.fd), device);
}

}  // namespace pickle::bench
