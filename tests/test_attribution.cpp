// Attention beside attribution (train/classroom/attribution.h) on a small float64
// encoder-decoder: gradient x input is the directional derivative finite differences give,
// integrated gradients add up to f(x) - f(baseline) (completeness), rollout and attention rows are
// distributions, and head ablation puts the weights back.
#include <catch2/catch.hpp>

#include <cmath>

#include "autograd/generator.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "nn/seq2seq.h"
#include "train/classroom/attribution.h"
#include "train/lessons/toy_task.h"

using namespace sf;

namespace {

struct Small {
  std::unique_ptr<nn::Seq2SeqTransformer> model;
  Tensor src = from_vector<std::int64_t>({5, 9, 7, 12, 6}, {1, 5});
  Tensor tgt_in = from_vector<std::int64_t>({1, 6, 12, 7, 9}, {1, 5});
  Tensor tgt_out = from_vector<std::int64_t>({6, 12, 7, 9, 2}, {1, 5});
  Small() {
    nn::ModelConfig c = lessons::toy_transformer_config(lessons::ToyTask{}, 16);
    c.encoder_layers = c.decoder_layers = 2;
    c.activation = nn::Activation::GELU;  // smooth, so the integral's quadrature converges as 1/steps^2
    Generator gen(3);
    model = std::make_unique<nn::Seq2SeqTransformer>(c, gen, Dtype::Float64);
  }
};

// f_t with source token s's embedding scaled by (1 + eps), the rest as they are.
double f_scaled(nn::Seq2SeqTransformer& m, const Small& s, std::int64_t t, std::int64_t token, double eps) {
  const NoGradGuard no_grad;
  Tensor x = mul(m.src_embed->forward(s.src), std::sqrt(16.0)).clone();  // (1,S,D)
  x.narrow(1, token, 1).copy_(mul(x.narrow(1, token, 1), 1 + eps));
  const Tensor pe = nn::add_positions(*m.src_pos, x, 0);
  nn::Encoded enc{m.encoder->forward(pe, nn::padding_mask(s.src, m.config().pad_id)), nn::padding_mask(s.src, m.config().pad_id)};
  const Tensor logp = log_softmax(m.decode(s.tgt_in, enc), 2);
  return logp.at({0, t, s.tgt_out.at({0, t})});
}

}  // namespace

TEST_CASE("attribution: gradient x input is the derivative along each token's own embedding", "[attribution][grad]") {
  Small s;
  const train::Attribution a = train::attribute(*s.model, s.src, s.tgt_in, s.tgt_out, 8);
  // sum_d g_s,d x_s,d = d/de f_t(x with x_s -> (1 + e) x_s) at e = 0; central differences, float64
  constexpr double kEps = 1e-6;
  for (std::int64_t t = 0; t < 5; ++t)
    for (std::int64_t tok = 0; tok < 5; ++tok) {
      const double fd = (f_scaled(*s.model, s, t, tok, kEps) - f_scaled(*s.model, s, t, tok, -kEps)) / (2 * kEps);
      INFO("t " << t << ", source token " << tok);
      CHECK(a.gradient_input[t][tok] == Approx(fd).margin(1e-7));
    }
}

TEST_CASE("attribution: integrated gradients add up to f(x) - f(baseline)", "[attribution]") {
  Small s;
  const train::Attribution a = train::attribute(*s.model, s.src, s.tgt_in, s.tgt_out, 64);
  for (std::size_t t = 0; t < a.integrated.size(); ++t) {
    double sum = 0;
    for (double v : a.integrated[t]) sum += v;
    INFO("t " << t << ": sum " << sum << ", gap " << a.integrated_gap[t]);
    // the midpoint rule's error with 64 points on a smooth path: about f''/(24 * 64^2), far below
    // 1% of the gap (a ReLU network has kinks on the path and converges only as 1/steps)
    CHECK(std::abs(sum - a.integrated_gap[t]) <= 0.01 * std::abs(a.integrated_gap[t]) + 1e-9);
  }
}

TEST_CASE("attribution: attention and rollout rows are distributions, ablation restores the weights", "[attribution][attention]") {
  Small s;
  const Tensor before = s.model->decoder->layers->operator[](0).cross_attn->out_proj->weight.clone();
  const train::Attribution a = train::attribute(*s.model, s.src, s.tgt_in, s.tgt_out, 4);
  REQUIRE(a.attention.size() == 2);
  REQUIRE(a.attention[0].size() == 4);
  for (const auto* m : {&a.rollout, &a.attention_mean, &a.attention[1][3]})
    for (const auto& row : *m) {
      double sum = 0;
      for (double v : row) {
        CHECK(v >= 0);
        sum += v;
      }
      CHECK(sum == Approx(1.0).margin(1e-12));
    }
  const Tensor after = s.model->decoder->layers->operator[](0).cross_attn->out_proj->weight;
  CHECK(after.to_vector<double>() == before.to_vector<double>());
  const train::Attribution again = train::attribute(*s.model, s.src, s.tgt_in, s.tgt_out, 4);
  CHECK(again.log_prob == a.log_prob);  // nothing left changed
  double largest = 0;
  for (const auto& layer : a.ablation)
    for (const auto& head : layer)
      for (double d : head) largest = std::max(largest, std::abs(d));
  CHECK(largest > 1e-6);  // zeroing a head changes the output
  CHECK_THROWS_WITH(train::attribute(*s.model, s.src, s.tgt_in, s.tgt_out.narrow(1, 0, 4)), Catch::Contains("expected one sentence pair"));
}
