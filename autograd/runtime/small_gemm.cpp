// small_gemm: see small_gemm.h for what it computes and why it exists.
#include "autograd/runtime/small_gemm.h"

#include <vector>

#include "autograd/runtime/bf16.h"

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

// a's element (i, kk), rounded to bf16 when kRoundBf16 (b_packed is rounded already).
template <bool kRoundBf16, class T>
T a_element(StridedMatrix<T> a, std::int64_t i, std::int64_t kk) {
  if constexpr (kRoundBf16) return round_to_bf16(a(i, kk));
  return a(i, kk);
}

// b_packed: (k,n) row-major with row stride ldb. c: (m,n) contiguous = a @ b_packed.
template <bool kRoundBf16, class T>
void small_gemm_packed(std::int64_t m, std::int64_t n, std::int64_t k, StridedMatrix<T> a, const T* b_packed,
                       std::int64_t ldb, T* c) {
  for (std::int64_t e = 0; e < m * n; ++e) c[e] = T(0);
  std::int64_t i = 0;
  for (; i + kRowBlock <= m; i += kRowBlock) {  // four rows of c at a time
    T* c0 = c + i * n;
    for (std::int64_t kk = 0; kk < k; ++kk)
      add_scaled_row_x4(n, b_packed + kk * ldb, a_element<kRoundBf16>(a, i, kk), a_element<kRoundBf16>(a, i + 1, kk),
                        a_element<kRoundBf16>(a, i + 2, kk), a_element<kRoundBf16>(a, i + 3, kk), c0, c0 + n,
                        c0 + 2 * n, c0 + 3 * n);
  }
  for (; i < m; ++i)  // the last m % 4 rows
    for (std::int64_t kk = 0; kk < k; ++kk)
      add_scaled_row(n, b_packed + kk * ldb, a_element<kRoundBf16>(a, i, kk), c + i * n);
}

// With kRoundBf16 (float32 under bf16 precision, bf16.h) a and b are rounded to bf16 as they are
// read; the products of bf16 values are exact in float32, so this is the bf16 units' arithmetic,
// done by float32 FMA. (These per-head products are about 1.5% of a training step's FLOPs.)
template <bool kRoundBf16, class T>
void small_gemm_impl(std::int64_t m, std::int64_t n, std::int64_t k, StridedMatrix<T> a, StridedMatrix<T> b, T* c) {
  if (!kRoundBf16 && (b.col_stride == 1 || n == 1)) {  // b's rows are already contiguous: use it in place
    small_gemm_packed<kRoundBf16>(m, n, k, a, b.data, b.row_stride, c);
    return;
  }
  // Copy b into a row-major (k,n) buffer, one per thread, reused from call to call.
  thread_local std::vector<T> packed;
  packed.resize(static_cast<std::size_t>(k * n));
  for (std::int64_t kk = 0; kk < k; ++kk)
    for (std::int64_t j = 0; j < n; ++j) {
      if constexpr (kRoundBf16)
        packed[kk * n + j] = round_to_bf16(b(kk, j));
      else
        packed[kk * n + j] = b(kk, j);
    }
  small_gemm_packed<kRoundBf16>(m, n, k, a, packed.data(), n, c);
}

}  // namespace

void small_gemm(std::int64_t m, std::int64_t n, std::int64_t k, StridedMatrix<float> a, StridedMatrix<float> b,
                float* c) {
  if (matmul_precision() == MatmulPrecision::Bf16)
    small_gemm_impl<true>(m, n, k, a, b, c);
  else
    small_gemm_impl<false>(m, n, k, a, b, c);
}
void small_gemm(std::int64_t m, std::int64_t n, std::int64_t k, StridedMatrix<double> a, StridedMatrix<double> b,
                double* c) {
  small_gemm_impl<false>(m, n, k, a, b, c);
}

}  // namespace sf
