// Attention: see attention.h for the math and the conventions (masks: TRUE = BLOCKED).
//
// Letters: B batch, S source length, Tq query length, Tk key length, D d_model, H query heads,
// Hkv key/value heads, G = H / Hkv, Dh head width.
//
// Everything here is composed from autograd ops (matmul, masked_fill, softmax, ...), so the
// backward needs no code of its own: the tests check it against finite differences. A module
// built with AttentionKernel::Tiled calls the fused tiled_attention op instead of the plain
// composition (autograd/ops_attention.cpp; tests/test_tiled_model.cpp checks they agree).
#include "nn/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <limits>
#include <stdexcept>
#include <tuple>
#include <string>
#include <vector>

#include "autograd/check.h"
#include "autograd/exercise.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "nn/relative_positions.h"

namespace sf::nn {

namespace {

// Throws unless t (a mask or bias) broadcasts to the scores' shape (B,H,Tq,Tk).
void check_broadcasts_to_scores(const Tensor& t, const Shape& scores, const char* what, const char* op) {
  bool ok = t.dim() <= static_cast<std::int64_t>(scores.size());
  for (std::int64_t i = 1; ok && i <= t.dim(); ++i) {
    const std::int64_t have = t.shape()[t.dim() - i], want = scores[scores.size() - i];
    ok = have == 1 || have == want;
  }
  SF_EXPECT(ok, op, ": ", what, " of shape ", t.shape(),
            " does not broadcast to the scores' shape (B,H,Tq,Tk) = ", scores);
}

// q: (B,H,Tq,Dh), k: (B,H,Tk,Dh) -> (B,H,Tq,Tk); `op` names the caller in errors.
Tensor weights_of(const Tensor& q, const Tensor& k, const Tensor& mask, const Tensor& bias, const char* op) {
  SF_EXPECT(q.dim() == 4 && k.dim() == 4 && q.size(0) == k.size(0) && q.size(1) == k.size(1) && q.size(3) == k.size(3),
            op, ": expected q (B,H,Tq,Dh) and k (B,H,Tk,Dh) with the same B, H, Dh, got q ", q.shape(), " and k ",
            k.shape());
  const Shape scores_shape = {q.size(0), q.size(1), q.size(2), k.size(2)};  // (B,H,Tq,Tk)
  if (bias.defined()) check_broadcasts_to_scores(bias, scores_shape, "bias", op);
  if (mask.defined()) {
    SF_EXPECT(mask.dtype() == Dtype::Bool, op, ": expected a bool mask (TRUE = BLOCKED), got ",
              dtype_name(mask.dtype()), " of shape ", mask.shape());
    check_broadcasts_to_scores(mask, scores_shape, "mask", op);
  }
  // EXERCISE(scaled_dot_product): the attention weights (B,H,Tq,Tk) from autograd ops: the scores
  // q k^T scaled by 1/sqrt(Dh) (k^T: transpose k's last two dims, a view), plus bias if defined; where
  // mask is TRUE (blocked) the score becomes -inf (masked_fill); then softmax over the keys (last dim).
  // BEGIN SOLUTION
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  Tensor scores = mul(matmul(q, transpose(k, -2, -1)), scale);  // (B,H,Tq,Tk); k^T is a view
  if (bias.defined()) scores = add(scores, bias);
  if (mask.defined()) scores = masked_fill(scores, mask, -std::numeric_limits<double>::infinity());
  return softmax(scores, -1);  // all -inf rows (every key blocked) give zeros, not NaN
  // END SOLUTION
}

// x: (B,Hkv,Tk,Dh) -> (B,Hkv*G,Tk,Dh): query head h reads k/v head h / G. G = 1 (classic
// multi-head attention) returns x itself; otherwise expand makes G stride-0 views of each head
// and reshape copies them into the (B,H,Tk,Dh) layout matmul needs.
Tensor repeat_kv_heads(const Tensor& x, std::int64_t groups) {
  if (groups == 1) return x;
  const Shape& s = x.shape();
  const Tensor grouped = expand(unsqueeze(x, 2), {s[0], s[1], groups, s[2], s[3]});  // (B,Hkv,G,Tk,Dh)
  return reshape(grouped, {s[0], s[1] * groups, s[2], s[3]});
}

// BEGIN RELATED(scaled_dot_product): the grouped form repeats the exercise's steps, hidden with it
// q: (B,H,Tq,Dh), k, v: (B,Hkv,Tk,Dh) -> (B,H,Tq,Dh): the same numbers as repeat_kv_heads then
// attention, without the copies. Query head h = kv G + g, so (B,H,Tq,Dh) is (B,Hkv,G Tq,Dh): each
// k/v head meets its G query heads' rows in one product. The scores are viewed as (B,H,Tq,Tk)
// for the mask, the bias and the softmax, and back for the product with v.
Tensor grouped_query_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                               const Tensor& bias) {
  const std::int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Dh = q.size(3), Hkv = k.size(1), Tk = k.size(2);
  const Tensor q_grouped = reshape(q, {B, Hkv, (H / Hkv) * Tq, Dh});
  Tensor scores = mul(matmul(q_grouped, transpose(k, -2, -1)), 1.0 / std::sqrt(static_cast<double>(Dh)));
  scores = reshape(scores, {B, H, Tq, Tk});  // (B,Hkv,G Tq,Tk) seen per query head
  if (bias.defined()) scores = add(scores, bias);
  if (mask.defined()) scores = masked_fill(scores, mask, -std::numeric_limits<double>::infinity());
  const Tensor weights = reshape(softmax(scores, -1), {B, Hkv, (H / Hkv) * Tq, Tk});
  return reshape(matmul(weights, v), {B, H, Tq, Dh});  // (B,Hkv,G Tq,Dh) -> (B,H,Tq,Dh)
}
// HANDOUT INSTEAD:
// Tensor grouped_query_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
//                                const Tensor& bias) {
//   const std::int64_t groups = q.size(1) / k.size(1);  // the expanded heads, through weights_of
//   return matmul(weights_of(q, repeat_kv_heads(k, groups), mask, bias, "MultiHeadAttention"),
//                 repeat_kv_heads(v, groups));
// }
// END RELATED

// a, b: bool masks (TRUE = BLOCKED) -> bool at their broadcast shape, blocked where either is.
Tensor mask_union(const Tensor& a, const Tensor& b) {
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "mask_union");
  return masked_fill(expand(b, shape), a, 1.0);
}

std::string head_layout_str(std::int64_t d_model, std::int64_t n_heads) {
  return "d_model " + std::to_string(d_model) + " / n_heads " + std::to_string(n_heads);
}

}  // namespace

// -> bool (Tq, Tk)
Tensor causal_mask(std::int64_t t_q, std::int64_t t_k, std::int64_t q_start) {
  SF_EXPECT(t_q >= 0 && t_k >= 0 && q_start >= 0, "causal_mask: expected t_q, t_k, q_start >= 0, got t_q ", t_q,
            ", t_k ", t_k, ", q_start ", q_start);
  // EXERCISE(masks): a bool (Tq, Tk) tensor, TRUE = BLOCKED where key j lies in the future of query i,
  // which sits at position q_start + i (the keys at 0..Tk-1); a query may see itself and the past.
  // BEGIN SOLUTION
  std::vector<bool> blocked(t_q * t_k);
  for (std::int64_t i = 0; i < t_q; ++i)
    for (std::int64_t j = 0; j < t_k; ++j) blocked[i * t_k + j] = j > q_start + i;
  return from_vector<bool>(blocked, {t_q, t_k});
  // END SOLUTION
}

// -> bool (Tq, Tk)
Tensor window_mask(std::int64_t t_q, std::int64_t t_k, std::int64_t window, std::int64_t q_start, std::int64_t k_start) {
  SF_EXPECT(t_q >= 0 && t_k >= 0 && window >= 1 && q_start >= 0 && k_start >= 0,
            "window_mask: expected t_q, t_k, q_start, k_start >= 0 and window >= 1, got t_q ", t_q, ", t_k ", t_k,
            ", window ", window, ", q_start ", q_start, ", k_start ", k_start);
  std::vector<bool> outside(t_q * t_k);  // row q_pos, column k_pos
  for (std::int64_t row = 0; row < t_q; ++row) {
    const std::int64_t q_pos = q_start + row;
    for (std::int64_t col = 0; col < t_k; ++col) outside[row * t_k + col] = std::abs(q_pos - (k_start + col)) >= window;
  }
  return from_vector<bool>(outside, {t_q, t_k});
}

// ids: (B,S) int64 -> bool (B,1,1,S)
Tensor padding_mask(const Tensor& ids, std::int64_t pad_id) {
  SF_EXPECT(ids.dim() == 2 && ids.dtype() == Dtype::Int64, "padding_mask: expected int64 ids of shape (B,S), got ",
            dtype_name(ids.dtype()), " ", ids.shape());
  // EXERCISE(masks): a bool (B,1,1,S) tensor, TRUE = BLOCKED where ids is pad_id, shaped so that it
  // broadcasts over the heads and the queries of the scores (B,H,Tq,S).
  // BEGIN SOLUTION
  return reshape(eq(ids, static_cast<double>(pad_id)), {ids.size(0), 1, 1, ids.size(1)});
  // END SOLUTION
}

// x: (B,T,n*Dh) -> (B,n,T,Dh), a view (one head per slice along dim 1).
Tensor split_heads(const Tensor& x, std::int64_t n, std::int64_t head_dim) {
  // EXERCISE(multi_head): cut the last dim of x into n heads of head_dim and move the head dim in
  // front of T, as a view (no copy): (B,T,n*Dh) -> (B,T,n,Dh) -> (B,n,T,Dh).
  // BEGIN SOLUTION
  return transpose(reshape(x, {x.size(0), x.size(1), n, head_dim}), 1, 2);
  // END SOLUTION
}

// x: (B,H,T,Dh) -> (B,T,H*Dh): the heads side by side again, the inverse of split_heads.
Tensor merge_heads(const Tensor& x) {
  // EXERCISE(multi_head): (B,H,T,Dh) -> (B,T,H,Dh) -> (B,T,H*Dh); head h fills columns h*Dh .. h*Dh+Dh-1.
  // BEGIN SOLUTION
  return reshape(transpose(x, 1, 2), {x.size(0), x.size(2), x.size(1) * x.size(3)});
  // END SOLUTION
}

namespace {

void check_new_keys(const KVCache& cache, const Tensor& k, const Tensor& v) {
  if (k.dim() != 4 || v.shape() != k.shape())
    throw std::invalid_argument("append_to_cache: expected new k and v of the same shape (B,Hkv,T,Dh), got k " +
                                shape_str(k.shape()) + " and v " + shape_str(v.shape()));
  const bool fits = cache.slots() == 0 || (cache.k.size(0) == k.size(0) && cache.k.size(1) == k.size(1) &&
                                           cache.k.size(3) == k.size(3));
  if (!fits)
    throw std::invalid_argument("MultiHeadAttention: cache holds k of shape " + shape_str(cache.k.shape()) +
                                ", expected (" + std::to_string(k.size(0)) + "," + std::to_string(k.size(1)) +
                                ",T," + std::to_string(k.size(3)) + ")");
}

// Whether the ring's tensor may be written in place: contiguous and seen by nothing else (no
// view, no graph), as beam search's in-place reorder asks (nn/model.cpp).
bool owned_alone(const Tensor& x) {
  return x.is_contiguous() && !x.requires_grad() && !x.grad_fn() && x.impl_ptr().use_count() == 1 &&
         x.impl()->storage.use_count() == 1;
}

// ring (B,Hkv,W,Dh) slot `slot` <- fresh (B,Hkv,1,Dh), in place.
void write_slot(Tensor& ring, const Tensor& fresh, std::int64_t slot) {
  const Tensor row = fresh.contiguous();
  const std::int64_t rows = ring.size(0) * ring.size(1), slots = ring.size(2);
  const std::size_t row_bytes = static_cast<std::size_t>(ring.size(3)) * dtype_size(ring.dtype());
  auto* dst = static_cast<unsigned char*>(ring.raw_data());
  const auto* src = static_cast<const unsigned char*>(row.raw_data());
  for (std::int64_t r = 0; r < rows; ++r)
    std::memcpy(dst + (r * slots + slot) * row_bytes, src + r * row_bytes, row_bytes);
}

// x (B,Hkv,n,Dh) holding positions first..first+n-1 in order -> the ring of its last min(n, W):
// slot p % W holds position p.
Tensor to_ring(const Tensor& x, std::int64_t first, std::int64_t window) {
  const std::int64_t n = x.size(2), keep = std::min(n, window);
  const Tensor last = x.narrow(2, n - keep, keep);  // positions first+n-keep .. first+n-1
  const std::int64_t start = first + n - keep;
  if (keep < window || start % window == 0) return last.contiguous();  // slot order is position order
  std::vector<std::int64_t> order(window);          // slot s <- the row of position p, p % W == s
  for (std::int64_t s = 0; s < window; ++s) order[s] = ((s - start % window) + window) % window;
  return index_select(last, 2, from_vector<std::int64_t>(order, {window}));
}

}  // namespace

std::int64_t KVCache::position_of_slot(std::int64_t s) const {
  if (window == 0) return s;
  const std::int64_t first = written - slots();  // the oldest position held
  return first + ((s - first % window) % window + window) % window;
}

std::pair<Tensor, Tensor> cache_in_position_order(const KVCache& cache) {
  const std::int64_t n = cache.slots();
  if (cache.window == 0 || n == 0 || (cache.written - n) % cache.window == 0) return {cache.k, cache.v};
  std::vector<std::int64_t> order(n);  // row i <- the slot of position first + i
  for (std::int64_t i = 0; i < n; ++i) order[i] = (cache.written - n + i) % cache.window;
  const Tensor index = from_vector<std::int64_t>(order, {n});
  return {index_select(cache.k, 2, index), index_select(cache.v, 2, index)};
}

// k, v: (B,Hkv,Tnew,Dh) -> a ring of W slots, (B,Hkv,min(W, written),Dh)
void append_to_ring(KVCache& cache, const Tensor& k, const Tensor& v) {
  const std::int64_t W = cache.window, t_new = k.size(2);
  if (t_new == 1 && cache.slots() == W) {  // the ring is full: overwrite position p - W
    if (!owned_alone(cache.k)) cache.k = cache.k.clone();
    if (!owned_alone(cache.v)) cache.v = cache.v.clone();
    write_slot(cache.k, k, cache.written % W);
    write_slot(cache.v, v, cache.written % W);
  } else {  // the ring in order, the new positions after it, then the last W into their slots
    const std::int64_t first = cache.written - cache.slots();
    const bool empty = cache.slots() == 0;
    const auto [old_k, old_v] = cache_in_position_order(cache);
    cache.k = to_ring(empty ? k : cat({old_k, k}, 2), first, W);
    cache.v = to_ring(empty ? v : cat({old_v, v}, 2), first, W);
  }
  cache.written += t_new;
}

// k, v: (B,Hkv,Tnew,Dh) -> cache.k, cache.v: (B,Hkv,T_cached+Tnew,Dh)
void append_to_cache(KVCache& cache, const Tensor& k, const Tensor& v) {
  check_new_keys(cache, k, v);
  if (cache.window > 0) return append_to_ring(cache, k, v);
  // EXERCISE(kv_cache): an empty cache takes k and v as they are; otherwise the new keys and values
  // follow the cached ones along T (dim 2), so cache.k becomes (B,Hkv,T_cached+Tnew,Dh), same for v.
  // BEGIN SOLUTION
  if (cache.length() == 0) {
    cache.k = k;
    cache.v = v;
    return;
  }
  cache.k = cat({cache.k, k}, 2);  // (B,Hkv,T_cached+Tnew,Dh)
  cache.v = cat({cache.v, v}, 2);
  // END SOLUTION
}

// q: (B,H,Tq,Dh), k: (B,H,Tk,Dh) -> (B,H,Tq,Tk)
Tensor attention_weights(const Tensor& q, const Tensor& k, const Tensor& mask, const Tensor& bias) {
  return weights_of(q, k, mask, bias, "attention_weights");
}

// q: (B,H,Tq,Dh), k, v: (B,H,Tk,Dh) -> (B,H,Tq,Dh)
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                    const Tensor& bias, Tensor* weights_out) {
  const char* op = "scaled_dot_product_attention";
  if (v.dim() != 4 || k.dim() != 4 || v.size(0) != k.size(0) || v.size(1) != k.size(1) || v.size(2) != k.size(2))
    throw std::invalid_argument(std::string(op) + ": expected k and v of shape (B,H,Tk,Dh) with the same B, H, Tk, "
                                "got k " + shape_str(k.shape()) + " and v " + shape_str(v.shape()));
  // EXERCISE(scaled_dot_product): the weights (B,H,Tq,Tk) of q against k (weights_of above, which
  // also checks q, k, mask and bias), handed to *weights_out when it is given; the output is the
  // weighted average of the values, weights v: (B,H,Tq,Tk) @ (B,H,Tk,Dh) -> (B,H,Tq,Dh).
  // BEGIN SOLUTION
  const Tensor weights = weights_of(q, k, mask, bias, op);  // (B,H,Tq,Tk)
  if (weights_out) *weights_out = weights;
  return matmul(weights, v);  // (B,H,Tq,Tk) @ (B,H,Tk,Dh) -> (B,H,Tq,Dh)
  // END SOLUTION
}

MultiHeadAttention::MultiHeadAttention(std::int64_t d_model_, std::int64_t n_heads_, std::int64_t n_kv_heads_,
                                       double dropout_, PositionInAttention pos_, Generator& init_gen,
                                       Generator& dropout_gen, Dtype dtype, AttentionKernel kernel_)
    : d_model(d_model_), n_heads(n_heads_), n_kv_heads(n_kv_heads_), head_dim(0), dropout(dropout_), pos(pos_),
      kernel(kernel_), dropout_gen_(&dropout_gen) {
  if (d_model <= 0 || n_heads <= 0 || n_kv_heads <= 0)
    throw std::invalid_argument("MultiHeadAttention: d_model, n_heads and n_kv_heads must be positive, got d_model " +
                                std::to_string(d_model) + ", n_heads " + std::to_string(n_heads) +
                                ", n_kv_heads " + std::to_string(n_kv_heads));
  if (d_model % n_heads != 0)
    throw std::invalid_argument("MultiHeadAttention: d_model " + std::to_string(d_model) +
                                " is not divisible by n_heads " + std::to_string(n_heads));
  if (n_heads % n_kv_heads != 0)
    throw std::invalid_argument("MultiHeadAttention: n_heads " + std::to_string(n_heads) +
                                " is not divisible by n_kv_heads " + std::to_string(n_kv_heads) +
                                " (each k/v head must serve the same number of query heads)");
  head_dim = d_model / n_heads;
  if (pos == PositionInAttention::RoPE && head_dim % 2 != 0)
    throw std::invalid_argument("MultiHeadAttention: RoPE needs an even head width, got Dh = " +
                                std::to_string(head_dim) + " (" + head_layout_str(d_model, n_heads) + ")");
  if (!(dropout >= 0 && dropout < 1))  // written so that NaN fails too
    throw std::invalid_argument("MultiHeadAttention: dropout must be in [0, 1), got " + std::to_string(dropout));
  if (kernel == AttentionKernel::Tiled && dropout > 0)
    throw std::invalid_argument("MultiHeadAttention: tiled attention has no dropout on the attention weights (it "
                                "never forms them), got dropout " + std::to_string(dropout) +
                                "; use plain attention or dropout 0");

  q_proj = register_module("q_proj", std::make_shared<Linear>(d_model, n_heads * head_dim, init_gen, true, dtype));
  k_proj = register_module("k_proj", std::make_shared<Linear>(d_model, n_kv_heads * head_dim, init_gen, true, dtype));
  v_proj = register_module("v_proj", std::make_shared<Linear>(d_model, n_kv_heads * head_dim, init_gen, true, dtype));
  out_proj = register_module("out_proj", std::make_shared<Linear>(n_heads * head_dim, d_model, init_gen, true, dtype));
}

void MultiHeadAttention::fill_static_cache(const Tensor& x_kv, KVCache& cache) const {
  if (!cache.is_static) throw std::invalid_argument("MultiHeadAttention::fill_static_cache: expected a static cache");
  if (!x_kv.defined() || x_kv.dim() != 3 || x_kv.size(2) != d_model)
    throw std::invalid_argument("MultiHeadAttention::fill_static_cache: expected x_kv of shape (B,Tk," +
                                std::to_string(d_model) + "), got " +
                                (x_kv.defined() ? shape_str(x_kv.shape()) : std::string("an undefined tensor")));
  const auto [k, v] = project_keys_values(x_kv, 0);  // (B,Hkv,Tk,Dh) each, keys at 0..Tk-1
  cache.reset();
  append_to_cache(cache, k, v);
}

std::pair<Tensor, Tensor> MultiHeadAttention::project_keys_values(const Tensor& x_kv, std::int64_t k_start) const {
  Tensor k = split_heads(k_proj->forward(x_kv), n_kv_heads, head_dim);  // (B,Hkv,Tk,Dh)
  Tensor v = split_heads(v_proj->forward(x_kv), n_kv_heads, head_dim);
  if (pos == PositionInAttention::RoPE) k = apply_rope(k, k_start, rope.base, rope.position_scale);
  return {k, v};
}

// x_kv must be (B,Tk,D) with x_q's batch B.
void MultiHeadAttention::check_kv_input(const Tensor& x_kv, const Tensor& x_q) const {
  SF_EXPECT(x_kv.defined() && x_kv.dim() == 3 && x_kv.size(0) == x_q.size(0) && x_kv.size(2) == d_model,
            "MultiHeadAttention: expected x_kv of shape (", x_q.size(0), ",Tk,", d_model, ") to match x_q ",
            x_q.shape(), ", got ", (x_kv.defined() ? shape_str(x_kv.shape()) : std::string("an undefined tensor")));
}

// Decoding: a filled static cache (cross-attention) is read as it is; otherwise the new keys
// follow the cached ones (self-attention, positions cache length..) or fill an empty static cache.
// Returns what this forward attends over: the whole cache (B,Hkv,T_cached+Tk,Dh), or under a
// sliding window the ring (one new position) or the ring in order followed by the new keys (more).
MultiHeadAttention::Keys MultiHeadAttention::keys_values_with_cache(const Tensor& x_kv, std::int64_t batch,
                                                                    KVCache& cache) const {
  if (cache.is_static && cache.length() > 0) {
    SF_EXPECT(cache.k.size(0) == batch, "MultiHeadAttention: static cache holds batch ", cache.k.size(0),
              " but x_q has batch ", batch);
    return {cache.k, cache.v, {}};
  }
  SF_EXPECT(x_kv.defined() && x_kv.dim() == 3 && x_kv.size(0) == batch && x_kv.size(2) == d_model,
            "MultiHeadAttention: expected x_kv of shape (", batch, ",Tk,", d_model, "), got ",
            (x_kv.defined() ? shape_str(x_kv.shape()) : std::string("an undefined tensor")));
  if (!cache.is_static && cache.length() == 0) cache.window = window;  // a window's cache is a ring
  SF_EXPECT(cache.window == (cache.is_static ? 0 : window), "MultiHeadAttention: the cache is a ring of ",
            cache.window, " positions, but this layer's window is ", window);
  const auto [k, v] = project_keys_values(x_kv, cache.is_static ? 0 : cache.length());
  if (cache.window == 0) {  // everything so far, in order: key j at position j
    append_to_cache(cache, k, v);
    return {cache.k, cache.v, {}};
  }
  if (k.size(2) == 1) {  // one new position: a full ring is exactly its window, a filling one holds all
    append_to_cache(cache, k, v);
    std::vector<std::int64_t> positions(cache.slots());
    for (std::int64_t s = 0; s < cache.slots(); ++s) positions[s] = cache.position_of_slot(s);
    return {cache.k, cache.v, positions};
  }
  // Several new positions: the earliest new queries still need keys that the ring is about to
  // drop, so they attend over the old positions in order and the new ones.
  const std::int64_t first = cache.written - cache.slots();
  const auto [old_k, old_v] = cache_in_position_order(cache);
  Keys keys{cache.slots() == 0 ? k : cat({old_k, k}, 2), cache.slots() == 0 ? v : cat({old_v, v}, 2), {}};
  keys.positions.resize(keys.k.size(2));
  std::iota(keys.positions.begin(), keys.positions.end(), first);
  append_to_cache(cache, k, v);
  return keys;
}

// caller_mask with the sliding window's blocks added, for queries at q_start.. and the keys'
// positions; unchanged when every key is inside every query's window (a decoding step over a ring).
Tensor MultiHeadAttention::with_window(const Tensor& caller_mask, std::int64_t q_start, std::int64_t t_q,
                                       const Keys& keys) const {
  const std::int64_t t_k = keys.k.size(2);
  const std::int64_t lo = keys.positions.empty() ? 0 : *std::min_element(keys.positions.begin(), keys.positions.end());
  const std::int64_t hi = keys.positions.empty() ? t_k - 1 : *std::max_element(keys.positions.begin(), keys.positions.end());
  if (q_start + t_q - 1 - lo < window && hi - q_start < window) return caller_mask;
  SF_CHECK(hi - lo + 1 == t_k && (keys.positions.empty() || keys.positions.front() == lo),
           "MultiHeadAttention: a window mask over keys out of position order");
  const Tensor band = window_mask(t_q, t_k, window, q_start, lo);
  return caller_mask.defined() ? mask_union(caller_mask, band) : band;
}

// Tiled attention, or grouped-query attention at inference: (B,H,Tq,Dh), the weights never kept.
Tensor MultiHeadAttention::heads_without_weights(const Tensor& q, const Keys& keys, const Tensor& mask,
                                                 const Tensor& bias) const {
  const std::int64_t groups = n_heads / n_kv_heads;
  if (kernel == AttentionKernel::Plain)  // inference GQA/MQA: each k/v head read once, in place
    return grouped_query_attention(q, keys.k, keys.v, mask, bias);
  // The same softmax(q k^T / sqrt(Dh) + bias, masked) v, one score tile at a time.
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  return tiled_attention(q, repeat_kv_heads(keys.k, groups), repeat_kv_heads(keys.v, groups), mask, bias, scale);
}

// The ALiBi bias (H,Tq,Tk) for queries at q_start.. and the keys' positions.
Tensor MultiHeadAttention::alibi_for(std::int64_t q_start, std::int64_t t_q, const Keys& keys, bool causal,
                                     Dtype dtype) const {
  if (keys.positions.empty()) return alibi_bias(n_heads, t_q, keys.k.size(2), q_start, causal, dtype);
  std::vector<std::int64_t> q_positions(t_q);
  std::iota(q_positions.begin(), q_positions.end(), q_start);
  return alibi_bias_at(n_heads, q_positions, keys.positions, causal, dtype);
}

// x_q: (B,Tq,D), x_kv: (B,Tk,D) -> (B,Tq,D)
Tensor MultiHeadAttention::forward(const Tensor& x_q, const Tensor& x_kv, const Tensor& caller_mask, KVCache* cache,
                                   std::int64_t q_start, bool causal_positions) const {
  SF_EXPECT(x_q.dim() == 3 && x_q.size(2) == d_model, "MultiHeadAttention: expected x_q of shape (B,Tq,", d_model,
            "), got ", x_q.shape());
  SF_EXPECT(q_start >= 0, "MultiHeadAttention: q_start must be >= 0, got ", q_start);
  const std::int64_t batch = x_q.size(0), t_q = x_q.size(1);

  // Queries: (B,Tq,D) -> (B,H,Tq,Dh), rotated to positions q_start.. under RoPE.
  Tensor q = split_heads(q_proj->forward(x_q), n_heads, head_dim);
  if (pos == PositionInAttention::RoPE) q = apply_rope(q, q_start, rope.base, rope.position_scale);

  // Keys and values: (B,Hkv,Tk,Dh), projected from x_kv (while decoding, through the cache).
  Keys keys;
  if (cache) {
    keys = keys_values_with_cache(x_kv, batch, *cache);
  } else {
    check_kv_input(x_kv, x_q);
    std::tie(keys.k, keys.v) = project_keys_values(x_kv, 0);
  }
  // A sliding window blocks the keys W or more positions away too; ALiBi adds its distance bias.
  const Tensor mask = window > 0 ? with_window(caller_mask, q_start, t_q, keys) : caller_mask;
  const Tensor bias = pos == PositionInAttention::ALiBi ? alibi_for(q_start, t_q, keys, causal_positions, x_q.dtype())
                                                        : Tensor();  // (H,Tq,Tk) or none

  // GQA/MQA: each group of G = H/Hkv query heads shares one k/v head.
  const std::int64_t groups = n_heads / n_kv_heads;
  Tensor heads;  // (B,H,Tq,Dh)
  if (!capture_weights && (kernel == AttentionKernel::Tiled || (groups > 1 && !grad_enabled()))) {
    heads = heads_without_weights(q, keys, mask, bias);
  } else {
    const Tensor k_heads = repeat_kv_heads(keys.k, groups);  // (B,H,Tk,Dh)
    const Tensor v_heads = repeat_kv_heads(keys.v, groups);  // (B,H,Tk,Dh)
    Tensor weights = weights_of(q, k_heads, mask, bias, "MultiHeadAttention");  // (B,H,Tq,Tk)
    if (capture_weights) last_weights = weights.detach();
    if (is_training() && dropout > 0) weights = sf::dropout(weights, dropout, *dropout_gen_);
    heads = matmul(weights, v_heads);  // (B,H,Tq,Tk) @ (B,H,Tk,Dh) -> (B,H,Tq,Dh)
  }

  // Concatenate the heads: (B,H,Tq,Dh) -> (B,Tq,H*Dh), then mix them.
  const Tensor merged = merge_heads(heads);
  return run_forward_hooks(out_proj->forward(merged));  // trace mode sees the output (nn/module.h)
}

}  // namespace sf::nn
