// Comparisons: eq, ne. Element-wise against a scalar, giving bool tensors (for building masks).
// Not differentiable: no node is recorded, the result never requires grad.
#include "autograd/kernels.h"
#include "autograd/ops.h"

namespace sf {

// ---- eq / ne: element-wise comparison with a scalar, no autograd --------------------------
// a: any shape, any dtype -> out: a's shape, bool. NaN is equal to nothing (IEEE).
namespace {
Tensor compare_scalar(const Tensor& a, double value, bool want_equal) {
  Tensor out = empty(a.shape(), Dtype::Bool);
  bool* po = out.data<bool>();
  dispatch_all(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    for_each_strided<2>(a.shape(), {&out.strides(), &a.strides()}, [&](std::int64_t o, std::int64_t ia) {
      po[o] = (static_cast<double>(pa[ia]) == value) == want_equal;
    });
  });
  return out;
}
}  // namespace

Tensor eq(const Tensor& a, double value) { return compare_scalar(a, value, true); }
Tensor ne(const Tensor& a, double value) { return compare_scalar(a, value, false); }

}  // namespace sf
