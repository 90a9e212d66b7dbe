// A model for checking decoders without training one: an untrained float32 encoder-decoder
// (D 16, H 4, one layer each, vocabulary 11, max_len 12) whose output projection is scaled up
// six times, so that its next-token distributions are peaked and greedy decoding stops at </s>
// at varied lengths. The greedy exercise's check (exercise_checks.cpp) and its tests
// (tests/test_exercises.cpp) decode with it, as tests/test_decode.cpp does.
#pragma once

#include <cstdint>

#include "autograd/generator.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "data/tokenizer.h"
#include "nn/seq2seq.h"

namespace sf::train {

struct PeakedModel {
  Generator init;
  nn::Seq2SeqTransformer model;

  static nn::ModelConfig config() {
    nn::ModelConfig c;
    c.src_vocab = c.tgt_vocab = 11;
    c.d_model = 16;
    c.n_heads = 4;
    c.d_ff = 32;
    c.encoder_layers = c.decoder_layers = 1;
    c.dropout = 0.0;
    c.tie_output = false;
    c.max_len = 12;
    c.pad_id = data::kPadId;
    return c;
  }
  explicit PeakedModel(std::uint64_t seed) : init(seed), model(config(), init) {
    NoGradGuard no_grad;
    model.output_proj->weight.copy_(mul(model.output_proj->weight, 6.0));
    model.eval();
  }
};

}  // namespace sf::train
