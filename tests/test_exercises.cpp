// The exercises' own tests, for the exercise words whose functions had none (autograd/exercise.h
// lists all fourteen): scaled_dot_product, masks, multi_head, kv_cache, greedy, and each of the
// exercise_checks.cpp gradcheck entries (train/classroom/exercise_checks.cpp) as a test case.
// Tagged with the word, so `ctest -L masks` runs a student's checks for that exercise; in a
// handout whose exercise is not written yet they fail with its message ("exercise: implement
// causal_mask (exercise masks) in nn/attention.cpp; ...").
//   scaled_dot_product: a case worked out by hand (the 1/sqrt(Dh) scale decides it), equal to
//     tiled attention with a mask and a bias, weights summing to 1 with blocked keys exactly 0;
//   masks: causal masks open exactly keys 0..q_start+i in row i, a padding mask written out;
//   multi_head: split_heads on numbered values written out, merge_heads undoes it;
//   kv_cache: append_to_cache's blocks land in order along T, a mismatched cache is refused;
//   greedy: greedy_decode equals a per-sentence argmax loop over decode_prefix written here,
//     obeys the length limit and never emits pad, BOS or </s>.
// None of them repeats the solution: the expected values are literals, properties or another
// path of the framework.
#include "test_util.h"

#include <string>
#include <tuple>
#include <vector>

#include "autograd/node.h"
#include "data/tokenizer.h"
#include "nn/attention.h"
#include "nn/seq2seq.h"
#include "train/classroom/gradcheck_suite.h"
#include "train/classroom/peaked_model.h"
#include "train/eval/decode.h"

using namespace sf;
using Catch::Matchers::Contains;
using sf::test::kFloat64Tol;
using sf::test::max_abs_diff;

namespace {

// Runs the gradcheck entry `name` and requires each of its checks to pass.
void require_entry_passes(const std::string& name) {
  INFO("gradcheck entry " << name);
  const train::GradcheckEntry* e = train::find_gradcheck(name);
  REQUIRE(e != nullptr);
  const std::vector<train::GradcheckCase> cases = e->run(GradcheckOptions{});
  REQUIRE_FALSE(cases.empty());
  for (const train::GradcheckCase& c : cases) {
    INFO(e->name << " (" << c.variant << "): " << c.result.message);
    REQUIRE(c.result.ok);
    REQUIRE(c.result.inputs.size() == c.input_names.size());
  }
}

Tensor f64(const std::vector<double>& values, const Shape& shape) { return from_vector(values, shape, Dtype::Float64); }

}  // namespace

// ---- scaled_dot_product --------------------------------------------------------------------

TEST_CASE("scaled dot-product attention of a case worked out by hand", "[exercise][scaled_dot_product][attention]") {
  // Dh 4, so the scale is 1/2. q = (2,0,0,0); keys (1,0,0,0) and 0: scores (2*1/2, 0) = (1, 0);
  // weights softmax(1, 0) = (e/(e+1), 1/(e+1)) = (0.7310585786, 0.2689414214) (10 decimals);
  // values (1,0,0,0) and (0,3,0,0): the output is (w0, 3 w1, 0, 0). (Without the scale the
  // weights would be softmax(2, 0) = (0.8808, 0.1192).)
  const Tensor q = f64({2, 0, 0, 0}, {1, 1, 1, 4});
  const Tensor k = f64({1, 0, 0, 0, 0, 0, 0, 0}, {1, 1, 2, 4});
  const Tensor v = f64({1, 0, 0, 0, 0, 3, 0, 0}, {1, 1, 2, 4});
  Tensor weights;
  const Tensor out = nn::scaled_dot_product_attention(q, k, v, Tensor(), Tensor(), &weights);
  constexpr double kTenDecimals = 1e-9;  // the literals have 10 decimals
  CHECK(max_abs_diff(weights, f64({0.7310585786, 0.2689414214}, {1, 1, 1, 2})) < kTenDecimals);
  CHECK(max_abs_diff(out, f64({0.7310585786, 0.8068242641, 0, 0}, {1, 1, 1, 4})) < kTenDecimals);
  // a bias of (0, 1) on the scores makes them equal: weights (1/2, 1/2), output (1/2, 3/2, 0, 0)
  const Tensor even = nn::scaled_dot_product_attention(q, k, v, Tensor(), f64({0, 1}, {1, 2}));
  CHECK(max_abs_diff(even, f64({0.5, 1.5, 0, 0}, {1, 1, 1, 4})) < kFloat64Tol);
}

TEST_CASE("attention weights: rows sum to 1, blocked keys weigh exactly 0, a fully blocked row is zeros",
          "[exercise][scaled_dot_product][attention][mask]") {
  Generator gen(81);
  const Tensor q = randn({2, 3, 4, 8}, gen, Dtype::Float64), k = randn({2, 3, 5, 8}, gen, Dtype::Float64);
  // (Tq,Tk) = (4,5), 1 = blocked; query 3 is blocked from every key
  const std::vector<bool> blocked = {0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
  const Tensor mask = from_vector<bool>(blocked, {4, 5});
  const auto w = nn::attention_weights(q, k, mask).to_vector<double>();  // (2,3,4,5)
  for (std::int64_t row = 0; row < 2 * 3 * 4; ++row) {
    const std::int64_t i = row % 4;
    double total = 0;
    for (std::int64_t j = 0; j < 5; ++j) {
      const double wij = w[row * 5 + j];
      if (blocked[i * 5 + j]) CHECK(wij == 0.0);
      else CHECK(wij > 0.0);
      total += wij;
    }
    CHECK(std::abs(total - (i == 3 ? 0.0 : 1.0)) < kFloat64Tol);
  }
}

TEST_CASE("scaled dot-product attention equals tiled attention with a mask and a bias",
          "[exercise][scaled_dot_product][attention][tiled]") {
  require_entry_passes("scaled_dot_product");  // values against tiled_attention, rows sum to 1, gradient
}

// ---- masks ---------------------------------------------------------------------------------

TEST_CASE("a causal mask opens exactly the keys up to each query's own position", "[exercise][masks][mask][causal]") {
  for (const auto& [t_q, t_k, q_start] : std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>>{
           {1, 1, 0}, {4, 4, 0}, {3, 7, 4}, {1, 6, 5}, {5, 2, 0}}) {
    INFO("causal_mask(" << t_q << ", " << t_k << ", " << q_start << ")");
    const Tensor m = nn::causal_mask(t_q, t_k, q_start);
    REQUIRE(m.dtype() == Dtype::Bool);
    REQUIRE(m.shape() == Shape{t_q, t_k});
    const auto v = m.to_vector<double>();
    for (std::int64_t i = 0; i < t_q; ++i) {
      // row i: a run of open keys from key 0, then only blocked ones; the last open key is the
      // query's own position q_start + i (or the last key, when there are fewer)
      std::int64_t open = 0;
      while (open < t_k && v[i * t_k + open] == 0.0) ++open;
      for (std::int64_t j = open; j < t_k; ++j) CHECK(v[i * t_k + j] == 1.0);
      CHECK(open == std::min(t_k, q_start + i + 1));
    }
  }
}

TEST_CASE("masks written out by hand: causal and padding", "[exercise][masks][mask][padding]") {
  require_entry_passes("masks");  // causal (3,3), causal with q_start 2, padding of [[5,3,0,0],[7,0,1,0]]
  const Tensor m = nn::padding_mask(test::ids({4, 0, 0}, {1, 3}), 0);
  CHECK(m.shape() == Shape{1, 1, 1, 3});  // broadcasts over the heads and the queries
  CHECK(m.to_vector<double>() == std::vector<double>{0, 1, 1});
}

// ---- multi_head ----------------------------------------------------------------------------

TEST_CASE("split_heads cuts the last dim into heads and merge_heads puts them back", "[exercise][multi_head][attention]") {
  // x (1,2,4) = 0..7: position 0 is (0,1,2,3), position 1 (4,5,6,7). Two heads of width 2:
  // head 0 reads columns 0-1 -> (0,1), (4,5); head 1 columns 2-3 -> (2,3), (6,7).
  const Tensor x = arange(0.0, 8.0, 1.0, Dtype::Float64).reshape({1, 2, 4});
  const Tensor heads = nn::split_heads(x, 2, 2);
  REQUIRE(heads.shape() == Shape{1, 2, 2, 2});
  CHECK(heads.contiguous().to_vector<double>() == std::vector<double>{0, 1, 4, 5, 2, 3, 6, 7});
  const Tensor merged = nn::merge_heads(heads);
  REQUIRE(merged.shape() == Shape{1, 2, 4});
  CHECK(merged.contiguous().to_vector<double>() == x.to_vector<double>());
  Generator gen(82);
  const Tensor y = randn({3, 5, 12}, gen, Dtype::Float64);
  CHECK(max_abs_diff(nn::merge_heads(nn::split_heads(y, 4, 3)), y) == 0.0);
}

TEST_CASE("multi-head attention's gradient check (self- and cross-attention)", "[exercise][multi_head][attention][grad]") {
  require_entry_passes("multi_head");  // gradcheck_suite.cpp's entry: MultiHeadAttention, 4 heads
}

// ---- kv_cache ------------------------------------------------------------------------------

TEST_CASE("append_to_cache keeps the blocks in order along T", "[exercise][kv_cache][cache]") {
  Generator gen(83);
  const Tensor k1 = randn({1, 2, 3, 4}, gen), v1 = randn({1, 2, 3, 4}, gen);
  const Tensor k2 = randn({1, 2, 1, 4}, gen), v2 = randn({1, 2, 1, 4}, gen);
  nn::KVCache cache;
  nn::append_to_cache(cache, k1, v1);
  REQUIRE(cache.length() == 3);
  CHECK(max_abs_diff(cache.k, k1) == 0.0);
  nn::append_to_cache(cache, k2, v2);
  REQUIRE(cache.length() == 4);
  REQUIRE(cache.v.shape() == Shape{1, 2, 4, 4});
  CHECK(max_abs_diff(narrow(cache.k, 2, 0, 3), k1) == 0.0);
  CHECK(max_abs_diff(narrow(cache.k, 2, 3, 1), k2) == 0.0);
  CHECK(max_abs_diff(narrow(cache.v, 2, 0, 3), v1) == 0.0);
  CHECK(max_abs_diff(narrow(cache.v, 2, 3, 1), v2) == 0.0);
  // a block with another head count does not fit
  CHECK_THROWS_WITH(nn::append_to_cache(cache, randn({1, 3, 1, 4}, gen), randn({1, 3, 1, 4}, gen)),
                    Contains("cache holds k of shape (1, 2, 4, 4)"));
}

TEST_CASE("attention through the cache, step by step, equals the whole sequence", "[exercise][kv_cache][cache]") {
  require_entry_passes("kv_cache");  // append_to_cache's blocks; MultiHeadAttention prefill 2 + 1 + 1
}

// ---- greedy --------------------------------------------------------------------------------

namespace {

using train::PeakedModel;  // train/classroom/peaked_model.h

// One sentence decoded by hand, the slow way: the whole prefix through decode_prefix at every
// step, the best token by scanning the last position's logits, skipping pad and BOS.
std::vector<std::int64_t> argmax_by_hand(const nn::Model& model, const std::vector<std::int64_t>& source,
                                         std::int64_t limit) {
  const auto state = model.start_decoding(train::pad_batch({source}, data::kPadId));
  std::vector<std::int64_t> prefix = {data::kBosId}, out;
  while (static_cast<std::int64_t>(out.size()) < limit) {
    const std::int64_t t = static_cast<std::int64_t>(prefix.size());
    const Tensor logits = model.decode_prefix(from_vector<std::int64_t>(prefix, {1, t}), *state);  // (1,T,V)
    const auto last = narrow(logits, 1, t - 1, 1).contiguous().to_vector<float>();                 // (V)
    std::int64_t best = -1;
    for (std::int64_t id = 0; id < static_cast<std::int64_t>(last.size()); ++id) {
      if (id == data::kPadId || id == data::kBosId) continue;
      if (best < 0 || last[id] > last[best]) best = id;
    }
    if (best == data::kEosId) break;
    out.push_back(best);
    prefix.push_back(best);
  }
  return out;
}

}  // namespace

TEST_CASE("greedy decoding equals an argmax loop over the whole prefix, sentence by sentence",
          "[exercise][greedy][decode]") {
  NoGradGuard no_grad;
  const PeakedModel m(11);  // a seed whose model stops 3 of the 5 sentences at </s>
  const std::vector<std::vector<std::int64_t>> sources = {{4, 5, 6}, {7}, {8, 9, 10, 4}, {6, 6}, {9, 8, 7, 6, 5}};
  train::DecodeOptions opt;
  opt.max_len_a = 1.0;
  opt.max_len_b = 2;
  const auto out = train::greedy_decode(m.model, train::pad_batch(sources, data::kPadId), opt);
  REQUIRE(out.size() == sources.size());
  int stopped = 0;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const std::int64_t limit = train::max_target_length(m.model, static_cast<std::int64_t>(sources[i].size()), opt);
    INFO("sentence " << i << ", limit " << limit);
    CHECK(out[i] == argmax_by_hand(m.model, sources[i], limit));
    CHECK(static_cast<std::int64_t>(out[i].size()) <= limit);
    for (std::int64_t id : out[i]) CHECK((id != data::kPadId && id != data::kBosId && id != data::kEosId));
    stopped += static_cast<std::int64_t>(out[i].size()) < limit;
  }
  CHECK(stopped > 0);  // some sentence ended at </s>, not only at the limit
}

TEST_CASE("greedy decoding equals beam search with beam 1 and decoding without the cache", "[exercise][greedy][decode]") {
  require_entry_passes("greedy");
}

// ---- the other entries of exercise_checks.cpp -------------------------------------------------

TEST_CASE("the sinusoidal table against hand-computed values", "[exercise][sinusoidal][positional]") {
  require_entry_passes("sinusoidal");
}

TEST_CASE("RoPE by hand, by distance only, and its gradient", "[exercise][rope][positional][grad]") {
  require_entry_passes("rope");
}

