// Generation with a decoder-only model (train/eval/generate.h) and its prompted translation
// (train/eval/evaluate.h translate_all), on random tiny models:
//   generate   temperature 0 and top-k 1 (at any temperature) give the same tokens without
//              drawing; the tokens of generate (prefill + KV-cached decode steps) are those of a
//              greedy loop over decode_prefix without a cache, whose logits the cached steps
//              match to float32 rounding; the cache it reports is the lecture's formula
//              2 L Hkv T Dh 4 bytes; max_new is cut to the positions left; bad prompts throw;
//              Linear runs on weights packed before the clock (every one, in float32 and bf16:
//              the steps pack none), in the enclosing scope when there is one
//   translate  translate_all of sources of different lengths (batched by length: a decoder-only
//              model has no key padding mask) gives each sentence what greedy_decode gives its
//              prompt <s> source <sep> alone; prompts of one length decode alike with and without
//              the cache, batched or alone, and beam 1 is greedy
//
// Letters: P prompt length (with <s>), T positions, L layers, Hkv key/value heads, Dh head
// width, V vocabulary.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/node.h"
#include "autograd/runtime/bf16.h"
#include "autograd/runtime/cpu_features.h"
#include "autograd/runtime/packed_linear.h"
#include "data/tokenizer.h"
#include "nn/model.h"
#include "test_util.h"
#include "train/eval/decode.h"
#include "train/eval/evaluate.h"
#include "train/eval/generate.h"

using namespace sf;
using Catch::Contains;
using Ids = std::vector<std::int64_t>;

namespace {

// The cached decode steps against decode_prefix over the whole sequence: the same float32 math
// in other shapes (one query against the cache instead of T at once); logits O(1) through a
// few dozen ops, so 1e-5 (kFloat32Tol) leaves room and still catches a wrong position (~1e-1).
constexpr double kCacheTol = sf::test::kFloat32Tol;

constexpr std::int64_t kVocab = 20, kMaxLen = 24;

// A random decoder-only model: D 32, H 4, Hkv 2 (grouped-query), F 64, two layers, RoPE, no
// dropout, eval mode.
nn::ModelConfig tiny_decoder_config(std::int64_t vocab = kVocab) {
  nn::ModelConfig c;
  c.arch = nn::Arch::DecoderOnly;
  c.tgt_vocab = vocab;
  c.d_model = 32;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.d_ff = 64;
  c.decoder_layers = 2;
  c.dropout = 0.0;
  c.positional = nn::PositionalKind::RoPE;
  c.max_len = kMaxLen;
  return c;
}

std::unique_ptr<nn::Model> tiny_decoder(std::uint64_t seed, std::int64_t vocab = kVocab) {
  Generator init(seed);
  auto model = nn::make_model(tiny_decoder_config(vocab), init);
  model->eval();
  return model;
}

// Every token but padding, <s> and (when !eos) </s>.
std::vector<bool> allowed_tokens(bool eos) {
  std::vector<bool> allowed(kVocab, true);
  allowed[data::kPadId] = allowed[data::kBosId] = false;
  allowed[data::kEosId] = eos;
  return allowed;
}

std::int64_t argmax_allowed(const std::vector<float>& logits, const std::vector<bool>& allowed) {
  std::int64_t best = -1;
  for (std::size_t v = 0; v < logits.size(); ++v)
    if (allowed[v] && (best < 0 || logits[v] > logits[static_cast<std::size_t>(best)])) best = static_cast<std::int64_t>(v);
  return best;
}

// The greedy continuation of `prompt` computed the slow way: the whole sequence through
// decode_prefix at every step, no cache; at each step the cached decode_step (fed the same
// tokens) must give the same logits. Stops at </s> or after max_new tokens.
Ids greedy_without_cache(const nn::Model& model, const Ids& prompt, std::int64_t max_new, const std::vector<bool>& allowed) {
  NoGradGuard no_grad;
  const auto P = static_cast<std::int64_t>(prompt.size());
  const auto cached = model.start_decoding(from_vector<std::int64_t>(prompt, {1, P}));
  Tensor step_logits = model.decode_step(cached->first_tokens(), *cached);  // (1,V)
  Ids seq = prompt, out;
  for (std::int64_t n = 0; n < max_new; ++n) {
    const auto T = static_cast<std::int64_t>(seq.size());
    const Tensor all = model.decode_prefix(from_vector<std::int64_t>(seq, {1, T}), *cached);  // (1,T,V)
    const Tensor last = all.narrow(1, T - 1, 1).reshape({1, kVocab});
    INFO("step " << n);
    CHECK(sf::test::max_abs_diff(step_logits, last) <= kCacheTol);
    const std::int64_t next = argmax_allowed(last.to_vector<float>(), allowed);
    if (next == data::kEosId) break;
    out.push_back(next), seq.push_back(next);
    step_logits = model.decode_step(from_vector<std::int64_t>({next}, {1, 1}), *cached);
  }
  return out;
}

}  // namespace

TEST_CASE("generate at temperature 0 equals top-k 1 at any temperature and draws nothing", "[decode][cache]") {
  const auto model = tiny_decoder(3);
  const Ids prompt = {data::kBosId, 5, 6, 7};
  train::GenerateOptions greedy;
  greedy.max_new = 12;
  greedy.sampling = {0.0, 0, 1.0};
  Generator gen(11);
  const auto before = gen.state();
  const train::Generation g = train::generate(*model, prompt, greedy, gen);
  CHECK_FALSE(g.tokens.empty());
  for (const train::SamplingOptions s : {train::SamplingOptions{1.7, 1, 1.0}, train::SamplingOptions{0.3, 1, 0.5}}) {
    train::GenerateOptions top1 = greedy;
    top1.sampling = s;
    INFO("temperature " << s.temperature << " top_p " << s.top_p);
    const train::Generation t = train::generate(*model, prompt, top1, gen);
    CHECK(t.tokens == g.tokens);
    CHECK(t.stopped_at_eos == g.stopped_at_eos);
  }
  CHECK(gen.state() == before);  // greedy choices never touch the generator
  // sampling does draw: at temperature 5 over all tokens the path leaves the greedy one
  train::GenerateOptions hot = greedy;
  hot.sampling = {5.0, 0, 1.0};
  hot.allowed = allowed_tokens(/*eos=*/false);
  train::GenerateOptions greedy_no_eos = greedy;
  greedy_no_eos.allowed = hot.allowed;
  CHECK(train::generate(*model, prompt, hot, gen).tokens != train::generate(*model, prompt, greedy_no_eos, gen).tokens);
  CHECK_FALSE(gen.state() == before);
}

TEST_CASE("generate equals a greedy loop over decode_prefix without the cache", "[decode][cache]") {
  const auto model = tiny_decoder(4);
  const nn::ModelConfig& cfg = model->config();
  for (const bool eos : {true, false}) {
    INFO((eos ? "</s> allowed" : "</s> not allowed"));
    const Ids prompt = {data::kBosId, 9, 4, 4, 12};
    train::GenerateOptions opt;
    opt.max_new = 10;
    opt.sampling.temperature = 0;
    opt.allowed = allowed_tokens(eos);
    Generator gen(0);
    const train::Generation g = train::generate(*model, prompt, opt, gen);
    const Ids expected = greedy_without_cache(*model, prompt, opt.max_new, opt.allowed);
    CHECK(g.tokens == expected);
    CHECK(g.prompt_tokens == 5);
    CHECK(g.stopped_at_eos == (static_cast<std::int64_t>(expected.size()) < opt.max_new));
    // the cache holds the prompt and every token fed back: P - 1 + 1 (the prompt's last) + steps
    CHECK(g.cache_positions == g.prompt_tokens + g.decode_steps);
    if (!eos) CHECK(g.cache_positions == g.prompt_tokens + opt.max_new - 1);  // the last token is never fed
    CHECK(g.cache_bytes == train::kv_cache_formula_bytes(cfg, g.cache_positions));
    CHECK(g.cache_bytes == 2 * 2 * 2 * g.cache_positions * 8 * 4);  // 2 L Hkv T Dh 4: L 2, Hkv 2, Dh 8, float32
  }
  CHECK(train::kv_cache_formula_bytes(cfg, 10, 3, 8) == 2 * 2 * 3 * 2 * 10 * 8 * 8);  // B 3, float64
}

TEST_CASE("generate cuts max_new to the positions left and rejects prompts that leave none", "[decode][cache][errors]") {
  const auto model = tiny_decoder(5);
  train::GenerateOptions opt;
  opt.max_new = 50;
  opt.sampling.temperature = 0;
  opt.allowed = allowed_tokens(/*eos=*/false);
  Generator gen(0);
  Ids prompt(kMaxLen - 3, 6);  // P = 21 of 24 positions: 3 tokens fit after it
  prompt[0] = data::kBosId;
  CHECK(train::generate(*model, prompt, opt, gen).tokens.size() == 3);
  prompt.resize(kMaxLen, 6);  // P = 24: no position left
  REQUIRE_THROWS_AS(train::generate(*model, prompt, opt, gen), std::invalid_argument);
  REQUIRE_THROWS_WITH(train::generate(*model, prompt, opt, gen), Contains("24 tokens") && Contains("24 positions"));
  REQUIRE_THROWS_WITH(train::generate(*model, {}, opt, gen), Contains("empty"));
  opt.sampling = {1.0, 0, 0.0};
  REQUIRE_THROWS_WITH(train::generate(*model, {data::kBosId}, opt, gen), Contains("--top-p"));

  nn::ModelConfig enc = tiny_decoder_config();
  enc.arch = nn::Arch::EncoderOnly;
  enc.src_vocab = kVocab;
  enc.encoder_layers = 1;
  Generator init(1);
  const auto encoder = nn::make_model(enc, init);
  opt.sampling = {};
  REQUIRE_THROWS_WITH(train::generate(*encoder, {data::kBosId}, opt, gen),
                      Contains("generate needs a decoder-only model") && Contains("encoder-only"));
}

TEST_CASE("generate runs Linear on weights packed before the clock starts, once per enclosing scope",
          "[decode][cache][packed]") {
  const auto model = tiny_decoder(6);
  std::size_t matrices = 0;  // the embedding table (the tied LM head) and every Linear weight
  for (const Tensor& p : model->parameters()) matrices += p.dim() == 2 ? 1 : 0;
  REQUIRE(matrices == 1 + 2 * 6);  // E; per layer q, k, v, o and the two feed-forward weights
  train::GenerateOptions opt;
  opt.max_new = 6;
  opt.sampling.temperature = 0;
  opt.allowed = allowed_tokens(/*eos=*/false);
  Generator gen(0);
  const Ids prompt = {data::kBosId, 7, 8, 9};
  const Ids alone = train::generate(*model, prompt, opt, gen).tokens;
  CHECK(packed_weights_in_use() == nullptr);  // its own scope ended with it

  auto check_in_scope = [&](bool bf16) {
    PackedWeights outer;
    const PackedWeightsScope scope(outer);
    CHECK(train::pack_matrix_weights(*model, outer) == matrices);
    // every Linear found its weight packed already (same keys as ops_linear.cpp): none was added
    const Ids first = train::generate(*model, prompt, opt, gen).tokens;
    CHECK(outer.size() == matrices);
    CHECK(train::generate(*model, prompt, opt, gen).tokens == first);
    CHECK(outer.size() == matrices);
    CHECK(packed_weights_in_use() == &outer);
    if (!bf16) CHECK(first == alone);
  };
  SECTION("float32") { check_in_scope(false); }
  SECTION("bf16") {
    if (!has_avx512_bf16()) {
      WARN("skipped: bf16 packed weights need AVX512-BF16; this CPU has " << bf16_units_found());
      return;
    }
    const MatmulPrecisionScope bf16(MatmulPrecision::Bf16);
    check_in_scope(true);
  }
}

// ---- prompted translation ----------------------------------------------------------------------

namespace {

// A 32-piece tokenizer with <sep> (id 4) trained in `dir` on 200 lines of three of twelve words.
const std::vector<std::string> kWords = {"lo", "be", "co", "da", "fi", "gu", "ha", "ki", "mo", "nu", "pe", "ra"};

data::Tokenizer sep_tokenizer(const sf::test::TempDir& dir) {
  std::string text;
  for (std::size_t i = 0; i < 200; ++i) text += kWords[i % 12] + " " + kWords[(i * 5 + 1) % 12] + " " + kWords[(i * 7) % 12] + "\n";
  return data::Tokenizer::train({dir.write("text.txt", text)}, dir / "spm.model", 32, "unigram", 1, {"<sep>"});
}

// Sources of 2, 4, 2, 3, 4, 1 and 3 tokens, in no order.
const std::vector<std::string> kLines = {"lo be", "co da fi gu", "ha ki", "mo nu pe", "ra lo be co", "ki", "da fi gu"};

}  // namespace

TEST_CASE("translate_all batches decoder-only prompts by length without changing any output",
          "[decode][translate][tasks]") {
  sf::test::TempDir dir;
  const data::Tokenizer tok = sep_tokenizer(dir);
  const data::Tokenizers toks{tok, tok};
  const auto model = tiny_decoder(6, tok.vocab_size());
  std::vector<Ids> src;
  for (const auto& l : kLines) src.push_back(tok.encode(l));
  train::DecodeOptions opt;  // greedy, max_len_a 1.5, max_len_b 10
  for (const std::int64_t per_batch : {64, 2}) {
    INFO("sentences per batch " << per_batch);
    const std::vector<std::string> all = train::translate_all(*model, toks, src, opt, per_batch);
    REQUIRE(all.size() == src.size());
    std::size_t non_empty = 0;
    for (std::size_t i = 0; i < src.size(); ++i) {
      INFO("sentence " << i << ": " << kLines[i]);
      const Ids prompt = train::translation_prompt(toks, src[i]);
      CHECK(prompt.front() == data::kBosId);
      CHECK(prompt.back() == tok.symbol_id("<sep>"));
      const auto alone = train::greedy_decode(*model, train::pad_batch({prompt}, data::kPadId), opt);
      CHECK(all[i] == tok.decode(alone[0]));
      non_empty += !all[i].empty();
    }
    CHECK(non_empty > 0);  // the comparison is not between empty strings only
  }
  // the check has teeth: padding a short prompt into a batch of longer ones changes its output
  // (no key padding mask: it reads its pads), which translate_all's grouping avoids
  const Ids short_prompt = train::translation_prompt(toks, src[5]), long_prompt = train::translation_prompt(toks, src[1]);
  const auto mixed = train::greedy_decode(*model, train::pad_batch({short_prompt, long_prompt}, data::kPadId), opt);
  const auto alone = train::greedy_decode(*model, train::pad_batch({short_prompt}, data::kPadId), opt);
  CHECK(mixed[0] != alone[0]);
}

TEST_CASE("decoder-only prompts decode alike with and without the cache, in a batch or alone, beam 1 as greedy",
          "[decode][beam][cache][tasks]") {
  sf::test::TempDir dir;
  const data::Tokenizer tok = sep_tokenizer(dir);
  const data::Tokenizers toks{tok, tok};
  const auto model = tiny_decoder(7, tok.vocab_size());
  // three prompts of one length, batched as translate_all batches them: the first three lines of
  // the text whose sources are 3 tokens long
  std::vector<Ids> prompts;
  for (std::size_t i = 0; i < 12 && prompts.size() < 3; ++i) {
    const Ids ids = tok.encode(kWords[i] + " " + kWords[(i * 5 + 1) % 12] + " " + kWords[(i * 7) % 12]);
    if (ids.size() == 3) prompts.push_back(train::translation_prompt(toks, ids));
  }
  REQUIRE(prompts.size() == 3);
  const Tensor batch = train::pad_batch(prompts, data::kPadId);
  train::DecodeOptions cached, uncached;
  uncached.use_cache = false;
  const auto greedy = train::greedy_decode(*model, batch, cached);
  CHECK(train::greedy_decode(*model, batch, uncached) == greedy);
  train::DecodeOptions beam1 = cached;
  beam1.beam = 1;
  CHECK(train::beam_search(*model, batch, beam1) == greedy);
  for (const std::int64_t K : {2, 3}) {
    INFO("beam " << K);
    train::DecodeOptions beam = cached, beam_uncached = uncached;
    beam.beam = beam_uncached.beam = K;
    const auto together = train::beam_search(*model, batch, beam);
    CHECK(train::beam_search(*model, batch, beam_uncached) == together);
    for (std::size_t i = 0; i < prompts.size(); ++i)
      CHECK(train::beam_search(*model, train::pad_batch({prompts[i]}, data::kPadId), beam)[0] == together[i]);
  }
  for (const auto& out : greedy) CHECK(static_cast<std::int64_t>(out.size()) <= kMaxLen - static_cast<std::int64_t>(prompts[0].size()));
  CHECK(std::any_of(greedy.begin(), greedy.end(), [](const Ids& out) { return !out.empty(); }));  // not vacuous
}
