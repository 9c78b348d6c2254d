#include "compute_copy_load.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <vector>

#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "core/env.hpp"
#include "core/format.hpp"

namespace pickle::bench {

CopyLoad::CopyLoad(int device, double gbps)
    : device_(device),
      gbps_(gbps),
      source_(kChunkBytes, "bench compute --copy-load source"),
      destination_(kChunkBytes, "bench compute --copy-load destination"),
      stream_("bench compute --copy-load stream") {
  if (!(gbps > 0)) throw InvalidArgument(cat("bench compute --copy-load: the rate must be positive, not ", gbps));
  cuda::check(cudaMemset(source_.data(), kSourceByte, kChunkBytes), "cudaMemset", "bench compute --copy-load source");
}

CopyLoad::~CopyLoad() {
  if (thread_.joinable()) {
    stopping_ = true;
    thread_.join();
  }
  cudaStreamSynchronize(stream_.get());  // the buffers must outlive their copies
}

void CopyLoad::start() {
  if (thread_.joinable()) throw InvalidArgument("bench compute --copy-load: started twice");
  stopping_ = false;
  failure_ = nullptr;
  copies_ = 0;
  // A copy that never lands must show: the destination starts as something else than the source.
  cuda::check(cudaMemsetAsync(destination_.data(), 0, kChunkBytes, stream_.get()), "cudaMemsetAsync",
              "bench compute --copy-load destination");
  started_ns_ = now_ns();
  thread_ = std::thread([this] { pace(); });
}

double CopyLoad::stop() {
  if (!thread_.joinable()) throw InvalidArgument("bench compute --copy-load: stopped without a start");
  stopping_ = true;
  thread_.join();
  if (failure_) std::rethrow_exception(failure_);
  cuda::wait_stream(stream_.get(), Deadline::after_seconds(env::timeout_seconds()), "bench compute --copy-load");
  const double seconds = static_cast<double>(now_ns() - started_ns_) / 1e9;
  check_destination();
  return seconds > 0 ? static_cast<double>(copies_ * kChunkBytes) / seconds / 1e9 : 0;
}

void CopyLoad::check_destination() const {
  if (copies_ == 0) return;
  std::vector<unsigned char> copied(kChunkBytes);
  cuda::check(cudaMemcpy(copied.data(), destination_.data(), kChunkBytes, cudaMemcpyDeviceToHost), "cudaMemcpy",
              "bench compute --copy-load check");
  const auto wrong = static_cast<std::size_t>(
      std::count_if(copied.begin(), copied.end(), [](unsigned char byte) { return byte != kSourceByte; }));
  if (wrong != 0) {
    throw Error(ErrorCode::Internal, cat("bench compute --copy-load: ", wrong, " of ", kChunkBytes,
                                          " bytes of the last copy's destination differ from its source"));
  }
}

void CopyLoad::enqueue_copy(const std::string& what) {
  // Not cudaMemcpyBatchAsync with cudaMemcpyFlagPreferOverlapWithCompute: between two GPUs (CUDA 13.0, driver
  // 580.159.04) a one-copy batch with that hint from and into one GPU's memory left the destination unwritten
  // (docs/results/2026-11-28k-h200.md); stop() checks the destination now.
  cuda::check(cudaMemcpyAsync(destination_.data(), source_.data(), kChunkBytes, cudaMemcpyDeviceToDevice,
                              stream_.get()),
              "cudaMemcpyAsync", what);
}

void CopyLoad::pace() {
  try {
    cuda::check(cudaSetDevice(device_), "cudaSetDevice", "bench compute --copy-load");
    const std::string what = "bench compute --copy-load";
    cuda::EventQueue in_flight(what);
    using Clock = std::chrono::steady_clock;
    const auto period = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(static_cast<double>(kChunkBytes) / (gbps_ * 1e9)));
    auto next = Clock::now();
    while (!stopping_) {
      while (in_flight.pending() > 0 && in_flight.oldest_done()) in_flight.retire_oldest();
      if (in_flight.pending() >= kMaxInFlight) {  // the copies lag the rate: look again shortly
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        continue;
      }
      if (Clock::now() < next) {
        std::this_thread::sleep_until(next);
        continue;
      }
      enqueue_copy(what);
      in_flight.record(stream_.get());
      ++copies_;
      // Copies slower than the rate asked (they are SM work, held back by a busy GPU): the schedule does not pile
      // up copies to catch up with.
      next = std::max(next + period, Clock::now() - period);
    }
  } catch (...) {
    failure_ = std::current_exception();
  }
}

}  // namespace pickle::bench
