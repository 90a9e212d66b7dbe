// small_gemm: see small_gemm.h for what it computes and why it exists.
#include "autograd/runtime/small_gemm.h"


#include "autograd/runtime/bf16.h"
#include "autograd/runtime/scratch_buffer.h"

namespace sf {

namespace {

// How many rows of c one pass over b updates: each row of b, once loaded, feeds kRowBlock rows.
constexpr std::int64_t kRowBlock = 4;

// b_row[j], rounded to bf16 as it is read when kRoundB (bf16 precision, when b is used in place
// instead of through a rounded copy; see small_gemm_bf16).
template <bool kRoundB, class T>
T b_value(const T* __restrict b_row, std::int64_t j) {
  if constexpr (kRoundB)
    return round_to_bf16(b_row[j]);
  else
    return b_row[j];
}

// c_r[j] += a_r * b_row[j] for the kRowBlock rows r of a block, j < n. The restrict pointers
// tell the compiler the rows do not overlap, so it vectorizes the j loop.
template <bool kRoundB, class T>
void add_scaled_row_x4(std::int64_t n, const T* __restrict b_row, T a0, T a1, T a2, T a3, T* __restrict c0,
                       T* __restrict c1, T* __restrict c2, T* __restrict c3) {
  for (std::int64_t j = 0; j < n; ++j) {
    const T bj = b_value<kRoundB>(b_row, j);
    c0[j] += a0 * bj;
    c1[j] += a1 * bj;
    c2[j] += a2 * bj;
    c3[j] += a3 * bj;
  }
}

// c_row[j] += a_i * b_row[j], j < n: the leftover rows (m not a multiple of kRowBlock).
template <bool kRoundB, class T>
void add_scaled_row(std::int64_t n, const T* __restrict b_row, T a_i, T* __restrict c_row) {
  for (std::int64_t j = 0; j < n; ++j) c_row[j] += a_i * b_value<kRoundB>(b_row, j);
}

// b_packed: (k,n) row-major with row stride ldb. c: (m,n) contiguous = a @ b_packed.
template <class T, bool kRoundB = false>
void small_gemm_packed(std::int64_t m, std::int64_t n, std::int64_t k, StridedMatrix<T> a, const T* b_packed,
                       std::int64_t ldb, T* c) {
  for (std::int64_t e = 0; e < m * n; ++e) c[e] = T(0);
  std::int64_t i = 0;
  for (; i + kRowBlock <= m; i += kRowBlock) {  // four rows of c at a time
    T* c0 = c + i * n;
    for (std::int64_t kk = 0; kk < k; ++kk)
      add_scaled_row_x4<kRoundB>(n, b_packed + kk * ldb, a(i, kk), a(i + 1, kk), a(i + 2, kk), a(i + 3, kk), c0,
                                 c0 + n, c0 + 2 * n, c0 + 3 * n);
  }
  for (; i < m; ++i)  // the last m % 4 rows
    for (std::int64_t kk = 0; kk < k; ++kk) add_scaled_row<kRoundB>(n, b_packed + kk * ldb, a(i, kk), c + i * n);
}

// x (rows, cols) copied into a row-major contiguous buffer, each element rounded to bf16 when
// kRoundBf16; returns the copy. The buffer is the calling thread's own (`out` is thread_local at
// the caller; scratch_buffer.h: it is not zero-filled first).
// Two passes under bf16: the gather (the same loops as float32's), then the rounding over the
// contiguous copy, which the compiler vectorizes (rounding inside the gather stays scalar).
template <bool kRoundBf16, class T>
T* copy_to_row_major(StridedMatrix<T> x, std::int64_t rows, std::int64_t cols, ScratchBuffer<T>& out) {
  T* __restrict dst = out.get(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    if (x.col_stride == 1) {  // a contiguous row: a plain copy
      const T* src = x.data + r * x.row_stride;
      for (std::int64_t j = 0; j < cols; ++j) dst[r * cols + j] = src[j];
    } else {
      for (std::int64_t j = 0; j < cols; ++j) dst[r * cols + j] = x(r, j);
    }
  }
  if constexpr (kRoundBf16)
    for (std::int64_t e = 0; e < rows * cols; ++e) dst[e] = round_to_bf16(dst[e]);
  return dst;
}

// Copies b into a row-major (k,n) buffer, one per thread, reused from call to call (unless b's
// rows are contiguous already), then runs small_gemm_packed.
template <class T>
void small_gemm_impl(std::int64_t m, std::int64_t n, std::int64_t k, StridedMatrix<T> a, StridedMatrix<T> b, T* c) {
  if (b.col_stride == 1 || n == 1) {  // b's rows are already contiguous: use it in place
    small_gemm_packed(m, n, k, a, b.data, b.row_stride, c);
    return;
  }
  thread_local ScratchBuffer<T> b_copy;
  small_gemm_packed(m, n, k, a, copy_to_row_major<false>(b, k, n, b_copy), n, c);
}

// Under bf16 precision (bf16.h) both inputs are rounded to bf16 once, into per-thread copies, and
// the float32 kernel multiplies the copies: the products of bf16 values are exact in float32, so
// this is the bf16 units' arithmetic, done by float32 FMA. These per-head products are about 1.5%
// of a training step's FLOPs. (Rounding a as it is read instead would put scalar roundings
// between the multiply-adds of rows only n = 24 wide.)
//
// With a few rows of a (m <= kRowBlock: a decoding step's one query per head) every element of b is
// read once, so where b's rows are contiguous (weights @ v) the kernel rounds them as it reads them
// instead of copying v first: one pass over b instead of two. The rounding is the same, so are
// the bits.
void small_gemm_bf16(std::int64_t m, std::int64_t n, std::int64_t k, StridedMatrix<float> a, StridedMatrix<float> b,
                     float* c) {
  thread_local ScratchBuffer<float> a_buffer, b_buffer;
  const float* a_rounded = copy_to_row_major<true>(a, m, k, a_buffer);
  if (m <= kRowBlock && (b.col_stride == 1 || n == 1)) {
    small_gemm_packed<float, true>(m, n, k, StridedMatrix<float>{a_rounded, k, 1}, b.data, b.row_stride, c);
    return;
  }
  const float* b_rounded = copy_to_row_major<true>(b, k, n, b_buffer);
  small_gemm_packed(m, n, k, StridedMatrix<float>{a_rounded, k, 1}, b_rounded, n, c);
}

}  // namespace

void small_gemm(std::int64_t m, std::int64_t n, std::int64_t k, StridedMatrix<float> a, StridedMatrix<float> b,
                float* c) {
  if (matmul_precision() == MatmulPrecision::Bf16)
    small_gemm_bf16(m, n, k, a, b, c);
  else
    small_gemm_impl(m, n, k, a, b, c);
}
void small_gemm(std::int64_t m, std::int64_t n, std::int64_t k, StridedMatrix<double> a, StridedMatrix<double> b,
                double* c) {
  small_gemm_impl(m, n, k, a, b, c);
}

}  // namespace sf
