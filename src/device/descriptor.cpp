#include "device/descriptor.hpp"

#include <cstring>

#include <pickle/error.hpp>

#include "core/format.hpp"

namespace pickle::device {
namespace {

constexpr std::uint32_t kMagic = 0x444D4B50;  // "PKMD" read as little-endian bytes
constexpr std::uint16_t kVersion = 1;

void put(std::vector<std::byte>& out, std::uint64_t value, int width) {
  for (int i = 0; i < width; ++i) out.push_back(static_cast<std::byte>((value >> (8 * i)) & 0xff));
}

std::uint64_t take(std::span<const std::byte> in, std::size_t at, int width) {
  std::uint64_t value = 0;
  for (int i = 0; i < width; ++i) value |= static_cast<std::uint64_t>(in[at + i]) << (8 * i);
  return value;
}

}  // namespace

std::vector<std::byte> serialize(const MemoryDescriptor& d) {
  std::vector<std::byte> out;
  out.reserve(kDescriptorBytesWithHandle);
  put(out, kMagic, 4);
  put(out, kVersion, 2);
  put(out, static_cast<std::uint8_t>(d.kind), 1);
  put(out, static_cast<std::uint8_t>(d.method), 1);
  put(out, static_cast<std::uint32_t>(d.device), 4);
  put(out, d.pid, 4);
  put(out, d.bytes, 8);
  put(out, d.id, 8);
  put(out, d.base, 8);
  if (d.has_ipc_handle()) out.insert(out.end(), d.ipc_handle.begin(), d.ipc_handle.end());
  return out;
}

MemoryDescriptor parse_descriptor(std::span<const std::byte> in) {
  auto fail = [&](const std::string& why) {
    return ProtocolError(cat("memory descriptor of ", in.size(), " bytes: ", why));
  };
  if (in.size() < kDescriptorBytes) throw fail(cat("truncated (at least ", kDescriptorBytes, " bytes expected)"));
  if (take(in, 0, 4) != kMagic) throw fail("bad magic number (not a pickle memory descriptor)");
  if (auto version = take(in, 4, 2); version != kVersion) {
    throw fail(cat("version ", version, " (this pickle reads version ", kVersion, ")"));
  }
  MemoryDescriptor d;
  auto kind = take(in, 6, 1);
  auto method = take(in, 7, 1);
  if (kind > static_cast<std::uint8_t>(MemoryKind::Cuda)) throw fail(cat("unknown memory kind ", kind));
  if (method > static_cast<std::uint8_t>(AllocMethod::CudaVmm)) throw fail(cat("unknown allocation method ", method));
  d.kind = static_cast<MemoryKind>(kind);
  d.method = static_cast<AllocMethod>(method);
  d.device = static_cast<int>(static_cast<std::int32_t>(take(in, 8, 4)));
  d.pid = static_cast<std::uint32_t>(take(in, 12, 4));
  d.bytes = take(in, 16, 8);
  d.id = take(in, 24, 8);
  d.base = take(in, 32, 8);

  if (d.kind == MemoryKind::Host && (d.method != AllocMethod::Default || d.device != -1)) {
    throw fail("host memory must have method default and device -1");
  }
  if (d.kind == MemoryKind::Cuda && (d.method == AllocMethod::Default || d.device < 0)) {
    throw fail("CUDA memory needs method cudaMalloc or vmm and a device >= 0");
  }
  if (d.bytes == 0) throw fail("allocation of 0 bytes");
  std::size_t expected = d.has_ipc_handle() ? kDescriptorBytesWithHandle : kDescriptorBytes;
  if (in.size() != expected) throw fail(cat(expected, " bytes expected for this kind and method"));
  if (d.has_ipc_handle()) std::memcpy(d.ipc_handle.data(), in.data() + kDescriptorBytes, d.ipc_handle.size());
  return d;
}

}  // namespace pickle::device
