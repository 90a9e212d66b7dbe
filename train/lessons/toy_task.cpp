// The toy copy/reverse task the training demos share (toy_task.h).
#include "train/lessons/toy_task.h"

#include <algorithm>
#include <stdexcept>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "data/tokenizer.h"
#include "train/eval/decode.h"
#include "train/optim/optim.h"

namespace sf::lessons {

namespace {

// Pads the strings into src (B,S), tgt_in (B,S+1), tgt_out (B,S+1).
ToyBatch make_batch(const ToyTask& task, std::vector<std::vector<std::int64_t>> strings) {
  const auto B = static_cast<std::int64_t>(strings.size());
  std::int64_t S = 0;
  for (const auto& s : strings) S = std::max<std::int64_t>(S, static_cast<std::int64_t>(s.size()));
  std::vector<std::int64_t> src(B * S, data::kPadId), in(B * (S + 1), data::kPadId), out(B * (S + 1), data::kPadId);
  for (std::int64_t b = 0; b < B; ++b) {
    const std::vector<std::int64_t> answer = toy_answer(task, strings[b]);
    const auto n = static_cast<std::int64_t>(answer.size());
    in[b * (S + 1)] = data::kBosId;
    for (std::int64_t i = 0; i < n; ++i) {
      src[b * S + i] = strings[b][i];
      in[b * (S + 1) + i + 1] = answer[i];  // teacher forcing: the gold token before position i + 1
      out[b * (S + 1) + i] = answer[i];
    }
    out[b * (S + 1) + n] = data::kEosId;
  }
  ToyBatch batch;
  batch.src = from_vector(src, {B, S});
  batch.tgt_in = from_vector(in, {B, S + 1});
  batch.tgt_out = from_vector(out, {B, S + 1});
  batch.strings = std::move(strings);
  return batch;
}

std::vector<std::int64_t> random_string(const ToyTask& task, std::int64_t length, Generator& gen) {
  std::vector<std::int64_t> s(static_cast<std::size_t>(length));
  for (auto& id : s) id = 4 + static_cast<std::int64_t>(gen.uniform() * static_cast<double>(task.symbols)) % task.symbols;
  return s;
}

}  // namespace

ToyBatch toy_batch(const ToyTask& task, std::int64_t batch, Generator& gen) {
  std::vector<std::vector<std::int64_t>> strings;
  const std::int64_t span = task.max_len - task.min_len + 1;
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t length = task.min_len + static_cast<std::int64_t>(gen.uniform() * static_cast<double>(span)) % span;
    strings.push_back(random_string(task, length, gen));
  }
  return make_batch(task, std::move(strings));
}

ToyBatch toy_batch_of_length(const ToyTask& task, std::int64_t batch, std::int64_t length, Generator& gen) {
  std::vector<std::vector<std::int64_t>> strings;
  for (std::int64_t b = 0; b < batch; ++b) strings.push_back(random_string(task, length, gen));
  return make_batch(task, std::move(strings));
}

std::vector<std::int64_t> toy_answer(const ToyTask& task, const std::vector<std::int64_t>& string) {
  std::vector<std::int64_t> answer = string;
  if (task.reverse) std::reverse(answer.begin(), answer.end());
  return answer;
}

nn::ModelConfig toy_rnn_config(const ToyTask& task, std::int64_t d_model, nn::RnnAttention attention) {
  nn::ModelConfig c;
  c.arch = nn::Arch::Rnn;
  c.src_vocab = c.tgt_vocab = task.vocab();
  c.d_model = d_model;
  c.encoder_layers = c.decoder_layers = 1;
  c.dropout = 0;
  c.max_len = 2 * task.max_len + 16;  // room for decoding's 1.5 S + 10
  c.rnn_cell = nn::CellKind::lstm;
  c.rnn_attention = attention;
  return c;
}

nn::ModelConfig toy_transformer_config(const ToyTask& task, std::int64_t d_model) {
  nn::ModelConfig c;
  c.arch = nn::Arch::EncoderDecoder;
  c.src_vocab = c.tgt_vocab = task.vocab();
  c.d_model = d_model;
  c.n_heads = 4;
  c.d_ff = 2 * d_model;
  c.encoder_layers = c.decoder_layers = 1;
  c.dropout = 0;
  c.norm_position = nn::NormPosition::Pre;
  c.positional = nn::PositionalKind::Sinusoidal;
  c.max_len = 2 * task.max_len + 16;
  return c;
}

double train_on_toy(nn::Model& model, const ToyTask& task, std::int64_t steps, std::int64_t batch, double lr,
                    Generator& gen) {
  model.train();
  train::Adam adam(model.named_parameters(), 0.9, 0.98, 1e-9);
  std::vector<double> last;
  for (std::int64_t step = 0; step < steps; ++step) {
    const ToyBatch b = toy_batch(task, batch, gen);
    const Tensor logits = model.forward(b.src, b.tgt_in);  // (B,T,V)
    const std::int64_t V = logits.size(2);
    const Tensor loss = cross_entropy(reshape(logits, {-1, V}), reshape(b.tgt_out, {-1}), data::kPadId);
    loss.backward();
    train::clip_grad_norm(model.named_parameters(), 1.0);
    adam.step(lr);
    adam.zero_grad();
    last.push_back(loss.item());
    if (last.size() > 10) last.erase(last.begin());
  }
  model.eval();
  double sum = 0;
  for (double l : last) sum += l;
  return last.empty() ? 0 : sum / static_cast<double>(last.size());
}

double toy_accuracy(const nn::Model& model, const ToyTask& task, std::int64_t length, std::int64_t n, Generator& gen) {
  const NoGradGuard no_grad;
  const ToyBatch b = toy_batch_of_length(task, n, length, gen);
  const std::vector<std::vector<std::int64_t>> out = train::greedy_decode(model, b.src, train::DecodeOptions{});
  std::int64_t right = 0, total = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::vector<std::int64_t> answer = toy_answer(task, b.strings[i]);
    for (std::size_t t = 0; t < answer.size(); ++t) right += (t < out[i].size() && out[i][t] == answer[t]) ? 1 : 0;
    total += static_cast<std::int64_t>(answer.size());
  }
  return total ? static_cast<double>(right) / static_cast<double>(total) : 0;
}

}  // namespace sf::lessons
