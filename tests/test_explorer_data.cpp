// The explorer's model data (train/explorer/data.h, model_data.cpp): translations equal to
// `scratchformer translate`'s, top-5 alternatives that are probabilities, attention maps whose
// rows are distributions over the unmasked keys, one traced training step whose statistics match
// its values. (The Lessons page's demos: tests/test_demo_reports.cpp.) A checkpoint of configs/reverse.toml trained for a few dozen steps on a
// small slice of the corpus is made once and shared.
#include "run_util.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "nn/positional.h"
#include "train/config.h"
#include "train/eval/decode.h"
#include "train/explorer/data.h"
#include "train/optim/schedule.h"
#include "train/setup.h"

using namespace sf;
using sf::explorer::Json;
using sf::test::CliResult;
using sf::test::kReverseConfig;
using sf::test::quoted;
using sf::test::run_cli;
using sf::test::TempDir;
namespace fs = std::filesystem;

namespace {

// Probabilities are float32 softmax outputs summed in double: a row sums to 1 within ~1e-6.
constexpr double kProbTol = 1e-5;
// Attention weights are rounded to 4 decimals: each of Tk cells is off by at most 5e-5.
constexpr double kRoundTol = 5e-5;
// Statistics recomputed in double from the float values the entry lists: double rounding only.
constexpr double kStatsTol = 1e-9;

// The slice of the reverse corpus, its run directory and a checkpoint trained for 60 steps
// (D 32, one layer each): made once, shared by the tests below.
struct TinyRun {
  TempDir data{"sf_explorer_data"};
  TempDir run{"sf_explorer_run"};
  std::vector<std::string> overrides;
  fs::path checkpoint;
};

std::vector<std::string> tiny_overrides(const TinyRun& r) {
  return sf::test::small_reverse_run(r.data, r.run.path.string(),
                                     {"train.max_steps=60", "train.valid_every=60", "data.max_valid_sentences=2"});
}

const TinyRun& tiny_run() {
  static TinyRun r;
  static const bool trained = [] {
    r.overrides = tiny_overrides(r);
    const CliResult res = run_cli(sf::test::train_args(r.overrides), r.data);
    INFO(res.out << res.err);
    REQUIRE(res.status == 0);
    r.checkpoint = r.run.path / "checkpoint-last.safetensors";
    return true;
  }();
  REQUIRE(trained);
  REQUIRE(fs::exists(r.checkpoint));
  return r;
}

const train::InferenceModel& tiny_model() {
  static const train::InferenceModel im = train::load_inference_model(tiny_run().checkpoint.string());
  return im;
}

const std::vector<std::string> kSentences = {"be mi co co", "ka nu xe be nu hu wa zu ra", "da je ra"};

// `scratchformer translate` on kSentences with --beam `beam` (and --length-penalty `alpha` when
// it is >= 0): one line per sentence.
std::vector<std::string> cli_translations(std::int64_t beam, double alpha) {
  const TempDir io("sf_explorer_cli");
  std::string input;
  for (const auto& s : kSentences) input += s + "\n";
  io.write("input.txt", input);
  const CliResult r = run_cli("translate --checkpoint " + quoted(tiny_run().checkpoint.string()) + " --input " +
                                  quoted(io / "input.txt") + " --beam " + std::to_string(beam) +
                                  (alpha >= 0 ? " --length-penalty " + std::to_string(alpha) : ""),
                              io);
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::vector<std::string> lines;
  std::string line;
  for (char c : r.out) {
    if (c == '\n') lines.push_back(line), line.clear();
    else line += c;
  }
  return lines;
}

// Top-5 lists: sorted, probabilities in [0, 1] summing to at most 1; for greedy the chosen
// token is at least as likely as every alternative the decoder may choose (not <pad>, <s>).
void check_tokens(const Json& tokens, bool greedy) {
  REQUIRE(!tokens.empty());
  for (const Json& t : tokens) {
    const Json& top = t.at("top");
    REQUIRE(top.size() == 5);
    double sum = 0;
    for (std::size_t i = 0; i < top.size(); ++i) {
      const double p = top[i].at("prob").get<double>();
      CHECK(p >= 0);
      sum += p;
      if (i > 0) CHECK(p <= top[i - 1].at("prob").get<double>());
      const auto id = top[i].at("id").get<std::int64_t>();
      if (greedy && id != 0 && id != 2) CHECK(t.at("prob").get<double>() >= p - 1e-12);
    }
    CHECK(sum <= 1 + kProbTol);
  }
}

}  // namespace

TEST_CASE("explorer translate: greedy and beam text equal `scratchformer translate`, top-5 are probabilities",
          "[explorer][translate][decode][beam]") {
  const train::InferenceModel& im = tiny_model();
  // (beam, alpha): alpha < 0 leaves the length penalty to the config's default, as the CLI does
  for (const auto& [beam, alpha] : std::vector<std::pair<std::int64_t, double>>{{1, -1}, {3, -1}, {3, 0.5}}) {
    const std::vector<std::string> cli = cli_translations(beam, alpha);
    REQUIRE(cli.size() == kSentences.size());
    for (std::size_t i = 0; i < kSentences.size(); ++i) {
      explorer::TranslateRequest req;
      req.text = kSentences[i];
      req.mode = beam == 1 ? "greedy" : "beam";
      req.beam = beam;
      req.length_penalty = alpha;
      const Json out = explorer::translate(im, req);
      INFO("sentence " << kSentences[i] << ", beam " << beam << ", alpha " << alpha);
      CHECK(out.at("text").get<std::string>() == cli[i]);
      CHECK(out.at("arch") == "encoder-decoder");
      check_tokens(out.at("tokens"), beam == 1);
      // greedy: the one output; beam: every finished hypothesis, best score first, the output first
      const Json& candidates = out.at("candidates");
      if (beam == 1) CHECK(candidates.size() == 1);
      REQUIRE(candidates.size() >= 1);
      CHECK(candidates[0].at("text") == out.at("text"));
      for (std::size_t k = 0; k < candidates.size(); ++k) {
        CHECK(candidates[k].at("log_prob").get<double>() <= 0);
        if (k > 0) CHECK(candidates[k].at("score").get<double>() <= candidates[k - 1].at("score").get<double>());
      }
      CHECK(out.at("source_pieces").size() >= 1);
    }
  }
}

TEST_CASE("explorer translate: a greedy translation's last token is </s> and log_prob sums the chosen tokens",
          "[explorer][translate][decode]") {
  explorer::TranslateRequest req;
  req.text = kSentences[0];
  const Json out = explorer::translate(tiny_model(), req);
  const Json& tokens = out.at("tokens");
  double log_prob = 0;
  for (const Json& t : tokens) log_prob += std::log(t.at("prob").get<double>());
  CHECK(std::abs(log_prob - out.at("candidates")[0].at("log_prob").get<double>()) < 1e-9);
  // the output ends with </s>, or else it is as long as the decoder's length limit allows
  const auto S = static_cast<std::int64_t>(out.at("source_pieces").size());
  if (tokens.back().at("piece") != "</s>")
    CHECK(static_cast<std::int64_t>(tokens.size()) == train::max_target_length(*tiny_model().model, S, train::DecodeOptions{}));
  CHECK(out.at("candidates")[0].at("length").get<std::int64_t>() == static_cast<std::int64_t>(tokens.size()));
}

TEST_CASE("explorer attention: rows are distributions over the unmasked keys, causal cells masked and zero",
          "[explorer][attention][causal][mask]") {
  const train::InferenceModel& im = tiny_model();
  for (const bool forced : {false, true}) {
    const std::optional<std::string> target = forced ? std::optional<std::string>("co co mi be") : std::nullopt;
    const Json out = explorer::attention(im, kSentences[0], target);
    CHECK(out.at("teacher_forced").get<bool>() == forced);
    const Json& stacks = out.at("stacks");
    REQUIRE(stacks.size() == 3);
    CHECK(stacks[0].at("kind") == "encoder");
    CHECK(stacks[1].at("kind") == "decoder_self");
    CHECK(stacks[2].at("kind") == "cross");
    if (forced) CHECK(stacks[1].at("queries").size() == im.tokenizers->tgt.encode(*target).size() + 1);  // target + </s>
    for (const Json& s : stacks) {
      const bool causal = s.at("causal").get<bool>();
      CHECK(causal == (s.at("kind") == "decoder_self"));
      const std::size_t Tq = s.at("queries").size(), Tk = s.at("keys").size();
      const Json& w = s.at("weights");
      REQUIRE(w.size() == s.at("layers").get<std::size_t>());
      for (const Json& layer : w) {
        REQUIRE(layer.size() == s.at("heads").get<std::size_t>());
        for (const Json& head : layer) {
          REQUIRE(head.size() == Tq);
          for (std::size_t q = 0; q < Tq; ++q) {
            REQUIRE(head[q].size() == Tk);
            double sum = 0;
            for (std::size_t k = 0; k < Tk; ++k) {
              const bool masked = s.at("masked")[q][k].get<bool>();
              CHECK(masked == (causal && k > q));
              if (masked) CHECK(head[q][k].get<double>() == 0.0);
              sum += head[q][k].get<double>();
            }
            CHECK(std::abs(sum - 1.0) <= kRoundTol * static_cast<double>(Tk) + kProbTol);
          }
        }
      }
    }
  }
}

TEST_CASE("explorer attention: the greedy translation is the translate route's", "[explorer][attention][translate]") {
  explorer::TranslateRequest req;
  req.text = kSentences[1];
  const Json t = explorer::translate(tiny_model(), req);
  const Json a = explorer::attention(tiny_model(), kSentences[1], std::nullopt);
  CHECK(a.at("translation") == t.at("text"));
  CHECK(a.at("stacks")[0].at("keys") == t.at("source_pieces"));
}

TEST_CASE("explorer step: one traced batch, statistics and histograms match the values they describe",
          "[explorer][trace]") {
  const TinyRun& r = tiny_run();
  std::vector<std::string> o = r.overrides;
  o.insert(o.end(), {"model.d_model=16", "model.d_ff=32", "model.n_heads=2", "model.dropout=0"});
  explorer::StepRequest req;
  req.config = train::load_config(kReverseConfig, o);
  req.detail_values = 16;
  const Json out = explorer::step(req);
  REQUIRE(std::isfinite(out.at("loss").get<double>()));
  const Json& batch = out.at("batch");
  REQUIRE(!out.at("modules").empty());
  const Json& root = out.at("modules").back();  // children before parents: the model last
  CHECK(root.at("path") == "(model)");
  CHECK(root.at("shape") == Json::array({batch.at("rows"), batch.at("tgt_len"), root.at("shape")[2]}));
  CHECK(!out.at("gradients").empty());
  bool checked_one = false;
  for (const Json& p : out.at("parameters")) {
    const auto& shape = p.at("shape");
    std::int64_t count = 1;
    for (const auto& d : shape) count *= d.get<std::int64_t>();
    std::int64_t in_histogram = 0;
    for (const auto& c : p.at("histogram").at("counts")) in_histogram += c.get<std::int64_t>();
    CHECK(p.at("histogram").at("counts").size() == 20);
    CHECK(in_histogram == count - p.at("stats").at("nan").get<std::int64_t>() - p.at("stats").at("inf").get<std::int64_t>());
    if (shape.size() != 1 || count > 16) continue;  // a whole tensor in `values`: recompute its statistics
    std::vector<double> v = p.at("values")[0].get<std::vector<double>>();
    REQUIRE(static_cast<std::int64_t>(v.size()) == count);
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(count);
    double sq = 0;
    for (double x : v) sq += (x - mean) * (x - mean);
    INFO(p.at("path"));
    CHECK(std::abs(p.at("stats").at("mean").get<double>() - mean) < kStatsTol);
    CHECK(std::abs(p.at("stats").at("std").get<double>() - std::sqrt(sq / static_cast<double>(count))) < kStatsTol);
    CHECK(p.at("stats").at("min").get<double>() == *std::min_element(v.begin(), v.end()));
    CHECK(p.at("stats").at("max").get<double>() == *std::max_element(v.begin(), v.end()));
    checked_one = true;
  }
  CHECK(checked_one);
  // the same request again: the same batch, weights and loss
  CHECK(explorer::step(req).at("loss") == out.at("loss"));
}

TEST_CASE("explorer model data: bad inputs are one-line std::invalid_argument", "[explorer][translate]") {
  const train::InferenceModel& im = tiny_model();
  const auto one_line = [](const auto& call) {
    try {
      call();
      FAIL("no exception");
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      INFO(what);
      CHECK(!what.empty());
      CHECK(what.find('\n') == std::string::npos);
    }
  };
  explorer::TranslateRequest req;
  req.text = "\xff\xfe";
  one_line([&] { explorer::translate(im, req); });
  req.text = "";
  one_line([&] { explorer::translate(im, req); });
  req.text = "be mi";
  req.mode = "sample";  // a translation model does not sample
  one_line([&] { explorer::translate(im, req); });
  req.mode = "nonsense";
  one_line([&] { explorer::translate(im, req); });
  one_line([&] { explorer::attention(im, "", std::nullopt); });
  one_line([&] { explorer::attention(im, std::string(2000, 'a') + " b", std::nullopt); });
  const train::Config cfg = train::load_config(kReverseConfig, tiny_run().overrides);
  explorer::StepRequest step;
  step.config = cfg;
  step.detail_values = 99;
  one_line([&] { explorer::step(step); });
  step.detail_values = 8;
  step.batch = 1'000'000;
  one_line([&] { explorer::step(step); });
}

namespace {

// A decoder-only lm ("lm"), an encoder-only mlm ("mlm"), a decoder-only translation
// ("translation") or a recurrent encoder-decoder ("rnn", additive attention) trained for 20 steps
// on the reverse slice (D 32, one layer), in a folder of its own.
struct SingleStackRun {
  TempDir dir{"sf_explorer_stack"};
  fs::path checkpoint;
};

std::vector<std::string> single_stack_overrides(const std::string& task, const std::string& run_dir) {
  const TinyRun& tiny = tiny_run();  // its slice of the corpus: train.src/tgt, valid.src/tgt
  std::vector<std::string> o = {"run.dir=" + run_dir, "data.test_src=\"\"", "data.test_tgt=\"\"", "train.max_steps=20",
                                "train.valid_every=20", "data.max_valid_sentences=2", "model.d_model=32", "model.d_ff=64",
                                "model.encoder_layers=1", "model.decoder_layers=1", "data.batch_tokens=256", "run.threads=1"};
  if (task == "translation" || task == "rnn") {
    o.insert(o.end(), {task == "rnn" ? "model.arch=\"rnn\"" : "model.arch=\"decoder-only\"", "data.train_src=" + tiny.data / "train.src",
                       "data.train_tgt=" + tiny.data / "train.tgt", "data.valid_src=" + tiny.data / "valid.src",
                       "data.valid_tgt=" + tiny.data / "valid.tgt"});
    if (task == "rnn") o.push_back("run.attention_snapshots=false");  // snapshots are a Transformer's heads
    return o;
  }
  o.insert(o.end(), {task == "lm" ? "model.arch=\"decoder-only\"" : "model.arch=\"encoder-only\"", "data.task=\"" + task + "\"",
                     "data.train_file=" + tiny.data / "train.src", "data.valid_file=" + tiny.data / "valid.src",
                     "data.train_src=\"\"", "data.train_tgt=\"\"", "data.valid_src=\"\"", "data.valid_tgt=\"\"",
                     "train.best_metric=\"loss\""});
  return o;
}

const SingleStackRun& single_stack_run(const std::string& task) {
  static std::map<std::string, std::unique_ptr<SingleStackRun>> runs;
  auto& r = runs[task];
  if (!r) {
    r = std::make_unique<SingleStackRun>();
    const std::string run_dir = r->dir / "run";
    const CliResult res = run_cli(sf::test::train_args(single_stack_overrides(task, run_dir)), r->dir);
    INFO(res.out << res.err);
    REQUIRE(res.status == 0);
    r->checkpoint = fs::path(run_dir) / "checkpoint-last.safetensors";
  }
  REQUIRE(fs::exists(r->checkpoint));
  return *r;
}

}  // namespace

TEST_CASE("explorer translate on a decoder-only lm: greedy and sampled text equal `scratchformer generate`",
          "[explorer][translate][decode]") {
  const SingleStackRun& run = single_stack_run("lm");
  const train::InferenceModel im = train::load_inference_model(run.checkpoint.string());
  for (const std::string mode : {"greedy", "sample"}) {
    explorer::TranslateRequest req;
    req.text = "be mi";
    req.mode = mode;
    req.temperature = 0.8;
    req.seed = 3;
    req.max_new = 10;
    const Json out = explorer::translate(im, req);
    const std::string temperature = mode == "greedy" ? "0" : "0.8";
    const CliResult cli = run_cli("generate --checkpoint " + quoted(run.checkpoint.string()) +
                                      " --prompt 'be mi' --max-new 10 --seed 3 --temperature " + temperature,
                                  run.dir);
    INFO(mode << ": " << cli.err);
    REQUIRE(cli.status == 0);
    CHECK(out.at("text").get<std::string>() + "\n" == cli.out);
    CHECK(out.at("arch") == "decoder-only");
    check_tokens(out.at("tokens"), /*greedy=*/false);
  }
  explorer::TranslateRequest beam;
  beam.text = "be mi";
  beam.mode = "beam";
  CHECK_THROWS_AS(explorer::translate(im, beam), std::invalid_argument);
}

TEST_CASE("explorer attention on one stack: causal for decoder-only, bidirectional for encoder-only, mlm does not generate",
          "[explorer][attention][causal]") {
  for (const std::string arch : {"decoder-only", "encoder-only"}) {
    const train::InferenceModel im = train::load_inference_model(single_stack_run(arch == "decoder-only" ? "lm" : "mlm").checkpoint.string());
    const Json out = explorer::attention(im, "be mi co", std::nullopt);
    REQUIRE(out.at("stacks").size() == 1);
    const Json& s = out.at("stacks")[0];
    CHECK(s.at("kind") == "self");
    const bool causal = arch == "decoder-only";
    CHECK(s.at("causal").get<bool>() == causal);
    CHECK(s.at("queries") == s.at("keys"));
    const std::size_t T = s.at("queries").size();
    for (const Json& layer : s.at("weights"))
      for (const Json& head : layer)
        for (std::size_t q = 0; q < T; ++q) {
          double sum = 0;
          for (std::size_t k = 0; k < T; ++k) {
            CHECK(s.at("masked")[q][k].get<bool>() == (causal && k > q));
            if (causal && k > q) CHECK(head[q][k].get<double>() == 0.0);
            sum += head[q][k].get<double>();
          }
          CHECK(std::abs(sum - 1.0) <= kRoundTol * static_cast<double>(T) + kProbTol);
        }
    CHECK_THROWS_AS(explorer::attention(im, "be mi", std::optional<std::string>("mi be")), std::invalid_argument);
    if (!causal) {
      explorer::TranslateRequest req;
      req.text = "be mi";
      try {
        explorer::translate(im, req);
        FAIL("an encoder-only model generated");
      } catch (const std::invalid_argument& e) {
        CHECK(std::string(e.what()).rfind("this model does not generate: ", 0) == 0);
      }
    }
  }
}

TEST_CASE("explorer step: batch 0 of the initial weights is the trainer's first step (loss and gradient norm)",
          "[explorer][trace]") {
  const TinyRun& r = tiny_run();
  explorer::StepRequest req;
  req.config = train::load_config(kReverseConfig, r.overrides);  // the run's own config, dropout 0.1 included
  const Json out = explorer::step(req);
  // metrics.tsv's first row is step 1: step epoch kind loss nll ppl lr tokens_per_s grad_norm ...
  std::istringstream metrics(sf::test::read_file(r.run.path / "metrics.tsv"));
  std::string header, row;
  REQUIRE(std::getline(metrics, header));
  REQUIRE(std::getline(metrics, row));
  std::vector<std::string> cells;
  std::istringstream cols(row);
  for (std::string c; std::getline(cols, c, '\t');) cells.push_back(c);
  REQUIRE(cells.size() > 8);
  REQUIRE(cells[0] == "1");
  // metrics.tsv prints 6 significant digits
  CHECK(out.at("loss").get<double>() == Approx(std::stod(cells[3])).epsilon(1e-5));
  double squares = 0;  // the gradient norm from the parameter entries: sum of count * (std^2 + mean^2)
  for (const Json& p : out.at("parameters")) {
    std::int64_t count = 1;
    for (const auto& d : p.at("shape")) count *= d.get<std::int64_t>();
    const double mean = p.at("stats").at("mean").get<double>(), sd = p.at("stats").at("std").get<double>();
    squares += static_cast<double>(count) * (sd * sd + mean * mean);
  }
  CHECK(std::sqrt(squares) == Approx(std::stod(cells[8])).epsilon(1e-4));
}

TEST_CASE("explorer translate and attention on a decoder-only translation: the text `scratchformer translate` prints",
          "[explorer][translate][decode][beam][causal]") {
  const SingleStackRun& run = single_stack_run("translation");
  const train::InferenceModel im = train::load_inference_model(run.checkpoint.string());
  for (const std::int64_t beam : {1, 3}) {
    const CliResult cli = run_cli("translate --checkpoint " + quoted(run.checkpoint.string()) + " --beam " + std::to_string(beam),
                                  run.dir, run.dir.write("input.txt", "da je ra\n"));
    INFO(cli.err);
    REQUIRE(cli.status == 0);
    explorer::TranslateRequest req;
    req.text = "da je ra";
    req.mode = beam == 1 ? "greedy" : "beam";
    req.beam = beam;
    const Json out = explorer::translate(im, req);
    CHECK(out.at("text").get<std::string>() + "\n" == cli.out);
    CHECK(out.at("source_pieces").front() == "<s>");  // the prompt <s> source <sep>
    check_tokens(out.at("tokens"), beam == 1);
  }
  const Json a = explorer::attention(im, "da je ra", std::nullopt);
  REQUIRE(a.at("stacks").size() == 1);
  CHECK(a.at("stacks")[0].at("causal").get<bool>());
  explorer::TranslateRequest greedy;
  greedy.text = "da je ra";
  CHECK(a.at("translation") == explorer::translate(im, greedy).at("text"));
}

TEST_CASE("explorer snapshots: run.attention_snapshots writes the attention of every validation",
          "[explorer][attention][training]") {
  // 10 steps validated every 5: two lines, steps 5 and 10; the last is what /api/attention answers
  // for the same sentence with the weights of step 10 (checkpoint-last)
  const test::TempDir tmp("sf_snapshots");
  const std::string dir = tmp / "run";
  const test::CliResult r = test::run_cli(test::train_args(test::small_reverse_run(
                                  tmp, dir, {"train.max_steps=10", "train.valid_every=5", "run.attention_snapshots=true"})),
                              tmp);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const Json snaps = explorer::snapshots(dir + "/snapshots.jsonl").at("snapshots");
  REQUIRE(snaps.size() == 2);
  CHECK(snaps[0].at("step") == 5);
  CHECK(snaps[1].at("step") == 10);
  const train::InferenceModel im = train::load_inference_model(dir + "/checkpoint-last.safetensors");
  std::string first;
  for (const std::string& line : data::read_lines(tmp / "valid.src"))
    if (first.empty() && !line.empty()) first = line;
  Json expected = explorer::attention(im, first, std::nullopt);
  expected["step"] = 10;
  CHECK(snaps[1] == expected);
  CHECK(snaps[0].at("stacks").size() == 3);  // encoder, decoder_self, cross
}

TEST_CASE("explorer attention on an rnn: its alignment as the one cross stack, the translation the CLI's",
          "[explorer][attention][recurrent]") {
  const SingleStackRun& run = single_stack_run("rnn");
  const train::InferenceModel im = train::load_inference_model(run.checkpoint.string());
  const Json out = explorer::attention(im, "be mi co", std::nullopt);
  CHECK(out.at("arch") == "rnn");
  REQUIRE(out.at("stacks").size() == 1);
  const Json& s = out.at("stacks")[0];
  CHECK(s.at("kind") == "cross");
  CHECK(s.at("layers") == 1);
  CHECK(s.at("heads") == 1);
  const std::size_t S = s.at("keys").size(), T = s.at("queries").size();
  CHECK(S == im.tokenizers->src.encode("be mi co").size());
  for (std::size_t q = 0; q < T; ++q) {
    double sum = 0;
    for (std::size_t k = 0; k < S; ++k) sum += s.at("weights")[0][0][q][k].get<double>();
    CHECK(std::abs(sum - 1.0) <= kRoundTol * static_cast<double>(S) + kProbTol);
  }
  // the translation it draws is `scratchformer translate`'s
  const TempDir io("sf_explorer_rnn");
  io.write("input.txt", "be mi co\n");
  const CliResult cli = run_cli("translate --checkpoint " + quoted(run.checkpoint.string()) + " --input " +
                                    quoted(io / "input.txt"),
                                io);
  INFO(cli.err);
  REQUIRE(cli.status == 0);
  CHECK(out.at("translation").get<std::string>() + "\n" == cli.out);
  // given a target, the rows are that target's tokens (teacher forcing)
  const Json forced = explorer::attention(im, "be mi co", std::optional<std::string>("co mi be"));
  CHECK(forced.at("teacher_forced").get<bool>());
  CHECK(forced.at("stacks")[0].at("queries").size() == im.tokenizers->tgt.encode("co mi be").size() + 1);  // and </s>
}

TEST_CASE("explorer attribution: every method and head as [T][S] over the same tokens, errors one line", "[explorer][attribution]") {
  const train::InferenceModel& im = tiny_model();
  const Json a = explorer::attribution(im, "be mi ka", std::nullopt);
  const std::size_t S = a.at("source").size(), T = a.at("target").size();
  REQUIRE(S > 0);
  REQUIRE(T > 0);
  CHECK(a.at("target").back() == "</s>");
  REQUIRE(a.at("methods").size() == 4);
  for (const Json& m : a.at("methods")) {
    REQUIRE(m.at("values").size() == T);
    for (const Json& row : m.at("values")) CHECK(row.size() == S);
  }
  const std::size_t heads = static_cast<std::size_t>(im.config.model.decoder_layers * im.config.model.n_heads);
  REQUIRE(a.at("heads").size() == heads);
  for (const Json& h : a.at("heads")) {
    CHECK(h.at("drop").size() == T);
    for (const Json& row : h.at("weights")) {
      double sum = 0;
      for (const Json& v : row) sum += v.get<double>();
      CHECK(sum == Approx(1.0).margin(1e-5));  // a distribution over the source
    }
  }
  // teacher forcing: the target given is the target scored
  const Json forced = explorer::attribution(im, "be mi ka", std::string("ka mi be"));
  CHECK(forced.at("teacher_forced") == true);
  CHECK(forced.at("translation") == "ka mi be");
  CHECK_THROWS_AS(explorer::attribution(im, "", std::nullopt), std::invalid_argument);
}
