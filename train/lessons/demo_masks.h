// Demo `masks`: the masks of a real batch, and what they do to the attention weights.
//
// A batch of B Multi30k sentences (German source, English target, one token per word) padded to
// the longest with <pad>. Attention uses three masks (TRUE = blocked, nn/attention.h):
//   - the source padding mask (B,1,1,S): no query reads a <pad> key (encoder self-attention and
//     the decoder's cross-attention);
//   - the causal mask (T,T): decoder position i reads keys 0..i only (teacher forcing would
//     otherwise let it read the word it must predict);
//   - no target padding mask is needed in the decoder's self-attention: the pads sit at the end,
//     so the causal mask already hides them from every real token (seq2seq.cpp does the same);
//     the loss ignores the pad positions' outputs.
// The demo builds the masks with the framework's functions, runs attention_weights with them on
// random queries and keys, and checks that every blocked key gets weight exactly 0 and every row
// sums to 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sf::lessons {

struct MasksDemoResult {
  std::vector<std::vector<std::string>> src, tgt_in;  // (B, S), (B, T) tokens, "<pad>" padded
  std::vector<std::vector<bool>> src_pad;             // (B, S) the padding mask
  std::vector<std::vector<bool>> causal;              // (T, T)
  std::int64_t row = 0;                               // the sentence drawn in full below
  std::vector<std::vector<bool>> encoder_mask;        // (S, S) sentence `row`'s encoder self-attention
  std::vector<std::vector<bool>> cross_mask;          // (T, S) its cross-attention
  std::vector<std::vector<double>> encoder_weights;   // (S, S) attention_weights under encoder_mask
  std::vector<std::vector<double>> decoder_weights;   // (T, T) under the causal mask
  std::vector<std::vector<double>> cross_weights;     // (T, S) under cross_mask
  double max_blocked_weight = 0;  // over the whole batch and the three attentions: exactly 0
  double max_row_sum_error = 0;   // max |sum_j w_ij - 1|
  bool pad_mask_matches_tokens = false;  // src_pad[b][i] == (src[b][i] == "<pad>")
  bool claim_holds = false;
};

// corpora: the folder holding multi30k/ ("" = the shipped data/corpora). Takes the first B
// training pairs with different source lengths (at most 10 words).
MasksDemoResult compute_masks_demo(std::uint64_t seed, const std::string& corpora, std::int64_t batch = 4);

}  // namespace sf::lessons
