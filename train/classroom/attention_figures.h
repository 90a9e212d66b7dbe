// `scratchformer attention`: every attention layer of a model, per head, for one sentence, as SVG
// heatmaps (drawn by attention_heatmaps_svg, plots.h). An encoder-decoder has three kinds, and
// each gets a figure: the encoder's bidirectional self-attention (every source position sees
// every other, padding aside), the decoder's causal (masked) self-attention and its
// cross-attention; an overview puts the first head of each encoder layer beside the same
// decoder layer's self-attention, so the full square and the triangle stand side by side. For a
// decoder-only or encoder-only model (one stack, no cross-attention): every layer's causal or
// bidirectional self-attention over the one sequence it reads. For a recurrent encoder-decoder
// (arch rnn, with additive, dot or general attention): its alignment α, one map (the decoder
// attends once per step, with one "head"), in the cross-attention figure; with rnn_attention
// "none" there are no weights to draw (an error says so).
//
// Letters: S source length, T target length (+1 for BOS / EOS), H heads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "train/classroom/lang.h"
#include "train/setup.h"

namespace sf::train {

struct AttentionFigures {
  std::vector<std::string> source_pieces;   // the S source tokens (columns of cross-attention)
  std::vector<std::string> decoder_inputs;  // BOS + target (columns of self-attention), T of them
  std::vector<std::string> produced;        // the token each decoder position produces (the rows), T
  std::string translation;                  // the target as text (greedy output, or --tgt)
  bool teacher_forced = false;              // true: the target was given, not generated
  // rows = layers, columns = heads
  std::string cross_svg;     // decoder cross-attention (an rnn: its alignment); empty for a single stack
  std::string self_svg;      // decoder (causal) self-attention, or the single stack's self-attention
  std::string encoder_svg;   // encoder (bidirectional) self-attention; empty for a single stack
  std::string overview_svg;  // per layer: encoder head 1 beside decoder self head 1; empty for a single stack
};

// Translates `source` greedily with the model (or, if `target` is given, feeds that target: teacher
// forcing), then runs the decoder once more over the whole target WITHOUT the KV cache, so that every
// layer's attention weights cover every position, and draws them. Row t of every map is decoder
// position t, labelled with the token it produces (target token t, or </s> at the end); its input
// is decoder_inputs[t]. Throws std::invalid_argument for a sentence that is empty, not UTF-8, or
// longer than the model allows. A decoder-only or encoder-only model draws its one stack's
// self-attention over the sequence it reads for `source` (a decoder-only translation: the prompt
// and its greedy translation; classify: text_a<TAB>text_b); `target` must be absent.
// `pad` <pad> tokens are appended to the sequence the encoder (or the single stack) reads, as a
// batch pads its shorter rows: their columns are masked (hatched) in every map that reads them as
// keys, and the translation does not change (it is decoded from the unpadded source).
// `lang`: the figures' titles and captions in English or Chinese.
AttentionFigures attention_figures(const InferenceModel& im, const std::string& source,
                                   const std::optional<std::string>& target, std::int64_t pad = 0, Lang lang = Lang::En);

// ---- the weights behind the figures (also what `scratchformer serve` sends, train/explorer) ----

// One stack of attention layers: every layer's weights for one sentence, with their labels.
struct AttentionStack {
  std::string kind;                   // "encoder", "decoder_self", "cross" (encoder-decoder) or "self"
  bool causal = false;                // a query sees no key after it (decoder self-attention)
  std::vector<std::string> queries;   // the Tq row labels (token pieces)
  std::vector<std::string> keys;      // the Tk column labels
  std::vector<Tensor> layers;         // per layer: (1,H,Tq,Tk), each row summing to 1 (an rnn: one layer, H = 1)
};

struct AttentionWeights {
  std::vector<AttentionStack> stacks;       // encoder, decoder_self, cross; or the one "self" stack; an rnn: "cross" alone
  std::string translation;                  // as AttentionFigures::translation
  bool teacher_forced = false;
  std::vector<std::string> source_pieces, decoder_inputs, produced;  // as in AttentionFigures
};

// The names of the inputs in error messages: the CLI's options, or the explorer's fields.
struct AttentionInputNames {
  const char* source = "--src";
  const char* target = "--tgt";
};

// What attention_figures draws, as tensors: the same sentence, decoding and single pass with
// every attention capturing its weights (same errors, naming `names`).
AttentionWeights attention_weights(const InferenceModel& im, const std::string& source,
                                   const std::optional<std::string>& target, std::int64_t pad = 0,
                                   const AttentionInputNames& names = {});

}  // namespace sf::train
