// Tests for bf16 matrix products (autograd/runtime/bf16.h): the rounding, oneDNN's product against
// the plain reference, the error bound against float32, and the precision switch that routes
// Linear, matmul and attention's small products through them.
//
// Letters: M rows of op(a), K the shared dim, N columns of op(b). Tags: [bf16] on all,
// [reference] where the fast kernel is checked against the plain loops.
//
// The products need a CPU with AMX-BF16 or AVX512-BF16. On one without, those cases print
// "skipped: ..." naming the missing instruction sets (a WARN) and pass; the rounding and the
// refusal are tested everywhere.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "autograd/kernels.h"
#include "autograd/runtime/bf16.h"
#include "autograd/runtime/cpu_features.h"
#include "autograd/runtime/gemm.h"
#include "autograd/runtime/small_gemm.h"
#include "test_util.h"

using namespace sf;

namespace {

// float32's unit roundoff: a float32 sum of K products is within K * u of exact, relative to
// sum |a| |b| (the bound require_close_within_rounding uses too).
constexpr double kU32 = 0x1p-24;
// bf16's unit roundoff: rounding to 8 significant bits moves a value by at most 2^-8 relative,
// so a product of two rounded inputs is within 2 * 2^-8 + 2^-16 of the unrounded one.
constexpr double kU16 = 0x1p-8;

bool has_bf16_units(const char* what) {
  if (bf16_unit() != Bf16Unit::None) return true;
  WARN("skipped: " << what << " needs AMX-BF16 or AVX512-BF16; this CPU has " << bf16_units_found());
  return false;
}

// The nearest bf16 to x, found without float_to_bf16's bit trick: the two bf16 values around x
// (x's top 16 bits, and the next one away from zero), the closer in double, a tie to the one
// whose last bit is 0.
std::uint16_t nearest_bf16(float x) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &x, 4);
  const std::uint16_t below = static_cast<std::uint16_t>(bits >> 16);  // toward zero
  const std::uint16_t above = static_cast<std::uint16_t>(below + 1);   // away from zero
  const double d_below = std::abs(static_cast<double>(bf16_to_float(below)) - x);
  const double d_above = std::abs(static_cast<double>(bf16_to_float(above)) - x);
  if (d_below != d_above) return d_below < d_above ? below : above;
  return (below & 1) == 0 ? below : above;
}

// A (rows, cols) float32 matrix with row stride ld >= cols, values uniform in [-1, 1) spread over
// a few powers of two (so rounding to bf16 loses different bits).
std::vector<float> random_matrix(int rows, int cols, int ld, Generator& gen) {
  std::vector<float> m(static_cast<std::size_t>(rows) * ld, 0.0f);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      m[static_cast<std::size_t>(r) * ld + c] =
          static_cast<float>((2 * gen.uniform() - 1) * std::ldexp(1.0, -static_cast<int>(gen.randint(4))));
  return m;
}

// sum_k |op(a)[i,k]| |op(b)[k,j]| for the error bounds, and the exact product in double.
struct Exact {
  std::vector<double> product, abs_product;
};
Exact exact_product(bool ta, bool tb, int m, int n, int k, const std::vector<float>& a, int lda,
                    const std::vector<float>& b, int ldb) {
  Exact e;
  e.product.assign(static_cast<std::size_t>(m) * n, 0.0);
  e.abs_product.assign(static_cast<std::size_t>(m) * n, 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int kk = 0; kk < k; ++kk) {
        const double x = ta ? a[static_cast<std::size_t>(kk) * lda + i] : a[static_cast<std::size_t>(i) * lda + kk];
        const double y = tb ? b[static_cast<std::size_t>(j) * ldb + kk] : b[static_cast<std::size_t>(kk) * ldb + j];
        e.product[static_cast<std::size_t>(i) * n + j] += x * y;
        e.abs_product[static_cast<std::size_t>(i) * n + j] += std::abs(x * y);
      }
  return e;
}

// One product of every transpose combination, with odd sizes and padded leading dimensions.
struct Case {
  bool ta, tb;
  int m = 37, n = 53, k = 129;
  int lda() const { return (ta ? m : k) + 3; }
  int ldb() const { return (tb ? k : n) + 5; }
  int ldc() const { return n + 2; }
};

}  // namespace

TEST_CASE("float_to_bf16 rounds to the nearest bf16, ties to even", "[bf16]") {
  CHECK(float_to_bf16(1.0f) == 0x3f80);
  CHECK(float_to_bf16(-2.0f) == 0xc000);
  // 1 + 2^-8 lies halfway between 1 (last bit 0) and 1 + 2^-7 (last bit 1): to 1
  CHECK(round_to_bf16(1.0f + 0x1p-8f) == 1.0f);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up
  CHECK(round_to_bf16(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);
  // just above halfway: up
  CHECK(round_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f);
  CHECK(std::isinf(round_to_bf16(std::numeric_limits<float>::infinity())));
  CHECK(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  // a NaN whose payload is all in the low bits must not round to infinity
  CHECK(std::isnan(round_to_bf16(__builtin_bit_cast(float, 0x7f800001u))));
  CHECK(std::isinf(round_to_bf16(std::numeric_limits<float>::max())));  // beyond the largest bf16 + half a step
  CHECK(round_to_bf16(0x1p-130f) == 0x1p-130f);  // a subnormal with few bits stays

  Generator gen(3);
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    const std::uint32_t bits = static_cast<std::uint32_t>(gen.randint(1ull << 32));
    const float x = __builtin_bit_cast(float, bits);
    if (!std::isfinite(x) || std::abs(x) > 3e38f) continue;  // the neighbour above would be inf/NaN
    INFO("x = " << x << " (bits 0x" << std::hex << bits << ")");
    REQUIRE(float_to_bf16(x) == nearest_bf16(x));
    ++checked;
  }
  CHECK(checked > 190000);
}

TEST_CASE("round_rows_to_bf16 rounds a strided matrix into a contiguous one", "[bf16]") {
  Generator gen(4);
  const int rows = 300, cols = 257, ld = 260;  // 77100 values: the threaded path
  const std::vector<float> x = random_matrix(rows, cols, ld, gen);
  std::vector<std::uint16_t> out(static_cast<std::size_t>(rows) * cols);
  round_rows_to_bf16(x.data(), ld, rows, cols, out.data());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      REQUIRE(out[static_cast<std::size_t>(r) * cols + c] == nearest_bf16(x[static_cast<std::size_t>(r) * ld + c]));
}

namespace {

// gemm_bf16 against gemm_bf16_reference for every transpose layout and accumulate, at sizes
// m, n, k with padded leading dimensions: within float32's summing error of the same rounded
// inputs, and the padding of c untouched.
void check_gemm_bf16_layouts(int m, int n, int k, Generator& gen) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool accumulate : {false, true}) {
        const Case c{ta, tb, m, n, k};
        const auto a = random_matrix(ta ? c.k : c.m, ta ? c.m : c.k, c.lda(), gen);
        const auto b = random_matrix(tb ? c.n : c.k, tb ? c.k : c.n, c.ldb(), gen);
        const auto c0 = random_matrix(c.m, c.n, c.ldc(), gen);  // what accumulate adds onto
        std::vector<float> fast = c0, ref = c0;
        gemm_bf16(ta, tb, c.m, c.n, c.k, a.data(), c.lda(), b.data(), c.ldb(), fast.data(), c.ldc(), accumulate);
        gemm_bf16_reference(ta, tb, c.m, c.n, c.k, a.data(), c.lda(), b.data(), c.ldb(), ref.data(), c.ldc(), accumulate);
        const Exact e = exact_product(ta, tb, c.m, c.n, c.k, a, c.lda(), b, c.ldb());
        double worst = 0;  // |fast - ref| / allowed
        for (int i = 0; i < c.m; ++i)
          for (int j = 0; j < c.n; ++j) {
            const std::size_t at = static_cast<std::size_t>(i) * c.ldc() + j;
            // the same rounded inputs, exact products: only float32's sums differ (and c + sum)
            const double allowed = (c.k + 2) * kU32 * (e.abs_product[static_cast<std::size_t>(i) * c.n + j] +
                                                      (accumulate ? std::abs(c0[at]) : 0.0));
            worst = std::max(worst, std::abs(static_cast<double>(fast[at]) - ref[at]) / allowed);
          }
        INFO(m << " x " << n << " x " << k << ", trans_a " << ta << " trans_b " << tb << " accumulate " << accumulate
               << ": worst error / allowed " << worst);
        REQUIRE(worst <= 1.0);
        // the padding beyond n in each row of c is left alone
        for (int i = 0; i < c.m; ++i)
          for (int j = c.n; j < c.ldc(); ++j)
            REQUIRE(fast[static_cast<std::size_t>(i) * c.ldc() + j] == c0[static_cast<std::size_t>(i) * c.ldc() + j]);
      }
}

}  // namespace

TEST_CASE("gemm_bf16 (oneDNN) matches the plain reference on every layout", "[bf16][reference]") {
  if (!has_bf16_units("gemm_bf16")) return;
  Generator gen(5);
  const Case c{false, false};
  REQUIRE(static_cast<std::int64_t>(c.m) * c.n * c.k < kGemmParallelMinMacs);  // one call, on this thread
  check_gemm_bf16_layouts(c.m, c.n, c.k, gen);
}

TEST_CASE("gemm_bf16 split into blocks among the threads matches the plain reference", "[bf16][reference]") {
  if (!has_bf16_units("gemm_bf16")) return;
  Generator gen(9);
  const int before = num_threads();
  set_num_threads(2);
  // Large enough to split (m n k >= kGemmParallelMinMacs): into row blocks when m >= n, column
  // blocks otherwise, one per core. On 2 cores 83 rows make blocks of 48 and 35 (edges at
  // multiples of kGemmBlockAlign).
  REQUIRE(gemm_blocks(83, 45, 130) == std::min(usable_cores(), 83 / kGemmBlockAlign));
  REQUIRE(gemm_blocks(40, 101, 140) == std::min(usable_cores(), 101 / kGemmBlockAlign));
  check_gemm_bf16_layouts(83, 45, 130, gen);   // row blocks
  check_gemm_bf16_layouts(40, 101, 140, gen);  // column blocks
  REQUIRE(20LL * 20 * 700 >= kGemmParallelMinMacs);
  REQUIRE(gemm_blocks(20, 20, 700) == 1);
  check_gemm_bf16_layouts(20, 20, 700, gen);  // large, but too narrow for two blocks: one call
  set_num_threads(before);
}

TEST_CASE("a bf16 product is within bf16's rounding bound of the exact one, and really rounds", "[bf16][reference]") {
  if (!has_bf16_units("gemm_bf16")) return;
  Generator gen(6);
  const Case c{false, true, 64, 96, 256};
  const auto a = random_matrix(c.m, c.k, c.lda(), gen);
  const auto b = random_matrix(c.n, c.k, c.ldb(), gen);
  std::vector<float> bf16(static_cast<std::size_t>(c.m) * c.ldc()), f32 = bf16;
  gemm_bf16(c.ta, c.tb, c.m, c.n, c.k, a.data(), c.lda(), b.data(), c.ldb(), bf16.data(), c.ldc());
  gemm(c.ta, c.tb, c.m, c.n, c.k, a.data(), c.lda(), b.data(), c.ldb(), f32.data(), c.ldc());
  const Exact e = exact_product(c.ta, c.tb, c.m, c.n, c.k, a, c.lda(), b, c.ldb());
  double worst_bf16 = 0, worst_f32_in_bf16_bound = 0, largest_f32_error = 0;
  for (int i = 0; i < c.m; ++i)
    for (int j = 0; j < c.n; ++j) {
      const std::size_t at = static_cast<std::size_t>(i) * c.ldc() + j, e_at = static_cast<std::size_t>(i) * c.n + j;
      const double bf16_bound = (2 * kU16 + kU16 * kU16 + (c.k + 1) * kU32) * e.abs_product[e_at];
      worst_bf16 = std::max(worst_bf16, std::abs(bf16[at] - e.product[e_at]) / bf16_bound);
      worst_f32_in_bf16_bound = std::max(worst_f32_in_bf16_bound, std::abs(bf16[at] - f32[at]) / bf16_bound);
      largest_f32_error = std::max(largest_f32_error, std::abs(f32[at] - e.product[e_at]) /
                                                          ((c.k + 1) * kU32 * e.abs_product[e_at]));
    }
  INFO("bf16 error / bound " << worst_bf16 << ", |bf16 - float32| / bound " << worst_f32_in_bf16_bound);
  CHECK(worst_bf16 <= 1.0);
  CHECK(largest_f32_error <= 1.0);
  // The inputs really were rounded: bf16's largest error is hundreds of times float32's (each
  // input loses 16 bits; a product that skipped the rounding would err like float32).
  double largest_bf16_abs = 0, largest_f32_abs = 0;
  for (int i = 0; i < c.m; ++i)
    for (int j = 0; j < c.n; ++j) {
      const std::size_t at = static_cast<std::size_t>(i) * c.ldc() + j, e_at = static_cast<std::size_t>(i) * c.n + j;
      largest_bf16_abs = std::max(largest_bf16_abs, std::abs(bf16[at] - e.product[e_at]));
      largest_f32_abs = std::max(largest_f32_abs, std::abs(f32[at] - e.product[e_at]));
    }
  INFO("largest error: bf16 " << largest_bf16_abs << ", float32 " << largest_f32_abs);
  CHECK(largest_bf16_abs > 100 * largest_f32_abs);
}

TEST_CASE("the bf16 precision routes gemm, Linear, matmul and small products through bf16, then restores",
          "[bf16][matmul][linear]") {
  if (!has_bf16_units("MatmulPrecisionScope")) return;
  Generator gen(7);
  const Tensor x = randn({48, 64}, gen), w = randn({80, 64}, gen), bias = randn({80}, gen);
  // the expected Linear in bf16: bias + x @ w^T with both rounded, from the reference loops
  std::vector<float> expected(48 * 80);
  for (int r = 0; r < 48; ++r)
    for (int j = 0; j < 80; ++j) expected[r * 80 + j] = bias.data<float>()[j];
  gemm_bf16_reference(false, true, 48, 80, 64, x.data<float>(), 64, w.data<float>(), 64, expected.data(), 80, true);
  const Tensor y_f32 = linear(x, w, bias);
  Tensor y_bf16;
  {
    const MatmulPrecisionScope scope(MatmulPrecision::Bf16);
    CHECK(matmul_precision() == MatmulPrecision::Bf16);
    y_bf16 = linear(x, w, bias);
    // a small batched product (attention's per-head slices go through small_gemm)
    const Tensor q = randn({2, 3, 5, 8}, gen), k = randn({2, 3, 8, 6}, gen);
    const Tensor s = matmul(q, k);
    Tensor q_rounded = empty(q.shape()), k_rounded = empty(k.shape());
    for (std::int64_t i = 0; i < q.numel(); ++i) q_rounded.data<float>()[i] = round_to_bf16(q.data<float>()[i]);
    for (std::int64_t i = 0; i < k.numel(); ++i) k_rounded.data<float>()[i] = round_to_bf16(k.data<float>()[i]);
    test::require_close_within_rounding(s, matmul_naive(q_rounded, k_rounded), q_rounded, k_rounded, kU32);
    // and through a transposed view, as q k^T reads k: b's rows are not contiguous
    const Tensor k_t = transpose(contiguous(transpose(k, 2, 3)), 2, 3);  // k's values, column-major slices
    REQUIRE(k_t.strides()[3] != 1);
    CHECK(matmul(q, k_t).to_vector<float>() == s.to_vector<float>());
    // one row per slice (a decoding step's query): b's contiguous rows are rounded as they are
    // read, a transposed b through a rounded copy; the same rounding, the same bits
    const Tensor q1 = q.narrow(2, 0, 1).contiguous();  // (2,3,1,8)
    const Tensor s1 = matmul(q1, k);
    CHECK(s1.to_vector<float>() == matmul(q1, k_t).to_vector<float>());
    CHECK(s1.to_vector<float>() == s.narrow(2, 0, 1).contiguous().to_vector<float>());
    // float64 is never touched: the same bits as without the scope
    const Tensor a64 = randn({20, 30}, gen, Dtype::Float64), b64 = randn({30, 10}, gen, Dtype::Float64);
    const Tensor in_scope = matmul(a64, b64);
    const MatmulPrecisionScope back(MatmulPrecision::Float32);  // scopes nest
    CHECK(matmul_precision() == MatmulPrecision::Float32);
    CHECK(matmul(a64, b64).to_vector<double>() == in_scope.to_vector<double>());
  }
  CHECK(matmul_precision() == MatmulPrecision::Float32);  // restored
  const auto got = y_bf16.to_vector<float>();
  double worst = 0, moved = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(got[i] - expected[i])));
    moved = std::max(moved, static_cast<double>(std::abs(got[i] - y_f32.to_vector<float>()[i])));
  }
  INFO("largest |bf16 Linear - reference| " << worst << ", largest |bf16 - float32| " << moved);
  CHECK(worst < 1e-4);  // sums of 64 products of size ~1 in float32: ~64 * 2^-24 * 8
  CHECK(moved > 1e-3);  // and the rounding shows against float32
  CHECK(linear(x, w, bias).to_vector<float>() == y_f32.to_vector<float>());  // float32 again, the same bits
}

TEST_CASE("the bf16 precision is refused with one line on a CPU without the units", "[bf16]") {
  if (bf16_unit() != Bf16Unit::None) {
    // the message a CPU without them would give (require_bf16_unit's text, checked on every CPU
    // through the program: tests/test_bad_inputs.cpp runs it with SCRATCHFORMER_BF16_UNITS=none)
    CHECK_NOTHROW(require_bf16_unit("train.precision = \"bf16\""));
    return;
  }
  try {
    const MatmulPrecisionScope scope(MatmulPrecision::Bf16, "train.precision = \"bf16\"");
    FAIL("no error");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    CHECK(what.find("train.precision = \"bf16\" needs a CPU with bf16 matrix units") != std::string::npos);
    CHECK(what.find("AVX512-BF16 no") != std::string::npos);
    CHECK(what.find('\n') == std::string::npos);
  }
  CHECK(matmul_precision() == MatmulPrecision::Float32);
}
