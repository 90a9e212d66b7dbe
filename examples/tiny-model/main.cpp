// A tiny model from nn modules, trained to reverse short sequences of digits.
//
// Letters: B batch, T sequence length, D model width, H heads, V vocabulary (the digits 0..V-1).
//
// The task: src = 3 1 4 1 5 9 -> target = 9 5 1 4 1 3. Output position t must copy input
// position T-1-t, so the model has to find a token by where it sits, not by what it is: one
// self-attention layer can learn exactly that lookup from the positions' codes. The choices:
//   Embedding + SinusoidalPositional  what a token is and where it sits, added: (B,T,D)
//   MultiHeadAttention                every position looks at every position (no mask), residual
//   LayerNorm + Linear                back to V scores per position: (B,T,V)
// Trained with Adam, a cosine learning-rate schedule with warmup, and gradient clipping; the
// batches are drawn fresh every step, so the model never sees the same one twice.
#include <cstdint>
#include <iostream>
#include <memory>
#include <utility>
#include <vector>

#include "autograd/generator.h"
#include "autograd/node.h"  // NoGradGuard
#include "autograd/ops.h"
#include "nn/attention.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/norm.h"
#include "nn/positional.h"
#include "train/optim/optim.h"
#include "train/optim/schedule.h"

using namespace sf;

constexpr std::int64_t kVocab = 10, kLength = 6, kWidth = 32, kHeads = 2;  // V, T, D, H
constexpr std::int64_t kBatch = 32, kSteps = 300, kLogEvery = 25;

class ReverseModel : public nn::Module {
 public:
  ReverseModel(Generator& init_gen, Generator& dropout_gen) {
    embed = register_module("embed", std::make_shared<nn::Embedding>(kVocab, kWidth, init_gen));
    pos = register_module("pos", std::make_shared<nn::SinusoidalPositional>(kLength, kWidth));
    attn = register_module("attn", std::make_shared<nn::MultiHeadAttention>(kWidth, kHeads, kHeads, /*dropout=*/0.0,
                                   nn::PositionInAttention::None, init_gen, dropout_gen));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(kWidth));
    out = register_module("out", std::make_shared<nn::Linear>(kWidth, kVocab, init_gen));
  }
  const char* type_name() const override { return "ReverseModel"; }

  // ids: (B,T) int64 -> logits (B,T,V)
  Tensor forward(const Tensor& ids) const {
    Tensor h = pos->forward(embed->forward(ids));        // (B,T,D)
    h = h + attn->forward(h, h, /*mask=*/Tensor());      // (B,T,D): self-attention, residual
    return run_forward_hooks(out->forward(norm->forward(h)));  // (B,T,V)
  }

  std::shared_ptr<nn::Embedding> embed;
  std::shared_ptr<nn::SinusoidalPositional> pos;
  std::shared_ptr<nn::MultiHeadAttention> attn;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Linear> out;
};

// -> {src (B,T), tgt (B,T)}, int64: random digits and the same rows reversed
std::pair<Tensor, Tensor> make_batch(Generator& gen) {
  std::vector<std::int64_t> src(kBatch * kLength), tgt(kBatch * kLength);
  for (std::int64_t b = 0; b < kBatch; ++b)
    for (std::int64_t t = 0; t < kLength; ++t) {
      src[b * kLength + t] = static_cast<std::int64_t>(gen.randint(kVocab));
      tgt[b * kLength + (kLength - 1 - t)] = src[b * kLength + t];
    }
  return {from_vector(src, {kBatch, kLength}), from_vector(tgt, {kBatch, kLength})};
}

// logits: (B,T,V) -> the highest-scoring digit at each position of row 0, (T)
std::vector<std::int64_t> argmax_first_row(const Tensor& logits) {
  const std::vector<float> scores = logits.narrow(0, 0, 1).to_vector<float>();  // (1,T,V) row-major
  std::vector<std::int64_t> best(kLength, 0);
  for (std::int64_t t = 0; t < kLength; ++t)
    for (std::int64_t v = 1; v < kVocab; ++v)
      if (scores[t * kVocab + v] > scores[t * kVocab + best[t]]) best[t] = v;
  return best;
}

// "label: 3 1 4 1 5 9"
void print_digits(const char* label, const std::vector<std::int64_t>& digits) {
  std::cout << label << ":";
  for (std::int64_t d : digits) std::cout << " " << d;
  std::cout << "\n";
}

int main() {
  Generator init_gen(1), dropout_gen(2), data_gen(3);
  ReverseModel model(init_gen, dropout_gen);
  train::Adam optimizer(model.named_parameters());
  const train::Schedule schedule{.kind = train::ScheduleKind::Cosine, .lr = 1e-2, .min_lr = 1e-4,
                                 .warmup = 20, .max_steps = kSteps};
  std::cout << "ReverseModel: " << model.parameter_count() << " parameters\n";

  double first_loss = 0, last_loss = 0;
  for (std::int64_t step = 1; step <= kSteps; ++step) {
    const auto [src, tgt] = make_batch(data_gen);
    Tensor logits = model.forward(src);                                            // (B,T,V)
    Tensor loss = cross_entropy(logits.reshape({-1, kVocab}), tgt.reshape({-1}));  // mean over B*T
    optimizer.zero_grad();
    loss.backward();
    train::clip_grad_norm(optimizer.params(), /*max_norm=*/1.0);
    optimizer.step(schedule.at(step));

    last_loss = loss.item();
    if (step == 1) first_loss = last_loss;
    if (step == 1 || step % kLogEvery == 0)
      std::cout << "step " << step << "  loss " << last_loss << "  lr " << schedule.at(step) << "\n";
  }

  const auto [src, tgt] = make_batch(data_gen);  // a batch the model has not seen
  NoGradGuard no_grad;
  model.eval();
  print_digits("source    ", src.narrow(0, 0, 1).to_vector<std::int64_t>());
  print_digits("target    ", tgt.narrow(0, 0, 1).to_vector<std::int64_t>());
  print_digits("prediction", argmax_first_row(model.forward(src)));

  const bool learned = last_loss < first_loss / 4;  // guessing uniformly would give ln V = 2.3
  std::cout << "loss " << first_loss << " -> " << last_loss << (learned ? ": learned\n" : ": did not learn\n");
  return learned ? 0 : 1;
}
