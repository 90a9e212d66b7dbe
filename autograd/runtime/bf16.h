// bf16: mixed-precision matrix products, as PyTorch's CPU autocast does them.
//
// With the precision switched to bf16 (MatmulPrecisionScope, or train.precision = "bf16"), every
// float32 matrix product -- Linear, the tied output projection, attention's q k^T and weights @ v,
// forward and backward -- rounds its two inputs to bf16 (round to nearest, ties to even) and
// adds the products up in float32. Everything else stays float32: the master weights, Adam's
// moments, layer norm, softmax, the loss and every sum outside a product. float64 is never
// touched (the gradient checks run in float64).
//
// Why it is safe: a bf16 number has 8 significant bits, so the product of two is exact in
// float32 (16 bits); the only new error is rounding the inputs, at most 2^-8 relative each:
//   |bf16 product - float32 product| <= (2 * 2^-8 + 2^-16) * sum_k |a[i,k]| |b[k,j]|  (+ float32's own)
// Why it is fast: the CPU's bf16 units (cpu_features.h) do twice (AVX512-BF16) to sixteen
// times (AMX) the multiply-adds per cycle of float32 FMA, and the inputs are half the bytes.
//
// Letters as in gemm.h: c (m,n) = op(a) (m,k) @ op(b) (k,n).
#pragma once

#include <cstdint>
#include <string>

namespace sf {

// ---- float32 <-> bf16 -------------------------------------------------------------------
// A bf16 value is kept as its 16 bits: the upper half of the float32 with the same value.

// Rounds to the nearest bf16, ties to even (the low 16 bits decide); infinities stay, a NaN
// stays a (quiet) NaN.
inline std::uint16_t float_to_bf16(float x) {
  std::uint32_t u = __builtin_bit_cast(std::uint32_t, x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round half to even: a tie rounds up only from an odd bf16
  return static_cast<std::uint16_t>(u >> 16);
}
// Exact: the 16 bits become the top half of a float32.
inline float bf16_to_float(std::uint16_t b) { return __builtin_bit_cast(float, static_cast<std::uint32_t>(b) << 16); }
// x rounded to bf16, as a float32.
inline float round_to_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

// out[r * cols + j] = bf16(x[r * ld + j]) for r < rows, j < cols: a strided float32 matrix into
// a contiguous bf16 one. Rows are shared among the OpenMP threads when there are many.
void round_rows_to_bf16(const float* x, std::int64_t ld, std::int64_t rows, std::int64_t cols, std::uint16_t* out);

// ---- The precision of float32 matrix products ----------------------------------------------

enum class MatmulPrecision {
  Float32,  // float32 inputs, float32 sums (OpenBLAS): the default
  Bf16,     // bf16 inputs, float32 sums, on the CPU's bf16 units
};

// The current precision. One setting for the process (the OpenMP threads read it too).
MatmulPrecision matmul_precision();
// "float32" or "bf16" as the enum; throws std::invalid_argument naming the accepted values for
// anything else.
MatmulPrecision parse_matmul_precision(const std::string& name);

// Sets the precision until the end of the scope, then restores the previous one (like
// `with torch.autocast("cpu", dtype=torch.bfloat16):`). Bf16 throws std::runtime_error, one line
// naming `what`, on a CPU without bf16 units (require_bf16_unit).
class MatmulPrecisionScope {
 public:
  explicit MatmulPrecisionScope(MatmulPrecision precision, const std::string& what = "bf16 matrix products");
  ~MatmulPrecisionScope();
  MatmulPrecisionScope(const MatmulPrecisionScope&) = delete;
  MatmulPrecisionScope& operator=(const MatmulPrecisionScope&) = delete;

 private:
  MatmulPrecision previous_;
};

// ---- The product ---------------------------------------------------------------------------

// c = op(a) @ op(b) [+ c], inputs rounded to bf16, sums in float32, on the bf16 units through
// oneDNN's matmul (it picks AMX tiles or AVX512-BF16 code as cpu_features.h chose). Arguments as
// gemm (gemm.h); gemm calls this when the precision is Bf16. Throws on a CPU without the units.
void gemm_bf16(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
               float* c, int ldc, bool accumulate = false);

// The plain reference gemm_bf16 is tested against: the same rounding, then three loops, the sum
// over k in double (the exact sum of the rounded inputs' products, rounded once to float32).
void gemm_bf16_reference(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b,
                         int ldb, float* c, int ldc, bool accumulate = false);

// Which oneDNN kernel gemm_bf16 runs here, e.g. "brg:avx512_core_bf16" or "brg:avx512_core_amx".
std::string bf16_kernel_name();

}  // namespace sf
