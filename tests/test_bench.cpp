// The speed benchmark (train/bench/bench.h, `scratchformer bench`):
//   the FLOP count of a tiny model against a hand computation; the list of sgemm calls of a
//   training step adds up to that count and equals, call for call, what a real training step
//   hands to cblas_sgemm (recorded by the wrapper below); run_bench on a tiny model prints a
//   table and a JSON line holding every field (the same fields tools/bench_pytorch.py prints);
//   --generation (train/bench/generation_bench.h) on a tiny decoder-only model prints a row per
//   prompt length, and its KV-cache bytes and FLOPs follow the lecture's formulas.
//
// The recording: this file defines cblas_sgemm, so in the train_tests program every call
// (sf::matmul's included) reaches this wrapper first; it notes the call's shape while a test
// asks it to and always forwards to OpenBLAS's cblas_sgemm (found with dlsym(RTLD_NEXT)).
// Nothing in autograd is changed.
//
// Letters: B batch, S source length, T target length, D d_model, H heads, Dh head width,
// F feed-forward width, V vocabulary.
#include <cblas.h>
#include <dlfcn.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/generator.h"
#include "autograd/runtime/cpu_features.h"
#include "nn/model.h"
#include "nn/seq2seq.h"
#include "test_util.h"
#include "train/bench/attention_bench.h"
#include "train/bench/bench.h"
#include "train/bench/generation_bench.h"
#include "train/bench/rnn_bench.h"
#include "train/config.h"
#include "train/optim/optim.h"
#include "train/setup.h"

using namespace sf;

namespace {

namespace fs = std::filesystem;

// (m, n, k, trans_a, trans_b) of one sgemm call
using GemmKey = std::tuple<int, int, int, bool, bool>;

std::vector<GemmKey>* g_recorded = nullptr;  // where the wrapper notes calls; null = not recording

using SgemmFn = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint, blasint, blasint, float, const float*,
                         blasint, const float*, blasint, float, float*, blasint);

SgemmFn real_sgemm() {
  static const SgemmFn f = reinterpret_cast<SgemmFn>(dlsym(RTLD_NEXT, "cblas_sgemm"));
  if (!f) {
    std::fprintf(stderr, "test_bench: dlsym(RTLD_NEXT, \"cblas_sgemm\") found nothing\n");
    std::abort();
  }
  return f;
}

}  // namespace

// The wrapper: records (while g_recorded is set) and forwards every call unchanged.
extern "C" void cblas_sgemm(const CBLAS_ORDER order, const CBLAS_TRANSPOSE trans_a, const CBLAS_TRANSPOSE trans_b,
                            const blasint m, const blasint n, const blasint k, const float alpha, const float* a,
                            const blasint lda, const float* b, const blasint ldb, const float beta, float* c,
                            const blasint ldc) {
  if (g_recorded) {
    // row-major is all sf::matmul issues; a column-major call would be recorded transposed
    if (order != CblasRowMajor) std::abort();
    g_recorded->emplace_back(m, n, k, trans_a == CblasTrans, trans_b == CblasTrans);
  }
  real_sgemm()(order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

namespace {

// The tiny model of the hand computation: D 8, H 2 (Dh 4), F 16, 1 + 2 layers, V 20.
nn::ModelConfig tiny_model() {
  nn::ModelConfig m;
  m.src_vocab = m.tgt_vocab = 20;
  m.d_model = 8;
  m.n_heads = 2;
  m.d_ff = 16;
  m.encoder_layers = 1;
  m.decoder_layers = 2;
  m.dropout = 0.1;
  m.norm_position = nn::NormPosition::Post;
  m.share_embeddings = true;
  m.tie_output = true;
  m.max_len = 16;
  return m;
}

// The other options that change which products a step makes: grouped-query attention (k and v
// narrower than D), SwiGLU (a third feed-forward matrix), a separate output matrix.
nn::ModelConfig tiny_variant() {
  nn::ModelConfig m = tiny_model();
  m.src_vocab = 24;
  m.tgt_vocab = 20;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.activation = nn::Activation::SwiGLU;
  m.norm_position = nn::NormPosition::Pre;
  m.share_embeddings = false;
  m.tie_output = false;
  return m;
}

std::map<GemmKey, std::int64_t> count_by_shape(const std::vector<train::GemmCall>& calls) {
  std::map<GemmKey, std::int64_t> out;
  for (const auto& g : calls)
    out[{static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), g.trans_a, g.trans_b}] += g.count;
  return out;
}

std::map<GemmKey, std::int64_t> count_by_shape(const std::vector<GemmKey>& calls) {
  std::map<GemmKey, std::int64_t> out;
  for (const auto& key : calls) ++out[key];
  return out;
}

std::string describe(const std::map<GemmKey, std::int64_t>& calls) {
  std::ostringstream os;
  for (const auto& [key, count] : calls) {
    const auto& [m, n, k, ta, tb] = key;
    os << "  " << m << "x" << n << "x" << k << " " << (ta ? "T" : "N") << (tb ? "T" : "N") << " x" << count << "\n";
  }
  return os.str();
}

// Every field of the JSON line, in the order printed; tools/bench_pytorch.py prints them too.
const std::vector<std::string> kJsonFields = {
    "tool", "config", "cpu", "blas_core", "threads", "load_avg_start", "load_avg_end", "batch", "src_len", "tgt_len", "vocab",
    "params", "flops_forward", "flops_step", "warmup", "steps", "step_ms", "step_ms_min", "step_ms_max", "loss",
    "tokens_per_s", "gflops", "sgemm_shape", "sgemm_gflops", "mfu", "gemm_calls", "floor_ms", "step_over_floor",
    "rss_start_mib", "rss_peak_mib", "decode_model", "decode_sentences", "greedy_cache_sent_per_s",
    "greedy_nocache_sent_per_s", "beam4_cache_sent_per_s", "beam4_nocache_sent_per_s", "greedy_tokens",
    "beam4_tokens", "bf16_unit", "bf16_step_ms", "bf16_step_ms_min", "bf16_step_ms_max", "bf16_loss",
    "bf16_tokens_per_s", "greedy_prefill_ms", "greedy_decode_ms", "beam4_prefill_ms", "beam4_decode_ms"};
// Then scratchformer's own fields (no PyTorch counterpart).
const std::vector<std::string> kOwnJsonFields = {"bf16_kernel", "bf16_gemm_gflops", "bf16_floor_ms",
                                                 "bf16_step_over_floor", "bf16_greedy_cache_sent_per_s",
                                                 "bf16_beam4_cache_sent_per_s", "decode_batch"};

// Runs f with std::cout captured; returns what it printed.
template <class F>
std::string capture_stdout(F&& f) {
  std::ostringstream captured;
  std::streambuf* old = std::cout.rdbuf(captured.rdbuf());
  try {
    f();
  } catch (...) {
    std::cout.rdbuf(old);
    throw;
  }
  std::cout.rdbuf(old);
  return captured.str();
}

using sf::test::TempDir;  // tests/test_util.h

const std::string kSourceDir = SCRATCHFORMER_SOURCE_DIR;

}  // namespace

TEST_CASE("bench flop count of a tiny model equals a hand computation", "[bench][flops]") {
  // B 2, S 3, T 5 through D 8, H 2, Dh 4, F 16, V 20; a Linear on r rows costs 2 r in out.
  // encoder layer, B*S = 6 rows:  q k v out 4 * 2*6*8*8 = 3072, fc1 fc2 2 * 2*6*8*16 = 3072
  // decoder layer, B*T = 10 rows: self q k v out 4 * 2*10*8*8 = 5120; cross q out 2 * 1280 = 2560,
  //   cross k v on the 6 encoder rows 2 * 2*6*8*8 = 1536; fc1 fc2 2 * 2*10*8*16 = 5120 -> 14336
  constexpr double kProjections = 1 * (3072 + 3072) + 2 * 14336;  // 34816
  // per (batch, head) pair, 4 pairs: q k^T 2*Tq*Dh*Tk plus weights v 2*Tq*Tk*Dh
  //   encoder 3x3: 2 * 2*3*4*3 = 144; decoder self 5x5: 2 * 2*5*4*5 = 400, cross 5x3: 2 * 2*5*4*3 = 240
  constexpr double kAttention = 4 * (1 * 144 + 2 * (400 + 240));  // 5696
  constexpr double kOutput = 2 * 10 * 8 * 20;                      // 3200: (B*T, D) @ (D, V)
  constexpr double kForward = kProjections + kAttention + kOutput;  // 43712

  const train::StepFlops f = train::training_step_flops(tiny_model(), 2, 3, 5);
  // integers far below 2^53: the double arithmetic is exact
  CHECK(f.projections == kProjections);
  CHECK(f.attention == kAttention);
  CHECK(f.output == kOutput);
  CHECK(f.forward() == kForward);
  CHECK(f.backward() == 2 * kForward);
  CHECK(f.total() == 131136);
}

TEST_CASE("bench sgemm list adds up to the flop count", "[bench][flops]") {
  for (const nn::ModelConfig& m : {tiny_model(), tiny_variant()}) {
    for (const auto& [B, S, T] : {std::tuple{2, 3, 5}, std::tuple{3, 7, 4}}) {
      double sum = 0;
      for (const train::GemmCall& g : train::training_step_gemms(m, B, S, T)) sum += g.flops();
      CHECK(sum == train::training_step_flops(m, B, S, T).total());  // exact, as above
    }
  }
}

TEST_CASE("bench sgemm list equals the calls of a real training step", "[bench][flops]") {
  const train::TrainSection settings;  // label smoothing 0.1, clip 1.0
  for (const nn::ModelConfig& m : {tiny_model(), tiny_variant()}) {
    constexpr std::int64_t B = 2, S = 3, T = 5;
    Generator gen(3);
    nn::Seq2SeqTransformer model(m, gen);
    model.train();
    train::Adam adam(model.named_parameters());
    const train::RandomBatch batch = train::random_batch(m.tgt_vocab, B, S, T, gen);
    std::vector<GemmKey> recorded;
    g_recorded = &recorded;
    train::training_step(model, adam, batch, settings, 1e-3);
    g_recorded = nullptr;
    // BLAS sees every listed product except the small batched slices, which ops_matmul.cpp
    // hands to small_gemm (autograd/runtime/small_gemm.h) instead
    std::vector<train::GemmCall> through_blas;
    std::int64_t small_slices = 0;
    for (const train::GemmCall& g : train::training_step_gemms(m, B, S, T)) {
      if (g.uses_small_gemm()) {
        small_slices += g.count;
        CHECK(g.what.find("attn") != std::string::npos);  // only attention's per-head products
      } else {
        through_blas.push_back(g);
      }
    }
    CHECK(small_slices > 0);
    const auto expected = count_by_shape(through_blas);
    const auto actual = count_by_shape(recorded);
    INFO("listed by training_step_gemms:\n" << describe(expected) << "made by the step:\n" << describe(actual));
    CHECK(actual == expected);
  }
}

TEST_CASE("bench sgemm list equals the calls of a real step of a decoder-only and an encoder-only model", "[bench][flops]") {
  const train::TrainSection settings;
  for (const nn::Arch arch : {nn::Arch::DecoderOnly, nn::Arch::EncoderOnly}) {
    nn::ModelConfig m = tiny_model();
    m.arch = arch;
    m.n_kv_heads = 1;  // multi-query: k and v narrower than q
    constexpr std::int64_t B = 2, L = 5;
    Generator gen(3);
    const std::unique_ptr<nn::Model> model = nn::make_model(m, gen);
    model->train();
    train::Adam adam(model->named_parameters());
    const train::RandomBatch batch = train::random_batch_for(m, B, L, gen);
    std::vector<GemmKey> recorded;
    g_recorded = &recorded;
    train::training_step(*model, adam, batch, settings, 1e-3);
    g_recorded = nullptr;
    std::vector<train::GemmCall> through_blas;
    double sum = 0;
    for (const train::GemmCall& g : train::training_step_gemms(m, B, L, L)) {
      sum += g.flops();
      if (!g.uses_small_gemm()) through_blas.push_back(g);
    }
    CHECK(sum == train::training_step_flops(m, B, L, L).total());
    const auto expected = count_by_shape(through_blas), actual = count_by_shape(recorded);
    INFO(nn::arch_name(arch) << ": listed by training_step_gemms:\n" << describe(expected) << "made by the step:\n" << describe(actual));
    CHECK(actual == expected);
  }
}

TEST_CASE("bench run_bench prints a table and a JSON line with every field", "[bench]") {
  TempDir tmp;
  // the reverse task's corpus and tokenizer (vocabulary 48), a tiny post-LN model
  const train::Config cfg = train::load_config(
      kSourceDir + "/configs/reverse.toml",
      {"run.dir=" + tmp.path.string(), "model.d_model=16", "model.n_heads=2", "model.d_ff=32",
       "model.encoder_layers=1", "model.decoder_layers=1", "model.norm_position=post", "model.dropout=0.1"});
  train::BenchOptions opt;
  opt.steps = 2;
  opt.warmup = 1;
  opt.batch = 3;
  opt.length = 4;
  opt.decode_sentences = 3;
  opt.decode_batch = 2;  // two batches (2 + 1 sentences), side by side on 2 threads

  const std::string out = capture_stdout([&] { REQUIRE(train::run_bench(cfg, opt) == 0); });
  CHECK_THAT(out, Catch::Contains("step / floor"));
  CHECK_THAT(out, Catch::Contains("2 batches of up to 2 sentences"));
  CHECK_THAT(out, Catch::Contains("beam 4, no cache"));
  const std::string last_line = out.substr(out.rfind('\n', out.size() - 2) + 1);
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(last_line);
  // the bf16 fields are null on a CPU without bf16 units, and only then
  const bool bf16 = sf::bf16_unit() != sf::Bf16Unit::None;
  for (const auto* fields : {&kJsonFields, &kOwnJsonFields})
    for (const std::string& field : *fields) {
      INFO("field " << field);
      REQUIRE(j.contains(field));
      if (field != "decode_batch") CHECK(j[field].is_null() == (!bf16 && field.rfind("bf16_", 0) == 0));
    }
  CHECK(j.size() == kJsonFields.size() + kOwnJsonFields.size());
  CHECK(j["decode_batch"] == 2);
  CHECK(j["decode_sentences"] == 3);
  // the order: the shared fields first, as tools/bench_pytorch.py prints them
  std::size_t i = 0;
  for (auto it = j.begin(); it != j.end() && i < kJsonFields.size(); ++it, ++i) CHECK(it.key() == kJsonFields[i]);
  if (bf16) {
    CHECK_THAT(out, Catch::Contains("training step, bf16"));
    CHECK(j["bf16_unit"] == sf::bf16_unit_name(sf::bf16_unit()));
    for (const char* positive : {"bf16_step_ms", "bf16_tokens_per_s", "bf16_gemm_gflops", "bf16_floor_ms",
                                 "bf16_greedy_cache_sent_per_s", "bf16_beam4_cache_sent_per_s"}) {
      INFO("field " << positive);
      CHECK(j[positive].get<double>() > 0);
    }
  } else {
    CHECK_THAT(out, Catch::Contains("bf16: not measured, this CPU has no bf16 matrix units"));
  }
  // prefill + decode: both phases took time
  for (const char* positive : {"greedy_prefill_ms", "greedy_decode_ms", "beam4_prefill_ms", "beam4_decode_ms"}) {
    INFO("field " << positive);
    CHECK(j[positive].get<double>() > 0);
  }
  CHECK(j["tool"] == "scratchformer");
  CHECK(j["steps"] == 2);
  CHECK(j["batch"] == 3);
  CHECK(j["decode_model"] == "random");
  CHECK(j["decode_sentences"] == 3);
  for (const char* positive : {"step_ms", "tokens_per_s", "gflops", "sgemm_gflops", "mfu", "floor_ms",
                               "step_over_floor", "rss_peak_mib", "greedy_cache_sent_per_s", "beam4_nocache_sent_per_s"}) {
    INFO("field " << positive);
    CHECK(j[positive].get<double>() > 0);
  }
  const nn::ModelConfig m = [&] {
    nn::ModelConfig c = tiny_model();
    c.src_vocab = c.tgt_vocab = 48;
    c.d_model = 16, c.n_heads = 2, c.d_ff = 32, c.encoder_layers = 1, c.decoder_layers = 1;
    return c;
  }();
  CHECK(j["flops_step"].get<double>() == train::training_step_flops(m, 3, 4, 4).total());
  std::int64_t calls = 0;
  for (const auto& g : train::training_step_gemms(m, 3, 4, 4)) calls += g.count;
  CHECK(j["gemm_calls"] == calls);
  CHECK(fs::exists(tmp.path / "bench-decode-sources.txt"));  // for tools/bench_pytorch.py

  {  // --json prints one line
    opt.json_only = true;
    opt.decode_sentences = 0;  // and skipping decoding leaves its fields null
    const std::string only = capture_stdout([&] { train::run_bench(cfg, opt); });
    CHECK(std::count(only.begin(), only.end(), '\n') == 1);
    const nlohmann::json k = nlohmann::json::parse(only);
    CHECK(k.size() == kJsonFields.size() + kOwnJsonFields.size());
    CHECK(k["decode_model"] == "none");
    CHECK(k["greedy_prefill_ms"].is_null());
    CHECK(k["greedy_cache_sent_per_s"].is_null());
  }
}

TEST_CASE("bench pytorch script prints the same fields", "[bench]") {
  std::ifstream in(kSourceDir + "/tools/bench_pytorch.py");
  REQUIRE(in);
  const std::string script{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  for (const std::string& field : kJsonFields) {
    INFO("field " << field);
    CHECK_THAT(script, Catch::Contains("\"" + field + "\""));
  }
}

// The JSON line of an rnn config (run_rnn_bench), in the order printed; tools/bench_pytorch_rnn.py
// prints them too.
const std::vector<std::string> kRnnJsonFields = {
    "tool", "mode", "config", "cpu", "blas_core", "threads", "load_avg_start", "load_avg_end", "params", "batch",
    "length", "warmup", "steps", "step_ms", "step_ms_min", "step_ms_max", "loss", "tokens_per_s", "rss_peak_mib"};
// Then fields with no PyTorch counterpart, or printed later by the script.
const std::vector<std::string> kRnnOwnJsonFields = {
    "transformer_params", "rows", "decode_sentences", "greedy_sent_per_s", "beam4_sent_per_s",
    "greedy_nocache_sent_per_s", "beam4_nocache_sent_per_s", "greedy_tokens", "beam4_tokens", "decode_batch"};

TEST_CASE("bench on an rnn config: the step, a row per length beside a Transformer of the same width, decoding",
          "[bench][recurrent]") {
  TempDir tmp;
  const train::Config cfg = train::load_config(
      kSourceDir + "/configs/reverse.toml",
      {"run.dir=" + tmp.path.string(), "run.attention_snapshots=false", "model.arch=rnn", "model.d_model=16", "model.encoder_layers=1",
       "model.decoder_layers=1", "model.dropout=0.1"});
  train::BenchOptions opt;
  opt.steps = 1;
  opt.warmup = 0;
  opt.batch = 4;
  opt.length = 8;  // a budget of 32 target tokens per step
  opt.rnn_lengths = {4, 8, 16};
  opt.decode_sentences = 3;

  // the Transformer it is compared with: same width and depth
  const train::ModelSection twin = train::transformer_twin(cfg.model);
  CHECK(twin.arch == "encoder-decoder");
  CHECK(twin.d_model == 16);
  CHECK(twin.d_ff == 64);
  CHECK(twin.encoder_layers == 1);
  CHECK(twin.decoder_layers == 1);

  const std::string out = capture_stdout([&] { REQUIRE(train::run_rnn_bench(cfg, opt) == 0); });
  CHECK_THAT(out, Catch::Contains("Transformer ms") && Catch::Contains("greedy, state") &&
                      Catch::Contains("beam 4, no cache"));
  const std::string last_line = out.substr(out.rfind('\n', out.size() - 2) + 1);
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(last_line);
  std::size_t i = 0;
  for (auto it = j.begin(); it != j.end() && i < kRnnJsonFields.size(); ++it, ++i) CHECK(it.key() == kRnnJsonFields[i]);
  for (const std::string& field : kRnnOwnJsonFields) {
    INFO("field " << field);
    CHECK(j.contains(field));
  }
  CHECK(j.size() == kRnnJsonFields.size() + kRnnOwnJsonFields.size());
  REQUIRE(j["rows"].size() == 3);
  const std::vector<std::int64_t> batches{8, 4, 2};  // 32 / T
  for (std::size_t r = 0; r < 3; ++r) {
    CHECK(j["rows"][r]["T"] == opt.rnn_lengths[r]);
    CHECK(j["rows"][r]["batch"] == batches[r]);
    CHECK(j["rows"][r]["rnn_step_ms"].get<double>() > 0);
    CHECK(j["rows"][r]["transformer_step_ms"].get<double>() > 0);
  }
  CHECK(j["decode_sentences"] == 3);
  CHECK(j["greedy_tokens"].get<std::int64_t>() > 0);
  CHECK(j["params"].get<std::int64_t>() > 0);
  CHECK(fs::exists(tmp.path / "bench-decode-sources.txt"));  // for tools/bench_pytorch_rnn.py

  std::ifstream in(kSourceDir + "/tools/bench_pytorch_rnn.py");
  REQUIRE(in);
  const std::string script{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  for (const std::string& field : kRnnJsonFields) {
    INFO("field " << field);
    CHECK_THAT(script, Catch::Contains("\"" + field + "\""));
  }
}

TEST_CASE("bench scaling prints a row per length and tiled needs less memory than plain at the longest",
          "[bench][scaling][tiled]") {
  TempDir tmp;
  const train::Config cfg = train::load_config(
      kSourceDir + "/configs/reverse.toml",
      {"run.dir=" + tmp.path.string(), "model.d_model=16", "model.n_heads=2", "model.d_ff=32",
       "model.encoder_layers=1", "model.decoder_layers=1", "model.dropout=0.1"});
  train::BenchOptions opt;
  opt.steps = 1;
  opt.warmup = 0;
  opt.batch = 4;
  opt.length = 16;  // a budget of 64 target tokens per step
  opt.scaling_lengths = {4, 16, 64};
  const std::vector<std::int64_t> batches{16, 4, 1};  // 64 / T

  const std::string out = capture_stdout([&] { REQUIRE(train::run_scaling_bench(cfg, opt) == 0); });
  CHECK_THAT(out, Catch::Contains("plain MiB") && Catch::Contains("tiled ms"));
  std::istringstream lines(out);
  std::vector<std::vector<std::string>> table;  // the rows of the table: lines of 9 numbers
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> w{std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
    if (w.size() == 9 && std::all_of(w.begin(), w.end(), [](const std::string& s) {
          return s.find_first_not_of("0123456789.") == std::string::npos;
        }))
      table.push_back(w);
  }
  REQUIRE(table.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(table[i][0] == std::to_string(opt.scaling_lengths[i]));
    CHECK(table[i][1] == std::to_string(batches[i]));
  }

  const std::string last_line = out.substr(out.rfind('\n', out.size() - 2) + 1);
  const nlohmann::json j = nlohmann::json::parse(last_line);
  CHECK(j["mode"] == "scaling");
  CHECK(j["token_budget"] == 64);
  REQUIRE(j["rows"].size() == 6);
  for (std::size_t i = 0; i < 6; ++i) {
    const auto& r = j["rows"][i];
    CHECK(r["T"] == opt.scaling_lengths[i / 2]);
    CHECK(r["batch"] == batches[i / 2]);
    CHECK(r["attention"] == (i % 2 == 0 ? "plain" : "tiled"));
    CHECK(r["step_ms"].get<double>() > 0);
  }
  const std::vector<train::ScalingRow> rows = train::scaling_rows(cfg, opt);
  REQUIRE(rows.size() == 6);
  // At a fixed budget the projections' FLOPs stay put and attention's grow as T: 16x from T 4 to 64.
  CHECK(rows[4].flops.projections == rows[0].flops.projections);
  CHECK(rows[4].flops.attention == 16 * rows[0].flops.attention);  // products of integers: exact

  // The memory, in bytes: tiled keeps no (B,H,T,T) tensor, so at T 64 it needs less than plain.
  const train::ScalingRow& plain = rows[4];
  const train::ScalingRow& tiled = rows[5];
  REQUIRE(plain.attention == "plain");
  REQUIRE(tiled.attention == "tiled");
  INFO("peak bytes at T 64: plain " << plain.peak_bytes << ", tiled " << tiled.peak_bytes);
  CHECK(tiled.peak_bytes > 0);
  CHECK(tiled.peak_bytes < plain.peak_bytes);

  {  // --json prints one line
    opt.json_only = true;
    const std::string only = capture_stdout([&] { train::run_scaling_bench(cfg, opt); });
    CHECK(std::count(only.begin(), only.end(), '\n') == 1);
    CHECK(nlohmann::json::parse(only)["rows"].size() == 6);
  }
}

// ---- --generation: prefill against decode ----------------------------------------------------

namespace {

// configs/lm-en.toml shrunk: L 2, D 16, H 4, Hkv 2 (Dh 4), F 32, V 50, RoPE (no position table),
// pre-LN LayerNorm, max_len 40.
train::Config tiny_lm_config(const fs::path& run_dir) {
  return train::load_config(kSourceDir + "/configs/lm-en.toml",
                            {"run.dir=" + run_dir.string(), "model.d_model=16", "model.n_heads=4", "model.n_kv_heads=2",
                             "model.d_ff=32", "model.decoder_layers=2", "model.max_len=40",
                             "data.tokenizer_vocab_size=50"});
}

// The lines of `out` that are rows of a --generation table: 15 numbers, the first one P.
std::vector<std::vector<std::string>> generation_table_rows(const std::string& out) {
  std::istringstream lines(out);
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> w{std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
    if (w.size() == 15 && std::all_of(w.begin(), w.end(), [](const std::string& s) {
          return s.find_first_not_of("0123456789.") == std::string::npos;
        }))
      rows.push_back(w);
  }
  return rows;
}

}  // namespace

TEST_CASE("bench generation flop and byte formulas of a tiny decoder-only model equal a hand computation",
          "[bench][flops][cache]") {
  TempDir tmp;
  const train::Config cfg = tiny_lm_config(tmp.path);
  const nn::ModelConfig m = train::model_config_from(cfg.model, 50, 50);
  Generator gen(1);
  const std::unique_ptr<nn::Model> model = nn::make_model(m, gen);
  // a layer: q, out 16*16 + 16 = 272 each, k, v 16*8 + 8 = 136 each; fc1 16*32 + 32 = 544, fc2
  // 32*16 + 16 = 528; two LayerNorms 2 * 32 -> 1952. Two layers and the final norm (32): N = 3936.
  const train::GenerationParams p = train::generation_params(*model);
  CHECK(p.non_embedding == 3936);
  CHECK(p.head == 50 * 16);  // the embedding table, the LM head
  CHECK(p.total == 3936 + 800);
  // prefill of P 8 (n 7) at B 1: 2 N n + 4 L n^2 D = 2*3936*7 + 4*2*49*16 = 55104 + 6272
  CHECK(train::prefill_flops(m, p, 1, 8) == 61376);  // integers far below 2^53: exact
  CHECK(train::prefill_flops(m, p, 3, 8) == 3 * 61376);
  // a decode step reading T 8 keys: 2 (N + V D) + 4 L T D = 2*4736 + 4*2*8*16 = 9472 + 1024
  CHECK(train::decode_step_flops(m, p, 1, 8) == 10496);
  // 2 L B Hkv T Dh 4 = 2*2*1*2*10*4*4
  CHECK(train::kv_cache_bytes(m, 1, 10) == 1280);
}

TEST_CASE("bench generation prints a row per prompt length and the KV cache holds the formula's bytes",
          "[bench][cache]") {
  TempDir tmp;
  const train::Config cfg = tiny_lm_config(tmp.path);
  train::BenchOptions opt;
  opt.steps = 2;
  opt.warmup = 1;
  opt.prompt_lengths = {4, 8, 16, 64};  // 64 > max_len 40 - 4 decode steps: skipped
  opt.generation_batches = {1, 3};
  opt.generation_tokens = 4;
  const std::vector<std::int64_t> measured{4, 8, 16};

  const std::string out = capture_stdout([&] { REQUIRE(train::run_generation_bench(cfg, opt) == 0); });
  CHECK_THAT(out, Catch::Contains("skipped   P 64"));
  CHECK_THAT(out, Catch::Contains("prefill / decode GFLOP/s at B 3"));
  const auto table = generation_table_rows(out);
  REQUIRE(table.size() == 2 * measured.size());  // two batch sizes, a row per P
  for (std::size_t i = 0; i < table.size(); ++i) CHECK(table[i][0] == std::to_string(measured[i % measured.size()]));

  const std::string last_line = out.substr(out.rfind('\n', out.size() - 2) + 1);
  const nlohmann::json j = nlohmann::json::parse(last_line);
  CHECK(j["mode"] == "generation");
  CHECK(j["arch_overridden"] == false);
  CHECK(j["skipped_prompt_lengths"] == nlohmann::json::array({64}));
  REQUIRE(j["rows"].size() == 2 * measured.size());
  for (std::size_t i = 0; i < j["rows"].size(); ++i) {
    const auto& r = j["rows"][i];
    const std::int64_t B = i < measured.size() ? 1 : 3, P = measured[i % measured.size()];
    INFO("B " << B << ", P " << P);
    CHECK(r["B"] == B);
    CHECK(r["P"] == P);
    // after the 4 steps the cache holds T = P - 1 + 4 positions: 2 L B Hkv T Dh 4 bytes, L 2, Hkv 2, Dh 4
    const std::int64_t expected = 2 * 2 * B * 2 * (P - 1 + 4) * 4 * 4;
    CHECK(r["kv_bytes_formula"] == expected);
    CHECK(r["kv_bytes_allocated"] == expected);
    CHECK(r["prefill_flops"].get<double>() > 0);
    CHECK(r["decode_flops"].get<double>() > 0);
    CHECK(r["decode_bytes"].get<double>() > 0);
    if (i % measured.size() > 0) CHECK(r["prefill_flops"].get<double>() > j["rows"][i - 1]["prefill_flops"].get<double>());
  }

  {  // --json prints one line
    opt.json_only = true;
    const std::string only = capture_stdout([&] { train::run_generation_bench(cfg, opt); });
    CHECK(std::count(only.begin(), only.end(), '\n') == 1);
    CHECK(nlohmann::json::parse(only)["rows"].size() == 2 * measured.size());
  }
}

TEST_CASE("bench generation builds another arch as decoder-only and says so", "[bench]") {
  TempDir tmp;
  const train::Config cfg = train::load_config(kSourceDir + "/configs/reverse.toml", {"run.dir=" + tmp.path.string()});
  train::BenchOptions opt;
  opt.steps = 1;
  opt.warmup = 0;
  opt.prompt_lengths = {4};
  opt.generation_batches = {1};
  opt.generation_tokens = 2;
  const std::string out = capture_stdout([&] { REQUIRE(train::run_generation_bench(cfg, opt) == 0); });
  CHECK_THAT(out, Catch::Contains("model.arch is encoder-decoder: built as decoder-only"));
  const nlohmann::json j = nlohmann::json::parse(out.substr(out.rfind('\n', out.size() - 2) + 1));
  CHECK(j["arch_overridden"] == true);
  CHECK(j["rows"].size() == 1);
}

TEST_CASE("bench --attention: every rung at every length, memory that grows as the rung says", "[bench][ladder]") {
  train::AttentionBenchOptions opt;
  opt.lengths = {32, 128};
  opt.window = 16;
  opt.steps = 1;
  opt.heads = 2;
  opt.head_dim = 8;
  const std::vector<train::AttentionBenchCell> cells = train::attention_bench_cells(opt);
  REQUIRE(cells.size() == 12);  // 6 rungs at each length (rung 1 up to T 1024)
  auto at = [&](const std::string& prefix, std::int64_t T) {
    for (const auto& c : cells)
      if (c.rung.rfind(prefix, 0) == 0 && c.length == T) return c;
    FAIL("no cell " << prefix << " at T " << T);
    return train::AttentionBenchCell{};
  };
  for (const auto& c : cells) {
    INFO(c.rung << " at T " << c.length);
    CHECK(c.seconds > 0);
    CHECK(c.peak_bytes > 0);
  }
  // rung 2 keeps (T,T) tensors: 4x the length, about 16x the memory; a window mask on it saves nothing
  const double matmul_growth = double(at("2 matmul", 128).peak_bytes) / double(at("2 matmul", 32).peak_bytes);
  INFO("rung 2 memory grew " << matmul_growth << "x");
  CHECK(matmul_growth > 8);
  CHECK(at("2 matmul, window", 128).peak_bytes >= at("2 matmul", 128).peak_bytes);
  // rungs 3, 4, 5 keep O(T): 4x the length, at most about 4x the memory, and far below rung 2's
  for (const char* rung : {"3 tiled", "4 window", "5 causal"}) {
    const double growth = double(at(rung, 128).peak_bytes) / double(at(rung, 32).peak_bytes);
    INFO(rung << " memory grew " << growth << "x");
    CHECK(growth < 6);
    CHECK(at(rung, 128).peak_bytes < at("2 matmul", 128).peak_bytes);
  }
}
