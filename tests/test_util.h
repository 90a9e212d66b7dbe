// Shared helpers for the tests: random inputs and a gradcheck assertion that prints why.
#pragma once

#include <stdlib.h>  // mkdtemp

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "autograd/generator.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"

namespace sf::test {

// float32 carries ~7 significant digits; after a few dozen accumulations 1e-5 relative is
// what agreement between two correct float32 computations looks like.
constexpr double kFloat32Rel = 1e-5;
// float64 results computed two ways (fused vs composed) differ only by rounding.
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

}  // namespace sf::test
