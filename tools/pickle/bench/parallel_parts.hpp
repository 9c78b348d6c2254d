#pragma once
// Host work split over a few threads. `pickle bench coll` checks every result element against a value computed on
// the host (coll_pattern.hpp): on one thread that took about 10 s per check of a 2 GiB allreduce result with 4 ranks
// on an H200 host (docs/results/2026-11-28-h200x4.md), so a sweep to 8 GiB spent minutes checking per size.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

namespace pickle::bench {

/// Threads one rank may use for host-side checks: PICKLE_BENCH_CHECK_THREADS (1 to 64; InvalidArgument otherwise)
/// when set, else the CPUs this process may run on, shared by the `local_ranks` ranks of its host, between 1 and 16.
int check_threads(int local_ranks);

/// Splits [0, n) into at most `threads` contiguous parts of at least `min_part` elements, calls fn(begin, end) for
/// each (the first on the caller's thread, the others on threads of their own) and returns the sum of the results.
/// `fn` must not throw.
template <class Fn>
std::uint64_t sum_over_parts(std::size_t n, int threads, std::size_t min_part, Fn&& fn) {
  const std::size_t most = std::max<std::size_t>(1, n / std::max<std::size_t>(min_part, 1));
  const std::size_t parts = std::clamp<std::size_t>(most, 1, static_cast<std::size_t>(std::max(threads, 1)));
  if (parts == 1) return fn(std::size_t{0}, n);
  std::vector<std::uint64_t> sums(parts, 0);
  std::vector<std::jthread> workers;
  workers.reserve(parts - 1);
  auto bounds = [&](std::size_t part) { return n / parts * part + std::min(part, n % parts); };
  for (std::size_t part = 1; part < parts; ++part) {
    workers.emplace_back([&, part] { sums[part] = fn(bounds(part), bounds(part + 1)); });
  }
  sums[0] = fn(std::size_t{0}, bounds(1));
  workers.clear();  // joins
  std::uint64_t total = 0;
  for (std::uint64_t s : sums) total += s;
  return total;
}

}  // namespace pickle::bench
