// Attention: masks, scaled dot-product attention, and the multi-head attention module with
// grouped key/value heads, RoPE or ALiBi positions, and a key/value cache for decoding.
//
// Letters: B batch, S source length, T target length, Tq query length, Tk key length,
// D d_model, H query heads, Hkv key/value heads, G = H / Hkv query heads per k/v head,
// Dh head width (D / H).
//
// Masks everywhere are bool tensors where TRUE = BLOCKED (the key is masked out), broadcastable
// to the scores' shape (B,H,Tq,Tk): a causal mask is (Tq,Tk), a padding mask (B,1,1,S).
//
// The attention of Vaswani et al. (2017), one head:
//   scores  = q k^T / sqrt(Dh) + bias          (Tq, Tk): how well query i matches key j
//   weights = softmax over j of scores, with blocked entries set to -inf first (weight 0)
//   out     = weights v                        (Tq, Dh): a weighted average of the values
// Dividing by sqrt(Dh) keeps the scores' variance near 1 for unit-variance q and k, so the
// softmax does not saturate as Dh grows.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "autograd/generator.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/relative_positions.h"

namespace sf::nn {

// -> bool (Tq, Tk), TRUE = BLOCKED where key position j > query position q_start + i (a query
// may look at itself and the past, never the future). q_start: position of the first query
// (non-zero when decoding with a cache: the keys then span positions 0..Tk-1).
Tensor causal_mask(std::int64_t t_q, std::int64_t t_k, std::int64_t q_start = 0);

// -> bool (Tq, Tk), TRUE = BLOCKED where |q_pos - k_pos| >= window: the sliding window, with
// query i at q_pos = q_start + i and key j at k_pos = k_start + j. Alone it is a band of 2W - 1
// keys around each query; together with causal_mask the W keys q_pos-W+1 .. q_pos. window >= 1.
Tensor window_mask(std::int64_t t_q, std::int64_t t_k, std::int64_t window, std::int64_t q_start = 0,
                   std::int64_t k_start = 0);

// ids: (B,S) int64 -> bool (B,1,1,S), TRUE = BLOCKED where ids == pad_id: no query attends to a
// padding key. Broadcasts over heads and queries.
Tensor padding_mask(const Tensor& ids, std::int64_t pad_id);

// x: (B,T,n*Dh) -> (B,n,T,Dh), a view: the projection cut into n heads of width head_dim.
Tensor split_heads(const Tensor& x, std::int64_t n, std::int64_t head_dim);

// x: (B,H,T,Dh) -> (B,T,H*Dh): the heads side by side again (the inverse of split_heads).
Tensor merge_heads(const Tensor& x);

// q: (B,H,Tq,Dh), k: (B,H,Tk,Dh) -> weights (B,H,Tq,Tk):
//   softmax_j(masked_fill(q k^T / sqrt(Dh) + bias, mask, -inf)).
// mask: bool, broadcastable to (B,H,Tq,Tk), or undefined; bias: float, broadcastable to
// (B,H,Tq,Tk) (e.g. ALiBi's (H,Tq,Tk)), or undefined. Each row sums to 1 and blocked entries
// are exactly 0; a row whose keys are all blocked is all zeros (see ops_softmax.cpp).
Tensor attention_weights(const Tensor& q, const Tensor& k, const Tensor& mask = Tensor(),
                         const Tensor& bias = Tensor());

// q: (B,H,Tq,Dh), k, v: (B,H,Tk,Dh) -> (B,H,Tq,Dh) = attention_weights(q, k, mask, bias) v.
// A query whose keys are all blocked outputs zeros. weights_out (if given) receives the
// weights (B,H,Tq,Tk), still part of the graph.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask = Tensor(), const Tensor& bias = Tensor(),
                                    Tensor* weights_out = nullptr);

// Keys and values kept between decoding steps, so each step projects only its new token.
//   self-attention (is_static = false): every forward appends its new k/v (cat along T);
//     attention then runs over the whole cache. The cache spans positions 0..length()-1.
//   sliding-window self-attention (window = W > 0, set by the layer on first use): a RING
//     BUFFER of W slots. Position p lives in slot p % W; once the W slots are full, the newest
//     key overwrites the one W positions back, which no query will read again. Memory stays
//     W positions however long the generation runs; length() still counts every position.
//   cross-attention (is_static = true): filled once from the encoder output (the first
//     forward), then reused unchanged; the encoder output is not projected again.
// Decode under NoGradGuard: with grad mode on, the cached tensors keep their graph alive.
struct KVCache {
  Tensor k, v;             // (B,Hkv,slots,Dh), after RoPE; undefined while empty
  bool is_static = false;  // cross-attention: filled once (prefill) and reused
  std::int64_t window = 0;   // > 0: a ring buffer of this many positions (sliding-window attention)
  std::int64_t written = 0;  // a ring's positions appended so far (it holds the last `window` of them)
  std::int64_t slots() const { return k.defined() ? k.size(2) : 0; }  // positions held
  // Positions appended so far: the position the next key will take.
  std::int64_t length() const { return window > 0 ? written : slots(); }
  // The position held in slot s (s < slots()): s itself unless a full ring has wrapped.
  std::int64_t position_of_slot(std::int64_t s) const;
  void reset() { k = Tensor(); v = Tensor(); written = 0; }  // empty it (keeps is_static, window)
  // Bytes the cached keys and values take: 2 * B * Hkv * slots * Dh * element size.
  std::int64_t bytes() const {
    return k.defined() ? (k.numel() + v.numel()) * static_cast<std::int64_t>(dtype_size(k.dtype())) : 0;
  }
};

// k, v: (B,Hkv,Tnew,Dh): appends them to the cache along T (an empty cache just takes them), so
// cache.k, cache.v become (B,Hkv,T_cached+Tnew,Dh). A ring (window > 0) keeps the last `window`
// positions instead, each in its slot (one new position into a full ring: written in place).
// MultiHeadAttention::forward calls it.
void append_to_cache(KVCache& cache, const Tensor& k, const Tensor& v);
// The ring's part of append_to_cache (cache.window > 0).
void append_to_ring(KVCache& cache, const Tensor& k, const Tensor& v);

// A ring cache's keys and values in position order, (B,Hkv,slots,Dh) each (a plain cache as it is).
std::pair<Tensor, Tensor> cache_in_position_order(const KVCache& cache);

// How positions enter the attention layer (beyond what the embeddings already carry).
enum class PositionInAttention {
  None,   // nothing here: positions come from the sinusoidal/learned encoding (the paper)
  RoPE,   // rotate q and k by their positions (apply_rope)
  ALiBi,  // add a distance bias to the scores (alibi_bias)
};

// How MultiHeadAttention turns q, k, v into its output (the config's model.attention). Both
// compute the same numbers (tests/test_tiled_model.cpp checks values and gradients); they
// differ in memory and speed.
enum class AttentionKernel {
  // scaled_dot_product_attention's ops: scores, mask, softmax, weights v. The (B,H,Tq,Tk)
  // scores and weights exist in full and the weights stay alive for backward: O(T^2) memory
  // per layer. Each step can be printed in the debugger; attention dropout and capture_weights
  // work on the weights.
  Plain,
  // tiled_attention (autograd/ops_attention.cpp): the online softmax of FlashAttention, one
  // (64,64) tile of scores at a time; backward recomputes the tiles. No (Tq,Tk) tensor is made
  // or saved (ALiBi's (H,Tq,Tk) bias excepted, which it reads in place), so memory is O(T).
  // It has no dropout on the weights (attention dropout must be 0), and while capture_weights
  // is on, forward takes the plain path, since heatmaps need the weights themselves.
  Tiled,
};

class MultiHeadAttention : public Module {
 public:
  // d_model D, n_heads H (D % H == 0, Dh = D / H), n_kv_heads Hkv (H % Hkv == 0: Hkv = H is
  // classic multi-head attention, 1 < Hkv < H grouped-query attention (GQA), Hkv = 1 multi-query
  // attention (MQA)); dropout: probability on the attention weights while training.
  // init_gen initialises the projections; dropout_gen (not owned, must outlive the module)
  // draws the dropout masks. kernel: plain or tiled attention (Tiled needs dropout == 0).
  MultiHeadAttention(std::int64_t d_model, std::int64_t n_heads, std::int64_t n_kv_heads, double dropout,
                     PositionInAttention pos, Generator& init_gen, Generator& dropout_gen,
                     Dtype dtype = Dtype::Float32, AttentionKernel kernel = AttentionKernel::Plain);
  const char* type_name() const override { return "MultiHeadAttention"; }

  // x_q: (B,Tq,D), x_kv: (B,Tk,D) -> (B,Tq,D)
  // Self-attention passes x_kv = x_q; cross-attention passes the encoder output as x_kv.
  // mask: bool, TRUE = BLOCKED, broadcastable to (B,H,Tq,Tk) where Tk counts the cached keys
  // too; undefined for none.
  // cache: see KVCache. With a filled static cache x_kv is not used (it may be undefined).
  // Positions: query i sits at q_start + i; the keys (cache first, then the new ones) at
  // 0..Tk-1. RoPE rotates q and the new k at those positions; ALiBi uses them for its bias,
  // the causal form (signed distance) when causal_positions, the symmetric |distance| otherwise.
  Tensor forward(const Tensor& x_q, const Tensor& x_kv, const Tensor& mask, KVCache* cache = nullptr,
                 std::int64_t q_start = 0, bool causal_positions = false) const;

  // Cross-attention's prefill: the keys and values of x_kv (B,Tk,D) into the static cache
  // (emptied first), k and v (B,Hkv,Tk,Dh): what forward computes on its first call with an
  // empty static cache, done before the first decoding step.
  void fill_static_cache(const Tensor& x_kv, KVCache& cache) const;
  // The keys and values of x_kv (B,Tk,D): k_proj and v_proj cut into heads, (B,Hkv,Tk,Dh) each;
  // under RoPE the keys rotated to positions k_start .. k_start+Tk-1.
  std::pair<Tensor, Tensor> project_keys_values(const Tensor& x_kv, std::int64_t k_start) const;
  // The keys and values one forward attends over, and each key's position.
  struct Keys {
    Tensor k, v;                           // (B,Hkv,Tk,Dh)
    std::vector<std::int64_t> positions;  // (Tk): key j sits at positions[j]; empty: at j
  };
  Keys keys_values_with_cache(const Tensor& x_kv, std::int64_t batch, KVCache& cache) const;
  void check_kv_input(const Tensor& x_kv, const Tensor& x_q) const;
  Tensor with_window(const Tensor& caller_mask, std::int64_t q_start, std::int64_t t_q, const Keys& keys) const;
  Tensor alibi_for(std::int64_t q_start, std::int64_t t_q, const Keys& keys, bool causal, Dtype dtype) const;
  Tensor heads_without_weights(const Tensor& q, const Keys& keys, const Tensor& mask, const Tensor& bias) const;

  std::int64_t d_model, n_heads, n_kv_heads, head_dim;
  double dropout;
  PositionInAttention pos;
  AttentionKernel kernel;
  // Self-attention only (the layers set them from the config): a sliding window of `window` keys
  // (0 = full; forward adds window_mask, a decoding cache becomes a ring of this size), and the
  // RoPE frequencies (scaled by model.rope_scaling).
  std::int64_t window = 0;
  RopeFrequencies rope;
  std::shared_ptr<Linear> q_proj;    // D -> H*Dh
  std::shared_ptr<Linear> k_proj;    // D -> Hkv*Dh
  std::shared_ptr<Linear> v_proj;    // D -> Hkv*Dh
  std::shared_ptr<Linear> out_proj;  // H*Dh -> D

  // For visualisation: when set, forward stores its attention weights (before dropout,
  // detached) in last_weights, (B,H,Tq,Tk). A Tiled module computes them the plain way then
  // (the tiled op never forms the weights); the output is the same to rounding.
  bool capture_weights = false;
  mutable Tensor last_weights;

 private:
  Generator* dropout_gen_;  // not owned
};

}  // namespace sf::nn
