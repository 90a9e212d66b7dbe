// The fast element-wise kernels: sums down the columns, and dropout in blocks (autograd/fast.h
// has the contract; the plain kernels are in ops_reduce.cpp and ops_dropout.cpp).
//
// Both give the plain kernels' results bit for bit: they visit the same elements and add in the
// same order, only in pieces the threads share (and, for dropout, in two loops the compiler
// vectorises: the hashes of a block, then its mask and output).
#include <algorithm>
#include <cstdint>

#include "autograd/dropout_mask.h"
#include "autograd/fast.h"
#include "autograd/kernels.h"

namespace sf::fast {

namespace {

// When x is contiguous and exactly its leading dims are reduced (the bias gradient: (B,T,D) summed
// to (D)), x is a (rows, cols) matrix summed down its columns; returns cols, else 0.
std::int64_t leading_dims_reduced_cols(const Tensor& x, const std::vector<bool>& mask) {
  if (!x.is_contiguous()) return 0;
  std::int64_t d = 0, cols = 1;
  while (d < x.dim() && mask[d]) ++d;
  if (d == 0) return 0;
  for (; d < x.dim(); ++d) {
    if (mask[d]) return 0;
    cols *= x.shape()[d];
  }
  return cols;
}

// acc[c] += sum over r of x[r, c], x: (rows, cols) contiguous. Each column's sum runs on one
// thread in row order, the order of sum_kernel's walk (ops_reduce.cpp): the same bits, on any
// number of threads.
template <class T>
void sum_rows_kernel(const T* x, std::int64_t rows, std::int64_t cols, double* acc) {
  constexpr std::int64_t kColBlock = 64;  // columns per task: whole cache lines of x per row
  const std::int64_t blocks = (cols + kColBlock - 1) / kColBlock;
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMinElements)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t c0 = b * kColBlock, c1 = std::min(cols, c0 + kColBlock);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = c0; c < c1; ++c) acc[c] += x[r * cols + c];
  }
}

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

// The forward kernel of ops_dropout.cpp: fills the mask and the output in one threaded pass over
// blocks. Every element depends only on (key, its position), so any thread count gives the same
// result.
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

// The backward kernel of ops_dropout.cpp: grad_x = grad_output * keep * scale in one threaded pass (0 where
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

bool sum(const Tensor& x, const std::vector<bool>& mask, double* acc) {
  if (x.dtype() != Dtype::Float32 || !x.is_contiguous()) return false;
  const float* px = x.data<float>();
  if (std::all_of(mask.begin(), mask.end(), [](bool m) { return m; })) {  // everything into one number
    double s = 0;
    for (std::int64_t i = 0, n = x.numel(); i < n; ++i) s += px[i];
    acc[0] += s;
    return true;
  }
  const std::int64_t cols = leading_dims_reduced_cols(x, mask);
  if (cols == 0) return false;
  sum_rows_kernel(px, x.numel() / cols, cols, acc);
  return true;
}

bool dropout_forward(std::uint64_t key, std::uint64_t threshold, const Tensor& x, bool* keep, Tensor& out,
                     double scale) {
  if (x.dtype() != Dtype::Float32) return false;
  dropout_forward_kernel<float>(key, threshold, static_cast<float>(scale), x.data<float>(), keep, out.data<float>(),
                                x.numel());
  return true;
}

bool dropout_backward(const bool* keep, double scale, const Tensor& grad_output, Tensor& grad_x) {
  if (grad_output.dtype() != Dtype::Float32) return false;
  dropout_backward_kernel<float>(keep, static_cast<float>(scale), grad_output.data<float>(), grad_x.data<float>(),
                                 grad_x.numel());
  return true;
}

}  // namespace sf::fast
