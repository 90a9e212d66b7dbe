// Evaluation of translations: BLEU of the model's output (the teacher-forced loss of every task
// is train/task.h evaluate_task).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "nn/model.h"
#include "train/eval/bleu.h"
#include "train/eval/decode.h"
#include "data/tokenizer.h"

namespace sf::train {

using data::Tokenizers;

// Translates every source (token ids) and scores the detokenized output against the reference
// lines with corpus BLEU. Sentences are decoded in batches of similar length; `hypotheses`, if
// given, receives the translations in the original order.
BleuResult evaluate_bleu(nn::Model& model, const Tokenizers& tok,
                         const std::vector<std::vector<std::int64_t>>& src, const std::vector<std::string>& references,
                         const DecodeOptions& options, const std::string& bleu_tokenize,
                         std::vector<std::string>* hypotheses = nullptr);

// A decoder-only model's translation prompt: <s> source <sep> (the tokenizer's <sep>).
std::vector<std::int64_t> translation_prompt(const Tokenizers& tok, const std::vector<std::int64_t>& src);

// Sentences per decoding batch in translate_all (and bench's decoding).
constexpr std::int64_t kSentencesPerBatch = 64;

// The batches translate_all decodes: rows sorted by length (stably), cut into runs of at most
// per_batch rows (and of one length each with same_length: a decoder-only model's prompts have no
// padding mask), each run padded into a (B,S) int64 tensor.
struct SortedBatches {
  std::vector<std::size_t> order;                          // row indices, shortest first
  std::vector<std::pair<std::size_t, std::size_t>> spans;  // batch b holds order[spans[b].first .. second)
  std::vector<Tensor> batches;                             // (B,S) each
};
SortedBatches sort_into_batches(const std::vector<std::vector<std::int64_t>>& rows, std::int64_t per_batch,
                                bool same_length);

// Translates token-id sources, returning detokenized text in the original order: the
// encoder-decoder reads each source, a decoder-only model continues translation_prompt().
// Batches of similar length decode side by side, one per thread (translate_batches).
std::vector<std::string> translate_all(const nn::Model& model, const Tokenizers& tok,
                                       const std::vector<std::vector<std::int64_t>>& src, const DecodeOptions& options,
                                       std::int64_t sentences_per_batch = kSentencesPerBatch);

// BLEU by source length: the test sentences cut into buckets by their source length in tokens
// (`edges` the first length of each bucket after the first, ascending: {11, 16, 21, 31} gives
// 1-10, 11-15, 16-20, 21-30, 31+), each bucket scored as a corpus of its own. How a model copes
// with long sentences: the fixed-vector bottleneck of a recurrent model without attention falls
// fastest as they grow (`eval --by-length`).
struct LengthBucket {
  std::int64_t first = 0, last = 0;  // source lengths in the bucket (last = -1: no upper end)
  std::int64_t sentences = 0;
  double bleu = 0, chrf = 0;         // 0 for an empty bucket
};
std::vector<LengthBucket> bleu_by_source_length(const std::vector<std::string>& hypotheses,
                                                const std::vector<std::string>& references,
                                                const std::vector<std::int64_t>& source_lengths,
                                                const std::vector<std::int64_t>& edges, const std::string& bleu_tokenize);

}  // namespace sf::train
