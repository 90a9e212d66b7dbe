// Dropout: out = x * keep / (1 - p), the random mask drawn from a Generator (nn::Dropout's op).
//
// x: any shape float -> out: x's shape. Each call draws ONE key = gen.next_u64(); then
// keep[i] = dropout_keeps(key, i, threshold) with threshold = ceil(p * 2^32), where i is the
// element's row-major position in x's logical shape (autograd/runtime/dropout_mask.h has the rule: a
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
#include <sstream>
#include <stdexcept>

#include "autograd/generator.h"
#include "autograd/kernels.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/runtime/dropout_mask.h"

namespace sf {

namespace {

// Elements per block of the forward kernel: a block's pair hashes go into a small buffer (one
// loop of 64-bit integer arithmetic), then its mask and output are written (a second loop).
// Both loops vectorise; a block is one OpenMP work item.
constexpr std::int64_t kDropoutBlock = 1024;

// keep and out for the elements [begin, end) of x, begin even (a whole number of pairs before
// it). max_dropped = threshold - 1 (fits 32 bits as 1 <= threshold <= 2^32), so
// draw > max_dropped is exactly draw >= threshold. x, keep, out: contiguous, x's numel.
template <class T>
void dropout_forward_block(std::uint64_t key, std::uint32_t max_dropped, T scale, const T* x, bool* keep, T* out,
                           std::int64_t begin, std::int64_t end) {
  std::uint32_t draw[kDropoutBlock];  // draw[k]: the 32 random bits of element begin + k
  const std::int64_t count = end - begin, pairs = (count + 1) / 2;
  const std::uint64_t first_pair = static_cast<std::uint64_t>(begin) / 2;
  for (std::int64_t j = 0; j < pairs; ++j) {
    const std::uint64_t bits = dropout_pair_bits(key, first_pair + static_cast<std::uint64_t>(j));
    draw[2 * j] = static_cast<std::uint32_t>(bits);            // element begin + 2j: low half
    draw[2 * j + 1] = static_cast<std::uint32_t>(bits >> 32);  // element begin + 2j + 1: high half
  }
  for (std::int64_t k = 0; k < count; ++k) {
    const bool kept = draw[k] > max_dropped;
    keep[begin + k] = kept;
    out[begin + k] = kept ? x[begin + k] * scale : T(0);
  }
}

// The forward kernel: fills the mask and the output in one threaded pass over blocks. Every
// element depends only on (key, its position), so any thread count gives the same result.
// x, keep, out: contiguous, n elements.
template <class T>
void dropout_forward_kernel(std::uint64_t key, std::uint64_t threshold, T scale, const T* x, bool* keep, T* out,
                            std::int64_t n) {
  const auto max_dropped = static_cast<std::uint32_t>(threshold - 1);
  const std::int64_t blocks = (n + kDropoutBlock - 1) / kDropoutBlock;
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
  for (std::int64_t b = 0; b < blocks; ++b)
    dropout_forward_block(key, max_dropped, scale, x, keep, out, b * kDropoutBlock,
                          std::min(n, (b + 1) * kDropoutBlock));
}

// The backward kernel: grad_x = grad_output * keep * scale in one threaded pass (0 where
// dropped, even if grad_output is inf or NaN there). keep, grad_output, grad_x: contiguous, n
// elements.
template <class T>
void dropout_backward_kernel(const bool* keep, T scale, const T* grad_output, T* grad_x, std::int64_t n) {
  // the mask read as its bytes (a bool is stored as 0 or 1): GCC does not vectorise loads of bool
  const auto* keep_bytes = reinterpret_cast<const unsigned char*>(keep);
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
  for (std::int64_t i = 0; i < n; ++i) {
    const T scaled = grad_output[i] * scale;  // computed for every element, so the loop vectorises
    grad_x[i] = keep_bytes[i] != 0 ? scaled : T(0);
  }
}

}  // namespace

struct Dropout final : Node {
  Tensor keep;  // (x's shape) bool, row-major
  double scale = 1;
  const char* name() const override { return "Dropout"; }

  static Tensor forward(const Tensor& x, double p, Generator& gen) {
    check_float(x, "dropout");
    if (!(p >= 0 && p < 1)) {  // written so that NaN fails too
      std::ostringstream msg;
      msg << "dropout: expected a probability p in [0, 1), got p = " << p;
      throw std::invalid_argument(msg.str());
    }
    if (p == 0) return x;
    const double scale = 1.0 / (1.0 - p);
    const std::uint64_t key = gen.next_u64();  // the only draw of this call
    const std::uint64_t threshold = dropout_threshold(p);
    Tensor xc = contiguous(x.detach());  // element i = row-major position i of x's logical shape
    Tensor keep = empty(x.shape(), Dtype::Bool);
    Tensor out = empty(x.shape(), x.dtype());
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
