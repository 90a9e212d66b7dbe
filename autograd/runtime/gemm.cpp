// gemm: see gemm.h for why the products are split here rather than inside OpenBLAS.
#include "autograd/runtime/gemm.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>

#include "autograd/runtime/bf16.h"

namespace sf {

namespace {

// One single-threaded BLAS call per dtype.
void blas_gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
               int ldc, bool accumulate) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b,
              ldb, accumulate ? 1.0f : 0.0f, c, ldc);
}
void blas_gemm(bool ta, bool tb, int m, int n, int k, const double* a, int lda, const double* b, int ldb, double* c,
               int ldc, bool accumulate) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0, a, lda, b,
              ldb, accumulate ? 1.0 : 0.0, c, ldc);
}

// Splits C into `parts` row blocks (when it has at least as many rows as columns) or column
// blocks, and runs one BLAS call per block on the OpenMP threads.
//   row block [r0, r1):    c[r0:r1, :] = op(a)[r0:r1, :] @ op(b)
//   column block [c0, c1): c[:, c0:c1] = op(a) @ op(b)[:, c0:c1]
template <class T>
void gemm_split(bool ta, bool tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb, T* c, int ldc,
                bool accumulate) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const bool small = static_cast<std::int64_t>(m) * n * k < kGemmParallelMinMacs;
  if (threads == 1 || small) {
    blas_gemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
    return;
  }
  const bool split_rows = m >= n;
  const int parts = std::min(threads, std::max(1, (split_rows ? m : n) / kGemmBlockAlign));
#pragma omp parallel for schedule(static) num_threads(parts)
  for (int i = 0; i < parts; ++i) {
    int begin = 0, end = 0;
    gemm_block_range(split_rows ? m : n, parts, i, begin, end);
    if (begin == end) continue;
    if (split_rows) {  // rows r of op(a): a + r*lda, or column r of a stored (k,m): a + r
      const T* a_block = ta ? a + begin : a + static_cast<std::int64_t>(begin) * lda;
      blas_gemm(ta, tb, end - begin, n, k, a_block, lda, b, ldb, c + static_cast<std::int64_t>(begin) * ldc, ldc,
                accumulate);
    } else {  // columns j of op(b): b + j, or row j of b stored (n,k): b + j*ldb
      const T* b_block = tb ? b + static_cast<std::int64_t>(begin) * ldb : b + begin;
      blas_gemm(ta, tb, m, end - begin, k, a, lda, b_block, ldb, c + begin, ldc, accumulate);
    }
  }
}

}  // namespace

void gemm_block_range(int size, int parts, int i, int& begin, int& end) {
  const int per = (size + parts - 1) / parts;
  const int aligned = (per + kGemmBlockAlign - 1) / kGemmBlockAlign * kGemmBlockAlign;
  begin = std::min(size, i * aligned);
  end = std::min(size, begin + aligned);
}

void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
          int ldc, bool accumulate) {
  if (matmul_precision() == MatmulPrecision::Bf16) {  // train.precision = "bf16": see bf16.h
    gemm_bf16(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
    return;
  }
  gemm_split(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}
void gemm(bool trans_a, bool trans_b, int m, int n, int k, const double* a, int lda, const double* b, int ldb,
          double* c, int ldc, bool accumulate) {
  gemm_split(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

}  // namespace sf
