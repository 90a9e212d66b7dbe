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

#include <cstdint>

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

// How gemm splits a product among `parts` threads: block `i` of C's rows (or columns) is
// [begin, end), edges multiples of kGemmBlockAlign (BLAS kernels work in such panels). Blocks
// at the end may be empty (begin == end). gemm_bf16 splits the same way.
constexpr int kGemmBlockAlign = 16;
void gemm_block_range(int size, int parts, int i, int& begin, int& end);

}  // namespace sf
