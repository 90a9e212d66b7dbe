// `scratchformer bench --generation`: the lecture's claim that generation has two phases, a
// compute-bound PREFILL and a memory-bound DECODE whose KV cache grows with the sequence, measured
// on a decoder-only model of the config's shape with random weights (nn/decoder_only.h).
//
// The model: model.arch "decoder-only" is built as it is (configs/lm-en.toml is the example);
// any other arch is built as decoder-only from the same [model] section (decoder_layers causal
// layers, no encoder), and the table's first lines say so. The vocabulary is
// data.tokenizer_vocab_size (random ids in [4, V): no tokenizer is read or trained). model.eval()
// (no dropout), NoGradGuard (no graph) and Linear on weights packed once (as `generate` does,
// train/eval/generate.h) throughout.
//
// For each batch size B (BenchOptions::generation_batches, default 1 and 8: one table each) and
// prompt length P (::prompt_lengths, default 16 32 64 128 256; a P above model.max_len - G is
// skipped, and the table says which):
//   prefill   start_decoding on a random (B,P) prompt: the median of `steps` calls after
//             `warmup`. It runs the first n = P - 1 tokens through the layers and the final norm,
//             filling every layer's KV cache; it computes no logits (the LM head is not run), and
//             the prompt's last token is read by the first decode step (nn/decoder_only.cpp).
//   decode    then G = ::generation_tokens (default 32) decode_step calls continuing from that
//             state, each reading one random token per row; the median of the G step times. Step
//             i (0-based) reads T = P + i keys (n cached by the prefill, i appended since, and
//             its own), so the step FLOPs and bytes below are the mean over the G steps, at
//             T = P + (G - 1) / 2.
//
// The formulas (a multiply-add counts 2; N = non-embedding parameters: every parameter but the
// (V,D) embedding table and a learned position table; the LM head is the embedding table, tied):
//   prefill FLOPs        B (2 N n + 4 L n^2 D)                 n = P - 1
//                        2 N per token is every weight once (biases and norm gains included,
//                        under 1% of N); 4 n^2 D per layer is q k^T and weights v over all H
//                        query heads (H Dh = D) on the full (n,n) scores: the causal mask blocks
//                        half of them, but the products are computed whole (as in bench.h)
//   prefill bytes        4 N + 2 L B Hkv n Dh 4                the weights once, the KV cache written
//   decode FLOPs/step    B (2 (N + V D) + 4 L T D)             the layers and the LM head for each
//                                                              row, one query over T keys per layer
//   decode bytes/step    4 (N + V D) + 2 L B Hkv T Dh 4        every weight once (the B rows share
//                                                              them), then the KV cache (k and v)
//   arithmetic intensity FLOPs / bytes of each phase: about B n / 2 for the prefill, B / 2 for the
//                        decode (less as T grows): the reason one is compute- and the other
//                        memory-bound
//   KV cache             2 L B Hkv T Dh 4 bytes (the lecture's formula) at T = P - 1 + G after the
//                        last step, printed beside state->cache_bytes(), what the tensors hold
// The bytes are what a step must read at least. The code moves more: each decode step copies the
// cache to append one position (cat), and with GQA (Hkv < H) repeat_kv_heads copies k and v to H
// heads before the products (nn/attention.cpp).
//
// Printed: the machine (CPU model from /proc/cpuinfo, threads, load), the model, the formulas,
// one table per B (a row per P), the ratio of prefill to decode GFLOP/s at each P, and one JSON
// line {"tool": "scratchformer", "mode": "generation", ..., "rows": [...]} (--json: only that).
//
// Letters: B batch (rows decoded together), P prompt length, n = P - 1, T keys a step reads,
// G decode steps, L layers, D d_model, H heads, Hkv key/value heads, Dh head width, V vocabulary,
// N non-embedding parameters.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/model.h"
#include "train/bench/bench.h"
#include "train/config.h"

namespace sf::train {

// Runs --generation: prints the tables (unless json_only) and one JSON line. Returns 0, or throws
// on a bad option (a P < 1, no P that fits max_len, ...).
int run_generation_bench(const Config& cfg, const BenchOptions& opt);

// ---- the pieces, public for the tests and for reading --------------------------------------

// The parameter counts of the formulas.
struct GenerationParams {
  std::int64_t total = 0;          // model.parameter_count()
  std::int64_t non_embedding = 0;  // N: total minus embed.weight (V,D) and a learned pos.weight
  std::int64_t head = 0;           // V D: the LM head (the embedding table, tied)
  std::int64_t per_token() const { return non_embedding + head; }  // N + V D: what one decode step reads
};
GenerationParams generation_params(const nn::Model& model);

// B (2 N n + 4 L n^2 D) with n = P - 1 (see the top).
double prefill_flops(const nn::ModelConfig& m, const GenerationParams& p, std::int64_t batch, std::int64_t prompt);
// B (2 (N + V D) + 4 L T D): one decode step reading T keys.
double decode_step_flops(const nn::ModelConfig& m, const GenerationParams& p, std::int64_t batch, std::int64_t keys);
// 2 L B Hkv T Dh 4: the float32 keys and values of T positions in every layer.
std::int64_t kv_cache_bytes(const nn::ModelConfig& m, std::int64_t batch, std::int64_t positions);

// One row of a table: prefill and decode at batch B and prompt length P.
struct GenerationRow {
  std::int64_t batch = 0, prompt = 0;       // B, P
  double prefill_s = 0;                     // median start_decoding, seconds
  double prefill_flops = 0;                 // by the formula
  double prefill_bytes = 0;                 // weights once + the KV cache written
  double decode_s = 0;                      // median decode_step (B new tokens), seconds
  double decode_flops = 0;                  // per step, the mean over the G steps
  double decode_bytes = 0;                  // per step, the mean over the G steps
  std::int64_t kv_bytes_formula = 0;        // 2 L B Hkv T Dh 4 at T = P - 1 + G
  std::int64_t kv_bytes_allocated = 0;      // state->cache_bytes() after the last step
  double prefill_tokens_per_s() const { return static_cast<double>(batch * prompt) / prefill_s; }
  double prefill_gflops() const { return prefill_flops / prefill_s / 1e9; }
  double decode_tokens_per_s() const { return static_cast<double>(batch) / decode_s; }
  double decode_gflops() const { return decode_flops / decode_s / 1e9; }
  double decode_gbytes_per_s() const { return decode_bytes / decode_s / 1e9; }
};

// What --generation measured, before printing.
struct GenerationReport {
  nn::ModelConfig model;                 // the decoder-only model measured
  bool arch_overridden = false;          // the config's model.arch was not decoder-only
  GenerationParams params;
  std::vector<std::int64_t> skipped;     // the P above model.max_len - G
  std::vector<GenerationRow> rows;       // every P of the first batch size, then of the next
};

// Builds the model and measures every row (no printing). Sets the threads as run_generation_bench.
GenerationReport measure_generation(const Config& cfg, const BenchOptions& opt);

}  // namespace sf::train
