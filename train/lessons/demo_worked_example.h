// Demo `worked-example`: the lecture notes' hand computations, done by the framework and printed
// one matrix at a time, small enough to check with a pencil.
//
// 1. Self-attention of one short sentence (default 我 喜欢 学 注意力 机制, the notes' example;
//    --text takes any, words split at spaces, or at every character when there is no space),
//    width d = 4, one head, every number seeded:
//      X (T,d)   the tokens' embeddings (each word's row drawn from a seed made of the word, so
//                the same word always has the same row)
//      Q = X W_Q, K = X W_K, V = X W_V          (T,d) each
//      S = Q K^T                                 (T,T): how well word i's query matches word j's key
//      S / sqrt(d_k)                             (T,T): d_k = 4, so divided by 2
//      A = softmax of each row                   (T,T): each row sums to 1
//      O = A V                                   (T,d): each word's new vector, a weighted average
// 2. A causal mask's softmax on the notes' 5x5 score matrix (on and below the diagonal:
//    0.4 | 0.1 -0.3 | 0.5 0.7 3 | -1.2 1.5 0.4 0.5 | 3.2 1 -1 -0.5 -2): the entries above the
//    diagonal become -inf, so each row's softmax runs over its own position and the earlier ones.
// Every step is an autograd op (matmul, masked_fill, softmax) on the tensors printed before it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace sf::lessons {

struct WorkedExample {
  std::vector<std::string> tokens;      // the sentence's words (or characters)
  Tensor x, w_q, w_k, w_v;              // (T,d), (d,d) x 3
  Tensor q, k, v, scores, scaled, weights, out;
  Tensor notes_scores;                  // the notes' (5,5) scores, 0 above the diagonal
  Tensor notes_weights;                 // their causal softmax
};

// The sentence split into words at spaces, or into characters (UTF-8 code points) when it has
// none. Throws std::invalid_argument for an empty sentence or one of more than 12 tokens.
std::vector<std::string> worked_example_tokens(const std::string& text);

WorkedExample compute_worked_example(std::uint64_t seed, const std::string& text = "我 喜欢 学 注意力 机制");

}  // namespace sf::lessons
