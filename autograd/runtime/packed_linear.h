// packed_linear: a Linear layer's product on weights rearranged once, for decoding.
//
// Why: a decoding step multiplies a few rows (one per sentence, B = 32) by every weight matrix
// of the decoder and by the (V, D) output projection. cblas_sgemm copies ("packs") the whole
// weight into its kernel's panel layout on every call, and with so few rows that copy costs about
// as much as the arithmetic. The weights do not change while a model decodes, so packing once
// per decode saves the repacking sgemm does on every call.
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
// With matrix products in bf16 (bf16.h) the panels hold bf16 pairs instead, on a CPU with
// AVX512-BF16 (cpu_features.h has_avx512_bf16):
//   data16[p][q][c][0..1] = bf16(W[32p + c][2q]), bf16(W[32p + c][2q + 1])     (0 past N or K)
// x is rounded to bf16 first, and VDPBF16PS adds x[i][2q] * w[2q] + x[i][2q+1] * w[2q+1] to each
// float32 sum: the arithmetic gemm_bf16 does (its plain reference is gemm_bf16_reference).
//
// PackedWeights holds the packed copies for one decoding; PackedWeightsScope makes Linear
// (ops_linear.cpp) use them on this thread. Decoding (train/eval/decode.cpp, generate.cpp) opens
// one through DecodingPackedWeights.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

namespace sf {

// Output columns per panel: two 16-float vectors (one AVX-512 register each).
constexpr std::int64_t kPackedPanel = 32;

// A weight W (n, k) in panels (see the top): float32 in data (panels() * k * kPackedPanel floats)
// or, with bf16, bf16 pairs in data16 (panels() * pairs() * 2 * kPackedPanel values).
struct PackedWeight {
  std::int64_t n = 0, k = 0;
  bool bf16 = false;
  std::vector<float> data;
  std::vector<std::uint16_t> data16;
  std::int64_t panels() const { return (n + kPackedPanel - 1) / kPackedPanel; }
  std::int64_t pairs() const { return (k + 1) / 2; }
};

// Packs W: (n, k) row-major (row stride k), in float32 or rounded to bf16 pairs.
PackedWeight pack_weight(const float* w, std::int64_t n, std::int64_t k);
PackedWeight pack_weight_bf16(const float* w, std::int64_t n, std::int64_t k);

// y (m, n) = x (m, k) @ W^T, or y += that with accumulate (Linear starts y as the bias); a bf16
// packing rounds x to bf16 too (and throws std::runtime_error on a CPU without AVX512-BF16).
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
  // The packing of W (n, k) at `w`, in float32 or bf16.
  const PackedWeight& get(const float* w, std::int64_t n, std::int64_t k, bool bf16 = false);
  std::size_t size() const;  // weights packed so far

 private:
  mutable std::mutex mutex_;
  std::map<std::tuple<const float*, std::int64_t, std::int64_t, bool>, std::unique_ptr<PackedWeight>> packed_;
};

// While alive, a Linear forward on this thread whose weight is a parameter (a leaf that requires
// grad, so its storage outlives the scope), in float32, runs packed_linear on `weights`: packed
// in float32 while matrix products are float32, in bf16 while they are bf16 on a CPU with
// AVX512-BF16 (without it, gemm_bf16 as outside the scope). Scopes nest; the innermost wins.
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

// What one decoding opens (train/eval/decode.cpp, generate.cpp): the packed weights of the
// enclosing scope when there is one (a caller decoding several batches or prompts packs once for
// all of them), else its own; in use on this thread while alive.
class DecodingPackedWeights {
 public:
  DecodingPackedWeights() = default;
  DecodingPackedWeights(const DecodingPackedWeights&) = delete;
  DecodingPackedWeights& operator=(const DecodingPackedWeights&) = delete;
  PackedWeights& weights() { return weights_; }

 private:
  PackedWeights own_;
  PackedWeights& weights_{packed_weights_in_use() ? *packed_weights_in_use() : own_};
  PackedWeightsScope scope_{weights_};
};

}  // namespace sf
