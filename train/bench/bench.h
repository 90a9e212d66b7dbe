// `scratchformer bench`: how fast a training step and decoding are, next to what this machine's
// BLAS can do, on a fixed reference model and batch, so results compare over time and against
// PyTorch (tools/bench_pytorch.py builds the same model and batch and prints the same fields).
//
// The reference (configs/bench.toml, keep it fixed): D 256, 4 heads, F 1024, 3 + 3 layers, ReLU,
// post-LN, dropout 0.1, vocabulary 8000, shared source/target embeddings tied to the output
// projection, Adam, label smoothing 0.1; a batch of 64 sentence pairs of source and target
// length 24, random token ids, no padding (BenchOptions::batch and ::length).
//
// Any Transformer (model.arch) benches its own training step: a decoder-only model's causal
// blocks over one sequence of `length`, an encoder-only model's layers and masked-LM head over a
// source of `length` (a classify config is benched with that head); the decoding rows are the
// encoder-decoder's (a decoder-only model's generation: --generation; an encoder-only model does
// not generate). An rnn config is benched by run_rnn_bench instead (rnn_bench.h): the FLOP count and the BLAS floor are
// written for attention layers.
//
// run_bench measures, in this order, in one process:
//   training step  exactly the trainer's step (forward, label-smoothed cross-entropy, backward,
//                  gradient clipping, optimizer step, zero_grad) on one fixed random batch:
//                  `warmup` untimed steps, then `steps` timed ones; the median is reported
//   peak RSS       getrusage(RUSAGE_SELF).ru_maxrss right after the steps. They are the first
//                  thing run_bench does, so run as `scratchformer bench` (a fresh process) it is
//                  the peak of a process holding the model, the optimizer state, the batch and
//                  one step's graph (plus the program and its libraries). Inside a longer-lived
//                  program (the tests) it is that program's peak so far. No fork: a child of a
//                  process that has used OpenMP hangs in its first parallel region (libgomp).
//   sgemm          sf::gemm (autograd/runtime/gemm.h: single-threaded OpenBLAS sgemm per thread on
//                  blocks of C) alone, on preallocated buffers, on the step's largest product
//                  (the output projection for the reference): the machine's attainable rate;
//                  model FLOPs utilisation (MFU) = achieved GFLOP/s / this
//   BLAS floor     every matrix product one training step makes, with the same shapes and
//                  transpose flags and the same routines (sf::gemm, or small_gemm over the
//                  threads for attention's per-head slices), back to back on preallocated
//                  buffers: what the step would
//                  take if everything but the matrix products were free; step / floor says how
//                  much time goes elsewhere (elementwise ops, softmax, copies, allocation, Adam).
//                  One A, B and C buffer, sized for the largest call, serve every call, with
//                  tight leading dimensions, so the floor is a lower bound (the step's own
//                  operands are spread over more memory, and attention's are strided views).
//                  The list comes from the model's shapes (training_step_gemms), not from
//                  recording a step; tests/test_bench.cpp checks it against the calls a real
//                  step makes.
//   bf16           where the CPU has bf16 units (autograd/runtime/cpu_features.h): the same
//                  training step, gemm on the largest product and floor again under
//                  train.precision = "bf16" (autograd/runtime/bf16.h: inputs rounded to bf16,
//                  sums in float32, oneDNN on AMX or AVX512-BF16). Elsewhere one line says which
//                  instruction sets are missing and the bf16 fields of the JSON line are null.
//   decoding       the first `decode_sentences` sentences of the config's test set (Multi30k
//                  test2016 for the reference; default 64, one batch, because beam search
//                  without the cache is slow: pass 1000 for all of test2016), in batches of
//                  --decode-batch sentences (default translate's) sorted by length, as many
//                  side by side as threads, as translate_all does: sentences/s for greedy and beam 4,
//                  with and without the KV cache. With a checkpoint its model and tokenizer
//                  are used; otherwise a random model of the config's shape, with the run
//                  directory's tokenizer (trained there on first use). A random model rarely
//                  emits EOS, so its translations run to the length limit (1.5 S + 10): more
//                  work per sentence than a trained model's, so compare tokens/s too. The
//                  source ids are written to <run.dir>/bench-decode-sources.txt for
//                  tools/bench_pytorch.py. The KV-cache rows split their time into the
//                  prefill (start_decoding: the encoder over the batch and every decoder layer's
//                  cross-attention keys and values) and the decode (the steps, one token each),
//                  and are run again in bf16 where the CPU has the units.
//
// `scratchformer bench --scaling` (run_scaling_bench) measures instead how a training step grows
// with the sequence length: the same model at source = target length T in {16, 32, 64, 128,
// 256}, at a fixed token budget (batch = 64 * 24 / T pairs, so every row trains on 1536 target
// tokens), once with plain and once with tiled attention (model.attention). Per row it prints
//   step time      median of `steps` steps after `warmup` (defaults 3 and 1 under --scaling)
//   FLOPs          per step (forward + backward, training_step_flops): attention's q k^T and
//                  weights v, 4 B T^2 D per attention block, which grow as budget * T D, against
//                  the layers' projections and feed-forward blocks, (8 + 4 F/D) B T D^2 per
//                  layer, which stay at budget * D^2 (the output projection is counted apart).
//                  For 3 + 3 layers with F = 4 D that is 36 B T^2 D against 168 B T D^2: the
//                  ratio column grows linearly in T and reaches 1 at T = 168/36 D, about 4.7 D
//                  (T = 1195 for D = 256), so in FLOPs attention stays the smaller part of the
//                  table. Memory crosses much earlier: one layer's (B,H,T,T) weights outgrow its
//                  (B,T,D) activations once T > D / H (64 for the reference), and time, with
//                  the T^2 softmax, masking and per-pair products, somewhere between.
//   peak memory    the tensor-storage counters (autograd/runtime/memory_stats.h), peak reset before each
//                  row, minus what was alive then: model, Adam state, batch and one step's
//                  graph. Plain keeps every layer's (B,H,T,T) attention weights for backward,
//                  tiled keeps O(B H T) numbers, so their difference is attention's T^2 memory.
// Tiled does one more q k^T per tile in backward (it recomputes the scores), so at equal FLOPs
// counted here it can be slower at small T; it wins on memory, and on time once the (T,T)
// tensors no longer fit in cache. The model's max_len is raised to the largest T if needed
// (sinusoidal/learned tables), and the rows use random ids without padding, as above.
//
// `scratchformer bench --generation` (run_generation_bench, train/bench/generation_bench.h) measures
// generation's two phases instead, on a decoder-only model: the prefill (start_decoding on a
// prompt of P = 16..256 tokens) against the decode steps that follow it, time, FLOPs, bytes read,
// arithmetic intensity and the KV cache's size, at batch 1 and 8.
//
// Threads: --threads, else run.threads, else as the program started (all usable cores:
// usable_cores, threads.h). On a machine shared with other work a second thread can make a step
// several times slower (every OpenMP loop waits for a thread that is not running): try
// --threads 1 as well.
//
// FLOPs count the matrix products only (a multiply-add is 2); elementwise work, softmax, layer
// norm and the optimizer are left out, as usual for MFU. Every product of the step computes both
// of its input gradients in backward (2 products of the same size), so a step costs 3x the
// forward. The causal mask does not shrink the products (the full T x T scores are computed).
//
// Letters: B batch (sentence pairs), S source length, T target length, D d_model, H heads,
// Hkv key/value heads, Dh head width, F feed-forward width, V vocabulary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/runtime/small_gemm.h"
#include "autograd/tensor.h"
#include "nn/seq2seq.h"
#include "train/config.h"
#include "train/optim/optim.h"

namespace sf::train {

struct BenchOptions {
  std::int64_t steps = 20;              // timed training steps; the median is reported (>= 1)
  std::int64_t warmup = 3;              // untimed steps first: allocator, BLAS threads, caches (>= 0)
  std::int64_t threads = 0;             // kernel and BLAS threads; 0 = run.threads (0 there: as started)
  std::int64_t decode_sentences = 64;   // test sentences decoded per setting; 0 = skip decoding
  std::int64_t decode_batch = 0;        // sentences per decoding batch; 0 = translate's (kSentencesPerBatch)
  std::string checkpoint;               // decode with this trained model; "" = a random one
  bool json_only = false;               // print only the JSON line
  std::int64_t batch = 64;              // sentence pairs per training step; the reference: 64
  std::int64_t length = 24;             // source and target length in tokens; the reference: 24
  bool scaling = false;                 // --scaling: run_scaling_bench instead of run_bench
  // --scaling: the token budget of each row is batch * length (1536 for the reference)
  std::vector<std::int64_t> scaling_lengths{16, 32, 64, 128, 256};  // T of the rows, ascending
  std::vector<std::int64_t> rnn_lengths{8, 16, 32, 64, 128};       // an rnn config: T of the length table (rnn_bench.h)
  bool generation = false;              // --generation: run_generation_bench (generation_bench.h) instead
  std::vector<std::int64_t> prompt_lengths{16, 32, 64, 128, 256};  // --generation: prompt length P of the rows
  std::vector<std::int64_t> generation_batches{1, 8};             // --generation: one table per batch size B
  std::int64_t generation_tokens = 32;  // --generation: decode steps G after each prefill (>= 1)
};

// --scaling without --steps / --warmup: a few steps per row keep the ten rows under a few minutes.
constexpr std::int64_t kScalingSteps = 3;
constexpr std::int64_t kScalingWarmup = 1;

// Runs the benchmark and prints the table (unless json_only) and one JSON line to stdout.
// Returns 0, or throws (a bad option, a missing test file, ...).
int run_bench(const Config& cfg, const BenchOptions& opt);

// ---- the pieces, public for the tests and for reading --------------------------------------

// Forward FLOPs of one training batch, by kind; a training step costs total().
struct StepFlops {
  double projections = 0;  // every Linear in the layers: q, k, v, out, feed-forward
  double attention = 0;    // q k^T and weights v, for every (batch, head) pair
  double output = 0;       // the output projection to the vocabulary
  double forward() const { return projections + attention + output; }
  double backward() const { return 2 * forward(); }  // grad of each operand: two products per product
  double total() const { return forward() + backward(); }
};
// B sentence pairs of S source and T target tokens through model m (a Transformer: arch rnn throws).
StepFlops training_step_flops(const nn::ModelConfig& m, std::int64_t batch, std::int64_t src_len, std::int64_t tgt_len);

// One kind of cblas_sgemm call (row-major): C (m,n) = op(A) (m,k) @ op(B) (k,n), where op(A) is
// A^T when trans_a (A stored (k,m)) and likewise for B. A step makes it `count` times.
struct GemmCall {
  std::int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  std::int64_t count = 1;
  std::string what;  // e.g. "decoder.1.cross_attn.k_proj grad weight"
  bool accumulate = false;  // adds onto C (beta = 1): a Linear's forward, C starting as the bias
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
                                static_cast<double>(count); }
  // The slices of a batched product small enough for small_gemm (autograd/runtime/small_gemm.h) rather
  // than BLAS: the same rule as ops_matmul.cpp.
  bool uses_small_gemm() const { return count > 1 && m * n * k <= kSmallGemmMaxMacs; }
};
// Every cblas_sgemm call one training step of model m makes on B pairs of S and T tokens, as
// sf::matmul issues them (ops_matmul.cpp): a Linear on (B,L,in) is one gemm of B*L rows
// forward and two backward; attention is one gemm per (batch, head) pair and product. Grouped
// by module, not in the order the step makes them. A Transformer: arch rnn throws.
std::vector<GemmCall> training_step_gemms(const nn::ModelConfig& m, std::int64_t batch, std::int64_t src_len,
                                          std::int64_t tgt_len);

// A batch of random token ids in [4, V) (no special ids, so no padding): src (B,S), tgt_in and
// tgt_out (B,T), int64.
struct RandomBatch {
  Tensor src, tgt_in, tgt_out;
};
RandomBatch random_batch(std::int64_t vocab, std::int64_t batch, std::int64_t src_len, std::int64_t tgt_len,
                         Generator& gen);
// random_batch shaped for the model's architecture: a decoder-only model reads one sequence
// (tgt_in of `length`, no src); an encoder-only model's masked-LM head scores every position of
// src (no tgt_in; tgt_out (B,length)); the encoder-decoder gets both of `length`.
RandomBatch random_batch_for(const nn::ModelConfig& m, std::int64_t batch, std::int64_t length, Generator& gen);

// One optimizer step as train() takes it (one batch, no accumulation): forward, label-smoothed
// cross-entropy ignoring padding, backward, clip_grad_norm, step(lr), zero_grad. Returns the loss.
double training_step(const nn::Model& model, Optimizer& optimizer, const RandomBatch& batch,
                     const TrainSection& train, double lr);

// ---- the scaling table (--scaling) ----------------------------------------------------------

// One row of the scaling table: the model at source = target length T with one attention kernel.
struct ScalingRow {
  std::int64_t length = 0;        // T (source and target)
  std::int64_t batch = 0;         // pairs: the token budget / T
  std::string attention;          // "plain" | "tiled"
  double step_s = 0;              // median training step, seconds
  StepFlops flops;                // of one batch (forward; a step is flops.total())
  std::int64_t peak_bytes = 0;    // tensor storage the row needed at its peak (see the top)
};

// Runs --scaling: prints the table (unless json_only) and one JSON line {"tool", ..., "rows": [..]}.
// Returns 0, or throws on a bad option.
int run_scaling_bench(const Config& cfg, const BenchOptions& opt);

// The rows of the scaling table, two per length (plain, then tiled), without printing.
std::vector<ScalingRow> scaling_rows(const Config& cfg, const BenchOptions& opt);

}  // namespace sf::train
