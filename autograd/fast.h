// The seam between the math and the speed.
//
// Every op file (autograd/ops_*.cpp) reads top to bottom: the formula, the Node (forward and
// backward side by side), the plain kernel — loops that follow the formula, on one thread if need
// be, with std::exp and one BLAS call per matrix product. That plain kernel is the definition.
//
// The functions below are the fast kernels the ops may hand their work to instead: float32 SIMD
// rows with fast_exp, blocked sums, matmul folding and small-slice products, products cut into
// blocks over the threads, packed weights while decoding, bf16 matrix products. They live in
// autograd/runtime/, and the contract for each (as llm.c states it for its kernels) is:
//
//   - it computes what the plain kernel computes, otherwise identical to it: the same formula in
//     another order (SIMD lanes, blocks, tiles), so float32 results may differ in the last bits;
//     each takes float32 only, so float64 inputs always take the plain kernel (the float64
//     gradient checks test the plain math in every build);
//   - it returns true when it did the work, false when its case does not apply (another dtype, a
//     strided layout, a size it is not for); the op then runs its plain kernel;
//   - tests/test_fast_kernels.cpp checks each against its plain twin on the cases it takes.
//
// An op calls a fast kernel in one line, in front of its plain kernel:
//
//     if (fast::kEnabled && fast::softmax(xc, out, d, log)) return out;
//     ... the plain kernel ...
//
// kEnabled is the one switch. The `reference` preset (SCRATCHFORMER_REFERENCE) sets it to false:
// every op then runs its plain kernel, and a debugger stepping through a training step never
// leaves the math. Op files include this header and no other from autograd/runtime/
// (tests/test_seam.cpp checks it).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <vector>

#include "autograd/tensor.h"

namespace sf::fast {

#ifdef SCRATCHFORMER_REFERENCE
inline constexpr bool kEnabled = false;
#else
inline constexpr bool kEnabled = true;
#endif

// ---- storage (autograd/tensor.cpp) -----------------------------------------------------------
// Big blocks (the logits and their gradient) are kept and reused from one step to the next
// instead of being returned to the kernel and faulted in again page by page (runtime/block_cache.h).
// allocate_block returns nullptr for a block it does not take (then malloc's); release_block
// takes back what allocate_block gave (capacity > 0).
void* allocate_block(std::size_t bytes, std::size_t* capacity);
void release_block(void* block, std::size_t capacity);

// ---- matrix products (ops_matmul.cpp, ops_linear.cpp; runtime/fast_matmul.cpp) ---------------
// out: (..., M, N), contiguous and allocated = a (..., M, K) @ b (..., K, N), batch dims broadcast,
// K > 0. Reads strided operands in place where BLAS can, folds a shared b's batch into one product,
// runs batches of small slices on small_gemm, cuts big products into blocks over the threads, and
// hands float32 products to the bf16 units when train.precision = "bf16".
bool matmul(const Tensor& a, const Tensor& b, Tensor& out);

// y (R, out) = x2d (R, in) @ w (out, in)^T + b, all contiguous, in > 0; b may be undefined.
// `weight` is the op's input (a parameter packed once per decoding, runtime/packed_linear.h).
bool linear(const Tensor& x2d, const Tensor& w, const Tensor& b, const Tensor& weight, Tensor& y);

// ---- rows: softmax, cross-entropy, norms (runtime/fast_rows.cpp) -----------------------------
// Rows contiguous; SIMD lanes, fast_exp (runtime/fast_exp.h) and column blocks over the threads.
// y = softmax (or log_softmax) of x along dim d; x, y contiguous.
bool softmax(const Tensor& x, Tensor& y, std::int64_t d, bool log);
// dx from the saved output y and dy = grad_output (all contiguous).
bool softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx, std::int64_t d, bool log);

// One row of a tiled-attention score tile (ops_attention.cpp): row[c] = exp(row[c] - shift) for
// c < n, with fast_exp in SIMD lanes; adds their sum to *sum when sum is not null. float32 only.
bool exp_shifted(float* row, std::int64_t n, float shift, double* sum);
inline bool exp_shifted(double*, std::int64_t, double, double*) { return false; }  // float64: the plain loop

// logits (N, V) contiguous, targets (N): row_loss and lse (N) on the rows kept (ops_loss.cpp).
bool cross_entropy(const Tensor& logits, const std::int64_t* targets, std::int64_t ignore_index, double smoothing,
                   double* row_loss, double* lse);
// dlogits (N, V) = scale * (softmax - q) on kept rows, 0 on ignored ones.
bool cross_entropy_backward(const Tensor& logits, const std::int64_t* targets, const double* lse,
                            std::int64_t ignore_index, double smoothing, double scale, Tensor& dlogits);

// The layer_norm and rms_norm kernels of ops_norm.cpp (the same arguments), float32.
bool layernorm_forward(float* out, double* mean, double* rstd, const float* x, const float* weight, const float* bias,
                       std::int64_t N, std::int64_t D, double eps);
bool layernorm_backward(float* dx, double* dweight, double* dbias, const float* grad_output, const float* x,
                        const float* weight, const double* mean, const double* rstd, std::int64_t N, std::int64_t D);
bool rmsnorm_forward(float* out, double* rrms, const float* x, const float* weight, std::int64_t N, std::int64_t D,
                     double eps);
bool rmsnorm_backward(float* dx, double* dweight, const float* grad_output, const float* x, const float* weight,
                      const double* rrms, std::int64_t N, std::int64_t D);

// ---- reductions and dropout (runtime/fast_elementwise.cpp) ----------------------------------
// acc (the keepdim output's elements, in double) += the sums of x over the dims in `mask`, when x
// is contiguous and the reduced dims are all of it or exactly its leading dims (the bias gradient).
bool sum(const Tensor& x, const std::vector<bool>& mask, double* acc);

// The dropout kernels of ops_dropout.cpp in blocks over the threads (the mask is bit for bit the
// plain kernel's: it depends only on the key and the element's position).
bool dropout_forward(std::uint64_t key, std::uint64_t threshold, const Tensor& x, bool* keep, Tensor& out, double scale);
bool dropout_backward(const bool* keep, double scale, const Tensor& grad_output, Tensor& grad_x);

// ---- the optimizer's loops over every parameter (train/optim/optim.cpp; runtime/fast_optim.cpp) --
// One OpenMP region for all the tensors, the threads sharing each tensor's elements, so the many
// small tensors (biases, norms) do not leave a thread idle; sums in fixed chunks of every tensor in
// one loop. float32 tensors only, contiguous.
struct AdamTensors {  // one parameter: its weights, gradient and the two moments, n elements each
  float* w;
  const float* grad;
  float* m;
  float* v;
  std::int64_t n;
};
struct AdamStep {  // the numbers one Adam step shares across all parameters
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  bool decoupled = false;                             // AdamW
  double bias_correction1 = 1, bias_correction2 = 1;  // 1 - b1^t, 1 - b2^t
};
bool adam(const std::vector<AdamTensors>& tensors, const AdamStep& step);
// sums[i] = the sum of tensors[i]'s squares, in double.
bool sums_of_squares(const std::vector<Tensor>& tensors, std::vector<double>& sums);
// Every tensor multiplied by factor, in place.
bool scale(const std::vector<Tensor>& tensors, double factor);

// ---- element-wise loops over the threads (kernels.h parallel_for_each_strided) --------------
// for_each_strided (kernels.h) with its rows, the runs along the innermost dim, shared out among
// the OpenMP threads: each thread unravels its row's offsets and walks the row. Only for
// element-wise work (f writes the element it is given and nothing else), so the result is the
// same for any thread count. A template, so it is defined here rather than in runtime/. Takes
// shapes of 2 dims or more with at least min_elements elements.
template <std::size_t N, class F>
bool for_each_strided_rows(const Shape& shape, const std::array<const Shape*, N>& strides, F&& f,
                           std::int64_t min_elements) {
  const std::int64_t nd = static_cast<std::int64_t>(shape.size());
  const std::int64_t total = shape_numel(shape);
  if (total < min_elements || nd < 2) return false;
  const std::int64_t inner = shape[nd - 1], rows = total / inner;
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    std::array<std::int64_t, N> off{};  // each operand's offset of element (row r, 0)
    std::int64_t rest = r;
    for (std::int64_t d = nd - 2; d >= 0; --d) {  // unravel r over dims nd-2 .. 0
      const std::int64_t i = rest % shape[d];
      rest /= shape[d];
      for (std::size_t k = 0; k < N; ++k) off[k] += i * (*strides[k])[d];
    }
    for (std::int64_t i = 0; i < inner; ++i) {
      std::apply(f, off);
      for (std::size_t k = 0; k < N; ++k) off[k] += (*strides[k])[nd - 1];
    }
  }
  return true;
}

}  // namespace sf::fast
