// The recurrent encoder-decoder (nn/rnn_seq2seq.h): every attention kind and cell gradchecks as a
// whole model; decoding one step at a time is teacher forcing; padding, beams and the alignment.
#include "test_util.h"

#include <vector>

#include "autograd/ops.h"
#include "nn/model.h"
#include "nn/rnn_seq2seq.h"

using Catch::Contains;
using namespace sf;
using sf::test::max_abs;
using sf::test::max_abs_diff;

namespace {

const std::vector<nn::RnnAttention> kAttentions = {nn::RnnAttention::None, nn::RnnAttention::Additive,
                                                   nn::RnnAttention::Dot, nn::RnnAttention::General};

nn::ModelConfig rnn_config(nn::RnnAttention attention, nn::CellKind cell, std::int64_t d_model = 8) {
  nn::ModelConfig cfg;
  cfg.arch = nn::Arch::Rnn;
  cfg.rnn_attention = attention;
  cfg.rnn_cell = cell;
  cfg.src_vocab = 11;
  cfg.tgt_vocab = 9;
  cfg.d_model = d_model;
  cfg.n_heads = 2;
  cfg.d_ff = 8;
  cfg.encoder_layers = 2;
  cfg.decoder_layers = 2;
  cfg.dropout = 0.0;
  cfg.pad_id = 0;
  cfg.bos_id = 2;
  return cfg;
}

// Two sources, the second padded: (2, 5).
Tensor sources() { return test::ids({5, 7, 3, 9, 4, 6, 10, 8, 0, 0}, {2, 5}); }
Tensor targets() { return test::ids({2, 5, 7, 3, 2, 8, 4, 6}, {2, 4}); }

}  // namespace

TEST_CASE("RnnSeq2Seq gradchecks as a whole model: every attention kind, every cell", "[recurrent][model][grad][additive_attention]") {
  struct Case {
    nn::RnnAttention attention;
    nn::CellKind cell;
  };
  const std::vector<Case> cases = {{nn::RnnAttention::None, nn::CellKind::lstm},     {nn::RnnAttention::Additive, nn::CellKind::lstm},
                                   {nn::RnnAttention::Dot, nn::CellKind::lstm},      {nn::RnnAttention::General, nn::CellKind::lstm},
                                   {nn::RnnAttention::Additive, nn::CellKind::gru},  {nn::RnnAttention::Dot, nn::CellKind::rnn}};
  for (const Case& c : cases) {
    INFO(nn::rnn_attention_name(c.attention) << " " << nn::cell_kind_name(c.cell));
    Generator gen(21);
    nn::ModelConfig cfg = rnn_config(c.attention, c.cell, 4);
    cfg.encoder_layers = 1;
    nn::RnnSeq2Seq model(cfg, gen, Dtype::Float64);
    const Tensor src = test::ids({5, 7, 3, 6, 10, 0}, {2, 3}), tgt = test::ids({2, 5, 7, 2, 8, 4}, {2, 3});
    const Tensor w = randn({2, 3, 9}, gen, Dtype::Float64);
    test::require_gradcheck([&](const std::vector<Tensor>&) { return sum(mul(model.forward(src, tgt), w)); },
                            model.parameters());
  }
}

TEST_CASE("RnnSeq2Seq: decoding step by step gives teacher forcing's logits", "[recurrent][model][cache]") {
  for (const nn::RnnAttention attention : kAttentions) {
    INFO(nn::rnn_attention_name(attention));
    Generator gen(5);
    nn::RnnSeq2Seq model(rnn_config(attention, nn::CellKind::lstm), gen, Dtype::Float64);
    const Tensor src = sources(), tgt = targets();
    const Tensor forced = model.forward(src, tgt);  // (2,4,V)
    auto state = model.start_decoding(src);
    CHECK(max_abs_diff(state->first_tokens(), narrow(tgt, 1, 0, 1)) == 0);  // BOS
    for (std::int64_t t = 0; t < 4; ++t) {
      const Tensor logits = model.decode_step(narrow(tgt, 1, t, 1), *state);
      CHECK(max_abs_diff(logits, squeeze(narrow(forced, 1, t, 1), 1)) < 1e-13);
    }
    CHECK(state->length() == 4);
    CHECK(max_abs_diff(model.decode_prefix(tgt, *state), forced) < 1e-13);  // from s_0 again
    CHECK(state->cache_bytes() > 0);
  }
}

TEST_CASE("RnnSeq2Seq: a padded source gives what the sentence alone gives", "[recurrent][model][padding]") {
  for (const nn::RnnAttention attention : kAttentions) {
    INFO(nn::rnn_attention_name(attention));
    Generator gen(8);
    nn::RnnSeq2Seq model(rnn_config(attention, nn::CellKind::gru), gen, Dtype::Float64);
    const Tensor batch = model.forward(sources(), targets());
    const Tensor alone = model.forward(test::ids({6, 10, 8}, {1, 3}), narrow(targets(), 0, 1, 1));
    CHECK(max_abs_diff(narrow(batch, 0, 1, 1), alone) < 1e-13);
  }
}

TEST_CASE("RnnSeq2Seq: beams copy and exchange the recurrent state", "[recurrent][model][cache][additive_attention]") {
  Generator gen(3);
  nn::RnnSeq2Seq model(rnn_config(nn::RnnAttention::Additive, nn::CellKind::lstm), gen, Dtype::Float64);
  const Tensor src = sources();
  auto single = model.start_decoding(src);
  auto beams = model.start_decoding(src);
  beams->repeat_rows(3);  // rows 0-2 read sentence 0, rows 3-5 sentence 1
  const Tensor step1 = test::ids({5, 8}, {2, 1}), beam_step1 = test::ids({7, 5, 1, 4, 8, 6}, {6, 1});
  model.decode_step(step1, *single);
  model.decode_step(beam_step1, *beams);
  // Beam 1 of sentence 0 read 5, beam 1 of sentence 1 read 8: give those states to every beam.
  beams->reorder(test::ids({1, 1, 1, 4, 4, 4}));
  const Tensor next = test::ids({3, 4}, {2, 1});
  const Tensor want = model.decode_step(next, *single);
  const Tensor got = model.decode_step(test::ids({3, 3, 3, 4, 4, 4}, {6, 1}), *beams);
  CHECK(max_abs_diff(narrow(got, 0, 0, 1), narrow(want, 0, 0, 1)) < 1e-13);
  CHECK(max_abs_diff(narrow(got, 0, 5, 1), narrow(want, 0, 1, 1)) < 1e-13);
  CHECK_THROWS_WITH(beams->reorder(test::ids({3, 1, 1, 4, 4, 4})), Contains("only the rows of one sentence"));
}

TEST_CASE("RnnSeq2Seq: the alignment is a distribution over the real source words", "[recurrent][model][attention][additive_attention]") {
  for (const nn::RnnAttention attention : {nn::RnnAttention::Additive, nn::RnnAttention::Dot, nn::RnnAttention::General}) {
    INFO(nn::rnn_attention_name(attention));
    Generator gen(4);
    nn::RnnSeq2Seq model(rnn_config(attention, nn::CellKind::lstm), gen, Dtype::Float64);
    const Tensor a = model.alignment(sources(), targets());  // (2,4,5)
    REQUIRE(a.shape() == Shape{2, 4, 5});
    CHECK(max_abs_diff(sum(a, {2}), full({2, 4}, 1.0, Dtype::Float64)) < 1e-14);
    CHECK(max_abs(narrow(narrow(a, 0, 1, 1), 2, 3, 2)) == 0);  // sentence 1's padding gets no weight
  }
  Generator gen(4);
  nn::RnnSeq2Seq bottleneck(rnn_config(nn::RnnAttention::None, nn::CellKind::lstm), gen);
  CHECK_THROWS_WITH(bottleneck.alignment(sources(), targets()), Contains("no alignment"));
}

TEST_CASE("RnnSeq2Seq: parameter names, and what the bottleneck lacks", "[recurrent][model][params]") {
  Generator gen(1);
  nn::RnnSeq2Seq additive(rnn_config(nn::RnnAttention::Additive, nn::CellKind::lstm), gen);
  nn::RnnSeq2Seq none(rnn_config(nn::RnnAttention::None, nn::CellKind::lstm), gen);
  const auto names = [](const nn::Model& m) {
    std::vector<std::string> n;
    for (const auto& [name, p] : m.named_parameters()) n.push_back(name);
    return n;
  };
  const std::vector<std::string> a = names(additive), b = names(none);
  const auto has = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  CHECK(has(a, "encoder.weight_ih_l1_reverse"));
  CHECK(has(a, "decoder.weight_hh_l1"));
  CHECK(has(a, "query_proj.weight"));
  CHECK(has(a, "score_v"));
  CHECK_FALSE(has(b, "score_v"));
  CHECK_FALSE(has(b, "key_proj.weight"));
  // Bahdanau's decoder reads [y; c]: its first input matrix is twice as wide.
  CHECK(additive.decoder->weights(0, 0).weight_ih.shape() == Shape{32, 16});
  CHECK(none.decoder->weights(0, 0).weight_ih.shape() == Shape{32, 8});
}

TEST_CASE("RnnSeq2Seq: bad input is one clear error", "[recurrent][model][errors]") {
  Generator gen(1);
  nn::ModelConfig odd = rnn_config(nn::RnnAttention::Dot, nn::CellKind::lstm, 5);
  odd.n_heads = 1;
  CHECK_THROWS_WITH(nn::RnnSeq2Seq(odd, gen), Contains("d_model") && Contains("5"));
  nn::ModelConfig transformer = rnn_config(nn::RnnAttention::Dot, nn::CellKind::lstm);
  transformer.arch = nn::Arch::EncoderDecoder;
  CHECK_THROWS_WITH(nn::RnnSeq2Seq(transformer, gen), Contains("expected model.arch rnn"));
  nn::RnnSeq2Seq model(rnn_config(nn::RnnAttention::Dot, nn::CellKind::lstm), gen);
  auto state = model.start_decoding(sources());
  CHECK_THROWS_WITH(model.decode_step(test::ids({2, 2, 2}, {3, 1}), *state), Contains("expected tokens (2, 1)"));
  CHECK_THROWS_WITH(model.forward(sources(), test::ids({2, 5}, {1, 2})), Contains("src has 2 rows"));
}

TEST_CASE("RnnSeq2Seq: a source row that is all padding is one clear error", "[recurrent][model][errors][padding]") {
  Generator gen(1);
  for (nn::RnnAttention attention : kAttentions) {
    nn::RnnSeq2Seq model(rnn_config(attention, nn::CellKind::lstm), gen);
    const Tensor blank_row = test::ids({5, 7, 3, 9, 4, 0, 0, 0, 0, 0}, {2, 5});
    CHECK_THROWS_WITH(model.forward(blank_row, targets()),
                      Contains("source row 1 is all padding") && Contains("at least one real token"));
    CHECK_THROWS_WITH(model.start_decoding(blank_row), Contains("source row 1 is all padding"));
  }
}
