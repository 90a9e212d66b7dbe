// `scratchformer bench --attention`: the attention kernel ladder (autograd/ladder/ladder.h)
// measured, every rung at sequence lengths T = 64 ... 8192: the time of one forward and
// backward pass and the extra memory it needed at its peak.
//
// The setting is a decoder's causal self-attention: B = 1, H = 4 heads of Dh = 64, float32,
// q, k, v random, loss = sum(out). The rows:
//   1 loops            rung 1, the four nested loops (only up to T = 1024: it is O(T² Dh)
//                      scalar multiply-adds, seconds beyond that)
//   2 matmul           rung 2 with a causal mask tensor: scores and weights (B,H,T,T) kept
//   2 matmul, window   rung 2 with the sliding window written as a mask: the same (T,T) tensors,
//                      so a window *mask* saves no memory and no time
//   3 tiled            rung 3 with the causal mask tensor: online softmax, O(T) extra memory,
//                      every tile still computed (the mask blocks the upper ones entry by entry)
//   4 window           rung 4, W keys per query: tiles outside the band never visited
//   5 causal           rung 5, causal by position: the tiles above the diagonal skipped
// Time: median of `steps` runs after one untimed run. Memory: the tensor-storage peak during the
// run minus what was alive before it (autograd/runtime/memory_stats.h: the saved scores and
// weights, the gradients, temporaries), plus the tiled kernels' own scratch (tiles and running
// statistics, tiled_attention_peak_scratch_bytes), measured, not computed. The inputs
// themselves are alive before and not counted.
//
// Letters: B batch, H heads, T sequence length, Dh head width, W window.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/bench/bench.h"

namespace sf::train {

struct AttentionBenchOptions {
  std::vector<std::int64_t> lengths{64, 128, 256, 512, 1024, 2048, 4096, 8192};
  std::int64_t window = 256;  // W of rung 4 and of the window mask on rung 2
  std::int64_t steps = 3;     // timed runs per cell (the median is reported)
  std::int64_t loops_up_to = 1024;  // rung 1 only at T up to this
  std::int64_t heads = 4, head_dim = 64;
  std::string svg;            // where to draw the figure ("" = no figure)
  bool json_only = false;
};

// One cell: a rung at one length.
struct AttentionBenchCell {
  std::string rung;        // "1 loops", "2 matmul", ...
  std::int64_t length = 0;
  double seconds = 0;      // one forward + backward, median
  std::int64_t peak_bytes = 0;  // extra memory at the peak (tensor storage + kernel scratch)
};

// Every cell, rung by rung for each length (rung 1 left out above loops_up_to).
std::vector<AttentionBenchCell> attention_bench_cells(const AttentionBenchOptions& opt);

// Runs the table (and the SVG): prints it unless json_only, then one JSON line. Returns 0.
int run_attention_bench(const AttentionBenchOptions& opt, std::int64_t threads);

}  // namespace sf::train
