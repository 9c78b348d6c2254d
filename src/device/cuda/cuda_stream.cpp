// CUDA streams and events. Copies are cudaMemcpyAsync (copy engines); flags are cuStreamWriteValue32 /
// cuStreamWaitValue32, which the GPU's front end executes without an SM. Waits from the host poll with a deadline,
// never cudaStreamSynchronize, so that a flag that never comes is a TimeoutError instead of a hang.
//
// Note: CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1 is deliberately not consulted: it reads 0 on H200 although
// the (v2) memory operations work there.

#include <algorithm>
#include <mutex>
#include <optional>
#include <vector>

#include <pickle/error.hpp>

#include "device/backends.hpp"
#include "device/cuda/driver_api.hpp"
#include "device/cuda/host_callbacks.hpp"
#include "device/host/backoff.hpp"

namespace pickle::device::cuda {
namespace {

/// Makes `device` current for a stream operation; free when it already is (the common case).
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess) cudaGetLastError();
    if (current == device && bound_ == device) return;
    PICKLE_CUDA((OpContext{.op = "select CUDA device"}), cudaSetDevice(device));
    bound_ = device;
    if (current >= 0 && current != device) restore_ = current;
  }
  ~CurrentDevice() {
    if (restore_ < 0) return;
    if (cudaSetDevice(restore_) == cudaSuccess) bound_ = restore_;
    else cudaGetLastError();
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  // The device whose context pickle bound on this thread: cudaGetDevice alone answers 0 on a fresh thread that has
  // no context bound yet, and driver calls need one.
  static thread_local int bound_;
  int restore_ = -1;
};

thread_local int CurrentDevice::bound_ = -1;

std::string seconds_text(const Deadline& deadline) {
  return cat(static_cast<double>(deadline.timeout().count()) / 1000.0, " s");
}

class CudaEvent final : public Event {
 public:
  CudaEvent(int device, bool timing) : device_(device), timing_(timing) {
    std::string op = cat("create a CUDA event on device ", device);
    OpContext ctx{.op = op};
    require_device(device, ctx);
    DeviceGuard guard(device);
    PICKLE_CUDA(ctx, cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~CudaEvent() override {
    if (cudaEventDestroy(event_) != cudaSuccess) cudaGetLastError();
  }

  MemoryKind kind() const noexcept override { return MemoryKind::Cuda; }
  int device() const noexcept { return device_; }
  cudaEvent_t handle() const noexcept { return event_; }
  void* native_handle() const noexcept override { return event_; }

  bool query() override {
    cudaError_t status = cudaEventQuery(event_);
    if (status == cudaSuccess) return true;
    if (status == cudaErrorNotReady) return false;
    throw_runtime_error(status, "cudaEventQuery", {.op = "CUDA event query"});
  }

  void synchronize_until(const Deadline& deadline) override {
    host::Backoff backoff;
    while (!query()) {
      if (deadline.expired()) {
        throw TimeoutError(cat("CUDA event synchronize (device ", device_, "): not complete after ",
                               seconds_text(deadline), " (is its stream stuck on a wait_value?)"));
      }
      backoff.pause();
    }
  }

  float elapsed_ms(const Event& start) const override {
    const auto* other = dynamic_cast<const CudaEvent*>(&start);
    if (other == nullptr) throw InvalidArgument("CUDA event elapsed_ms: the start event is not a CUDA event");
    if (!timing_ || !other->timing_) {
      throw InvalidArgument("CUDA event elapsed_ms: an event made for ordering only (make_ordering_event) keeps no time");
    }
    float ms = 0;
    cudaError_t status = cudaEventElapsedTime(&ms, other->event_, event_);
    if (status == cudaErrorNotReady || status == cudaErrorInvalidResourceHandle) {
      cudaGetLastError();
      throw InvalidArgument(cat("CUDA event elapsed_ms: an event is not recorded or not complete (",
                                cudaGetErrorName(status), ")"));
    }
    runtime_check(status, "cudaEventElapsedTime", {.op = "CUDA event elapsed time"});
    return ms;
  }

 private:
  int device_;
  bool timing_;
  cudaEvent_t event_ = nullptr;
};

class CudaStream final : public Stream {
 public:
  explicit CudaStream(int device) : device_(device) {
    std::string op = cat("create a CUDA stream on device ", device);
    OpContext ctx{.op = op};
    require_device(device, ctx);
    driver();  // load the entry points now: a missing driver is reported here, not at the first flag operation
    DeviceGuard guard(device);
    // The host callbacks' channel now, not at the first host callback: that may come from a thread of pickle's
    // while the application's thread is blocked in a synchronous copy, and the pinned allocation behind a channel
    // (cudaHostAlloc) waits for that copy, which may wait for the callback (a staged put's landing: found by
    // NetCuda.ASynchronousCopyBehindATransferDoesNotHoldItUp).
    callbacks_ = open_callback_channel(device);
    // Non-blocking: the legacy default stream (used by careless cudaMemcpy calls) must not serialise with ours.
    PICKLE_CUDA(ctx, cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CudaStream() override {
    // Returns at once; work still queued completes afterwards, as CUDA defines (its host callbacks too: the
    // callback thread keeps the channel).
    if (cudaStreamDestroy(stream_) != cudaSuccess) cudaGetLastError();
    close_callback_channel(callbacks_);
  }

  MemoryKind kind() const noexcept override { return MemoryKind::Cuda; }
  int device() const noexcept override { return device_; }
  void* native_handle() const noexcept override { return stream_; }

  void copy(void* dst, const void* src, std::size_t bytes) override {
    OpContext ctx{.op = "CUDA stream copy", .bytes = bytes};
    if (bytes == 0) return;
    if (dst == nullptr || src == nullptr) throw InvalidArgument(describe(ctx) + ": null pointer");
    CurrentDevice current(device_);
    PICKLE_CUDA(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
  }

  void write_value(std::uint32_t* addr, std::uint32_t value) override {
    check_flag_address(addr, "write_value");
    CurrentDevice current(device_);
    // Default flags keep the memory barrier: earlier copies are visible before the flag (the release we promise).
    PICKLE_CU((OpContext{.op = "CUDA stream write_value", .bytes = 4}), cuStreamWriteValue32, as_cu(stream_),
              reinterpret_cast<CUdeviceptr>(addr), value, static_cast<unsigned>(CU_STREAM_WRITE_VALUE_DEFAULT));
  }

  /// write_values / wait_values: one cuStreamBatchMemOp per kMaxBatch flags, with the flags of write_value /
  /// wait_value (a write keeps its memory barrier; a wait compares as GEQ). One operation for several peers' flags
  /// costs the host one driver call and the stream one front-end operation instead of one each.
  void batch(std::span<const Flag> flags, CUstreamBatchMemOpType type, const char* what) {
    constexpr std::size_t kMaxBatch = 128;  // the driver takes at most 256 operations per call
    const bool write = type == CU_STREAM_MEM_OP_WRITE_VALUE_32;
    if (flags.size() == 1) {  // the single operation costs the host less (2 ranks: 14 against 21 us per call)
      if (write) return write_value(flags[0].addr, flags[0].value);
      return wait_value(flags[0].addr, flags[0].value);
    }
    for (const Flag& flag : flags) check_flag_address(flag.addr, write ? "write_values" : "wait_values");
    CurrentDevice current(device_);
    for (std::size_t first = 0; first < flags.size(); first += kMaxBatch) {
      const std::size_t count = std::min(kMaxBatch, flags.size() - first);
      CUstreamBatchMemOpParams params[kMaxBatch] = {};
      for (std::size_t i = 0; i < count; ++i) {
        const Flag& flag = flags[first + i];
        if (write) {
          params[i].writeValue.operation = type;
          params[i].writeValue.address = reinterpret_cast<CUdeviceptr>(flag.addr);
          params[i].writeValue.value = flag.value;
          params[i].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
        } else {
          params[i].waitValue.operation = type;
          params[i].waitValue.address = reinterpret_cast<CUdeviceptr>(flag.addr);
          params[i].waitValue.value = flag.value;
          params[i].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
        }
      }
      PICKLE_CU((OpContext{.op = what, .bytes = 4 * count}), cuStreamBatchMemOp, as_cu(stream_),
                static_cast<unsigned>(count), params, 0u);
    }
  }

  void wait_value(const std::uint32_t* addr, std::uint32_t value) override {
    check_flag_address(addr, "wait_value");
    CurrentDevice current(device_);
    PICKLE_CU((OpContext{.op = "CUDA stream wait_value", .bytes = 4}), cuStreamWaitValue32, as_cu(stream_),
              reinterpret_cast<CUdeviceptr>(addr), value, static_cast<unsigned>(CU_STREAM_WAIT_VALUE_GEQ));
    std::lock_guard lock(mutex_);
    last_wait_ = LastWait{addr, value, 0};
  }

  /// cudaMemcpyBatchAsync: one driver call, and the driver may spread the copies over copy engines (one after another
  /// on the stream, three copies to three peers took three copies' latency on four H200s).
  void copies(std::span<const Copy> batch) override {
    if (batch.size() == 1) return copy(batch[0].dst, batch[0].src, batch[0].bytes);
    std::vector<void*> dsts;
    std::vector<const void*> srcs;
    std::vector<std::size_t> sizes;
    [[maybe_unused]] std::size_t total = 0;  // unused before CUDA 12.8
    for (const Copy& one : batch) {
      if (one.bytes == 0) continue;
      if (one.dst == nullptr || one.src == nullptr) throw InvalidArgument("CUDA stream copies: null pointer");
      dsts.push_back(one.dst);
      srcs.push_back(one.src);
      sizes.push_back(one.bytes);
      total += one.bytes;
    }
    if (dsts.empty()) return;
#if CUDART_VERSION >= 12080
    cudaMemcpyAttributes attributes{};
    attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    std::size_t first = 0;
    CurrentDevice current(device_);
#if CUDART_VERSION >= 13000
    PICKLE_CUDA((OpContext{.op = "CUDA stream copies", .bytes = total}),
                cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), dsts.size(), &attributes, &first, 1,
                                     stream_));
#else  // CUDA 12.8 and 12.9: the index of a failed copy comes back too
    std::size_t failed = 0;
    PICKLE_CUDA((OpContext{.op = "CUDA stream copies", .bytes = total}),
                cudaMemcpyBatchAsync(const_cast<void**>(dsts.data()), const_cast<void**>(srcs.data()), sizes.data(),
                                     dsts.size(), &attributes, &first, 1, &failed, stream_));
#endif
#else  // before CUDA 12.8: one copy after another
    for (std::size_t i = 0; i < dsts.size(); ++i) copy(dsts[i], srcs[i], sizes[i]);
#endif
  }

  void write_values(std::span<const Flag> flags) override {
    batch(flags, CU_STREAM_MEM_OP_WRITE_VALUE_32, "CUDA stream write_values");
  }

  void wait_values(std::span<const Flag> flags) override {
    batch(flags, CU_STREAM_MEM_OP_WAIT_VALUE_32, "CUDA stream wait_values");
    if (flags.empty()) return;
    std::lock_guard lock(mutex_);
    last_wait_ = LastWait{flags.back().addr, flags.back().value, 0};
  }

  void note_wait_in_kernel(const std::uint32_t* addr, std::uint32_t value, int words) override {
    std::lock_guard lock(mutex_);
    last_wait_ = LastWait{addr, value, words};
  }

  /// Not cudaLaunchHostFunc (see host_callbacks.hpp): the stream writes the callback's count, pickle's callback
  /// thread runs `fn` and writes the count back, and the stream waits for it.
  void host_callback(std::function<void()> fn) override {
    if (!fn) throw InvalidArgument("CUDA stream host_callback: empty function");
    std::lock_guard order(callback_mutex_);  // counts reach the stream in the order they were taken
    const CallbackTicket ticket = submit_callback(callbacks_, std::move(fn), errors_);
    // The count was taken: the stream must write it even if the wait cannot be enqueued, or later counts of this
    // channel would never be reached. Either CUDA call failing leaves the stream broken anyway (an error of it).
    write_value(ticket.reached, ticket.count);
    CurrentDevice current(device_);
    PICKLE_CU((OpContext{.op = "CUDA stream host_callback wait", .bytes = 4}), cuStreamWaitValue32, as_cu(stream_),
              reinterpret_cast<CUdeviceptr>(ticket.done), ticket.count,
              static_cast<unsigned>(CU_STREAM_WAIT_VALUE_GEQ));
  }

  void record(Event& event) override {
    CudaEvent& cuda_event = cuda_event_of(event, "record");
    if (cuda_event.device() != device_) {
      throw InvalidArgument(cat("CUDA stream record: the event belongs to device ", cuda_event.device(),
                                ", the stream to device ", device_));
    }
    CurrentDevice current(device_);
    PICKLE_CUDA((OpContext{.op = "CUDA stream record"}), cudaEventRecord(cuda_event.handle(), stream_));
  }

  void wait(Event& event) override {
    CudaEvent& cuda_event = cuda_event_of(event, "wait");
    CurrentDevice current(device_);
    PICKLE_CUDA((OpContext{.op = "CUDA stream wait"}), cudaStreamWaitEvent(stream_, cuda_event.handle(), 0));
  }

  bool idle_now() noexcept override {
    const cudaError_t status = cudaStreamQuery(stream_);
    if (status != cudaSuccess && status != cudaErrorNotReady) cudaGetLastError();  // left for query() to report
    return status == cudaSuccess;
  }

  bool query_operations() override {
    rethrow_callback_error();
    cudaError_t status = cudaStreamQuery(stream_);
    if (status == cudaSuccess) return true;
    if (status == cudaErrorNotReady) return false;
    throw_runtime_error(status, "cudaStreamQuery", {.op = "CUDA stream query"});
  }

  void synchronize_operations_until(const Deadline& deadline) override {
    host::Backoff backoff;
    while (!query_operations()) {
      if (deadline.expired()) {
        std::optional<LastWait> wait;
        {
          std::lock_guard lock(mutex_);
          wait = last_wait_;
        }
        std::string suspect =
            !wait ? std::string("its work is still running (a huge copy, or a host callback that does not return?)")
            : wait->kernel_words > 0
                ? cat("a kernel waiting on ", wait->kernel_words, " peer word(s), the last of them ",
                      static_cast<const void*>(wait->addr), " for >= ", wait->value,
                      " (a gated reduction, the last wait enqueued), may never see them")
                : cat("a wait_value on ", static_cast<const void*>(wait->addr), " for >= ", wait->value,
                      " (the last one enqueued) may never be satisfied");
        throw TimeoutError(cat("stream synchronize: still busy after ", seconds_text(deadline), " on CUDA device ",
                               device_, "; ", suspect));
      }
      backoff.pause();
    }
  }

 private:
  struct LastWait {
    const std::uint32_t* addr;
    std::uint32_t value;
    int kernel_words;  // note_wait_in_kernel: a kernel polls this many words (0: a stream wait)
  };

  static CUstream as_cu(cudaStream_t stream) { return reinterpret_cast<CUstream>(stream); }

  CudaEvent& cuda_event_of(Event& event, const char* op) const {
    auto* cuda_event = dynamic_cast<CudaEvent*>(&event);
    if (cuda_event == nullptr) {
      throw InvalidArgument(cat("CUDA stream ", op, ": the event is a ", memory_kind_name(event.kind()),
                                " event; CUDA streams take CUDA events only"));
    }
    return *cuda_event;
  }

  void rethrow_callback_error() {
    std::lock_guard lock(errors_->mutex);
    if (errors_->first) std::rethrow_exception(std::exchange(errors_->first, nullptr));
  }

  int device_;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<CallbackErrors> errors_ = std::make_shared<CallbackErrors>();
  std::mutex callback_mutex_;
  std::shared_ptr<CallbackChannel> callbacks_;  // made with the stream
  std::mutex mutex_;
  std::optional<LastWait> last_wait_;
};

}  // namespace

std::unique_ptr<Stream> make_stream(int device) { return std::make_unique<CudaStream>(device); }
std::unique_ptr<Event> make_event(int device, bool timing) { return std::make_unique<CudaEvent>(device, timing); }

}  // namespace pickle::device::cuda
