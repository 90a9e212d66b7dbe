// Choosing the next token from the model's scores (`scratchformer generate`).
//
//   greedy        temperature 0 (or top_k 1): the most likely token
//   temperature   softmax(logits / T): T < 1 sharpens the distribution, T > 1 flattens it
//   top-k         keep the k most likely tokens, renormalise, draw
//   top-p         nucleus sampling (Holtzman et al., 2020): keep the smallest set of most likely
//                 tokens whose probability reaches p, renormalise, draw
//
// Letters: V vocabulary.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/generator.h"

namespace sf::train {

struct SamplingOptions {
  double temperature = 1.0;  // 0 = greedy; > 0 otherwise
  std::int64_t top_k = 0;    // 0 = no limit; >= 1 keeps that many
  double top_p = 1.0;        // in (0, 1]; 1 = no limit
};

// Throws std::invalid_argument with one line for temperature < 0, top_k < 0 or top_p outside (0, 1].
void check_sampling_options(const SamplingOptions& opt);

// The token ids that may be drawn, most likely first, with their renormalised probabilities:
// logits (V) -> the top-k of softmax(logits / temperature), cut to the smallest prefix whose mass
// reaches top_p. `allowed[v]` false excludes token v (padding, BOS) before anything else.
struct Candidates {
  std::vector<std::int64_t> ids;
  std::vector<double> probs;  // sum to 1
};
Candidates sampling_candidates(const std::vector<float>& logits, const std::vector<bool>& allowed, const SamplingOptions& opt);

// One draw from sampling_candidates (greedy when temperature is 0: no draw, no generator use).
std::int64_t sample_token(const std::vector<float>& logits, const std::vector<bool>& allowed, const SamplingOptions& opt,
                          Generator& gen);

}  // namespace sf::train
