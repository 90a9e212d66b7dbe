#include "train/cli/cli_util.h"

#include "train/data_folder.h"
#include "train/task.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "data/corpus.h"
#include "train/eval/evaluate.h"

namespace sf::cli {

namespace fs = std::filesystem;

std::vector<std::string> read_input_lines(const std::string& path) {
  std::ifstream file;
  if (!path.empty() && path != "-") {
    if (!fs::exists(path)) throw std::invalid_argument("input file not found: " + path);
    if (fs::is_directory(path)) throw std::invalid_argument("input " + path + " is a directory, expected a text file");
    file.open(path, std::ios::binary);
    if (!file) throw std::runtime_error("cannot open the input file " + path);
  }
  std::istream& in = file.is_open() ? file : std::cin;
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  if (!lines.empty() && lines[0].rfind("\xEF\xBB\xBF", 0) == 0) lines[0].erase(0, 3);  // a byte-order mark
  return lines;
}

std::vector<std::vector<std::int64_t>> encode_inputs(const std::vector<std::string>& lines, const train::Tokenizers& tok,
                                                     std::int64_t max_len, const std::string& origin) {
  std::vector<std::vector<std::int64_t>> ids(lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::size_t bad = 0;
    if (!data::valid_utf8(lines[i], &bad)) {
      std::cerr << "scratchformer: warning: " << origin << " line " << i + 1 << ": invalid UTF-8 at byte " << bad + 1
                << "; writing an empty translation\n";
      continue;
    }
    // Only the start of a huge line can fit the model: tokenise no more than max_len tokens can
    // take (data::kMaxBytesPerToken; a 10 MB line would take GBs to tokenise), cut at a character.
    std::string_view text = lines[i];
    const std::size_t max_bytes = static_cast<std::size_t>(max_len) * data::kMaxBytesPerToken;
    if (text.size() > max_bytes) {
      std::size_t cut = max_bytes;
      while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
      text = text.substr(0, cut);
    }
    ids[i] = tok.src.encode(std::string(text));
    if (static_cast<std::int64_t>(ids[i].size()) > max_len || text.size() < lines[i].size()) {
      std::cerr << "scratchformer: warning: " << origin << " line " << i + 1 << ": "
                << (text.size() < lines[i].size() ? "over " : "") << ids[i].size()
                << " tokens, truncated to the model's limit of " << max_len << "\n";
      ids[i].resize(std::min(ids[i].size(), static_cast<std::size_t>(max_len)));
    }
  }
  return ids;
}

std::vector<std::string> translate_lines(const train::InferenceModel& im, const std::vector<std::vector<std::int64_t>>& ids,
                                         const train::DecodeOptions& opt) {
  std::vector<std::vector<std::int64_t>> nonempty;
  std::vector<std::size_t> where;
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (!ids[i].empty()) nonempty.push_back(ids[i]), where.push_back(i);
  std::vector<std::string> out(ids.size());
  const auto hyps = train::translate_all(*im.model, *im.tokenizers, nonempty, opt);
  for (std::size_t k = 0; k < where.size(); ++k) out[where[k]] = hyps[k];
  return out;
}

void require_translation(const train::InferenceModel& im, const std::string& checkpoint, const std::string& command) {
  train::require_model(im.config, checkpoint, command, im.config.data.task == "translation",
                       "an encoder-decoder, rnn or decoder-only model trained with data.task = \"translation\"");
}

train::DecodeOptions decode_options(const train::InferenceModel& im, std::int64_t beam, double length_penalty) {
  train::DecodeOptions opt;
  opt.beam = beam > 0 ? beam : im.config.train.valid_beam;
  opt.length_penalty = length_penalty >= 0 ? length_penalty : im.config.train.valid_length_penalty;
  return opt;
}

void add_lang_option(CLI::App& cmd, std::string& lang) {
  cmd.add_option("--lang", lang, "Language of the headings and tables: en, zh (中文) or auto (default: from LANG)")
      ->check(CLI::IsMember({"en", "zh", "auto"}));
}

bool chinese_output(const std::string& lang) {
  if (lang != "auto") return lang == "zh";
  const char* env = std::getenv("LANG");
  return env != nullptr && std::string_view(env).rfind("zh", 0) == 0;
}

namespace {

// "expected WHAT, got 'VALUE'" unless the whole of `value` is a number, as `parse` reads it
// (std::stoll or std::stod), in [low, high]. NaN is in no range.
template <class T, class Parse>
CLI::Validator number_check(T low, T high, const std::string& what, Parse parse) {
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        T x{};
        std::size_t used = 0;
        try {
          x = parse(value, &used);
        } catch (const std::exception&) {
        }
        if (used != value.size() || !(x >= low && x <= high)) return "expected " + what + ", got '" + value + "'";
        return "";
      },
      "");
}

}  // namespace

CLI::Validator whole_number_in(long long low, long long high, const std::string& what) {
  return number_check(low, high, what, [](const std::string& v, std::size_t* used) { return std::stoll(v, used); });
}

CLI::Validator number_in(double low, double high, const std::string& what) {
  return number_check(low, high, what, [](const std::string& v, std::size_t* used) { return std::stod(v, used); });
}

CLI::Validator at_least_one(const std::string& what) {
  return whole_number_in(1, LLONG_MAX, what + " of at least 1");
}

CLI::Validator length_penalty_check() { return number_in(0.0, 5.0, "a length penalty alpha in [0, 5]"); }

CLI::Validator beam_size_check() { return at_least_one("a beam size"); }

void add_precision_option(CLI::App* cmd, std::string& precision) {
  cmd->add_option("--precision", precision,
                  "Matrix products: float32 (default) or bf16 (inputs rounded to bf16, sums in float32, on the CPU's "
                  "AMX or AVX512-BF16 units)")
      ->check(CLI::IsMember({"float32", "bf16"}));
}

MatmulPrecisionScope precision_scope(const std::string& precision) {
  return MatmulPrecisionScope(parse_matmul_precision(precision), "--precision bf16");  // no copy: C++17 elision
}

std::string checkout_folder(const std::string& command) {
  const std::optional<train::DataFolder> data = train::find_data_folder();
  if (data && !data->installed) return data->root.string();
  throw std::invalid_argument(command + ": needs the teacher's source tree (a checkout of Scratchformer): pass --source DIR" +
                              (data ? " (this program is installed, in " + data->root.string() + ")" : std::string()));
}

}  // namespace sf::cli
