// `scratchformer bench`: see bench.h for what is measured and how.
//
// Letters: B batch (sentence pairs), S source length, T target length, D d_model, H heads,
// Hkv key/value heads, Dh head width, F feed-forward width, V vocabulary.
#include "train/bench/bench.h"

#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "autograd/runtime/blas_core.h"
#include "autograd/runtime/bf16.h"
#include "autograd/runtime/cpu_features.h"
#include "autograd/runtime/gemm.h"
#include "autograd/runtime/memory_stats.h"
#include "autograd/runtime/small_gemm.h"
#include "autograd/ops.h"
#include "autograd/runtime/threads.h"
#include "data/corpus.h"
#include "data/tokenizer.h"
#include "nn/feed_forward.h"
#include "train/bench/bench_timing.h"
#include "train/bench/bench_util.h"
#include "train/eval/decode.h"
#include "train/eval/evaluate.h"
#include "train/setup.h"

namespace sf::train {

namespace fs = std::filesystem;
using namespace bench_util;  // Clock, median, median_seconds, fixed, rounded, ... (bench_util.h)

namespace {

constexpr int kMinTimedRuns = 5;             // sgemm and floor: at least this many timed runs
constexpr int kGemmWarmupRuns = 2;           // sgemm and floor: untimed runs first

// ---- FLOPs ---------------------------------------------------------------------------------

// A Linear on `rows` rows, forward: (rows, in) @ (in, out).
double linear_flops(double rows, double in, double out) { return 2 * rows * in * out; }

// Attention for `pairs` (batch, head) pairs, forward: scores (Tq,Dh) @ (Dh,Tk), then
// weights (Tq,Tk) @ (Tk,Dh).
double attention_flops(double pairs, double tq, double tk, double dh) { return pairs * (2 * tq * dh * tk + 2 * tq * tk * dh); }

// The projections of one attention block, forward: q and out on the queries' rows, k and v
// (D -> Hkv*Dh) on the keys' rows.
double attention_projection_flops(const nn::ModelConfig& m, double q_rows, double kv_rows) {
  const double D = static_cast<double>(m.d_model), kv = static_cast<double>(m.kv_heads() * m.head_dim());
  return 2 * linear_flops(q_rows, D, D) + 2 * linear_flops(kv_rows, D, kv);
}

// The feed-forward block on `rows` rows, forward: fc1 (and gate for SwiGLU) D -> F, fc2 F -> D.
double feed_forward_flops(const nn::ModelConfig& m, double rows) {
  const double D = static_cast<double>(m.d_model), F = static_cast<double>(m.d_ff);
  const double inputs = m.activation == nn::Activation::SwiGLU ? 2 : 1;
  return inputs * linear_flops(rows, D, F) + linear_flops(rows, F, D);
}

// ---- the gemm list -------------------------------------------------------------------------

// A Linear (in -> out) on x: (rows, in), as the linear op issues it (autograd/ops_linear.cpp)
// for x @ W^T + bias with W: (out, in):
//   forward      x (rows,in) @ W^T (in,out)      W read with flag T; with a bias, added onto it (beta 1)
//   grad input   g (rows,out) @ W (out,in)
//   grad weight  g^T (out,rows) @ x (rows,in)    g read with flag T
void add_linear(std::vector<GemmCall>& calls, const std::string& name, std::int64_t rows, std::int64_t in,
                std::int64_t out, bool bias = true) {
  calls.push_back({rows, out, in, false, true, 1, name + " forward", bias});
  calls.push_back({rows, in, out, false, false, 1, name + " grad input"});
  calls.push_back({out, in, rows, true, false, 1, name + " grad weight"});
}

// Attention over `pairs` (batch, head) pairs: one gemm per pair and product (the batch dims do
// not fold into rows: q, k, v are head-split views).
//   forward   scores = q (Tq,Dh) @ k^T (Dh,Tk)           k^T a view: T
//             out    = w (Tq,Tk) @ v (Tk,Dh)
//   backward  grad w = g (Tq,Dh) @ v^T (Dh,Tk)           T
//             grad v = w^T (Tk,Tq) @ g (Tq,Dh)           T
//             grad q = gs (Tq,Tk) @ k (Tk,Dh)
//             grad k^T = q^T (Dh,Tq) @ gs (Tq,Tk)        T
void add_attention(std::vector<GemmCall>& calls, const std::string& name, std::int64_t pairs, std::int64_t tq,
                   std::int64_t tk, std::int64_t dh) {
  calls.push_back({tq, tk, dh, false, true, pairs, name + " q k^T forward"});
  calls.push_back({tq, dh, tk, false, false, pairs, name + " weights v forward"});
  calls.push_back({tq, tk, dh, false, true, pairs, name + " grad weights"});
  calls.push_back({tk, dh, tq, true, false, pairs, name + " grad v"});
  calls.push_back({tq, dh, tk, false, false, pairs, name + " grad q"});
  calls.push_back({dh, tk, tq, true, false, pairs, name + " grad k^T"});
}

// An attention block's projections and products. Queries on q_rows = B*Tq rows, keys and values
// on kv_rows = B*Tk rows.
void add_attention_block(std::vector<GemmCall>& calls, const nn::ModelConfig& m, const std::string& name,
                         std::int64_t batch, std::int64_t tq, std::int64_t tk) {
  const std::int64_t D = m.d_model, kv = m.kv_heads() * m.head_dim();
  add_linear(calls, name + ".q_proj", batch * tq, D, D);
  add_linear(calls, name + ".k_proj", batch * tk, D, kv);
  add_linear(calls, name + ".v_proj", batch * tk, D, kv);
  add_attention(calls, name, batch * m.n_heads, tq, tk, m.head_dim());
  add_linear(calls, name + ".out_proj", batch * tq, D, D);
}

void add_feed_forward(std::vector<GemmCall>& calls, const nn::ModelConfig& m, const std::string& name, std::int64_t rows) {
  add_linear(calls, name + ".fc1", rows, m.d_model, m.d_ff);
  if (m.activation == nn::Activation::SwiGLU) add_linear(calls, name + ".gate", rows, m.d_model, m.d_ff);
  add_linear(calls, name + ".fc2", rows, m.d_ff, m.d_model);
}

// ---- sgemm on preallocated buffers ---------------------------------------------------------

// Buffers large enough for every call of a list, filled with values in [-1, 1) (not zeros: no
// BLAS shortcut, no denormals).
struct GemmBuffers {
  std::vector<float> a, b, c;
  explicit GemmBuffers(const std::vector<GemmCall>& calls) {
    std::size_t na = 1, nb = 1, nc = 1;
    for (const GemmCall& g : calls) {
      na = std::max<std::size_t>(na, static_cast<std::size_t>(g.m * g.k));
      nb = std::max<std::size_t>(nb, static_cast<std::size_t>(g.k * g.n));
      nc = std::max<std::size_t>(nc, static_cast<std::size_t>(g.m * g.n));
    }
    Generator gen(7);
    // c: one (m,n) block per thread, for the slices run_gemm_calls spreads over the threads
    a.resize(na), b.resize(nb), c.resize(nc * static_cast<std::size_t>(std::max(1, omp_get_max_threads())));
    for (float& x : a) x = static_cast<float>(2 * gen.uniform() - 1);
    for (float& x : b) x = static_cast<float>(2 * gen.uniform() - 1);
  }
};

// One call as `g` describes it (once, whatever g.count), leading dimensions tight, through
// sf::gemm: the routine (and the threading) sf::matmul uses for a product of this size.
// A is stored (m,k), or (k,m) when transposed; B (k,n), or (n,k) when transposed; C (m,n).
void run_gemm(const GemmCall& g, GemmBuffers& buf) {
  const int m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  const int lda = std::max(1, g.trans_a ? m : k), ldb = std::max(1, g.trans_b ? k : n);
  gemm(g.trans_a, g.trans_b, m, n, k, buf.a.data(), lda, buf.b.data(), ldb, buf.c.data(), std::max(1, n),
       g.accumulate);
}

// All g.count calls of `g`, as the step makes them: small slices (attention's per-head products)
// the way ops_matmul.cpp runs them, an OpenMP loop over the slices with small_gemm, each thread
// writing its own part of buf.c; anything else one sf::gemm call after another.
void run_gemm_calls(const GemmCall& g, GemmBuffers& buf) {
  if (!g.uses_small_gemm()) {
    for (std::int64_t i = 0; i < g.count; ++i) run_gemm(g, buf);
    return;
  }
  const std::int64_t lda = g.trans_a ? g.m : g.k, ldb = g.trans_b ? g.k : g.n;
  const StridedMatrix<float> a{buf.a.data(), g.trans_a ? 1 : lda, g.trans_a ? lda : 1};
  const StridedMatrix<float> b{buf.b.data(), g.trans_b ? 1 : ldb, g.trans_b ? ldb : 1};
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < g.count; ++i)
    small_gemm(g.m, g.n, g.k, a, b, buf.c.data() + static_cast<std::size_t>(omp_get_thread_num() * g.m * g.n));
}

std::string gemm_shape_str(const GemmCall& g) {
  return std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k) + " " + (g.trans_a ? "T" : "N") +
         (g.trans_b ? "T" : "N");
}

// ---- output --------------------------------------------------------------------------------

// "3+3" (encoder + decoder layers), or the one stack's count for a decoder-only or encoder-only model.
std::string layer_count(const ModelSection& m) {
  if (m.arch == "decoder-only") return std::to_string(m.decoder_layers);
  if (m.arch == "encoder-only") return std::to_string(m.encoder_layers);
  return std::to_string(m.encoder_layers) + "+" + std::to_string(m.decoder_layers);
}

}  // namespace

// ---- public pieces -------------------------------------------------------------------------

StepFlops training_step_flops(const nn::ModelConfig& m, std::int64_t batch, std::int64_t src_len, std::int64_t tgt_len) {
  nn::require_transformer(m.arch, "bench: training_step_flops");
  const double B = static_cast<double>(batch), S = static_cast<double>(src_len), T = static_cast<double>(tgt_len);
  const double D = static_cast<double>(m.d_model), V = static_cast<double>(m.tgt_vocab);
  const double pairs = B * static_cast<double>(m.n_heads), Dh = static_cast<double>(m.head_dim());
  const double Le = static_cast<double>(m.encoder_layers), Ld = static_cast<double>(m.decoder_layers);
  StepFlops f;
  if (m.arch == nn::Arch::DecoderOnly) {  // Ld causal blocks on the B*T rows of the one sequence
    f.projections += Ld * (attention_projection_flops(m, B * T, B * T) + feed_forward_flops(m, B * T));
    f.attention += Ld * attention_flops(pairs, T, T, Dh);  // (all T x T scores are computed; the mask zeroes half)
    f.output = linear_flops(B * T, D, V);
    return f;
  }
  // encoder layer on B*S rows: self-attention, feed-forward
  f.projections += Le * (attention_projection_flops(m, B * S, B * S) + feed_forward_flops(m, B * S));
  f.attention += Le * attention_flops(pairs, S, S, Dh);
  if (m.arch == nn::Arch::EncoderOnly) {  // the masked-LM head on every source position
    f.output = linear_flops(B * S, D, V);
    return f;
  }
  // decoder layer on B*T rows: self-attention, cross-attention (k and v from the encoder
  // output's B*S rows), feed-forward
  f.projections += Ld * (attention_projection_flops(m, B * T, B * T) + attention_projection_flops(m, B * T, B * S) +
                         feed_forward_flops(m, B * T));
  f.attention += Ld * (attention_flops(pairs, T, T, Dh) + attention_flops(pairs, T, S, Dh));
  // the output projection (tied or not, the same product): (B*T, D) @ (D, V)
  f.output = linear_flops(B * T, D, V);
  return f;
}

std::vector<GemmCall> training_step_gemms(const nn::ModelConfig& m, std::int64_t batch, std::int64_t src_len,
                                          std::int64_t tgt_len) {
  nn::require_transformer(m.arch, "bench: training_step_gemms");
  std::vector<GemmCall> calls;
  if (m.arch == nn::Arch::DecoderOnly) {  // the causal blocks, then the tied LM head
    for (std::int64_t l = 0; l < m.decoder_layers; ++l) {
      const std::string name = "layers." + std::to_string(l);
      add_attention_block(calls, m, name + ".self_attn", batch, tgt_len, tgt_len);
      add_feed_forward(calls, m, name + ".ffn", batch * tgt_len);
    }
    add_linear(calls, "LM head (tied)", batch * tgt_len, m.d_model, m.tgt_vocab, /*bias=*/false);
    return calls;
  }
  for (std::int64_t l = 0; l < m.encoder_layers; ++l) {
    const std::string name = "encoder.layers." + std::to_string(l);
    add_attention_block(calls, m, name + ".self_attn", batch, src_len, src_len);
    add_feed_forward(calls, m, name + ".ffn", batch * src_len);
  }
  if (m.arch == nn::Arch::EncoderOnly) {  // the tied masked-LM head on every position
    add_linear(calls, "masked-LM head (tied)", batch * src_len, m.d_model, m.src_vocab, /*bias=*/false);
    return calls;
  }
  for (std::int64_t l = 0; l < m.decoder_layers; ++l) {
    const std::string name = "decoder.layers." + std::to_string(l);
    add_attention_block(calls, m, name + ".self_attn", batch, tgt_len, tgt_len);
    add_attention_block(calls, m, name + ".cross_attn", batch, tgt_len, src_len);
    add_feed_forward(calls, m, name + ".ffn", batch * tgt_len);
  }
  // h @ E^T (tied) or h @ W^T (output_proj): the same three products as a Linear
  add_linear(calls, m.tie_output ? "output projection (tied)" : "output_proj", batch * tgt_len, m.d_model, m.tgt_vocab,
             /*bias=*/false);
  return calls;
}

RandomBatch random_batch(std::int64_t vocab, std::int64_t batch, std::int64_t src_len, std::int64_t tgt_len,
                         Generator& gen) {
  constexpr std::int64_t kFirstWord = 4;  // after <pad> <unk> <s> </s>
  if (vocab <= kFirstWord)
    throw std::invalid_argument("bench: the vocabulary must have more than " + std::to_string(kFirstWord) +
                                " entries (the special ids), got " + std::to_string(vocab));
  if (batch < 1 || src_len < 1 || tgt_len < 1)
    throw std::invalid_argument("bench: batch and lengths must be >= 1, got batch " + std::to_string(batch) +
                                ", source length " + std::to_string(src_len) + ", target length " + std::to_string(tgt_len));
  auto ids = [&](std::int64_t len) {
    std::vector<std::int64_t> v(static_cast<std::size_t>(batch * len));
    for (auto& x : v) x = kFirstWord + static_cast<std::int64_t>(gen.randint(static_cast<std::uint64_t>(vocab - kFirstWord)));
    return from_vector<std::int64_t>(v, {batch, len});
  };
  RandomBatch b;
  b.src = ids(src_len);
  b.tgt_in = ids(tgt_len);
  b.tgt_out = ids(tgt_len);
  return b;
}

RandomBatch random_batch_for(const nn::ModelConfig& m, std::int64_t batch, std::int64_t length, Generator& gen) {
  RandomBatch b = random_batch(m.tgt_vocab, batch, length, length, gen);
  if (m.arch == nn::Arch::DecoderOnly) b.src = Tensor();
  if (m.arch == nn::Arch::EncoderOnly) b.tgt_in = Tensor();  // tgt_out (B,S): a target per source position
  return b;
}

double training_step(const nn::Model& model, Optimizer& optimizer, const RandomBatch& batch,
                     const TrainSection& train, double lr) {
  Tensor logits = model.forward(batch.src, batch.tgt_in);  // (B,T,V)
  const std::int64_t V = logits.size(-1);
  Tensor loss = cross_entropy(logits.reshape({-1, V}), batch.tgt_out.reshape({-1}), data::kPadId, train.label_smoothing);
  loss.backward();
  const double value = loss.item();
  clip_grad_norm(optimizer.params(), train.clip_norm);
  optimizer.step(lr);
  optimizer.zero_grad();
  return value;
}

// ---- the benchmark -------------------------------------------------------------------------

namespace {

// What run_bench measured (bench.h says what and how): the JSON line and the table are
// written from this.
struct BenchReport {
  double load_start = NAN, load_end = NAN;  // 1-minute load average before and after
  double rss_start = NAN, rss_peak = NAN;   // MiB: at the start, and the peak after the steps
  std::int64_t vocab = 0;                   // V of the model (data.tokenizer_vocab_size)
  StepTiming step;
  StepFlops flops;
  double gflops = 0, tokens_per_s = 0;      // achieved by the median step
  GemmCall largest;                         // the step's largest product (per call)
  std::int64_t gemm_calls = 0;              // matrix products one step makes
  double sgemm_gflops = 0;                  // sf::gemm alone on `largest`
  double floor_s = 0;                       // all of the step's products back to back
  // bf16 (train.precision = "bf16"), measured when the CPU has bf16 units (bf16_unit != "none")
  std::string bf16_unit = "none";           // cpu_features.h: "amx-bf16", "avx512-bf16" or "none"
  std::string bf16_kernel;                  // oneDNN's kernel, e.g. "brg:avx512_core_bf16"
  StepTiming bf16_step;
  double bf16_tokens_per_s = NAN;
  double bf16_gemm_gflops = NAN;            // gemm_bf16 alone on `largest`
  double bf16_floor_s = NAN;                // the step's products back to back, in bf16
  DecodeReport dec;
};

// The machine's sgemm on the step's largest product, and the BLAS floor of all its products,
// into r (largest, gemm_calls, sgemm_gflops, floor_s). `steps` timed runs (at least kMinTimedRuns).
void time_blas(const std::vector<GemmCall>& gemms, std::int64_t steps, BenchReport& r) {
  r.gemm_calls = 0;
  for (const GemmCall& g : gemms) r.gemm_calls += g.count;
  r.largest = *std::max_element(gemms.begin(), gemms.end(), [](const GemmCall& a, const GemmCall& b) {
    return a.flops() / static_cast<double>(a.count) < b.flops() / static_cast<double>(b.count);
  });
  GemmBuffers buffers(gemms);
  const int timed_runs = static_cast<int>(std::max<std::int64_t>(steps, kMinTimedRuns));
  const double sgemm_s = median_seconds([&] { run_gemm(r.largest, buffers); }, kGemmWarmupRuns, timed_runs);
  r.sgemm_gflops = r.largest.flops() / static_cast<double>(r.largest.count) / sgemm_s / 1e9;
  r.floor_s = median_seconds(
      [&] {
        for (const GemmCall& g : gemms) run_gemm_calls(g, buffers);
      },
      kGemmWarmupRuns, timed_runs);
}

// The JSON line (tools/bench_pytorch.py prints the same fields).
nlohmann::ordered_json bench_json(const Config& cfg, const BenchOptions& opt, const BenchReport& r) {
  nlohmann::ordered_json j;
  j["tool"] = "scratchformer";
  j["config"] = cfg.source_path;
  j["cpu"] = cpu_model();
  j["blas_core"] = blas_core_name();
  j["threads"] = num_threads();
  j["load_avg_start"] = rounded(r.load_start, 2);
  j["load_avg_end"] = rounded(r.load_end, 2);
  j["batch"] = opt.batch;
  j["src_len"] = opt.length;
  j["tgt_len"] = opt.length;
  j["vocab"] = r.vocab;
  j["params"] = r.step.params;
  j["flops_forward"] = r.flops.forward();
  j["flops_step"] = r.flops.total();
  j["warmup"] = opt.warmup;
  j["steps"] = opt.steps;
  add_step_fields(j, r.step);
  j["tokens_per_s"] = rounded(r.tokens_per_s, 1);
  j["gflops"] = rounded(r.gflops, 2);
  j["sgemm_shape"] = gemm_shape_str(r.largest);
  j["sgemm_gflops"] = rounded(r.sgemm_gflops, 2);
  j["mfu"] = rounded(r.gflops / r.sgemm_gflops, 4);
  j["gemm_calls"] = r.gemm_calls;
  j["floor_ms"] = rounded(r.floor_s * 1e3, 2);
  j["step_over_floor"] = rounded(r.step.median_s / r.floor_s, 3);
  j["rss_start_mib"] = rounded(r.rss_start, 1);
  j["rss_peak_mib"] = rounded(r.rss_peak, 1);
  j["decode_model"] = r.dec.model;
  j["decode_sentences"] = r.dec.sentences;
  const bool decoded = r.dec.sentences > 0;
  j["greedy_cache_sent_per_s"] = sentences_per_s(r.dec, r.dec.greedy_cache);
  j["greedy_nocache_sent_per_s"] = sentences_per_s(r.dec, r.dec.greedy_nocache);
  j["beam4_cache_sent_per_s"] = sentences_per_s(r.dec, r.dec.beam_cache);
  j["beam4_nocache_sent_per_s"] = sentences_per_s(r.dec, r.dec.beam_nocache);
  j["greedy_tokens"] = decoded ? nlohmann::ordered_json(r.dec.greedy_cache.tokens) : nullptr;
  j["beam4_tokens"] = decoded ? nlohmann::ordered_json(r.dec.beam_cache.tokens) : nullptr;
  const bool bf16 = r.bf16_unit != "none";
  j["bf16_unit"] = bf16 ? nlohmann::ordered_json(r.bf16_unit) : nullptr;
  j["bf16_step_ms"] = bf16 ? rounded(r.bf16_step.median_s * 1e3, 2) : nullptr;
  j["bf16_step_ms_min"] = bf16 ? rounded(r.bf16_step.min_s * 1e3, 2) : nullptr;
  j["bf16_step_ms_max"] = bf16 ? rounded(r.bf16_step.max_s * 1e3, 2) : nullptr;
  j["bf16_loss"] = bf16 ? rounded(r.bf16_step.loss, 4) : nullptr;
  j["bf16_tokens_per_s"] = bf16 ? rounded(r.bf16_tokens_per_s, 1) : nullptr;
  auto ms = [&](double seconds) { return decoded ? rounded(seconds * 1e3, 1) : nullptr; };
  j["greedy_prefill_ms"] = ms(r.dec.greedy_cache.prefill_seconds);
  j["greedy_decode_ms"] = ms(r.dec.greedy_cache.decode_seconds());
  j["beam4_prefill_ms"] = ms(r.dec.beam_cache.prefill_seconds);
  j["beam4_decode_ms"] = ms(r.dec.beam_cache.decode_seconds());
  // scratchformer's own (tools/bench_pytorch.py has no counterpart)
  j["bf16_kernel"] = bf16 ? nlohmann::ordered_json(r.bf16_kernel) : nullptr;
  j["bf16_gemm_gflops"] = bf16 ? rounded(r.bf16_gemm_gflops, 2) : nullptr;
  j["bf16_floor_ms"] = bf16 ? rounded(r.bf16_floor_s * 1e3, 2) : nullptr;
  j["bf16_step_over_floor"] = bf16 ? rounded(r.bf16_step.median_s / r.bf16_floor_s, 3) : nullptr;
  const bool bf16_decoded = decoded && r.dec.bf16;
  j["bf16_greedy_cache_sent_per_s"] = bf16_decoded ? sentences_per_s(r.dec, r.dec.bf16_greedy_cache) : nullptr;
  j["bf16_beam4_cache_sent_per_s"] = bf16_decoded ? sentences_per_s(r.dec, r.dec.bf16_beam_cache) : nullptr;
  j["decode_batch"] = decoded ? nlohmann::ordered_json(r.dec.batch) : nullptr;  // sentences per batch, side by side
  return j;
}

// The table's first lines: the config, the machine, the model, the batch and its FLOPs.
void print_setup(std::ostream& os, const Config& cfg, const BenchOptions& opt, const BenchReport& r) {
  const ModelSection& ms = cfg.model;
  print_machine(os, "", cfg, r.load_start, r.load_end);
  os << "model     " << ms.arch << ", D " << ms.d_model << ", H " << ms.n_heads << ", F " << ms.d_ff << ", layers " << layer_count(ms)
     << ", V " << r.vocab << ", " << ms.activation << ", " << ms.norm_position << "-" << ms.norm
     << ", dropout " << ms.dropout << (ms.share_embeddings ? ", shared" : "") << (ms.tie_output ? ", tied" : "")
     << " embeddings, " << ms.attention << " attention; " << r.step.params << " parameters\n"
     << "batch     " << opt.batch << " pairs x " << opt.length << " source + " << opt.length
     << " target tokens (random ids, no padding); " << cfg.train.optimizer << ", label smoothing "
     << cfg.train.label_smoothing << "\n"
     << "FLOPs     forward " << fixed(r.flops.forward() / 1e9, 3) << " G (projections " << fixed(r.flops.projections / 1e9, 3)
     << ", attention " << fixed(r.flops.attention / 1e9, 3) << ", output " << fixed(r.flops.output / 1e9, 3)
     << "), backward 2x, step " << fixed(r.flops.total() / 1e9, 3) << " GFLOP (matrix products only)\n\n";
}

// The training step against the machine: time, throughput, MFU, the BLAS floor, memory.
void print_step(std::ostream& os, const BenchOptions& opt, const BenchReport& r) {
  const StepTiming& step = r.step;
  print_row(os, "training step (median of " + std::to_string(opt.steps) + " after " + std::to_string(opt.warmup) + ")",
            fixed(step.median_s * 1e3, 1) + " ms  (min " + fixed(step.min_s * 1e3, 1) + ", max " +
                fixed(step.max_s * 1e3, 1) + "; loss " + fixed(step.loss, 3) + ")");
  print_row(os, "target tokens/s", fixed(r.tokens_per_s, 0));
  print_row(os, "achieved", fixed(r.gflops, 2) + " GFLOP/s");
  print_row(os, "sgemm " + gemm_shape_str(r.largest), fixed(r.sgemm_gflops, 2) + " GFLOP/s");
  print_row(os, "model FLOPs utilisation", fixed(100 * r.gflops / r.sgemm_gflops, 1) + " %");
  print_row(os, "BLAS floor (" + std::to_string(r.gemm_calls) + " matrix products)", fixed(r.floor_s * 1e3, 1) + " ms");
  print_row(os, "step / floor", fixed(step.median_s / r.floor_s, 2));
  print_row(os, "peak RSS (ru_maxrss)", fixed(r.rss_peak, 1) + " MiB  (" + fixed(r.rss_start, 1) + " MiB at the start)");
}

// The same step with train.precision = "bf16", or why it was not measured.
void print_bf16_step(std::ostream& os, const BenchReport& r) {
  if (r.bf16_unit == "none") {
    os << "\nbf16: not measured, this CPU has no bf16 matrix units (" << bf16_units_found() << ")\n";
    return;
  }
  os << "\nbf16 matrix products (train.precision = \"bf16\") on " << r.bf16_unit << ", oneDNN " << r.bf16_kernel << "\n";
  const StepTiming& step = r.bf16_step;
  print_row(os, "training step, bf16", fixed(step.median_s * 1e3, 1) + " ms  (min " + fixed(step.min_s * 1e3, 1) +
                                          ", max " + fixed(step.max_s * 1e3, 1) + "; loss " + fixed(step.loss, 3) + ")");
  print_row(os, "target tokens/s, bf16", fixed(r.bf16_tokens_per_s, 0) + "  (" +
                                            fixed(r.step.median_s / step.median_s, 2) + "x float32)");
  print_row(os, "gemm_bf16 " + gemm_shape_str(r.largest), fixed(r.bf16_gemm_gflops, 2) + " GFLOP/s");
  print_row(os, "bf16 floor", fixed(r.bf16_floor_s * 1e3, 1) + " ms");
  print_row(os, "step / floor, bf16", fixed(step.median_s / r.bf16_floor_s, 2));
}

}  // namespace

int run_bench(const Config& cfg, const BenchOptions& opt) {
  nn::require_transformer(nn::parse_arch(cfg.model.arch), "bench");  // the FLOP count and BLAS floor are attention layers'
  check_options_and_set_threads(cfg, opt);
  BenchReport r;
  r.load_start = load_average_1min();
  r.rss_start = rss_now_mib();

  // 1. training steps, then the peak memory they reached
  r.vocab = cfg.data.tokenizer_vocab_size;
  const nn::ModelConfig mcfg = model_config_from(cfg.model, r.vocab, r.vocab);
  r.step = time_training(cfg, mcfg, opt);
  r.rss_peak = peak_rss_mib();

  // 2. FLOPs, the machine's sgemm on the largest product, and the BLAS floor
  r.flops = training_step_flops(mcfg, opt.batch, opt.length, opt.length);
  time_blas(training_step_gemms(mcfg, opt.batch, opt.length, opt.length), opt.steps, r);
  r.gflops = r.flops.total() / r.step.median_s / 1e9;
  r.tokens_per_s = static_cast<double>(opt.batch * opt.length) / r.step.median_s;

  // 3. the same in bf16, where the CPU has the units (train.precision = "bf16")
  if (bf16_unit() != Bf16Unit::None) {
    const MatmulPrecisionScope bf16(MatmulPrecision::Bf16);
    r.bf16_unit = bf16_unit_name(bf16_unit());
    r.bf16_kernel = bf16_kernel_name();
    r.bf16_step = time_training(cfg, mcfg, opt);
    r.bf16_tokens_per_s = static_cast<double>(opt.batch * opt.length) / r.bf16_step.median_s;
    BenchReport blas;
    time_blas(training_step_gemms(mcfg, opt.batch, opt.length, opt.length), opt.steps, blas);
    r.bf16_gemm_gflops = blas.sgemm_gflops;
    r.bf16_floor_s = blas.floor_s;
  }

  // 4. decoding
  r.dec = run_decoding(cfg, opt);
  r.load_end = load_average_1min();

  const nlohmann::ordered_json j = bench_json(cfg, opt, r);
  if (!opt.json_only) {
    std::ostringstream os;
    print_setup(os, cfg, opt, r);
    print_step(os, opt, r);
    print_bf16_step(os, r);
    print_decoding(os, cfg, r.dec);
    std::cout << os.str() << "\n";
  }
  std::cout << j.dump() << std::endl;
  return 0;
}

// ---- the scaling table (--scaling) ----------------------------------------------------------

std::vector<ScalingRow> scaling_rows(const Config& cfg, const BenchOptions& opt) {
  nn::require_transformer(nn::parse_arch(cfg.model.arch), "bench --scaling");  // plain against tiled attention
  if (opt.scaling_lengths.empty()) throw std::invalid_argument("bench --scaling: no sequence length to measure");
  for (std::int64_t t : opt.scaling_lengths)
    if (t < 1) throw std::invalid_argument("bench --scaling: lengths must be >= 1, got " + std::to_string(t));
  if (cfg.model.attention_dropout > 0)
    throw std::invalid_argument("bench --scaling: the tiled rows need model.attention_dropout = 0 (tiled attention "
                                "never forms the weights to drop), got " + fixed(cfg.model.attention_dropout, 3));
  const std::int64_t budget = opt.batch * opt.length;  // target tokens per step, the same in every row
  const std::int64_t V = cfg.data.tokenizer_vocab_size;
  std::vector<ScalingRow> rows;
  for (std::int64_t T : opt.scaling_lengths) {
    for (const char* kernel : {"plain", "tiled"}) {
      Config c = cfg;
      c.model.attention = kernel;
      c.model.max_len = std::max(c.model.max_len, T);  // the position tables must reach T
      const nn::ModelConfig m = model_config_from(c.model, V, V);
      BenchOptions o = opt;
      o.length = T;
      o.batch = std::max<std::int64_t>(1, budget / T);

      // Peak tensor storage of the row: model, optimizer state, batch, one step's graph.
      const std::int64_t live_before = memory_stats().live_bytes;
      reset_peak_memory();
      const StepTiming t = time_training(c, m, o);
      ScalingRow row;
      row.peak_bytes = memory_stats().peak_bytes - live_before;
      row.length = T;
      row.batch = o.batch;
      row.attention = kernel;
      row.step_s = t.median_s;
      row.flops = training_step_flops(m, o.batch, T, T);
      rows.push_back(row);
    }
  }
  return rows;
}

int run_scaling_bench(const Config& cfg, const BenchOptions& opt) {
  check_options_and_set_threads(cfg, opt);
  const double load_start = load_average_1min();
  const std::vector<ScalingRow> rows = scaling_rows(cfg, opt);
  const double load_end = load_average_1min();
  const std::int64_t budget = opt.batch * opt.length;
  constexpr double kMiB = 1024.0 * 1024.0;

  nlohmann::ordered_json j;
  j["tool"] = "scratchformer";
  j["mode"] = "scaling";
  j["config"] = cfg.source_path;
  j["cpu"] = cpu_model();
  j["blas_core"] = blas_core_name();
  j["threads"] = num_threads();
  j["load_avg_start"] = rounded(load_start, 2);
  j["load_avg_end"] = rounded(load_end, 2);
  j["token_budget"] = budget;
  j["warmup"] = opt.warmup;
  j["steps"] = opt.steps;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ScalingRow& r : rows) {
    nlohmann::ordered_json e;
    e["T"] = r.length;
    e["batch"] = r.batch;
    e["attention"] = r.attention;
    e["step_ms"] = rounded(r.step_s * 1e3, 2);
    // per training step (forward + backward), as the table
    e["attention_gflop"] = rounded(3 * r.flops.attention / 1e9, 4);
    e["projection_gflop"] = rounded(3 * r.flops.projections / 1e9, 4);
    e["output_gflop"] = rounded(3 * r.flops.output / 1e9, 4);
    e["peak_tensor_mib"] = rounded(static_cast<double>(r.peak_bytes) / kMiB, 2);
    list.push_back(e);
  }
  j["rows"] = list;

  if (!opt.json_only) {
    const ModelSection& ms = cfg.model;
    std::ostringstream os;
    print_machine(os, " --scaling", cfg, load_start, load_end);
    os << "model     " << ms.arch << ", D " << ms.d_model << ", H " << ms.n_heads << ", F " << ms.d_ff << ", layers " << layer_count(ms)
       << ", V " << cfg.data.tokenizer_vocab_size << "\n"
       << "batch     " << budget << " target tokens per step (batch x T, source length = T); median of " << opt.steps
       << " steps after " << opt.warmup << "\n"
       << "GFLOP     per step (forward + backward, matrix products): attention q k^T and weights v, against the\n"
       << "          layers' projections and feed-forward blocks (the output projection, the same in every row, apart)\n"
       << "peak MiB  tensor storage at the step's peak: model, Adam state, batch and one step's graph\n\n";
    os << std::right << std::setw(6) << "T" << std::setw(7) << "batch" << std::setw(12) << "attn GFLOP" << std::setw(12)
       << "proj GFLOP" << std::setw(11) << "attn/proj" << std::setw(11) << "plain ms" << std::setw(11) << "tiled ms"
       << std::setw(11) << "plain MiB" << std::setw(11) << "tiled MiB" << "\n";
    for (std::size_t i = 0; i + 1 < rows.size(); i += 2) {
      const ScalingRow& plain = rows[i];
      const ScalingRow& tiled = rows[i + 1];
      os << std::setw(6) << plain.length << std::setw(7) << plain.batch << std::setw(12)
         << fixed(3 * plain.flops.attention / 1e9, 3) << std::setw(12) << fixed(3 * plain.flops.projections / 1e9, 3)
         << std::setw(11) << fixed(plain.flops.attention / plain.flops.projections, 3) << std::setw(11)
         << fixed(plain.step_s * 1e3, 1) << std::setw(11) << fixed(tiled.step_s * 1e3, 1) << std::setw(11)
         << fixed(static_cast<double>(plain.peak_bytes) / kMiB, 1) << std::setw(11)
         << fixed(static_cast<double>(tiled.peak_bytes) / kMiB, 1) << "\n";
    }
    if (!rows.empty())
      os << "\noutput projection: " << fixed(3 * rows.front().flops.output / 1e9, 3) << " GFLOP per step in every row\n";
    std::cout << os.str() << "\n";
  }
  std::cout << j.dump() << std::endl;
  return 0;
}

}  // namespace sf::train
