// Known mistakes, diagnosed: when an exercise's gradient equals the gradient of a mistake students
// make, the test fails with a hint that says which mistake (what grade and ctest show), instead of
// only "numeric x vs analytic y". The right gradient comes from central differences, so these
// tests do not hold any answer:
//   softmax: the Σ g·y term left out (gx = y * g);
//   matmul: grad_a = grad_output @ b, b not transposed;
//   embedding: a repeated id's row overwritten instead of accumulated;
//   cross_entropy: the mean taken over every row, ignored (padding) rows included.
#include "test_util.h"
#include "planted_softmax.h"

#include <functional>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/node.h"
#include "autograd/ops.h"

using namespace sf;
using sf::test::max_abs_diff;
using sf::test::SoftmaxMissingTerm;

namespace {

using Fn = std::function<Tensor(const Tensor&)>;

// dL/dx of L(x) = sum(g * f(x)) by central differences (float64, a few dozen elements): the right
// gradient, found without writing its formula.
Tensor numeric_grad(const Fn& f, const Tensor& x, const Tensor& g) {
  NoGradGuard no_grad;
  std::vector<double> v = x.to_vector<double>(), out(v.size());
  const auto loss = [&](const std::vector<double>& at) {
    return sum(mul(f(from_vector(at, x.shape(), Dtype::Float64)), g)).item();
  };
  const double h = 1e-6;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i];
    v[i] = keep + h;
    const double up = loss(v);
    v[i] = keep - h;
    const double down = loss(v);
    v[i] = keep;
    out[i] = (up - down) / (2 * h);
  }
  return from_vector(out, x.shape(), Dtype::Float64);
}

// The gradient the exercise's backward gives for the same L.
Tensor analytic_grad(const Fn& f, const Tensor& x, const Tensor& g) {
  Tensor leaf = x.detach().clone();
  leaf.requires_grad_();
  f(leaf).backward(g);
  return leaf.grad();
}

// `hint` when `got` is the mistake's gradient, else "".
std::string diagnosis(const Tensor& got, const Tensor& mistake, const std::string& hint) {
  return max_abs_diff(got, mistake) < 1e-6 ? hint : "";
}

// Fails with `hint` when `got` is the mistake's gradient, then checks it against the right one.
void diagnose(const Tensor& got, const Tensor& right, const Tensor& mistake, const std::string& hint) {
  REQUIRE(max_abs_diff(mistake, right) > 1e-3);  // the inputs tell the mistake from the answer
  if (const std::string found = diagnosis(got, mistake, hint); !found.empty()) FAIL(found);
  INFO("the gradient differs from central differences of the forward (numeric) by " << max_abs_diff(got, right));
  CHECK(max_abs_diff(got, right) < 1e-6);
}


}  // namespace

TEST_CASE("softmax backward: a known mistake is named", "[exercise][softmax][diagnosis]") {
  Generator gen(11);
  const Tensor x = randn({3, 5}, gen, Dtype::Float64), g = randn({3, 5}, gen, Dtype::Float64);
  const Fn f = [](const Tensor& t) { return softmax(t, -1); };
  Tensor y;
  {
    NoGradGuard no_grad;
    y = softmax(x, -1);
  }
  diagnose(analytic_grad(f, x, g), numeric_grad(f, x, g), mul(y, g),
           "softmax backward: each row of the gradient must sum to zero (the outputs sum to 1), and yours is "
           "y * grad_output: did you subtract the row's sum of grad_output * y? / softmax 反向：梯度每行之和应为零"
           "（输出之和恒为 1），而你的结果是 y * grad_output：是否漏减了该行 grad_output * y 之和？");
}

TEST_CASE("the softmax diagnosis names a planted mistake, and only that one", "[softmax][diagnosis]") {
  Generator gen(11);
  const Tensor x = randn({3, 5}, gen, Dtype::Float64), g = randn({3, 5}, gen, Dtype::Float64);
  Tensor y;
  {
    NoGradGuard no_grad;
    y = softmax(x, -1);
  }
  const Tensor planted = analytic_grad([](const Tensor& t) { return SoftmaxMissingTerm::forward(t); }, x, g);
  CHECK(diagnosis(planted, mul(y, g), "hint") == "hint");
  const Tensor right = analytic_grad([](const Tensor& t) { return softmax(t, -1); }, x, g);
  CHECK(diagnosis(right, mul(y, g), "hint").empty());
  CHECK(max_abs_diff(right, numeric_grad([](const Tensor& t) { return softmax(t, -1); }, x, g)) < 1e-6);
}

TEST_CASE("matmul backward: a known mistake is named", "[exercise][matmul][diagnosis]") {
  Generator gen(12);
  const Tensor a = randn({4, 4}, gen, Dtype::Float64), b = randn({4, 4}, gen, Dtype::Float64);
  const Tensor g = randn({4, 4}, gen, Dtype::Float64);
  const Fn f = [&](const Tensor& t) { return matmul(t, b); };
  Tensor mistake;
  {
    NoGradGuard no_grad;
    mistake = matmul(g, b);
  }
  diagnose(analytic_grad(f, a, g), numeric_grad(f, a, g), mistake,
           "matmul backward: your grad_a is grad_output @ b; for out = a @ b it needs b transposed, so that "
           "(M, N) @ (N, K) gives a's (M, K) / matmul 反向：你的 grad_a 是 grad_output @ b；out = a @ b 时应使用 b "
           "的转置，(M, N) @ (N, K) 才得到 a 的形状 (M, K)");
}

TEST_CASE("embedding backward: a known mistake is named", "[exercise][embedding][diagnosis]") {
  Generator gen(13);
  const Tensor weight = randn({5, 3}, gen, Dtype::Float64);
  const Tensor ids = test::ids({1, 3, 1, 1});  // id 1 three times
  const Tensor g = randn({4, 3}, gen, Dtype::Float64);
  const Fn f = [&](const Tensor& w) { return embedding(w, ids); };
  // Overwriting: each id's row holds the gradient of its last position only.
  std::vector<double> rows(15, 0.0);
  const std::vector<double> gv = g.to_vector<double>();
  for (std::int64_t p = 0; p < 4; ++p)
    for (std::int64_t j = 0; j < 3; ++j) rows[ids.to_vector<std::int64_t>()[p] * 3 + j] = gv[p * 3 + j];
  diagnose(analytic_grad(f, weight, g), numeric_grad(f, weight, g), from_vector(rows, {5, 3}, Dtype::Float64),
           "embedding backward: a row whose id occurs several times holds one position's gradient; each "
           "occurrence adds its own (+=) / embedding 反向：多次出现的 id 只得到了一个位置的梯度；每次出现都应累加（+=）自己的梯度");
}

TEST_CASE("cross_entropy backward: a known mistake is named", "[exercise][cross_entropy][diagnosis]") {
  Generator gen(14);
  const Tensor logits = randn({4, 5}, gen, Dtype::Float64);
  const Tensor targets = test::ids({1, -100, 3, -100});  // two rows ignored (padding)
  const Tensor g = scalar_tensor(1.0, Dtype::Float64);
  const Fn f = [&](const Tensor& z) { return cross_entropy(z, targets, -100); };
  const Tensor right = numeric_grad(f, logits, g);
  diagnose(analytic_grad(f, logits, g), right, mul(right, 2.0 / 4.0),
           "cross_entropy backward: your gradient is the right one times kept rows / all rows; the mean is over "
           "the rows whose target is not ignore_index / cross_entropy 反向：你的梯度是正确值乘以（保留行数 / 全部行数）；"
           "平均应只对目标不是 ignore_index 的行");
}
