// `scratchformer average --out FILE CKPT...`: the element-wise mean of the weights of several
// checkpoints of one model, written as a checkpoint that translate and eval load
// (train/checkpoint/checkpoint_average.h). Typically the last few of a run (run.keep_checkpoints = K):
//   scratchformer average --out runs/x/checkpoint-average.safetensors
//       runs/x/checkpoint-last.safetensors runs/x/checkpoint-step-00*.safetensors   (one line)
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "train/checkpoint/checkpoint_average.h"
#include "train/cli/commands.h"
#include "train/setup.h"

namespace sf::cli {

namespace {

namespace fs = std::filesystem;

struct AverageArgs {
  std::string out;
  std::vector<std::string> checkpoints;
};

int run_average(const AverageArgs& a) {
  const train::AverageSummary summary = train::average_checkpoints(a.checkpoints, a.out);
  std::cout << train::describe_average(summary, a.out) << "\n";
  // A checkpoint is loaded with the tokenizer of its folder (train/setup.h load_inference_model).
  const train::Config config = train::config_from_string(summary.config_toml, a.checkpoints.front());
  const std::string out_dir = fs::absolute(a.out).parent_path().string();
  if (!train::tokenizers_exist(config, out_dir))
    std::cerr << "scratchformer: note: translate and eval read the tokenizer beside the checkpoint; copy spm*.model from "
              << fs::absolute(a.checkpoints.front()).parent_path().string() << " into " << out_dir << "\n";
  return 0;
}

}  // namespace

Command add_average_command(CLI::App& app) {
  auto a = std::make_shared<AverageArgs>();
  CLI::App* cmd = app.add_subcommand(
      "average", "Average the weights of checkpoints of one model into a new checkpoint (checkpoint averaging)");
  cmd->add_option("--out", a->out, "The averaged checkpoint to write, e.g. runs/x/checkpoint-average.safetensors")
      ->required();
  cmd->add_option("checkpoints", a->checkpoints, "The checkpoints to average (same model and config), e.g. the last 3")
      ->required();
  return {cmd, [a] { return run_average(*a); }};
}

}  // namespace sf::cli
