#pragma once
// The device side of ReduceGate (reduce.hpp) that both gated kernels share: the reduction of reduce_cuda.cu (the
// mailboxes' copy and loads forms) and the LL form's kernel of ll_allreduce_cuda.cu. nvcc only.
#include <cstdint>

#include "collectives/reduce.hpp"

namespace pickle::coll::gated {

/// Whether `gate` keeps to what the kernels hold (kMaxGatePeers waits, pre-waits and publication destinations,
/// twice as many raises and announcements) and has the CTA count that its raises need. Host side, before a launch.
inline bool gate_fits(const ReduceGate& gate) {
  return gate.waits.count <= kMaxGatePeers && gate.pre_waits.count <= kMaxGatePeers && gate.publishes >= 0 &&
         gate.publishes <= kMaxGatePeers && gate.raises <= 2 * kMaxGatePeers && gate.announces <= 2 * kMaxGatePeers &&
         (gate.raises == 0 || gate.ctas_done != nullptr);
}

/// a reached b as cuStreamWaitValue32's GEQ compares: cyclically, so that counts may wrap.
inline __device__ bool reached(std::uint32_t a, std::uint32_t b) { return static_cast<std::int32_t>(a - b) >= 0; }

inline __device__ std::uint32_t load_volatile(const std::uint32_t* word) {
  return *reinterpret_cast<const volatile std::uint32_t*>(word);
}

inline __host__ __device__ bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

/// ReduceGate's waits (or its pre-waits): thread i of every CTA polls wait i (a handful of words; the CTAs stay in
/// step).
inline __device__ void await_words(const GateWaits& waits) {
  if (static_cast<int>(threadIdx.x) < waits.count) {
    const int i = static_cast<int>(threadIdx.x);
    for (unsigned poll = 1;; ++poll) {
      if (reached(load_volatile(waits.device[i]), waits.value[i])) break;
      if (poll % 64 == 0 && reached(load_volatile(waits.host[i]), waits.value[i])) break;
    }
    // The writer's word came after its data, behind a system-wide fence (cuStreamWriteValue32's barrier); the thread
    // that saw the word fences before the barrier, which orders every thread's reads of the inputs after it.
    __threadfence_system();
  }
  __syncthreads();
}

/// ReduceGate's announcements, by the one thread of a CTA that speaks for it, once every store of the CTA's that the
/// announcements cover is issued and ordered before this thread (a barrier): the CTA counts itself in, and the last
/// CTA to do so writes announce_value into every announce word, behind system-wide fences, so that a peer that sees a
/// word sees every CTA's stores. With one CTA the barrier was the count. The loads form's kernel (announce, below)
/// and each CTA's watcher in the LL form's.
inline __device__ void count_in_and_announce(const ReduceGate& gate) {
  if (gate.announces == 0) return;
  __threadfence_system();  // this CTA's stores, visible to the peers before the count says so
  if (gridDim.x > 1) {
    if (atomicAdd(gate.ctas_published, 1u) != gridDim.x - 1) return;
    *gate.ctas_published = 0;  // the next gated launch comes after this kernel
    __threadfence_system();    // every CTA's stores before the announcements
  }
  for (int i = 0; i < gate.announces; ++i) {
    *reinterpret_cast<volatile std::uint32_t*>(gate.announce_word[i]) = gate.announce_value;
  }
}

/// ReduceGate's announcements, once this CTA has issued its stores of what it publishes (count_in_and_announce).
inline __device__ void announce(const ReduceGate& gate) {
  __syncthreads();  // this CTA's stores are issued
  if (threadIdx.x == 0) count_in_and_announce(gate);
}

/// ReduceGate's raises, once every CTA has read its inputs: the last CTA to get here writes them.
inline __device__ void raise(const ReduceGate& gate) {
  __syncthreads();  // this CTA's loads have returned: their values went into its stores
  if (threadIdx.x != 0) return;
  if (gridDim.x > 1) {  // one CTA: the barrier above was the count
    __threadfence();
    if (atomicAdd(gate.ctas_done, 1u) != gridDim.x - 1) return;
    *gate.ctas_done = 0;  // the next gated launch comes after this kernel
  }
  __threadfence_system();
  for (int i = 0; i < gate.raises; ++i) {
    *reinterpret_cast<volatile std::uint32_t*>(gate.raise_word[i]) = gate.raise_value[i];
  }
}

}  // namespace pickle::coll::gated
