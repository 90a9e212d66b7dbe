// Attention beside attribution: for an encoder-decoder Transformer and one teacher-forced
// sentence pair, how much each source token is credited with each target token, by five methods.
// Attention weights say where a head reads from, not how much the output depends on what it read
// (the values, the other heads, the residual path and the later layers stand in between); the
// other four methods measure that dependence in different ways. All of them use the framework's
// own forward and autograd.
//
// For target position t the output is f_t = log p(y_t | y_<t, x), the log-probability of the
// reference token y_t (teacher forcing). x_s is source token s's scaled embedding E[x_s] sqrt(D),
// the part of the encoder's input that belongs to the token (the positions are added after it).
//
//   attention         each decoder layer's cross-attention weights, per head (T, S)
//   rollout           Abnar & Zuidema (2020): the encoder's self-attention, head-mean, with the
//                     residual as 0.5 A + 0.5 I, multiplied through the layers (R = A_L ... A_1,
//                     S x S), then seen from the decoder through its last layer's head-mean
//                     cross-attention: rollout = C R (T x S). Rows sum to 1.
//   gradient x input  sum_d (df_t / dx_s,d) x_s,d: the first-order change of f_t if token s's
//                     embedding were removed (Shrikumar et al. 2017, Ding & Koehn 2021).
//   integrated        Sundararajan et al. (2017): sum_d x_s,d * mean over a in (0, 1] of
//                     df_t/dx_s,d at a x (baseline 0: no token embeddings, positions kept), by
//                     the midpoint rule with `steps` points. Completeness: the row sums to
//                     f_t(x) - f_t(0) up to the quadrature error.
//   head ablation     f_t(with every head) - f_t(with decoder layer l's cross-attention head h
//                     zeroed): how much the target token's log-probability drops without it.
//
// Letters: S source tokens, T target tokens, D d_model, L decoder layers, H heads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "nn/seq2seq.h"
#include "train/setup.h"

namespace sf::train {

using Matrix = std::vector<std::vector<double>>;  // rows of a (T, S) or (S, S) table

struct Attribution {
  std::vector<std::vector<Matrix>> attention;  // [layer][head] (T, S) cross-attention weights
  Matrix attention_mean;                       // the last layer's, averaged over its heads
  Matrix rollout;                              // (T, S)
  Matrix gradient_input;                       // (T, S)
  Matrix integrated;                           // (T, S)
  std::vector<double> integrated_gap;          // (T) f_t(x) - f_t(baseline): each IG row's sum
  std::vector<std::vector<std::vector<double>>> ablation;  // [layer][head] (T) drop of f_t
  std::vector<double> log_prob;                // (T) f_t with every head
};

// src (1,S) and tgt_in, tgt_out (1,T) int64. The model is put in eval mode (no dropout); its
// weights are changed only for the moment of each ablation and restored. `steps` >= 1 points of
// the integral. Throws std::invalid_argument for a batch other than one row or mismatched lengths.
Attribution attribute(nn::Seq2SeqTransformer& model, const Tensor& src, const Tensor& tgt_in, const Tensor& tgt_out,
                      std::int64_t steps = 16);

// One sentence of a trained encoder-decoder, as `scratchformer attention --attribution` and the
// explorer show it: the source encoded, the target given (teacher forcing) or the greedy
// translation, then attribute() over the pair. source_field / target_field name the inputs in
// errors (the CLI's options or the explorer's fields). Throws std::invalid_argument for a model
// that is not an encoder-decoder Transformer, an empty sentence or one longer than the model's
// positions.
struct SentenceAttribution {
  std::vector<std::string> source, target;  // pieces; the target ends with "</s>"
  std::string translation;                  // the target as text
  bool teacher_forced = false;
  Attribution a;
};
SentenceAttribution attribute_sentence(const InferenceModel& im, const std::string& source,
                                       const std::optional<std::string>& target, const char* source_field = "--src",
                                       const char* target_field = "--tgt", std::int64_t steps = 16);

// The index of the largest entry of each row: the source token each target token credits most.
std::vector<std::int64_t> row_argmax(const Matrix& m);

}  // namespace sf::train
