// Dropout: out = x * keep / (1 - p), the random mask drawn from a Generator (nn::Dropout's op).
//
// x: any shape float -> out: x's shape. Each call draws ONE key = gen.next_u64(); then
// keep[i] = dropout_keeps(key, i, threshold) with threshold = ceil(p * 2^32), where i is the
// element's row-major position in x's logical shape (autograd/dropout_mask.h has the rule: a
// splitmix64 hash of (key, i / 2) gives 64 bits, the low 32 for even i and the high 32 for odd
// i, and keep[i] = (those 32 bits >= threshold)). So an element is dropped with probability
// threshold / 2^32 (p rounded up to a multiple of 2^-32), a given generator state always gives
// the same mask, the mask does not depend on the thread count, and the generator advances by
// exactly one draw per call. Scaling the kept values by 1/(1-p) keeps E[out] = x, so nothing
// changes at evaluation time (no dropout). p == 0 returns x itself and draws nothing.
// Backward: grad_x = grad_output * keep / (1 - p). Saves: keep (bool, x's shape) and the
// scale 1/(1-p).
#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "autograd/dropout_mask.h"
#include "autograd/fast.h"
#include "autograd/generator.h"
#include "autograd/kernels.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace sf {

namespace {

// The forward kernel: keep[i] by the rule (autograd/dropout_mask.h), out[i] = x[i] * scale where
// kept and 0 where dropped. x, keep, out: contiguous, n elements.
template <class T>
void dropout_forward_kernel(std::uint64_t key, std::uint64_t threshold, T scale, const T* x, bool* keep, T* out,
                            std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    keep[i] = dropout_keeps(key, i, threshold);
    out[i] = keep[i] ? x[i] * scale : T(0);
  }
}

// The backward kernel: grad_x = grad_output * keep * scale (0 where dropped, even if grad_output
// is inf or NaN there). keep, grad_output, grad_x: contiguous, n elements.
template <class T>
void dropout_backward_kernel(const bool* keep, T scale, const T* grad_output, T* grad_x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) grad_x[i] = keep[i] ? grad_output[i] * scale : T(0);
}

}  // namespace

struct Dropout final : Node {
  Tensor keep;  // (x's shape) bool, row-major
  double scale = 1;
  const char* name() const override { return "Dropout"; }

  static Tensor forward(const Tensor& x, double p, Generator& gen) {
    check_float(x, "dropout");
    SF_EXPECT(p >= 0 && p < 1, "dropout: expected a probability p in [0, 1), got p = ", p);  // NaN fails too
    if (p == 0) return x;
    const double scale = 1.0 / (1.0 - p);
    const std::uint64_t key = gen.next_u64();  // the only draw of this call
    const std::uint64_t threshold = dropout_threshold(p);
    Tensor xc = contiguous(x.detach());  // element i = row-major position i of x's logical shape
    Tensor keep = empty(x.shape(), Dtype::Bool);
    Tensor out = empty(x.shape(), x.dtype());
    if (!(fast::kEnabled && fast::dropout_forward(key, threshold, xc, keep.data<bool>(), out, scale)))
      dispatch_float(x.dtype(), "dropout", [&](auto tag) {
        using T = decltype(tag);
        dropout_forward_kernel<T>(key, threshold, static_cast<T>(scale), xc.data<T>(), keep.data<bool>(),
                                  out.data<T>(), x.numel());
      });
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Dropout>();
      node->keep = keep;
      node->scale = scale;
      connect(node, {&x}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    const Tensor grad_output_c = contiguous(grad_output);  // grad_output may be a broadcast or transposed view
    Tensor grad_x = empty(keep.shape(), grad_output.dtype());
    if (fast::kEnabled && fast::dropout_backward(keep.data<bool>(), scale, grad_output_c, grad_x)) return {grad_x};
    dispatch_float(grad_output.dtype(), "dropout backward", [&](auto tag) {
      using T = decltype(tag);
      dropout_backward_kernel<T>(keep.data<bool>(), static_cast<T>(scale), grad_output_c.data<T>(),
                                 grad_x.data<T>(), keep.numel());
    });
    return {grad_x};
  }
  void release_saved() override { keep = Tensor(); }
};

Tensor dropout(const Tensor& x, double p, Generator& gen) { return Dropout::forward(x, p, gen); }

}  // namespace sf
