// packed_linear: see packed_linear.h for the layout and why decoding packs its weights once.
#include "autograd/runtime/packed_linear.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "autograd/runtime/bf16.h"
#include "autograd/runtime/cpu_features.h"
#include "autograd/runtime/gemm.h"

namespace sf {

namespace {

// 16 floats, one AVX-512 register (GCC's vector extension: + and * work element by element, and
// a float times a Vec16 multiplies every element by it; -march=native picks the instructions).
using Vec16 = float __attribute__((vector_size(64)));
// The helpers below take and return Vec16 by value. In a build without AVX-512 flags (the asan
// preset) GCC warns that such a function's calling convention differs from an AVX-512 build's;
// these are file-local and inlined, so no call crosses between the two.
#pragma GCC diagnostic ignored "-Wpsabi"

Vec16 load16(const float* p) {
  Vec16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
void store16(float* p, Vec16 v) { std::memcpy(p, &v, sizeof v); }

// Rows of y one call of the kernel keeps in registers: 8 rows x 2 vectors = 16 accumulators.
constexpr std::int64_t kBlockRows = 8;

// The micro-kernel: rows [0, R) of x (row stride k) times one panel -> the first `cols`
// (<= 32) columns of R rows of y (row stride ldy).
//   acc[r] = sum over kk = 0 .. k-1 of x[r][kk] * panel[kk][0:32], one multiply-add per step
// With `next` (the next panel, on the first row block), it also asks the cache to fetch that panel
// from memory while this one is computed (the weights are read once from memory per product).
template <int R>
void packed_block(const float* x, std::int64_t k, const float* panel, float* y, std::int64_t ldy, std::int64_t cols,
                  bool accumulate, const float* next) {
  Vec16 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = Vec16{};
  for (std::int64_t kk = 0; kk < k; ++kk) {
    if (next) {  // two 64-byte lines: row kk of the next panel
      __builtin_prefetch(next + kk * kPackedPanel);
      __builtin_prefetch(next + kk * kPackedPanel + 16);
    }
    const Vec16 w0 = load16(panel + kk * kPackedPanel), w1 = load16(panel + kk * kPackedPanel + 16);
    for (int r = 0; r < R; ++r) {
      const float a = x[r * k + kk];
      acc[r][0] += a * w0;
      acc[r][1] += a * w1;
    }
  }
  for (int r = 0; r < R; ++r) {
    float* y_row = y + r * ldy;
    if (cols == kPackedPanel) {  // a whole panel: two vector stores
      store16(y_row, accumulate ? load16(y_row) + acc[r][0] : acc[r][0]);
      store16(y_row + 16, accumulate ? load16(y_row + 16) + acc[r][1] : acc[r][1]);
    } else {  // the last panel of an n that is not a multiple of 32
      float sums[kPackedPanel];
      store16(sums, acc[r][0]);
      store16(sums + 16, acc[r][1]);
      for (std::int64_t c = 0; c < cols; ++c) y_row[c] = accumulate ? y_row[c] + sums[c] : sums[c];
    }
  }
}

// Calls block(std::integral_constant<int, R>{}) for R = rows (1 .. 8): the micro-kernel compiled
// for exactly the rows left.
template <class Block>
void with_rows(std::int64_t rows, Block&& block) {
  switch (rows) {
    case 8: block(std::integral_constant<int, 8>{}); break;
    case 7: block(std::integral_constant<int, 7>{}); break;
    case 6: block(std::integral_constant<int, 6>{}); break;
    case 5: block(std::integral_constant<int, 5>{}); break;
    case 4: block(std::integral_constant<int, 4>{}); break;
    case 3: block(std::integral_constant<int, 3>{}); break;
    case 2: block(std::integral_constant<int, 2>{}); break;
    case 1: block(std::integral_constant<int, 1>{}); break;
    default: break;
  }
}

// Panel p of y: every row block of x against panel p's 32 columns.
void packed_panel(const float* x, std::int64_t m, const PackedWeight& w, std::int64_t p, float* y, bool accumulate) {
  const float* panel = w.data.data() + p * w.k * kPackedPanel;
  const std::int64_t col0 = p * kPackedPanel, cols = std::min(kPackedPanel, w.n - col0);
  const float* next = p + 1 < w.panels() ? panel + w.k * kPackedPanel : nullptr;
  for (std::int64_t i = 0; i < m; i += kBlockRows)
    with_rows(std::min(kBlockRows, m - i), [&](auto rows) {
      packed_block<decltype(rows)::value>(x + i * w.k, w.k, panel, y + i * w.n + col0, w.n, cols, accumulate,
                                          i == 0 ? next : nullptr);
    });
}

// ---- bf16: the same blocks, two k at a time on VDPBF16PS ------------------------------------
// These functions use AVX512-BF16 instructions whatever -march says; they run only where
// has_avx512_bf16() (packed_linear checks).
#define SF_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// x16: rows [0, R) of x in bf16 (row stride 2 * pairs, zero-padded to an even k). For each pair
// q, every 32-bit lane of `a` holds (x[r][2q], x[r][2q+1]) and each lane i of w0 / w1 holds
// (W[i][2q], W[i][2q+1]) for columns i and 16 + i: VDPBF16PS adds both products to lane i.
template <int R>
SF_TARGET_AVX512_BF16 void packed_block_bf16(const std::uint16_t* x16, std::int64_t pairs, const std::uint16_t* panel,
                                             float* y, std::int64_t ldy, std::int64_t cols, bool accumulate,
                                             const std::uint16_t* next) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (std::int64_t q = 0; q < pairs; ++q) {
    if (next) {  // pair q of the next panel: two 64-byte lines
      __builtin_prefetch(next + q * 2 * kPackedPanel);
      __builtin_prefetch(next + q * 2 * kPackedPanel + kPackedPanel);
    }
    const __m512bh w0 = (__m512bh)_mm512_loadu_si512(panel + q * 2 * kPackedPanel);
    const __m512bh w1 = (__m512bh)_mm512_loadu_si512(panel + q * 2 * kPackedPanel + kPackedPanel);
    for (int r = 0; r < R; ++r) {
      std::int32_t pair;
      std::memcpy(&pair, x16 + r * 2 * pairs + 2 * q, sizeof pair);
      const __m512bh a = (__m512bh)_mm512_set1_epi32(pair);
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a, w0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a, w1);
    }
  }
  for (int r = 0; r < R; ++r) {
    float sums[kPackedPanel];
    _mm512_storeu_ps(sums, acc[r][0]);
    _mm512_storeu_ps(sums + 16, acc[r][1]);
    float* y_row = y + r * ldy;
    for (std::int64_t c = 0; c < cols; ++c) y_row[c] = accumulate ? y_row[c] + sums[c] : sums[c];
  }
}

SF_TARGET_AVX512_BF16 void packed_panel_bf16(const std::uint16_t* x16, std::int64_t m, const PackedWeight& w,
                                             std::int64_t p, float* y, bool accumulate) {
  const std::int64_t pairs = w.pairs(), panel_size = pairs * 2 * kPackedPanel;
  const std::uint16_t* panel = w.data16.data() + p * panel_size;
  const std::int64_t col0 = p * kPackedPanel, cols = std::min(kPackedPanel, w.n - col0);
  const std::uint16_t* next = p + 1 < w.panels() ? panel + panel_size : nullptr;
  for (std::int64_t i = 0; i < m; i += kBlockRows)
    with_rows(std::min(kBlockRows, m - i), [&](auto rows) {
      packed_block_bf16<decltype(rows)::value>(x16 + i * 2 * pairs, pairs, panel, y + i * w.n + col0, w.n, cols,
                                               accumulate, i == 0 ? next : nullptr);
    });
}

// x (m, k) rounded to bf16 (bf16.h's round_rows_to_bf16) into rows of 2 * pairs values: when k
// is odd, each row's last value is the zero that pads the last pair.
void round_x_to_bf16(const float* x, std::int64_t m, std::int64_t k, std::int64_t pairs,
                     std::vector<std::uint16_t>& x16) {
  x16.assign(static_cast<std::size_t>(m * 2 * pairs), 0);
  if (k == 2 * pairs) {  // rows already end on a whole pair: one call for all of x
    round_rows_to_bf16(x, k, m, k, x16.data());
    return;
  }
  for (std::int64_t i = 0; i < m; ++i) round_rows_to_bf16(x + i * k, k, 1, k, x16.data() + i * 2 * pairs);
}

thread_local PackedWeights* t_packed_weights = nullptr;  // this thread's innermost scope

}  // namespace

PackedWeight pack_weight(const float* w, std::int64_t n, std::int64_t k) {
  PackedWeight packed;
  packed.n = n;
  packed.k = k;
  packed.data.assign(static_cast<std::size_t>(packed.panels() * k * kPackedPanel), 0.0f);
  for (std::int64_t j = 0; j < n; ++j) {  // row j of W becomes column j % 32 of panel j / 32
    float* column = packed.data.data() + (j / kPackedPanel) * k * kPackedPanel + j % kPackedPanel;
    for (std::int64_t kk = 0; kk < k; ++kk) column[kk * kPackedPanel] = w[j * k + kk];
  }
  return packed;
}

PackedWeight pack_weight_bf16(const float* w, std::int64_t n, std::int64_t k) {
  PackedWeight packed;
  packed.n = n;
  packed.k = k;
  packed.bf16 = true;
  const std::int64_t pairs = packed.pairs();
  packed.data16.assign(static_cast<std::size_t>(packed.panels() * pairs * 2 * kPackedPanel), 0);
  for (std::int64_t j = 0; j < n; ++j) {  // W[j][kk] -> panel j / 32, pair kk / 2, column j % 32, slot kk % 2
    std::uint16_t* column =
        packed.data16.data() + (j / kPackedPanel) * pairs * 2 * kPackedPanel + (j % kPackedPanel) * 2;
    for (std::int64_t kk = 0; kk < k; ++kk) column[(kk / 2) * 2 * kPackedPanel + kk % 2] = float_to_bf16(w[j * k + kk]);
  }
  return packed;
}

void packed_linear(const float* x, std::int64_t m, const PackedWeight& w, float* y, bool accumulate) {
  const std::int64_t panels = w.panels();
  const bool small = m * w.n * w.k < kGemmParallelMinMacs;
  [[maybe_unused]] const int threads =  // (unused where pragmas are off: the reference build)
      omp_in_parallel() || small ? 1 : static_cast<int>(std::min<std::int64_t>(omp_get_max_threads(), panels));
  if (!w.bf16) {
    // Each panel is whole on one thread, so the split changes no sum.
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (std::int64_t p = 0; p < panels; ++p) packed_panel(x, m, w, p, y, accumulate);
    return;
  }
  if (!has_avx512_bf16())
    throw std::runtime_error("packed_linear: a bf16 packing needs AVX512-BF16; this CPU has " + bf16_units_found());
  thread_local std::vector<std::uint16_t> x16;  // this thread's x in bf16, reused from call to call
  round_x_to_bf16(x, m, w.k, w.pairs(), x16);
  const std::uint16_t* x16_data = x16.data();
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (std::int64_t p = 0; p < panels; ++p) packed_panel_bf16(x16_data, m, w, p, y, accumulate);
}

void packed_linear_reference(const float* x, std::int64_t m, const float* w, std::int64_t n, std::int64_t k, float* y,
                             bool accumulate) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (std::int64_t kk = 0; kk < k; ++kk) sum += x[i * k + kk] * w[j * k + kk];
      y[i * n + j] = accumulate ? y[i * n + j] + sum : sum;
    }
}

const PackedWeight& PackedWeights::get(const float* w, std::int64_t n, std::int64_t k, bool bf16) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = packed_[{w, n, k, bf16}];
  if (!slot) slot = std::make_unique<PackedWeight>(bf16 ? pack_weight_bf16(w, n, k) : pack_weight(w, n, k));
  return *slot;
}

std::size_t PackedWeights::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return packed_.size();
}

PackedWeightsScope::PackedWeightsScope(PackedWeights& weights) : previous_(t_packed_weights) {
  t_packed_weights = &weights;
}
PackedWeightsScope::~PackedWeightsScope() { t_packed_weights = previous_; }

PackedWeights* packed_weights_in_use() { return t_packed_weights; }

}  // namespace sf
