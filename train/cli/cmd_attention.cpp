// `scratchformer attention --checkpoint FILE --src SENTENCE [--tgt SENTENCE] [--out-dir DIR]`: every
// attention layer, per head, for one sentence, drawn as SVG files (train/classroom/attention_figures.h):
// an encoder-decoder's encoder self-attention, decoder self-attention, cross-attention and an
// overview of the first two side by side; a decoder-only or encoder-only model's one stack of
// self-attention (one file). Several files, so the option is --out-dir (--out is always one file).
// --lang zh writes the figures' titles and captions, and the line before the paths, in Chinese.
// --attribution (an encoder-decoder Transformer) also prints, for every target token, the source
// token each method credits most, and writes attribution.svg (train/classroom/attribution.h).
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "train/classroom/attention_figures.h"
#include "train/classroom/attribution.h"
#include "train/classroom/svg.h"
#include "train/cli/cli_util.h"
#include "train/cli/commands.h"
#include "train/lessons/demo.h"
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
  bool attribution = false;
};

// For each target token: the source token each method credits most, and each head's cost.
void print_attribution(const train::SentenceAttribution& r, train::Lang lang) {
  const std::vector<std::pair<const char*, const train::Matrix*>> methods = {
      {"attention", &r.a.attention_mean}, {"rollout", &r.a.rollout}, {"grad x input", &r.a.gradient_input}, {"integrated", &r.a.integrated}};
  std::cout << train::text(lang, "most-credited source token per method (attention: last layer, mean of heads):\n",
                           "每种方法认为贡献最大的源端词元（attention：最后一层各头平均）：\n")
            << "target           attention        rollout          grad x input     integrated\n";
  const auto pad = [](const std::string& s) { return train::pad_to_width(s, 16) + " "; };
  for (std::size_t t = 0; t < r.target.size(); ++t) {
    std::cout << pad(r.target[t]);
    for (const auto& [name, m] : methods) std::cout << pad(r.source[static_cast<std::size_t>(train::row_argmax(*m)[t])]);
    std::cout << "\n";
  }
  std::cout << train::text(lang, "head ablation, mean drop of log p(target token) when the head is zeroed:\n",
                           "头消融：把这个头置零时目标词元 log p 的平均下降：\n");
  for (std::size_t l = 0; l < r.a.ablation.size(); ++l)
    for (std::size_t h = 0; h < r.a.ablation[l].size(); ++h) {
      double sum = 0;
      for (double d : r.a.ablation[l][h]) sum += d;
      std::cout << "  layer " << l + 1 << " head " << h + 1 << ": " << lessons::fixed(sum / static_cast<double>(r.target.size()), 4) << "\n";
    }
}

// The four methods' maps side by side.
std::string attribution_svg(const train::SentenceAttribution& r) {
  const double cell = 30, width = std::max(260.0, cell * static_cast<double>(r.source.size()) + 100);
  train::SvgWriter svg(40 + 4 * width, 200 + cell * static_cast<double>(r.target.size()));
  svg.text(16, 26, "attention beside attribution / 注意力与归因: " + r.translation, {.size = train::kTitleFont, .bold = true});
  const std::vector<std::pair<std::string, const train::Matrix*>> methods = {
      {"attention (last layer, head mean)", &r.a.attention_mean}, {"rollout", &r.a.rollout},
      {"gradient x input", &r.a.gradient_input}, {"integrated gradients", &r.a.integrated}};
  for (std::size_t m = 0; m < methods.size(); ++m) {
    double hi = 1e-12;
    for (const auto& row : *methods[m].second)
      for (double v : row) hi = std::max(hi, std::abs(v));
    const bool is_signed = m >= 2;
    lessons::draw_heatmap(svg, 90 + m * width, 150, cell,
                          {*methods[m].second, r.target, r.source, methods[m].first, 0, is_signed ? hi : 1, is_signed});
  }
  return svg.finish();
}

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
  if (a.attribution) {
    const train::SentenceAttribution r =
        train::attribute_sentence(im, a.src, tgt_given ? std::optional<std::string>(a.tgt) : std::nullopt);
    print_attribution(r, lang);
    const std::string path = (dir / "attribution.svg").string();
    train::write_file_atomically(path, attribution_svg(r));
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
  cmd->add_flag("--attribution", a->attribution,
                "Also credit source tokens with each target token by attention, rollout, gradient x input and integrated "
                "gradients, and rank the heads by ablation (encoder-decoder Transformer; writes attribution.svg)");
  add_lang_option(*cmd, a->lang);
  return {cmd, [a, cmd] { return run_attention(*a, cmd->count("--tgt") > 0, cmd->count("--out") > 0); }};
}

}  // namespace sf::cli
