// Generation with a decoder-only model (`scratchformer generate`), in the lecture's two phases:
//
//   prefill  the prompt <s> x_1 .. x_P-1 is read at once: start_decoding fills every layer's KV
//            cache with P - 1 positions, then the first decode_step reads the prompt's last token
//            and gives the logits of the first new token. P queries at a time: matrix-matrix
//            products, compute-bound.
//   decode   each further step reads ONE token, the one just chosen, and attends to the whole
//            cache (which grows by one position per layer): matrix-vector products that read
//            every weight and the cache for one token's worth of work, memory-bound.
//
// The next token is the most likely one (temperature 0) or drawn (train/eval/sampling.h).
// Both phases multiply by the same weights at every step, so Linear runs on copies of them packed
// once (autograd/runtime/packed_linear.h), as translation's decoding does (decode.cpp); they are
// packed before the clock starts (pack_matrix_weights), so the phases' times hold no packing.
// Letters: P prompt length (with <s>), L layers, Hkv key/value heads, Dh head width, T positions.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/generator.h"
#include "autograd/runtime/packed_linear.h"
#include "data/tokenizer.h"
#include "nn/model.h"
#include "train/eval/sampling.h"

namespace sf::train {

struct GenerateOptions {
  std::int64_t max_new = 50;  // tokens generated at most (EOS stops earlier)
  SamplingOptions sampling;   // temperature 0: greedy
  std::vector<bool> allowed;  // allowed[v]: token v may be generated (V entries); empty: all but pad and <s>
};

struct Generation {
  std::vector<std::int64_t> tokens;  // the new tokens, without the prompt and without EOS
  bool stopped_at_eos = false;
  std::int64_t prompt_tokens = 0;    // P, <s> included
  double prefill_seconds = 0;        // start_decoding + the first decode_step (gives the first token)
  std::int64_t decode_steps = 0;     // the steps after it (one token each)
  double decode_seconds = 0;
  std::int64_t cache_positions = 0;  // T, positions in the KV cache at the end
  std::int64_t cache_bytes = 0;      // its keys and values as allocated (DecodeState::cache_bytes)
};

// prompt: ids starting with <s>, 1 <= P < max_len. Throws std::invalid_argument (one line) for a
// model that is not decoder-only, an empty prompt or one that leaves no position to generate in.
// max_new is cut to the positions left (max_len - P). Linear runs on the packed weights of the
// enclosing PackedWeightsScope when there is one (`generate --input` packs once for all its
// prompts), else on its own, packed at the start.
Generation generate(const nn::Model& model, const std::vector<std::int64_t>& prompt, const GenerateOptions& opt,
                    Generator& gen);

// Packs every float32 matrix parameter of `model` (Linear weights, the embedding table that is
// also the tied LM head) into `packed`, in the current matmul precision, so that the first
// Linear on them under a PackedWeightsScope(packed) finds them ready. Returns how many it holds.
std::size_t pack_matrix_weights(const nn::Model& model, PackedWeights& packed);

// The tokens a continuation may hold (GenerateOptions::allowed): the tokenizer's ordinary pieces
// and </s>, never padding, <s> or task symbols (<sep>, <mask>, ...).
std::vector<bool> generatable_tokens(const data::Tokenizer& tok);

// The lecture's KV-cache size: keys and values, 2 * L * B * Hkv * T * Dh * bytes per element. With
// a sliding window (model.attention_window = W) the cache is a ring of W: T becomes min(T, W).
std::int64_t kv_cache_formula_bytes(const nn::ModelConfig& cfg, std::int64_t positions, std::int64_t batch = 1,
                                    std::int64_t element_bytes = 4);

}  // namespace sf::train
