// Reductions over chosen dims: sum, mean, max (keepdim optional), and sum_to.
//
// The trick used by every kernel here: view the output (with keepdim) as broadcast back to the
// input's shape, so its stride is 0 on each reduced dim. Walking the input then visits, for
// each input element, the one output element it reduces into.
#include <algorithm>
#include <limits>
#include <stdexcept>

#include "autograd/fast.h"
#include "autograd/kernels.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace sf {

namespace {

// Which dims are reduced: `dims` wrapped and de-duplicated; empty means all.
std::vector<bool> reduced_mask(const Tensor& x, const std::vector<std::int64_t>& dims, const char* op) {
  std::vector<bool> mask(x.dim(), dims.empty());
  for (std::int64_t d : dims) {
    const std::int64_t w = wrap_dim(d, x.dim(), op);
    SF_EXPECT(!mask[w], op, ": dim ", d, " listed twice");
    mask[w] = true;
  }
  return mask;
}

Shape keepdim_shape(const Shape& in, const std::vector<bool>& mask) {
  Shape s = in;
  for (std::size_t d = 0; d < s.size(); ++d)
    if (mask[d]) s[d] = 1;
  return s;
}

Shape squeezed_shape(const Shape& in, const std::vector<bool>& mask) {
  Shape s;
  for (std::size_t d = 0; d < in.size(); ++d)
    if (!mask[d]) s.push_back(in[d]);
  return s;
}

// out (keepdim shape) = sum of x over the masked dims, accumulated in double.
Tensor sum_kernel(const Tensor& x, const std::vector<bool>& mask) {
  const Shape out_shape = keepdim_shape(x.shape(), mask);
  std::vector<double> acc(static_cast<std::size_t>(shape_numel(out_shape)), 0.0);
  Tensor out = empty(out_shape, x.dtype());
  const bool done_fast = fast::kEnabled && fast::sum(x, mask, acc.data());
  dispatch_float(x.dtype(), "sum", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    if (!done_fast) {  // walk x; so (the output's strides, 0 on reduced dims) names each element's sum
      const Shape so = broadcast_strides(out, x.shape());
      for_each_strided<2>(x.shape(), {&x.strides(), &so},
                          [&](std::int64_t ix, std::int64_t o) { acc[o] += px[ix]; });
    }
    T* po = out.data<T>();
    for (std::size_t i = 0; i < acc.size(); ++i) po[i] = static_cast<T>(acc[i]);
  });
  return out;
}

}  // namespace

// ---- Sum: out = sum of x over dims ------------------------------------------------------
// x: (d0, ..., dn) -> out: x's shape without the reduced dims (or with size 1, keepdim).
// Backward: every input element contributed once, so its gradient is the output gradient,
// broadcast back. Saves: the keepdim shape (on the node).
struct Sum final : Node {
  Shape keep_shape;
  const char* name() const override { return "Sum"; }
  static Tensor forward(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
    check_float(x, "sum");
    const std::vector<bool> mask = reduced_mask(x, dims, "sum");
    Tensor out = sum_kernel(x, mask);
    if (!keepdim) out = make_view(out, squeezed_shape(x.shape(), mask),
                                  contiguous_strides(squeezed_shape(x.shape(), mask)), 0);
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Sum>();
      node->keep_shape = keepdim_shape(x.shape(), mask);
      connect(node, {&x}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    return {expand(reshape(grad_output, keep_shape), input_shapes[0])};  // grad_x[i] = grad_output[reduced i]
  }
};

Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  return Sum::forward(x, dims, keepdim);
}
Tensor sum(const Tensor& x) { return Sum::forward(x, {}, false); }

// mean = sum / (number of elements reduced), composed from Sum and Div.
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  const std::vector<bool> mask = reduced_mask(x, dims, "mean");
  std::int64_t count = 1;
  for (std::int64_t d = 0; d < x.dim(); ++d)
    if (mask[d]) count *= x.shape()[d];
  return div(sum(x, dims, keepdim), static_cast<double>(count));
}
Tensor mean(const Tensor& x) { return mean(x, {}, false); }

// ---- Max: out = max of x over dims -------------------------------------------------------
// Backward: the gradient flows only to the (first) position that held the maximum.
// Saves: for each output element, the flat row-major index of its argmax in x.
struct Max final : Node {
  std::vector<std::int64_t> argmax;
  const char* name() const override { return "Max"; }
  static Tensor forward(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
    check_float(x, "max");
    if (x.numel() == 0) throw std::invalid_argument("max: the tensor is empty " + shape_str(x.shape()));
    const std::vector<bool> mask = reduced_mask(x, dims, "max");
    const Shape keep = keepdim_shape(x.shape(), mask);
    Tensor out = empty(keep, x.dtype());
    std::vector<std::int64_t> argmax(static_cast<std::size_t>(out.numel()), -1);
    dispatch_float(x.dtype(), "max", [&](auto tag) {
      using T = decltype(tag);
      const T* px = x.data<T>();
      T* po = out.data<T>();
      const Shape so = broadcast_strides(out, x.shape());
      const Shape flat = contiguous_strides(x.shape());  // counts the flat index as we walk
      for_each_strided<3>(x.shape(), {&x.strides(), &so, &flat},
                          [&](std::int64_t ix, std::int64_t o, std::int64_t f) {
                            // NaN wins, as in torch.max; ties keep the first
                            if (argmax[o] < 0 || px[ix] > po[o] || (px[ix] != px[ix] && po[o] == po[o])) {
                              po[o] = px[ix];
                              argmax[o] = f;
                            }
                          });
    });
    if (!keepdim) {
      const Shape sq = squeezed_shape(x.shape(), mask);
      out = make_view(out, sq, contiguous_strides(sq), 0);
    }
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Max>();
      node->argmax = std::move(argmax);
      connect(node, {&x}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    Tensor grad_x = zeros(input_shapes[0], grad_output.dtype());  // zero except at each argmax
    Tensor grad_output_c = contiguous(grad_output);
    dispatch_float(grad_output.dtype(), "max backward", [&](auto tag) {
      using T = decltype(tag);
      const T* p_grad_output = grad_output_c.data<T>();
      T* px = grad_x.data<T>();
      for (std::size_t o = 0; o < argmax.size(); ++o) px[argmax[o]] += p_grad_output[o];
    });
    return {grad_x};
  }
  void release_saved() override { argmax.clear(); argmax.shrink_to_fit(); }
};

Tensor max(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  return Max::forward(x, dims, keepdim);
}
Tensor max(const Tensor& x) { return Max::forward(x, {}, false); }

// ---- sum_to: the backward of broadcasting ------------------------------------------------
// x: a shape that `shape` broadcasts to -> out: `shape`, summing over the broadcast dims.
Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const std::int64_t lead = x.dim() - static_cast<std::int64_t>(shape.size());
  SF_EXPECT(lead >= 0, "sum_to: cannot sum shape ", x.shape(), " to ", shape);
  std::vector<std::int64_t> dims;
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
    } else if (shape[d - lead] == 1 && x.shape()[d] != 1) {
      dims.push_back(d);
    } else if (shape[d - lead] != x.shape()[d]) {
      throw std::invalid_argument("sum_to: cannot sum shape " + shape_str(x.shape()) + " to " + shape_str(shape));
    }
  }
  if (dims.empty()) return reshape(x, shape);
  return reshape(sum(x, dims, true), shape);
}

}  // namespace sf
