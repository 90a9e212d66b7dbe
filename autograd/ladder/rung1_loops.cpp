// The attention kernel ladder, rung 1: attention as four nested loops, nothing hidden.
//
// Letters: B batch, H heads, Tq query length, Tk key length, Dh head width. A "pair" is one
// (b, h); every pair is computed on its own.
//
// For one pair, with q (Tq,Dh), k and v (Tk,Dh):
//   S_ij = scale * Σ_d q_id k_jd        or -inf where the mask blocks (i, j)      (Tq,Tk)
//   P_ij = exp(S_ij - max_j S_ij) / Σ_j exp(S_ij - max_j S_ij)                  (Tq,Tk)
//   O_id = Σ_j P_ij v_jd                                                         (Tq,Dh)
// A row whose keys are all blocked has P = 0 and O = 0 (the convention of every rung).
//
// Backward, given dO = dL/dO (Tq,Dh), walks those three lines upwards:
//   dV_jd = Σ_i P_ij dO_id                         from O = P V
//   dP_ij = Σ_d dO_id v_jd
//   dS_ij = P_ij (dP_ij - Σ_k P_ik dP_ik)          softmax's backward, row by row
//   dQ_id = scale Σ_j dS_ij k_jd,  dK_jd = scale Σ_i dS_ij q_id
//
// What this rung costs: the whole (Tq,Tk) matrix P of every pair is kept for backward,
// B·H·Tq·Tk numbers (at B = H = 4, T = 2048 in float32: 256 MB), and every product is a loop
// of scalar multiply-adds. Rung 2 (attention_naive) computes the same with matrix products,
// rung 3 (tiled_attention) without ever holding P.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "autograd/check.h"
#include "autograd/kernels.h"
#include "autograd/ladder/ladder.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace sf {

namespace {

// The sizes of one call and where the mask is read: (B,H,Tq,Tk) strides, 0 along the dims the
// mask broadcasts over (a (Tq,Tk) causal mask is read in place for every pair).
struct LoopShape {
  std::int64_t B = 0, H = 0, Tq = 0, Tk = 0, Dh = 0;
  Shape mask_strides;  // empty: no mask
  bool blocked(const bool* mask, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
    if (mask == nullptr) return false;
    return mask[b * mask_strides[0] + h * mask_strides[1] + i * mask_strides[2] + j * mask_strides[3]];
  }
};

// Checks q (B,H,Tq,Dh), k, v (B,H,Tk,Dh) of one float dtype and a bool mask (or none) that
// broadcasts to (B,H,Tq,Tk).
LoopShape check_loop_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
  const char* op = "attention_loops";
  check_float(q, op);
  check_same_dtype(q, k, op);
  check_same_dtype(q, v, op);
  SF_EXPECT(q.dim() == 4 && k.dim() == 4 && k.shape() == v.shape() && q.size(0) == k.size(0) &&
                q.size(1) == k.size(1) && q.size(3) == k.size(3),
            op, ": expected q (B,H,Tq,Dh) and k, v (B,H,Tk,Dh) with the same B, H, Dh, got q ", q.shape(), ", k ",
            k.shape(), ", v ", v.shape());
  LoopShape s{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), {}};
  if (mask.defined()) {
    SF_EXPECT(mask.dtype() == Dtype::Bool, op, ": expected a bool mask (true = blocked), got ", dtype_name(mask.dtype()));
    s.mask_strides = broadcast_strides(mask, {s.B, s.H, s.Tq, s.Tk});
  }
  return s;
}

}  // namespace

// ---- AttentionLoops: O = softmax(scale q kᵀ, masked) v, by loops ---------------------------------
// q (B,H,Tq,Dh), k, v (B,H,Tk,Dh), mask bool (B,H,Tq,Tk)-broadcastable or none -> out (B,H,Tq,Dh)
// Saves: q, k, v (contiguous, detached) and the probabilities P (B,H,Tq,Tk).
struct AttentionLoops final : Node {
  Tensor q, k, v, p;
  LoopShape shape;
  double scale = 1;
  const char* name() const override { return "AttentionLoops"; }

  // One pair: p (Tq,Tk) and out (Tq,Dh) from q (Tq,Dh), k, v (Tk,Dh); mask read through `blocked`.
  template <class T, class Blocked>
  static void forward_pair(const T* q, const T* k, const T* v, T* p, T* out, std::int64_t Tq, std::int64_t Tk,
                           std::int64_t Dh, T scale, Blocked blocked) {
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    for (std::int64_t i = 0; i < Tq; ++i) {
      T* p_row = p + i * Tk;
      // S_ij = scale q_i · k_j, or -inf where blocked; the row's max for a stable exp
      T row_max = kNegInf;
      for (std::int64_t j = 0; j < Tk; ++j) {
        T s = 0;
        for (std::int64_t d = 0; d < Dh; ++d) s += q[i * Dh + d] * k[j * Dh + d];
        p_row[j] = blocked(i, j) ? kNegInf : scale * s;
        row_max = std::max(row_max, p_row[j]);
      }
      // P_ij = exp(S_ij - max) / Σ_j exp(S_ij - max); a fully blocked row stays all 0
      T sum = 0;
      for (std::int64_t j = 0; j < Tk; ++j) {
        p_row[j] = row_max == kNegInf ? T(0) : std::exp(p_row[j] - row_max);
        sum += p_row[j];
      }
      for (std::int64_t j = 0; j < Tk; ++j) p_row[j] = sum > 0 ? p_row[j] / sum : T(0);
      // O_id = Σ_j P_ij v_jd
      for (std::int64_t d = 0; d < Dh; ++d) {
        T o = 0;
        for (std::int64_t j = 0; j < Tk; ++j) o += p_row[j] * v[j * Dh + d];
        out[i * Dh + d] = o;
      }
    }
  }

  // One pair's gradients from dO (Tq,Dh); dq, dk, dv may be null (not wanted).
  template <class T>
  static void backward_pair(const T* q, const T* k, const T* v, const T* p, const T* d_out, T* dq, T* dk, T* dv,
                            std::int64_t Tq, std::int64_t Tk, std::int64_t Dh, T scale) {
    std::vector<T> ds(static_cast<std::size_t>(Tk));  // one row of dP, then of dS
    for (std::int64_t i = 0; i < Tq; ++i) {
      const T* p_row = p + i * Tk;
      const T* d_out_row = d_out + i * Dh;
      // dV_jd += P_ij dO_id
      if (dv)
        for (std::int64_t j = 0; j < Tk; ++j)
          for (std::int64_t d = 0; d < Dh; ++d) dv[j * Dh + d] += p_row[j] * d_out_row[d];
      if (!dq && !dk) continue;
      // dP_ij = dO_i · v_j;  dS_ij = P_ij (dP_ij - Σ_k P_ik dP_ik)
      T p_dot_dp = 0;
      for (std::int64_t j = 0; j < Tk; ++j) {
        T dp = 0;
        for (std::int64_t d = 0; d < Dh; ++d) dp += d_out_row[d] * v[j * Dh + d];
        ds[j] = dp;
        p_dot_dp += p_row[j] * dp;
      }
      for (std::int64_t j = 0; j < Tk; ++j) ds[j] = p_row[j] * (ds[j] - p_dot_dp);
      // dQ_id += scale Σ_j dS_ij k_jd;  dK_jd += scale dS_ij q_id
      for (std::int64_t j = 0; j < Tk; ++j)
        for (std::int64_t d = 0; d < Dh; ++d) {
          if (dq) dq[i * Dh + d] += scale * ds[j] * k[j * Dh + d];
          if (dk) dk[j * Dh + d] += scale * ds[j] * q[i * Dh + d];
        }
    }
  }

  static Tensor forward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& mask,
                        double scale) {
    const LoopShape s = check_loop_inputs(q_in, k_in, v_in, mask);
    Tensor q = contiguous(q_in.detach()), k = contiguous(k_in.detach()), v = contiguous(v_in.detach());
    Tensor p = empty({s.B, s.H, s.Tq, s.Tk}, q.dtype());
    Tensor out = empty({s.B, s.H, s.Tq, s.Dh}, q.dtype());
    const bool* mask_data = mask.defined() ? mask.data<bool>() : nullptr;
    dispatch_float(q.dtype(), "attention_loops", [&](auto tag) {
      using T = decltype(tag);
      for (std::int64_t b = 0; b < s.B; ++b)
        for (std::int64_t h = 0; h < s.H; ++h) {
          const std::int64_t pair = b * s.H + h;
          forward_pair<T>(q.data<T>() + pair * s.Tq * s.Dh, k.data<T>() + pair * s.Tk * s.Dh,
                          v.data<T>() + pair * s.Tk * s.Dh, p.data<T>() + pair * s.Tq * s.Tk,
                          out.data<T>() + pair * s.Tq * s.Dh, s.Tq, s.Tk, s.Dh, static_cast<T>(scale),
                          [&](std::int64_t i, std::int64_t j) { return s.blocked(mask_data, b, h, i, j); });
        }
    });
    if (any_requires_grad({&q_in, &k_in, &v_in})) {
      auto node = std::make_shared<AttentionLoops>();
      node->q = q, node->k = k, node->v = v, node->p = p;
      node->shape = s;
      node->scale = scale;
      connect(node, {&q_in, &k_in, &v_in}, out);
    }
    return out;
  }

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    const LoopShape& s = shape;
    Tensor d_out = contiguous(grad_output);
    Tensor dq = needs_input_grad(0) ? zeros(q.shape(), q.dtype()) : Tensor();
    Tensor dk = needs_input_grad(1) ? zeros(k.shape(), k.dtype()) : Tensor();
    Tensor dv = needs_input_grad(2) ? zeros(v.shape(), v.dtype()) : Tensor();
    dispatch_float(q.dtype(), "attention_loops backward", [&](auto tag) {
      using T = decltype(tag);
      for (std::int64_t pair = 0; pair < s.B * s.H; ++pair) {
        const std::int64_t qo = pair * s.Tq * s.Dh, ko = pair * s.Tk * s.Dh;
        backward_pair<T>(q.data<T>() + qo, k.data<T>() + ko, v.data<T>() + ko, p.data<T>() + pair * s.Tq * s.Tk,
                         d_out.data<T>() + qo, dq.defined() ? dq.data<T>() + qo : nullptr,
                         dk.defined() ? dk.data<T>() + ko : nullptr, dv.defined() ? dv.data<T>() + ko : nullptr,
                         s.Tq, s.Tk, s.Dh, static_cast<T>(scale));
      }
    });
    return {dq, dk, dv};
  }

  void release_saved() override { q = k = v = p = Tensor(); }
};

Tensor attention_loops(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double scale) {
  return AttentionLoops::forward(q, k, v, mask, scale);
}

}  // namespace sf
