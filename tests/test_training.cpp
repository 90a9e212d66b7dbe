// Training end to end (train/trainer.h, train/checkpoint/checkpoint.h, train/optim/optim.h, the scratchformer CLI):
//   a toy task (reverse a word sequence) learned to 100% exact-match greedy decoding on held-out
//   sequences within a fixed number of steps; overfitting one batch drives the label-smoothed
//   loss down to its floor, the entropy of the smoothed target distribution; teacher forcing
//   through the model (position t sees BOS + y[0..t-1] and is scored against y[t] / EOS) and the
//   label-smoothed loss of a hand-made batch against a plain loop, padding contributing nothing;
//   checkpoint round trip (weights, Adam state, dropout RNG) continuing bit for bit; resume
//   (train() 2N steps straight equals N steps, stop, resume, N more, bit for bit in one thread);
//   the command line: one-line errors with exit status 2 and --help of every subcommand.
//
// Letters: B batch, S source length, T target length (+1 for BOS/EOS), D d_model, V vocabulary.
#include <stdlib.h>  // mkdtemp
#include <sys/wait.h>  // WIFEXITED, WEXITSTATUS

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <numbers>
#include <set>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "autograd/runtime/threads.h"
#include "data/batcher.h"
#include "data/tokenizer.h"
#include "nn/seq2seq.h"
#include "run_util.h"
#include "test_util.h"
#include "train/checkpoint/checkpoint.h"
#include "train/config.h"
#include "train/eval/decode.h"
#include "train/optim/optim.h"
#include "train/checkpoint/safetensors.h"
#include "train/trainer.h"

using namespace sf;
using Catch::Contains;
using Seq = std::vector<std::int64_t>;

namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kPad = data::kPadId, kBos = data::kBosId, kEos = data::kEosId;

// ---- the toy task: reverse a sequence of words ----------------------------------------------
// Words are the ids 4 .. 4 + kWords - 1 (after <pad> <unk> <s> </s>); a sequence has kMinLen to
// kMaxLen words; the target is the source reversed.
constexpr std::int64_t kWords = 8;
constexpr std::int64_t kVocab = 4 + kWords;
constexpr std::int64_t kMinLen = 3, kMaxLen = 6;

Seq random_sequence(Generator& gen) {
  const auto len = kMinLen + static_cast<std::int64_t>(gen.randint(kMaxLen - kMinLen + 1));
  Seq s(static_cast<std::size_t>(len));
  for (auto& w : s) w = 4 + static_cast<std::int64_t>(gen.randint(kWords));
  return s;
}

Seq reversed(Seq s) {
  std::reverse(s.begin(), s.end());
  return s;
}

// A teacher-forcing batch (data/batcher.h) of the pairs (xs[i], ys[i]).
data::Batch pair_batch(const std::vector<Seq>& xs, const std::vector<Seq>& ys) {
  std::vector<const Seq*> src, tgt;
  std::vector<std::int64_t> indices;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    src.push_back(&xs[i]);
    tgt.push_back(&ys[i]);
    indices.push_back(static_cast<std::int64_t>(i));
  }
  return data::make_batch(src, tgt, indices);
}

data::Batch reverse_batch(const std::vector<Seq>& xs) {
  std::vector<Seq> ys;
  for (const Seq& x : xs) ys.push_back(reversed(x));
  return pair_batch(xs, ys);
}

// logits (B,T,V), tgt_out (B,T) -> the mean label-smoothed cross-entropy over non-pad targets,
// exactly as the training loop computes it.
Tensor batch_loss(const Tensor& logits, const Tensor& tgt_out, double smoothing) {
  const std::int64_t V = logits.size(-1);
  return cross_entropy(logits.reshape({-1, V}), tgt_out.reshape({-1}), kPad, smoothing);
}

// The toy model: D 32, H 4, F 64, two encoder and two decoder layers, shared and tied
// embeddings (as configs/reverse.toml), no dropout.
nn::ModelConfig toy_config() {
  nn::ModelConfig c;
  c.src_vocab = kVocab;
  c.tgt_vocab = kVocab;
  c.d_model = 32;
  c.n_heads = 4;
  c.d_ff = 64;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.dropout = 0.0;
  c.share_embeddings = true;
  c.tie_output = true;
  c.max_len = 16;
  c.pad_id = kPad;
  return c;
}

// Number of held-out sequences whose greedy decoding is exactly their reverse.
int exact_matches(const nn::Seq2SeqTransformer& model, const std::vector<Seq>& held_out) {
  const auto out = train::greedy_decode(model, train::pad_batch(held_out, kPad), {});
  int ok = 0;
  for (std::size_t i = 0; i < held_out.size(); ++i) ok += out[i] == reversed(held_out[i]);
  return ok;
}

// Runs the kernels and BLAS on one thread while alive (bit-exact comparisons), then restores.
struct OneThread {
  int before = num_threads();
  OneThread() { set_num_threads(1); }
  ~OneThread() { set_num_threads(before); }
};

// True when the two tensors have the same shape, dtype and bytes.
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), static_cast<std::size_t>(ca.numel()) * dtype_size(ca.dtype())) == 0;
}

// TempDir, read_file, first_lines, kReverseConfig, kReverseData, small_reverse_run, run_cli and
// check_one_line_error: tests/test_util.h and tests/run_util.h
using namespace sf::test;

}  // namespace

// ---- the toy task --------------------------------------------------------------------------

TEST_CASE("the reverse task reaches 100 percent exact match on held-out sequences", "[training][decode]") {
  // 400 Adam steps of 32 random sequences, learning rate 5e-3 with a 20-step warm-up and a
  // cosine decay to 0. With these seeds 64/64 is reached by step 250; with six other seed
  // triples (s, s+1, s+2 for s = 1..6) by step 350 at the latest, so 400 has room.
  constexpr int kSteps = 400, kBatch = 32, kWarmup = 20;
  constexpr double kPeakLr = 5e-3;
  OneThread one_thread;  // the fastest for a model this small (no threading overhead)
  Generator data_gen(11), held_gen(12), init_gen(13);
  // 64 held-out sequences, never trained on
  std::set<Seq> held_set;
  while (held_set.size() < 64) held_set.insert(random_sequence(held_gen));
  const std::vector<Seq> held(held_set.begin(), held_set.end());

  nn::Seq2SeqTransformer model(toy_config(), init_gen);
  train::Adam adam(model.named_parameters(), 0.9, 0.98, 1e-9);
  model.eval();
  const int before = exact_matches(model, held);
  model.train();
  double loss_value = 0;
  for (int step = 1; step <= kSteps; ++step) {
    std::vector<Seq> xs;
    while (static_cast<int>(xs.size()) < kBatch) {
      Seq x = random_sequence(data_gen);
      if (!held_set.count(x)) xs.push_back(std::move(x));
    }
    const data::Batch batch = reverse_batch(xs);
    Tensor loss = batch_loss(model.forward(batch.src, batch.tgt_in), batch.tgt_out, 0.0);
    loss.backward();
    loss_value = loss.item();
    train::clip_grad_norm(adam.params(), 1.0);
    const double warmup = std::min(1.0, static_cast<double>(step) / kWarmup);
    adam.step(kPeakLr * warmup * 0.5 * (1 + std::cos(std::numbers::pi * step / kSteps)));
    adam.zero_grad();
  }
  model.eval();
  INFO("final training loss " << loss_value);
  CHECK(before == 0);  // an untrained model gets none right: the check below measures learning
  CHECK(exact_matches(model, held) == static_cast<int>(held.size()));
}

TEST_CASE("overfitting one batch drives the loss to its label smoothing floor", "[training][label_smoothing]") {
  // With label smoothing eps over V classes the target of each position is q = (1 - eps) onehot +
  // eps / V, and the cross-entropy -sum q log p is smallest, equal to the entropy H(q), at p = q:
  //   H(q) = -(1 - eps + eps/V) log(1 - eps + eps/V) - (V - 1) (eps/V) log(eps/V).
  // A model trained on one batch for long enough gets close to it and can never go below it.
  constexpr double kEps = 0.1;
  constexpr int kSteps = 150;
  // Distance from the floor after kSteps: measured 1.1e-4 (5e-4 after 100 steps, 6e-5 after
  // 300). 2e-3 leaves a wide margin and is still far below the gap of a model that has not fit
  // the batch (> 0.1 after fewer than 50 steps).
  constexpr double kNearFloor = 2e-3;
  // The loss is a float32 mean over ~30 positions: it may round ~1e-6 below the exact floor.
  constexpr double kFloat32Rounding = 1e-5;
  OneThread one_thread;
  const double V = static_cast<double>(kVocab);
  const double gold = 1 - kEps + kEps / V, other = kEps / V;
  const double floor = -gold * std::log(gold) - (V - 1) * other * std::log(other);

  Generator gen(21);
  std::vector<Seq> xs;
  for (int i = 0; i < 4; ++i) xs.push_back(random_sequence(gen));
  const data::Batch batch = reverse_batch(xs);
  nn::ModelConfig cfg = toy_config();
  cfg.encoder_layers = cfg.decoder_layers = 1;
  cfg.tie_output = false;  // an output matrix of its own: any distribution over V is reachable
  nn::Seq2SeqTransformer model(cfg, gen);
  train::Adam adam(model.named_parameters(), 0.9, 0.98, 1e-9);
  double loss_value = 0, first = 0;
  for (int step = 1; step <= kSteps; ++step) {
    Tensor loss = batch_loss(model.forward(batch.src, batch.tgt_in), batch.tgt_out, kEps);
    loss.backward();
    loss_value = loss.item();
    if (step == 1) first = loss_value;
    adam.step(1e-2);
    adam.zero_grad();
  }
  INFO("floor " << floor << " first loss " << first << " last loss " << loss_value);
  CHECK(first > floor + 1.0);  // it started far away
  CHECK(loss_value >= floor - kFloat32Rounding);
  CHECK(loss_value - floor < kNearFloor);
}

// ---- teacher forcing and the loss through the model ------------------------------------------

TEST_CASE("teacher forcing scores position t given BOS and y before t against y t or EOS",
          "[training][teacher_forcing][label_smoothing][padding]") {
  // tests/test_batcher.cpp checks the batch itself (tgt_in = BOS + y, tgt_out = y + EOS, masks);
  // tests/test_loss.cpp checks cross_entropy on given logits. This checks the two together
  // through the model: the logits the batch gives at (b, t) are those of the model run on row b
  // alone (unpadded source) with the decoder input BOS y_0 .. y_{t-1} and nothing after it, and
  // the label-smoothed loss of the batch is the plain-loop mean over every real target position
  // of -sum_v q_v log softmax(those logits)_v, q = (1 - eps) onehot(y_t or EOS) + eps / V.
  // Padded positions contribute nothing: not to the sum, not to the count, and their logits get
  // a zero gradient.
  //
  // float64 model: the batch and the one-row runs differ only by masked (exactly zero-weight)
  // keys and summation order, ~1e-16 per op; 1e-12 has room for that and still catches a
  // position that sees one token too many (which moves logits by ~1e-1).
  constexpr double kInvarianceTol = 1e-12;
  // float64 loss from the same logits summed in another order.
  constexpr double kLossTol = 1e-12;
  nn::ModelConfig cfg = toy_config();
  cfg.encoder_layers = cfg.decoder_layers = 1;
  Generator gen(41);
  nn::Seq2SeqTransformer model(cfg, gen, Dtype::Float64);
  model.eval();

  // Two pairs: (5 6 7 -> 9 10) and (8 -> 11 4 6): S = 3, T = 4; row 0 has one padded position.
  const std::vector<Seq> xs = {{5, 6, 7}, {8}}, ys = {{9, 10}, {11, 4, 6}};
  const data::Batch batch = pair_batch(xs, ys);
  REQUIRE(batch.tgt_in.shape() == Shape{2, 4});
  REQUIRE(batch.tgt_tokens == 3 + 4);

  for (double eps : {0.0, 0.1}) {
    INFO("label smoothing " << eps);
    Tensor logits = model.forward(batch.src, batch.tgt_in);  // (2,4,V)
    logits.retain_grad();
    Tensor loss = batch_loss(logits, batch.tgt_out, eps);

    double total = 0;
    std::int64_t count = 0;
    for (std::size_t b = 0; b < xs.size(); ++b) {
      const auto n = static_cast<std::int64_t>(ys[b].size());
      for (std::int64_t t = 0; t <= n; ++t) {
        INFO("row " << b << " position " << t);
        Seq prefix = {kBos};  // what position t may see: BOS y_0 .. y_{t-1}
        prefix.insert(prefix.end(), ys[b].begin(), ys[b].begin() + t);
        const std::int64_t target = t < n ? ys[b][t] : kEos;
        CHECK(batch.tgt_in.at({static_cast<std::int64_t>(b), t}) == prefix.back());
        CHECK(batch.tgt_out.at({static_cast<std::int64_t>(b), t}) == target);
        NoGradGuard no_grad;
        const Tensor alone = model.forward(train::pad_batch({xs[b]}, kPad),
                                           from_vector<std::int64_t>(prefix, {1, t + 1}));  // (1,t+1,V)
        const Tensor expected = alone.narrow(1, t, 1).reshape({kVocab});
        const Tensor got = logits.detach().narrow(0, static_cast<std::int64_t>(b), 1).narrow(1, t, 1).reshape({kVocab});
        CHECK(sf::test::max_abs_diff(got, expected) <= kInvarianceTol);
        // -sum_v q_v log p_v by hand
        const auto z = expected.to_vector<double>();
        double lse = 0;
        for (double v : z) lse += std::exp(v);
        lse = std::log(lse);
        for (std::int64_t v = 0; v < kVocab; ++v) {
          const double q = (v == target ? 1 - eps : 0.0) + eps / static_cast<double>(kVocab);
          total -= q * (z[v] - lse);
        }
        ++count;
      }
    }
    CHECK(count == batch.tgt_tokens);
    CHECK(std::abs(loss.item() - total / static_cast<double>(count)) <= kLossTol);

    loss.backward();
    const Tensor grad = logits.grad();  // (2,4,V)
    for (std::int64_t v = 0; v < kVocab; ++v) CHECK(grad.at({0, 3, v}) == 0.0);  // the padded position
    double real = 0;
    for (std::int64_t v = 0; v < kVocab; ++v) real += std::abs(grad.at({0, 2, v}));
    CHECK(real > 0);
    model.zero_grad();
  }
}

// ---- checkpoints and resume -----------------------------------------------------------------

namespace {

// One training step as the loop does it: forward, loss, backward, clip, Adam, zero_grad.
void train_step(const nn::Seq2SeqTransformer& model, train::Adam& adam, const data::Batch& batch) {
  Tensor loss = batch_loss(model.forward(batch.src, batch.tgt_in), batch.tgt_out, 0.1);
  loss.backward();
  train::clip_grad_norm(adam.params(), 1.0);
  adam.step(1e-3);
  adam.zero_grad();
}

// Names of the tensors (parameters or optimizer state) whose bits differ between a and b, or
// that only one of them has.
std::vector<std::string> differing(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
  std::vector<std::string> out;
  for (const auto& [name, t] : a)
    if (!b.count(name) || !same_bits(t, b.at(name))) out.push_back(name);
  for (const auto& [name, t] : b)
    if (!a.count(name)) out.push_back(name);
  return out;
}

}  // namespace

TEST_CASE("checkpoint round trip restores weights optimizer and RNG and training continues bit for bit",
          "[training][checkpoint][resume]") {
  OneThread one_thread;  // bit-exact: the same summation order in both runs
  TempDir tmp;
  nn::ModelConfig cfg = toy_config();
  cfg.encoder_layers = cfg.decoder_layers = 1;
  cfg.dropout = 0.1;  // dropout on, so the restored RNG state decides the masks
  cfg.attention_dropout = 0.1;
  Generator data_gen(31);
  std::vector<data::Batch> batches;
  for (int i = 0; i < 6; ++i) {
    std::vector<Seq> xs;
    for (int j = 0; j < 8; ++j) xs.push_back(random_sequence(data_gen));
    batches.push_back(reverse_batch(xs));
  }

  Generator init_a(32);
  nn::Seq2SeqTransformer a(cfg, init_a);
  train::Adam adam_a(a.named_parameters(), 0.9, 0.98, 1e-9);
  a.train();
  for (int i = 0; i < 3; ++i) train_step(a, adam_a, batches[i]);

  train::TrainingState st;
  st.step = 3;
  st.epoch = 2;
  st.batch_in_epoch = 5;
  st.best_metric = 12.5;
  st.has_best = true;
  st.bad_validations = 1;
  st.nonfinite_streak = 0;
  st.tokens_seen = 1234;
  st.elapsed_seconds = 1.25;
  st.dropout_rng = a.dropout_generator().state();
  const std::string path = tmp / "checkpoint.safetensors";
  train::save_checkpoint(path, a, &adam_a, st, "# config\n", kVocab, kVocab);

  const train::LoadedCheckpoint ck = train::load_checkpoint(path);
  CHECK(differing(a.state_dict(), ck.model).empty());
  CHECK(differing(adam_a.state(), ck.optimizer).empty());
  CHECK(ck.optimizer_steps == 3);
  CHECK(ck.state.step == 3);
  CHECK(ck.state.epoch == 2);
  CHECK(ck.state.batch_in_epoch == 5);
  CHECK(ck.state.best_metric == 12.5);
  CHECK(ck.state.has_best);
  CHECK(ck.state.bad_validations == 1);
  CHECK(ck.state.tokens_seen == 1234);
  CHECK(ck.state.elapsed_seconds == 1.25);
  CHECK(ck.state.dropout_rng == st.dropout_rng);
  CHECK(ck.config_toml == "# config\n");
  CHECK(ck.src_vocab == kVocab);
  CHECK(ck.tgt_vocab == kVocab);

  // A model built from another seed, restored from the checkpoint, continues exactly as `a`.
  // A third one restored without the dropout RNG state shows that the RNG matters.
  Generator init_b(99), init_c(98);
  nn::Seq2SeqTransformer b(cfg, init_b), c(cfg, init_c);
  CHECK_FALSE(differing(a.state_dict(), b.state_dict()).empty());
  train::Adam adam_b(b.named_parameters(), 0.9, 0.98, 1e-9), adam_c(c.named_parameters(), 0.9, 0.98, 1e-9);
  for (auto [model, adam] : {std::pair{&b, &adam_b}, std::pair{&c, &adam_c}}) {
    model->load_state_dict(ck.model);
    adam->load_state(ck.optimizer);
    adam->set_steps(ck.optimizer_steps);
    model->train();
  }
  b.dropout_generator().set_state(ck.state.dropout_rng);
  for (int i = 3; i < 6; ++i) {
    train_step(a, adam_a, batches[i]);
    train_step(b, adam_b, batches[i]);
    train_step(c, adam_c, batches[i]);
  }
  CHECK(differing(a.state_dict(), b.state_dict()).empty());
  CHECK(differing(adam_a.state(), adam_b.state()).empty());
  CHECK(a.dropout_generator().state() == b.dropout_generator().state());
  CHECK(adam_a.steps() == adam_b.steps());
  CHECK_FALSE(differing(a.state_dict(), c.state_dict()).empty());
}

namespace {

// The small reverse run of tests/run_util.h (300 training pairs, D 32, one layer each, dropout
// 0.1, 256-token batches, one thread, no test set), with attention dropout on as well, so a
// resumed run must restore the RNG. `extra` overrides come last.
std::vector<std::string> small_run(const TempDir& tmp, const std::string& run_dir, const std::vector<std::string>& extra) {
  std::vector<std::string> o = {"model.attention_dropout=0.1"};
  o.insert(o.end(), extra.begin(), extra.end());
  return small_reverse_run(tmp, run_dir, o);
}

void run_training(const std::vector<std::string>& overrides, bool resume) {
  const train::Config cfg = train::load_config(kReverseConfig, overrides);
  REQUIRE(train::train(cfg, train::TrainOptions{resume}) == 0);
}

// The metadata a resumed run must reproduce exactly (not config, which holds the changed
// max_steps, nor elapsed_seconds, a wall time).
const std::vector<std::string> kExactMetadata = {
    "step",          "epoch",    "batch_in_epoch",   "optimizer_steps", "dropout_rng", "best_metric",
    "has_best",      "bad_validations", "nonfinite_streak", "tokens_seen", "src_vocab", "tgt_vocab",
    train::kChecksumKey};

// checkpoint-last of two runs: every tensor bit for bit, and kExactMetadata.
void require_same_checkpoint(const std::string& straight_path, const std::string& resumed_path) {
  const train::SafetensorsFile straight = train::load_safetensors(straight_path);
  const train::SafetensorsFile resumed = train::load_safetensors(resumed_path);
  REQUIRE(straight.order == resumed.order);
  std::vector<std::string> differ;
  for (const auto& name : straight.order)
    if (!same_bits(straight.tensors.at(name), resumed.tensors.at(name))) differ.push_back(name);
  INFO("tensors that differ: " << differ.size() << (differ.empty() ? "" : ", the first " + differ[0]));
  CHECK(differ.empty());
  for (const auto& key : kExactMetadata) {
    INFO("metadata " << key);
    REQUIRE(straight.metadata.count(key) == 1);
    REQUIRE(resumed.metadata.count(key) == 1);
    CHECK(straight.metadata.at(key) == resumed.metadata.at(key));
  }
}

}  // namespace

TEST_CASE("train 2N steps straight equals N steps then resume for N more bit for bit",
          "[training][resume][checkpoint]") {
  // N = 7: the stop falls in the middle of the first epoch (11 batches) and the resumed half
  // crosses into the second. valid_every = N, so checkpoint-last is written at N and at 2N (and
  // both runs validate at the same steps). The schedule is "constant" with a 3-step warm-up: a
  // cosine schedule depends on max_steps, which this protocol changes from N to 2N between the
  // halves (see the next test for cosine).
  constexpr std::int64_t N = 7;
  OneThread one_thread;
  TempDir tmp;
  const std::string straight = tmp / "straight", split = tmp / "split";
  const std::vector<std::string> common = {"train.schedule=constant", "train.warmup_steps=3",
                                           "train.valid_every=" + std::to_string(N)};
  auto with = [&](std::vector<std::string> a, const std::string& b) {
    a.push_back(b);
    return a;
  };
  run_training(small_run(tmp, straight, with(common, "train.max_steps=" + std::to_string(2 * N))), false);
  run_training(small_run(tmp, split, with(common, "train.max_steps=" + std::to_string(N))), false);
  const std::string last = "/checkpoint-last.safetensors";
  fs::copy_file(split + last, tmp / "half.safetensors");
  run_training(small_run(tmp, split, with(common, "train.max_steps=" + std::to_string(2 * N))), true);

  require_same_checkpoint(straight + last, split + last);
  // what was compared is what the protocol says: the stop was mid-epoch, the end is in epoch 1,
  // and the second half changed the weights and drew dropout masks
  const train::LoadedCheckpoint half = train::load_checkpoint(tmp / "half.safetensors");
  const train::LoadedCheckpoint end = train::load_checkpoint(straight + last);
  CHECK(half.state.step == N);
  CHECK(half.state.epoch == 0);
  CHECK(half.state.batch_in_epoch == N);
  CHECK(end.state.step == 2 * N);
  CHECK(end.state.epoch == 1);
  CHECK(half.state.dropout_rng != end.state.dropout_rng);
  CHECK_FALSE(differing(half.model, end.model).empty());
}

TEST_CASE("a run stopped at an epoch end resumes bit for bit under the cosine schedule",
          "[training][resume][checkpoint]") {
  // configs/reverse.toml's cosine schedule with max_steps 22 in every run. The first half stops
  // by train.max_epochs = 1 after the 11 batches of epoch 0, its checkpoint at the very end of
  // the epoch (batch_in_epoch = batches per epoch); the resumed run (max_epochs back to 0)
  // continues to 22 steps and must equal the straight run.
  constexpr std::int64_t kEpochBatches = 11, kSteps = 2 * kEpochBatches;
  OneThread one_thread;
  TempDir tmp;
  const std::string straight = tmp / "straight", split = tmp / "split";
  const std::vector<std::string> common = {"train.schedule=cosine", "train.warmup_steps=4",
                                           "train.max_steps=" + std::to_string(kSteps),
                                           "train.valid_every=" + std::to_string(kEpochBatches)};
  auto with = [&](std::vector<std::string> a, const std::string& b) {
    a.push_back(b);
    return a;
  };
  run_training(small_run(tmp, straight, common), false);
  run_training(small_run(tmp, split, with(common, "train.max_epochs=1")), false);
  const std::string last = "/checkpoint-last.safetensors";
  const train::LoadedCheckpoint half = train::load_checkpoint(split + last);
  REQUIRE(half.state.step == kEpochBatches);  // the corpus and budget give 11 batches per epoch
  CHECK(half.state.epoch == 0);
  CHECK(half.state.batch_in_epoch == kEpochBatches);
  run_training(small_run(tmp, split, with(common, "train.max_epochs=0")), true);
  require_same_checkpoint(straight + last, split + last);
}

// ---- the command line ---------------------------------------------------------------------

namespace {

// A config's required keys, with the real reverse corpus and a run directory in `tmp`.
std::string required_keys(const TempDir& tmp) {
  return "[data]\ntrain_src = \"" + kReverseData + "train.src\"\ntrain_tgt = \"" + kReverseData +
         "train.tgt\"\nvalid_src = \"" + kReverseData + "valid.src\"\nvalid_tgt = \"" + kReverseData +
         "valid.tgt\"\n\n[run]\ndir = \"" + tmp / "run" + "\"\n";
}

}  // namespace

TEST_CASE("config errors exit with status 2 and one line naming the file and key", "[training][cli][errors]") {
  TempDir tmp;
  SECTION("unknown key") {
    const std::string path = tmp.write("bad.toml", "[model]\nd_modle = 32\n\n" + required_keys(tmp));
    check_one_line_error(run_cli("train --config " + quoted(path), tmp),
                         {path + ":2:", "unknown key model.d_modle", "did you mean model.d_model?"});
  }
  SECTION("wrong type") {
    const std::string path = tmp.write("bad.toml", "[model]\nd_model = \"big\"\n\n" + required_keys(tmp));
    check_one_line_error(run_cli("train --config " + quoted(path), tmp),
                         {path + ":2:", "model.d_model", "expected an integer"});
  }
  SECTION("d_model not divisible by n_heads") {
    const std::string path = tmp.write("bad.toml", "[model]\nd_model = 30\nn_heads = 4\n\n" + required_keys(tmp));
    check_one_line_error(run_cli("train --config " + quoted(path), tmp),
                         {path, "model.n_heads", "d_model 30 is not divisible by n_heads 4"});
  }
  SECTION("unknown key in a set override") {
    const std::string path = tmp.write("good.toml", required_keys(tmp));
    check_one_line_error(run_cli("train --config " + quoted(path) + " --set model.d_modle=3", tmp),
                         {path, "--set model.d_modle=3", "unknown key model.d_modle"});
  }
  SECTION("missing config file") {
    check_one_line_error(run_cli("train --config " + quoted(tmp / "none.toml"), tmp), {tmp / "none.toml"});
  }
  // nothing was started: a bad config creates no run directory
  CHECK_FALSE(fs::exists(tmp / "run"));
}

TEST_CASE("a corpus with unequal line counts exits with status 2 and one line naming both files",
          "[training][cli][errors]") {
  TempDir tmp;
  tmp.write("train.src", first_lines(kReverseData + "train.src", 300));
  tmp.write("train.tgt", first_lines(kReverseData + "train.tgt", 299));
  const CliResult r = run_cli("train --config " + quoted(kReverseConfig) + " --set run.dir=" + quoted(tmp / "run") +
                                  " --set data.train_src=" + quoted(tmp / "train.src") +
                                  " --set data.train_tgt=" + quoted(tmp / "train.tgt"),
                              tmp);
  check_one_line_error(r, {tmp / "train.src" + " has 300 lines", tmp / "train.tgt" + " has 299"});
  CHECK_FALSE(fs::exists(tmp / "run/checkpoint-last.safetensors"));
}

TEST_CASE("command line mistakes exit with status 2", "[training][cli][errors]") {
  TempDir tmp;
  SECTION("translate with a missing checkpoint") {
    const std::string ck = tmp / "no-such-checkpoint.safetensors";
    check_one_line_error(run_cli("translate --checkpoint " + quoted(ck) + " --input /dev/null", tmp), {ck});
  }
  SECTION("train without --config") {
    const CliResult r = run_cli("train", tmp);
    INFO("stderr: " << r.err);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Contains("--config"));
  }
  SECTION("an unknown subcommand option") {
    const CliResult r = run_cli("translate --checkpoint x --bogus", tmp);
    INFO("stderr: " << r.err);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Contains("--bogus"));
  }
  SECTION("resume without a checkpoint") {
    const std::string run = tmp / "empty-run";
    check_one_line_error(run_cli("train --config " + quoted(kReverseConfig) + " --set run.dir=" + quoted(run) + " --resume", tmp),
                         {"--resume", run + "/checkpoint-last.safetensors"});
  }
}

TEST_CASE("train refuses a run directory that holds a checkpoint and leaves it untouched", "[training][cli][errors]") {
  // The trainer checks for checkpoint-last before anything else, so its content does not matter
  // here: any bytes stand for a real checkpoint.
  TempDir tmp;
  const std::string run = tmp / "run";
  std::string checkpoint_bytes = "not parsed: the bytes of an earlier run's checkpoint";
  checkpoint_bytes += std::string("\0\x01\xff", 3);
  const std::string ck = tmp.write("run/checkpoint-last.safetensors", checkpoint_bytes);
  const std::string config = tmp.write("run/config.toml", "# the earlier run's config\n");
  const CliResult r = run_cli("train --config " + quoted(kReverseConfig) + " --set run.dir=" + quoted(run), tmp);
  check_one_line_error(r, {run, "--resume"});
  CHECK(read_file(ck) == checkpoint_bytes);
  CHECK(read_file(config) == "# the earlier run's config\n");
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(run)) files.insert(e.path().filename().string());
  CHECK(files == std::set<std::string>{"checkpoint-last.safetensors", "config.toml"});
}

TEST_CASE("every subcommand has a help that lists its options", "[training][cli]") {
  TempDir tmp;
  const std::vector<std::pair<std::string, std::vector<std::string>>> commands = {
      {"", {"train", "translate", "eval", "bleu", "summary", "demo", "--version"}},
      {"train", {"--config", "--set", "--resume"}},
      {"translate", {"--checkpoint", "--input", "--beam", "--length-penalty"}},
      {"eval", {"--checkpoint", "--src", "--ref", "--beam"}},
      {"bleu", {"--ref", "--tokenize"}},
      {"summary", {"--config", "--length", "--batch", "--set", "--vocab"}},
      {"demo", {"--help"}},
  };
  for (const auto& [command, options] : commands) {
    const CliResult r = run_cli(command + " --help", tmp);
    INFO("scratchformer " << command << " --help\nstdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    CHECK_THAT(r.out, Contains("Usage"));
    for (const auto& option : options) CHECK_THAT(r.out, Contains(option));
  }
}
