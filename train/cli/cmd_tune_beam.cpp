// `scratchformer tune-beam --checkpoint FILE [--beam 4] [--penalties 0.6,0.8,...]`: beam search's
// length penalty picked on the valid set of the checkpoint's config, and recorded in its config
// (train.valid_beam, train.valid_length_penalty), so that translate and eval use it and the test
// score is never tuned on test (train/checkpoint/beam_tuning.h).
#include <climits>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "train/checkpoint/beam_tuning.h"
#include "train/cli/cli_util.h"
#include "train/cli/commands.h"

namespace sf::cli {

namespace {

struct TuneBeamArgs {
  std::string checkpoint;
  std::int64_t beam = 4;
  std::vector<double> penalties = train::default_length_penalties();
  std::int64_t max_sentences = 0;  // 0 = the whole valid split
  bool dry_run = false;            // print the table, change nothing
  std::string lang = "auto";
};

int run_tune_beam(const TuneBeamArgs& a) {
  train::InferenceModel im = train::load_inference_model(a.checkpoint);
  train::Progress progress;
  const train::BeamTuning tuning = train::tune_length_penalty(im, a.beam, a.penalties, a.max_sentences, progress);
  const bool zh = chinese_output(a.lang);
  std::cout << train::format_tuning(tuning, zh);
  const std::string choice = train::describe_choice(tuning);
  if (a.dry_run) {
    std::cout << (zh ? "（--dry-run：未写入）最佳 " : "(--dry-run: not recorded) best ") << choice << "\n";
    return 0;
  }
  train::record_beam_choice(a.checkpoint, tuning);
  std::cout << (zh ? "已写入 " : "recorded ") << choice << (zh ? "，位置 " : " in ") << a.checkpoint << "\n";
  return 0;
}

}  // namespace

Command add_tune_beam_command(CLI::App& app) {
  auto a = std::make_shared<TuneBeamArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tune-beam", "Pick beam search's length penalty on the valid set and record it in the checkpoint's config");
  cmd->add_option("--checkpoint", a->checkpoint, "Checkpoint file (its config names the valid set)")->required();
  cmd->add_option("--beam", a->beam, "Beam size to tune for (default: 4)")->check(beam_size_check());
  cmd->add_option("--penalties", a->penalties, "Length penalties alpha to try (default: 0,0.2,...,2)")
      ->delimiter(',')
      ->check(length_penalty_check());
  cmd->add_option("--max-sentences", a->max_sentences, "Use the first N valid sentences (default: all)")
      ->check(whole_number_in(0, LLONG_MAX, "a number of sentences of at least 0"));
  cmd->add_flag("--dry-run", a->dry_run, "Print the table only; leave the checkpoint as it is");
  add_lang_option(*cmd, a->lang);
  return {cmd, [a] { return run_tune_beam(*a); }};
}

}  // namespace sf::cli
