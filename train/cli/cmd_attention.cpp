// `scratchformer attention --checkpoint FILE --src SENTENCE [--tgt SENTENCE] [--out-dir DIR]`: every
// attention layer, per head, for one sentence, drawn as SVG files (train/classroom/attention_figures.h):
// an encoder-decoder's encoder self-attention, decoder self-attention, cross-attention and an
// overview of the first two side by side; a decoder-only or encoder-only model's one stack of
// self-attention (one file). Several files, so the option is --out-dir (--out is always one file).
// --lang zh writes the figures' titles and captions, and the line before the paths, in Chinese.
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "train/classroom/attention_figures.h"
#include "train/classroom/svg.h"
#include "train/cli/cli_util.h"
#include "train/cli/commands.h"
#include "train/setup.h"

namespace sf::cli {

namespace {

namespace fs = std::filesystem;

struct AttentionArgs {
  std::string checkpoint, src, tgt;
  std::string out_dir;  // "" = the checkpoint's directory
  std::string out;      // refused: attention writes several files
  std::int64_t pad = 0;
  std::string lang = "auto";  // en | zh | auto (LANG)
};

// tgt_given: --tgt was on the command line (an empty --tgt is given too).
int run_attention(const AttentionArgs& a, bool tgt_given, bool out_given) {
  if (out_given)
    throw std::invalid_argument("attention: --out names one file, but attention writes several: use --out-dir DIR");
  const fs::path dir = a.out_dir.empty() ? fs::absolute(a.checkpoint).parent_path() : fs::path(a.out_dir);
  if (!a.out_dir.empty() && fs::exists(dir) && !fs::is_directory(dir))
    throw std::invalid_argument("attention: --out-dir " + a.out_dir + " is a file; --out-dir names a directory to write into");
  const train::InferenceModel im = train::load_inference_model(a.checkpoint);
  const train::Lang lang = chinese_output(a.lang) ? train::Lang::Zh : train::Lang::En;
  const auto fig =
      train::attention_figures(im, a.src, tgt_given ? std::optional<std::string>(a.tgt) : std::nullopt, a.pad, lang);
  train::make_output_dir(dir.string(), "attention");
  const std::vector<std::pair<const char*, const std::string*>> files = {
      {"attention_overview.svg", &fig.overview_svg},          // encoder beside decoder self-attention
      {"encoder_self_attention.svg", &fig.encoder_svg},       // bidirectional
      {"self_attention.svg", &fig.self_svg},                  // causal (or the single stack's)
      {"cross_attention.svg", &fig.cross_svg}};
  if (!fig.translation.empty() || fig.teacher_forced)
    std::cout << (fig.teacher_forced ? train::text(lang, "target (teacher-forced): ", "目标句（教师强制）：")
                                     : train::text(lang, "translation (greedy): ", "译文（贪心解码）："))
              << fig.translation << "\n";
  for (const auto& [name, svg] : files) {
    if (svg->empty()) continue;  // a single stack has one figure
    const std::string path = (dir / name).string();
    train::write_file_atomically(path, *svg);
    std::cout << path << "\n";
  }
  return 0;
}

}  // namespace

Command add_attention_command(CLI::App& app) {
  auto a = std::make_shared<AttentionArgs>();
  CLI::App* cmd = app.add_subcommand(
      "attention", "Heatmaps of every attention layer, per head, for one sentence (SVG files): an encoder-decoder's "
                   "encoder self-attention, decoder self-attention and cross-attention, a decoder-only or encoder-only "
                   "model's self-attention (a Transformer: arch rnn has no heads to draw)");
  cmd->add_option("--checkpoint", a->checkpoint, "Checkpoint file (its directory must hold the tokenizer)")->required();
  cmd->add_option("--src", a->src,
                  "The source sentence (decoder-only: the prompt or the sentence to translate; classify: text_a<TAB>text_b)")
      ->required();
  cmd->add_option("--tgt", a->tgt, "A target to feed (teacher forcing) instead of the greedy translation");
  cmd->add_option("--pad", a->pad,
                  "Append N <pad> tokens to the source, as a batch pads a shorter row: their columns show masked (default: 0)");
  cmd->add_option("--out-dir", a->out_dir,
                  "Directory for attention_overview.svg, encoder_self_attention.svg, self_attention.svg and "
                  "cross_attention.svg (default: the checkpoint's)");
  cmd->add_option("--out", a->out, "Not for attention (it writes several files): use --out-dir")->group("");
  add_lang_option(*cmd, a->lang);
  return {cmd, [a, cmd] { return run_attention(*a, cmd->count("--tgt") > 0, cmd->count("--out") > 0); }};
}

}  // namespace sf::cli
