// tp-pp: seed 003's question, how much tensor and pipeline parallelism cost an LLM's inference on two GPUs, on a
// proxy of the model instead of a serving framework: each decoder layer's four projections with Llama-2's shapes
// (bf16, fp32 accumulation), every layer with its own weights, so that the products and their memory traffic are a
// real forward pass's. Attention itself, the norms, the activation and the residuals are left out (docs/bench.md):
// what the seed attributes to TP and PP is the communication that these projections bracket, and the GEMMs set how
// much of it shows. For each row (prefill: batch x seq tokens; decode: batch tokens, one step) and backend:
//   TP=1           rank 0 alone runs every layer;
//   TP=2 compute   both ranks run every layer with half of each projection (qkv and gate/up split by columns, o and
//                  down by rows), no communication: the ideal split;
//   TP=2           the same with the allreduce of the partial sums after o and after down, as Megatron-style TP does;
//   PP=2           rank 0 runs the first half of the layers and sends its activations to rank 1, which runs the
//                  second half and sends the batch's next tokens back (the next step starts on stage 0).
// Each configuration is timed as the mean of -n forward passes (the slowest rank; events around the enqueues, as
// `bench coll`), after untimed ones, the last of whose output is kept: the last timed pass must give the same bits
// (#wrong counts the differences; the passes share one output buffer, so the ones between are not compared), and the
// communication is checked with known data first (the allreduce's sums, the stages' activations and tokens).
#include <algorithm>
#include <cmath>

#include "coll_pattern.hpp"
#include "coll_step.hpp"
#include "core/format.hpp"
#include "scenario_runs.hpp"
#include "scenario_tp_pp_compute.hpp"
#include "table_text.hpp"

namespace pickle::bench {
namespace {

constexpr std::size_t kAlign = 256;  // every carved part starts at a multiple (cuBLASLt wants 16 bytes)
constexpr std::size_t kBf16 = 2;
constexpr int kRanks = 2;  // TP=2, PP=2

std::size_t align_up(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

/// Weights of one layer with TP=1 (elements): qkv h x 3h, o h x h, gate/up h x 2i, down i x h.
std::size_t layer_elements(const ModelShape& m) { return 4 * m.hidden * m.hidden + 3 * m.hidden * m.intermediate; }

std::size_t max_tokens(const ScenarioOptions& o) {
  const auto batch = static_cast<std::size_t>(*std::max_element(o.batches.begin(), o.batches.end()));
  const auto seq = static_cast<std::size_t>(*std::max_element(o.seqs.begin(), o.seqs.end()));
  return batch * seq;
}

/// Where each part lies in the rank's one buffer (bytes from its start), for the largest row.
struct Layout {
  std::size_t weights = 0;  // every layer's weights in turn; TP=2 uses the first half of each layer's share
  std::size_t input = 0, received = 0, out_a = 0, out_b = 0, partial = 0, wide = 0, reference = 0, tokens = 0;
  std::size_t total = 0;
};

Layout make_layout(const ScenarioOptions& o) {
  const ModelShape m = model_shape(o.model);
  const std::size_t tokens = max_tokens(o);
  const std::size_t activation = align_up(tokens * m.hidden * kBf16);
  Layout l;
  std::size_t at = align_up(static_cast<std::size_t>(o.layers) * layer_elements(m) * kBf16);
  for (std::size_t* part : {&l.input, &l.received, &l.out_a, &l.out_b, &l.partial, &l.reference}) {
    *part = at;
    at += activation;
  }
  l.wide = at;
  at += align_up(tokens * std::max(3 * m.hidden, 2 * m.intermediate) * kBf16);
  l.tokens = at;
  at += align_up(static_cast<std::size_t>(*std::max_element(o.batches.begin(), o.batches.end())) * sizeof(int));
  l.total = at;
  return l;
}

enum class Config { Tp1, Tp2Compute, Tp2, Pp2 };
constexpr Config kConfigs[] = {Config::Tp1, Config::Tp2Compute, Config::Tp2, Config::Pp2};

const char* config_name(Config c) {
  switch (c) {
    case Config::Tp1:
      return "TP=1";
    case Config::Tp2Compute:
      return "TP=2 compute";
    case Config::Tp2:
      return "TP=2";
    case Config::Pp2:
      return "PP=2";
  }
  return "?";
}

/// One row: a forward pass over `tokens` tokens of `batch` sequences.
struct Row {
  bool prefill = true;
  int batch = 0;
  int seq = 0;  // prefill only
  std::size_t tokens = 0;
};

/// The model on this rank: its weights and activations in the context's buffer, and the passes it enqueues.
class Proxy {
 public:
  Proxy(CollContext& ctx, CollBackend& backend, ProxyCompute& compute, const ScenarioOptions& o)
      : ctx_(ctx),
        backend_(backend),
        compute_(compute),
        m_(model_shape(o.model)),
        layers_(o.layers),
        layout_(make_layout(o)),
        base_(ctx.buffer(0)) {}

  /// Random weights (uniform, scaled by 1/sqrt(h) so that the activations stay finite through the layers) and
  /// input; the same on both ranks.
  void fill(std::size_t tokens) {
    const auto weights = static_cast<std::size_t>(layers_) * layer_elements(m_);
    compute_.fill_random(at(layout_.weights), weights, 0x7E1A, std::sqrt(3.0f / static_cast<float>(m_.hidden)));
    compute_.fill_random(at(layout_.input), tokens * m_.hidden, 0x1A9, 1.0f);
    ctx_.stream().synchronize();
  }

  /// Enqueues one forward pass of `config` for `row` on the context's stream (nothing on rank 1 for TP=1).
  void forward(Config config, const Row& row) {
    const int rank = ctx_.rank();
    const std::size_t t = row.tokens;
    switch (config) {
      case Config::Tp1:
        if (rank == 0) run_layers(0, layers_, 1, false, at(layout_.input), t);
        return;
      case Config::Tp2Compute:
      case Config::Tp2:
        run_layers(0, layers_, kRanks, config == Config::Tp2, at(layout_.input), t);
        return;
      case Config::Pp2: {
        const int half = layers_ / 2;
        const std::size_t tokens_bytes = static_cast<std::size_t>(row.batch) * sizeof(int);
        if (rank == 0) {
          backend_.enqueue_send(ctx_, 1, run_layers(0, half, 1, false, at(layout_.input), t), activation_bytes(t));
          backend_.enqueue_recv(ctx_, 1, at(layout_.tokens), tokens_bytes);
        } else {
          backend_.enqueue_recv(ctx_, 0, at(layout_.received), activation_bytes(t));
          run_layers(half, layers_, 1, false, at(layout_.received), t);
          backend_.enqueue_send(ctx_, 0, at(layout_.tokens), tokens_bytes);
        }
        return;
      }
    }
  }

  /// This rank's output of `config` (its last layer's), or nullptr where it runs no layer (rank 1 at TP=1).
  std::byte* output(Config config) {
    const int rank = ctx_.rank();
    if (config == Config::Tp1 && rank != 0) return nullptr;
    const int first = config == Config::Pp2 && rank == 1 ? layers_ / 2 : 0;
    const int end = config == Config::Pp2 && rank == 0 ? layers_ / 2 : layers_;
    return out_of(end - 1 - first);
  }

  /// Enqueues TP's in-place bf16 sum of `count` elements at `data` over both ranks.
  void allreduce(std::byte* data, std::size_t count) {
    backend_.enqueue(ctx_, {.coll = Collective::AllReduce,
                            .send = data,
                            .recv = data,
                            .count = count,
                            .type = DataType::BF16,
                            .op = ReduceOp::Sum});
  }

  std::byte* at(std::size_t offset) const { return base_ + offset; }
  std::size_t activation_bytes(std::size_t tokens) const { return tokens * m_.hidden * kBf16; }
  const Layout& layout() const { return layout_; }

 private:
  /// The output buffer of the n-th layer a pass runs (alternating, so that a layer never writes its input).
  std::byte* out_of(int n) const { return at(n % 2 == 0 ? layout_.out_a : layout_.out_b); }

  /// Layers [first, end) split over `tp` ranks, from `input`; returns the last one's output.
  std::byte* run_layers(int first, int end, int tp, bool communicate, const std::byte* input, std::size_t tokens) {
    const std::byte* in = input;
    std::byte* out = nullptr;
    for (int l = first; l < end; ++l) {
      out = out_of(l - first);
      layer(l, tp, communicate, in, out, tokens);
      in = out;
    }
    return out;
  }

  /// One decoder layer's projections: qkv = x Wqkv; p = qkv[:, :h/tp] Wo (the attention's output stands in for
  /// the heads it would have computed from qkv); allreduce(p); g = p Wgu; out = g[:, :i/tp] Wdown; allreduce(out).
  void layer(int l, int tp, bool communicate, const std::byte* in, std::byte* out, std::size_t t) {
    const std::size_t h = m_.hidden, i = m_.intermediate, k_tp = static_cast<std::size_t>(tp);
    const std::size_t qkv = 3 * h / k_tp, attention = h / k_tp, gate_up = 2 * i / k_tp, mlp = i / k_tp;
    const std::byte* w_qkv = at(layout_.weights) + static_cast<std::size_t>(l) * layer_elements(m_) * kBf16;
    const std::byte* w_o = w_qkv + h * qkv * kBf16;
    const std::byte* w_gate_up = w_o + attention * h * kBf16;
    const std::byte* w_down = w_gate_up + h * gate_up * kBf16;
    std::byte* wide = at(layout_.wide);
    std::byte* partial = at(layout_.partial);
    compute_.gemm(in, w_qkv, wide, {.m = t, .n = qkv, .k = h, .lda = h, .ldb = qkv, .ldd = qkv});
    compute_.gemm(wide, w_o, partial, {.m = t, .n = h, .k = attention, .lda = qkv, .ldb = h, .ldd = h});
    if (communicate) allreduce(partial, t * h);
    compute_.gemm(partial, w_gate_up, wide, {.m = t, .n = gate_up, .k = h, .lda = h, .ldb = gate_up, .ldd = gate_up});
    compute_.gemm(wide, w_down, out, {.m = t, .n = h, .k = mlp, .lda = gate_up, .ldb = h, .ldd = h});
    if (communicate) allreduce(out, t * h);
  }

  CollContext& ctx_;
  CollBackend& backend_;
  ProxyCompute& compute_;
  ModelShape m_;
  int layers_;
  Layout layout_;
  std::byte* base_;
};

/// The communication of `config` checked with known data: the allreduce's sums (TP=2), the activations rank 0
/// sends and the tokens rank 1 sends back (PP=2). Wrong elements on this rank.
std::uint64_t check_communication(CollContext& ctx, CollBackend& backend, Proxy& proxy, Config config, const Row& row,
                                  std::uint64_t salt) {
  const std::size_t elements = row.tokens * proxy.activation_bytes(1) / kBf16;
  if (config == Config::Tp2) {
    const CollPattern sums = scenario_pattern(ctx, Collective::AllReduce, DataType::BF16, elements, 0, salt);
    std::byte* buffer = proxy.at(proxy.layout().partial);
    ctx.load_inputs(sums, buffer, 0, elements);
    proxy.allreduce(buffer, elements);
    ctx.stream().synchronize();
    return ctx.count_wrong(sums, buffer, elements);
  }
  if (config != Config::Pp2) return 0;
  const auto batch = static_cast<std::size_t>(row.batch);
  const CollPattern activations = scenario_pattern(ctx, Collective::Broadcast, DataType::BF16, elements, 0, salt);
  const CollPattern tokens = scenario_pattern(ctx, Collective::Broadcast, DataType::I32, batch, 1, salt + 1);
  std::byte* token_buffer = proxy.at(proxy.layout().tokens);
  if (ctx.rank() == 0) {
    std::byte* sent = proxy.at(proxy.layout().out_a);
    ctx.load_inputs(activations, sent, 0, elements);
    ctx.poison(token_buffer, batch * sizeof(int));
    backend.enqueue_send(ctx, 1, sent, elements * kBf16);
    backend.enqueue_recv(ctx, 1, token_buffer, batch * sizeof(int));
    ctx.stream().synchronize();
    return ctx.count_wrong(tokens, token_buffer, batch);
  }
  std::byte* received = proxy.at(proxy.layout().received);
  ctx.poison(received, elements * kBf16);
  ctx.load_inputs(tokens, token_buffer, 0, batch);
  backend.enqueue_recv(ctx, 0, received, elements * kBf16);
  backend.enqueue_send(ctx, 0, token_buffer, batch * sizeof(int));
  ctx.stream().synchronize();
  return ctx.count_wrong(activations, received, elements);
}

std::vector<Row> rows_of(const ScenarioOptions& o) {
  std::vector<Row> rows;
  for (int batch : o.batches) {
    for (int seq : o.seqs) {
      rows.push_back({.prefill = true,
                      .batch = batch,
                      .seq = seq,
                      .tokens = static_cast<std::size_t>(batch) * static_cast<std::size_t>(seq)});
    }
  }
  for (int batch : o.batches)
    rows.push_back({.prefill = false, .batch = batch, .tokens = static_cast<std::size_t>(batch)});
  return rows;
}

std::string percent(double value) { return fixed(value, 1); }

}  // namespace

std::size_t tp_pp_buffer_bytes(const ScenarioOptions& options) { return make_layout(options).total; }

ScenarioRun run_tp_pp(CollContext& ctx, CollBackend& backend, Lockstep& lockstep, const ScenarioOptions& options,
                      const ScenarioPlan&) {
  ScenarioRun run;
  run.backend = std::string(backend.name());
  const ModelShape model = model_shape(options.model);
  const int layers = options.layers;
  std::unique_ptr<ProxyCompute> compute;
  std::unique_ptr<Proxy> proxy;
  lockstep.begin_step();
  lockstep.phase("tp-pp set-up", [&] {
    compute = make_proxy_compute(ctx);
    proxy = std::make_unique<Proxy>(ctx, backend, *compute, options);
    proxy->fill(max_tokens(options));
    return std::string();
  });
  if (lockstep.failed()) {
    run.error = cat(describe({.op = cat("tp-pp with ", run.backend)}), ": ", lockstep.error());
    return run;
  }
  run.lines.push_back(cat("# ", model.name, ": ", layers, " layers of h ", model.hidden, ", i ", model.intermediate,
                          ", the four projections only; ", compute->describe()));
  run.lines.push_back(cat("# ms per forward pass (mean of ", options.iterations,
                          ", slowest rank); TP comm % = TP=2 / TP=2 compute - 1; TP eff % = TP=1 / (2 x TP=2); ",
                          "PP % = PP=2 / TP=1 - 1"));
  run.lines.push_back(cat(pad_right("# phase", 9), pad_left("batch", 6), pad_left("seq", 7), pad_left("tokens", 8),
                          pad_left("activations", 12), pad_left("TP=1", 10), pad_left("TP=2 comp", 10),
                          pad_left("TP=2", 10), pad_left("TP comm %", 10), pad_left("TP eff %", 9),
                          pad_left("PP=2", 10), pad_left("PP %", 8), pad_left("#wrong", 8)));
  json::Value rows = json::Value::array();
  std::uint64_t wrong_total = 0;
  const int untimed = std::max(1, options.warmup);  // at least one: it gives the output the last timed pass must match
  std::uint64_t salt = step_salt(0x7070, std::hash<std::string>{}(run.backend), 0, 0);
  for (const Row& row : rows_of(options)) {
    double ms[4] = {0, 0, 0, 0};
    std::uint64_t wrong = 0;
    const std::string where =
        cat(row.prefill ? "prefill" : "decode", " batch ", row.batch, row.prefill ? cat(" seq ", row.seq) : "");
    for (std::size_t c = 0; c < std::size(kConfigs) && !lockstep.failed(); ++c) {
      const Config config = kConfigs[c];
      const std::string name = cat(where, " ", config_name(config));
      if (options.check) {
        auto checked = summed(lockstep, cat(name, " check"),
                              [&] { return check_communication(ctx, backend, *proxy, config, row, ++salt); });
        if (!checked) break;
        wrong += *checked;
      }
      lockstep.phase(cat(name, " untimed"), [&] {
        for (int i = 0; i < untimed; ++i) proxy->forward(config, row);
        if (std::byte* out = proxy->output(config)) {
          ctx.stream().copy(proxy->at(proxy->layout().reference), out, proxy->activation_bytes(row.tokens));
        }
        ctx.stream().synchronize();
        return std::string();
      });
      auto timed = slowest_ms(
          lockstep, name, [&] { return time_calls(ctx, options.iterations, [&] { proxy->forward(config, row); }); });
      if (!timed) break;
      ms[c] = *timed / options.iterations;
      if (options.check) {
        auto changed = summed(lockstep, cat(name, " output"), [&]() -> std::uint64_t {
          std::byte* out = proxy->output(config);
          if (out == nullptr) return 0;
          return compute->count_differences(out, proxy->at(proxy->layout().reference), row.tokens * model.hidden);
        });
        if (!changed) break;
        wrong += *changed;
      }
    }
    if (lockstep.failed()) {
      run.error = cat(
          describe({.op = cat("tp-pp ", where, " with ", run.backend), .bytes = proxy->activation_bytes(row.tokens)}),
          ": ", lockstep.error());
      break;
    }
    wrong_total += wrong;
    const double tp_comm = (ms[2] / ms[1] - 1) * 100, tp_efficiency = ms[0] / (2 * ms[2]) * 100;
    const double pp_overhead = (ms[3] / ms[0] - 1) * 100;
    json::Value r = json::Value::object();
    r["phase"] = row.prefill ? "prefill" : "decode";
    r["batch"] = row.batch;
    r["seq"] = row.prefill ? json::Value(row.seq) : json::Value();
    r["tokens"] = row.tokens;
    r["activation_bytes"] = proxy->activation_bytes(row.tokens);
    r["tp1_ms"] = ms[0];
    r["tp2_compute_ms"] = ms[1];
    r["tp2_ms"] = ms[2];
    r["pp2_ms"] = ms[3];
    r["tp_comm_pct"] = tp_comm;
    r["tp_efficiency_pct"] = tp_efficiency;
    r["pp_overhead_pct"] = pp_overhead;
    r["wrong"] = options.check ? json::Value(wrong) : json::Value();
    rows.push_back(std::move(r));
    run.lines.push_back(cat(pad_right(row.prefill ? "  prefill" : "  decode", 9), pad_left(cat(row.batch), 6),
                            pad_left(row.prefill ? cat(row.seq) : std::string("-"), 7), pad_left(cat(row.tokens), 8),
                            pad_left(decimal_size(proxy->activation_bytes(row.tokens)), 12),
                            pad_left(fixed(ms[0], 3), 10), pad_left(fixed(ms[1], 3), 10), pad_left(fixed(ms[2], 3), 10),
                            pad_left(percent(tp_comm), 10), pad_left(percent(tp_efficiency), 9),
                            pad_left(fixed(ms[3], 3), 10), pad_left(percent(pp_overhead), 8),
                            pad_left(options.check ? cat(wrong) : "N/A", 8)));
  }
  json::Value shape = json::Value::object();
  shape["name"] = model.name;
  shape["hidden"] = model.hidden;
  shape["intermediate"] = model.intermediate;
  shape["layers"] = layers;
  run.result["model"] = std::move(shape);
  run.result["compute"] = compute->describe();
  run.result["rows"] = std::move(rows);
  if (options.check && run.error.empty()) run.wrong = wrong_total;
  return run;
}

}  // namespace pickle::bench
