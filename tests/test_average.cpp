// Tests for train/checkpoint_average (checkpoint averaging): the mean of known tensors is exact
// (summed in float64, rounded once), checkpoints of different shapes or configs are refused with
// one line naming the file and the tensor or key, `run.average_last` is validated, and a real
// run's averaged checkpoint is the mean of its kept checkpoints, loads with load_inference_model
// and is what the end-of-training test uses; `scratchformer average` does the same from the
// command line.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "run_util.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/checkpoint_average.h"
#include "train/config.h"
#include "train/checkpoint/safetensors.h"
#include "train/setup.h"

namespace {

using namespace sf;
using namespace sf::test;
using Catch::Contains;

// A real run of the small reverse task: 6 steps, checkpoint-last saved at steps 2, 4, 6 and all
// three kept, averaged at the end (run.average_last = 3), with the valid pairs as its test set.
// Trained once for the whole file (about a second) in a folder removed at exit.
struct AveragedRun {
  TempDir tmp{"sf_average"};
  std::string dir = tmp / "run";
  CliResult result;
  AveragedRun() {
    std::vector<std::string> o =
        small_reverse_run(tmp, dir, {"model.dropout=0", "train.valid_every=2", "train.max_steps=6",
                                     "run.keep_checkpoints=3", "run.average_last=3"});
    o.insert(o.end(), {"data.test_src=" + tmp / "valid.src", "data.test_tgt=" + tmp / "valid.tgt"});
    result = run_cli(train_args(o), tmp);
  }
  std::string path(const std::string& name) const { return dir + "/" + name; }
};

const AveragedRun& averaged_run() {
  static const AveragedRun run;
  return run;
}

// The metadata of a real checkpoint (its config, step, vocabulary sizes) with other tensors: the
// synthetic checkpoints below pass every check that does not look at the tensors themselves.
std::string write_checkpoint(const TempDir& tmp, const std::string& name,
                             const std::vector<std::pair<std::string, Tensor>>& tensors,
                             std::map<std::string, std::string> metadata = {}) {
  std::map<std::string, std::string> meta =
      train::load_safetensors(averaged_run().path(train::kLastCheckpointName)).metadata;
  for (auto& [key, value] : metadata) meta[key] = value;
  const std::string path = tmp / name;
  train::save_safetensors(path, tensors, meta);
  return path;
}

Tensor f32(const std::vector<float>& values, const Shape& shape) { return from_vector(values, shape); }

// The message of the CheckpointError `f` throws ("(no CheckpointError)" if none).
template <class F>
std::string checkpoint_error(F&& f) {
  try {
    f();
  } catch (const train::CheckpointError& e) {
    return e.what();
  }
  return "(no CheckpointError)";
}

// Loads a config of the keys every config needs followed by `run_lines` (the [run] section's).
train::Config config_with(const TempDir& tmp, const std::string& run_lines) {
  const std::string text = "[data]\ntrain_src = \"a.de\"\ntrain_tgt = \"a.en\"\nvalid_src = \"b.de\"\nvalid_tgt = \"b.en\"\n"
                           "[run]\ndir = \"runs/x\"\n" + run_lines;
  return train::load_config(tmp.write("cfg.toml", text));
}

}  // namespace

TEST_CASE("average of known tensors is their exact mean, summed in float64", "[average][checkpoint]") {
  TempDir tmp;
  const std::string a = write_checkpoint(tmp, "a.safetensors", {{"w", f32({1, 2, 3, 4}, {2, 2})}, {"b", f32({1e8f}, {1})}});
  const std::string b = write_checkpoint(tmp, "b.safetensors", {{"w", f32({3, 4, 5, 6}, {2, 2})}, {"b", f32({1.0f}, {1})}});
  const std::string c = write_checkpoint(tmp, "c.safetensors", {{"w", f32({8, 9, -2, 0.5f}, {2, 2})}, {"b", f32({-1e8f}, {1})}});
  const std::string out = tmp / "avg.safetensors";
  const train::AverageSummary s = train::average_checkpoints({a, b, c}, out);
  CHECK(s.tensors == 2);
  CHECK(s.values == 5);
  REQUIRE(s.steps.size() == 3);

  const train::SafetensorsFile f = train::load_safetensors(out);
  CHECK(f.order == std::vector<std::string>{"w", "b"});  // the first file's order
  CHECK(f.tensors.at("w").shape() == Shape{2, 2});
  CHECK(f.tensors.at("w").to_vector<float>() == std::vector<float>{4, 5, 2, 3.5f});
  // (1e8 + 1 - 1e8) / 3: float32 sums would lose the 1 (1e8 + 1 == 1e8 in float32) and give 0.
  CHECK(f.tensors.at("b").to_vector<float>() == std::vector<float>{static_cast<float>(1.0 / 3.0)});
  // The first file's metadata, plus where the average came from.
  CHECK(f.metadata.at("config") == train::load_safetensors(a).metadata.at("config"));
  CHECK_THAT(f.metadata.at("averaged_from"), Contains("a.safetensors (step ") && Contains("c.safetensors"));

  // One checkpoint averages to itself; the output may replace an input.
  train::average_checkpoints({b}, b);
  CHECK(train::load_safetensors(b).tensors.at("w").to_vector<float>() == std::vector<float>{3, 4, 5, 6});
}

TEST_CASE("average refuses checkpoints of different shapes or configs with one line", "[average][checkpoint][errors]") {
  TempDir tmp;
  const std::string a = write_checkpoint(tmp, "a.safetensors", {{"w", f32({1, 2, 3, 4}, {2, 2})}});
  const std::string out = tmp / "avg.safetensors";
  auto refusal = [&](const std::string& other) {
    const std::string message = checkpoint_error([&] { train::average_checkpoints({a, other}, out); });
    CHECK(message.find('\n') == std::string::npos);
    CHECK_THAT(message, Contains(other) && Contains(a));
    return message;
  };
  const std::string reshaped = write_checkpoint(tmp, "reshaped.safetensors", {{"w", f32({1, 2, 3, 4}, {4})}});
  CHECK_THAT(refusal(reshaped), Contains("tensor 'w'") && Contains("(4,)") && Contains("(2, 2)"));
  const std::string renamed = write_checkpoint(tmp, "renamed.safetensors", {{"v", f32({1, 2, 3, 4}, {2, 2})}});
  CHECK_THAT(refusal(renamed), Contains("no tensor 'w'"));
  const std::string extra =
      write_checkpoint(tmp, "extra.safetensors", {{"w", f32({1, 2, 3, 4}, {2, 2})}, {"x", f32({1}, {1})}});
  CHECK_THAT(refusal(extra), Contains("tensor 'x'"));

  // the same tensors, another model config: d_model 64 instead of 32, or another vocabulary size
  std::string config = train::load_safetensors(a).metadata.at("config");
  const auto at = config.find("d_model = 32");
  REQUIRE(at != std::string::npos);
  const std::string wider = write_checkpoint(tmp, "wider.safetensors", {{"w", f32({1, 2, 3, 4}, {2, 2})}},
                                             {{"config", config.replace(at, 12, "d_model = 64")}});
  CHECK_THAT(refusal(wider), Contains("model.d_model = 64") && Contains("model.d_model = 32"));
  const std::string vocab =
      write_checkpoint(tmp, "vocab.safetensors", {{"w", f32({1, 2, 3, 4}, {2, 2})}}, {{"tgt_vocab", "12345"}});
  CHECK_THAT(refusal(vocab), Contains("tgt_vocab = 12345"));
  CHECK_FALSE(fs::exists(out));  // nothing written on a refusal

  const std::string not_checkpoint = tmp.write("junk.safetensors", "not a checkpoint");
  CHECK_THAT(checkpoint_error([&] { train::average_checkpoints({a, not_checkpoint}, out); }), Contains(not_checkpoint));
  CHECK_THROWS_AS(train::average_checkpoints({}, out), std::invalid_argument);
}

TEST_CASE("average run.average_last defaults to off and needs keep_checkpoints", "[average][checkpoint][config][errors]") {
  TempDir tmp;
  CHECK(config_with(tmp, "").run.average_last == 0);
  CHECK(config_with(tmp, "keep_checkpoints = 3\naverage_last = 3\n").run.average_last == 3);
  CHECK_THAT(train::to_toml(config_with(tmp, "")), Contains("average_last = 0"));
  auto error = [&](const std::string& lines) {
    try {
      config_with(tmp, lines);
    } catch (const train::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no ConfigError)");
  };
  CHECK_THAT(error("average_last = -1\n"), Contains("run.average_last") && Contains("-1"));
  const std::string needs = error("keep_checkpoints = 2\naverage_last = 3\n");
  CHECK_THAT(needs, Contains("cfg.toml:9") && Contains("run.average_last") && Contains("keep_checkpoints >= 3") &&
                        Contains("got 2"));
  CHECK(needs.find('\n') == std::string::npos);
}

TEST_CASE("average_last averages a run's last kept checkpoints and tests with the average", "[average][checkpoint][training]") {
  const AveragedRun& run = averaged_run();
  INFO("stdout: " << run.result.out << "\nstderr: " << run.result.err);
  REQUIRE(run.result.status == 0);
  const std::string log = run.result.out + run.result.err;
  CHECK_THAT(log, Contains("averaged 3 checkpoints (steps 6, 4, 2;"));
  CHECK_THAT(log, Contains("test (checkpoint-average): BLEU|"));
  CHECK_THAT(log, Contains("test (checkpoint-average): chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0 = "));

  // every weight is the float64 mean of the three kept checkpoints' weights, rounded to float32
  const std::vector<std::string> kept = train::last_kept_checkpoints(run.dir, 3);
  REQUIRE(kept == std::vector<std::string>{run.path(train::kLastCheckpointName), run.path("checkpoint-step-000004.safetensors"),
                                           run.path("checkpoint-step-000002.safetensors")});
  std::vector<train::LoadedCheckpoint> inputs;
  for (const std::string& path : kept) inputs.push_back(train::load_checkpoint(path));
  const train::LoadedCheckpoint average = train::load_checkpoint(run.path(train::kAverageCheckpointName));
  CHECK(average.optimizer.empty());  // weights only
  CHECK(average.state.step == 6);
  REQUIRE(average.model.size() == inputs[0].model.size());
  std::int64_t differing = 0;  // weights where the average differs from the last checkpoint
  for (const auto& [name, t] : average.model) {
    const std::vector<float> got = t.to_vector<float>(), a = inputs[0].model.at(name).to_vector<float>(),
                             b = inputs[1].model.at(name).to_vector<float>(), c = inputs[2].model.at(name).to_vector<float>();
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double mean = (static_cast<double>(a[i]) + static_cast<double>(b[i]) + static_cast<double>(c[i])) / 3;
      REQUIRE(got[i] == static_cast<float>(mean));
      differing += got[i] != a[i];
    }
  }
  CHECK(differing > 0);  // training moved the weights, so the average is not checkpoint-last

  // translate and eval load it like any checkpoint (its tokenizer is beside it, in the run)
  const train::InferenceModel im = train::load_inference_model(run.path(train::kAverageCheckpointName));
  CHECK(im.step == 6);
  for (const auto& [name, p] : im.model->named_parameters())
    CHECK(p.to_vector<float>() == average.model.at(name).to_vector<float>());
}

TEST_CASE("average command writes the mean and refuses mismatches with one line", "[average][checkpoint][cli]") {
  const AveragedRun& run = averaged_run();
  REQUIRE(run.result.status == 0);
  TempDir tmp;
  const std::string out = run.path("cli-average.safetensors");
  const CliResult ok = run_cli({"average", "--out", out, run.path(train::kLastCheckpointName),
                                run.path("checkpoint-step-000004.safetensors")});
  INFO("stdout: " << ok.out << "\nstderr: " << ok.err);
  CHECK(ok.status == 0);
  CHECK_THAT(ok.out, Contains("averaged 2 checkpoints (steps 6, 4;") && Contains(out));
  CHECK(ok.err.empty());  // the tokenizer is beside the output: no note
  CHECK(train::load_inference_model(out).step == 6);

  // elsewhere, the output works once the tokenizer is copied next to it: a note says so
  const CliResult away = run_cli({"average", "--out", tmp / "avg.safetensors", run.path(train::kLastCheckpointName)});
  CHECK(away.status == 0);
  CHECK_THAT(away.err, Contains("note:") && Contains("spm*.model") && Contains(run.dir));

  const std::string other = write_checkpoint(tmp, "other.safetensors", {{"w", f32({1}, {1})}});
  check_one_line_error(run_cli({"average", "--out", tmp / "x.safetensors", run.path(train::kLastCheckpointName), other}),
                       {other, "has no tensor", "only checkpoints of one model can be averaged"});
  check_one_line_error(run_cli({"average", "--out", tmp / "x.safetensors"}), {"checkpoints", "required"});
}
