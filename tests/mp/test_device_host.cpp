// Host memory and host streams across real processes: the CPU twin of CUDA IPC. The parent exports memfd-backed
// memory over an FdChannel; a child process (this binary, started fresh) maps it, writes, and signals.

#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstring>

#include <pickle/error.hpp>

#include "core/env.hpp"
#include "device/export.hpp"
#include "device/fd_channel.hpp"
#include "device/memory.hpp"
#include "device/stream.hpp"
#include "subprocess.hpp"

namespace pickle::device {
namespace {

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ull;

std::string unique_name(const char* what) {
  static int counter = 0;
  return "pickle-test-" + std::to_string(getpid()) + "-" + what + "-" + std::to_string(counter++);
}

Deadline peer_deadline() { return Deadline::after_seconds(env::timeout_seconds()); }

/// Byte i of the pattern for `seed`: position dependent, so that a shifted or partial copy shows.
unsigned char pattern_byte(std::size_t i, std::uint64_t seed) {
  std::uint64_t word = (i / 8) * kGolden + seed;
  return static_cast<unsigned char>(word >> (8 * (i % 8)));
}

void fill(unsigned char* out, std::size_t bytes, std::uint64_t seed) {
  for (std::size_t i = 0; i < bytes; ++i) out[i] = pattern_byte(i, seed);
}

/// Index of the first byte that differs from the pattern, or bytes when all match.
std::size_t first_mismatch(const unsigned char* data, std::size_t bytes, std::uint64_t seed) {
  for (std::size_t i = 0; i < bytes; ++i) {
    if (data[i] != pattern_byte(i, seed)) return i;
  }
  return bytes;
}

/// Sends an export: descriptor bytes followed by the 8-byte offset, with the fd attached.
void send_export(FdChannel& channel, const ExportedMemory& exported) {
  auto bytes = serialize(exported.descriptor);
  std::uint64_t offset = exported.offset;
  const auto* raw = reinterpret_cast<const std::byte*>(&offset);
  bytes.insert(bytes.end(), raw, raw + sizeof offset);
  channel.send(bytes, exported.fd.get(), peer_deadline());
}

struct ReceivedExport {
  std::unique_ptr<ImportedMemory> memory;
  std::uint64_t offset = 0;
};

ReceivedExport receive_import(FdChannel& channel) {
  FdMessage message = channel.recv(peer_deadline());
  if (message.bytes.size() < sizeof(std::uint64_t)) throw ProtocolError("export message too short");
  std::size_t descriptor_bytes = message.bytes.size() - sizeof(std::uint64_t);
  ReceivedExport out;
  std::memcpy(&out.offset, message.bytes.data() + descriptor_bytes, sizeof out.offset);
  MemoryDescriptor descriptor = parse_descriptor(std::span(message.bytes.data(), descriptor_bytes));
  out.memory = import_memory(descriptor, std::move(message.fd));
  return out;
}

// Child: maps the parent's memory, writes the pattern from the exported offset to the end, says "done".
PICKLE_CHILD(device_host_writer) {
  FdChannel channel = FdChannel::connect(args.at(0), peer_deadline());
  std::uint64_t seed = std::stoull(args.at(1));
  ReceivedExport received = receive_import(channel);
  auto* base = static_cast<unsigned char*>(received.memory->data());
  fill(base + received.offset, received.memory->bytes() - received.offset, seed);
  std::byte done{1};
  channel.send(std::span(&done, 1), peer_deadline());
  return 0;
}

TEST(DeviceHostMp, ExportedMemoryIsWrittenByAnotherProcess) {
  for (std::size_t bytes : {std::size_t{1}, std::size_t{4096 + 3}, std::size_t{64} << 20}) {
    SCOPED_TRACE(bytes);
    auto memory = allocate(MemoryKind::Host, bytes);
    auto* base = static_cast<unsigned char*>(memory->data());
    std::size_t offset = bytes / 3;  // export an interior pointer, as a caching allocator would hand out
    std::uint64_t seed = bytes * 31 + 7;
    FdListener listener(unique_name("writer"));
    test::Child child("device_host_writer", {listener.name(), std::to_string(seed)});
    FdChannel channel = listener.accept(peer_deadline());
    ExportedMemory exported = export_memory(base + offset);
    ASSERT_EQ(exported.offset, offset);
    send_export(channel, exported);
    FdMessage done = channel.recv(peer_deadline());
    ASSERT_EQ(done.bytes.size(), 1u);
    test::ExitStatus status = child.wait(std::chrono::seconds(30));
    ASSERT_TRUE(status.ok()) << status.describe();

    for (std::size_t i = 0; i < offset; ++i) ASSERT_EQ(base[i], 0) << "byte " << i << " before the offset changed";
    // The child's pattern is indexed from the exported pointer.
    std::size_t bad = first_mismatch(base + offset, bytes - offset, seed);
    ASSERT_EQ(bad, bytes - offset) << "first wrong byte at offset " << offset + bad;
  }
}

// Child "A": enqueues every round up front on its own stream: wait for the consumer's ack of the previous round,
// copy the round's data into the consumer's memory, raise the flag. Then synchronizes and exits.
PICKLE_CHILD(device_host_producer) {
  FdChannel channel = FdChannel::connect(args.at(0), peer_deadline());
  std::size_t bytes = std::stoull(args.at(1));
  unsigned rounds = static_cast<unsigned>(std::stoul(args.at(2)));
  ReceivedExport received = receive_import(channel);
  auto* shared = static_cast<unsigned char*>(received.memory->data());
  auto* flag = reinterpret_cast<std::uint32_t*>(shared);
  auto* ack = reinterpret_cast<std::uint32_t*>(shared + 64);
  unsigned char* window = shared + 4096;

  auto sources = allocate(MemoryKind::Host, bytes * rounds);
  auto* source = static_cast<unsigned char*>(sources->data());
  for (unsigned r = 0; r < rounds; ++r) fill(source + r * bytes, bytes, r + 1);
  auto stream = make_stream(MemoryKind::Host);
  for (unsigned r = 0; r < rounds; ++r) {
    stream->wait_value(ack, r);
    stream->copy(window, source + r * bytes, bytes);
    stream->write_value(flag, r + 1);
  }
  stream->synchronize();
  return 0;
}

TEST(DeviceHostMp, StreamFlagsOrderCopiesAcrossProcesses) {
  constexpr std::size_t kBytes = (3 << 20) + 11;
  constexpr unsigned kRounds = 8;
  auto shared = allocate(MemoryKind::Host, 4096 + kBytes);  // [flag][ack at 64][window at 4096]
  auto* base = static_cast<unsigned char*>(shared->data());
  auto* flag = reinterpret_cast<std::uint32_t*>(base);
  auto* ack = reinterpret_cast<std::uint32_t*>(base + 64);
  auto results = allocate(MemoryKind::Host, kBytes * kRounds);
  auto* out = static_cast<unsigned char*>(results->data());

  // This process is "B": everything is enqueued before the producer even exists, so every round must wait.
  auto stream = make_stream(MemoryKind::Host);
  for (unsigned r = 0; r < kRounds; ++r) {
    stream->wait_value(flag, r + 1);
    stream->copy(out + r * kBytes, base + 4096, kBytes);
    stream->write_value(ack, r + 1);
  }
  EXPECT_FALSE(stream->query());

  FdListener listener(unique_name("producer"));
  test::Child child("device_host_producer", {listener.name(), std::to_string(kBytes), std::to_string(kRounds)});
  FdChannel channel = listener.accept(peer_deadline());
  send_export(channel, export_memory(base));
  stream->synchronize();
  test::ExitStatus status = child.wait(std::chrono::seconds(30));
  ASSERT_TRUE(status.ok()) << status.describe();
  for (unsigned r = 0; r < kRounds; ++r) {
    std::size_t bad = first_mismatch(out + r * kBytes, kBytes, r + 1);
    ASSERT_EQ(bad, kBytes) << "round " << r << ": first wrong byte at " << bad;
  }
}

// Child: imports and exits without ever raising the flag (a peer that dies mid-protocol).
PICKLE_CHILD(device_host_silent) {
  FdChannel channel = FdChannel::connect(args.at(0), peer_deadline());
  ReceivedExport received = receive_import(channel);
  return 0;
}

TEST(DeviceHostMp, WaitOnADeadPeerTimesOut) {
  auto shared = allocate(MemoryKind::Host, 4096);
  auto* flag = static_cast<std::uint32_t*>(shared->data());
  auto stream = make_stream(MemoryKind::Host);
  stream->wait_value(flag, 1);
  FdListener listener(unique_name("silent"));
  test::Child child("device_host_silent", {listener.name()});
  FdChannel channel = listener.accept(peer_deadline());
  send_export(channel, export_memory(flag));
  test::ExitStatus status = child.wait(std::chrono::seconds(30));
  EXPECT_TRUE(status.ok()) << status.describe();
  // Only the wait under test gets the 1 s timeout (synchronize reads it at call time): the child's start, connect
  // and import above keep the default, which a loaded 2-core machine may need.
  setenv("PICKLE_TIMEOUT", "1", 1);
  Stopwatch watch;
  EXPECT_THROW(stream->synchronize(), TimeoutError);
  EXPECT_LT(watch.seconds(), 3.0);
  std::atomic_ref<std::uint32_t>(*flag).store(1, std::memory_order_release);  // release the stream
  stream->synchronize();
  unsetenv("PICKLE_TIMEOUT");
}

}  // namespace
}  // namespace pickle::device
