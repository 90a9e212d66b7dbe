// small_gemm: one small matrix product on the calling thread, for batched matmul.
//
// Attention multiplies B*H = 256 pairs of tiny matrices per product (e.g. (24,64) @ (64,24)).
// Handing each pair to cblas_sgemm costs more in call overhead, packing and thread handoffs
// than the arithmetic itself (about 37k multiply-adds). Instead ops_matmul.cpp runs an OpenMP
// loop over the pairs and calls this kernel on each: plain loops the compiler vectorizes.
//
// Letters: M rows of op(a), K the shared dim, N columns of op(b).
//   c (M,N), row-major, contiguous  =  a (M,K) @ b (K,N)
// a and b are read through (row stride, column stride), so a transposed view is just swapped
// strides; no copies are needed by the caller.
//
// The kernel copies b into a row-major (K,N) scratch buffer (so its rows are contiguous), then
// for each block of 4 rows of c walks k in order:  c[i, :] += a[i, k] * b[k, :].
// Every c[i, j] is summed over k = 0, 1, ..., K-1 in that order, whatever M, N or the thread
// count, so results are reproducible. matmul_naive (ops.h) is the reference it is tested against
// (tests/test_small_gemm.cpp).
#pragma once

#include <cstdint>

namespace sf {

// A strided (rows, cols) matrix: element [i][j] at data[i * row_stride + j * col_stride].
template <class T>
struct StridedMatrix {
  const T* data;
  std::int64_t row_stride, col_stride;
  T operator()(std::int64_t i, std::int64_t j) const { return data[i * row_stride + j * col_stride]; }
};

// c: (m,n) row-major, contiguous = a: (m,k) @ b: (k,n). Overwrites c. Single-threaded; safe to
// call from several threads at once (each thread has its own scratch buffer).
void small_gemm(std::int64_t m, std::int64_t n, std::int64_t k, StridedMatrix<float> a, StridedMatrix<float> b,
                float* c);
void small_gemm(std::int64_t m, std::int64_t n, std::int64_t k, StridedMatrix<double> a, StridedMatrix<double> b,
                double* c);

// Products up to this many multiply-adds (m*n*k) count as "small": below it the OpenMP loop over
// slices with small_gemm beats one multi-threaded cblas_sgemm per slice. 64*64*64: OpenBLAS
// itself runs products below 4 * 65536 = 262144 on one thread.
constexpr std::int64_t kSmallGemmMaxMacs = 64 * 64 * 64;

}  // namespace sf
