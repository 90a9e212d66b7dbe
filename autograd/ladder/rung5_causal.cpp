// The attention kernel ladder, rung 5: causal attention with no mask at all.
//
// A decoder's query i may read keys 0 .. i. Rungs 1 to 3 are told so by a (T,T) boolean mask,
// a tensor that has to be built, stored and read entry by entry, and they still compute every
// score above the diagonal only to overwrite it with -inf: half of the T² work thrown away.
// Here causality is a rule about positions, j <= i, and the tiled kernel of rung 3 follows it
// (KeyBand in ops.h, the band paragraph at the top of ops_attention.cpp):
//
//   for each block of query rows i0 .. i0+Br-1:
//     visit key blocks j0 = 0, Bc, ... only while j0 <= i0 + Br - 1     (the last row's last key)
//     in the one tile the diagonal crosses, block the entries with j > i
//
// so the tiles above the diagonal are never computed, in forward or in backward, and no mask
// tensor exists. The result is rung 1's with a causal mask, to rounding (tests/test_attention_ladder.cpp).
// With Tq < Tk (decoding with a cache: the queries are the last Tq positions) query row i sits at
// position i + Tk - Tq.
//
// Letters: B batch, H heads, Tq query length, Tk key length, Dh head width; Br = Bc = block.
#include "autograd/ladder/ladder.h"
#include "autograd/ops.h"

namespace sf {

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, std::int64_t block) {
  return tiled_attention(q, k, v, Tensor(), Tensor(), scale, block, KeyBand{.causal = true, .window = 0});
}

}  // namespace sf
