// The attention kernel ladder, rung 4: sliding-window (local) attention.
//
// Each query reads only the W keys ending at its own position, i - W < j <= i: the causal band
// of rung 5, cut to a width of W. Information still travels further than W, one window per
// layer (L layers reach back L (W - 1) positions), which is how models with local attention
// layers (Mistral, Gemma's local layers, Longformer's windows) see long texts.
//
// The point of this rung is what it does NOT compute. A window is easy to express as a mask on
// rung 2 (block every key outside the band): the output is the same, but the (T,T) scores and
// weights are still computed and stored, so the mask saves neither time nor memory. The tiled
// kernel of rung 3 with a band (KeyBand in ops.h) starts each block of query rows at the key
// block holding its first row's first key and stops at its last row's last key:
//
//   for each block of query rows i0 .. i0+Br-1:
//     visit key blocks from the one holding i0 - W + 1 up to the one holding i0 + Br - 1
//     in the tiles the band's two edges cross, block the entries outside it
//
// so each query row costs O(W) instead of O(T): time and memory grow as T·W, linear in T.
// The result is rung 1's with the window written as a mask, to rounding
// (tests/test_attention_ladder.cpp). window >= Tk is plain causal attention.
//
// Letters: B batch, H heads, Tq query length, Tk key length, Dh head width, W window.
#include <stdexcept>
#include <string>

#include "autograd/ladder/ladder.h"
#include "autograd/ops.h"

namespace sf {

Tensor window_attention(const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t window, double scale,
                        std::int64_t block) {
  if (window < 1)
    throw std::invalid_argument("window_attention: expected a window of at least 1 key, got " + std::to_string(window));
  return tiled_attention(q, k, v, Tensor(), Tensor(), scale, block, KeyBand{.causal = true, .window = window});
}

}  // namespace sf
