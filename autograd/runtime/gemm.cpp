// gemm: see gemm.h for why the products are split here rather than inside OpenBLAS.
#include "autograd/runtime/gemm.h"

#include <cblas.h>

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

// One BLAS call per block of C on the OpenMP threads (gemm_in_blocks, gemm.h).
template <class T>
void gemm_split(bool ta, bool tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb, T* c, int ldc,
                bool accumulate) {
  gemm_in_blocks(ta, tb, m, n, k, a, lda, b, ldb, c, ldc,
                 [&](int rows, int cols, const T* a_block, const T* b_block, T* c_block) {
                   blas_gemm(ta, tb, rows, cols, k, a_block, lda, b_block, ldb, c_block, ldc, accumulate);
                 });
}

}  // namespace

void gemm_block_range(int size, int parts, int i, int& begin, int& end) {
  const int per = (size + parts - 1) / parts;
  const int aligned = (per + kGemmBlockAlign - 1) / kGemmBlockAlign * kGemmBlockAlign;
  begin = std::min(size, i * aligned);
  end = std::min(size, begin + aligned);
}

int gemm_blocks(int m, int n, int k) {
  if (static_cast<std::int64_t>(m) * n * k < kGemmParallelMinMacs) return 1;
  const int size = m >= n ? m : n;  // the dimension gemm_in_blocks cuts
  return std::max(1, std::min(usable_cores(), size / kGemmBlockAlign));
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
