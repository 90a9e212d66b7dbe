// `scratchformer bench`: how fast a training step and decoding are, next to what this machine's
// BLAS can do, on a fixed reference model and batch, so results compare over time and against
// PyTorch (tools/bench_pytorch.py builds the same model and batch and prints the same fields).
//
// The reference (configs/bench.toml, keep it fixed): D 256, 4 heads, F 1024, 3 + 3 layers, ReLU,
// post-LN, dropout 0.1, vocabulary 8000, shared source/target embeddings tied to the output
// projection, Adam, label smoothing 0.1; a batch of 64 sentence pairs of source and target
// length 24, random token ids, no padding (BenchOptions::batch and ::length).
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
//   sgemm          cblas_sgemm alone, on preallocated buffers, on the step's largest product
//                  (the output projection for the reference): the machine's attainable rate;
//                  model FLOPs utilisation (MFU) = achieved GFLOP/s / this
//   BLAS floor     every cblas_sgemm call one training step makes, with the same shapes and
//                  transpose flags, back to back on preallocated buffers: what the step would
//                  take if everything but the matrix products were free; step / floor says how
//                  much time goes elsewhere (elementwise ops, softmax, copies, allocation, Adam).
//                  One A, B and C buffer, sized for the largest call, serve every call, with
//                  tight leading dimensions, so the floor is a lower bound (the step's own
//                  operands are spread over more memory, and attention's are strided views).
//                  The list comes from the model's shapes (training_step_gemms), not from
//                  recording a step; tests/test_bench.cpp checks it against the calls a real
//                  step makes.
//   decoding       the first `decode_sentences` sentences of the config's test set (Multi30k
//                  test2016 for the reference; default 64, one batch, because beam search
//                  without the cache is slow: pass 1000 for all of test2016), in batches of 64
//                  sorted by length as translate_all does: sentences/s for greedy and beam 4,
//                  with and without the KV cache. With a checkpoint its model and tokenizer
//                  are used; otherwise a random model of the config's shape, with the run
//                  directory's tokenizer (trained there on first use). A random model rarely
//                  emits EOS, so its translations run to the length limit (1.5 S + 10): more
//                  work per sentence than a trained model's, so compare tokens/s too. The
//                  source ids are written to <run.dir>/bench-decode-sources.txt for
//                  tools/bench_pytorch.py.
//
// Threads: --threads, else run.threads, else as the program started (all cores). On a machine
// shared with other work a second thread can make a step several times slower (every OpenMP
// loop waits for a thread that is not running): try --threads 1 as well.
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
#include "autograd/tensor.h"
#include "nn/seq2seq.h"
#include "train/config.h"
#include "train/optim.h"

namespace sf::train {

struct BenchOptions {
  std::int64_t steps = 20;              // timed training steps; the median is reported (>= 1)
  std::int64_t warmup = 3;              // untimed steps first: allocator, BLAS threads, caches (>= 0)
  std::int64_t threads = 0;             // kernel and BLAS threads; 0 = run.threads (0 there: as started)
  std::int64_t decode_sentences = 64;   // test sentences decoded per setting; 0 = skip decoding
  std::string checkpoint;               // decode with this trained model; "" = a random one
  bool json_only = false;               // print only the JSON line
  std::int64_t batch = 64;              // sentence pairs per training step; the reference: 64
  std::int64_t length = 24;             // source and target length in tokens; the reference: 24
};

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
// B sentence pairs of S source and T target tokens through model m.
StepFlops training_step_flops(const nn::ModelConfig& m, std::int64_t batch, std::int64_t src_len, std::int64_t tgt_len);

// One kind of cblas_sgemm call (row-major): C (m,n) = op(A) (m,k) @ op(B) (k,n), where op(A) is
// A^T when trans_a (A stored (k,m)) and likewise for B. A step makes it `count` times.
struct GemmCall {
  std::int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  std::int64_t count = 1;
  std::string what;  // e.g. "decoder.1.cross_attn.k_proj grad weight"
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
                                static_cast<double>(count); }
};
// Every cblas_sgemm call one training step of model m makes on B pairs of S and T tokens, as
// sf::matmul issues them (ops_matmul.cpp): a Linear on (B,L,in) is one gemm of B*L rows
// forward and two backward; attention is one gemm per (batch, head) pair and product. Grouped
// by module, not in the order the step makes them.
std::vector<GemmCall> training_step_gemms(const nn::ModelConfig& m, std::int64_t batch, std::int64_t src_len,
                                          std::int64_t tgt_len);

// A batch of random token ids in [4, V) (no special ids, so no padding): src (B,S), tgt_in and
// tgt_out (B,T), int64.
struct RandomBatch {
  Tensor src, tgt_in, tgt_out;
};
RandomBatch random_batch(std::int64_t vocab, std::int64_t batch, std::int64_t src_len, std::int64_t tgt_len,
                         Generator& gen);

// One optimizer step as train() takes it (one batch, no accumulation): forward, label-smoothed
// cross-entropy ignoring padding, backward, clip_grad_norm, step(lr), zero_grad. Returns the loss.
double training_step(const nn::Seq2SeqTransformer& model, Optimizer& optimizer, const RandomBatch& batch,
                     const TrainSection& train, double lr);

}  // namespace sf::train
