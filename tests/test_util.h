// Shared helpers for the tests, each written once: the tolerances most tests use, random
// inputs, a gradcheck assertion that prints why, tensor comparisons, temporary folders and
// files, and running a computation on 1 and 2 threads. (Running the scratchformer program and
// small training jobs: tests/run_util.h.)
#pragma once

#include <stdlib.h>  // mkdtemp

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "autograd/generator.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "autograd/runtime/threads.h"

namespace sf::test {

// ---- tolerances ------------------------------------------------------------------------------

// float32 against float64 (or two float32 computations in another order) of the same math on
// O(1)-O(10) values, absolute or relative: float32 rounds at 2^-24 ~ 6e-8 relative, and after
// a few dozen operations (a row of a few dozen terms, a gradient through exp and two products)
// two correct results agree to ~1e-6. 1e-5 leaves a margin over that and is still far below
// what a wrong term does (1e-3 and more). A file whose agreement needs more or less than this
// says why with a constant of its own.
constexpr double kFloat32Tol = 1e-5;
// float64 results computed two ways (fused vs composed, an op vs a plain loop) on O(1) values:
// the same formulas in another order, ~1e-16 rounding per op; 1e-12 leaves room for a few
// thousand operations without hiding a wrong term.
constexpr double kFloat64Tol = 1e-12;

// A float64 leaf with N(0,1) values that requires grad (what gradient checks take).
inline Tensor grad_input(const Shape& shape, Generator& gen) {
  Tensor t = randn(shape, gen, Dtype::Float64);
  t.requires_grad_();
  return t;
}

// Runs gradcheck and fails the test with its report (input, worst index, numeric vs analytic).
inline void require_gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs,
                              const GradcheckOptions& options = {}) {
  GradcheckResult r = gradcheck(f, inputs, options);
  INFO(r.message);
  REQUIRE(r.ok);
}

// The int64 tensor of token ids (or targets) `values`, of `shape` (1-D when shape is empty).
inline Tensor ids(const std::vector<std::int64_t>& values, Shape shape = {}) {
  if (shape.empty()) shape = {static_cast<std::int64_t>(values.size())};
  return from_vector(values, shape);
}

// The inputs of a module's gradient check: the given tensors followed by every parameter of
// `module` (an nn::Module), in named_parameters() order.
template <class Module>
std::vector<Tensor> with_parameters(std::vector<Tensor> inputs, const Module& module) {
  for (const Tensor& p : module.parameters()) inputs.push_back(p);
  return inputs;
}

// max |t|: the scale of a tensor.
inline double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}

// Largest |a - b| over all elements (shapes must match).
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  double m = 0;
  for (std::size_t i = 0; i < va.size(); ++i) m = std::max(m, std::abs(va[i] - vb[i]));
  return m;
}

// Largest |a - b| / max(|b|, floor): relative error against a reference b.
inline double max_rel_diff(const Tensor& a, const Tensor& b, double floor = 1e-6) {
  REQUIRE(a.shape() == b.shape());
  const auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  double m = 0;
  for (std::size_t i = 0; i < va.size(); ++i)
    m = std::max(m, std::abs(va[i] - vb[i]) / std::max(std::abs(vb[i]), floor));
  return m;
}

// ---- files and folders ------------------------------------------------------------------------

// The bytes of the file at `path`, as they are ("" when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Writes `bytes` to the file at `path`, replacing what was there.
inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// How many times `part` occurs in `text`, not overlapping.
inline std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

// The number of '\n' in `text`.
inline std::size_t count_lines(const std::string& text) { return count_of(text, "\n"); }

// A fresh folder under the system temp directory, removed with everything in it at scope exit.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "sf_test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // Writes `bytes` to the file `name` in this folder (creating sub-folders) and returns its path.
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::filesystem::path p = path / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// ---- matrix products within rounding (test_matmul, test_small_gemm) ----------------------

// Unit roundoff u: the largest relative error of rounding one result to the type.
constexpr double kUnitRoundoff32 = 0x1p-24;  // float32 (24-bit significand)
constexpr double kUnitRoundoff64 = 0x1p-53;  // float64 (53-bit significand)

inline double unit_roundoff(Dtype dtype) { return dtype == Dtype::Float32 ? kUnitRoundoff32 : kUnitRoundoff64; }

// |t| as a float64 tensor of t's shape.
inline Tensor abs_f64(const Tensor& t) {
  std::vector<double> v = t.to_vector<double>();
  for (double& x : v) x = std::abs(x);
  return from_vector(v, t.shape(), Dtype::Float64);
}

// Requires c and ref (both a @ b, computed two ways) to agree within rounding. A dot product of
// K terms computed in floating point is off from the exact value by at most K u (|a| @ |b|)
// (Higham, "Accuracy and Stability of Numerical Algorithms", 3.1), in any summation order and
// with or without FMA; so two such results differ by at most twice that. `u` is the unit
// roundoff of the less precise of the two. A wrong element (a swapped stride, a missed batch
// offset) is off by O(1), many orders of magnitude above this bound.
inline void require_close_within_rounding(const Tensor& c, const Tensor& ref, const Tensor& a, const Tensor& b,
                                          double u) {
  REQUIRE(c.shape() == ref.shape());
  const Tensor bound = matmul_naive(abs_f64(a), abs_f64(b));  // (|a| @ |b|), c's shape
  REQUIRE(bound.shape() == c.shape());
  const double k = static_cast<double>(a.size(-1));
  const auto vc = c.to_vector<double>(), vr = ref.to_vector<double>(), vb = bound.to_vector<double>();
  double worst = 0;  // largest |c - ref| / allowed; must stay <= 1
  for (std::size_t i = 0; i < vc.size(); ++i) {
    const double allowed = 2 * k * u * vb[i];
    const double err = std::abs(vc[i] - vr[i]);
    worst = std::max(worst, allowed > 0 ? err / allowed : (err > 0 ? INFINITY : 0.0));
  }
  INFO("a " << shape_str(a.shape()) << " strides " << shape_str(a.strides()) << ", b " << shape_str(b.shape())
            << " strides " << shape_str(b.strides()) << ": worst error / allowed = " << worst);
  REQUIRE(worst <= 1.0);
}

// ---- threads ------------------------------------------------------------------------------------

inline std::vector<double> values_of(const Tensor& t) { return t.to_vector<double>(); }
inline std::vector<double> values_of(std::vector<double> v) { return v; }

// Runs f on 1 thread and on 2, restoring the thread count; returns both results' values (f
// returns a Tensor or a std::vector<double>).
template <class F>
std::pair<std::vector<double>, std::vector<double>> on_one_and_two_threads(F&& f) {
  const int before = num_threads();
  set_num_threads(1);
  std::vector<double> one = values_of(f());
  set_num_threads(2);
  std::vector<double> two = values_of(f());
  set_num_threads(before);
  return {one, two};
}

}  // namespace sf::test
