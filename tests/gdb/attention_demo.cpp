// attention_demo: one multi-head self-attention forward and one backward on a fixed input, to
// step through in gdb (docs/debugging.md) and for the pretty-printer test (run_gdb_test.sh).
//
// Built with -O0 -g3 in every preset, together with its own copy of nn/attention.cpp, so the
// locals of MultiHeadAttention::forward (q, k, v, weights, ...) can be printed even in a
// release build. Everything runs on one thread, so stepping is the same every time.
//
// Letters: B batch, T length, D d_model, H heads, Dh = D / H head width.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/ops.h"
#include "autograd/runtime/threads.h"
#include "nn/attention.h"

namespace {

constexpr std::int64_t kBatch = 2;   // B
constexpr std::int64_t kLength = 5;  // T
constexpr std::int64_t kModel = 16;  // D
constexpr std::int64_t kHeads = 4;   // H, so Dh = 4
constexpr int kShownValues = 10;     // values the gdb printer shows (MAX_VALUES in the printer)

// The printer's "values=[...]" text for the first kShownValues elements of t, in row-major
// order, written the same way (4 decimals). The gdb test compares the two.
std::string printed_values(const sf::Tensor& t) {
  const std::vector<float> values = t.contiguous().to_vector<float>();
  std::string text = "values=[";
  for (int i = 0; i < kShownValues && i < static_cast<int>(values.size()); ++i) {
    char number[32];
    std::snprintf(number, sizeof number, "%.4f", values[i]);
    text += (i ? ", " : "") + std::string(number);
  }
  return text + (values.size() > kShownValues ? ", ...]" : "]");
}

}  // namespace

int main() {
  using namespace sf;
  set_num_threads(1);  // deterministic stepping, whatever the build's thread setting

  Generator init_gen(0), dropout_gen(1), data_gen(2);
  const nn::MultiHeadAttention attn(kModel, kHeads, kHeads, /*dropout=*/0.0, nn::PositionInAttention::None,
                                    init_gen, dropout_gen);
  Tensor x = randn({kBatch, kLength, kModel}, data_gen);  // (B,T,D)
  x.set_name("x");
  const Tensor mask = nn::causal_mask(kLength, kLength);  // (T,T) bool, TRUE = BLOCKED

  // What `p q` inside forward must show: q = q_proj(x) split into heads, (B,H,T,Dh), a
  // transposed view. Computed here independently of the forward below.
  const Tensor q_expected =
      transpose(reshape(attn.q_proj->forward(x), {kBatch, kLength, kHeads, kModel / kHeads}), 1, 2);
  std::printf("expected q: %s\n", printed_values(q_expected).c_str());
  std::fflush(stdout);  // before gdb stops the program inside forward

  const Tensor out = attn.forward(x, x, mask);  // (B,T,D): break here and step in
  const Tensor loss = sum(mul(out, out));       // (): a scalar to differentiate
  loss.backward();                              // break MatMul::backward to step into it

  std::printf("out %s, loss %.4f, dloss/dq_proj.weight %s\n", shape_str(out.shape()).c_str(), loss.item(),
              shape_str(attn.q_proj->weight.grad().shape()).c_str());
  return 0;
}
