// gemm: the one place that calls BLAS for a matrix product, threaded by OpenMP.
//
// Why not let OpenBLAS thread itself? OpenBLAS (pthread build) keeps its own worker threads and
// the OpenMP loops of the kernels keep theirs. On a 2-core machine that is three busy threads
// for two cores: after each parallel loop OpenMP's workers spin waiting for the next one while
// OpenBLAS's workers want the cores, and after each product OpenBLAS's workers spin (yielding)
// while OpenMP wants them. Measured: 2 threads ran slower than 1. So there is one thread team,
// OpenMP's: set_num_threads (threads.h) keeps OpenBLAS on one thread, and gemm splits a large
// product into row (or column) blocks of C, one single-threaded BLAS call per OpenMP thread.
//
// Each element of C is still computed by one BLAS call over the whole K, so splitting changes
// no sum into partial sums; with one thread it is exactly one BLAS call, as before.
//
//   c (m,n), row-major with row stride ldc  =  op(a) (m,k) @ op(b) (k,n)   [+ c, with accumulate]
//   op(a) = a (row-major, row stride lda) or, with trans_a, the transpose of a row-major (k,m) a.
//
// With the matrix-product precision set to bf16 (bf16.h), the float32 gemm hands its product to
// gemm_bf16 instead: inputs rounded to bf16, sums in float32, on the CPU's bf16 units.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <exception>

namespace sf {

// accumulate = true adds the product to what c holds (BLAS's beta = 1): Linear starts c as the
// bias, rows repeated, so the bias costs no pass of its own (ops_linear.cpp).
void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
          int ldc, bool accumulate = false);
void gemm(bool trans_a, bool trans_b, int m, int n, int k, const double* a, int lda, const double* b, int ldb,
          double* c, int ldc, bool accumulate = false);

// Products with fewer multiply-adds (m*n*k) than this run as one call on the calling thread
// (OpenBLAS makes the same choice for its own threads: 4 * 65536).
constexpr std::int64_t kGemmParallelMinMacs = 4 * 65536;

// Block `i` of `parts` over `size` rows (or columns) of C is [begin, end), edges multiples of
// kGemmBlockAlign (BLAS kernels work in such panels). Blocks at the end may be empty.
constexpr int kGemmBlockAlign = 16;
void gemm_block_range(int size, int parts, int i, int& begin, int& end);

// The split itself, shared by gemm (one BLAS call per block) and gemm_bf16 (one oneDNN call per
// block on its rounded copies): c (m,n) = op(a) @ op(b) is cut into row blocks (when m >= n) or
// column blocks, one per OpenMP thread, and block(rows, cols, a_block, b_block, c_block) computes
// each, with the leading dimensions of a, b and c unchanged:
//   row block [r0, r1):    c[r0:r1, :] = op(a)[r0:r1, :] @ op(b)
//   column block [c0, c1): c[:, c0:c1] = op(a) @ op(b)[:, c0:c1]
// A small product, one inside a parallel region, or one too narrow for two blocks is one call on
// the calling thread and opens no region (inside a one-thread region, a library's own parallel
// loop would start a nested team). An exception from a block is rethrown after the region.
template <class In, class Out, class Block>
void gemm_in_blocks(bool ta, bool tb, int m, int n, int k, const In* a, int lda, const In* b, int ldb, Out* c,
                    int ldc, Block&& block) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const bool small = static_cast<std::int64_t>(m) * n * k < kGemmParallelMinMacs;
  const bool split_rows = m >= n;
  const int parts = std::min(threads, std::max(1, (split_rows ? m : n) / kGemmBlockAlign));
  if (small || parts == 1) {
    block(m, n, a, b, c);
    return;
  }
  std::exception_ptr failure;  // an exception must not leave an OpenMP region: kept, rethrown after
#pragma omp parallel for schedule(static) num_threads(parts)
  for (int i = 0; i < parts; ++i) try {
    int begin = 0, end = 0;
    gemm_block_range(split_rows ? m : n, parts, i, begin, end);
    if (begin == end) continue;
    if (split_rows)  // rows r of op(a): a + r*lda, or column r of a stored (k,m): a + r
      block(end - begin, n, ta ? a + begin : a + static_cast<std::int64_t>(begin) * lda, b,
            c + static_cast<std::int64_t>(begin) * ldc);
    else  // columns j of op(b): b + j, or row j of b stored (n,k): b + j*ldb
      block(m, end - begin, a, tb ? b + static_cast<std::int64_t>(begin) * ldb : b + begin, c + begin);
  } catch (...) {
#pragma omp critical(sf_gemm_in_blocks_failure)
    if (!failure) failure = std::current_exception();
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace sf
