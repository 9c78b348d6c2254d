// The reduction on host memory, run in stream order by a host stream's callback. Same element semantics as the
// CUDA kernel (reduce.hpp): inputs widened, combined in input order, finished, narrowed.
#include "collectives/reduce.hpp"

#include <algorithm>
#include <vector>

namespace pickle::coll {
namespace {

template <class E, ReduceOp Op>
void reduce_typed(int nranks, void* out_raw, const void* const* inputs, int ninputs, std::size_t count) {
  using S = typename E::Storage;
  using A = typename E::Acc;
  S* out = static_cast<S*>(out_raw);
  // Blocks of elements, so that the accumulators stay in cache while every input streams through once.
  constexpr std::size_t kBlock = 2048;
  A acc[kBlock];
  for (std::size_t begin = 0; begin < count; begin += kBlock) {
    const std::size_t n = std::min(kBlock, count - begin);
    const S* first = static_cast<const S*>(inputs[0]) + begin;
    for (std::size_t i = 0; i < n; ++i) acc[i] = E::load(first[i]);
    for (int j = 1; j < ninputs; ++j) {
      const S* in = static_cast<const S*>(inputs[j]) + begin;
      for (std::size_t i = 0; i < n; ++i) acc[i] = combine<Op>(acc[i], E::load(in[i]));
    }
    // Written only after every input of the block was read: `out` may be one of the inputs (in-place).
    for (std::size_t i = 0; i < n; ++i) out[begin + i] = E::store(finish<Op>(acc[i], nranks));
  }
}

}  // namespace

void reduce_host(DataType type, ReduceOp op, int nranks, void* out, const void* const* inputs, int ninputs,
                 std::size_t count) {
  if (count == 0 || ninputs <= 0) return;
  dispatch_type(type, [&](auto element) {
    dispatch_op(op, [&](auto which) {
      reduce_typed<decltype(element), decltype(which)::value>(nranks, out, inputs, ninputs, count);
    });
  });
}

}  // namespace pickle::coll
