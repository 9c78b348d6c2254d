// flags: seed 004's all_gather_object_vs_all_reduce.py. Ranks that must agree on a flag ("is everyone done?")
// either gather a small serialized object from everyone, as torch.distributed.all_gather_object does, or allreduce
// one number. Both ways run -n times back to back, each timed with the host clock on every rank (the slowest rank's
// total counts), and each result is read back and checked on the host, as a flag must be to be used.
//
// One gather, as all_gather_object does it: serialize the object; copy its length to the device and allgather the
// lengths (one int64 per rank); read them back; copy the bytes, padded to the longest, and allgather them (uint8);
// read them back and deserialize every rank's object. One flag: copy the int32 to the device, allreduce it in place
// (sum), read it back. The seed's timeit of dist.all_reduce did not wait for the result; this one does.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "core/format.hpp"
#include "scenario_runs.hpp"

namespace pickle::bench {
namespace {

/// The object rank `rank` shares at round `round`: a dict-like text whose length varies with rank and round.
std::string serialize(int rank, int round) {
  return cat("{\"rank\": ", rank, ", \"round\": ", round, ", \"done\": ", (rank + round) % 3 == 0 ? "true" : "false",
             "}");
}

/// The flag rank `rank` contributes at round `round`. It grows with the round (until it wraps, thousands of rounds
/// later), so the expected sum differs from the last round's, and a rank's stale flag from an earlier round only
/// lowers the sum: stale inputs of several ranks cannot cancel out and pass.
std::int32_t flag_of(int rank, int round) { return (round % 4096 + 1) * (rank + 1); }

/// Offsets in the two buffers: the length first, the object bytes after (64-byte aligned regions).
constexpr std::size_t kObjectOffset = 64;

class Flags {
 public:
  Flags(CollContext& ctx, CollBackend& backend, std::size_t scratch)
      : ctx_(ctx), backend_(backend), n_(ctx.world_size()), scratch_(scratch) {
    lengths_.resize(static_cast<std::size_t>(n_));
    objects_.resize(scratch);
  }

  /// One all_gather_object round; returns the objects that did not deserialize to what their rank sent.
  std::uint64_t gather(int round) {
    std::string object = serialize(ctx_.rank(), round);
    if (ctx_.corrupt() && ctx_.rank() == 0 && round == 0) object[object.size() / 2] ^= 0x20;  // test hook
    auto* send = ctx_.buffer(0);
    auto* recv = ctx_.buffer(1);
    length_ = static_cast<std::int64_t>(object.size());
    ctx_.stream().copy(send, &length_, sizeof length_);
    backend_.enqueue(ctx_,
                     {.coll = Collective::AllGather, .send = send, .recv = recv, .count = 1, .type = DataType::I64});
    ctx_.stream().copy(lengths_.data(), recv, lengths_.size() * sizeof(std::int64_t));
    ctx_.stream().synchronize();
    const auto longest = static_cast<std::size_t>(*std::max_element(lengths_.begin(), lengths_.end()));
    const std::size_t objects_at =
        kObjectOffset * ((static_cast<std::size_t>(n_) * 8 + kObjectOffset - 1) / kObjectOffset);
    if (longest == 0 || kObjectOffset + longest > scratch_ ||
        objects_at + longest * static_cast<std::size_t>(n_) > scratch_) {
      throw ProtocolError(cat(describe({.rank = ctx_.rank(), .op = "flags gather", .bytes = longest}),
                              ": the gathered object lengths make no sense (or do not fit the buffers)"));
    }
    padded_.assign(longest, 0);
    std::memcpy(padded_.data(), object.data(), object.size());
    ctx_.stream().copy(send + kObjectOffset, padded_.data(), longest);
    backend_.enqueue(ctx_, {.coll = Collective::AllGather,
                            .send = send + kObjectOffset,
                            .recv = recv + objects_at,
                            .count = longest,
                            .type = DataType::U8});
    ctx_.stream().copy(objects_.data(), recv + objects_at, longest * static_cast<std::size_t>(n_));
    ctx_.stream().synchronize();
    std::uint64_t wrong = 0;
    for (int q = 0; q < n_; ++q) {
      const auto length = static_cast<std::size_t>(lengths_[static_cast<std::size_t>(q)]);
      std::string got(reinterpret_cast<const char*>(objects_.data()) + static_cast<std::size_t>(q) * longest,
                      std::min(length, longest));
      if (got != serialize(q, round)) ++wrong;
    }
    return wrong;
  }

  /// One flag allreduce round; 1 when the sum read back is wrong.
  std::uint64_t flag(int round) {
    flag_ = flag_of(ctx_.rank(), round);
    if (ctx_.corrupt() && ctx_.rank() == 0 && round == 0) flag_ += 1;  // test hook
    auto* buffer = ctx_.buffer(0);
    ctx_.stream().copy(buffer, &flag_, sizeof flag_);
    backend_.enqueue(ctx_, {.coll = Collective::AllReduce,
                            .send = buffer,
                            .recv = buffer,
                            .count = 1,
                            .type = DataType::I32,
                            .op = ReduceOp::Sum});
    std::int32_t sum = -1;
    ctx_.stream().copy(&sum, buffer, sizeof sum);
    ctx_.stream().synchronize();
    std::int32_t want = 0;
    for (int q = 0; q < n_; ++q) want += flag_of(q, round);
    return sum == want ? 0 : 1;
  }

 private:
  CollContext& ctx_;
  CollBackend& backend_;
  int n_;
  std::size_t scratch_;
  // Host sides of the stream copies: members, since a stream reads them after the enqueueing call returned.
  std::int64_t length_ = 0;
  std::int32_t flag_ = 0;
  std::vector<std::int64_t> lengths_;
  std::vector<char> padded_;
  std::vector<std::byte> objects_;
};

}  // namespace

ScenarioRun run_flags(CollContext& ctx, CollBackend& backend, Lockstep& lockstep, const ScenarioOptions& options,
                      const ScenarioPlan& plan) {
  ScenarioRun run;
  run.backend = std::string(backend.name());
  Flags flags(ctx, backend, plan.scratch_bytes);
  const int rounds = options.iterations;

  lockstep.begin_step();
  lockstep.phase("warm-up", [&] {
    // Rounds after the measured ones: round numbers never repeat, so a stale result cannot pass.
    for (int i = 0; i < options.warmup; ++i) {
      flags.gather(rounds + i);
      flags.flag(rounds + i);
    }
    return std::string();
  });
  std::uint64_t wrong_local_gather = 0, wrong_local_flag = 0;
  auto gather_ms = slowest_ms(lockstep, "gathers", [&] {
    Stopwatch watch;
    for (int i = 0; i < rounds; ++i) wrong_local_gather += flags.gather(i);
    return watch.seconds() * 1e3;
  });
  auto flag_ms = slowest_ms(lockstep, "flags", [&] {
    Stopwatch watch;
    for (int i = 0; i < rounds; ++i) wrong_local_flag += flags.flag(i);
    return watch.seconds() * 1e3;
  });
  std::optional<std::uint64_t> wrong_gather = summed(lockstep, "wrong gathers", [&] { return wrong_local_gather; });
  std::optional<std::uint64_t> wrong_flag = summed(lockstep, "wrong flags", [&] { return wrong_local_flag; });
  if (lockstep.failed() || !gather_ms || !flag_ms || !wrong_gather || !wrong_flag) {
    run.error = cat(describe({.op = cat("flags with ", run.backend)}), ": ", lockstep.error());
    return run;
  }
  if (options.check) run.wrong = *wrong_gather + *wrong_flag;

  const double ratio = *flag_ms > 0 ? *gather_ms / *flag_ms : 0;
  auto part = [&](double ms, std::optional<std::uint64_t> wrong) {
    json::Value v = json::Value::object();
    v["total_s"] = ms / 1e3;
    v["per_call_us"] = ms * 1e3 / rounds;
    v["wrong"] = options.check ? json::Value(*wrong) : json::Value();
    return v;
  };
  run.result["rounds"] = rounds;
  run.result["object_bytes"] = serialize(ctx.world_size() - 1, rounds - 1).size();
  run.result["gather_object"] = part(*gather_ms, wrong_gather);
  run.result["allreduce"] = part(*flag_ms, wrong_flag);
  run.result["ratio"] = ratio;
  // The seed's lines, in seconds for the whole loop, with the per-call time beside them.
  run.lines.push_back(cat("all_gather_object=", fixed(*gather_ms / 1e3, 6), " s (", rounds, " calls, ",
                          fixed(*gather_ms * 1e3 / rounds, 2), " us each)"));
  run.lines.push_back(cat("all_reduce=", fixed(*flag_ms / 1e3, 6), " s (", rounds, " calls, ",
                          fixed(*flag_ms * 1e3 / rounds, 2), " us each)"));
  run.lines.push_back(cat("all_gather_object/all_reduce=", fixed(ratio, 2)));
  return run;
}

}  // namespace pickle::bench
