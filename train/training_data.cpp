#include "train/training_data.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "data/corpus.h"

namespace sf::train {

namespace fs = std::filesystem;

EncodedSplit load_split(const std::string& src_path, const std::string& tgt_path, const data::Tokenizers& tok,
                        std::int64_t max_tokens, const char* name, Progress& progress) {
  data::ParallelCorpus corpus = data::read_parallel(src_path, tgt_path);
  // lines far too long are dropped before tokenising (a 10 MB line would take GBs to tokenise)
  const std::int64_t overlong = data::drop_overlong_pairs(corpus, max_tokens);
  EncodedSplit s;
  s.src = tok.src.encode_all(corpus.src);
  s.tgt = tok.tgt.encode_all(corpus.tgt);
  data::FilterReport report = data::filter_pairs(corpus, s.src, s.tgt, max_tokens);
  report.too_long += overlong;
  progress.line(std::string(name) + ": " + report.summary(max_tokens));
  if (report.kept == 0)
    throw data::CorpusError(std::string(name) + " corpus " + src_path + ": no sentence pair is left after filtering");
  s.src_text = std::move(corpus.src);
  s.tgt_text = std::move(corpus.tgt);
  return s;
}

namespace {

// Adds one example unless it is empty or too long (counted in the report instead).
void keep_example(EncodedSplit& s, data::FilterReport& report, std::vector<std::int64_t> src, std::vector<std::int64_t> tgt,
                  std::string src_text, std::string tgt_text, std::int64_t max_tokens) {
  if (src.empty()) return void(++report.empty);
  if (static_cast<std::int64_t>(src.size()) > max_tokens) return void(++report.too_long);
  ++report.kept;
  s.src.push_back(std::move(src)), s.tgt.push_back(std::move(tgt));
  s.src_text.push_back(std::move(src_text)), s.tgt_text.push_back(std::move(tgt_text));
}

void report_split(const data::FilterReport& report, std::int64_t max_tokens, const char* name, const std::string& path,
                  Progress& progress) {
  std::string line = report.summary(max_tokens);
  const auto pairs = line.find(" pairs");
  if (pairs != std::string::npos) line.replace(pairs, 6, " lines");
  progress.line(std::string(name) + ": " + line);
  if (report.kept == 0) throw data::CorpusError(std::string(name) + " file " + path + ": no example is left after filtering");
}

}  // namespace

EncodedSplit load_text_split(const std::string& path, const data::Tokenizer& tok, std::int64_t max_tokens, const char* name,
                             Progress& progress) {
  const std::vector<std::string> lines = data::read_lines(path);
  EncodedSplit s;
  data::FilterReport report;
  for (const std::string& line : lines) {
    if (line.size() > static_cast<std::size_t>(max_tokens) * data::kMaxBytesPerToken) {  // surely too long: not tokenised
      ++report.too_long;
      continue;
    }
    std::vector<std::int64_t> ids = tok.encode(line);
    keep_example(s, report, ids, ids, line, line, max_tokens);
  }
  report_split(report, max_tokens, name, path, progress);
  return s;
}

LabeledLine parse_labeled_line(const std::string& line, const std::string& path, std::size_t line_no) {
  const std::string where = path + " line " + std::to_string(line_no) + ": ";
  std::vector<std::string> fields;
  std::size_t start = 0;
  for (std::size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1)
    fields.push_back(line.substr(start, tab - start));
  fields.push_back(line.substr(start));
  if (fields.size() < 2)
    throw data::CorpusError(where + "expected label<TAB>text or label<TAB>text_a<TAB>text_b, found no tab");
  if (fields.size() > 3)
    throw data::CorpusError(where + "expected at most 3 tab-separated fields (label, text_a, text_b), found " +
                            std::to_string(fields.size()));
  for (std::size_t i = 0; i < fields.size(); ++i)
    if (fields[i].find_first_not_of(" \r") == std::string::npos)
      throw data::CorpusError(where + "field " + std::to_string(i + 1) + " (" + (i == 0 ? "the label" : "a text") +
                              ") is empty");
  return {fields[0], fields[1], fields.size() == 3 ? fields[2] : ""};
}

std::vector<std::int64_t> encode_with_symbols(const data::Tokenizer& tok, const std::string& text) {
  std::vector<std::pair<std::string, std::int64_t>> symbols;  // the symbols this tokenizer has
  for (const char* name : {"<mask>", "<sep>", "<cls>"})
    for (std::int64_t id = data::kEosId + 1; id < tok.first_ordinary_id(); ++id)
      if (tok.id_to_piece(id) == name) symbols.emplace_back(name, id);
  std::vector<std::int64_t> ids;
  std::size_t start = 0;
  while (true) {
    std::size_t at = std::string::npos, length = 0;
    std::int64_t id = 0;
    for (const auto& [name, symbol] : symbols)
      if (const std::size_t found = text.find(name, start); found < at) at = found, length = name.size(), id = symbol;
    const auto piece = tok.encode(text.substr(start, at == std::string::npos ? std::string::npos : at - start));
    ids.insert(ids.end(), piece.begin(), piece.end());
    if (at == std::string::npos) return ids;
    ids.push_back(id);
    start = at + length;
  }
}

std::vector<std::int64_t> classify_input(const data::Tokenizer& tok, const std::string& a, const std::string& b) {
  std::vector<std::int64_t> ids{tok.symbol_id("<cls>")};
  const auto first = tok.encode(a);
  ids.insert(ids.end(), first.begin(), first.end());
  if (b.empty()) return ids;
  ids.push_back(tok.symbol_id("<sep>"));
  const auto second = tok.encode(b);
  ids.insert(ids.end(), second.begin(), second.end());
  return ids;
}

EncodedSplit load_classify_split(const std::string& path, const data::Tokenizer& tok, const std::vector<std::string>& labels,
                                 std::int64_t max_tokens, const char* name, Progress& progress) {
  const std::vector<std::string> lines = data::read_lines(path);
  std::string known;
  for (const auto& l : labels) known += (known.empty() ? "" : ", ") + l;
  EncodedSplit s;
  data::FilterReport report;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const LabeledLine ex = parse_labeled_line(lines[i], path, i + 1);
    const auto label = std::find(labels.begin(), labels.end(), ex.label);
    if (label == labels.end())
      throw data::CorpusError(path + " line " + std::to_string(i + 1) + ": unknown label \"" + ex.label +
                              "\" (data.labels has " + known + ")");
    const std::int64_t cls = label - labels.begin();
    keep_example(s, report, classify_input(tok, ex.a, ex.b), {cls}, ex.b.empty() ? ex.a : ex.a + "\t" + ex.b, ex.label,
                 max_tokens);
  }
  report_split(report, max_tokens, name, path, progress);
  return s;
}

namespace {

// A decoder-only translation reads <s> source <sep> target as one sequence: drop the pairs whose
// sequence would not fit the model's max_len positions.
void drop_unfit_prompts(EncodedSplit& s, std::int64_t max_len, const char* name, Progress& progress) {
  EncodedSplit kept;
  std::int64_t dropped = 0;
  for (std::size_t i = 0; i < s.src.size(); ++i) {
    if (static_cast<std::int64_t>(s.src[i].size() + s.tgt[i].size()) + 2 > max_len) {
      ++dropped;
      continue;
    }
    kept.src.push_back(std::move(s.src[i])), kept.tgt.push_back(std::move(s.tgt[i]));
    kept.src_text.push_back(std::move(s.src_text[i])), kept.tgt_text.push_back(std::move(s.tgt_text[i]));
  }
  if (dropped > 0)
    progress.line(std::string(name) + ": dropped " + std::to_string(dropped) + " pairs whose <s> source <sep> target is longer than " +
                  std::to_string(max_len) + " tokens (model.max_len)");
  if (kept.src.empty()) throw data::CorpusError(std::string(name) + ": no sentence pair fits model.max_len as one sequence");
  s = std::move(kept);
}

}  // namespace

EncodedSplit load_task_split(const Config& cfg, const data::Tokenizers& tok, const std::string& which, Progress& progress) {
  const DataSection& d = cfg.data;
  const bool train = which == "train";
  // every example must fit the positions: <s> + tokens (or <cls> + tokens) within max_len
  const std::int64_t max_tokens = train ? std::min(d.max_tokens, cfg.model.max_len - 1) : cfg.model.max_len - 2;
  const char* name = which == "train" ? "train" : which == "valid" ? "valid" : "test";
  if (d.task == "translation") {
    const std::string& src = train ? d.train_src : which == "valid" ? d.valid_src : d.test_src;
    const std::string& tgt = train ? d.train_tgt : which == "valid" ? d.valid_tgt : d.test_tgt;
    EncodedSplit s = load_split(src, tgt, tok, train ? d.max_tokens : max_tokens, name, progress);
    if (cfg.model.arch == "decoder-only") drop_unfit_prompts(s, cfg.model.max_len, name, progress);
    return s;
  }
  const std::string& file = train ? d.train_file : which == "valid" ? d.valid_file : d.test_file;
  if (d.task == "classify") return load_classify_split(file, tok.src, class_labels(d), max_tokens, name, progress);
  return load_text_split(file, tok.src, max_tokens, name, progress);
}

bool has_test_split(const Config& cfg) {
  return cfg.data.task == "translation" ? !cfg.data.test_src.empty() && !cfg.data.test_tgt.empty() : !cfg.data.test_file.empty();
}

std::string tokenizer_text_file(const Config& cfg) {
  if (cfg.data.task != "classify") return cfg.data.train_file;
  const fs::path out = fs::path(cfg.run.dir) / "tokenizer-text.tmp";
  fs::create_directories(out.parent_path());
  std::ofstream text(out);
  const std::vector<std::string> lines = data::read_lines(cfg.data.train_file);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const LabeledLine ex = parse_labeled_line(lines[i], cfg.data.train_file, i + 1);
    text << ex.a << "\n";
    if (!ex.b.empty()) text << ex.b << "\n";
  }
  if (!text.flush()) throw std::runtime_error("cannot write " + out.string() + " (the tokenizer's training text)");
  return out.string();
}

void truncate_split(EncodedSplit& s, std::int64_t n) {
  if (n <= 0 || static_cast<std::int64_t>(s.src.size()) <= n) return;
  const auto k = static_cast<std::size_t>(n);
  s.src.resize(k), s.tgt.resize(k), s.src_text.resize(k), s.tgt_text.resize(k);
}

}  // namespace sf::train
