// gradcheck: compare the analytic gradients of autograd with finite differences.
//
// Modelled on torch.autograd.gradcheck. For a function f(inputs) -> tensor y, it draws a
// random, non-uniform upstream gradient v (so every output element is weighted differently)
// and checks the gradient of L = sum(v * y) with respect to every input that requires grad:
//
//   numeric[i]  = (L(x + eps e_i) - L(x - eps e_i)) / (2 eps)        central differences
//   analytic[i] = x.grad[i] after L.backward()
//   pass if |analytic - numeric| <= atol + rtol * |numeric| for every i
//
// All inputs must be float64: float32 has too few digits for eps = 1e-6.
// Fast mode checks random directions instead of every element: for a random u, compare
// vᵀ J u (numeric, two evaluations) with sum(analytic * u); cheap for large inputs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace sf {

struct GradcheckOptions {
  double eps = 1e-6;   // finite-difference step (torch's default)
  double atol = 1e-5;  // absolute tolerance (torch's default)
  double rtol = 1e-3;  // relative tolerance (torch's default)
  bool fast_mode = false;
  int fast_directions = 4;  // random directions per input in fast mode
  std::uint64_t seed = 1234;  // for v (and u in fast mode)
};

struct GradcheckInputReport {
  std::size_t input = 0;         // position in the inputs vector
  std::string name;              // the tensor's name if set
  double max_abs_error = 0;      // max |analytic - numeric|
  double max_rel_error = 0;      // max |analytic - numeric| / max(|numeric|, tiny)
  Shape worst_index;             // element with the largest tolerance violation (or error)
  double numeric_at_worst = 0;
  double analytic_at_worst = 0;
  bool ok = true;
};

struct GradcheckResult {
  bool ok = true;
  std::vector<GradcheckInputReport> inputs;  // one per input that requires grad
  std::string message;  // human-readable summary; on failure names input, index, both values
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

}  // namespace sf
