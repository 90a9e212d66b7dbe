// Helpers shared by the op kernels: dtype dispatch and strided iteration.
//
// Kernels are templates over the element type T (float or double). dispatch_float picks the
// instantiation from a runtime dtype:
//
//     dispatch_float(x.dtype(), "exp", [&](auto tag) {
//       using T = decltype(tag);
//       exp_kernel<T>(x.data<T>(), out.data<T>(), n);
//     });
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>

#include "autograd/check.h"
#include "autograd/fast.h"
#include "autograd/tensor.h"

namespace sf {

template <class F>
decltype(auto) dispatch_float(Dtype dtype, const char* op, F&& f) {
  switch (dtype) {
    case Dtype::Float32: return f(float{});
    case Dtype::Float64: return f(double{});
    default:
      throw std::invalid_argument(std::string(op) + ": expected a float32 or float64 tensor, got " +
                                  dtype_name(dtype));
  }
}

template <class F>
decltype(auto) dispatch_all(Dtype dtype, F&& f) {
  switch (dtype) {
    case Dtype::Float32: return f(float{});
    case Dtype::Float64: return f(double{});
    case Dtype::Int64: return f(std::int64_t{});
    case Dtype::Bool: return f(bool{});
  }
  SF_CHECK(false, "dispatch_all: unknown dtype ", static_cast<int>(dtype));
}

// c (m,n) = a (m,k) @ b (k,n) [+ c when accumulate], all row-major and contiguous: one BLAS
// call (cblas_sgemm / cblas_dgemm), the plain kernel of every matrix product.
void blas_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b, float* c,
               bool accumulate = false, bool transpose_b = false);
void blas_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const double* a, const double* b, double* c,
               bool accumulate = false, bool transpose_b = false);

// Throws unless a and b have the same dtype (no implicit promotion: students should see it).
void check_same_dtype(const Tensor& a, const Tensor& b, const char* op);
// Throws unless x is float32 or float64.
void check_float(const Tensor& x, const char* op);

// Strides of `t` seen as a tensor of shape `out` (broadcast): stride 0 on every dim where t
// has size 1 (or is missing) and out does not.
Shape broadcast_strides(const Tensor& t, const Shape& out);

// Visits every element of `shape` in row-major order with N strided operands, calling
// f(off[0], ..., off[N-1]) with each operand's element offset (relative to its first element).
// The innermost dimension runs as a plain loop.
template <std::size_t N, class F>
void for_each_strided(const Shape& shape, const std::array<const Shape*, N>& strides, F&& f) {
  const std::int64_t nd = static_cast<std::int64_t>(shape.size());
  const std::int64_t total = shape_numel(shape);
  if (total == 0) return;
  const std::int64_t inner = nd > 0 ? shape[nd - 1] : 1;  // a 0-dim tensor: one element
  std::array<std::int64_t, N> inner_stride{};
  for (std::size_t k = 0; nd > 0 && k < N; ++k) inner_stride[k] = (*strides[k])[nd - 1];
  std::array<std::int64_t, N> base{};
  Shape idx(nd, 0);  // odometer over the outer dims
  for (std::int64_t done = 0; done < total; done += inner) {
    std::array<std::int64_t, N> off = base;
    for (std::int64_t i = 0; i < inner; ++i) {
      std::apply(f, off);
      for (std::size_t k = 0; k < N; ++k) off[k] += inner_stride[k];
    }
    // advance the odometer over dims nd-2 .. 0
    for (std::int64_t d = nd - 2; d >= 0; --d) {
      ++idx[d];
      for (std::size_t k = 0; k < N; ++k) base[k] += (*strides[k])[d];
      if (idx[d] < shape[d]) break;
      for (std::size_t k = 0; k < N; ++k) base[k] -= (*strides[k])[d] * shape[d];
      idx[d] = 0;
    }
  }
}

// Element counts from which the element-wise loops share their work among the OpenMP threads
// (below it, waking the team costs more than the loop). The one threshold of every
// `#pragma omp parallel for if (...)` in the kernels, compared with the number of elements the
// loop touches (rows * row length for a loop over rows).
constexpr std::int64_t kParallelMinElements = 65536;

// for_each_strided for element-wise work (f writes the element it is given and nothing else):
// in a fast build its rows are shared out among the threads once there are kParallelMinElements
// elements (autograd/fast.h).
template <std::size_t N, class F>
void parallel_for_each_strided(const Shape& shape, const std::array<const Shape*, N>& strides, F&& f) {
  if (fast::kEnabled && fast::for_each_strided_rows<N>(shape, strides, f, kParallelMinElements)) return;
  for_each_strided<N>(shape, strides, f);
}

}  // namespace sf
