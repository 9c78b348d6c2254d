#pragma once
// Host callbacks of CUDA streams without cudaLaunchHostFunc. The stream writes a count into pinned host memory
// (cuStreamWriteValue32); a thread of pickle's, which polls the counts, runs the function and writes the count back
// into a second word; the stream waits for that word (cuStreamWaitValue32) before its later work, as it would for
// a host function.
//
// Why not cudaLaunchHostFunc: CUDA does not run host functions while a thread of the process is blocked in a
// synchronous copy into pageable memory (cudaMemcpy, or tensor.cpu()) whose stream waits for one of them, on
// another stream: the net transport's sends, signals and staged puts are host callbacks, so a rank that copied a
// collective's result out this way hung for good (NetCuda.ASynchronousCopyBehindATransferDoesNotHoldItUp;
// docs/device.md "Host callbacks"). The thread here makes no CUDA call, so nothing of CUDA's can hold it.

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>

namespace pickle::device::cuda {

/// Where a callback's exception goes: the stream's next query or synchronize rethrows the first one.
struct CallbackErrors {
  std::mutex mutex;
  std::exception_ptr first;
};

/// One stream's link to the callback thread: two words of pinned, mapped host memory and the stream's pending
/// callbacks. Made with the stream, on the thread that makes it (the words come from a pool that grows by
/// cudaHostAlloc, which must not happen on a thread of pickle's: see CudaStream); the words go back to the pool once
/// the stream is gone and its last callback ran.
class CallbackChannel;

/// What the stream enqueues for one callback: write_value(reached, count), then wait_value(done, count).
struct CallbackTicket {
  std::uint32_t* reached;
  const std::uint32_t* done;
  std::uint32_t count;
};

/// A channel for a stream of `device` (pinned memory is allocated with that device current).
std::shared_ptr<CallbackChannel> open_callback_channel(int device);
/// Queues `fn` to run once the stream has written the ticket's count; its exception goes to `errors`.
CallbackTicket submit_callback(const std::shared_ptr<CallbackChannel>& channel, std::function<void()> fn,
                               std::shared_ptr<CallbackErrors> errors);
/// The stream is gone: its words return to the pool after its last queued callback ran.
void close_callback_channel(const std::shared_ptr<CallbackChannel>& channel) noexcept;

}  // namespace pickle::device::cuda
