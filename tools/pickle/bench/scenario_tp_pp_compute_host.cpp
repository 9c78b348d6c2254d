// tp-pp's arithmetic on host memory: each product is one host callback on the context's (host) stream, so that it
// runs in stream order with the Communicator's copies and reductions, on the stream's worker thread. A plain loop,
// row by row with an fp32 accumulator row: the host model is small (the `tiny` shape), and what the scenario
// checks on host memory is the communication and the bookkeeping, not the speed of the loop.
#include <cstring>
#include <vector>

#include <pickle/error.hpp>

#include "coll_float16.hpp"
#include "scenario_tp_pp_compute.hpp"

namespace pickle::bench {
namespace {

/// splitmix64: the same seed gives the same values.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class HostProxyCompute final : public ProxyCompute {
 public:
  explicit HostProxyCompute(CollContext& ctx) : ctx_(ctx) {}

  std::string describe() const override { return "host loop (bf16 inputs, fp32 accumulate)"; }

  void fill_random(void* dst, std::size_t count, std::uint64_t seed, float scale) override {
    ctx_.stream().synchronize();  // the buffer may still be in use by queued work
    auto* out = static_cast<std::uint16_t*>(dst);
    for (std::size_t i = 0; i < count; ++i) {
      const float unit = static_cast<float>(mix(seed ^ mix(i)) >> 40) * (1.0f / 16777216.0f);  // [0, 1)
      out[i] = float_to_bfloat16((2.0f * unit - 1.0f) * scale);
    }
  }

  void gemm(const void* a, const void* b, void* d, const ProxyGemm& s) override {
    ctx_.stream().host_callback([a = static_cast<const std::uint16_t*>(a), b = static_cast<const std::uint16_t*>(b),
                                 d = static_cast<std::uint16_t*>(d), s] {
      std::vector<float> row(s.n), b_row(s.n);
      for (std::size_t i = 0; i < s.m; ++i) {
        std::fill(row.begin(), row.end(), 0.0f);
        for (std::size_t kk = 0; kk < s.k; ++kk) {
          const float x = bfloat16_to_float(a[i * s.lda + kk]);
          const std::uint16_t* w = b + kk * s.ldb;
          for (std::size_t j = 0; j < s.n; ++j) row[j] += x * bfloat16_to_float(w[j]);
        }
        for (std::size_t j = 0; j < s.n; ++j) d[i * s.ldd + j] = float_to_bfloat16(row[j]);
      }
    });
  }

  std::uint64_t count_differences(const void* a, const void* b, std::size_t count) override {
    ctx_.stream().synchronize();
    const auto* x = static_cast<const std::uint16_t*>(a);
    const auto* y = static_cast<const std::uint16_t*>(b);
    std::uint64_t differ = 0;
    for (std::size_t i = 0; i < count; ++i) differ += x[i] != y[i];
    return differ;
  }

 private:
  CollContext& ctx_;
};

}  // namespace

std::unique_ptr<ProxyCompute> make_host_proxy_compute(CollContext& ctx) {
  return std::make_unique<HostProxyCompute>(ctx);
}

std::unique_ptr<ProxyCompute> make_proxy_compute(CollContext& ctx) {
  if (ctx.kind() == MemoryKind::Host) return make_host_proxy_compute(ctx);
#if PICKLE_HAVE_CUDA
  return make_cuda_proxy_compute(ctx);
#else
  throw UnavailableError("tp-pp on GPU memory needs a build with CUDA (this one has none)");
#endif
}

}  // namespace pickle::bench
