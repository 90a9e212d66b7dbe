// bench_attention: time and memory of tiled_attention next to attention_naive.
//
// Letters: B batch, H heads, T sequence length (Tq = Tk = T), Dh head width.
//
// For B = 4, H = 4, Dh = 64, float32, no mask, and T = 64 .. 2048, it times one forward and
// backward (q, k, v require grad; backward from a fixed random upstream gradient) of
//   naive   attention_naive: scores, softmax, @ v composed from ops; (B,H,T,T) tensors
//   tiled   tiled_attention: online softmax over (block,block) tiles (autograd/ops_attention.cpp)
// and prints the median of the timed runs (after one untimed warm-up run), and the extra memory
// of each beyond its inputs, outputs and gradients:
//   computed  from the sizes. naive: its peak holds three (B,H,T,T) tensors (in backward: the
//             saved weights P, dP = dO V^T and the softmax gradient dS; in forward two: the
//             scores and the weights). tiled: what it saves (L, B·H·T floats) plus its scratch
//             per thread, two (block,block) tiles and T floats.
//   measured  peak resident memory during the run (VmHWM, reset before each run through
//             /proc/self/clear_refs) minus the resident memory before it, minus out and the
//             gradients of q, k, v (4 B·H·T·Dh floats, which both allocate); 0 where the kernel
//             does not let us reset the peak. Large blocks are mmap'ed (M_MMAP_THRESHOLD fixed
//             at 64 KB) so that freed tensors leave the resident set at once. What remains for
//             tiled is about one more B·H·T·Dh tensor: the engine clones each gradient into its
//             leaf while the op's gradients are alive (the same for naive). The kernel's RSS
//             counters are approximate to a few MiB.
//   scratch   tiled only: the peak scratch the op itself counted (tiled_attention_peak_scratch_bytes).
// Build in Release; threads follow init_threads() (SCRATCHFORMER_NUM_THREADS, else all usable cores).
// On a shared machine the times are noisy: compare the two columns of one run, not runs.
//
// Usage: bench_attention [runs] [block]   (default 5 timed runs per size, block 64)
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/runtime/blas_core.h"
#include "autograd/runtime/threads.h"

namespace {

constexpr std::int64_t kBatch = 4, kHeads = 4, kHeadDim = 64;
constexpr int kWarmupRuns = 1;                    // untimed: page faults, BLAS thread start-up
constexpr int kMmapThreshold = 64 * 1024;         // bytes; see the top of the file
constexpr double kMiB = 1024.0 * 1024.0;

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"), or -1 if it cannot be read.
std::int64_t proc_status_bytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(field + ":", 0) == 0) return std::atoll(line.c_str() + field.size() + 1) * 1024;  // kB
  return -1;
}

// Resets VmHWM (the peak resident set) to the current resident set. False if not allowed.
bool reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return clear.good();
}

struct Measurement {
  double seconds = 0;       // median wall time of one forward + backward
  double peak_extra = 0;    // bytes: largest peak resident growth over the runs (0: unknown)
};

// Times f (one forward + backward) `runs` times after kWarmupRuns, measuring the peak memory.
// prepare (untimed) runs before each call: it frees the previous call's gradients, so that the
// resident memory read before the call holds only the inputs.
Measurement measure(const std::function<void()>& prepare, const std::function<void()>& f, int runs) {
  for (int i = 0; i < kWarmupRuns; ++i) {
    prepare();
    f();
  }
  std::vector<double> times;
  Measurement m;
  for (int i = 0; i < runs; ++i) {
    prepare();
    const std::int64_t before = proc_status_bytes("VmRSS");
    const bool peak_reset = reset_peak_rss();
    const auto start = std::chrono::steady_clock::now();
    f();
    const auto stop = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double>(stop - start).count());
    if (peak_reset && before >= 0)
      m.peak_extra = std::max(m.peak_extra, static_cast<double>(proc_status_bytes("VmHWM") - before));
  }
  std::sort(times.begin(), times.end());
  m.seconds = times[times.size() / 2];
  return m;
}

}  // namespace

int main(int argc, char* argv[]) {
  sf::restart_with_native_blas(argv);
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const std::int64_t block = argc > 2 ? std::max(1, std::atoi(argv[2])) : 64;
  mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  sf::init_threads();
  sf::Generator gen(0);

  std::printf("attention forward + backward, float32, B = %lld, H = %lld, Dh = %lld, no mask, tiled block %lld\n",
              static_cast<long long>(kBatch), static_cast<long long>(kHeads), static_cast<long long>(kHeadDim),
              static_cast<long long>(block));
  std::printf("%d threads, median of %d runs after %d warm-up run; memory in MiB beyond inputs\n",
              sf::num_threads(), runs, kWarmupRuns);
  std::printf("%6s | %9s %9s %7s | %10s %10s | %10s %10s %10s\n", "", "naive", "tiled", "naive/", "naive MiB",
              "", "tiled MiB", "", "");
  std::printf("%6s | %9s %9s %7s | %10s %10s | %10s %10s %10s\n", "T", "ms", "ms", "tiled", "computed", "measured",
              "computed", "measured", "scratch");
  for (const std::int64_t T : {64, 128, 256, 512, 1024, 2048}) {
    const sf::Shape shape{kBatch, kHeads, T, kHeadDim};
    sf::Tensor q = sf::randn(shape, gen), k = sf::randn(shape, gen), v = sf::randn(shape, gen);
    q.requires_grad_();
    k.requires_grad_();
    v.requires_grad_();
    const sf::Tensor up = sf::randn(shape, gen);
    const double scale = 1.0 / std::sqrt(static_cast<double>(kHeadDim));

    auto zero_grads = [&] {
      q.zero_grad();
      k.zero_grad();
      v.zero_grad();
    };
    auto step = [&](bool tiled) {
      sf::Tensor out = tiled ? sf::tiled_attention(q, k, v, sf::Tensor(), sf::Tensor(), scale, block)
                             : sf::attention_naive(q, k, v, sf::Tensor(), sf::Tensor(), scale);
      out.backward(up);
    };
    const Measurement naive = measure(zero_grads, [&] { step(false); }, runs);
    sf::tiled_attention_peak_scratch_bytes(/*reset=*/true);
    const Measurement tiled = measure(zero_grads, [&] { step(true); }, runs);
    const double scratch = static_cast<double>(sf::tiled_attention_peak_scratch_bytes());

    const double f = sizeof(float);
    const double outputs = 4.0 * kBatch * kHeads * T * kHeadDim * f;  // out, dq, dk, dv
    auto measured = [&](const Measurement& m) { return m.peak_extra > 0 ? (m.peak_extra - outputs) / kMiB : 0.0; };
    const double naive_computed = 3.0 * kBatch * kHeads * T * T * f;
    const std::int64_t tile = std::min(block, T);
    const double tiled_computed =
        kBatch * kHeads * T * f + sf::num_threads() * (2.0 * tile * tile + T) * f;
    std::printf("%6lld | %9.2f %9.2f %7.2f | %10.2f %10.2f | %10.3f %10.2f %10.3f\n", static_cast<long long>(T),
                naive.seconds * 1e3, tiled.seconds * 1e3, naive.seconds / tiled.seconds, naive_computed / kMiB,
                measured(naive), tiled_computed / kMiB, measured(tiled), scratch / kMiB);
    std::fflush(stdout);
  }
  return 0;
}
