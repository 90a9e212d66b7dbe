// small_gemm: see small_gemm.h for what it computes and why it exists.
#include "autograd/runtime/small_gemm.h"

#include <vector>

#include "autograd/runtime/bf16.h"
#include "autograd/runtime/packed_linear.h"

namespace sf {

namespace {

// How many rows of c one pass over b updates: each row of b, once loaded, feeds kRowBlock rows.
constexpr std::int64_t kRowBlock = 4;

// c_r[j] += a_r * b_row[j] for the kRowBlock rows r of a block, j < n. The restrict pointers
// tell the compiler the rows do not overlap, so it vectorizes the j loop.
template <class T>
void add_scaled_row_x4(std::int64_t n, const T* __restrict b_row, T a0, T a1, T a2, T a3, T* __restrict c0,
                       T* __restrict c1, T* __restrict c2, T* __restrict c3) {
  for (std::int64_t j = 0; j < n; ++j) {
    const T bj = b_row[j];
    c0[j] += a0 * bj;
    c1[j] += a1 * bj;
    c2[j] += a2 * bj;
    c3[j] += a3 * bj;
  }
}

// c_row[j] += a_i * b_row[j], j < n: the leftover rows (m not a multiple of kRowBlock).
template <class T>
void add_scaled_row(std::int64_t n, const T* __restrict b_row, T a_i, T* __restrict c_row) {
  for (std::int64_t j = 0; j < n; ++j) c_row[j] += a_i * b_row[j];
}

// b_packed: (k,n) row-major with row stride ldb. c: (m,n) contiguous = a @ b_packed.
template <class T>
void small_gemm_packed(std::int64_t m, std::int64_t n, std::int64_t k, StridedMatrix<T> a, const T* b_packed,
                       std::int64_t ldb, T* c) {
  for (std::int64_t e = 0; e < m * n; ++e) c[e] = T(0);
  std::int64_t i = 0;
  for (; i + kRowBlock <= m; i += kRowBlock) {  // four rows of c at a time
    T* c0 = c + i * n;
    for (std::int64_t kk = 0; kk < k; ++kk)
      add_scaled_row_x4(n, b_packed + kk * ldb, a(i, kk), a(i + 1, kk), a(i + 2, kk), a(i + 3, kk), c0, c0 + n,
                        c0 + 2 * n, c0 + 3 * n);
  }
  for (; i < m; ++i)  // the last m % 4 rows
    for (std::int64_t kk = 0; kk < k; ++kk) add_scaled_row(n, b_packed + kk * ldb, a(i, kk), c + i * n);
}

// The plain kernel: b copied row-major unless its rows are contiguous already, then rows of c
// updated in place. double (the gradient checks) runs this.
template <class T>
void small_gemm_rows(std::int64_t m, std::int64_t n, std::int64_t k, StridedMatrix<T> a, StridedMatrix<T> b, T* c) {
  if (b.col_stride == 1 || n == 1) {  // b's rows are already contiguous: use it in place
    small_gemm_packed(m, n, k, a, b.data, b.row_stride, c);
    return;
  }
  // Copy b into a row-major (k,n) buffer, one per thread, reused from call to call.
  thread_local std::vector<T> packed;
  packed.resize(static_cast<std::size_t>(k * n));
  for (std::int64_t kk = 0; kk < k; ++kk)
    for (std::int64_t j = 0; j < n; ++j) packed[kk * n + j] = b(kk, j);
  small_gemm_packed(m, n, k, a, packed.data(), n, c);
}

// float32: the register-blocked kernel of packed_linear.h. c's rows are updated in L1 by the
// plain kernel, a load and a store per multiply-add; here an (8 x 32) block of c stays in
// registers for the whole sum over k. a is copied into a contiguous (m,k) buffer and b packed
// into 32-column panels (b (k,n) is W^T for W (n,k) with W[j][kk] = b(kk, j)), both per thread
// and reused. Under bf16 precision (bf16.h) both copies round to bf16: products of bf16 values
// are exact in float32, so the float32 FMA does the bf16 units' arithmetic. Either way each
// c[i, j] is summed over k = 0 .. K-1 in order, one multiply-add a step, as before.
void small_gemm_blocked(std::int64_t m, std::int64_t n, std::int64_t k, StridedMatrix<float> a,
                        StridedMatrix<float> b, float* c) {
  const bool round_bf16 = matmul_precision() == MatmulPrecision::Bf16;
  thread_local std::vector<float> a_rows;
  thread_local PackedWeight b_panels;
  a_rows.resize(static_cast<std::size_t>(m * k));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t kk = 0; kk < k; ++kk) a_rows[i * k + kk] = round_bf16 ? round_to_bf16(a(i, kk)) : a(i, kk);
  pack_weight_strided(b.data, n, k, b.col_stride, b.row_stride, round_bf16, b_panels);
  packed_linear(a_rows.data(), m, b_panels, c, /*accumulate=*/false);  // one thread: m*n*k is small
}

}  // namespace

void small_gemm(std::int64_t m, std::int64_t n, std::int64_t k, StridedMatrix<float> a, StridedMatrix<float> b,
                float* c) {
  small_gemm_blocked(m, n, k, a, b, c);
}
void small_gemm(std::int64_t m, std::int64_t n, std::int64_t k, StridedMatrix<double> a, StridedMatrix<double> b,
                double* c) {
  small_gemm_rows(m, n, k, a, b, c);
}

}  // namespace sf
