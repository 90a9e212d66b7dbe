// bf16: see bf16.h.
#include "autograd/runtime/bf16.h"

#include <omp.h>

#include <dnnl.hpp>
#include <stdexcept>
#include <vector>

#include "autograd/kernels.h"
#include "autograd/runtime/cpu_features.h"

namespace sf {

// ---- float32 -> bf16 -----------------------------------------------------------------------

void round_rows_to_bf16(const float* x, std::int64_t ld, std::int64_t rows, std::int64_t cols, std::uint16_t* out) {
#pragma omp parallel for schedule(static) if (rows * cols > kParallelMinElements && !omp_in_parallel())
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* __restrict row = x + r * ld;
    std::uint16_t* __restrict dst = out + r * cols;
    for (std::int64_t j = 0; j < cols; ++j) dst[j] = float_to_bf16(row[j]);
  }
}

// ---- The precision switch ------------------------------------------------------------------

namespace {
MatmulPrecision g_precision = MatmulPrecision::Float32;
}  // namespace

MatmulPrecision matmul_precision() { return g_precision; }

MatmulPrecision parse_matmul_precision(const std::string& name) {
  if (name == "float32") return MatmulPrecision::Float32;
  if (name == "bf16") return MatmulPrecision::Bf16;
  throw std::invalid_argument("precision: expected float32 or bf16, got '" + name + "'");
}

MatmulPrecisionScope::MatmulPrecisionScope(MatmulPrecision precision, const std::string& what)
    : previous_(g_precision) {
  if (precision == MatmulPrecision::Bf16) require_bf16_unit(what);
  g_precision = precision;
}

MatmulPrecisionScope::~MatmulPrecisionScope() { g_precision = previous_; }

// ---- The product through oneDNN ------------------------------------------------------------

namespace {

// oneDNN chooses its kernels from the CPU's ISA; capping it at the unit cpu_features chose makes
// SCRATCHFORMER_BF16_UNITS=avx512-bf16 run the AVX512-BF16 kernels on an AMX machine too. The
// cap must come before oneDNN's first primitive, so the engine is made here, once.
dnnl::engine make_cpu_engine() {
  require_bf16_unit("bf16 matrix products");
  dnnl::set_max_cpu_isa(bf16_unit() == Bf16Unit::AmxBf16 ? dnnl::cpu_isa::avx512_core_amx
                                                           : dnnl::cpu_isa::avx512_core_bf16);
  return dnnl::engine(dnnl::engine::kind::cpu, 0);
}

dnnl::engine& cpu_engine() {
  static dnnl::engine engine = make_cpu_engine();
  return engine;
}

// A (rows, cols) matrix, contiguous, row-major or (transposed) column-major.
dnnl::memory::desc matrix_desc(int rows, int cols, bool column_major, dnnl::memory::data_type type) {
  const dnnl::memory::dims strides = column_major ? dnnl::memory::dims{1, rows} : dnnl::memory::dims{cols, 1};
  return dnnl::memory::desc({rows, cols}, type, strides);
}

// The matmul primitive for these shapes, with its descriptor. oneDNN keeps made primitives in its
// own cache (1024 by default), so making the same one again costs a few microseconds, not a JIT
// compile.
struct Bf16Matmul {
  dnnl::matmul::primitive_desc desc;
  dnnl::matmul primitive;
};

Bf16Matmul make_matmul(int m, int n, int k, bool trans_a, bool trans_b, int ldc, bool accumulate) {
  using dt = dnnl::memory::data_type;
  const auto a_desc = matrix_desc(m, k, trans_a, dt::bf16);  // op(a) (m,k); a stored (k,m) if trans_a
  const auto b_desc = matrix_desc(k, n, trans_b, dt::bf16);  // op(b) (k,n); b stored (n,k) if trans_b
  const auto c_desc = dnnl::memory::desc({m, n}, dt::f32, dnnl::memory::dims{ldc, 1});
  dnnl::primitive_attr attr;
  if (accumulate) {  // c += product: BLAS's beta = 1 is oneDNN's "sum" post-op
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  dnnl::matmul::primitive_desc desc(dnnl::matmul::desc(a_desc, b_desc, c_desc), attr, cpu_engine());
  return {desc, dnnl::matmul(desc)};
}

}  // namespace

void gemm_bf16(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
               float* c, int ldc, bool accumulate) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: c = 0, or c unchanged
    if (!accumulate)
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) c[static_cast<std::int64_t>(i) * ldc + j] = 0.0f;
    return;
  }
  // Round the inputs into bf16 buffers, kept as stored: a is (m,k) or, transposed, (k,m).
  thread_local std::vector<std::uint16_t> a16, b16;
  a16.resize(static_cast<std::size_t>(m) * k);
  b16.resize(static_cast<std::size_t>(k) * n);
  round_rows_to_bf16(a, lda, trans_a ? k : m, trans_a ? m : k, a16.data());
  round_rows_to_bf16(b, ldb, trans_b ? n : k, trans_b ? k : n, b16.data());

  const Bf16Matmul product = make_matmul(m, n, k, trans_a, trans_b, ldc, accumulate);
  dnnl::engine& engine = cpu_engine();
  dnnl::memory a_mem(product.desc.src_desc(), engine, a16.data());
  dnnl::memory b_mem(product.desc.weights_desc(), engine, b16.data());
  dnnl::memory c_mem(product.desc.dst_desc(), engine, c);
  thread_local dnnl::stream stream(engine);
  product.primitive.execute(stream, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
  stream.wait();
}

void gemm_bf16_reference(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b,
                         int ldb, float* c, int ldc, bool accumulate) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int kk = 0; kk < k; ++kk) {
        const float a_ik = trans_a ? a[static_cast<std::int64_t>(kk) * lda + i] : a[static_cast<std::int64_t>(i) * lda + kk];
        const float b_kj = trans_b ? b[static_cast<std::int64_t>(j) * ldb + kk] : b[static_cast<std::int64_t>(kk) * ldb + j];
        sum += static_cast<double>(round_to_bf16(a_ik)) * static_cast<double>(round_to_bf16(b_kj));
      }
      float& out = c[static_cast<std::int64_t>(i) * ldc + j];
      out = accumulate ? static_cast<float>(out + sum) : static_cast<float>(sum);
    }
}

std::string bf16_kernel_name() {
  return make_matmul(64, 64, 64, false, true, 64, false).desc.impl_info_str();
}

}  // namespace sf
