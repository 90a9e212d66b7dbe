// Decoding (train/eval/decode.h): greedy and beam search with the KV cache.
//   beam search with beam 1 equals greedy decoding;
//   beam search equals an exhaustive search over every possible output (a tiny vocabulary and
//     length; the smallest beam that keeps every live hypothesis, and one that keeps every
//     candidate) under the same length normalisation, for length penalties 0, 1 and 2;
//   the KV cache changes nothing: use_cache true and false give the same outputs;
//   a padded batch gives each sentence the output it gets decoded alone;
//   the length limit (max_len_a * source length + max_len_b, capped by max_len) is obeyed;
//   batches decoded side by side, one per thread, give what each gives alone on 1 or 2 threads.
//
// The models are untrained (random weights) with their output projection scaled up so the
// next-token distributions are peaked: decoding then stops at EOS at varied lengths instead of
// always running to the limit, and beam search prefers other sequences than greedy.
//
// Letters: B sentences, S source length, K beam size, V vocabulary, L maximum output length.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "autograd/runtime/packed_linear.h"
#include "autograd/runtime/threads.h"
#include "data/tokenizer.h"
#include "nn/seq2seq.h"
#include "test_util.h"
#include "train/eval/decode.h"

using namespace sf;
using Seq = std::vector<std::int64_t>;

namespace {

constexpr std::int64_t kPad = data::kPadId, kBos = data::kBosId, kEos = data::kEosId;

// Scores computed two ways (beam search: float32 log-probabilities summed in double, KV cache;
// the exhaustive search: float64 teacher-forced decode of the whole sequence) differ by the
// float32 rounding of each log-probability, ~1e-7 relative on values of size ~1-5, over at most
// 4 tokens: ~2e-6. 1e-5 covers that; two candidates closer than this are treated as a tie that
// the comparison cannot decide (the test requires the best to win by more).
constexpr double kScoreTol = 1e-5;

// An untrained model (weights drawn from `seed`, eval mode); its untied output projection is
// multiplied by `sharpen` so the softmax is peaked (see the top of the file).
struct RandomModel {
  Generator init;
  nn::Seq2SeqTransformer model;
  RandomModel(const nn::ModelConfig& cfg, std::uint64_t seed, double sharpen, Dtype dtype)
      : init(seed), model(cfg, init, dtype) {
    NoGradGuard no_grad;
    model.output_proj->weight.copy_(mul(model.output_proj->weight, sharpen));
    model.eval();
  }
};

// D 32, H 4, F 64, two layers each, float32 (the dtype of real runs), vocabulary 12: the specials
// <pad> <unk> <s> </s> and eight words 4..11.
nn::ModelConfig small_config() {
  nn::ModelConfig c;
  c.src_vocab = 12;
  c.tgt_vocab = 12;
  c.d_model = 32;
  c.n_heads = 4;
  c.d_ff = 64;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.dropout = 0.0;
  c.tie_output = false;
  c.max_len = 24;
  c.pad_id = kPad;
  return c;
}

// Sources of lengths shortest .. shortest+lengths-1 over the `words` ids from 4; by default
// lengths 1..6 over the words 4..11 (a batch of varied lengths, so padding matters).
std::vector<Seq> some_sources(Generator& gen, std::int64_t count, std::int64_t shortest = 1, std::int64_t lengths = 6,
                              std::int64_t words = 8) {
  std::vector<Seq> out;
  for (std::int64_t i = 0; i < count; ++i) {
    Seq s(static_cast<std::size_t>(shortest) + gen.randint(static_cast<std::uint64_t>(lengths)));
    for (auto& w : s) w = 4 + static_cast<std::int64_t>(gen.randint(static_cast<std::uint64_t>(words)));
    out.push_back(s);
  }
  return out;
}

std::string str(const Seq& s) {
  std::string out;
  for (auto id : s) out += (out.empty() ? "" : " ") + std::to_string(id);
  return "[" + out + "]";
}

// A one-row source tensor (1,S).
Tensor one_source(const Seq& s) { return train::pad_batch({s}, kPad); }

// How many outputs stopped at EOS, short of their length limit. The tests below want some: a
// model that never chose EOS would exercise only the limit, not the finishing of hypotheses.
int stopped_at_eos(const nn::Seq2SeqTransformer& model, const std::vector<Seq>& sources,
                   const std::vector<Seq>& outputs, const train::DecodeOptions& opt) {
  int n = 0;
  for (std::size_t i = 0; i < sources.size(); ++i)
    n += static_cast<std::int64_t>(outputs[i].size()) <
         train::max_target_length(model, static_cast<std::int64_t>(sources[i].size()), opt);
  return n;
}

// ---- exhaustive search ----------------------------------------------------------------------
// Every output beam search can produce for a maximum length L: k tokens then EOS (k < L, the
// EOS counted in the length), or L tokens cut off by the limit (no EOS). Tokens are any id but
// <pad> and <s>, which decoding never generates.
struct Candidate {
  Seq tokens;        // without EOS (what decoding returns)
  bool finished;     // ends with EOS
  double log_prob;   // sum of the model's log-probabilities of every token (and EOS)
  std::int64_t length() const { return static_cast<std::int64_t>(tokens.size()) + (finished ? 1 : 0); }
  double score(double alpha) const { return log_prob / std::pow(static_cast<double>(length()), alpha); }
};

void enumerate(const Seq& prefix, std::int64_t L, const Seq& words, std::vector<Candidate>& out) {
  if (static_cast<std::int64_t>(prefix.size()) == L) {
    out.push_back({prefix, false, 0.0});
    return;
  }
  out.push_back({prefix, true, 0.0});
  for (std::int64_t w : words) {
    Seq longer = prefix;
    longer.push_back(w);
    enumerate(longer, L, words, out);
  }
}

// log P(tokens [+ EOS] | src) by teacher forcing: one decode of BOS + the sequence.
double sequence_log_prob(const nn::Seq2SeqTransformer& model, const nn::Encoded& enc, const Candidate& c) {
  Seq full = c.tokens;
  if (c.finished) full.push_back(kEos);
  Seq in = {kBos};
  in.insert(in.end(), full.begin(), full.end() - 1);
  const auto n = static_cast<std::int64_t>(full.size());
  const Tensor logp = log_softmax(model.decode(from_vector<std::int64_t>(in, {1, n}), enc), -1);  // (1,n,V)
  double total = 0;
  for (std::int64_t t = 0; t < n; ++t) total += logp.at({0, t, full[t]});
  return total;
}

}  // namespace

TEST_CASE("beam search with beam 1 equals greedy decoding", "[decode][beam]") {
  for (std::uint64_t seed : {1, 4, 7}) {  // models that choose EOS for some sources
    INFO("model seed " << seed);
    RandomModel m(small_config(), seed, 4.0, Dtype::Float32);
    Generator gen(100 + seed);
    const std::vector<Seq> sources = some_sources(gen, 8);
    const Tensor src = train::pad_batch(sources, kPad);
    train::DecodeOptions opt;
    opt.beam = 1;
    const auto greedy = train::greedy_decode(m.model, src, opt);
    const auto beam = train::beam_search(m.model, src, opt);
    REQUIRE(greedy.size() == sources.size());
    for (std::size_t i = 0; i < sources.size(); ++i) {
      INFO("source " << str(sources[i]) << " greedy " << str(greedy[i]) << " beam " << str(beam[i]));
      CHECK(beam[i] == greedy[i]);
    }
    CHECK(stopped_at_eos(m.model, sources, greedy, opt) > 0);
    // translate_batch with beam 1 is greedy
    CHECK(train::translate_batch(m.model, src, opt) == greedy);
  }
}

TEST_CASE("beam search equals an exhaustive search on a tiny vocabulary", "[decode][beam]") {
  // Vocabulary 6: <pad> <unk> <s> </s> and the words 4, 5. Decoding may produce <unk>, 4, 5 and
  // </s>: 3 "word" choices per position plus EOS. Sources of length 1 and 2 with max_len_a 1,
  // max_len_b 2 allow at most L = 3 and 4 output tokens: 1+3+9+27 finished plus 81 cut-off
  // sequences for L = 4.
  nn::ModelConfig cfg = small_config();
  cfg.src_vocab = cfg.tgt_vocab = 6;
  cfg.d_model = 16;
  cfg.n_heads = 2;
  cfg.d_ff = 32;
  cfg.encoder_layers = cfg.decoder_layers = 1;
  const Seq words = {data::kUnkId, 4, 5};
  const std::vector<Seq> sources = {{4}, {5, 4}};
  train::DecodeOptions opt;
  opt.max_len_a = 1.0;
  opt.max_len_b = 2;
  // Beams wide enough to be exact:
  //   27 = 3^(L-1), the number of live (unfinished) hypotheses before the last step: every prefix
  //      survives until then (at step t, 3^t <= 27 non-EOS candidates among the 2K considered),
  //      so every output gets scored; the optimum is the best of its own length, so it ranks
  //      first among the candidates of its step: inside the first K (where an EOS must be to
  //      finish) and never pruned. Fewer than K finish before the last step (1+3+9 = 13), so
  //      the search does not stop early. The smallest exact beam: it exercises the pruning.
  //   108 = 4 * 27, every candidate of the widest step: nothing is ever pruned.
  constexpr std::int64_t kLiveBeam = 27, kAllCandidatesBeam = 108;

  int beats_greedy = 0;  // cases where the optimum is not greedy's output
  for (std::uint64_t seed : {5, 6, 7}) {
    // float64, so the exhaustive scores are exact up to ~1e-15 (the beam's are float32)
    RandomModel m(cfg, seed, 3.0, Dtype::Float64);
    // every candidate of every source, with its log-probability
    std::vector<std::vector<Candidate>> all(sources.size());
    for (std::size_t b = 0; b < sources.size(); ++b) {
      const std::int64_t L = train::max_target_length(m.model, static_cast<std::int64_t>(sources[b].size()), opt);
      REQUIRE(L == static_cast<std::int64_t>(sources[b].size()) + 2);
      enumerate({}, L, words, all[b]);
      const nn::Encoded enc = m.model.encode(one_source(sources[b]));
      NoGradGuard no_grad;
      for (Candidate& c : all[b]) c.log_prob = sequence_log_prob(m.model, enc, c);
    }
    REQUIRE(all[1].size() == 1 + 3 + 9 + 27 + 81);

    for (double alpha : {0.0, 1.0, 2.0}) {
      opt.length_penalty = alpha;
      const auto greedy = train::greedy_decode(m.model, train::pad_batch(sources, kPad), opt);
      opt.beam = kLiveBeam;
      const auto beam = train::beam_search(m.model, train::pad_batch(sources, kPad), opt);
      opt.beam = kAllCandidatesBeam;
      const auto wide = train::beam_search(m.model, train::pad_batch(sources, kPad), opt);
      for (std::size_t b = 0; b < sources.size(); ++b) {
        auto by_score = all[b];
        std::sort(by_score.begin(), by_score.end(),
                  [&](const Candidate& x, const Candidate& y) { return x.score(alpha) > y.score(alpha); });
        const Candidate& best = by_score[0];
        INFO("seed " << seed << " alpha " << alpha << " source " << str(sources[b]) << ": exhaustive best "
                     << str(best.tokens) << (best.finished ? " EOS" : " (cut off)") << " score " << best.score(alpha)
                     << ", runner-up " << str(by_score[1].tokens) << " " << by_score[1].score(alpha) << "; beam "
                     << str(beam[b]) << ", wider beam " << str(wide[b]));
        // a clear winner, so rounding cannot decide the comparison
        REQUIRE(best.score(alpha) - by_score[1].score(alpha) > kScoreTol);
        CHECK(beam[b] == best.tokens);
        CHECK(wide[b] == best.tokens);
        beats_greedy += best.tokens != greedy[b];
      }
    }
  }
  // the search space is rich enough that the optimum is not always the greedy output
  CHECK(beats_greedy > 0);
}

TEST_CASE("beam search's candidates: every finished hypothesis, ranked, scored as it says", "[decode][beam]") {
  // The hypotheses the explorer shows as the beam's candidates: best first, the first is what
  // beam_search returns, and each one's log-probability is the model's (teacher forcing) and its
  // score log_prob / length^alpha.
  nn::ModelConfig cfg = small_config();
  Generator gen(11);
  const std::vector<Seq> sources = some_sources(gen, 4);
  RandomModel m(cfg, 3, 3.0, Dtype::Float64);
  train::DecodeOptions opt;
  opt.beam = 4;
  for (double alpha : {0.0, 1.0}) {
    opt.length_penalty = alpha;
    const auto best = train::beam_search(m.model, train::pad_batch(sources, kPad), opt);
    const auto hyps = train::beam_search_hypotheses(m.model, train::pad_batch(sources, kPad), opt);
    REQUIRE(hyps.size() == sources.size());
    for (std::size_t b = 0; b < sources.size(); ++b) {
      INFO("alpha " << alpha << " source " << str(sources[b]));
      REQUIRE(hyps[b].size() >= 1);
      CHECK(hyps[b].front().tokens == best[b]);
      const nn::Encoded enc = m.model.encode(one_source(sources[b]));
      const std::int64_t limit = train::max_target_length(m.model, static_cast<std::int64_t>(sources[b].size()), opt);
      for (std::size_t k = 0; k < hyps[b].size(); ++k) {
        const train::BeamHypothesis& h = hyps[b][k];
        if (k > 0) CHECK(h.score <= hyps[b][k - 1].score);
        const bool ended_in_eos = h.length == static_cast<std::int64_t>(h.tokens.size()) + 1;
        CHECK((ended_in_eos || h.length == limit));
        CHECK(h.score == Approx(h.log_prob / std::pow(static_cast<double>(h.length), alpha)).epsilon(1e-12));
        NoGradGuard no_grad;
        CHECK(h.log_prob == Approx(sequence_log_prob(m.model, enc, {h.tokens, ended_in_eos, 0.0})).margin(kScoreTol));
      }
    }
  }
}

TEST_CASE("decoding with and without the KV cache gives the same outputs", "[decode][beam][cache]") {
  for (std::uint64_t seed : {1, 2}) {
    RandomModel m(small_config(), seed, 3.0, Dtype::Float32);
    Generator gen(200 + seed);
    const std::vector<Seq> sources = some_sources(gen, 6);
    const Tensor src = train::pad_batch(sources, kPad);
    for (std::int64_t beam : {1, 4}) {
      INFO("model seed " << seed << " beam " << beam);
      train::DecodeOptions cached, uncached;
      cached.beam = uncached.beam = beam;
      cached.use_cache = true;
      uncached.use_cache = false;
      const auto a = train::translate_batch(m.model, src, cached);
      const auto b = train::translate_batch(m.model, src, uncached);
      for (std::size_t i = 0; i < sources.size(); ++i) {
        INFO("source " << str(sources[i]) << " cached " << str(a[i]) << " uncached " << str(b[i]));
        CHECK(a[i] == b[i]);
      }
      CHECK(stopped_at_eos(m.model, sources, a, cached) > 0);
    }
  }
}

TEST_CASE("a padded batch decodes each sentence as it decodes alone", "[decode][beam][padding]") {
  RandomModel m(small_config(), 4, 3.0, Dtype::Float32);
  Generator gen(300);
  const std::vector<Seq> sources = some_sources(gen, 7);
  const Tensor src = train::pad_batch(sources, kPad);
  for (std::int64_t beam : {1, 3}) {
    train::DecodeOptions opt;
    opt.beam = beam;
    const auto batched = train::translate_batch(m.model, src, opt);
    REQUIRE(batched.size() == sources.size());
    for (std::size_t i = 0; i < sources.size(); ++i) {
      const auto alone = train::translate_batch(m.model, one_source(sources[i]), opt);
      INFO("beam " << beam << " source " << str(sources[i]) << " batched " << str(batched[i]) << " alone "
                   << str(alone[0]));
      CHECK(batched[i] == alone[0]);
    }
    CHECK(stopped_at_eos(m.model, sources, batched, opt) > 0);
  }
}

TEST_CASE("decoding obeys the length limit and never emits pad or BOS", "[decode][beam]") {
  // An unsharpened random model rarely picks EOS, so most outputs run to the limit; with
  // max_len_a 0.5 and max_len_b 1 the limit is ceil(n / 2) + 1 tokens for a source of n.
  RandomModel m(small_config(), 8, 1.0, Dtype::Float32);
  Generator gen(400);
  const std::vector<Seq> sources = some_sources(gen, 8);
  const Tensor src = train::pad_batch(sources, kPad);
  train::DecodeOptions opt;
  opt.max_len_a = 0.5;
  opt.max_len_b = 1;
  int at_limit = 0;
  for (std::int64_t beam : {1, 3}) {
    opt.beam = beam;
    const auto out = train::translate_batch(m.model, src, opt);
    for (std::size_t i = 0; i < sources.size(); ++i) {
      const std::int64_t L = train::max_target_length(m.model, static_cast<std::int64_t>(sources[i].size()), opt);
      // ceil(0.5 * n) + 1 generated tokens at most, EOS included
      CHECK(L == static_cast<std::int64_t>(std::ceil(0.5 * sources[i].size())) + 1);
      INFO("beam " << beam << " source " << str(sources[i]) << " output " << str(out[i]));
      CHECK(static_cast<std::int64_t>(out[i].size()) <= L);
      at_limit += static_cast<std::int64_t>(out[i].size()) == L;
      for (auto id : out[i]) {
        CHECK(id != kPad);
        CHECK(id != kBos);
        CHECK(id != kEos);
      }
    }
  }
  CHECK(at_limit > 0);  // the limit was reached, not just never approached
  // the model's max_len caps the limit: BOS + the output must fit its position table
  opt.max_len_a = 100;
  CHECK(train::max_target_length(m.model, 5, opt) == small_config().max_len - 1);
}

// ---- batches side by side -------------------------------------------------------------------
// translate_batches decodes one batch per thread; inside a batch the kernels then run on that one
// thread. A model wide enough that sf::gemm cuts its products into blocks (m*n*k above
// kGemmParallelMinMacs), shared over 2 threads when a batch runs alone and run one after the
// other inside the loop, so the two ways of running really differ.
nn::ModelConfig wide_config() {
  nn::ModelConfig c = small_config();
  c.src_vocab = c.tgt_vocab = 300;
  c.d_model = 128;
  c.d_ff = 512;
  c.max_len = 32;
  return c;
}

// Sources of 3..12 tokens over the words 4..299.
std::vector<Seq> wide_sources(Generator& gen, std::int64_t count) { return some_sources(gen, count, 3, 10, 296); }

TEST_CASE("batches decoded side by side, one per thread, give each batch's output alone on 1 and 2 threads",
          "[decode][beam][parallel]") {
  RandomModel m(wide_config(), 71, 4.0, Dtype::Float32);
  Generator gen(72);
  std::vector<Tensor> batches;
  for (int b = 0; b < 5; ++b) batches.push_back(train::pad_batch(wide_sources(gen, 24), kPad));  // (24,S) each
  const int before = num_threads();
  for (const std::int64_t beam : {1, 3}) {
    INFO("beam " << beam);
    train::DecodeOptions opt;
    opt.beam = beam;
    std::vector<std::vector<Seq>> alone_one, alone_two;  // each batch by itself, all threads on it
    set_num_threads(1);
    for (const auto& b : batches) alone_one.push_back(train::translate_batch(m.model, b, opt));
    set_num_threads(2);
    for (const auto& b : batches) alone_two.push_back(train::translate_batch(m.model, b, opt));
    double prefill = 0;
    opt.prefill_seconds = &prefill;
    std::vector<double> seconds;
    const auto side_by_side = train::translate_batches(m.model, batches, opt, &seconds);  // 2 threads
    set_num_threads(before);
    REQUIRE(side_by_side.size() == batches.size());
    REQUIRE(seconds.size() == batches.size());
    std::size_t tokens = 0;
    for (std::size_t b = 0; b < batches.size(); ++b) {
      INFO("batch " << b);
      CHECK(alone_one[b] == alone_two[b]);
      CHECK(side_by_side[b] == alone_two[b]);
      CHECK(seconds[b] > 0);
      for (const auto& s : side_by_side[b]) tokens += s.size();
    }
    CHECK(tokens > 0);  // not a comparison of empty outputs
    CHECK(prefill > 0);
    const double busy = std::accumulate(seconds.begin(), seconds.end(), 0.0);
    CHECK(prefill < busy);  // the prefills are part of the batches' times
  }
}

TEST_CASE("a model's logits computed on one thread inside a parallel loop have the bits of 2 threads outside",
          "[decode][parallel]") {
  RandomModel m(wide_config(), 73, 1.0, Dtype::Float32);
  Generator gen(74);
  const Tensor src = train::pad_batch(wide_sources(gen, 32), kPad);  // (32,S)
  const Tensor tgt = train::pad_batch(wide_sources(gen, 32), kPad);  // (32,T)
  NoGradGuard no_grad;
  const int before = num_threads();
  set_num_threads(2);
  const std::vector<float> outside = m.model.forward(src, tgt).to_vector<float>();  // (32,T,V)
  std::vector<std::vector<float>> inside(2);
#pragma omp parallel for num_threads(2) schedule(static, 1)
  for (int i = 0; i < 2; ++i) {
    NoGradGuard thread_no_grad;  // grad mode is per thread
    inside[static_cast<std::size_t>(i)] = m.model.forward(src, tgt).to_vector<float>();
  }
  set_num_threads(before);
  REQUIRE(outside.size() == inside[0].size());
  for (const auto& v : inside) CHECK(std::memcmp(v.data(), outside.data(), outside.size() * sizeof(float)) == 0);
}

// Decoding runs Linear on weights packed once (autograd/runtime/packed_linear.h): an enclosing
// PackedWeights is used (translate_batches shares one between its batches), filled on the first
// decoding and only read by the next. That the packed kernel's results do not depend on the
// batch is what makes "alone = in a batch" and "cached = uncached" above hold bit for bit.
TEST_CASE("decoding packs the weights it multiplies once and reuses them", "[decode][packed]") {
  RandomModel m(wide_config(), 73, 4.0, Dtype::Float32);
  Generator gen(74);
  const Tensor src = train::pad_batch(wide_sources(gen, 8), kPad);
  PackedWeights weights;
  PackedWeightsScope scope(weights);
  for (const std::int64_t beam : {1, 3}) {
    train::DecodeOptions opt;
    opt.beam = beam;
    train::translate_batch(m.model, src, opt);
    INFO("beam " << beam);
    CHECK(weights.size() > 0);
  }
  const std::size_t packed = weights.size();
  train::translate_batches(m.model, {src, src}, train::DecodeOptions{});
  CHECK(weights.size() == packed);  // translate_batches shares the enclosing one: nothing new to pack
}
