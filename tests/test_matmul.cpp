// Tests for matmul (BLAS) and matmul_naive (the triple-loop reference).
//
// Letters: M rows of a, K the shared dim, N columns of b; a: (..., M, K) @ b: (..., K, N).
// Tags: [matmul] on all; [reference] where the BLAS path is checked against the naive loop (or
// the naive loop against values written out here); [grad] on gradient checks.
#include <algorithm>
#include <cmath>
#include <functional>

#include "autograd/node.h"
#include "test_util.h"

using namespace sf;

namespace {

using test::kUnitRoundoff32;
using test::kUnitRoundoff64;
using test::require_close_within_rounding;
using test::unit_roundoff;

// matmul(a, b) must equal matmul_naive(a, b) within rounding.
void require_matches_naive(const Tensor& a, const Tensor& b) {
  const Tensor c = matmul(a, b);
  REQUIRE(c.is_contiguous());
  require_close_within_rounding(c, matmul_naive(a, b), a, b, unit_roundoff(a.dtype()));
}

// A (rows, cols) matrix given as the transpose of a contiguous (cols, rows) one: strides (1, rows).
Tensor transposed_matrix(std::int64_t rows, std::int64_t cols, Generator& gen, Dtype dtype) {
  return randn({cols, rows}, gen, dtype).transpose(0, 1);
}

const Dtype kFloatDtypes[] = {Dtype::Float32, Dtype::Float64};

}  // namespace

TEST_CASE("matmul and matmul_naive give a product worked out by hand", "[matmul][reference]") {
  for (Dtype dt : kFloatDtypes) {
    INFO(dtype_name(dt));
    // [[1 2 3] [4 5 6]] @ [[7 8] [9 10] [11 12]] = [[58 64] [139 154]]
    const Tensor a = from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, dt);
    const Tensor b = from_vector({7, 8, 9, 10, 11, 12}, {3, 2}, dt);
    const std::vector<double> expected = {58, 64, 139, 154};
    CHECK(matmul(a, b).to_vector<double>() == expected);
    CHECK(matmul_naive(a, b).to_vector<double>() == expected);
    CHECK(matmul(a, b).dtype() == dt);
    // the same product with both operands given as transposed views
    const Tensor at = from_vector({1, 4, 2, 5, 3, 6}, {3, 2}, dt).transpose(0, 1);
    const Tensor bt = from_vector({7, 9, 11, 8, 10, 12}, {2, 3}, dt).transpose(0, 1);
    CHECK(matmul(at, bt).to_vector<double>() == expected);
    CHECK(matmul_naive(at, bt).to_vector<double>() == expected);
  }
}

TEST_CASE("matmul_naive broadcasts batch dims like a loop written here", "[matmul][reference]") {
  // a: (2,1,3,4) @ b: (5,4,2) -> (2,5,3,2); a's batch dim 1 and b's missing dim broadcast.
  Generator gen(11);
  const Tensor a = randn({2, 1, 3, 4}, gen, Dtype::Float64);
  const Tensor b = randn({5, 4, 2}, gen, Dtype::Float64);
  const Tensor c = matmul_naive(a, b);
  REQUIRE(c.shape() == Shape{2, 5, 3, 2});
  const auto va = a.to_vector<double>(), vb = b.to_vector<double>(), vc = c.to_vector<double>();
  double worst = 0;
  for (int p = 0; p < 2; ++p)
    for (int q = 0; q < 5; ++q)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 2; ++j) {
          double s = 0;
          for (int k = 0; k < 4; ++k) s += va[(p * 3 + i) * 4 + k] * vb[(q * 4 + k) * 2 + j];
          worst = std::max(worst, std::abs(vc[((p * 5 + q) * 3 + i) * 2 + j] - s));
        }
  REQUIRE(worst <= test::kFloat64Tol);
}

TEST_CASE("matmul matches matmul_naive for all four transpose cases", "[matmul][reference]") {
  Generator gen(1);
  // small sizes, and sizes past BLAS's blocking so its packed inner kernels run too
  const std::vector<Shape> sizes = {{5, 7, 3}, {33, 65, 17}};
  for (Dtype dt : kFloatDtypes) {
    for (const Shape& mkn : sizes) {
      const std::int64_t m = mkn[0], k = mkn[1], n = mkn[2];
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          INFO(dtype_name(dt) << " M=" << m << " K=" << k << " N=" << n << " a transposed " << ta
                              << ", b transposed " << tb);
          const Tensor a = ta ? transposed_matrix(m, k, gen, dt) : randn({m, k}, gen, dt);
          const Tensor b = tb ? transposed_matrix(k, n, gen, dt) : randn({k, n}, gen, dt);
          REQUIRE(a.is_contiguous() == !ta);
          REQUIRE(b.is_contiguous() == !tb);
          require_matches_naive(a, b);
        }
      }
    }
  }
}

TEST_CASE("matmul reads narrowed views whose leading dimension exceeds the row", "[matmul][reference]") {
  Generator gen(2);
  for (Dtype dt : kFloatDtypes) {
    INFO(dtype_name(dt));
    // a: (6,5) with strides (8,1); b: (5,4) as a transposed view with strides (1,7)
    const Tensor a = randn({6, 8}, gen, dt).narrow(1, 2, 5);
    const Tensor b = randn({4, 7}, gen, dt).narrow(1, 1, 5).transpose(0, 1);
    REQUIRE(a.strides() == Shape{8, 1});
    REQUIRE(b.strides() == Shape{1, 7});
    require_matches_naive(a, b);
    require_matches_naive(b.transpose(0, 1), a.transpose(0, 1));  // (4,5) @ (5,6)
    // batched a narrowed along K, b 2-D: a's batch folds into one gemm with ld 8
    const Tensor a3 = randn({3, 6, 8}, gen, dt).narrow(2, 0, 5);
    require_matches_naive(a3, b);
    // batched a narrowed along M: the batch cannot fold into the rows, one gemm per batch
    const Tensor a3m = randn({3, 8, 5}, gen, dt).narrow(1, 1, 6);
    require_matches_naive(a3m, b);
    // both batched and narrowed
    const Tensor b3 = randn({3, 5, 9}, gen, dt).narrow(2, 3, 4);
    require_matches_naive(a3, b3);
  }
}

TEST_CASE("matmul copies layouts that BLAS cannot read", "[matmul][reference]") {
  Generator gen(3);
  for (Dtype dt : kFloatDtypes) {
    INFO(dtype_name(dt));
    // every other element: strides (2K, 2), neither is 1
    const Tensor a = randn({6, 5, 2}, gen, dt).narrow(2, 0, 1).squeeze(2);
    REQUIRE(a.strides() == Shape{10, 2});
    // one row repeated (expand): strides (0, 1), a row stride smaller than the row
    const Tensor b = randn({1, 4}, gen, dt).expand({5, 4});
    require_matches_naive(a, b);
    require_matches_naive(b.transpose(0, 1), a.transpose(0, 1));
    // a matrix broadcast over a batch (batch stride 0) is read in place
    require_matches_naive(randn({1, 6, 5}, gen, dt).expand({3, 6, 5}), randn({3, 5, 4}, gen, dt));
  }
}

TEST_CASE("matmul broadcasts batch dims", "[matmul][reference]") {
  Generator gen(4);
  struct Case {
    Shape a, b, out;
  };
  const std::vector<Case> cases = {
      {{2, 1, 3, 4}, {5, 4, 2}, {2, 5, 3, 2}},  // both broadcast
      {{3, 4}, {2, 4, 5}, {2, 3, 5}},           // 2-D @ batched
      {{2, 3, 4}, {4, 5}, {2, 3, 5}},           // batched @ 2-D: one folded gemm
      {{2, 2, 3, 4}, {4, 5}, {2, 2, 3, 5}},     // two batch dims folded
      {{2, 3, 4}, {1, 4, 5}, {2, 3, 5}},        // b's batch of 1 broadcast
      {{1, 3, 4}, {2, 4, 5}, {2, 3, 5}},        // a's batch of 1 broadcast
      {{2, 3, 4}, {2, 4, 5}, {2, 3, 5}},        // plain batched
  };
  for (Dtype dt : kFloatDtypes) {
    for (const Case& c : cases) {
      INFO(dtype_name(dt) << " " << shape_str(c.a) << " @ " << shape_str(c.b));
      const Tensor a = randn(c.a, gen, dt), b = randn(c.b, gen, dt);
      REQUIRE(matmul(a, b).shape() == c.out);
      require_matches_naive(a, b);
    }
    INFO(dtype_name(dt));
    // batched @ 2-D where a's batch does not fold: a's matrices transposed, or its batch dims permuted
    const Tensor b = randn({4, 5}, gen, dt);
    require_matches_naive(randn({2, 4, 3}, gen, dt).transpose(1, 2), b);
    require_matches_naive(randn({3, 2, 6, 4}, gen, dt).permute({1, 0, 2, 3}), b);
    // batched @ batched with both transposed and a broadcast
    require_matches_naive(randn({2, 1, 4, 3}, gen, dt).transpose(2, 3), randn({3, 5, 4}, gen, dt).transpose(1, 2));
  }
}

TEST_CASE("matmul handles odd sizes", "[matmul][reference]") {
  Generator gen(5);
  for (Dtype dt : kFloatDtypes) {
    INFO(dtype_name(dt));
    require_matches_naive(randn({1, 7}, gen, dt), randn({7, 4}, gen, dt));  // 1xK row
    require_matches_naive(randn({4, 7}, gen, dt), randn({7, 1}, gen, dt));  // Kx1 column
    require_matches_naive(randn({1, 7}, gen, dt), randn({7, 1}, gen, dt));  // dot product
    require_matches_naive(randn({6, 1}, gen, dt), randn({1, 3}, gen, dt));  // outer product, K = 1
    require_matches_naive(randn({6, 1}, gen, dt), randn({1, 1}, gen, dt));  // Mx1 @ 1x1
    require_matches_naive(transposed_matrix(1, 7, gen, dt), transposed_matrix(7, 1, gen, dt));
    require_matches_naive(randn({3, 1, 7}, gen, dt), randn({7, 2}, gen, dt));  // batched rows of 1
    require_matches_naive(randn({3, 5, 1}, gen, dt), randn({1, 2}, gen, dt));  // batched K = 1
    // K = 0: a sum of no terms is 0; M = 0: an empty result
    const Tensor z = matmul(zeros({3, 0}, dt), zeros({0, 2}, dt));
    CHECK(z.shape() == Shape{3, 2});
    CHECK(z.to_vector<double>() == std::vector<double>(6, 0.0));
    CHECK(matmul(zeros({0, 4}, dt), zeros({4, 2}, dt)).shape() == Shape{0, 2});
  }
}

TEST_CASE("matmul in float32 agrees with float64 within float32 precision", "[matmul][reference]") {
  // The same values in both dtypes (float32 -> float64 is exact); the float64 product is
  // effectively exact here, so the float32 one must be within K u32 (|a| @ |b|) of it.
  Generator gen(6);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{64, 64}, {64, 64}}, {{4, 33, 65}, {65, 17}}, {{2, 1, 9, 130}, {3, 130, 7}}};
  for (const auto& [sa, sb] : cases) {
    INFO(shape_str(sa) << " @ " << shape_str(sb));
    const Tensor a = randn(sa, gen, Dtype::Float32), b = randn(sb, gen, Dtype::Float32);
    const Tensor c32 = matmul(a, b);
    const Tensor c64 = matmul(a.to(Dtype::Float64), b.to(Dtype::Float64));
    REQUIRE(c32.dtype() == Dtype::Float32);
    require_close_within_rounding(c32, c64, a, b, kUnitRoundoff32);
  }
}

// The gradient checks of matmul on 2-D, batched, broadcast and mixed operands and on transposed
// and narrowed views are the gradcheck suite's entry matmul (train/classroom/gradcheck_suite.cpp,
// run by tests/test_gradcheck_suite.cpp with the labels matmul and grad).

TEST_CASE("matmul gradients match finite differences when only one operand requires grad", "[matmul][grad]") {
  Generator gen(7);
  const GradcheckFn f = [](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); };
  test::require_gradcheck(f, {test::grad_input({2, 3, 4}, gen), randn({4, 5}, gen, Dtype::Float64)});
  test::require_gradcheck(f, {randn({2, 3, 4}, gen, Dtype::Float64), test::grad_input({4, 5}, gen)});
}

TEST_CASE("matmul records a MatMul node", "[matmul][grad]") {
  Generator gen(9);
  const Tensor a = test::grad_input({2, 3}, gen), b = test::grad_input({3, 2}, gen);
  const Tensor c = matmul(a, b);
  REQUIRE(c.grad_fn() != nullptr);
  CHECK(std::string(c.grad_fn()->name()) == "MatMul");
  {
    NoGradGuard no_grad;
    CHECK(matmul(a, b).grad_fn() == nullptr);
  }
}

TEST_CASE("matmul errors name both shapes", "[matmul]") {
  const Tensor a = zeros({2, 3}), b = zeros({4, 5});
  for (const auto& op : {std::function<Tensor(const Tensor&, const Tensor&)>(matmul),
                         std::function<Tensor(const Tensor&, const Tensor&)>(matmul_naive)}) {
    REQUIRE_THROWS_AS(op(a, b), std::invalid_argument);
    REQUIRE_THROWS_WITH(op(a, b), Catch::Contains("(2, 3)") && Catch::Contains("(4, 5)") &&
                                      Catch::Contains("matmul"));
    REQUIRE_THROWS_WITH(op(zeros({3}), zeros({3, 2})),
                        Catch::Contains("at least 2-D") && Catch::Contains("(3,)") && Catch::Contains("(3, 2)"));
    REQUIRE_THROWS_WITH(op(zeros({2, 3, 4}), zeros({3, 4, 5})),
                        Catch::Contains("(2, 3, 4)") && Catch::Contains("(3, 4, 5)") &&
                            Catch::Contains("broadcast"));
    REQUIRE_THROWS_WITH(op(zeros({2, 3}), zeros({3, 2}, Dtype::Float64)), Catch::Contains("dtypes differ"));
    REQUIRE_THROWS_WITH(op(zeros({2, 3}, Dtype::Int64), zeros({3, 2}, Dtype::Int64)),
                        Catch::Contains("float32 or float64"));
  }
}
