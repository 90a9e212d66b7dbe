// `scratchformer classify --checkpoint FILE [--input FILE]`: the label of each line (a sentence,
// or a pair as text_a<TAB>text_b) by an encoder-only classifier (data.task = "classify"), with
// its probability, one "label<TAB>probability" line per input line.
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "data/corpus.h"
#include "train/cli/cli_util.h"
#include "train/cli/commands.h"
#include "train/eval/decode.h"
#include "train/setup.h"
#include "train/task.h"
#include "train/training_data.h"

namespace sf::cli {

namespace {

struct ClassifyArgs {
  std::string checkpoint, input;  // input: "" = stdin
};

constexpr std::size_t kRowsPerBatch = 64;

// One input line -> the encoder's input <cls> a [<sep> b]; empty for a blank line.
std::vector<std::int64_t> classify_ids(const train::InferenceModel& im, const std::string& line, const std::string& origin,
                                       std::size_t line_no) {
  if (line.find_first_not_of(" \t\r") == std::string::npos) return {};
  std::size_t bad = 0;
  if (!data::valid_utf8(line, &bad))
    throw std::invalid_argument(origin + " line " + std::to_string(line_no) + ": invalid UTF-8 at byte " + std::to_string(bad + 1));
  const auto tab = line.find('\t');
  if (tab != std::string::npos && line.find('\t', tab + 1) != std::string::npos)
    throw std::invalid_argument(origin + " line " + std::to_string(line_no) +
                                ": expected text or text_a<TAB>text_b, found more than one tab");
  auto ids = train::classify_input(im.tokenizers->src, line.substr(0, tab), tab == std::string::npos ? "" : line.substr(tab + 1));
  if (static_cast<std::int64_t>(ids.size()) > im.config.model.max_len)
    throw std::invalid_argument(origin + " line " + std::to_string(line_no) + ": " + std::to_string(ids.size()) +
                                " tokens, the model has " + std::to_string(im.config.model.max_len) + " positions");
  return ids;
}

int run_classify(const ClassifyArgs& a) {
  const train::InferenceModel im = train::load_inference_model(a.checkpoint);
  train::require_model(im.config, a.checkpoint, "classify", im.config.data.task == "classify",
                       "an encoder-only model trained with data.task = \"classify\"");
  const std::vector<std::string> labels = train::class_labels(im.config.data);
  const auto lines = read_input_lines(a.input);
  std::vector<std::vector<std::int64_t>> rows;
  for (std::size_t i = 0; i < lines.size(); ++i) rows.push_back(classify_ids(im, lines[i], a.input.empty() ? "stdin" : a.input, i + 1));
  NoGradGuard no_grad;
  for (std::size_t start = 0; start < rows.size(); start += kRowsPerBatch) {
    std::vector<std::vector<std::int64_t>> batch;
    for (std::size_t i = start; i < std::min(rows.size(), start + kRowsPerBatch); ++i)
      if (!rows[i].empty()) batch.push_back(rows[i]);
    const auto C = static_cast<std::int64_t>(labels.size());
    const std::vector<float> p =
        batch.empty() ? std::vector<float>{} : softmax(im.model->forward(train::pad_batch(batch, data::kPadId), Tensor()), -1).to_vector<float>();
    for (std::size_t i = start, b = 0; i < std::min(rows.size(), start + kRowsPerBatch); ++i) {
      if (rows[i].empty()) {
        std::cout << "\n";  // a blank line stays blank
        continue;
      }
      std::int64_t best = 0;
      for (std::int64_t c = 1; c < C; ++c) best = p[b * C + c] > p[b * C + best] ? c : best;
      std::cout << labels[best] << "\t" << std::fixed << std::setprecision(3) << p[b * C + best] << "\n";
      ++b;
    }
  }
  return 0;
}

}  // namespace

Command add_classify_command(CLI::App& app) {
  auto a = std::make_shared<ClassifyArgs>();
  CLI::App* cmd = app.add_subcommand("classify", "Label each line (text, or text_a<TAB>text_b) with an encoder-only classifier");
  cmd->add_option("--checkpoint", a->checkpoint, "Checkpoint of an encoder-only model trained with data.task = \"classify\"")
      ->required();
  cmd->add_option("--input", a->input, "Input file, one example per line (default: stdin)");
  return {cmd, [a] { return run_classify(*a); }};
}

}  // namespace sf::cli
