// Tests for small_gemm (the per-slice kernel of batched matmul) against matmul_naive, and for the
// OpenBLAS kernel the programs run (blas_core.h).
//
// Letters: M rows of a, K the shared dim, N columns of b; a: (..., M, K) @ b: (..., K, N).
// Tags: [matmul] on all; [reference] where the fast kernel is checked against the naive loop;
// [grad] on gradient checks.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "autograd/kernels.h"
#include "autograd/runtime/blas_core.h"
#include "autograd/runtime/small_gemm.h"
#include "autograd/runtime/threads.h"
#include "test_util.h"

using namespace sf;

namespace {

using test::kUnitRoundoff32;
using test::kUnitRoundoff64;

// Requires c == a @ b within rounding (test_util.h's bound), against the naive reference (which
// sums in double).
void require_matches_naive(const Tensor& c, const Tensor& a, const Tensor& b, double u) {
  test::require_close_within_rounding(c, matmul_naive(a, b), a, b, u);
}

// small_gemm on one (m,k) @ (k,n) product read through t's last two strides.
Tensor small_gemm_of(const Tensor& a, const Tensor& b) {
  Tensor c = empty({a.size(0), b.size(1)}, a.dtype());
  dispatch_float(a.dtype(), "test", [&](auto tag) {
    using T = decltype(tag);
    small_gemm(a.size(0), b.size(1), a.size(1), StridedMatrix<T>{a.data<T>(), a.strides()[0], a.strides()[1]},
               StridedMatrix<T>{b.data<T>(), b.strides()[0], b.strides()[1]}, c.data<T>());
  });
  return c;
}

}  // namespace

TEST_CASE("small_gemm matches the naive matmul on every layout", "[matmul][reference]") {
  Generator gen(11);
  // m = 7 and 9 leave 3 and 1 rows after the blocks of 4; n = 1 is a column vector.
  for (const auto& [m, k, n] : std::vector<std::array<std::int64_t, 3>>{
           {24, 64, 24}, {7, 5, 3}, {9, 1, 13}, {1, 16, 1}, {4, 8, 17}}) {
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        // A transposed operand is a transposed view of a (cols, rows) tensor: strides (1, rows).
        const Tensor a = trans_a ? randn({k, m}, gen).transpose(0, 1) : randn({m, k}, gen);
        const Tensor b = trans_b ? randn({n, k}, gen).transpose(0, 1) : randn({k, n}, gen);
        require_matches_naive(small_gemm_of(a, b), a, b, kUnitRoundoff32);
      }
    }
  }
  const Tensor a64 = randn({5, 6}, gen, Dtype::Float64), b64 = randn({6, 7}, gen, Dtype::Float64);
  require_matches_naive(small_gemm_of(a64, b64), a64, b64, kUnitRoundoff64);
}

TEST_CASE("batched matmul of small slices matches the naive matmul", "[matmul][reference]") {
  Generator gen(12);
  // Attention's shapes: q (B,H,Tq,Dh) as a head-split view of (B,Tq,H,Dh), k^T a transposed view.
  const Tensor q = randn({3, 5, 4, 8}, gen).transpose(1, 2);  // (B,H,Tq,Dh) = (3,4,5,8)
  const Tensor k = randn({3, 6, 4, 8}, gen).transpose(1, 2);  // (B,H,Tk,Dh) = (3,4,6,8)
  require_matches_naive(matmul(q, k.transpose(-2, -1)), q, k.transpose(-2, -1), kUnitRoundoff32);
  // A broadcast batch dim (stride 0): the same b for every slice.
  const Tensor a = randn({6, 3, 4}, gen), b = randn({1, 4, 5}, gen);
  require_matches_naive(matmul(a, b), a, b, kUnitRoundoff32);
}

TEST_CASE("batched matmul of small slices gives the same bits on any thread count", "[matmul]") {
  Generator gen(13);
  const Tensor a = randn({64, 24, 64}, gen), b = randn({64, 64, 24}, gen);
  const int before = num_threads();
  set_num_threads(1);
  const std::vector<float> one = matmul(a, b).to_vector<float>();
  set_num_threads(2);
  const std::vector<float> two = matmul(a, b).to_vector<float>();
  set_num_threads(before);
  REQUIRE(one == two);  // each slice is summed whole on one thread: no order depends on threads
}

TEST_CASE("batched matmul of small slices passes gradcheck", "[matmul][grad]") {
  Generator gen(14);
  const Tensor a = test::grad_input({2, 3, 4, 5}, gen), b = test::grad_input({2, 3, 5, 2}, gen);
  test::require_gradcheck([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); }, {a, b});
}

TEST_CASE("OpenBLAS runs a kernel of this CPU, not its generic fallback", "[matmul]") {
  // the rule of blas_core.h: a pre-AVX2 kernel is replaced on a CPU that has AVX2 or AVX-512
  CHECK(sf::better_blas_core("SkylakeX").empty());
  CHECK(sf::better_blas_core("Haswell").empty());
  CHECK(sf::better_blas_core("Zen").empty());
  const std::string instead = sf::better_blas_core("Prescott");
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    CHECK(instead == "SkylakeX");
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    CHECK(instead == "Haswell");
  else
    CHECK(instead.empty());
  // this test program restarted itself if it had to (test_main.cpp): its kernel is not a fallback
  // with a better one available, unless the user chose it with OPENBLAS_CORETYPE
  INFO("OpenBLAS kernel: " << sf::blas_core_report());
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr) CHECK(sf::better_blas_core(sf::blas_core_name()).empty());
}
