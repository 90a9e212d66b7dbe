// `scratchformer translate --checkpoint FILE`: translates sentences, one per line, from --input or
// stdin to stdout, in input order (greedy or beam search: train/eval/decode.h), with an
// encoder-decoder, an rnn or a decoder-only model trained for translation (the prompt <s> source <sep>). --trace prints
// module statistics for the first sentence (train/classroom/trace.h).
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/classroom/trace.h"
#include "train/cli/cli_util.h"
#include "train/cli/commands.h"
#include "train/eval/evaluate.h"
#include "train/setup.h"

namespace sf::cli {

namespace {

struct TranslateArgs {
  std::string checkpoint, input;  // input: "" = stdin
  std::int64_t beam = 0;          // 0 = the config's valid_beam
  double length_penalty = -1;     // < 0 = the config's valid_length_penalty
  bool trace = false;             // --trace: module statistics for the first sentence
  std::int64_t trace_steps = 1;   // decoding steps traced
  std::string trace_file;         // "" = stderr
  std::string precision = "float32";  // --precision: float32 | bf16 matrix products
};

// The first non-empty input sentence through encoder and trace_steps decoding steps, under a
// trace (train/classroom/trace.h), written to --trace-file or stderr.
void trace_first_sentence(const train::InferenceModel& im, const std::vector<std::vector<std::int64_t>>& ids,
                          const TranslateArgs& a) {
  const auto first = std::find_if(ids.begin(), ids.end(), [](const auto& v) { return !v.empty(); });
  if (first == ids.end()) throw std::invalid_argument("translate --trace: no non-empty input sentence to trace");
  std::ofstream file;
  if (!a.trace_file.empty()) {
    file.open(a.trace_file, std::ios::trunc);
    if (!file) throw std::runtime_error("--trace-file: cannot open " + a.trace_file + " for writing");
  }
  // a decoder-only model reads the prompt <s> source <sep>
  const auto input = im.config.model.arch == "decoder-only" ? train::translation_prompt(*im.tokenizers, *first) : *first;
  train::trace_translation(*im.model, input, a.trace_steps, file.is_open() ? static_cast<std::ostream&>(file) : std::cerr);
}

int run_translate(TranslateArgs& a, const CLI::App& cmd) {
  a.trace = a.trace || cmd.count("--trace-steps") > 0 || !a.trace_file.empty();  // both imply --trace
  const auto precision = precision_scope(a.precision);
  const train::InferenceModel im = train::load_inference_model(a.checkpoint);
  require_translation(im, a.checkpoint, "translate");
  const auto lines = read_input_lines(a.input);
  const auto ids = encode_inputs(lines, *im.tokenizers, train::max_source_tokens(im), a.input.empty() ? "stdin" : a.input);
  if (a.trace) trace_first_sentence(im, ids, a);
  for (const auto& hyp : translate_lines(im, ids, decode_options(im, a.beam, a.length_penalty))) std::cout << hyp << "\n";
  return 0;
}

}  // namespace

Command add_translate_command(CLI::App& app) {
  auto a = std::make_shared<TranslateArgs>();
  CLI::App* cmd = app.add_subcommand("translate", "Translate sentences (one per line) with a trained checkpoint");
  cmd->add_option("--checkpoint", a->checkpoint, "Checkpoint file (its directory must hold the tokenizer)")->required();
  cmd->add_option("--input", a->input, "Input file (default: stdin)");
  cmd->add_option("--beam", a->beam, "Beam size (1 = greedy; default: the config's train.valid_beam)")
      ->check(beam_size_check());
  cmd->add_option("--length-penalty", a->length_penalty,
                  "Beam search length penalty alpha (score / length^alpha; default: the config's "
                  "train.valid_length_penalty, which tune-beam picks on the valid set)")
      ->check(length_penalty_check());
  add_precision_option(cmd, a->precision);
  cmd->add_flag("--trace", a->trace,
                "Print each module's output statistics for the first sentence (encoder, first decoding step)");
  cmd->add_option("--trace-steps", a->trace_steps, "Decoding steps to trace (default: 1; implies --trace)")
      ->check(at_least_one("a number of steps"));
  cmd->add_option("--trace-file", a->trace_file, "Write the trace to this file instead of stderr (implies --trace)");
  return {cmd, [a, cmd] { return run_translate(*a, *cmd); }};
}

}  // namespace sf::cli
