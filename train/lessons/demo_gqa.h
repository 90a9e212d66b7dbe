// Demo `gqa`: multi-head (MHA), grouped-query (GQA) and multi-query (MQA) attention at the same
// width. Queries keep all H heads; only the key/value heads shrink (Hkv = H, H/4, 1), so
//
//   k_proj, v_proj parameters   2 (D Hkv Dh + Hkv Dh)            (weights and biases)
//   KV-cache bytes per token    2 * layers * Hkv * Dh * bytes per element   (k and v)
//
// both fall by H / Hkv, while q_proj and out_proj stay as they are. The demo builds three real
// decoder-only models (nn/decoder_only.h; D 256, H 8, Dh 32, 2 layers, RoPE, float32, random
// init: the numbers here do not depend on training), counts each self-attention layer's
// parameters from the module itself and by the formula, decodes T tokens with the KV cache
// (greedy, B rows) and compares the formula with DecodeState::cache_bytes(). It also times the
// decoding (tokens per second, median of a few repetitions, on this machine): printed, never
// asserted, since a timing depends on the machine and on what else runs on it.
#pragma once

#include <cstdint>
#include <vector>

namespace sf::lessons {

// How big the demo is (the test runs a smaller one).
struct GqaDemoSettings {
  std::int64_t d_model = 256;  // D
  std::int64_t n_heads = 8;    // H (query heads)
  std::int64_t layers = 2;     // decoder layers
  std::int64_t tokens = 64;    // T: tokens decoded per row (the cache then holds T positions)
  std::int64_t batch = 4;      // B rows decoded at once
  int repeats = 3;             // timed decodings per model (the median is reported); 0 = no timing
  std::vector<std::int64_t> kv_heads = {8, 2, 1};  // Hkv of each variant: MHA, GQA, MQA
};

struct GqaVariant {
  std::int64_t kv_heads = 0;              // Hkv
  const char* name = "";                  // "MHA", "GQA", "MQA"
  std::int64_t attn_params = 0;           // one self-attention layer, from parameter_count()
  std::int64_t attn_params_formula = 0;   // the same by the formula
  std::int64_t kv_proj_params = 0;        // k_proj + v_proj, from the modules
  std::int64_t kv_proj_params_formula = 0;
  std::int64_t bytes_per_token_formula = 0;  // 2 * layers * Hkv * Dh * 4 (float32)
  std::int64_t cached_positions = 0;      // DecodeState::length() after decoding
  std::int64_t cache_bytes = 0;           // DecodeState::cache_bytes() then (B rows)
  double tokens_per_second = 0;           // B * T / median decode time (0 when not timed)
};

struct GqaDemoResult {
  GqaDemoSettings settings;
  std::int64_t head_dim = 0;              // Dh = D / H
  std::vector<GqaVariant> variants;       // in the order of settings.kv_heads
  bool claim_holds = false;  // formula == module for the parameters and formula == allocated for the
                             // bytes of every variant; bytes and k/v parameters in the ratio of Hkv
};

GqaDemoResult compute_gqa_demo(std::uint64_t seed, const GqaDemoSettings& settings = {});

}  // namespace sf::lessons
