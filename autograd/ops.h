// The op set: every differentiable operation on tensors.
//
// Each op is a free function here; its forward and backward live side by side in one file
// (named below), as a struct derived from Node with a static `forward` and a `backward`, so
// `break MatMul::backward` works in gdb. All ops run eagerly: the result is computed on the
// line that calls them.
//
// Broadcasting follows NumPy: shapes align from the right, sizes must match or be 1.
// Float ops accept float32 and float64 (both operands the same dtype).
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/tensor.h"

namespace sf {

class Generator;

// ---- ops_elementwise.cpp: binary ops with broadcasting ----
Tensor add(const Tensor& a, const Tensor& b);  // a + b
Tensor sub(const Tensor& a, const Tensor& b);  // a - b
Tensor mul(const Tensor& a, const Tensor& b);  // a * b
Tensor div(const Tensor& a, const Tensor& b);  // a / b
// Scalar forms: the scalar becomes a 0-d tensor of a's dtype.
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);

// ---- ops_unary.cpp ----
Tensor neg(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);  // x^p, scalar exponent
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x);  // exact: x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), as torch's default
Tensor sigmoid(const Tensor& x);

// ---- ops_matmul.cpp ----
// (..., M, K) @ (..., K, N) -> (..., M, N); batch dims broadcast. Both operands at least 2-D.
// Uses cblas_sgemm / cblas_dgemm with transpose flags instead of copies where strides allow.
Tensor matmul(const Tensor& a, const Tensor& b);
// The naive reference: a triple loop over the same shapes (tests compare against it).
Tensor matmul_naive(const Tensor& a, const Tensor& b);

// ---- ops_linear.cpp ----
// x (..., in) @ weight (out, in)^T + bias (out) -> (..., out); bias may be undefined. One node
// and one BLAS call (the bias is the call's starting value): the same function as
// add(matmul(x, transpose(weight, 0, 1)), bias).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// ---- ops_reduce.cpp ----
Tensor sum(const Tensor& x);  // all elements -> 0-d
Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim = false);
Tensor max(const Tensor& x);  // all elements -> 0-d; the gradient goes to the first maximum
Tensor max(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim = false);
// Sums a broadcast gradient back down to `shape` (the backward of broadcasting).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- ops_softmax.cpp ----
Tensor softmax(const Tensor& x, std::int64_t dim);      // stable: subtracts the row max
Tensor log_softmax(const Tensor& x, std::int64_t dim);  // stable: x - max - log(sum(exp))

// ---- ops_shape.cpp: views (no copy) and copies ----
Tensor view(const Tensor& x, const Shape& shape);     // one size may be -1
Tensor reshape(const Tensor& x, const Shape& shape);  // view if possible, else copy
Tensor permute(const Tensor& x, const Shape& dims);
Tensor transpose(const Tensor& x, std::int64_t d0, std::int64_t d1);
Tensor narrow(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t length);
Tensor unsqueeze(const Tensor& x, std::int64_t dim);
Tensor squeeze(const Tensor& x, std::int64_t dim);
Tensor expand(const Tensor& x, const Shape& shape);  // broadcast view (stride 0)
Tensor contiguous(const Tensor& x);                  // copy only if not row-major already
Tensor clone(const Tensor& x);                       // always a fresh contiguous copy
Tensor to_dtype(const Tensor& x, Dtype dtype);       // float<->float keeps the gradient
Tensor cat(const std::vector<Tensor>& xs, std::int64_t dim);
Tensor stack(const std::vector<Tensor>& xs, std::int64_t dim);

// ---- ops_index.cpp ----
// Rows of x along `dim` picked by int64 `index` (1-D). Backward: scatter-add.
Tensor index_select(const Tensor& x, std::int64_t dim, const Tensor& index);
// weight: (V, D), ids: int64 of any shape -> ids.shape + (D). Backward scatter-adds into the
// rows; the row `padding_idx` (if >= 0) gets no gradient.
Tensor embedding(const Tensor& weight, const Tensor& ids, std::int64_t padding_idx = -1);
// out = mask ? value : x, mask (bool or any dtype, nonzero = true) broadcast to x's shape.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// out = cond ? a : b, all three broadcast together.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// ---- ops_dropout.cpp ----
// Zeroes each element with probability p (mask drawn from gen), scales the rest by 1/(1-p).
Tensor dropout(const Tensor& x, double p, Generator& gen);

// ---- ops_compare.cpp: comparisons with a scalar, not differentiable ----
// a: any shape and dtype -> bool tensor of a's shape (for building masks).
Tensor eq(const Tensor& a, double value);  // a == value
Tensor ne(const Tensor& a, double value);  // a != value

// ---- ops_norm.cpp: fused, forward and backward written out (as in llm.c) ----
// Normalises over the last dim: (x - mean) / sqrt(var + eps) * weight + bias.
// x: (..., D), weight, bias: (D); bias may be undefined.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// x / sqrt(mean(x^2) + eps) * weight over the last dim.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-6);

// ---- ops_loss.cpp: fused softmax + cross-entropy ----
// logits: (N, V) float, targets: (N) int64. With label smoothing eps the target distribution
// is (1 - eps) on the gold class plus eps / V on every class (as torch.nn.CrossEntropyLoss).
// Positions whose target == ignore_index contribute nothing; the loss is the mean over the
// others (0 if there are none).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index = -100,
                     double label_smoothing = 0.0);

// ---- ops_attention.cpp: exact tiled attention (online softmax) and its plain reference ----
// Both compute out = softmax_j(masked_fill(q k^T * scale + bias, mask, -inf)) v, one (B,H) pair
// at a time; a query whose keys are all blocked outputs zeros (as scaled_dot_product_attention).
// tiled_attention never forms the (Tq,Tk) scores: it streams over key blocks keeping a running
// row max and sum (FlashAttention), and its backward recomputes the scores block by block.
// q: (B,H,Tq,Dh), k, v: (B,H,Tk,Dh), mask: bool broadcastable to (B,H,Tq,Tk) (true = blocked)
// or undefined, bias: float broadcastable to (B,H,Tq,Tk) or undefined -> (B,H,Tq,Dh)
// band: keys a query sees by position alone, with no mask tensor; tiles wholly outside it are never
// visited (the ladder's rungs 4 and 5, autograd/ladder/ladder.h).
struct KeyBand {
  bool causal = false;      // key j only up to the query's position (i + Tk - Tq)
  std::int64_t window = 0;  // > 0: only the `window` keys ending there (implies causal); 0 = no window
};
Tensor tiled_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& bias,
                       double scale, std::int64_t block = 64, KeyBand band = {});
// The reference: scores, masked_fill(-inf), softmax, @ v, composed from the ops above (it makes
// (B,H,Tq,Tk) scores and keeps the (B,H,Tq,Tk) weights for backward). Same arguments, no block.
Tensor attention_naive(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& bias,
                       double scale);
// For tests and tools/bench_attention: the largest scratch memory (bytes: score tiles, running
// statistics, per-thread buffers; not inputs, outputs, gradients or saved tensors) that one
// tiled_attention forward or backward has used since the last reset. reset: start again from 0.
std::int64_t tiled_attention_peak_scratch_bytes(bool reset = false);

// ---- ops_recurrent.cpp: the element-wise part of one recurrent step, fused ----
// The gates' matrix products are linear() (x W_ih^T + b_ih for every step at once, h W_hh^T + b_hh
// per step); these ops do the rest of the step, forward and backward written out. Gate order and
// formulas are PyTorch's (torch.nn.LSTM, torch.nn.GRU); σ is the logistic sigmoid.
// LSTM, gates (B, 4H) = [i | f | g | o], c_prev (B, H):
//   c = σ(f) ⊙ c_prev + σ(i) ⊙ tanh(g)                  -> c (B, H)
Tensor lstm_cell_state(const Tensor& gates, const Tensor& c_prev);
//   h = σ(o) ⊙ tanh(c)                                   -> h (B, H)
Tensor lstm_cell_output(const Tensor& gates, const Tensor& c);
// GRU, gx = x W_ih^T + b_ih and gh = h_prev W_hh^T + b_hh, each (B, 3H) = [r | z | n], h_prev (B, H):
//   r = σ(gx_r + gh_r), z = σ(gx_z + gh_z), n = tanh(gx_n + r ⊙ gh_n)
//   h = (1 − z) ⊙ n + z ⊙ h_prev                         -> h (B, H)
Tensor gru_cell(const Tensor& gx, const Tensor& gh, const Tensor& h_prev);

// ---- operators ----
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
inline Tensor operator-(const Tensor& x) { return neg(x); }

}  // namespace sf
