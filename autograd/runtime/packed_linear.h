// packed_linear: a Linear layer's product on weights rearranged once, for decoding.
//
// Why: a decoding step multiplies a few rows (one per sentence, B = 32) by every weight matrix
// of the decoder and by the (V, D) output projection. cblas_sgemm copies ("packs") the whole
// weight into its kernel's panel layout on every call, and with so few rows that copy is a
// third of the product's time (profile of greedy decoding, AMD EPYC: sgemm_kernel 36 %,
// sgemm_incopy 17 %). The weights do not change while a model decodes, so they are packed once
// and every step reuses them.
//
// Letters: M rows of x, K = in, N = out.
//   y (M, N) row-major  =  x (M, K) row-major @ W^T       [+ y, with accumulate]
// with W a Linear weight (N, K), row-major, packed as
//   panel p (columns j = 32p .. 32p+31 of y):  data[p][k][c] = W[32p + c][k]    (0 past N)
// so the kernel reads one panel front to back, 32 output columns of row k at a time.
//
// The kernel holds an (8 rows x 32 columns) block of y in registers and, for k = 0, 1, ..., K-1
// in that order, adds x[i][k] * panel[k][:] to each of its 8 rows (one fused multiply-add per
// element). So every y[i][j] is the same sum in the same order whatever M, the row's position
// in x or the thread count: a sentence decodes to the same bits alone or in a batch, with the
// KV cache or without. packed_linear_reference is the plain triple loop it is tested against
// (tests/test_packed_linear.cpp).
//
// PackedWeights holds the packed copies for one decoding; PackedWeightsScope makes Linear
// (ops_linear.cpp) use them on this thread. Decoding (train/eval/decode.cpp) opens one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace sf {

// Output columns per panel: two 16-float vectors (one AVX-512 register each).
constexpr std::int64_t kPackedPanel = 32;

// A weight W (n, k) in panels (see the top). data has panels() * k * kPackedPanel floats.
struct PackedWeight {
  std::int64_t n = 0, k = 0;
  std::vector<float> data;
  std::int64_t panels() const { return (n + kPackedPanel - 1) / kPackedPanel; }
};

// Packs W: (n, k) row-major (row stride k).
PackedWeight pack_weight(const float* w, std::int64_t n, std::int64_t k);

// y (m, n) = x (m, k) @ W^T, or y += that with accumulate (Linear starts y as the bias).
// Runs on the OpenMP threads (panels split between them) unless called inside a parallel region
// or the product is small (gemm.h's kGemmParallelMinMacs).
void packed_linear(const float* x, std::int64_t m, const PackedWeight& w, float* y, bool accumulate);

// The plain reference: y[i][j] (+)= sum over kk of x[i][kk] * w[j][kk], with w unpacked (n, k).
void packed_linear_reference(const float* x, std::int64_t m, const float* w, std::int64_t n, std::int64_t k, float* y,
                             bool accumulate);

// The packed copies of the weights one decoding uses, packed on first use. Safe to share between
// threads (batches decoding side by side). The weights must not change while it is in use.
class PackedWeights {
 public:
  // The packing of W (n, k) at `w`.
  const PackedWeight& get(const float* w, std::int64_t n, std::int64_t k);
  std::size_t size() const;  // weights packed so far

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<const float*, std::pair<std::int64_t, std::int64_t>>, std::unique_ptr<PackedWeight>> packed_;
};

// While alive, a Linear forward on this thread whose weight is a parameter (a leaf that requires
// grad, so its storage outlives the scope), in float32 with matrix products in float32, runs
// packed_linear on `weights`. Scopes nest; the innermost wins.
class PackedWeightsScope {
 public:
  explicit PackedWeightsScope(PackedWeights& weights);
  ~PackedWeightsScope();
  PackedWeightsScope(const PackedWeightsScope&) = delete;
  PackedWeightsScope& operator=(const PackedWeightsScope&) = delete;

 private:
  PackedWeights* previous_;
};

// This thread's innermost scope's weights, or nullptr.
PackedWeights* packed_weights_in_use();

}  // namespace sf
