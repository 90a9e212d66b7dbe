// Tests for train/beam_tuning (`scratchformer tune-beam`): the length penalty is picked on the
// valid set (the row with the highest valid BLEU), recorded in the checkpoint's config with the
// weights unchanged, and then used by translate and eval; bad arguments are one-line errors.
#include <string>
#include <vector>

#include "run_util.h"
#include "train/checkpoint/beam_tuning.h"
#include "train/config.h"
#include "train/checkpoint/safetensors.h"
#include "train/setup.h"

namespace {

using namespace sf;
using namespace sf::test;
using Catch::Contains;

// A small reverse run (40 steps), trained once for the file in a folder removed at exit.
struct TunedRun {
  TempDir tmp{"sf_tune_beam"};
  std::string dir = tmp / "run";
  CliResult result;
  TunedRun() { result = run_cli(train_args(small_reverse_run(tmp, dir, {"train.max_steps=40", "train.valid_every=40"})), tmp); }
  std::string best() const { return dir + "/checkpoint-best.safetensors"; }
};

const TunedRun& tuned_run() {
  static const TunedRun run;
  return run;
}

}  // namespace

TEST_CASE("tune-beam picks the alpha with the highest valid BLEU and records it", "[beam][training]") {
  const TunedRun& run = tuned_run();
  REQUIRE(run.result.status == 0);
  train::InferenceModel im = train::load_inference_model(run.best());
  train::Progress progress;
  const train::BeamTuning t = train::tune_length_penalty(im, 3, {0.0, 1.0, 2.0}, 0, progress);
  REQUIRE(t.scores.size() == 3);
  CHECK(t.beam == 3);
  CHECK(t.sentences == 16);  // small_reverse_run's 16 valid pairs
  for (const train::PenaltyScore& s : t.scores) {
    CHECK(s.bleu.score <= t.scores[t.best].bleu.score);
    CHECK(s.chrf >= 0);
    CHECK(s.chrf <= 100);
  }
  for (std::size_t i = 0; i < t.best; ++i) CHECK(t.scores[i].bleu.score < t.scores[t.best].bleu.score);  // the first of equals
  const std::string table = train::format_tuning(t, false);
  CHECK(count_lines(table) == 5);
  CHECK_THAT(table, Contains("<- chosen"));
  CHECK_THAT(train::format_tuning(t, true), Contains("选中"));

  // recorded: the config says beam 3 and the chosen alpha, the weights are the same bytes
  const TempDir tmp("sf_tune_record");
  const std::string copy = tmp / "checkpoint-best.safetensors";
  fs::copy_file(run.best(), copy);
  const train::SafetensorsFile before = train::load_safetensors(copy);
  train::record_beam_choice(copy, t);
  const train::SafetensorsFile after = train::load_safetensors(copy);
  const train::Config cfg = train::config_from_string(after.metadata.at("config"), copy);
  CHECK(cfg.train.valid_beam == 3);
  CHECK(cfg.train.valid_length_penalty == t.scores[t.best].alpha);
  CHECK_THAT(after.metadata.at("length_penalty_sweep"), Contains("beam 3 on 16 valid sentences: 0.00 "));
  REQUIRE(after.order == before.order);
  for (const std::string& name : before.order)
    CHECK(max_abs_diff(after.tensors.at(name), before.tensors.at(name)) == 0);
}

TEST_CASE("tune-beam's choice is what translate and eval use unless told otherwise", "[beam][translate]") {
  const TunedRun& run = tuned_run();
  REQUIRE(run.result.status == 0);
  const TempDir tmp("sf_tune_cli");
  for (const char* f : {"checkpoint-best.safetensors", "spm.model", "spm.vocab"})
    if (fs::exists(run.dir + "/" + f)) fs::copy_file(run.dir + "/" + f, tmp / f);
  const std::string ckpt = tmp / "checkpoint-best.safetensors";
  const CliResult tuned = run_cli({"tune-beam", "--checkpoint", ckpt, "--beam", "2", "--penalties", "0,0.5", "--lang", "en"});
  INFO(tuned.err);
  REQUIRE(tuned.status == 0);
  CHECK_THAT(tuned.out, Contains("recorded train.valid_beam = 2, train.valid_length_penalty = "));
  const train::Config cfg = train::config_from_string(train::load_safetensors(ckpt).metadata.at("config"), ckpt);
  CHECK(cfg.train.valid_beam == 2);
  // translate without --beam / --length-penalty equals translate with the recorded values
  const std::string alpha = cfg.train.valid_length_penalty == 0 ? "0" : "0.5";
  const std::string input = tmp.write("in.txt", first_lines(kReverseData + "valid.src", 8));
  const CliResult by_default = run_cli({"translate", "--checkpoint", ckpt, "--input", input});
  const CliResult explicit_ = run_cli({"translate", "--checkpoint", ckpt, "--input", input, "--beam", "2",
                                       "--length-penalty", alpha});
  REQUIRE(by_default.status == 0);
  CHECK(by_default.out == explicit_.out);
}

TEST_CASE("tune-beam refuses greedy, bad penalties and a missing checkpoint with one line", "[beam][errors]") {
  const TunedRun& run = tuned_run();
  REQUIRE(run.result.status == 0);
  train::InferenceModel im = train::load_inference_model(run.best());
  train::Progress progress;
  CHECK_THROWS_WITH(train::tune_length_penalty(im, 1, {1.0}, 0, progress), Contains("expected --beam >= 2"));
  CHECK_THROWS_WITH(train::tune_length_penalty(im, 4, {}, 0, progress), Contains("at least one length penalty"));
  check_one_line_error(run_cli({"tune-beam", "--checkpoint", run.best(), "--penalties", "0.5,7"}), {"--penalties"});
  check_one_line_error(run_cli({"tune-beam", "--checkpoint", run.dir + "/nope.safetensors"}), {"nope.safetensors"});
  check_one_line_error(run_cli({"eval", "--checkpoint", run.best(), "--length-penalty", "-1", "--src", "a", "--ref", "b"}),
                       {"--length-penalty"});
}
