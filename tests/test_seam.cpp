// The seam between the math and the speed (autograd/fast.h), checked two ways.
//
// 1. By reading the source: an op file (autograd/ops_*.cpp) reaches the fast kernels only through
//    the seam. It includes no header of autograd/runtime/, vectorises nothing itself (`omp simd`),
//    calls no fast routine by name (fast_exp, sf::gemm, small_gemm, packed_linear), and every
//    fast:: call stands behind `fast::kEnabled &&`, so the reference build skips it.
// 2. By running: each fast kernel computes what its plain kernel computes. float64 inputs always
//    take the plain kernel (the seam's contract), so the plain result of the same numbers in
//    float64 is the reference for the fast float32 one.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/fast.h"
#include "autograd/generator.h"
#include "autograd/ops.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace sf;

namespace {

const fs::path kRoot = SCRATCHFORMER_SOURCE_DIR;

// The op files and the other files of autograd/ outside runtime/.
std::vector<fs::path> math_files() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kRoot / "autograd")) {
    const std::string ext = entry.path().extension().string();
    if (entry.is_regular_file() && (ext == ".cpp" || ext == ".h")) files.push_back(entry.path());
  }
  return files;
}

// Where a line breaks the seam rule, or "" when it does not. `op_file`: an autograd/ops_*.cpp.
std::string seam_violation(const std::string& line, const std::string& file, bool op_file) {
  static const std::regex runtime_include(R"(#include\s+"autograd/runtime/([a-z_]+\.h)\")");
  std::smatch m;
  if (std::regex_search(line, m, runtime_include)) {
    // tensor.cpp defines the memory counters that runtime/memory_stats.h declares: no kernel
    if (!(file == "tensor.cpp" && m[1] == "memory_stats.h")) return "includes autograd/runtime/" + m[1].str();
  }
  if (!op_file) return "";
  const std::string code = line.substr(0, line.find("//"));  // comments may name anything
  if (code.find("omp simd") != std::string::npos) return "vectorises a loop itself (omp simd)";
  static const std::regex fast_routine(R"(\b(fast_exp|small_gemm|packed_linear|gemm_bf16|sf::gemm)\s*\()");
  if (std::regex_search(code, m, fast_routine)) return "calls " + m[1].str() + " directly";
  static const std::regex fast_call(R"(fast::([a-z_]+)\s*\()");
  for (std::sregex_iterator it(code.begin(), code.end(), fast_call), end; it != end; ++it) {
    const std::string before = code.substr(0, static_cast<std::size_t>(it->position()));
    if (before.find("fast::kEnabled &&") == std::string::npos)
      return "calls fast::" + (*it)[1].str() + " without `fast::kEnabled &&` in front";
  }
  return "";
}

// Every line of the math files that breaks the rule, as "file:line: why".
std::vector<std::string> seam_violations() {
  std::vector<std::string> found;
  for (const fs::path& path : math_files()) {
    const std::string file = path.filename().string();
    const bool op_file = file.rfind("ops_", 0) == 0 && path.extension() == ".cpp";
    std::istringstream in(test::read_file(path.string()));
    std::string line;
    for (int number = 1; std::getline(in, line); ++number)
      if (std::string why = seam_violation(line, file, op_file); !why.empty())
        found.push_back("autograd/" + file + ":" + std::to_string(number) + ": " + why);
  }
  return found;
}

Tensor random_tensor(const Shape& shape, std::uint64_t seed, Dtype dtype) {
  Generator gen(seed);
  return randn(shape, gen, dtype);
}

// The largest |a - b| / (atol + rtol |b|) over two tensors of one shape (<= 1: they agree).
double worst_ratio(const Tensor& a, const Tensor& b, double atol, double rtol) {
  const std::vector<double> va = a.to(Dtype::Float64).to_vector<double>();
  const std::vector<double> vb = b.to(Dtype::Float64).to_vector<double>();
  REQUIRE(va.size() == vb.size());
  double worst = 0;
  for (std::size_t i = 0; i < va.size(); ++i) worst = std::max(worst, std::abs(va[i] - vb[i]) / (atol + rtol * std::abs(vb[i])));
  return worst;
}

// float32 rounding of inputs and outputs, summed over rows of a few hundred terms: a few ulp.
constexpr double kFloat32Atol = 1e-6, kFloat32Rtol = 1e-4;

}  // namespace

TEST_CASE("op files reach the fast kernels only through the seam", "[seam]") {
  const std::vector<std::string> found = seam_violations();
  INFO("each of these should go through autograd/fast.h (or move to autograd/runtime/):");
  for (const std::string& f : found) INFO(f);
  CHECK(found.empty());
  // the rule bites: a line that includes a runtime header, or calls a fast kernel unguarded, is caught.
  CHECK_FALSE(seam_violation("#include \"autograd/runtime/gemm.h\"", "ops_matmul.cpp", true).empty());
  CHECK_FALSE(seam_violation("  if (fast::softmax(x, y, d, log)) return y;", "ops_softmax.cpp", true).empty());
  CHECK_FALSE(seam_violation("#pragma omp simd reduction(+ : s)", "ops_norm.cpp", true).empty());
  CHECK(seam_violation("  if (fast::kEnabled && fast::softmax(x, y, d, log)) return y;", "ops_softmax.cpp", true).empty());
}

TEST_CASE("the reference build turns every fast kernel off", "[seam]") {
#ifdef SCRATCHFORMER_REFERENCE
  STATIC_REQUIRE_FALSE(fast::kEnabled);
#else
  STATIC_REQUIRE(fast::kEnabled);
#endif
}

TEST_CASE("fast kernels compute what the plain kernels compute", "[seam][fused]") {
  // Each op in float32 (the fast kernel, where the build has them) against the same numbers in
  // float64 (always the plain kernel).
  const Tensor x64 = random_tensor({6, 5, 37}, 1, Dtype::Float64), x32 = x64.to(Dtype::Float32);
  SECTION("softmax and log_softmax, forward and backward") {
    for (bool log : {false, true}) {
      Tensor a32 = x32.detach().requires_grad_(true), a64 = x64.detach().requires_grad_(true);
      Tensor y32 = log ? log_softmax(a32, -1) : softmax(a32, -1), y64 = log ? log_softmax(a64, -1) : softmax(a64, -1);
      CHECK(worst_ratio(y32, y64, kFloat32Atol, kFloat32Rtol) <= 1);
      const Tensor w = random_tensor({6, 5, 37}, 2, Dtype::Float64);
      sum(mul(y32, w.to(Dtype::Float32))).backward();
      sum(mul(y64, w)).backward();
      CHECK(worst_ratio(a32.grad(), a64.grad(), kFloat32Atol, kFloat32Rtol) <= 1);
    }
  }
  SECTION("cross-entropy with padding and label smoothing") {
    const Tensor logits64 = random_tensor({12, 50}, 3, Dtype::Float64);
    std::vector<std::int64_t> t = {3, 0, 49, -100, 7, 7, 12, -100, 1, 2, 30, 44};
    const Tensor targets = from_vector<std::int64_t>(t, {12});
    Tensor l32 = logits64.to(Dtype::Float32).requires_grad_(true), l64 = logits64.detach().requires_grad_(true);
    const Tensor loss32 = cross_entropy(l32, targets, -100, 0.1), loss64 = cross_entropy(l64, targets, -100, 0.1);
    CHECK(worst_ratio(loss32, loss64, kFloat32Atol, kFloat32Rtol) <= 1);
    loss32.backward();
    loss64.backward();
    CHECK(worst_ratio(l32.grad(), l64.grad(), kFloat32Atol, kFloat32Rtol) <= 1);
  }
  SECTION("layer_norm and rms_norm, forward and backward") {
    const Tensor w64 = random_tensor({37}, 4, Dtype::Float64), b64 = random_tensor({37}, 5, Dtype::Float64);
    for (bool rms : {false, true}) {
      Tensor a32 = x32.detach().requires_grad_(true), a64 = x64.detach().requires_grad_(true);
      Tensor w32 = w64.to(Dtype::Float32).requires_grad_(true), wd = w64.detach().requires_grad_(true);
      Tensor y32 = rms ? rms_norm(a32, w32, 1e-5) : layer_norm(a32, w32, b64.to(Dtype::Float32), 1e-5);
      Tensor y64 = rms ? rms_norm(a64, wd, 1e-5) : layer_norm(a64, wd, b64, 1e-5);
      CHECK(worst_ratio(y32, y64, kFloat32Atol, kFloat32Rtol) <= 1);
      const Tensor g = random_tensor({6, 5, 37}, 6, Dtype::Float64);
      sum(mul(y32, g.to(Dtype::Float32))).backward();
      sum(mul(y64, g)).backward();
      CHECK(worst_ratio(a32.grad(), a64.grad(), kFloat32Atol, kFloat32Rtol) <= 1);
      CHECK(worst_ratio(w32.grad(), wd.grad(), kFloat32Atol, kFloat32Rtol) <= 1);
    }
  }
  SECTION("matmul (folded, small slices, transposed) and linear") {
    const Tensor a64 = random_tensor({4, 3, 20, 16}, 7, Dtype::Float64), b64 = random_tensor({16, 24}, 8, Dtype::Float64);
    const Tensor c64 = random_tensor({4, 3, 16, 24}, 9, Dtype::Float64);
    CHECK(worst_ratio(matmul(a64.to(Dtype::Float32), b64.to(Dtype::Float32)), matmul(a64, b64), kFloat32Atol,
                      kFloat32Rtol) <= 1);
    CHECK(worst_ratio(matmul(a64.to(Dtype::Float32), c64.to(Dtype::Float32)), matmul(a64, c64), kFloat32Atol,
                      kFloat32Rtol) <= 1);
    const Tensor at = transpose(a64, -2, -1);  // (4, 3, 16, 20), read in place by the fast kernel
    CHECK(worst_ratio(matmul(at.to(Dtype::Float32), random_tensor({20, 8}, 10, Dtype::Float32)),
                      matmul(at, random_tensor({20, 8}, 10, Dtype::Float32).to(Dtype::Float64)), kFloat32Atol,
                      kFloat32Rtol) <= 1);
    const Tensor w64 = random_tensor({24, 16}, 11, Dtype::Float64), bias64 = random_tensor({24}, 12, Dtype::Float64);
    CHECK(worst_ratio(linear(a64.to(Dtype::Float32), w64.to(Dtype::Float32), bias64.to(Dtype::Float32)),
                      linear(a64, w64, bias64), kFloat32Atol, kFloat32Rtol) <= 1);
  }
  SECTION("sum down the columns and to one number") {
    CHECK(worst_ratio(sum(x32, {0, 1}), sum(x64, {0, 1}), kFloat32Atol, kFloat32Rtol) <= 1);
    CHECK(worst_ratio(sum(x32), sum(x64), kFloat32Atol, kFloat32Rtol) <= 1);
  }
  SECTION("dropout: the same mask bit for bit") {
    const Tensor big64 = random_tensor({3, 1000}, 13, Dtype::Float64);
    Generator g32(21), g64(21);
    const Tensor d32 = dropout(big64.to(Dtype::Float32), 0.3, g32), d64 = dropout(big64, 0.3, g64);
    const std::vector<float> v32 = d32.to_vector<float>();
    const std::vector<double> v64 = d64.to_vector<double>();
    std::int64_t masks_differ = 0;
    for (std::size_t i = 0; i < v32.size(); ++i) masks_differ += (v32[i] == 0) != (v64[i] == 0);
    CHECK(masks_differ == 0);
  }
}
