// `scratchformer attention --checkpoint FILE --src SENTENCE [--tgt SENTENCE]`: every decoder
// layer's cross- and self-attention, per head, for one sentence, drawn as two SVG files
// (train/classroom/attention_figures.h); for a decoder-only or encoder-only model, its one
// stack's self-attention (one file).
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>

#include "train/classroom/attention_figures.h"
#include "train/classroom/svg.h"
#include "train/cli/commands.h"
#include "train/setup.h"

namespace sf::cli {

namespace {

namespace fs = std::filesystem;

struct AttentionArgs {
  std::string checkpoint, src, tgt, out;  // out: "" = the checkpoint's directory
};

// tgt_given: --tgt was on the command line (an empty --tgt is given too).
int run_attention(const AttentionArgs& a, bool tgt_given) {
  const train::InferenceModel im = train::load_inference_model(a.checkpoint);
  const auto fig = train::attention_figures(im, a.src, tgt_given ? std::optional<std::string>(a.tgt) : std::nullopt);
  const fs::path dir = a.out.empty() ? fs::absolute(a.checkpoint).parent_path() : fs::path(a.out);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("attention: cannot create the output directory " + dir.string() + ": " + ec.message());
  const std::string cross = (dir / "cross_attention.svg").string(), self = (dir / "self_attention.svg").string();
  if (fig.cross_svg.empty()) {  // decoder-only or encoder-only: one stack of self-attention
    train::write_file_atomically(self, fig.self_svg);
    if (!fig.translation.empty()) std::cout << "translation (greedy): " << fig.translation << "\n";
    std::cout << self << "\n";
    return 0;
  }
  train::write_file_atomically(cross, fig.cross_svg);
  train::write_file_atomically(self, fig.self_svg);
  std::cout << (fig.teacher_forced ? "target (teacher-forced): " : "translation (greedy): ") << fig.translation << "\n"
            << cross << "\n"
            << self << "\n";
  return 0;
}

}  // namespace

Command add_attention_command(CLI::App& app) {
  auto a = std::make_shared<AttentionArgs>();
  CLI::App* cmd = app.add_subcommand(
      "attention", "Heatmaps of every attention layer, per head, for one sentence (SVG): an encoder-decoder's "
                   "cross- and self-attention, a decoder-only or encoder-only model's self-attention");
  cmd->add_option("--checkpoint", a->checkpoint, "Checkpoint file (its directory must hold the tokenizer)")->required();
  cmd->add_option("--src", a->src,
                  "The source sentence (decoder-only: the prompt or the sentence to translate; classify: text_a<TAB>text_b)")
      ->required();
  cmd->add_option("--tgt", a->tgt, "A target to feed (teacher forcing) instead of the greedy translation");
  cmd->add_option("--out", a->out, "Directory for cross_attention.svg and self_attention.svg (default: the checkpoint's)");
  return {cmd, [a, cmd] { return run_attention(*a, cmd->count("--tgt") > 0); }};
}

}  // namespace sf::cli
