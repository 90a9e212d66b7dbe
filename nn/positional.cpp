#include "nn/positional.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/check.h"
#include "autograd/exercise.h"
#include "autograd/ops.h"
#include "nn/init.h"

namespace sf::nn {

// Letters: B batch, T sequence length, D model width, L max_len.

namespace {

void check_sizes(const char* module, std::int64_t max_len, std::int64_t dim) {
  if (max_len <= 0 || dim <= 0)
    throw std::invalid_argument(std::string(module) + ": sizes must be positive, got max_len " +
                                std::to_string(max_len) + ", dim " + std::to_string(dim));
}

// x: (B,T,D); the positions start_pos .. start_pos+T-1 must exist in a table of L rows.
void check_input(const char* module, const Tensor& x, std::int64_t start_pos, std::int64_t max_len,
                 std::int64_t dim, Dtype dtype) {
  SF_EXPECT(x.dim() == 3 && x.size(2) == dim, module, ": expected input (B, T, ", dim, "), got ", x.shape());
  SF_EXPECT(x.dtype() == dtype, module, ": expected a ", dtype_name(dtype), " input (the module's dtype), got ",
            dtype_name(x.dtype()));
  const std::int64_t T = x.size(1);
  SF_EXPECT(start_pos >= 0 && start_pos + T <= max_len, module, ": positions start_pos ", start_pos, " + T ", T, " = ",
            start_pos + T, " exceed max_len ", max_len, " (start_pos must be >= 0 and start_pos + T <= max_len)");
}

// -> the (L, D) table row by row, in double, straight from the paper's formula:
//   PE[pos, 2i] = sin(pos / 10000^(2i/D)),  PE[pos, 2i+1] = cos(pos / 10000^(2i/D))
std::vector<double> sinusoidal_table(std::int64_t L, std::int64_t D) {
  // EXERCISE(sinusoidal): L * D values, element (pos, j) at pos * D + j: column j = 2i (even) holds
  // sin and j = 2i+1 (odd) cos of the same angle pos / 10000^(2i/D) (the pair shares one frequency).
  // BEGIN SOLUTION
  std::vector<double> pe(static_cast<std::size_t>(L * D));
  for (std::int64_t pos = 0; pos < L; ++pos)
    for (std::int64_t j = 0; j < D; ++j) {
      const std::int64_t two_i = j - j % 2;  // columns 2i and 2i+1 share one frequency
      const double angle = static_cast<double>(pos) / std::pow(10000.0, static_cast<double>(two_i) / D);
      pe[pos * D + j] = (j % 2 == 0) ? std::sin(angle) : std::cos(angle);
    }
  return pe;
  // END SOLUTION
}

}  // namespace

// ---- SinusoidalPositional ------------------------------------------------------------------

SinusoidalPositional::SinusoidalPositional(std::int64_t L, std::int64_t D, Dtype dtype) : max_len(L), dim(D) {
  check_sizes("SinusoidalPositional", L, D);
  // Computed in double, then converted to dtype.
  table_ = from_vector(sinusoidal_table(L, D), {L, D}, dtype);  // (L, D)
}

// x: (B,T,D) -> (B,T,D)
Tensor SinusoidalPositional::forward(const Tensor& x, std::int64_t start_pos) const {
  check_input("SinusoidalPositional", x, start_pos, max_len, dim, table_.dtype());
  Tensor pe = table_.narrow(0, start_pos, x.size(1));  // (T, D), a view
  return run_forward_hooks(add(x, pe));                 // broadcasts over B
}

// ---- LearnedPositional ---------------------------------------------------------------------

LearnedPositional::LearnedPositional(std::int64_t L, std::int64_t D, Generator& gen, Dtype dtype)
    : max_len(L), dim(D) {
  check_sizes("LearnedPositional", L, D);
  weight = register_parameter("weight", normal({L, D}, 0.02, gen, dtype));
}

// x: (B,T,D) -> (B,T,D). Only the rows used receive a gradient (narrow's backward).
Tensor LearnedPositional::forward(const Tensor& x, std::int64_t start_pos) const {
  check_input("LearnedPositional", x, start_pos, max_len, dim, weight.dtype());
  Tensor pe = weight.narrow(0, start_pos, x.size(1));  // (T, D)
  return run_forward_hooks(add(x, pe));                 // broadcasts over B
}

}  // namespace sf::nn
