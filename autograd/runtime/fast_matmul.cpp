// The fast kernels of matmul and linear (autograd/fast.h has the contract; the plain kernels are
// in ops_matmul.cpp and ops_linear.cpp: contiguous operands, one BLAS call per product).
//
// Letters: M rows of a, K the shared dim, N columns of b; "..." the batch dims.
//
// What they add to the plain kernels, each for one reason:
//   - strided operands are read in place: BLAS takes a matrix as (pointer, leading dimension,
//     transpose flag), so a row-major matrix, a narrowed one or a transposed view needs no copy;
//   - a batch that shares one b folds into one product, a: (B*M, K) @ b: (K, N): one call with
//     a tall matrix beats B calls with short ones;
//   - a batch of small products (attention's per-head slices) runs on small_gemm, one slice per
//     thread: for a few thousand multiply-adds a BLAS call costs more than the arithmetic;
//   - a big product is cut into blocks over the OpenMP threads (runtime/gemm.h says why one
//     thread team, and why the blocks follow the shape, not the thread count);
//   - with train.precision = "bf16", float32 products run on the CPU's bf16 units (runtime/bf16.h);
//   - while a model decodes, each Linear weight is packed once and reused at every step
//     (runtime/packed_linear.h), instead of BLAS packing it again on every call.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/fast.h"
#include "autograd/kernels.h"
#include "autograd/ops.h"
#include "autograd/runtime/bf16.h"
#include "autograd/runtime/cpu_features.h"
#include "autograd/runtime/gemm.h"
#include "autograd/runtime/packed_linear.h"
#include "autograd/runtime/small_gemm.h"

namespace sf::fast {

namespace {

// How BLAS reads one (rows, cols) matrix in place: row-major with leading dimension ld
// (element [i][j] at i*ld + j), or the transpose of a row-major (cols, rows) matrix
// (element [i][j] at j*ld + i).
struct BlasLayout {
  bool trans = false;
  int ld = 1;
};

int blas_int(std::int64_t v, const char* what) {
  if (v > INT_MAX)
    throw std::invalid_argument(std::string("matmul: ") + what + " " + std::to_string(v) +
                                " is too large for the BLAS interface (int)");
  return static_cast<int>(v);
}

// The layout for a (rows, cols) matrix with strides (row_stride, col_stride), or nothing if BLAS
// cannot read it without a copy. A dim of size 1 may have any stride, so it never disqualifies.
std::optional<BlasLayout> blas_layout(std::int64_t rows, std::int64_t cols, std::int64_t row_stride,
                                      std::int64_t col_stride) {
  if (cols == 1 || col_stride == 1) {  // rows are contiguous: (ld, 1)
    const std::int64_t ld = rows == 1 ? std::max<std::int64_t>(cols, 1) : row_stride;
    if (ld >= std::max<std::int64_t>(cols, 1)) return BlasLayout{false, blas_int(ld, "leading dimension")};
  }
  if (rows == 1 || row_stride == 1) {  // columns are contiguous: (1, ld)
    const std::int64_t ld = cols == 1 ? std::max<std::int64_t>(rows, 1) : col_stride;
    if (ld >= std::max<std::int64_t>(rows, 1)) return BlasLayout{true, blas_int(ld, "leading dimension")};
  }
  return std::nullopt;
}

std::optional<BlasLayout> blas_layout(const Tensor& t) {
  return blas_layout(t.size(-2), t.size(-1), t.strides()[t.dim() - 2], t.strides()[t.dim() - 1]);
}

// Strides of t's batch dims seen as the broadcast `batch` shape (0 where t is broadcast).
Shape batch_strides(const Tensor& t, const Shape& batch) {
  const Tensor matrix_dims_dropped =
      make_view(t, Shape(t.shape().begin(), t.shape().end() - 2), Shape(t.strides().begin(), t.strides().end() - 2),
                t.offset());
  return broadcast_strides(matrix_dims_dropped, batch);
}

// When a's batch dims and its M dim merge into one row dim, a: (..., M, K) can be read as one
// (B*M, K) row-major matrix; returns that matrix's row stride (holds for any contiguous a, and
// for a narrowed along K). Otherwise nothing.
std::optional<std::int64_t> folded_row_stride(const Tensor& a) {
  const std::int64_t k = a.size(-1);
  if (k != 1 && a.strides()[a.dim() - 1] != 1) return std::nullopt;
  std::optional<std::int64_t> row_stride;  // stride of the innermost row dim of size > 1
  std::int64_t expected = 0;               // the stride the next outer dim must have
  for (std::int64_t d = a.dim() - 2; d >= 0; --d) {
    if (a.shape()[d] == 1) continue;  // a size-1 dim may have any stride
    if (!row_stride) {
      row_stride = a.strides()[d];
    } else if (a.strides()[d] != expected) {
      return std::nullopt;
    }
    expected = a.strides()[d] * a.shape()[d];
  }
  const std::int64_t r = row_stride.value_or(std::max<std::int64_t>(k, 1));  // a single row
  if (r < std::max<std::int64_t>(k, 1)) return std::nullopt;
  return r;
}

// Slices at least this big in total (multiply-adds over all of them) are shared out among the
// threads; smaller batches (decoding one token) are not worth waking the team for.
constexpr std::int64_t kSmallSlicesParallelMacs = 1 << 16;

// out: (batch..., M, N) contiguous = a @ b, one small_gemm per batch element, the elements
// spread over the OpenMP threads. Each slice is computed whole by one thread (no sum is split),
// so the result does not depend on the thread count. sa, sb, so: the batch strides.
void matmul_small_slices(const Tensor& a, const Tensor& b, const Shape& batch, std::int64_t m, std::int64_t n,
                         std::int64_t k, const Shape& sa, const Shape& sb, const Shape& so, Tensor& out) {
  struct SliceOffsets {
    std::int64_t a, b, out;
  };
  std::vector<SliceOffsets> slices;
  slices.reserve(static_cast<std::size_t>(shape_numel(batch)));
  for_each_strided<3>(batch, {&sa, &sb, &so}, [&](std::int64_t ia, std::int64_t ib, std::int64_t io) {
    slices.push_back({ia, ib, io});
  });
  const std::int64_t a_row = a.strides()[a.dim() - 2], a_col = a.strides()[a.dim() - 1];
  const std::int64_t b_row = b.strides()[b.dim() - 2], b_col = b.strides()[b.dim() - 1];
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  const std::int64_t count = static_cast<std::int64_t>(slices.size());
#pragma omp parallel for schedule(static) if (count * m * n * k >= kSmallSlicesParallelMacs)
  for (std::int64_t i = 0; i < count; ++i) {
    const SliceOffsets& o = slices[static_cast<std::size_t>(i)];
    small_gemm(m, n, k, StridedMatrix<float>{pa + o.a, a_row, a_col}, StridedMatrix<float>{pb + o.b, b_row, b_col},
               po + o.out);
  }
}

// c (M,N), row-major with ldc = N  =  op(a) (M,K) @ op(b) (K,N), through sf::gemm (gemm.h).
void gemm_layout(BlasLayout la, BlasLayout lb, int m, int n, int k, const float* a, const float* b, float* c) {
  sf::gemm(la.trans, lb.trans, m, n, k, a, la.ld, b, lb.ld, c, n);
}

// out: (batch..., M, N), contiguous. a and b are readable by BLAS in place.
void matmul_strided(const Tensor& a, const Tensor& b, Tensor& out) {
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  const std::int64_t m64 = a.size(-2), k64 = a.size(-1), n64 = b.size(-1);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  const BlasLayout la = *blas_layout(a), lb = *blas_layout(b);
  const int m = blas_int(m64, "M"), n = blas_int(n64, "N"), k = blas_int(k64, "K");

  // One big gemm: b is a single matrix and a's batch folds into its rows,
  // a: (B*M, K) @ b: (K, N) -> out: (B*M, N).
  if (b.dim() == 2 && a.dim() > 2) {
    if (const std::optional<std::int64_t> row_stride = folded_row_stride(a)) {
      const BlasLayout folded{false, blas_int(*row_stride, "leading dimension")};
      gemm_layout(folded, lb, blas_int(shape_numel(batch) * m64, "batch * M"), n, k, pa, pb, po);
      return;
    }
  }
  // One gemm per batch element; a broadcast batch dim has stride 0, so the same matrix is reused.
  const Shape sa = batch_strides(a, batch), sb = batch_strides(b, batch), so = batch_strides(out, batch);
  if (m64 * n64 * k64 <= kSmallGemmMaxMacs && shape_numel(batch) > 1) {
    matmul_small_slices(a, b, batch, m64, n64, k64, sa, sb, so, out);
    return;
  }
  for_each_strided<3>(batch, {&sa, &sb, &so}, [&](std::int64_t ia, std::int64_t ib, std::int64_t io) {
    gemm_layout(la, lb, m, n, k, pa + ia, pb + ib, po + io);
  });
}

// Y (R, out) = bias, each row: where the product is then added.
void fill_rows_with_bias(const float* bias, float* y, std::int64_t rows, std::int64_t out) {
#pragma omp parallel for schedule(static) if (rows * out > kParallelMinElements)
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < out; ++j) y[r * out + j] = bias[j];
}

// The packed weights to use for this product, or nullptr for gemm: inside a PackedWeightsScope
// (decoding), for a parameter weight, while matrix products run in float32 or in bf16 on a CPU
// with AVX512-BF16.
PackedWeights* packed_weights_for(const Tensor& weight) {
  PackedWeights* packed = packed_weights_in_use();
  if (!packed) return nullptr;
  if (matmul_precision() == MatmulPrecision::Bf16 && !has_avx512_bf16()) return nullptr;
  const bool parameter = weight.is_leaf() && weight.requires_grad() && weight.is_contiguous();
  return parameter ? packed : nullptr;
}

}  // namespace

bool matmul(const Tensor& a, const Tensor& b, Tensor& out) {
  if (a.dtype() != Dtype::Float32) return false;
  // Copy an operand only when BLAS cannot read its matrices in place.
  const Tensor ca = blas_layout(a) ? a : contiguous(a);
  const Tensor cb = blas_layout(b) ? b : contiguous(b);
  matmul_strided(ca, cb, out);
  return true;
}

bool linear(const Tensor& x2d, const Tensor& w, const Tensor& b, const Tensor& weight, Tensor& y) {
  if (x2d.dtype() != Dtype::Float32) return false;
  const std::int64_t rows = x2d.size(0), in = x2d.size(1), out = w.size(0);
  for (std::int64_t v : {rows, in, out})
    if (v > INT32_MAX) throw std::invalid_argument("linear: size " + std::to_string(v) + " is too large for BLAS (int)");
  float* y_data = y.data<float>();
  if (b.defined()) fill_rows_with_bias(b.data<float>(), y_data, rows, out);
  if (PackedWeights* packed = packed_weights_for(weight)) {  // decoding: W packed once, reused every step
    const bool bf16 = matmul_precision() == MatmulPrecision::Bf16;
    packed_linear(x2d.data<float>(), rows, packed->get(w.data<float>(), out, in, bf16), y_data, b.defined());
    return true;
  }
  //   X (R, in) @ W^T (in, out): W is stored (out, in), so BLAS reads it with the transpose flag
  sf::gemm(/*trans_a=*/false, /*trans_b=*/true, static_cast<int>(rows), static_cast<int>(out), static_cast<int>(in),
           x2d.data<float>(), static_cast<int>(in), w.data<float>(), static_cast<int>(in), y_data,
           static_cast<int>(out), /*accumulate=*/b.defined());
  return true;
}

}  // namespace sf::fast
