// The training examples of the lecture's other architectures, built from token ids.
// Each turns sequences into the same Batch the encoder-decoder trains on (data/batcher.h), so
// the loss is always cross-entropy of logits against tgt_out with padding ignored: a position
// whose target is kPadId does not count.
//
//   lm          next-token language modelling (decoder-only): h_i = f(x_1..x_i) predicts x_{i+1}
//                 tgt_in  = <s> x_1 ... x_n          tgt_out = x_1 ... x_n </s>
//   prompted    translation by a decoder-only model: source and target in one causal sequence,
//               the loss on the target only
//                 tgt_in  = <s> s_1 .. s_m <sep> t_1 .. t_n
//                 tgt_out = pad .. pad     t_1   t_2 .. t_n </s>   (m + 1 pads: the prompt is given)
//   masked LM   BERT's recipe (encoder-only): choose 15% of the ordinary tokens; of those 80%
//               become <mask>, 10% a random ordinary token, 10% stay; the loss reads only the
//               chosen positions
//                 src     = x with the chosen tokens replaced    tgt_out = x at chosen, pad elsewhere
//   classify    a label per sentence or sentence pair (encoder-only, a head on the pooled vector)
//                 src     = <cls> a_1 .. a_m [<sep> b_1 .. b_n]     tgt_out = (label)
//
// Letters: B rows, T the longest row's length.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/generator.h"
#include "data/batcher.h"

namespace sf::data {

// seqs[b]: the ids of row b (no BOS/EOS), at least one token each -> tgt_in, tgt_out (B,T) with
// T = the longest + 1, tgt_pad_mask; src is undefined (a decoder-only model reads one sequence).
Batch make_lm_batch(const std::vector<const std::vector<std::int64_t>*>& seqs, const std::vector<std::int64_t>& indices);

// src[b], tgt[b]: a translation pair's ids -> the prompted sequence above in tgt_in and tgt_out
// (B,T), T = max(m_b + n_b + 2); src undefined; tgt_tokens counts the target tokens and EOS only.
Batch make_prompted_batch(const std::vector<const std::vector<std::int64_t>*>& src,
                          const std::vector<const std::vector<std::int64_t>*>& tgt,
                          const std::vector<std::int64_t>& indices, std::int64_t sep_id);

// The rates of the masked-LM recipe (Devlin et al., 2019).
struct MaskingRates {
  double choose = 0.15;  // share of the ordinary tokens whose prediction is trained
  double mask = 0.8;     // of the chosen: replaced by <mask>
  double random = 0.1;   // of the chosen: replaced by a random ordinary token (the rest stay)
};

// One row masked. Ordinary tokens are the ids in [first_ordinary, vocab); the others (padding,
// <s>, </s>, <unk> and task symbols such as <mask>) are never chosen.
struct MaskedRow {
  std::vector<std::int64_t> input;   // what the encoder reads
  std::vector<std::int64_t> target;  // the original id at chosen positions, kPadId elsewhere
};
MaskedRow mask_tokens(const std::vector<std::int64_t>& ids, Generator& gen, std::int64_t mask_id, std::int64_t first_ordinary,
                      std::int64_t vocab, const MaskingRates& rates = {});

// Rows masked by mask_tokens -> src (B,S) = the inputs, tgt_out (B,S) = the targets (padded with
// kPadId), src_pad_mask; tgt_in undefined; tgt_tokens = the chosen positions (what the loss counts).
Batch make_mlm_batch(const std::vector<MaskedRow>& rows, const std::vector<std::int64_t>& indices);

// src[b]: the ids the encoder reads (the data has put <cls> and <sep> in), labels[b] >= 0 ->
// src (B,S) padded, src_pad_mask, tgt_out (B) int64 the labels; tgt_in undefined; tgt_tokens = B
// (one prediction per row). The loss must not ignore id kPadId here: label 0 is a class.
Batch make_classify_batch(const std::vector<const std::vector<std::int64_t>*>& src, const std::vector<std::int64_t>& labels,
                          const std::vector<std::int64_t>& indices);

}  // namespace sf::data
