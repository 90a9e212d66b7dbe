// Decoding: turning a source sentence into a target sentence with a trained model.
//
//   greedy  at each step take the most likely next token (batched, KV-cached)
//   beam    keep the `beam` best partial translations by total log-probability, expanding each by
//           every token; a finished hypothesis (it produced EOS) is scored with a length
//           penalty, score / length^alpha, so long translations are not unfairly punished
//
// Both stop a sentence at EOS or at its maximum length, max_len_a * source_length + max_len_b
// (capped by the model's max_len), and return token ids without BOS/EOS.
// Letters: B sentences, S source length, K beam size, V vocabulary.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/tensor.h"
#include "nn/model.h"

namespace sf::train {

struct DecodeOptions {
  std::int64_t beam = 1;          // 1 = greedy
  double length_penalty = 1.0;    // alpha in score / length^alpha (beam search only)
  double max_len_a = 1.5;         // max target length = a * source length + b
  std::int64_t max_len_b = 10;
  bool use_cache = true;          // false recomputes the whole prefix each step (slow; for teaching and tests)
  double* prefill_seconds = nullptr;  // if set, the prefill's time (start_decoding: the encoder reads the
                                      // source) is added here; the steps after it are the decode (bench)
};

// The maximum number of generated tokens (EOS included) for a source of `src_len` tokens.
std::int64_t max_target_length(const nn::Model& model, std::int64_t src_len, const DecodeOptions& opt);

// src: (B,S) int64 padded with the model's pad id. Returns B token sequences.
std::vector<std::vector<std::int64_t>> greedy_decode(const nn::Model& model, const Tensor& src,
                                                     const DecodeOptions& opt);

// Beam search over every sentence of the batch at once (B*K rows share one KV cache): each
// sentence's best finished hypothesis (beam_search_hypotheses' first).
std::vector<std::vector<std::int64_t>> beam_search(const nn::Model& model, const Tensor& src,
                                                   const DecodeOptions& opt);

// One finished hypothesis of beam search.
struct BeamHypothesis {
  std::vector<std::int64_t> tokens;  // without BOS and EOS
  double log_prob = 0;               // total log-probability, EOS included when it ended in EOS
  std::int64_t length = 0;           // tokens scored (EOS included): the length of length^alpha
  double score = 0;                  // log_prob / length^alpha: what the beams are ranked by
};

// Every hypothesis beam search finished for each sentence (up to K, sometimes a few more at the
// length limit), best score first, equal scores in the order they finished. The explorer shows
// them as the beam's candidates.
std::vector<std::vector<BeamHypothesis>> beam_search_hypotheses(const nn::Model& model, const Tensor& src,
                                                                const DecodeOptions& opt);

// greedy_decode or beam_search according to opt.beam.
std::vector<std::vector<std::int64_t>> translate_batch(const nn::Model& model, const Tensor& src,
                                                       const DecodeOptions& opt);

// translate_batch over independent batches (each a padded (B,S) source), several at once:
// with n threads, n batches decode side by side, each on its own thread, and the kernels inside
// a batch run on that thread (sf::gemm and the parallel loops see they are inside a parallel
// region). One batch alone decodes as translate_batch does, on all threads. A step of one
// batch is a few small products and many small ops; one thread per batch saves waking the
// other thread for each of them. Each batch's output is the same bits whichever thread decodes
// it (tested), so the translations do not depend on the thread count.
// Returns each batch's output, in order. batch_seconds, if given, receives each batch's own
// wall time on its thread; opt.prefill_seconds, if set, receives the sum of the batches' prefills.
std::vector<std::vector<std::vector<std::int64_t>>> translate_batches(const nn::Model& model,
                                                                      const std::vector<Tensor>& batches,
                                                                      const DecodeOptions& opt,
                                                                      std::vector<double>* batch_seconds = nullptr);

// Pads token sequences into a (B, max length) int64 tensor (what translate_batch takes).
Tensor pad_batch(const std::vector<std::vector<std::int64_t>>& seqs, std::int64_t pad_id);

}  // namespace sf::train
