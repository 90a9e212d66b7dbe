// The attention kernel ladder: one computation, out = softmax(scale q kᵀ, masked) v, written
// several ways, each rung faster or leaner than the one below it and each checked against rung 1
// (tests/test_attention_ladder.cpp: values and float64 gradient checks). Read them in order:
//
//   rung 1  attention_loops   ladder/rung1_loops.cpp   four nested loops; the whole (Tq,Tk)
//                                                      probability matrix kept for backward
//   rung 2  attention_naive   ops_attention.cpp        the same as matrix products and ops
//                                                      (matmul, masked_fill, softmax): what
//                                                      the model's plain path computes
//   rung 3  tiled_attention   ops_attention.cpp        tiles of queries and keys with the
//                                                      online softmax (FlashAttention): exact,
//                                                      O(T) extra memory, scores recomputed in
//                                                      backward
//   rung 4  window_attention  ladder/rung4_window.cpp  a sliding window of W keys: the tiles
//                                                      outside the band are never visited, so
//                                                      time and memory grow as T·W (a window
//                                                      *mask* on rung 2 saves neither)
//   rung 5  causal_attention  ladder/rung5_causal.cpp  causal by position: the tiles above the
//                                                      diagonal are skipped, no mask tensor
//
// Letters: B batch, H heads, Tq query length, Tk key length, Dh head width.
#pragma once

#include <cstdint>

#include "autograd/tensor.h"

namespace sf {

// Rung 1. q (B,H,Tq,Dh), k, v (B,H,Tk,Dh) of one float dtype; mask: bool broadcastable to
// (B,H,Tq,Tk), true = blocked, or undefined -> (B,H,Tq,Dh). A query whose keys are all blocked
// outputs zeros. Gradients flow to q, k and v.
Tensor attention_loops(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double scale);

// Rung 4. q (B,H,Tq,Dh), k, v (B,H,Tk,Dh) -> (B,H,Tq,Dh): query row i (at position i + Tk - Tq)
// reads keys i + Tk - Tq - window + 1 .. i + Tk - Tq. window >= 1; block: the tile size.
Tensor window_attention(const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t window, double scale,
                        std::int64_t block = 64);

// Rung 5. The same shapes; query row i reads keys 0 .. i + Tk - Tq.
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, std::int64_t block = 64);

}  // namespace sf
