// bench_packed_linear: GFLOP/s of decoding's Linear on packed weights (packed_linear.h) next to
// what a product costs without them, on one thread.
//
// Letters: M rows of x (sentences in a decoding step), N = out, K = in; y = x @ W^T.
//
// For the reference model's decoding shapes (M = 32 sentences, or 128 = 32 x beam 4) it prints
// the best of `runs` timings of
//   f32 packed    packed_linear on a pack_weight copy (packed once, outside the timing)
//   sgemm         cblas_sgemm(x, W^T), which packs W itself on every call (a Linear without packing)
//   bf16 packed   packed_linear on a pack_weight_bf16 copy (AVX512-BF16; "-" without it)
//   gemm_bf16     oneDNN's bf16 matmul as training uses it, rounding W to bf16 on every call
// and the time to pack W once in each format. On a shared machine the times are noisy: compare
// the columns of one run, not runs.
//
// Usage: bench_packed_linear [runs]   (default 30; --help prints the usage; a bad argument: one line, exit 2)
#include <cblas.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "autograd/runtime/bf16.h"
#include "autograd/runtime/blas_core.h"
#include "autograd/runtime/cpu_features.h"
#include "autograd/runtime/packed_linear.h"
#include "autograd/runtime/threads.h"

namespace {

// Best of `runs` wall times of f(), in seconds.
template <class F>
double best_seconds(int runs, F&& f) {
  double best = 1e30;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  sf::restart_with_native_blas(argv);
  const char* usage = "usage: bench_packed_linear [runs]   (timed runs per product, a whole number >= 1; default 30)";
  if (argc > 2) {
    std::fprintf(stderr, "bench_packed_linear: expected at most one argument (runs), got %d; %s\n", argc - 1, usage);
    return 2;
  }
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::printf("%s\n", usage);
    return 0;
  }
  int runs = 30;
  if (argc == 2) {
    char* end = nullptr;
    const long parsed = std::strtol(argv[1], &end, 10);
    if (*argv[1] == '\0' || *end != '\0' || parsed < 1 || parsed > 1000000) {
      std::fprintf(stderr, "bench_packed_linear: runs: expected a whole number >= 1, got '%s'\n", argv[1]);
      return 2;
    }
    runs = static_cast<int>(parsed);
  }
  sf::set_num_threads(1);  // one thread: the kernels themselves, as a batch decodes side by side
  const bool bf16 = sf::has_avx512_bf16();
  std::printf("bench_packed_linear: 1 thread, best of %d; bf16 units: %s\n", runs, sf::bf16_units_found().c_str());
  std::printf("%5s %6s %5s  %12s %12s %12s %12s  %9s %9s\n", "M", "N", "K", "f32 packed", "sgemm", "bf16 packed",
              "gemm_bf16", "pack f32", "pack bf16");
  const std::vector<std::array<int, 3>> shapes = {
      {32, 8000, 256}, {32, 256, 256}, {32, 1024, 256}, {32, 256, 1024}, {128, 8000, 256}};
  std::mt19937 gen(1);
  std::normal_distribution<float> normal;
  for (const auto& [m, n, k] : shapes) {
    std::vector<float> x(static_cast<std::size_t>(m) * k), w(static_cast<std::size_t>(n) * k),
        y(static_cast<std::size_t>(m) * n);
    for (float& v : x) v = normal(gen);
    for (float& v : w) v = normal(gen);
    const double flop = 2.0 * m * n * k;
    auto gflops = [&](double s) { return flop / s * 1e-9; };
    const sf::PackedWeight packed = sf::pack_weight(w.data(), n, k);
    const double f32 = best_seconds(runs, [&] { sf::packed_linear(x.data(), m, packed, y.data(), false); });
    const double sgemm = best_seconds(runs, [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x.data(), k, w.data(), k, 0.0f, y.data(), n);
    });
    const double pack_f32 = best_seconds(runs, [&] { sf::pack_weight(w.data(), n, k); });
    std::printf("%5d %6d %5d  %12.1f %12.1f", m, n, k, gflops(f32), gflops(sgemm));
    if (bf16) {
      const sf::PackedWeight packed16 = sf::pack_weight_bf16(w.data(), n, k);
      const double b16 = best_seconds(runs, [&] { sf::packed_linear(x.data(), m, packed16, y.data(), false); });
      const double onednn =
          best_seconds(runs, [&] { sf::gemm_bf16(false, true, m, n, k, x.data(), k, w.data(), k, y.data(), n); });
      const double pack_b16 = best_seconds(runs, [&] { sf::pack_weight_bf16(w.data(), n, k); });
      std::printf(" %12.1f %12.1f  %6.2f ms %6.2f ms\n", gflops(b16), gflops(onednn), pack_f32 * 1e3, pack_b16 * 1e3);
    } else {
      std::printf(" %12s %12s  %6.2f ms %9s\n", "-", "-", pack_f32 * 1e3, "-");
    }
  }
  std::printf("(GFLOP/s; pack = packing W once)\n");
  return 0;
}
