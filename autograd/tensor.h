// Tensor: an n-dimensional array over shared storage, with reverse-mode autograd.
//
// A Tensor is a cheap handle (one shared_ptr) to a TensorImpl, which holds
//   storage   the bytes, shared between a tensor and all its views
//   shape     sizes per dimension, e.g. {B, T, D}
//   strides   elements to skip to move one step along each dimension
//   offset    index of element [0,0,...] inside the storage (in elements)
//   dtype     float32, float64 (gradient checks), int64 (token ids), bool (masks)
// and the autograd fields: requires_grad, grad (accumulated gradient) and grad_fn (the graph
// node of the op that made this tensor; empty for leaves such as parameters and inputs).
//
// Views (view, reshape when possible, permute, transpose, narrow, unsqueeze, squeeze, expand)
// make a new TensorImpl over the same storage and copy nothing. contiguous() copies only when
// the strides are not already row-major.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace sf {

enum class Dtype : std::uint8_t { Float32, Float64, Int64, Bool };

const char* dtype_name(Dtype dtype);  // "float32", ...
std::size_t dtype_size(Dtype dtype);  // bytes per element
bool is_floating(Dtype dtype);

using Shape = std::vector<std::int64_t>;

// "(2, 3, 4)": the form used in every error message and in printing.
std::string shape_str(const Shape& shape);
std::int64_t shape_numel(const Shape& shape);
Shape contiguous_strides(const Shape& shape);
// NumPy broadcasting: align from the right; sizes must match or be 1. Throws naming both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Wraps a negative dim (-1 = last) and checks it is in range; `op` names the caller in errors.
std::int64_t wrap_dim(std::int64_t dim, std::int64_t ndim, const char* op);

// Raw memory, 64-byte aligned. Uninitialised: factories fill it.
struct Storage {
  void* data = nullptr;
  std::size_t nbytes = 0;
  std::size_t capacity = 0;  // > 0: a big block from fast::allocate_block (its real size), returned there
  explicit Storage(std::size_t nbytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

struct Node;  // autograd/node.h

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;
  std::int64_t offset = 0;
  Dtype dtype = Dtype::Float32;

  bool requires_grad = false;
  bool retains_grad = false;             // non-leaf that keeps its .grad (see Tensor::retain_grad)
  std::shared_ptr<TensorImpl> grad;      // accumulated gradient, same shape as this tensor
  std::shared_ptr<Node> grad_fn;         // op that produced this tensor; null for a leaf
  std::string name;                      // optional label (parameter name) for printing
};

class Generator;

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor (like an empty optional)
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  // ---- metadata ----
  const Shape& shape() const;
  const Shape& strides() const;
  std::int64_t offset() const;
  std::int64_t dim() const;
  std::int64_t size(std::int64_t d) const;  // d may be negative
  std::int64_t numel() const;
  Dtype dtype() const;
  bool is_contiguous() const;

  // ---- data access ----
  // Typed pointer to element [0,...,0] (storage + offset). Throws if T does not match dtype.
  template <class T> T* data() const;
  void* raw_data() const;  // untyped pointer to element [0,...,0]
  double item() const;     // the value of a one-element tensor
  double at(const Shape& index) const;       // element at a full index, as double
  void set(const Shape& index, double value);  // write one element (no autograd)
  template <class T> std::vector<T> to_vector() const;  // row-major copy of the values

  // ---- autograd ----
  bool requires_grad() const;
  Tensor& requires_grad_(bool on = true);  // only for leaves
  bool is_leaf() const;
  Tensor grad() const;  // undefined if no gradient has been accumulated
  void zero_grad();     // drop the accumulated gradient
  const std::shared_ptr<Node>& grad_fn() const;
  void retain_grad();   // keep .grad on a non-leaf after backward (for inspection)
  // Backpropagate from this tensor. A scalar needs no `grad_output` (it is 1); otherwise pass a
  // tensor of this tensor's shape. The graph's saved tensors are freed unless retain_graph.
  void backward(const Tensor& grad_output = Tensor(), bool retain_graph = false) const;
  Tensor detach() const;  // same storage, no history, requires_grad false
  Tensor& set_name(std::string name);
  const std::string& name() const;

  // ---- in-place writes (no autograd: only on tensors that do not require grad, or under
  // NoGradGuard, e.g. an optimizer step) ----
  Tensor& fill_(double value);
  Tensor& copy_(const Tensor& src);  // src broadcast to this shape, converted to this dtype

  // ---- views and copies (also available as free functions in ops.h) ----
  Tensor view(const Shape& shape) const;     // must be expressible without a copy
  Tensor reshape(const Shape& shape) const;  // view when possible, copy otherwise
  Tensor permute(const Shape& dims) const;
  Tensor transpose(std::int64_t d0, std::int64_t d1) const;
  Tensor narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const;
  Tensor unsqueeze(std::int64_t dim) const;
  Tensor squeeze(std::int64_t dim) const;
  Tensor expand(const Shape& shape) const;
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(Dtype dtype) const;

  std::string to_string() const;  // PyTorch-like printing (see print.cpp)

 private:
  void check_defined(const char* what) const;
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// ---- factories ----
Tensor empty(const Shape& shape, Dtype dtype = Dtype::Float32);  // uninitialised
Tensor zeros(const Shape& shape, Dtype dtype = Dtype::Float32);
Tensor ones(const Shape& shape, Dtype dtype = Dtype::Float32);
Tensor full(const Shape& shape, double value, Dtype dtype = Dtype::Float32);
Tensor scalar_tensor(double value, Dtype dtype = Dtype::Float32);  // 0-d
Tensor arange(double start, double end, double step = 1.0, Dtype dtype = Dtype::Float32);
Tensor arange(std::int64_t n, Dtype dtype = Dtype::Int64);  // 0, 1, ..., n-1
Tensor randn(const Shape& shape, Generator& gen, Dtype dtype = Dtype::Float32);  // N(0, 1)
Tensor rand(const Shape& shape, Generator& gen, Dtype dtype = Dtype::Float32);   // U[0, 1)
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
// Copies `values` into a new tensor of `shape` (the element type chooses the dtype:
// float -> float32, double -> float64, int64_t/int -> int64, bool -> bool).
template <class T> Tensor from_vector(const std::vector<T>& values, const Shape& shape);
template <> Tensor from_vector<bool>(const std::vector<bool>& values, const Shape& shape);
// A float tensor of the given dtype from doubles (handy in tests).
Tensor from_vector(const std::vector<double>& values, const Shape& shape, Dtype dtype);

// Makes a TensorImpl view over an existing tensor's storage (used by the view ops).
Tensor make_view(const Tensor& base, Shape shape, Shape strides, std::int64_t offset);

}  // namespace sf
