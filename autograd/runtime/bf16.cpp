// bf16: see bf16.h.
#include "autograd/runtime/bf16.h"

#include <omp.h>

#include <dnnl.hpp>
#include <stdexcept>

#include "autograd/kernels.h"
#include "autograd/runtime/cpu_features.h"
#include "autograd/runtime/gemm.h"
#include "autograd/runtime/scratch_buffer.h"

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

// A (rows, cols) matrix with row stride ld: row-major, or (transposed) column-major.
dnnl::memory::desc matrix_desc(int rows, int cols, bool column_major, int ld, dnnl::memory::data_type type) {
  const dnnl::memory::dims strides = column_major ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1};
  return dnnl::memory::desc({rows, cols}, type, strides);
}

// The matmul primitive for these shapes, with its descriptor. oneDNN keeps made primitives in its
// own cache (1024 by default), so making the same one again costs a few microseconds, not a JIT
// compile.
struct Bf16Matmul {
  dnnl::matmul::primitive_desc desc;
  dnnl::matmul primitive;
};

Bf16Matmul make_matmul(int m, int n, int k, bool trans_a, bool trans_b, int lda, int ldb, int ldc, bool accumulate) {
  using dt = dnnl::memory::data_type;
  const auto a_desc = matrix_desc(m, k, trans_a, lda, dt::bf16);  // op(a) (m,k); a stored (k,m) if trans_a
  const auto b_desc = matrix_desc(k, n, trans_b, ldb, dt::bf16);  // op(b) (k,n); b stored (n,k) if trans_b
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

// c (m,n) = op(a) @ op(b) [+ c] on already rounded bf16 inputs, one oneDNN matmul. Called inside
// gemm_bf16's parallel loop, oneDNN runs it on the calling thread alone (no nested team).
void onednn_matmul(bool trans_a, bool trans_b, int m, int n, int k, const std::uint16_t* a, int lda,
                   const std::uint16_t* b, int ldb, float* c, int ldc, bool accumulate) {
  const Bf16Matmul product = make_matmul(m, n, k, trans_a, trans_b, lda, ldb, ldc, accumulate);
  dnnl::engine& engine = cpu_engine();
  dnnl::memory a_mem(product.desc.src_desc(), engine, const_cast<std::uint16_t*>(a));
  dnnl::memory b_mem(product.desc.weights_desc(), engine, const_cast<std::uint16_t*>(b));
  dnnl::memory c_mem(product.desc.dst_desc(), engine, c);
  thread_local dnnl::stream stream(engine);
  product.primitive.execute(stream, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
  stream.wait();
}

}  // namespace

// The threads split C into row (or column) blocks as the float32 gemm does (gemm_in_blocks,
// gemm.h), one single-threaded oneDNN call per block, rather than letting oneDNN thread each
// product: one thread team for the whole step, as for the float32 products (docs/speed.md has
// the measurement). As in gemm, each element of c is one oneDNN call's sum over the whole k.
void gemm_bf16(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
               float* c, int ldc, bool accumulate) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: c = 0, or c unchanged
    if (!accumulate)
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) c[static_cast<std::int64_t>(i) * ldc + j] = 0.0f;
    return;
  }
  cpu_engine();  // on a CPU without bf16 units this throws here, on the calling thread
  // Round the inputs into contiguous bf16 buffers, kept as stored: a is (m,k) or, transposed,
  // (k,m), so its row stride is a16_ld; the same for b.
  thread_local ScratchBuffer<std::uint16_t> a16, b16;  // scratch_buffer.h: no zero-fill on growing
  std::uint16_t* a_all = a16.get(static_cast<std::size_t>(m) * k);
  std::uint16_t* b_all = b16.get(static_cast<std::size_t>(k) * n);
  const int a16_ld = trans_a ? m : k, b16_ld = trans_b ? k : n;
  round_rows_to_bf16(a, lda, trans_a ? k : m, a16_ld, a_all);
  round_rows_to_bf16(b, ldb, trans_b ? n : k, b16_ld, b_all);

  gemm_in_blocks(trans_a, trans_b, m, n, k, a_all, a16_ld, b_all, b16_ld, c, ldc,
                 [&](int rows, int cols, const std::uint16_t* a_block, const std::uint16_t* b_block, float* c_block) {
                   onednn_matmul(trans_a, trans_b, rows, cols, k, a_block, a16_ld, b_block, b16_ld, c_block, ldc,
                                 accumulate);
                 });
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
  return make_matmul(64, 64, 64, false, true, 64, 64, 64, false).desc.impl_info_str();
}

}  // namespace sf
