// Matrix multiplication: matmul and matmul_naive (the triple-loop reference).
//
// Letters: M rows of a, K the shared dim, N columns of b; "..." the batch dims, which
// broadcast NumPy-style between a and b.
//
//   a: (..., M, K) @ b: (..., K, N) -> out: (..., M, N)
//   out[..., i, j] = sum_k a[..., i, k] * b[..., k, j]
//
// The plain kernel makes both operands contiguous and hands each (M,K) x (K,N) product of the
// batch to BLAS, one call each. The fast kernel (fast::matmul, autograd/fast.h) computes the
// same products without the copies, folded, in small slices or in blocks over the threads.
#include <cblas.h>

#include <climits>
#include <stdexcept>
#include <string>

#include "autograd/exercise.h"
#include "autograd/fast.h"
#include "autograd/kernels.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace sf {

namespace {
// BLAS takes its sizes as int.
int blas_int(std::int64_t v) {
  SF_EXPECT(v <= INT_MAX, "matmul: size ", v, " is too large for the BLAS interface (int)");
  return static_cast<int>(v);
}
}  // namespace

void blas_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b, float* c,
               bool accumulate, bool transpose_b) {
  const int ldb = static_cast<int>(transpose_b ? k : n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, blas_int(m), blas_int(n),
              blas_int(k), 1.0f, a, blas_int(k), b, ldb, accumulate ? 1.0f : 0.0f, c, blas_int(n));
}
void blas_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const double* a, const double* b, double* c,
               bool accumulate, bool transpose_b) {
  const int ldb = static_cast<int>(transpose_b ? k : n);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, blas_int(m), blas_int(n),
              blas_int(k), 1.0, a, blas_int(k), b, ldb, accumulate ? 1.0 : 0.0, c, blas_int(n));
}

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
  SF_EXPECT(a.dim() >= 2 && b.dim() >= 2, op, ": expected both operands to be at least 2-D, got a ", a.shape(),
            " and b ", b.shape(), " (use unsqueeze to make a vector a 1-row or 1-column matrix)");
  MatmulShape s;
  s.m = a.size(-2);
  s.k = a.size(-1);
  s.n = b.size(-1);
  SF_EXPECT(b.size(-2) == s.k, op, ": a ", a.shape(), " and b ", b.shape(), " do not fit: a's last dim (", s.k,
            ") must equal b's second-to-last dim (", b.size(-2), ")");
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

// ---- the plain kernel ----------------------------------------------------------------------

// c (m,n) = a (m,k) @ b (k,n), all row-major and contiguous: one BLAS call (blas_gemm, kernels.h).
// out: (batch..., M, N) contiguous; a and b contiguous. A broadcast batch dim has stride 0 in
// sa or sb, so the same matrix is read again for every element of that dim.
template <class T>
void matmul_kernel(const Tensor& a, const Tensor& b, const MatmulShape& s, Tensor& out) {
  const Shape sa = batch_strides(a, s.batch), sb = batch_strides(b, s.batch), so = batch_strides(out, s.batch);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* po = out.data<T>();
  for_each_strided<3>(s.batch, {&sa, &sb, &so}, [&](std::int64_t ia, std::int64_t ib, std::int64_t io) {
    blas_gemm(s.m, s.n, s.k, pa + ia, pb + ib, po + io);
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
// b^T and a^T are transposed views (the plain kernel copies them; the fast one reads them in
// place); each gradient is then summed over the batch dims its input was broadcast along (sum_to).
struct MatMul final : Node {
  Tensor a, b;
  const char* name() const override { return "MatMul"; }

  static Tensor forward(const Tensor& a, const Tensor& b) {
    const MatmulShape s = matmul_shape(a, b, "matmul");
    Tensor out = empty(s.out(), a.dtype());
    if (out.numel() > 0) {
      if (s.k == 0) {
        out.fill_(0.0);  // a sum of no terms
      } else if (!(fast::kEnabled && fast::matmul(a.detach(), b.detach(), out))) {
        const Tensor ca = contiguous(a.detach()), cb = contiguous(b.detach());
        dispatch_float(a.dtype(), "matmul", [&](auto tag) {
          using T = decltype(tag);
          matmul_kernel<T>(ca, cb, s, out);
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
