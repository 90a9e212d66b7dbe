// One training step of a whole model on 1 and 2 threads: the same bits in every module's output,
// the loss and every parameter's gradient (the float32 promise of docs/speed.md: the thread
// count changes the time, never a result).
//
// The model is wide enough that every path that threads really does: its products are cut into
// blocks (gemm_blocks, autograd/runtime/gemm.h), and its element-wise tensors are above
// kParallelMinElements. The per-kernel tests are in test_parallel_kernels.cpp (autograd_tests);
// clip_grad_norm and Adam in test_optim.cpp.
//
// Tags: [parallel][model].
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/kernels.h"
#include "autograd/runtime/gemm.h"
#include "autograd/runtime/threads.h"
#include "nn/seq2seq.h"
#include "test_util.h"

using namespace sf;
using namespace sf::nn;

namespace {

constexpr std::int64_t kVocab = 1000, kBatch = 32, kSrcLen = 17, kTgtLen = 19;

// D 128, H 4, F 512, 2 + 2 layers, dropout 0.1 (its masks come from a counter, not the thread).
ModelConfig wide_config() {
  ModelConfig c;
  c.src_vocab = c.tgt_vocab = kVocab;
  c.d_model = 128;
  c.n_heads = 4;
  c.d_ff = 512;
  c.encoder_layers = c.decoder_layers = 2;
  c.dropout = 0.1;
  c.share_embeddings = c.tie_output = true;
  c.max_len = 32;
  return c;
}

// What one step produced, as raw float32 bits (so -0 and 0, or two NaNs, are told apart).
struct StepBits {
  std::vector<std::string> names;             // "fwd <module path>" or "grad <parameter>"
  std::vector<std::vector<std::uint32_t>> bits;
  std::uint32_t loss = 0;
};

std::vector<std::uint32_t> bits_of(const Tensor& t) {
  const std::vector<float> v = contiguous(t).to_vector<float>();
  std::vector<std::uint32_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
  return out;
}

Tensor random_ids(Generator& gen, std::int64_t rows, std::int64_t cols) {
  std::vector<std::int64_t> ids(static_cast<std::size_t>(rows * cols));
  for (auto& id : ids) id = 4 + static_cast<std::int64_t>(gen.randint(kVocab - 4));  // no pad, no specials
  return from_vector<std::int64_t>(ids, {rows, cols});
}

// A fresh model (seed 1), a random batch (seed 2), the label-smoothed loss, backward.
StepBits one_step(int threads) {
  set_num_threads(threads);
  Generator init(1);
  Seq2SeqTransformer model(wide_config(), init);
  model.train();
  Generator data(2);
  const Tensor src = random_ids(data, kBatch, kSrcLen), tgt_in = random_ids(data, kBatch, kTgtLen),
               tgt_out = random_ids(data, kBatch, kTgtLen);
  StepBits step;
  const auto record = [&](const Module&, const std::string& path, const Tensor& out) {
    step.names.push_back("fwd " + path);
    step.bits.push_back(bits_of(out));
  };
  HookHandle hooks = model.register_forward_hook_recursive(record);
  const Tensor logits = model.forward(src, tgt_in);  // (B,T,V)
  Tensor loss = cross_entropy(logits.reshape({-1, kVocab}), tgt_out.reshape({-1}), /*ignore_index=*/0, 0.1);
  loss.backward();
  hooks.remove();
  const float loss_value = static_cast<float>(loss.item());
  std::memcpy(&step.loss, &loss_value, sizeof(float));
  for (const auto& [name, p] : model.named_parameters()) {
    step.names.push_back("grad " + name);
    step.bits.push_back(bits_of(p.grad()));
  }
  return step;
}

}  // namespace

TEST_CASE("a float32 training step gives the same bits on 1 and 2 threads", "[parallel][model]") {
  // the paths that thread really run at these sizes (products in blocks: on more than one core)
  const int rows = static_cast<int>(kBatch * kSrcLen), d = 128, f = 512;
  REQUIRE(gemm_blocks(rows, d, d) == std::min(usable_cores(), rows / kGemmBlockAlign));  // projections
  REQUIRE(gemm_blocks(rows, f, d) == std::min(usable_cores(), rows / kGemmBlockAlign));  // feed-forward
  REQUIRE(kBatch * kTgtLen * f >= kParallelMinElements);  // its hidden layer, element-wise

  const int before = num_threads();
  const StepBits one = one_step(1), two = one_step(2);
  set_num_threads(before);

  REQUIRE(one.names == two.names);
  REQUIRE(one.names.size() > 50);  // every module's output and every gradient were recorded
  CHECK(one.loss == two.loss);
  for (std::size_t i = 0; i < one.names.size(); ++i) {
    INFO(one.names[i]);
    REQUIRE(one.bits[i].size() == two.bits[i].size());
    std::size_t differ = 0;  // counted, then checked once (one CHECK per element is slow)
    for (std::size_t j = 0; j < one.bits[i].size(); ++j) differ += one.bits[i][j] != two.bits[i][j];
    CHECK(differ == 0);
  }
}
