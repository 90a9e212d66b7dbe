// Tensor: storage, metadata, element access, factories. Ops live in ops_*.cpp.
#include "autograd/tensor.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>
#include <stdexcept>

#include "autograd/fast.h"
#include "autograd/generator.h"
#include "autograd/kernels.h"
#include "autograd/runtime/memory_stats.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace sf {

// ---------------------------------------------------------------- dtype and shape helpers

const char* dtype_name(Dtype dtype) {
  switch (dtype) {
    case Dtype::Float32: return "float32";
    case Dtype::Float64: return "float64";
    case Dtype::Int64: return "int64";
    case Dtype::Bool: return "bool";
  }
  return "?";
}

std::size_t dtype_size(Dtype dtype) {
  switch (dtype) {
    case Dtype::Float32: return 4;
    case Dtype::Float64: return 8;
    case Dtype::Int64: return 8;
    case Dtype::Bool: return 1;
  }
  return 0;
}

bool is_floating(Dtype dtype) { return dtype == Dtype::Float32 || dtype == Dtype::Float64; }

std::string shape_str(const Shape& shape) {
  std::ostringstream os;
  os << "(";
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  if (shape.size() == 1) os << ",";
  os << ")";
  return os.str();
}

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  std::int64_t s = 1;
  for (std::int64_t d = static_cast<std::int64_t>(shape.size()) - 1; d >= 0; --d) {
    strides[d] = s;
    s *= shape[d];
  }
  return strides;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t sa = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t sb = i < n - b.size() ? 1 : b[i - (n - b.size())];
    SF_EXPECT(sa == sb || sa == 1 || sb == 1, op, ": shapes ", a, " and ", b, " cannot be broadcast together (dim ",
              i, ": ", sa, " vs ", sb, ")");
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

std::int64_t wrap_dim(std::int64_t dim, std::int64_t ndim, const char* op) {
  const std::int64_t wrapped = dim < 0 ? dim + ndim : dim;
  if (wrapped < 0 || wrapped >= std::max<std::int64_t>(ndim, 1))
    throw std::out_of_range(std::string(op) + ": dim " + std::to_string(dim) +
                            " is out of range for a tensor with " + std::to_string(ndim) +
                            " dims");
  return wrapped;
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  SF_EXPECT(a.dtype() == b.dtype(), op, ": dtypes differ (", dtype_name(a.dtype()), " vs ", dtype_name(b.dtype()),
            "); convert one with .to()");
}

void check_float(const Tensor& x, const char* op) {
  SF_EXPECT(is_floating(x.dtype()), op, ": expected a float32 or float64 tensor, got ", dtype_name(x.dtype()));
}

Shape broadcast_strides(const Tensor& t, const Shape& out) {
  const std::size_t n = out.size(), m = t.shape().size();
  Shape s(n, 0);
  for (std::size_t i = 0; i < m; ++i) {
    const std::size_t o = n - m + i;
    s[o] = t.shape()[i] == 1 && out[o] != 1 ? 0 : t.strides()[i];
  }
  return s;
}

// ---------------------------------------------------------------- storage

// Live and peak bytes of all storage (autograd/runtime/memory_stats.h), counted as requested (nbytes).
namespace {
std::atomic<std::int64_t> g_live_bytes{0};
std::atomic<std::int64_t> g_peak_bytes{0};

void count_allocated(std::size_t n) {
  const std::int64_t live = g_live_bytes.fetch_add(static_cast<std::int64_t>(n)) + static_cast<std::int64_t>(n);
  std::int64_t peak = g_peak_bytes.load();
  while (live > peak && !g_peak_bytes.compare_exchange_weak(peak, live)) {
  }
}
}  // namespace

MemoryStats memory_stats() { return {g_live_bytes.load(), g_peak_bytes.load()}; }
void reset_peak_memory() { g_peak_bytes.store(g_live_bytes.load()); }

// 64-byte aligned, so every row of floats starts on a cache line. Big blocks may come from the
// fast kernels' block cache instead (fast::allocate_block, autograd/fast.h).
Storage::Storage(std::size_t n) : nbytes(n) {
  if (fast::kEnabled) data = fast::allocate_block(n, &capacity);
  if (!data) {
    const std::size_t rounded = (n + 63) / 64 * 64;
    data = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (!data) throw std::bad_alloc();
  }
  count_allocated(nbytes);
}

Storage::~Storage() {
  if (capacity > 0) fast::release_block(data, capacity);
  else std::free(data);
  g_live_bytes.fetch_sub(static_cast<std::int64_t>(nbytes));
}

// ---------------------------------------------------------------- metadata

void Tensor::check_defined(const char* what) const {
  if (!impl_) throw std::logic_error(std::string("Tensor::") + what + ": the tensor is undefined");
}

const Shape& Tensor::shape() const { check_defined("shape"); return impl_->shape; }
const Shape& Tensor::strides() const { check_defined("strides"); return impl_->strides; }
std::int64_t Tensor::offset() const { check_defined("offset"); return impl_->offset; }
std::int64_t Tensor::dim() const { return static_cast<std::int64_t>(shape().size()); }
std::int64_t Tensor::size(std::int64_t d) const { return shape()[wrap_dim(d, dim(), "size")]; }
std::int64_t Tensor::numel() const { return shape_numel(shape()); }
Dtype Tensor::dtype() const { check_defined("dtype"); return impl_->dtype; }

bool Tensor::is_contiguous() const {
  std::int64_t expected = 1;
  for (std::int64_t d = dim() - 1; d >= 0; --d) {
    if (impl_->shape[d] != 1 && impl_->strides[d] != expected) return false;
    expected *= impl_->shape[d];
  }
  return true;
}

// ---------------------------------------------------------------- data access

template <class T> constexpr Dtype dtype_of();
template <> constexpr Dtype dtype_of<float>() { return Dtype::Float32; }
template <> constexpr Dtype dtype_of<double>() { return Dtype::Float64; }
template <> constexpr Dtype dtype_of<std::int64_t>() { return Dtype::Int64; }
template <> constexpr Dtype dtype_of<bool>() { return Dtype::Bool; }

template <class T> T* Tensor::data() const {
  check_defined("data");
  SF_EXPECT(impl_->dtype == dtype_of<T>(), "Tensor::data: tensor is ", dtype_name(impl_->dtype), ", asked for ",
            dtype_name(dtype_of<T>()));
  return static_cast<T*>(impl_->storage->data) + impl_->offset;
}
template float* Tensor::data<float>() const;
template double* Tensor::data<double>() const;
template std::int64_t* Tensor::data<std::int64_t>() const;
template bool* Tensor::data<bool>() const;

void* Tensor::raw_data() const {
  check_defined("raw_data");
  return static_cast<char*>(impl_->storage->data) + impl_->offset * dtype_size(impl_->dtype);
}

namespace {
std::int64_t element_offset(const Tensor& t, const Shape& index) {
  SF_EXPECT(static_cast<std::int64_t>(index.size()) == t.dim(), "Tensor::at: index ", index, " has ", index.size(),
            " entries, the tensor has shape ", t.shape());
  std::int64_t off = 0;
  for (std::size_t d = 0; d < index.size(); ++d) {
    const std::int64_t i = index[d] < 0 ? index[d] + t.shape()[d] : index[d];
    if (i < 0 || i >= t.shape()[d])
      throw std::out_of_range("Tensor::at: index " + shape_str(index) + " is out of range for shape " +
                              shape_str(t.shape()));
    off += i * t.strides()[d];
  }
  return off;
}
}  // namespace

double Tensor::at(const Shape& index) const {
  const std::int64_t off = element_offset(*this, index);
  return dispatch_all(dtype(), [&](auto tag) -> double {
    using T = decltype(tag);
    return static_cast<double>(data<T>()[off]);
  });
}

void Tensor::set(const Shape& index, double value) {
  const std::int64_t off = element_offset(*this, index);
  dispatch_all(dtype(), [&](auto tag) {
    using T = decltype(tag);
    data<T>()[off] = static_cast<T>(value);
  });
}

double Tensor::item() const {
  SF_EXPECT(numel() == 1, "Tensor::item: expected a tensor with one element, got shape ", shape());
  return dispatch_all(dtype(), [&](auto tag) -> double {
    using T = decltype(tag);
    return static_cast<double>(data<T>()[0]);  // the one element, at the tensor's offset
  });
}

template <class T> std::vector<T> Tensor::to_vector() const {
  Tensor c = contiguous();
  std::vector<T> out(static_cast<std::size_t>(c.numel()));
  dispatch_all(c.dtype(), [&](auto tag) {
    using S = decltype(tag);
    const S* p = c.data<S>();
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(p[i]);
  });
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<std::int64_t> Tensor::to_vector<std::int64_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;

// ---------------------------------------------------------------- autograd accessors

bool Tensor::requires_grad() const { check_defined("requires_grad"); return impl_->requires_grad; }

Tensor& Tensor::requires_grad_(bool on) {
  check_defined("requires_grad_");
  if (!is_leaf())
    throw std::logic_error("requires_grad_: only a leaf tensor's flag can be set (this one was made by " +
                           std::string(impl_->grad_fn->name()) + "); use detach() first");
  if (on && !is_floating(impl_->dtype))
    throw std::invalid_argument(std::string("requires_grad_: only float tensors can require grad, got ") +
                                dtype_name(impl_->dtype));
  impl_->requires_grad = on;
  return *this;
}

bool Tensor::is_leaf() const { check_defined("is_leaf"); return impl_->grad_fn == nullptr; }
Tensor Tensor::grad() const { check_defined("grad"); return Tensor(impl_->grad); }
void Tensor::zero_grad() { check_defined("zero_grad"); impl_->grad.reset(); }
const std::shared_ptr<Node>& Tensor::grad_fn() const { check_defined("grad_fn"); return impl_->grad_fn; }

void Tensor::retain_grad() {
  check_defined("retain_grad");
  if (!impl_->requires_grad)
    throw std::logic_error("retain_grad: the tensor does not require grad");
  impl_->retains_grad = true;
}

void Tensor::backward(const Tensor& grad_output, bool retain_graph) const {
  check_defined("backward");
  run_backward(*this, grad_output, retain_graph);
}

Tensor Tensor::detach() const {
  check_defined("detach");
  return make_view(*this, impl_->shape, impl_->strides, impl_->offset);
}

Tensor& Tensor::set_name(std::string name) { check_defined("set_name"); impl_->name = std::move(name); return *this; }
const std::string& Tensor::name() const { check_defined("name"); return impl_->name; }

// ---------------------------------------------------------------- in-place writes

namespace {
void check_inplace_allowed(const Tensor& t, const char* op) {
  if (t.requires_grad() && grad_enabled())
    throw std::logic_error(std::string(op) +
                           ": in-place write to a tensor that requires grad; wrap it in NoGradGuard "
                           "(as an optimizer step does) or detach() it");
}
}  // namespace

Tensor& Tensor::fill_(double value) {
  check_defined("fill_");
  check_inplace_allowed(*this, "fill_");
  dispatch_all(dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = data<T>();
    const T v = static_cast<T>(value);
    for_each_strided<1>(shape(), {&strides()}, [&](std::int64_t o) { p[o] = v; });
  });
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  check_defined("copy_");
  check_inplace_allowed(*this, "copy_");
  const Shape out = broadcast_shapes(shape(), src.shape(), "copy_");
  SF_EXPECT(out == shape(), "copy_: source shape ", src.shape(), " cannot be broadcast to destination shape ", shape());
  const Shape ss = broadcast_strides(src, shape());
  dispatch_all(dtype(), [&](auto dtag) {
    using D = decltype(dtag);
    dispatch_all(src.dtype(), [&](auto stag) {
      using S = decltype(stag);
      D* d = data<D>();
      const S* s = src.data<S>();
      parallel_for_each_strided<2>(shape(), {&strides(), &ss},
                                   [&](std::int64_t od, std::int64_t os) { d[od] = static_cast<D>(s[os]); });
    });
  });
  return *this;
}

// ---------------------------------------------------------------- views (forwarders)

Tensor Tensor::view(const Shape& s) const { return sf::view(*this, s); }
Tensor Tensor::reshape(const Shape& s) const { return sf::reshape(*this, s); }
Tensor Tensor::permute(const Shape& dims) const { return sf::permute(*this, dims); }
Tensor Tensor::transpose(std::int64_t d0, std::int64_t d1) const { return sf::transpose(*this, d0, d1); }
Tensor Tensor::narrow(std::int64_t d, std::int64_t start, std::int64_t len) const { return sf::narrow(*this, d, start, len); }
Tensor Tensor::unsqueeze(std::int64_t d) const { return sf::unsqueeze(*this, d); }
Tensor Tensor::squeeze(std::int64_t d) const { return sf::squeeze(*this, d); }
Tensor Tensor::expand(const Shape& s) const { return sf::expand(*this, s); }
Tensor Tensor::contiguous() const { return sf::contiguous(*this); }
Tensor Tensor::clone() const { return sf::clone(*this); }
Tensor Tensor::to(Dtype d) const { return sf::to_dtype(*this, d); }

Tensor make_view(const Tensor& base, Shape shape, Shape strides, std::int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl()->storage;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

// ---------------------------------------------------------------- factories

Tensor empty(const Shape& shape, Dtype dtype) {
  for (auto s : shape)
    SF_EXPECT(s >= 0, "empty: negative size in shape ", shape);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype));
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor full(const Shape& shape, double value, Dtype dtype) {
  Tensor t = empty(shape, dtype);
  dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    const std::int64_t n = t.numel();
    for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(value);
  });
  return t;
}

Tensor zeros(const Shape& shape, Dtype dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.raw_data(), 0, static_cast<std::size_t>(t.numel()) * dtype_size(dtype));
  return t;
}
Tensor ones(const Shape& shape, Dtype dtype) { return full(shape, 1.0, dtype); }
Tensor scalar_tensor(double value, Dtype dtype) { return full({}, value, dtype); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype()); }

Tensor arange(double start, double end, double step, Dtype dtype) {
  if (step == 0) throw std::invalid_argument("arange: step must be nonzero");
  const auto n = static_cast<std::int64_t>(std::max(0.0, std::ceil((end - start) / step)));
  Tensor t = empty({n}, dtype);
  for (std::int64_t i = 0; i < n; ++i) t.set({i}, start + static_cast<double>(i) * step);
  return t;
}
Tensor arange(std::int64_t n, Dtype dtype) { return arange(0.0, static_cast<double>(n), 1.0, dtype); }

Tensor randn(const Shape& shape, Generator& gen, Dtype dtype) {
  Tensor t = empty(shape, dtype);
  dispatch_float(dtype, "randn", [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (std::int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = static_cast<T>(gen.normal());
  });
  return t;
}

Tensor rand(const Shape& shape, Generator& gen, Dtype dtype) {
  Tensor t = empty(shape, dtype);
  dispatch_float(dtype, "rand", [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (std::int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = static_cast<T>(gen.uniform());
  });
  return t;
}

template <class T> Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
  using Stored = std::conditional_t<std::is_same_v<T, int>, std::int64_t, T>;
  SF_EXPECT(static_cast<std::int64_t>(values.size()) == shape_numel(shape), "from_vector: ", values.size(),
            " values do not fill shape ", shape, " (", shape_numel(shape), " elements)");
  Tensor t = empty(shape, dtype_of<Stored>());
  Stored* p = t.data<Stored>();
  for (std::size_t i = 0; i < values.size(); ++i) p[i] = static_cast<Stored>(values[i]);
  return t;
}
template Tensor from_vector<float>(const std::vector<float>&, const Shape&);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&);
template Tensor from_vector<std::int64_t>(const std::vector<std::int64_t>&, const Shape&);
template Tensor from_vector<int>(const std::vector<int>&, const Shape&);
template <> Tensor from_vector<bool>(const std::vector<bool>& values, const Shape& shape) {
  SF_EXPECT(static_cast<std::int64_t>(values.size()) == shape_numel(shape), "from_vector: ", values.size(),
            " values do not fill shape ", shape);
  Tensor t = empty(shape, Dtype::Bool);
  bool* p = t.data<bool>();
  for (std::size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}

Tensor from_vector(const std::vector<double>& values, const Shape& shape, Dtype dtype) {
  return from_vector<double>(values, shape).to(dtype);
}

}  // namespace sf
