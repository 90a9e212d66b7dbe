// Demo `kv-bandwidth`: decoding is bandwidth-bound. One decoding step computes little (one
// query per row) but reads every cached key and value once:
//
//   KV bytes read per step   2 (k and v) * layers * B * Hkv * T * Dh * 4 bytes (float32)
//   FLOPs of the attention   about 4 * layers * B * H * T * Dh   (q.k and weights.v)
//
// so each byte read brings 2 H / Hkv / 4 FLOPs, a handful, while a CPU core can do tens of
// FLOPs in the time one byte arrives from memory. The step's time grows with the bytes, and its
// slope is the memory bandwidth. The demo builds decoder-only models (D 256, H 8, Dh 32, float32,
// random init) with MHA, GQA and MQA (Hkv 8, 2, 1), fills their caches with T positions and
// times decoding steps against T; it reports the KV bytes each step reads and the bandwidth that
// achieves, beside the machine's own bandwidth measured in the same run by a stream-style loop
// (read a large array once). Timings are printed, never asserted.
//
// The cache here is a full ring (model.attention_window = T, nn/attention.h): a step writes its
// new key into one slot in place and reads the T slots, so it reads the cache once and copies
// nothing. The second table is the ring's point: with a window of W the cache holds W positions
// however many tokens are generated (measured as live tensor bytes), where a full cache grows
// by one position per token.
#pragma once

#include "train/lessons/demo_report.h"

#include <cstdint>
#include <vector>

namespace sf::lessons {

struct KvBandwidthSettings {
  std::int64_t d_model = 256, n_heads = 8, layers = 2, batch = 4;
  std::vector<std::int64_t> kv_heads = {8, 2, 1};                // MHA, GQA, MQA
  std::vector<std::int64_t> cache_lengths = {256, 1024, 4096, 16384};
  int steps = 9;                                                  // timed steps per point (median)
  std::int64_t stream_bytes = std::int64_t{256} << 20;            // the stream loop's array
  std::int64_t window = 64;                                       // the ring of the memory table
  std::vector<std::int64_t> generated = {64, 256, 1024};          // tokens generated in the memory table
};

struct KvBandwidthPoint {
  std::int64_t kv_heads = 0, cache_length = 0;
  std::int64_t kv_bytes = 0;          // DecodeState::cache_bytes(): what each step reads
  std::int64_t kv_bytes_formula = 0;  // 2 * layers * B * Hkv * T * Dh * 4
  double step_seconds = 0;            // median decode_step time
  double gb_per_s() const { return step_seconds > 0 ? static_cast<double>(kv_bytes) / step_seconds / 1e9 : 0; }
};

struct KvMemoryRow {
  std::int64_t generated = 0;          // tokens decoded from a one-token prompt
  std::int64_t full_live_bytes = 0;    // tensor bytes alive in the state afterwards, full cache
  std::int64_t ring_live_bytes = 0;    // the same with attention_window = settings.window
};

struct KvBandwidthResult {
  KvBandwidthSettings settings;
  std::int64_t head_dim = 0;
  std::vector<KvBandwidthPoint> points;  // every Hkv x every T
  double stream_gb_per_s = 0;            // the read loop, best of a few passes
  std::vector<KvMemoryRow> memory;
  // The claim: every cache holds what the formula says, the KV bytes scale with Hkv, the ring's
  // live bytes are the same after every generated length while the full cache's grow with it.
  bool claim_holds = false;
};

KvBandwidthResult compute_kv_bandwidth(std::uint64_t seed, const KvBandwidthSettings& settings = {});

// The numbers as the explorer's Lessons page draws them (demo_report.h); kv_bandwidth_report is this
// of a fresh run.
Json kv_bandwidth_json(const KvBandwidthResult& r);

}  // namespace sf::lessons
