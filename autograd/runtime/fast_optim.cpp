// The fast kernels of the optimizer's loops over every parameter (autograd/fast.h has the contract;
// the plain loops are in train/optim/optim.cpp: Adam::step, sums_of_squares, scale_grads).
//
// What they add, each for one reason:
//   - one OpenMP region for all the tensors, each tensor's elements shared by the threads (an
//     orphaned `omp for simd ... nowait`, so a thread goes on to the next tensor without waiting):
//     a region per tensor would leave the small tensors (biases, norms, 256 x 256 weights) on one
//     thread while the others wait;
//   - sums of squares in fixed chunks of every tensor, all chunks in one loop, each tensor's chunk
//     sums added in chunk order: the result depends only on the sizes, not on the thread count.
// Every element is computed alone (Adam, scaling), so those results are the plain loops' bits.
#include <algorithm>
#include <cmath>

#include "autograd/fast.h"
#include "autograd/kernels.h"

namespace sf::fast {

namespace {

// Adam's update of one tensor (the formula of adam_update, train/optim/optim.cpp), the loop shared
// by the threads of the enclosing region.
void adam_tensor(const AdamTensors& t, const AdamStep& c) {
  const float b1 = static_cast<float>(c.beta1), b2 = static_cast<float>(c.beta2), eps = static_cast<float>(c.eps);
  const float one_minus_b1 = static_cast<float>(1 - c.beta1), one_minus_b2 = static_cast<float>(1 - c.beta2);
  const float l2 = c.decoupled ? 0.0f : static_cast<float>(c.weight_decay);
  const float keep = c.decoupled ? static_cast<float>(1 - c.lr * c.weight_decay) : 1.0f;
  const float step_size = static_cast<float>(c.lr / c.bias_correction1);
  const float inv_sqrt_bc2 = static_cast<float>(1 / std::sqrt(c.bias_correction2));
#pragma omp for simd schedule(static) nowait
  for (std::int64_t k = 0; k < t.n; ++k) {
    const float g = t.grad[k] + l2 * t.w[k];
    const float m = b1 * t.m[k] + one_minus_b1 * g;
    const float v = b2 * t.v[k] + one_minus_b2 * g * g;
    t.m[k] = m;
    t.v[k] = v;
    t.w[k] = keep * t.w[k] - step_size * m / (std::sqrt(v) * inv_sqrt_bc2 + eps);
  }
}

bool all_float32(const std::vector<Tensor>& tensors) {
  return std::all_of(tensors.begin(), tensors.end(), [](const Tensor& t) { return t.dtype() == Dtype::Float32; });
}

std::int64_t total_elements(const std::vector<Tensor>& tensors) {
  std::int64_t n = 0;
  for (const Tensor& t : tensors) n += t.numel();
  return n;
}

// Sums of squares are taken in fixed chunks of this many elements.
constexpr std::int64_t kSquaresChunk = 16384;

double chunk_sum_of_squares(const float* x, std::int64_t begin, std::int64_t end) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t k = begin; k < end; ++k) s += static_cast<double>(x[k]) * static_cast<double>(x[k]);
  return s;
}

}  // namespace

bool adam(const std::vector<AdamTensors>& tensors, const AdamStep& step) {
  std::int64_t elements = 0;
  for (const AdamTensors& t : tensors) elements += t.n;
#pragma omp parallel if (elements > kParallelMinElements)
  for (const AdamTensors& t : tensors) adam_tensor(t, step);
  return true;
}

bool sums_of_squares(const std::vector<Tensor>& tensors, std::vector<double>& sums) {
  if (!all_float32(tensors)) return false;
  struct Chunk {
    std::size_t tensor;  // tensors[tensor]
    std::int64_t begin, end;
  };
  std::vector<Chunk> chunks;
  for (std::size_t t = 0; t < tensors.size(); ++t)
    for (std::int64_t begin = 0, n = tensors[t].numel(); begin < n; begin += kSquaresChunk)
      chunks.push_back({t, begin, std::min(n, begin + kSquaresChunk)});
  std::vector<double> partial(chunks.size(), 0.0);
  const std::int64_t count = static_cast<std::int64_t>(chunks.size());
#pragma omp parallel for schedule(static) if (count > 4)
  for (std::int64_t i = 0; i < count; ++i) {
    const Chunk& ch = chunks[static_cast<std::size_t>(i)];
    partial[static_cast<std::size_t>(i)] = chunk_sum_of_squares(tensors[ch.tensor].data<float>(), ch.begin, ch.end);
  }
  sums.assign(tensors.size(), 0.0);
  for (std::size_t i = 0; i < chunks.size(); ++i) sums[chunks[i].tensor] += partial[i];
  return true;
}

bool scale(const std::vector<Tensor>& tensors, double factor) {
  if (!all_float32(tensors)) return false;
  const float f = static_cast<float>(factor);
#pragma omp parallel if (total_elements(tensors) > kParallelMinElements)
  for (const Tensor& t : tensors) {
    float* p = t.data<float>();
    const std::int64_t n = t.numel();
#pragma omp for simd schedule(static) nowait
    for (std::int64_t k = 0; k < n; ++k) p[k] *= f;
  }
  return true;
}

}  // namespace sf::fast
