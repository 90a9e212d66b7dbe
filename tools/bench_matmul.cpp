// bench_matmul: how much sf::matmul costs on top of the BLAS call it makes.
//
// For square float32 products C (n,n) = A (n,n) @ B (n,n) at a few sizes, it times
//   sf::matmul   the framework op under NoGradGuard (shape checks, allocating the output,
//                dispatch, the cblas_sgemm call)
//   cblas_sgemm  the same product on preallocated buffers, nothing else
// and prints GFLOP/s (2 n^3 flops per product) from the median of the timed runs, after
// warm-up runs that are not counted. Build in Release; threads follow init_threads()
// (SCRATCHFORMER_NUM_THREADS, else all usable cores).
//
// Usage: bench_matmul [runs]   (default 20 timed runs per size)
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "autograd/generator.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/runtime/blas_core.h"
#include "autograd/runtime/threads.h"

namespace {

constexpr int kWarmupRuns = 3;  // untimed: page faults, BLAS thread start-up, caches

// Median wall time in seconds of `runs` calls of f, after kWarmupRuns untimed calls.
double median_seconds(const std::function<void()>& f, int runs) {
  for (int i = 0; i < kWarmupRuns; ++i) f();
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    const auto stop = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double>(stop - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double gflops(std::int64_t n, double seconds) { return 2.0 * n * n * n / seconds / 1e9; }

}  // namespace

int main(int argc, char* argv[]) {
  sf::restart_with_native_blas(argv);
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  sf::init_threads();
  sf::NoGradGuard no_grad;
  sf::Generator gen(0);

  std::printf("float32 square matmul, %d threads, median of %d runs after %d warm-up runs\n",
              sf::num_threads(), runs, kWarmupRuns);
  std::printf("%6s  %14s  %14s  %9s\n", "n", "sf::matmul", "cblas_sgemm", "ratio");
  std::printf("%6s  %14s  %14s  %9s\n", "", "GFLOP/s", "GFLOP/s", "");
  for (const std::int64_t n : {512, 1024}) {
    const sf::Tensor a = sf::randn({n, n}, gen), b = sf::randn({n, n}, gen);

    sf::Tensor c;
    const double t_sf = median_seconds([&] { c = sf::matmul(a, b); }, runs);

    sf::Tensor out = sf::empty({n, n});  // preallocated: only the gemm is timed
    const int ni = static_cast<int>(n);
    const double t_blas = median_seconds(
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, a.data<float>(), ni,
                      b.data<float>(), ni, 0.0f, out.data<float>(), ni);
        },
        runs);

    std::printf("%6lld  %14.1f  %14.1f  %9.3f\n", static_cast<long long>(n), gflops(n, t_sf), gflops(n, t_blas),
                t_blas / t_sf);
  }
  return 0;
}
