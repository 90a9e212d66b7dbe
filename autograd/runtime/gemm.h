// gemm: the fast kernels' BLAS call for a matrix product, threaded by OpenMP (the plain kernels
// make one cblas call per product: blas_gemm, autograd/kernels.h).
//
// Why not let OpenBLAS thread itself? OpenBLAS (pthread build) keeps its own worker threads and
// the OpenMP loops of the kernels keep theirs. On a 2-core machine that is three busy threads
// for two cores: after each parallel loop OpenMP's workers spin waiting for the next one while
// OpenBLAS's workers want the cores, and after each product OpenBLAS's workers spin (yielding)
// while OpenMP wants them: two threads would run slower than one. So there is one thread team,
// OpenMP's: set_num_threads (threads.h) keeps OpenBLAS on one thread, and gemm cuts a large
// product into row (or column) blocks of C, one single-threaded BLAS call per block, the blocks
// shared out over the OpenMP threads.
//
// Each element of C is still computed by one BLAS call over the whole K, so splitting changes
// no sum into partial sums. But where a block starts still matters to the last bit: a BLAS
// kernel works in tiles, and an element near a tile's edge can be summed in another order than
// one inside it, so a product cut at another row can differ from one call's in the last bits of
// some elements (docs/speed.md has a measured case). So the blocks are a function of the product's
// shape and the machine only (gemm_blocks), never of the thread count: one thread computes the
// same blocks one after the other, and float32 training gives the same bits on any number of
// threads (on one machine: another CPU has other BLAS kernels, and other bits, anyway).
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

#include "autograd/runtime/threads.h"

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

// How many blocks c (m,n) = op(a) (m,k) @ op(b) (k,n) is cut into: 1 for a small product (fewer
// multiply-adds than kGemmParallelMinMacs), else one per usable core (usable_cores,
// threads.h), along the rows when m >= n, the columns otherwise, each at least kGemmBlockAlign
// wide. The threads share the blocks out: on a 2-core machine 1 thread runs both blocks one after
// the other, 2 threads one each; with the default thread count (one per core) that is one block
// per thread, and no more calls than the threads need.
int gemm_blocks(int m, int n, int k);

// The split itself, shared by gemm (one BLAS call per block) and gemm_bf16 (one oneDNN call per
// block on its rounded copies): c (m,n) = op(a) @ op(b) is cut into gemm_blocks(m, n, k) row
// blocks (when m >= n) or column blocks, shared out over the OpenMP threads, and
// block(rows, cols, a_block, b_block, c_block) computes each, with the leading dimensions of a,
// b and c unchanged:
//   row block [r0, r1):    c[r0:r1, :] = op(a)[r0:r1, :] @ op(b)
//   column block [c0, c1): c[:, c0:c1] = op(a) @ op(b)[:, c0:c1]
// A product of one block is one call on the calling thread. With one thread, or inside a
// parallel region (even a one-thread one: omp_get_level counts it, omp_in_parallel does not), the
// blocks run one after the other on the calling thread, the same calls a team would make, and no
// region opens. An exception from a block is rethrown after the region.
template <class In, class Out, class Block>
void gemm_in_blocks(bool ta, bool tb, int m, int n, int k, const In* a, int lda, const In* b, int ldb, Out* c,
                    int ldc, Block&& block) {
  const int parts = gemm_blocks(m, n, k);
  if (parts == 1) {
    block(m, n, a, b, c);
    return;
  }
  const bool split_rows = m >= n;
  const auto block_i = [&](int i) {
    int begin = 0, end = 0;
    gemm_block_range(split_rows ? m : n, parts, i, begin, end);
    if (begin == end) return;
    if (split_rows)  // rows r of op(a): a + r*lda, or column r of a stored (k,m): a + r
      block(end - begin, n, ta ? a + begin : a + static_cast<std::int64_t>(begin) * lda, b,
            c + static_cast<std::int64_t>(begin) * ldc);
    else  // columns j of op(b): b + j, or row j of b stored (n,k): b + j*ldb
      block(m, end - begin, a, tb ? b + static_cast<std::int64_t>(begin) * ldb : b + begin, c + begin);
  };
  const int threads = omp_get_level() > 0 ? 1 : std::min(parts, omp_get_max_threads());
  if (threads == 1) {
    // no region: inside a one-thread region, a library's own parallel loop would start a nested team
    for (int i = 0; i < parts; ++i) block_i(i);
    return;
  }
  std::exception_ptr failure;  // an exception must not leave an OpenMP region: kept, rethrown after
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int i = 0; i < parts; ++i) try {
    block_i(i);
  } catch (...) {
#pragma omp critical(sf_gemm_in_blocks_failure)
    if (!failure) failure = std::current_exception();
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace sf
