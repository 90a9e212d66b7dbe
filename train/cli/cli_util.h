// What several subcommands share (train/cli/cmd_*.cpp): reading input lines, turning them into
// token ids the model can take, translating them in input order, and a check for options that
// count something (--beam, --trace-steps).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "autograd/runtime/bf16.h"
#include "train/eval/decode.h"
#include "train/setup.h"

namespace sf::cli {

// Reads all lines of a file or of stdin ("-" or empty path) as they are, without their "\n" or
// "\r\n": a line that is not UTF-8 is reported by encode_inputs and gets an empty translation, so
// the output always has one line per input line (the same from a file and from stdin).
std::vector<std::string> read_input_lines(const std::string& path);

// Encodes input lines for the model: invalid UTF-8 and over-long lines are reported on stderr
// (the line is skipped or truncated), never a crash. Empty lines translate to empty lines.
// `origin` names the input in the warnings ("stdin" or the file).
std::vector<std::vector<std::int64_t>> encode_inputs(const std::vector<std::string>& lines, const train::Tokenizers& tok,
                                                     std::int64_t max_len, const std::string& origin);

// Translates non-empty inputs; empty ones stay empty. Output order = input order.
std::vector<std::string> translate_lines(const train::InferenceModel& im, const std::vector<std::vector<std::int64_t>>& ids,
                                         const train::DecodeOptions& opt);

// translate and eval take a model trained for translation (encoder-decoder or decoder-only):
// otherwise one line naming what the checkpoint holds (train/task.h require_model).
void require_translation(const train::InferenceModel& im, const std::string& checkpoint, const std::string& command);

// --beam (0 = the config's train.valid_beam) and --length-penalty (< 0 = the config's
// train.valid_length_penalty, which `tune-beam` sets) as decoding options.
train::DecodeOptions decode_options(const train::InferenceModel& im, std::int64_t beam, double length_penalty);

// The --length-penalty option of translate, eval and tune-beam: alpha in [0, 5].
CLI::Validator length_penalty_check();

// The checkout this program runs from (train/data_folder.h): the tree `handout` copies and whose
// handout.json `grade` reads. An installed program has none: then --source is required.
std::string checkout_folder(const std::string& command);

// --lang en|zh|auto of the commands whose headings and tables exist in Chinese too; auto (the
// default) is Chinese when the LANG environment variable starts with "zh" (zh_CN.UTF-8).
void add_lang_option(CLI::App& cmd, std::string& lang);
bool chinese_output(const std::string& lang);

// Numbers in [low, high], refused with "expected WHAT, got 'VALUE'" (CLI::Range and
// CLI::NonNegativeNumber would say "Value -1 not in range 0.000000 to 1797...(309 digits).000000").
// `what` names the number and its range: "a port in [0, 65535]".
CLI::Validator whole_number_in(long long low, long long high, const std::string& what);
CLI::Validator number_in(double low, double high, const std::string& what);
// A whole number >= 1 for options like --beam and --trace-steps. `what` names it in the
// message: "a beam size" gives "expected a beam size of at least 1, got '0'".
CLI::Validator at_least_one(const std::string& what);
// --precision float32|bf16 on `cmd` into `precision` (translate, generate, eval): bf16 runs the matrix
// products in bf16 with float32 sums (autograd/runtime/bf16.h).
void add_precision_option(CLI::App* cmd, std::string& precision);
// The precision for the rest of the command: a bf16 scope, refused on a CPU without bf16 units.
MatmulPrecisionScope precision_scope(const std::string& precision);
CLI::Validator beam_size_check();  // at_least_one("a beam size")

}  // namespace sf::cli
