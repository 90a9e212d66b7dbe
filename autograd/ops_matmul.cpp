// Matrix multiplication: matmul (through BLAS) and matmul_naive (the triple-loop reference).
//
// Letters: M rows of a, K the shared dim, N columns of b; "..." the batch dims, which
// broadcast NumPy-style between a and b.
//
//   a: (..., M, K) @ b: (..., K, N) -> out: (..., M, N)
//   out[..., i, j] = sum_k a[..., i, k] * b[..., k, j]
//
// The fast path hands each (M,K) x (K,N) product to BLAS (sf::gemm, gemm.h), except batches of
// small products (attention's per-head slices), which an OpenMP loop hands to small_gemm
// (small_gemm.h), one slice per thread at a time. BLAS reads a
// matrix from a pointer, a leading dimension ld and a transpose flag, so a matrix whose last two
// strides are (ld, 1) (row-major, maybe narrowed) or (1, ld) (a transposed view) is passed as
// it is; only other layouts (e.g. expanded or every-other-element views) are copied first.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/exercise.h"
#include "autograd/runtime/gemm.h"
#include "autograd/kernels.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/runtime/small_gemm.h"

namespace sf {

namespace {

// ---- shapes -------------------------------------------------------------------------------

// The shapes of one product: the broadcast batch dims and M, K, N.
struct MatmulShape {
  Shape batch;  // broadcast of a's and b's batch dims, e.g. (2, 5, 3)
  std::int64_t m = 0, k = 0, n = 0;
  Shape out() const {
    Shape s = batch;
    s.push_back(m);
    s.push_back(n);
    return s;
  }
};

// Checks a: (..., M, K) and b: (..., K, N) and works out the output's shape.
// `op` names the caller ("matmul", "matmul_naive") in errors.
MatmulShape matmul_shape(const Tensor& a, const Tensor& b, const char* op) {
  check_float(a, op);
  check_same_dtype(a, b, op);
  if (a.dim() < 2 || b.dim() < 2)
    throw std::invalid_argument(std::string(op) + ": expected both operands to be at least 2-D, got a " +
                                shape_str(a.shape()) + " and b " + shape_str(b.shape()) +
                                " (use unsqueeze to make a vector a 1-row or 1-column matrix)");
  MatmulShape s;
  s.m = a.size(-2);
  s.k = a.size(-1);
  s.n = b.size(-1);
  if (b.size(-2) != s.k)
    throw std::invalid_argument(std::string(op) + ": a " + shape_str(a.shape()) + " and b " +
                                shape_str(b.shape()) + " do not fit: a's last dim (" + std::to_string(s.k) +
                                ") must equal b's second-to-last dim (" + std::to_string(b.size(-2)) + ")");
  const Shape batch_a(a.shape().begin(), a.shape().end() - 2);
  const Shape batch_b(b.shape().begin(), b.shape().end() - 2);
  try {
    s.batch = broadcast_shapes(batch_a, batch_b, op);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument(std::string(op) + ": the batch dims of a " + shape_str(a.shape()) + " and b " +
                                shape_str(b.shape()) + " do not broadcast: " + shape_str(batch_a) + " vs " +
                                shape_str(batch_b));
  }
  return s;
}

// Strides of t's batch dims seen as the broadcast `batch` shape (0 where t is broadcast).
Shape batch_strides(const Tensor& t, const Shape& batch) {
  const Tensor matrix_dims_dropped =
      make_view(t, Shape(t.shape().begin(), t.shape().end() - 2), Shape(t.strides().begin(), t.strides().end() - 2),
                t.offset());
  return broadcast_strides(matrix_dims_dropped, batch);
}

// ---- the BLAS path ------------------------------------------------------------------------

// How BLAS reads one (rows, cols) matrix in place: row-major with leading dimension ld
// (element [i][j] at i*ld + j), or the transpose of a row-major (cols, rows) matrix
// (element [i][j] at j*ld + i).
struct BlasLayout {
  CBLAS_TRANSPOSE trans = CblasNoTrans;
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
    if (ld >= std::max<std::int64_t>(cols, 1)) return BlasLayout{CblasNoTrans, blas_int(ld, "leading dimension")};
  }
  if (rows == 1 || row_stride == 1) {  // columns are contiguous: (1, ld)
    const std::int64_t ld = cols == 1 ? std::max<std::int64_t>(rows, 1) : col_stride;
    if (ld >= std::max<std::int64_t>(rows, 1)) return BlasLayout{CblasTrans, blas_int(ld, "leading dimension")};
  }
  return std::nullopt;
}

std::optional<BlasLayout> blas_layout(const Tensor& t) {
  return blas_layout(t.size(-2), t.size(-1), t.strides()[t.dim() - 2], t.strides()[t.dim() - 1]);
}

// c (M,N), row-major with ldc = N  =  op(a) (M,K) @ op(b) (K,N), through sf::gemm (gemm.h:
// BLAS, a large product split over the OpenMP threads).
template <class T>
void gemm(BlasLayout la, BlasLayout lb, int m, int n, int k, const T* a, const T* b, T* c) {
  sf::gemm(la.trans == CblasTrans, lb.trans == CblasTrans, m, n, k, a, la.ld, b, lb.ld, c, n);
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

// ---- many small products: an OpenMP loop over the slices ----------------------------------

// Slices at least this big in total (multiply-adds over all of them) are shared out among the
// threads; smaller batches (decoding one token) are not worth waking the team for.
constexpr std::int64_t kSmallSlicesParallelMacs = 1 << 16;

// out: (batch..., M, N) contiguous = a @ b, one small_gemm per batch element, the elements
// spread over the OpenMP threads. Each slice is computed whole by one thread (no sum is split),
// so the result does not depend on the thread count. sa, sb, so: the batch strides.
template <class T>
void matmul_small_slices(const Tensor& a, const Tensor& b, const MatmulShape& s, const Shape& sa, const Shape& sb,
                         const Shape& so, Tensor& out) {
  struct SliceOffsets {
    std::int64_t a, b, out;
  };
  std::vector<SliceOffsets> slices;
  slices.reserve(static_cast<std::size_t>(shape_numel(s.batch)));
  for_each_strided<3>(s.batch, {&sa, &sb, &so}, [&](std::int64_t ia, std::int64_t ib, std::int64_t io) {
    slices.push_back({ia, ib, io});
  });
  const std::int64_t a_row = a.strides()[a.dim() - 2], a_col = a.strides()[a.dim() - 1];
  const std::int64_t b_row = b.strides()[b.dim() - 2], b_col = b.strides()[b.dim() - 1];
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* po = out.data<T>();
  const std::int64_t count = static_cast<std::int64_t>(slices.size());
#pragma omp parallel for schedule(static) if (count * s.m * s.n * s.k >= kSmallSlicesParallelMacs)
  for (std::int64_t i = 0; i < count; ++i) {
    const SliceOffsets& o = slices[static_cast<std::size_t>(i)];
    small_gemm(s.m, s.n, s.k, StridedMatrix<T>{pa + o.a, a_row, a_col}, StridedMatrix<T>{pb + o.b, b_row, b_col},
               po + o.out);
  }
}

// out: (batch..., M, N), contiguous and already allocated. a and b are readable by BLAS.
template <class T>
void matmul_blas_kernel(const Tensor& a, const Tensor& b, const MatmulShape& s, Tensor& out) {
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* po = out.data<T>();
  const BlasLayout la = *blas_layout(a), lb = *blas_layout(b);
  const int m = blas_int(s.m, "M"), n = blas_int(s.n, "N"), k = blas_int(s.k, "K");

  // One big gemm: b is a single matrix and a's batch folds into its rows,
  // a: (B*M, K) @ b: (K, N) -> out: (B*M, N).
  if (b.dim() == 2 && a.dim() > 2) {
    if (const std::optional<std::int64_t> row_stride = folded_row_stride(a)) {
      const BlasLayout folded{CblasNoTrans, blas_int(*row_stride, "leading dimension")};
      gemm(folded, lb, blas_int(shape_numel(s.batch) * s.m, "batch * M"), n, k, pa, pb, po);
      return;
    }
  }
  // One gemm per batch element; a broadcast batch dim has stride 0, so the same matrix is reused.
  const Shape sa = batch_strides(a, s.batch), sb = batch_strides(b, s.batch);
  const Shape so = batch_strides(out, s.batch);
  if (s.m * s.n * s.k <= kSmallGemmMaxMacs && shape_numel(s.batch) > 1) {
    matmul_small_slices<T>(a, b, s, sa, sb, so, out);
    return;
  }
  for_each_strided<3>(s.batch, {&sa, &sb, &so}, [&](std::int64_t ia, std::int64_t ib, std::int64_t io) {
    gemm(la, lb, m, n, k, pa + ia, pb + ib, po + io);
  });
}

// ---- the naive reference ------------------------------------------------------------------

// out: (batch..., M, N) contiguous = a @ b by the definition, one output element at a time,
// reading a and b through their strides (any layout, no copies). Sums in double.
template <class T>
void matmul_naive_kernel(const Tensor& a, const Tensor& b, const MatmulShape& s, Tensor& out) {
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* po = out.data<T>();
  const std::int64_t a_row = a.strides()[a.dim() - 2], a_col = a.strides()[a.dim() - 1];
  const std::int64_t b_row = b.strides()[b.dim() - 2], b_col = b.strides()[b.dim() - 1];
  const Shape sa = batch_strides(a, s.batch), sb = batch_strides(b, s.batch);
  const Shape so = batch_strides(out, s.batch);
  for_each_strided<3>(s.batch, {&sa, &sb, &so}, [&](std::int64_t ia, std::int64_t ib, std::int64_t io) {
    for (std::int64_t i = 0; i < s.m; ++i) {
      for (std::int64_t j = 0; j < s.n; ++j) {
        double acc = 0;
        for (std::int64_t kk = 0; kk < s.k; ++kk)
          acc += static_cast<double>(pa[ia + i * a_row + kk * a_col]) * static_cast<double>(pb[ib + kk * b_row + j * b_col]);
        po[io + i * s.n + j] = static_cast<T>(acc);
      }
    }
  });
}

}  // namespace

// ---- MatMul: out = a @ b ------------------------------------------------------------------
// a: (..., M, K), b: (..., K, N) -> out: (..., M, N), batch dims broadcast.
// Saves: b (for grad_a) if a requires grad, a (for grad_b) if b requires grad.
// Backward, with grad_output = dL/dout: (..., M, N):
//   grad_a = grad_output @ b^T   (..., M, N) @ (..., N, K) -> (..., M, K)
//   grad_b = a^T @ grad_output   (..., K, M) @ (..., M, N) -> (..., K, N)
// b^T and a^T are transposed views, which the BLAS path reads with a transpose flag (no copy);
// each gradient is then summed over the batch dims its input was broadcast along (sum_to).
struct MatMul final : Node {
  Tensor a, b;
  const char* name() const override { return "MatMul"; }

  static Tensor forward(const Tensor& a, const Tensor& b) {
    const MatmulShape s = matmul_shape(a, b, "matmul");
    Tensor out = empty(s.out(), a.dtype());
    if (out.numel() > 0) {
      if (s.k == 0) {
        out.fill_(0.0);  // a sum of no terms
      } else {
        // Copy an operand only when BLAS cannot read its matrices in place.
        const Tensor ca = blas_layout(a) ? a.detach() : contiguous(a.detach());
        const Tensor cb = blas_layout(b) ? b.detach() : contiguous(b.detach());
        dispatch_float(a.dtype(), "matmul", [&](auto tag) {
          using T = decltype(tag);
          matmul_blas_kernel<T>(ca, cb, s, out);
        });
      }
    }
    if (any_requires_grad({&a, &b})) {
      auto node = std::make_shared<MatMul>();
      if (a.requires_grad()) node->b = b.detach();
      if (b.requires_grad()) node->a = a.detach();
      connect(node, {&a, &b}, out);
    }
    return out;
  }

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    // EXERCISE(matmul): out = a @ b with a: (..., M, K), b: (..., K, N). From grad_output: (..., M, N)
    // and the saved b (kept when a needs a gradient) and a (kept when b does), return {grad_a, grad_b}:
    // grad_a: (..., M, K) = grad_output times b transposed, grad_b: (..., K, N) = a transposed times
    // grad_output, each summed over the batch dims its input was broadcast along (sum_to). Leave a
    // gradient undefined where needs_input_grad(i) is false.
    // BEGIN SOLUTION
    Tensor grad_a, grad_b;
    if (needs_input_grad(0))  // grad_a: (..., M, K)
      grad_a = sum_to(matmul(grad_output, transpose(b, -2, -1)), input_shapes[0]);
    if (needs_input_grad(1)) {  // grad_b: (..., K, N)
      if (input_shapes[1].size() == 2 && input_shapes[0].size() > 2) {
        // b was shared by every batch element: sum over the batch inside one gemm,
        // a^T: (K, B*M) @ grad_output: (B*M, N) -> (K, N). (reshape copies only a non-contiguous a.)
        const std::int64_t k = a.size(-1), n = grad_output.size(-1);
        grad_b = matmul(transpose(reshape(a, {-1, k}), 0, 1), reshape(grad_output, {-1, n}));
      } else {
        grad_b = sum_to(matmul(transpose(a, -2, -1), grad_output), input_shapes[1]);
      }
    }
    return {grad_a, grad_b};
    // END SOLUTION
  }
  void release_saved() override { a = Tensor(); b = Tensor(); }
};

Tensor matmul(const Tensor& a, const Tensor& b) { return MatMul::forward(a, b); }

// The reference beside the fast kernel: same shapes and broadcasting, no BLAS, no autograd.
// a: (..., M, K), b: (..., K, N) -> out: (..., M, N)
Tensor matmul_naive(const Tensor& a, const Tensor& b) {
  const MatmulShape s = matmul_shape(a, b, "matmul_naive");
  Tensor out = empty(s.out(), a.dtype());
  dispatch_float(a.dtype(), "matmul_naive", [&](auto tag) {
    using T = decltype(tag);
    matmul_naive_kernel<T>(a, b, s, out);
  });
  return out;
}

}  // namespace sf
