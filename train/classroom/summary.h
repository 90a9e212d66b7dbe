// `scratchformer summary`: what a config's model costs, next to the lecture's formulas.
//
//   parameters  per module, from the real model, beside the estimate a student computes by hand:
//               attention block 4D² (+4D biases; GQA: 2D² + 2·D·Hkv·Dh), feed-forward 2·D·F
//               (+F+D), encoder layer 12D² at F = 4D, embeddings V·D
//   FLOPs       per token at a given length T, split into the projections, O(T·D²) per sequence,
//               and attention's scores and weighted sums, O(T²·D) per sequence
//   KV cache    decoder keys and values kept during generation:
//               2 × B × L × Hkv × Dh × layers × sizeof(float32)
// for each architecture (model.arch): the encoder-decoder's encoder and decoder layers and
// cross-attention; a decoder-only model's causal blocks (an encoder layer's shape) and tied LM
// head; an encoder-only model's layers and its masked-LM head or classifier (no KV cache).
// Arch rnn (the recurrent encoder-decoder) gets its own parameter formulas: per recurrent layer
// and direction G·H·(I + H + 2) (G gates: lstm 4, gru 3, rnn 1), the encoder's D/2 units per
// direction both ways, the decoder's D units, embeddings, bridge, attention, combine and output;
// FLOPs and the KV cache are attention layers' formulas, and one line says so.
#pragma once

#include <cstdint>
#include <string>

#include "nn/module.h"
#include "nn/transformer_layers.h"
#include "train/classroom/lang.h"
#include "train/config.h"

namespace sf::train {

// The whole report as text, its headings and captions in `lang` (the formulas, module and config
// names are the same in both).
std::string model_summary(const Config& config, std::int64_t vocab, std::int64_t length, std::int64_t batch,
                          Lang lang = Lang::En);

// The module tree with each module's parameter count (used by model_summary; handy in tests).
std::string module_tree(const nn::Module& root, const std::string& root_name, Lang lang = Lang::En);

struct FlopsPerToken {
  double projections = 0;  // linear layers: grows with D² (and D·F, D·V)
  double attention = 0;    // QKᵀ and weights·V: grows with T·D
};
// Forward FLOPs per target token for a source and target of `length` tokens (a multiply-add
// counts 2). Training costs about 3x this (forward + backward). A Transformer: arch rnn throws.
FlopsPerToken flops_per_token(const nn::ModelConfig& m, std::int64_t length);

}  // namespace sf::train
