// Shape ops: views that copy nothing (view, reshape, permute, transpose, narrow, unsqueeze,
// squeeze, expand) and the ops that do copy (contiguous, clone, to_dtype, cat, stack).
//
// A view is a new TensorImpl over the same storage with other shape/strides/offset, so writing
// through a view is seen by its base. Each view's backward maps the gradient back to the
// input's shape: reshape it, permute it back, pad it with zeros, or sum it over the broadcast.
#include <numeric>
#include <stdexcept>
#include <string>

#include "autograd/kernels.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace sf {

namespace {
// Replaces a single -1 in `shape` by the size that keeps numel unchanged.
Shape infer_shape(const Shape& shape, std::int64_t numel, const char* op, const Shape& from) {
  Shape out = shape;
  std::int64_t known = 1, infer_at = -1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      SF_EXPECT(infer_at < 0, op, ": only one size may be -1, got ", shape);
      infer_at = static_cast<std::int64_t>(i);
    } else if (out[i] < 0) {
      throw std::invalid_argument(std::string(op) + ": negative size in " + shape_str(shape));
    } else {
      known *= out[i];
    }
  }
  if (infer_at >= 0) {
    SF_EXPECT(known != 0 && numel % known == 0, op, ": cannot view shape ", from, " (", numel, " elements) as ", shape);
    out[infer_at] = numel / known;
  }
  SF_EXPECT(shape_numel(out) == numel, op, ": cannot view shape ", from, " (", numel, " elements) as ", shape, " (",
            shape_numel(out), " elements)");
  return out;
}
}  // namespace

// ---- View: any op that only changes the shape (view, reshape, unsqueeze, squeeze) ----------
// x: any shape -> out: same elements, new shape. Saves: nothing (input shape is on the node).
struct View final : Node {
  const char* op_name = "View";
  const char* name() const override { return op_name; }

  static Tensor forward(const Tensor& x, const Shape& new_shape, const char* op_name) {
    SF_EXPECT(x.is_contiguous(), op_name, ": tensor of shape ", x.shape(), " with strides ", x.strides(),
              " is not contiguous; use reshape() or contiguous() first");
    Tensor out = make_view(x, new_shape, contiguous_strides(new_shape), x.offset());
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<View>();
      node->op_name = op_name;
      connect(node, {&x}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    return {reshape(grad_output, input_shapes[0])};  // grad_x: (input shape)
  }
};

Tensor view(const Tensor& x, const Shape& shape) {
  return View::forward(x, infer_shape(shape, x.numel(), "view", x.shape()), "View");
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  const Shape s = infer_shape(shape, x.numel(), "reshape", x.shape());
  if (x.is_contiguous()) return View::forward(x, s, "Reshape");
  return View::forward(contiguous(x), s, "Reshape");  // copies, then views
}

Tensor unsqueeze(const Tensor& x, std::int64_t dim) {
  const std::int64_t d = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  Shape s = x.shape();
  s.insert(s.begin() + d, 1);
  Shape st = x.strides();
  // The new dim has size 1, so its stride never matters; pick the natural one.
  st.insert(st.begin() + d, d < x.dim() ? x.strides()[d] * x.shape()[d] : 1);
  Tensor out = make_view(x, s, st, x.offset());
  if (any_requires_grad({&x})) {
    auto node = std::make_shared<View>();
    node->op_name = "Unsqueeze";
    connect(node, {&x}, out);
  }
  return out;
}

Tensor squeeze(const Tensor& x, std::int64_t dim) {
  const std::int64_t d = wrap_dim(dim, x.dim(), "squeeze");
  if (x.shape()[d] != 1)
    throw std::invalid_argument("squeeze: dim " + std::to_string(dim) + " of shape " +
                                shape_str(x.shape()) + " has size " + std::to_string(x.shape()[d]) +
                                ", expected 1");
  Shape s = x.shape(), st = x.strides();
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  Tensor out = make_view(x, s, st, x.offset());
  if (any_requires_grad({&x})) {
    auto node = std::make_shared<View>();
    node->op_name = "Squeeze";
    connect(node, {&x}, out);
  }
  return out;
}

// ---- Permute: reorder dims ---------------------------------------------------------------
// x: (d0, d1, ...) -> out: (d_p0, d_p1, ...). Saves: the permutation.
struct Permute final : Node {
  Shape dims;
  const char* name() const override { return "Permute"; }

  static Tensor forward(const Tensor& x, const Shape& dims) {
    const std::int64_t n = x.dim();
    SF_EXPECT(static_cast<std::int64_t>(dims.size()) == n, "permute: ", dims, " does not list all ", n,
              " dims of shape ", x.shape());
    Shape wrapped(n), s(n), st(n);
    std::vector<bool> seen(n, false);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t d = wrap_dim(dims[i], n, "permute");
      SF_EXPECT(!seen[d], "permute: dim ", d, " repeated in ", dims);
      seen[d] = true;
      wrapped[i] = d;
      s[i] = x.shape()[d];
      st[i] = x.strides()[d];
    }
    Tensor out = make_view(x, s, st, x.offset());
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Permute>();
      node->dims = wrapped;
      connect(node, {&x}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    Shape inverse(dims.size());
    for (std::size_t i = 0; i < dims.size(); ++i) inverse[dims[i]] = static_cast<std::int64_t>(i);
    return {permute(grad_output, inverse)};
  }
};

Tensor permute(const Tensor& x, const Shape& dims) { return Permute::forward(x, dims); }

Tensor transpose(const Tensor& x, std::int64_t d0, std::int64_t d1) {
  Shape dims(x.dim());
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[wrap_dim(d0, x.dim(), "transpose")], dims[wrap_dim(d1, x.dim(), "transpose")]);
  return Permute::forward(x, dims);
}

// ---- Narrow: a slice [start, start+length) along one dim ----------------------------------
// x: (..., n, ...) -> out: (..., length, ...). Saves: dim and start.
struct Narrow final : Node {
  std::int64_t dim = 0, start = 0;
  const char* name() const override { return "Narrow"; }

  static Tensor forward(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t length) {
    const std::int64_t d = wrap_dim(dim, x.dim(), "narrow");
    if (start < 0 || length < 0 || start + length > x.shape()[d])
      throw std::out_of_range("narrow: [" + std::to_string(start) + ", " + std::to_string(start + length) +
                              ") is outside dim " + std::to_string(d) + " of shape " + shape_str(x.shape()));
    Shape s = x.shape();
    s[d] = length;
    Tensor out = make_view(x, s, x.strides(), x.offset() + start * x.strides()[d]);
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Narrow>();
      node->dim = d;
      node->start = start;
      connect(node, {&x}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    // grad_x: zeros of the input's shape with grad_output written into the slice
    Tensor grad_x = zeros(input_shapes[0], grad_output.dtype());
    grad_x.narrow(dim, start, grad_output.shape()[dim]).copy_(grad_output);
    return {grad_x};
  }
};

Tensor narrow(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t length) {
  return Narrow::forward(x, dim, start, length);
}

// ---- Expand: broadcast a tensor to a larger shape (stride 0, no copy) ---------------------
// x: (1, n) -> out: (m, n). Backward sums the gradient over the broadcast dims.
struct Expand final : Node {
  const char* name() const override { return "Expand"; }

  static Tensor forward(const Tensor& x, const Shape& shape) {
    const Shape target = broadcast_shapes(x.shape(), shape, "expand");
    if (target != shape)
      throw std::invalid_argument("expand: shape " + shape_str(x.shape()) + " cannot be expanded to " +
                                  shape_str(shape));
    Tensor out = make_view(x, shape, broadcast_strides(x, shape), x.offset());
    if (any_requires_grad({&x})) connect(std::make_shared<Expand>(), {&x}, out);
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    return {sum_to(grad_output, input_shapes[0])};
  }
};

Tensor expand(const Tensor& x, const Shape& shape) { return Expand::forward(x, shape); }

// ---- Copy: contiguous / clone / dtype conversion ------------------------------------------
// x: any -> out: same shape, fresh row-major storage. Backward: the gradient passes through
// (converted back to the input's dtype when the op changed it).
struct Copy final : Node {
  const char* op_name = "Clone";
  Dtype input_dtype = Dtype::Float32;
  const char* name() const override { return op_name; }

  static Tensor forward(const Tensor& x, Dtype dtype, const char* op_name) {
    Tensor out = empty(x.shape(), dtype);
    out.copy_(x.detach());
    if (is_floating(dtype) && any_requires_grad({&x})) {
      auto node = std::make_shared<Copy>();
      node->op_name = op_name;
      node->input_dtype = x.dtype();
      connect(node, {&x}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    return {grad_output.dtype() == input_dtype ? grad_output : to_dtype(grad_output, input_dtype)};
  }
};

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  return Copy::forward(x, x.dtype(), "Contiguous");
}

Tensor clone(const Tensor& x) { return Copy::forward(x, x.dtype(), "Clone"); }

Tensor to_dtype(const Tensor& x, Dtype dtype) {
  if (x.dtype() == dtype) return x;
  return Copy::forward(x, dtype, "ToDtype");
}

// ---- Cat: join tensors along an existing dim ----------------------------------------------
// xs[i]: (..., n_i, ...) -> out: (..., sum n_i, ...). Saves: the sizes n_i.
struct Cat final : Node {
  std::int64_t dim = 0;
  Shape sizes;  // n_i per input
  const char* name() const override { return "Cat"; }

  static Tensor forward(const std::vector<Tensor>& xs, std::int64_t dim) {
    if (xs.empty()) throw std::invalid_argument("cat: expected at least one tensor");
    const std::int64_t d = wrap_dim(dim, xs[0].dim(), "cat");
    Shape out_shape = xs[0].shape();
    out_shape[d] = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      check_same_dtype(xs[0], xs[i], "cat");
      Shape a = xs[0].shape(), b = xs[i].shape();
      if (a.size() != b.size() || (a[d] = 0, b[d] = 0, a != b))
        throw std::invalid_argument("cat: tensor 0 has shape " + shape_str(xs[0].shape()) + " but tensor " +
                                    std::to_string(i) + " has shape " + shape_str(xs[i].shape()) +
                                    "; all dims but " + std::to_string(d) + " must match");
      out_shape[d] += xs[i].shape()[d];
    }
    Tensor out = empty(out_shape, xs[0].dtype());
    auto node = any_requires_grad(xs) ? std::make_shared<Cat>() : nullptr;
    std::int64_t at = 0;
    for (const Tensor& x : xs) {
      out.narrow(d, at, x.shape()[d]).copy_(x.detach());
      if (node) node->sizes.push_back(x.shape()[d]);
      at += x.shape()[d];
    }
    if (node) {
      node->dim = d;
      connect_all(node, xs, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    std::vector<Tensor> grads;
    std::int64_t at = 0;
    for (std::int64_t n : sizes) {
      grads.push_back(grad_output.narrow(dim, at, n));  // grad_x_i: the slice it came from
      at += n;
    }
    return grads;
  }
};

Tensor cat(const std::vector<Tensor>& xs, std::int64_t dim) { return Cat::forward(xs, dim); }

Tensor stack(const std::vector<Tensor>& xs, std::int64_t dim) {
  if (xs.empty()) throw std::invalid_argument("stack: expected at least one tensor");
  const std::int64_t d = wrap_dim(dim, xs[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (xs[i].shape() != xs[0].shape())
      throw std::invalid_argument("stack: tensor 0 has shape " + shape_str(xs[0].shape()) + " but tensor " +
                                  std::to_string(i) + " has shape " + shape_str(xs[i].shape()));
    parts.push_back(unsqueeze(xs[i], d));
  }
  return cat(parts, d);
}

}  // namespace sf
