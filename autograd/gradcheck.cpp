#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "autograd/check.h"
#include "autograd/generator.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace sf {

namespace {

// L = sum(v * f(inputs)) evaluated without recording a graph.
double weighted_output(const GradcheckFn& f, const std::vector<Tensor>& inputs, const Tensor& v) {
  NoGradGuard no_grad;
  return sum(mul(f(inputs), v)).item();
}

// Unravels a flat row-major index into a full index of `shape`.
Shape unravel(std::int64_t flat, const Shape& shape) {
  Shape idx(shape.size());
  for (std::int64_t d = static_cast<std::int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

void record(GradcheckInputReport& r, const Shape& index, double numeric, double analytic,
            const GradcheckOptions& o, double& worst_excess) {
  const double err = std::fabs(analytic - numeric);
  const double rel = err / std::max(std::fabs(numeric), 1e-12);
  r.max_abs_error = std::max(r.max_abs_error, err);
  r.max_rel_error = std::max(r.max_rel_error, rel);
  const double excess = err - (o.atol + o.rtol * std::fabs(numeric));  // > 0 means failure
  if (excess > 0) r.ok = false;
  if (excess > worst_excess || r.worst_index.empty()) {
    worst_excess = excess;
    r.worst_index = index;
    r.numeric_at_worst = numeric;
    r.analytic_at_worst = analytic;
  }
}

// Central differences at every element of x: (L(x + eps e_i) - L(x - eps e_i)) / 2 eps against
// analytic[i]. x is perturbed in place (f sees it) and restored.
void check_every_element(const GradcheckFn& f, const std::vector<Tensor>& inputs, const Tensor& v, const Tensor& x,
                         const Tensor& analytic, const GradcheckOptions& o, GradcheckInputReport& r) {
  double worst_excess = -INFINITY;
  Tensor xd = x.detach();  // writes go to x's storage: f sees the perturbation
  for (std::int64_t flat = 0; flat < x.numel(); ++flat) {
    const Shape idx = unravel(flat, x.shape());
    const double orig = xd.at(idx);
    xd.set(idx, orig + o.eps);
    const double lp = weighted_output(f, inputs, v);
    xd.set(idx, orig - o.eps);
    const double lm = weighted_output(f, inputs, v);
    xd.set(idx, orig);
    record(r, idx, (lp - lm) / (2 * o.eps), analytic.at(idx), o, worst_excess);
  }
}

// Fast mode: the directional derivative along o.fast_directions random directions u,
// (L(x + eps u) - L(x - eps u)) / 2 eps against sum(analytic * u).
void check_random_directions(const GradcheckFn& f, const std::vector<Tensor>& inputs, const Tensor& v, const Tensor& x,
                             const Tensor& analytic, const GradcheckOptions& o, Generator& gen, GradcheckInputReport& r) {
  double worst_excess = -INFINITY;
  Tensor xd = x.detach();
  const Tensor saved = xd.clone();
  for (int k = 0; k < o.fast_directions; ++k) {
    Tensor u = randn(x.shape(), gen, Dtype::Float64);
    xd.copy_(add(saved, mul(u, o.eps)));
    const double lp = weighted_output(f, inputs, v);
    xd.copy_(sub(saved, mul(u, o.eps)));
    const double lm = weighted_output(f, inputs, v);
    xd.copy_(saved);
    const double analytic_dir = sum(mul(analytic, u)).item();
    record(r, Shape{k}, (lp - lm) / (2 * o.eps), analytic_dir, o, worst_excess);
  }
}

}  // namespace

GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& o) {
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && inputs[i].requires_grad() && inputs[i].dtype() != Dtype::Float64)
      throw std::invalid_argument("gradcheck: input " + std::to_string(i) + " is " +
                                  dtype_name(inputs[i].dtype()) +
                                  "; gradient checks need float64 (float32 loses the finite "
                                  "difference in rounding)");

  Generator gen(o.seed);
  // The upstream gradient v: random and non-uniform, so a wrong index mapping cannot hide.
  Tensor y;
  {
    NoGradGuard no_grad;
    y = f(inputs);
  }
  Tensor v = randn(y.shape(), gen, Dtype::Float64);

  // Analytic gradients: one backward of L = sum(v * y).
  for (const Tensor& x : inputs)
    if (x.defined() && x.requires_grad()) const_cast<Tensor&>(x).zero_grad();
  Tensor out = f(inputs);
  if (!out.requires_grad())
    throw std::invalid_argument("gradcheck: the function's output does not require grad");
  out.backward(v);

  GradcheckResult result;
  std::ostringstream msg;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.defined() || !x.requires_grad()) continue;
    GradcheckInputReport r;
    r.input = i;
    r.name = x.name();
    Tensor analytic = x.grad().defined() ? x.grad() : zeros(x.shape(), Dtype::Float64);
    SF_CHECK(analytic.shape() == x.shape(), "gradcheck: gradient of input ", i, " has shape ", analytic.shape(),
             ", the input ", x.shape());
    if (!o.fast_mode) check_every_element(f, inputs, v, x, analytic, o, r);
    else check_random_directions(f, inputs, v, x, analytic, o, gen, r);
    if (!r.ok) {
      result.ok = false;
      msg << "gradcheck failed for input " << i << (r.name.empty() ? "" : " (" + r.name + ")")
          << " of shape " << shape_str(x.shape()) << ": at "
          << (o.fast_mode ? "direction " : "index ") << shape_str(r.worst_index)
          << " numeric " << r.numeric_at_worst << " vs analytic " << r.analytic_at_worst
          << " (max abs error " << r.max_abs_error << ", max rel error " << r.max_rel_error
          << "; atol " << o.atol << ", rtol " << o.rtol << ")\n";
    }
    result.inputs.push_back(r);
  }
  for (const Tensor& x : inputs)
    if (x.defined() && x.requires_grad()) const_cast<Tensor&>(x).zero_grad();
  if (result.ok) {
    msg << "gradcheck passed for " << result.inputs.size() << " input(s)";
    for (const auto& r : result.inputs) msg << "; input " << r.input << " max abs error " << r.max_abs_error;
  }
  result.message = msg.str();
  return result;
}

}  // namespace sf
