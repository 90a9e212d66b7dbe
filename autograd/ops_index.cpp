// Indexing and masking ops: index_select, embedding, masked_fill, where. (dropout is in
// ops_dropout.cpp, the comparisons eq and ne in ops_compare.cpp.)
//
// Letters: V vocabulary size (rows of an embedding table), D embedding width, K number of
// indices picked. Index tensors are int64; masks are bool (or any dtype, nonzero = true).
//
// The gathers (index_select, embedding) read rows by index; their backward is the matching
// scatter-add: each picked row's gradient is added (+=) into the row it came from, so an index
// that appears twice receives the sum of both gradients.
#include <stdexcept>
#include <string>

#include "autograd/exercise.h"
#include "autograd/kernels.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace sf {

namespace {

// Unravels a flat row-major position into "(i0, i1, ...)" for error messages.
std::string position_str(std::int64_t flat, const Shape& shape) {
  Shape idx(shape.size());
  for (std::int64_t d = static_cast<std::int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shape_str(idx);
}

// True when `from` broadcasts to exactly `to` (aligned from the right, sizes equal or 1).
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const std::size_t lead = to.size() - from.size();
  for (std::size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

// grad_output with zeros where cond == zero_when. grad_output: any shape; cond: bool,
// broadcastable to grad_output's shape. The backward of masked_fill and where.
// -> out: grad_output's shape, contiguous.
Tensor zero_where(const Tensor& grad_output, const Tensor& cond, bool zero_when) {
  Tensor out = empty(grad_output.shape(), grad_output.dtype());
  const Shape sc = broadcast_strides(cond, grad_output.shape());
  const bool* pc = cond.data<bool>();
  dispatch_float(grad_output.dtype(), "zero_where", [&](auto tag) {
    using T = decltype(tag);
    const T* p_grad_output = grad_output.data<T>();
    T* po = out.data<T>();
    parallel_for_each_strided<3>(grad_output.shape(), {&out.strides(), &grad_output.strides(), &sc},
                                 [&](std::int64_t o, std::int64_t i_grad_output, std::int64_t ic) {
                                   po[o] = pc[ic] == zero_when ? T(0) : p_grad_output[i_grad_output];
                                 });
  });
  return out;
}

}  // namespace

// ---- IndexSelect: out = x with only the slices index[0], index[1], ... along dim ----------
// x: (..., n, ...), index: (K) int64 in [0, n) -> out: (..., K, ...).
// Seen as (outer, n, inner): out[o, k, i] = x[o, index[k], i].
// Backward (scatter-add): grad_x[o, index[k], i] += grad_output[o, k, i]. Saves: index and the dim.
struct IndexSelect final : Node {
  Tensor index;  // (K) int64, contiguous
  std::int64_t dim = 0;
  const char* name() const override { return "IndexSelect"; }

  static Tensor forward(const Tensor& x, std::int64_t dim, const Tensor& index) {
    if (x.dim() == 0) throw std::invalid_argument("index_select: expected a tensor with at least 1 dim, got a 0-d tensor");
    const std::int64_t d = wrap_dim(dim, x.dim(), "index_select");
    if (index.dtype() != Dtype::Int64 || index.dim() != 1)
      throw std::invalid_argument(std::string("index_select: expected a 1-D int64 index, got ") +
                                  dtype_name(index.dtype()) + " of shape " + shape_str(index.shape()));
    Tensor idx = contiguous(index);
    const std::int64_t* pi = idx.data<std::int64_t>();
    const std::int64_t n = x.shape()[d], k_count = idx.numel();
    for (std::int64_t k = 0; k < k_count; ++k)
      if (pi[k] < 0 || pi[k] >= n)
        throw std::invalid_argument("index_select: index value " + std::to_string(pi[k]) + " (at position " +
                                    std::to_string(k) + ") is out of range for dim " + std::to_string(d) +
                                    " of size " + std::to_string(n) + " (x has shape " + shape_str(x.shape()) + ")");
    std::int64_t outer = 1, inner = 1;
    for (std::int64_t q = 0; q < d; ++q) outer *= x.shape()[q];
    for (std::int64_t q = d + 1; q < x.dim(); ++q) inner *= x.shape()[q];

    Shape out_shape = x.shape();
    out_shape[d] = k_count;
    Tensor xc = contiguous(x.detach());
    Tensor out = empty(out_shape, x.dtype());
    dispatch_all(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* px = xc.data<T>();
      T* po = out.data<T>();
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t k = 0; k < k_count; ++k)
          for (std::int64_t i = 0; i < inner; ++i)
            po[(o * k_count + k) * inner + i] = px[(o * n + pi[k]) * inner + i];
    });
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<IndexSelect>();
      node->index = idx;
      node->dim = d;
      connect(node, {&x}, out);
    }
    return out;
  }

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    const Shape& x_shape = input_shapes[0];
    Tensor grad_x = zeros(x_shape, grad_output.dtype());
    Tensor grad_output_c = contiguous(grad_output);
    const std::int64_t* pi = index.data<std::int64_t>();
    const std::int64_t n = x_shape[dim], k_count = index.numel();
    std::int64_t outer = 1, inner = 1;
    for (std::int64_t q = 0; q < dim; ++q) outer *= x_shape[q];
    for (std::int64_t q = dim + 1; q < static_cast<std::int64_t>(x_shape.size()); ++q) inner *= x_shape[q];
    dispatch_float(grad_output.dtype(), "index_select backward", [&](auto tag) {
      using T = decltype(tag);
      const T* p_grad_output = grad_output_c.data<T>();
      T* px = grad_x.data<T>();
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t k = 0; k < k_count; ++k)
          for (std::int64_t i = 0; i < inner; ++i)
            px[(o * n + pi[k]) * inner + i] += p_grad_output[(o * k_count + k) * inner + i];  // += : repeats add up
    });
    return {grad_x};
  }
  void release_saved() override { index = Tensor(); }
};

Tensor index_select(const Tensor& x, std::int64_t dim, const Tensor& index) {
  return IndexSelect::forward(x, dim, index);
}

// ---- Embedding: out[p, :] = weight[ids[p], :] --------------------------------------------
// weight: (V, D) float, ids: any shape int64 in [0, V) -> out: ids.shape + (D).
// Backward (scatter-add into zeros (V, D)): grad_w[ids[p], :] += grad_output[p, :], skipping every p
// with ids[p] == padding_idx, so the padding row's gradient is exactly zero.
// Saves: ids (contiguous) and padding_idx.
struct Embedding final : Node {
  Tensor ids;
  std::int64_t padding_idx = -1;
  const char* name() const override { return "Embedding"; }

  static Tensor forward(const Tensor& weight, const Tensor& ids, std::int64_t padding_idx) {
    check_float(weight, "embedding");
    SF_EXPECT(weight.dim() == 2, "embedding: expected a weight of shape (V, D), got shape ", weight.shape());
    SF_EXPECT(ids.dtype() == Dtype::Int64, "embedding: expected int64 ids, got ", dtype_name(ids.dtype()));
    const std::int64_t V = weight.shape()[0], D = weight.shape()[1];
    SF_EXPECT(padding_idx < V, "embedding: padding_idx ", padding_idx, " is out of range for a vocabulary of ", V,
              " rows");
    Tensor idc = contiguous(ids);
    const std::int64_t* pid = idc.data<std::int64_t>();
    const std::int64_t n = idc.numel();
    for (std::int64_t p = 0; p < n; ++p)
      SF_EXPECT(pid[p] >= 0 && pid[p] < V, "embedding: id ", pid[p], " at position ", position_str(p, ids.shape()),
                " of ids with shape ", ids.shape(), " is out of range [0, ", V, ") for weight of shape ", weight.shape());
    Shape out_shape = ids.shape();
    out_shape.push_back(D);
    Tensor wc = contiguous(weight.detach());
    Tensor out = empty(out_shape, weight.dtype());
    dispatch_float(weight.dtype(), "embedding", [&](auto tag) {
      using T = decltype(tag);
      const T* pw = wc.data<T>();
      T* po = out.data<T>();
#pragma omp parallel for if (n * D > kParallelMinElements)
      for (std::int64_t p = 0; p < n; ++p)
        for (std::int64_t j = 0; j < D; ++j) po[p * D + j] = pw[pid[p] * D + j];
    });
    if (any_requires_grad({&weight})) {
      auto node = std::make_shared<Embedding>();
      node->ids = idc;
      node->padding_idx = padding_idx;
      connect(node, {&weight}, out);
    }
    return out;
  }

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    // EXERCISE(embedding): out[p, :] = weight[ids[p], :], so return {grad_w}: (V, D), zeros except
    // grad_w[ids[p], :] += grad_output[p, :] for every position p (a repeated id accumulates); skip
    // every p whose id is padding_idx, so the padding row's gradient stays exactly zero.
    // BEGIN SOLUTION
    const std::int64_t D = input_shapes[0][1];
    Tensor grad_w = zeros(input_shapes[0], grad_output.dtype());
    Tensor grad_output_c = contiguous(grad_output);
    const std::int64_t* pid = ids.data<std::int64_t>();
    const std::int64_t n = ids.numel();
    dispatch_float(grad_output.dtype(), "embedding backward", [&](auto tag) {
      using T = decltype(tag);
      const T* p_grad_output = grad_output_c.data<T>();
      T* pw = grad_w.data<T>();
      for (std::int64_t p = 0; p < n; ++p) {
        if (pid[p] == padding_idx) continue;  // the padding row learns nothing
        for (std::int64_t j = 0; j < D; ++j) pw[pid[p] * D + j] += p_grad_output[p * D + j];
      }
    });
    return {grad_w};
    // END SOLUTION
  }
  void release_saved() override { ids = Tensor(); }
};

Tensor embedding(const Tensor& weight, const Tensor& ids, std::int64_t padding_idx) {
  return Embedding::forward(weight, ids, padding_idx);
}

// ---- MaskedFill: out = mask ? value : x ---------------------------------------------------
// x: any shape, mask: any dtype (nonzero = true) broadcastable to x's shape -> out: x's shape.
// Backward: grad_x = grad_output where mask is false, 0 where true (filled elements do not
// depend on x).
// Saves: the mask as bool, at its own (unbroadcast) shape: a (T, T) causal mask stays small
// even when x is (B, H, T, T).
struct MaskedFill final : Node {
  Tensor mask;
  const char* name() const override { return "MaskedFill"; }

  static Tensor forward(const Tensor& x, const Tensor& mask, double value) {
    SF_EXPECT(broadcasts_to(mask.shape(), x.shape()), "masked_fill: mask of shape ", mask.shape(),
              " cannot be broadcast to x's shape ", x.shape());
    Tensor m = to_dtype(mask.detach(), Dtype::Bool);
    const Shape sm = broadcast_strides(m, x.shape());
    const bool* pm = m.data<bool>();
    Tensor out = empty(x.shape(), x.dtype());
    dispatch_all(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* px = x.data<T>();
      T* po = out.data<T>();
      const T v = static_cast<T>(value);
      for_each_strided<3>(x.shape(), {&out.strides(), &x.strides(), &sm},
                          [&](std::int64_t o, std::int64_t ix, std::int64_t im) { po[o] = pm[im] ? v : px[ix]; });
    });
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<MaskedFill>();
      node->mask = m;
      connect(node, {&x}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    return {zero_where(grad_output, mask, /*zero_when=*/true)};
  }
  void release_saved() override { mask = Tensor(); }
};

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  return MaskedFill::forward(x, mask, value);
}

// ---- Where: out = cond ? a : b ------------------------------------------------------------
// cond (any dtype, nonzero = true), a, b: broadcast together -> out: the broadcast shape.
// Backward: grad_a = sum_to(grad_output where cond, a.shape),
//           grad_b = sum_to(grad_output where !cond, b.shape).
// cond gets no gradient (it is a selector, not a value); the node's inputs are a and b.
// Saves: cond as bool, at its own shape.
struct Where final : Node {
  Tensor cond;
  const char* name() const override { return "Where"; }

  static Tensor forward(const Tensor& cond, const Tensor& a, const Tensor& b) {
    check_same_dtype(a, b, "where");
    const Shape out_shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
    Tensor c = to_dtype(cond.detach(), Dtype::Bool);
    const Shape sc = broadcast_strides(c, out_shape), sa = broadcast_strides(a, out_shape),
                sb = broadcast_strides(b, out_shape);
    const bool* pc = c.data<bool>();
    Tensor out = empty(out_shape, a.dtype());
    dispatch_all(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* pa = a.data<T>();
      const T* pb = b.data<T>();
      T* po = out.data<T>();
      for_each_strided<4>(out_shape, {&out.strides(), &sc, &sa, &sb},
                          [&](std::int64_t o, std::int64_t ic, std::int64_t ia, std::int64_t ib) {
                            po[o] = pc[ic] ? pa[ia] : pb[ib];
                          });
    });
    if (any_requires_grad({&a, &b})) {
      auto node = std::make_shared<Where>();
      node->cond = c;
      connect(node, {&a, &b}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    Tensor grad_a, grad_b;
    if (needs_input_grad(0)) grad_a = sum_to(zero_where(grad_output, cond, /*zero_when=*/false), input_shapes[0]);
    if (needs_input_grad(1)) grad_b = sum_to(zero_where(grad_output, cond, /*zero_when=*/true), input_shapes[1]);
    return {grad_a, grad_b};
  }
  void release_saved() override { cond = Tensor(); }
};

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) { return Where::forward(cond, a, b); }

}  // namespace sf
