// Demo `pooling`: one vector for a whole sentence, by mean pooling and by attention pooling.
//
// Sentences: real paraphrases from the shipped Tatoeba corpus (data/corpora/tatoeba-cmn-eng):
// two English sentences that translate the same Chinese sentence ("I can do it alone." /
// "I can do it by myself."), the first few such pairs in file order with five or more words each.
// Tokens: a word-level vocabulary of just these sentences (lower-cased; runs of letters, digits
// and apostrophes are words, every other visible character a token of its own; id 0 = <pad>).
// Encoder: the framework's encoder-only model (nn/encoder_only.h; D 64, 4 heads, 2 layers,
// sinusoidal positions, float64), RANDOM INIT, not trained: it shows the mechanics of pooling,
// not learned meaning; its cosine similarities mostly reflect the words two sentences share.
//
//   mean pooling       v = (1/T) sum_t h_t over the T non-padding tokens: weight 1/T each, 0 on pads
//                      (EncoderOnlyTransformer::pool with pooling = mean)
//   attention pooling  a query vector q (D) attends over the tokens: w = softmax_t(q . h_t / sqrt(D))
//                      with the pads masked (nn::attention_weights with nn::padding_mask),
//                      v = sum_t w_t h_t. q is drawn at random here; in a model it is learned.
//   (cls pooling, the model's other choice, puts all the weight on position 0.)
//
// Checked (mathematically guaranteed, so tested): mean pooling equals the average of the
// unpadded token vectors; attention weights sum to 1 over the unpadded tokens and are exactly 0 on
// the pads; both pooled vectors are unchanged by appending pads. Printed, not claimed: the
// cosine similarity of paraphrase pairs against unrelated pairs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sf::lessons {

struct PoolingSentence {
  std::string text;                  // as in the corpus
  std::vector<std::string> tokens;   // the word-level tokens
};

struct PoolingDemoResult {
  std::vector<PoolingSentence> sentences;  // pairs: [2i] and [2i+1] translate the same Chinese sentence
  std::int64_t vocab = 0;                  // tokens in the vocabulary, <pad> included
  std::int64_t padded_length = 0;          // S of the batch (the longest sentence + kExtraPads)
  // Sentence 0 in the batch: the weight of each position 0..S-1 (padding included).
  std::vector<double> mean_weights, attention_weights;
  // Checks over every sentence of the batch:
  double mean_vs_manual = 0;          // max |pool(h) - average of unpadded h_t|
  double attention_sum_error = 0;     // max |sum_t w_t - 1|
  double attention_on_pads = 0;       // max w_t over padding positions (exactly 0)
  double mean_padding_change = 0;     // max change of sentence 0's pooled vectors: alone vs padded
  double attention_padding_change = 0;
  struct Pair {
    std::int64_t a = 0, b = 0;        // sentence indices
    bool paraphrase = false;
    double mean_cosine = 0, attention_cosine = 0;
  };
  std::vector<Pair> pairs;            // the paraphrase pairs, then as many unrelated pairs
  bool claim_holds = false;           // the four checks above held
};

// Pads appended to the batch beyond its longest sentence (so every sentence has some).
inline constexpr std::int64_t kPoolingExtraPads = 2;
// float64 throughout: the same vectors averaged by two routes, or computed at two padded lengths
// (different matrix shapes, so different summation orders), agree to ~1e-15 relative; 1e-12
// leaves room and would still catch a pad that leaks in (its effect is of order 1/T).
inline constexpr double kPoolingTolerance = 1e-12;

// corpora: the folder holding tatoeba-cmn-eng/ ("" = the project's data/corpora). pairs: how many
// paraphrase pairs to take (e.g. 6). Throws std::runtime_error naming the file when it is missing.
PoolingDemoResult compute_pooling_demo(std::uint64_t seed, const std::string& corpora, std::int64_t pairs = 6);

}  // namespace sf::lessons
