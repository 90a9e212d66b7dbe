// Config loading: TOML text -> checked, typed Config (and back, for the run directory).
//
// Every key is listed exactly once, in visit_fields() below, with its kind. The same list drives
// reading (FieldReader), writing (FieldWriter) and the table of known keys (KeyLister) that
// unknown-key errors and --set overrides are checked against, so the three can never disagree.
//
// load_config works in five steps:
//   1. parse the file with toml11 (syntax errors carry the line number);
//   2. reject unknown sections and keys in the file (suggesting the closest known key);
//   3. apply the --set overrides to the parsed document, as if they were written in the file;
//   4. read every field, checking its type (and for a choice, that it is one of the listed values);
//   5. check ranges and relations between fields (d_model % n_heads, ...; a key of another arch).
#include "train/config.h"

#include "data/corpus.h"  // valid_utf8
#include "train/data_folder.h"

#include <toml.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <span>
#include <sstream>

namespace sf::train {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kSections{"model", "data", "train", "run"};
const std::vector<std::string> kActivations{"relu", "gelu", "swiglu"};
const std::vector<std::string> kNorms{"layernorm", "rmsnorm"};
const std::vector<std::string> kArchs{"encoder-decoder", "decoder-only", "encoder-only", "rnn"};
const std::vector<std::string> kTasks{"translation", "lm", "mlm", "classify"};
const std::vector<std::string> kPoolings{"mean", "cls"};
const std::vector<std::string> kRnnCells{"lstm", "gru", "rnn"};
const std::vector<std::string> kRnnAttentions{"none", "additive", "dot", "general"};
const std::vector<std::string> kNormPositions{"pre", "post"};
const std::vector<std::string> kPositionals{"sinusoidal", "learned", "rope", "alibi", "none"};
const std::vector<std::string> kAttentions{"plain", "tiled"};
const std::vector<std::string> kRopeScalings{"none", "interpolation", "ntk"};
const std::vector<std::string> kTokenizerTypes{"unigram", "bpe"};
const std::vector<std::string> kBleuTokenizers{"13a", "zh"};
const std::vector<std::string> kOptimizers{"adam", "adamw", "sgd"};
const std::vector<std::string> kSchedules{"noam", "cosine", "constant"};
const std::vector<std::string> kPrecisions{"float32", "bf16"};
const std::vector<std::string> kBestMetrics{"bleu", "loss", "accuracy"};

enum class Need { Optional, Required };

// ---- the one list of keys ----

// Calls v.section(name) before each section's keys, then one call per key:
//   v.integer / v.floating / v.boolean (key, field)
//   v.choice (key, field, accepted values)     a string that must be one of the values
//   v.arch_choice (arch, key, field, accepted) a choice only model.arch = arch reads: an error in a
//                                              config of another arch, and written only for that one
//   v.text   (key, field)                      any string
//   v.path   (key, field, Need)                a string path, resolved against the config's folder
// C is Config (reading) or const Config (writing and listing).
// [model]: the first section of visit_fields.
template <class C, class V>
void visit_model_fields(C& c, V& v) {
  v.section("model");
  v.choice("arch", c.model.arch, kArchs);
  v.integer("d_model", c.model.d_model);
  v.integer("n_heads", c.model.n_heads);
  v.integer("n_kv_heads", c.model.n_kv_heads);
  v.integer("d_ff", c.model.d_ff);
  v.integer("encoder_layers", c.model.encoder_layers);
  v.integer("decoder_layers", c.model.decoder_layers);
  v.floating("dropout", c.model.dropout);
  v.floating("attention_dropout", c.model.attention_dropout);
  v.choice("activation", c.model.activation, kActivations);
  v.choice("norm", c.model.norm, kNorms);
  v.choice("norm_position", c.model.norm_position, kNormPositions);
  v.choice("positional", c.model.positional, kPositionals);
  // model.attention: "plain" (composed ops) or "tiled" (online softmax); checked against attention_dropout in validate()
  v.choice("attention", c.model.attention, kAttentions);
  v.integer("attention_window", c.model.attention_window);
  v.choice("rope_scaling", c.model.rope_scaling, kRopeScalings);
  v.floating("rope_factor", c.model.rope_factor);
  v.boolean("share_embeddings", c.model.share_embeddings);
  v.boolean("tie_output", c.model.tie_output);
  v.integer("max_len", c.model.max_len);
  v.choice("pooling", c.model.pooling, kPoolings);
  v.arch_choice("rnn", "rnn_cell", c.model.rnn_cell, kRnnCells);
  v.arch_choice("rnn", "rnn_attention", c.model.rnn_attention, kRnnAttentions);
}

template <class C, class V>
void visit_fields(C& c, V& v) {
  visit_model_fields(c, v);

  v.section("data");
  v.choice("task", c.data.task, kTasks);
  // which of the files are required depends on the task: checked in validate_task()
  v.path("train_src", c.data.train_src, Need::Optional);
  v.path("train_tgt", c.data.train_tgt, Need::Optional);
  v.path("valid_src", c.data.valid_src, Need::Optional);
  v.path("valid_tgt", c.data.valid_tgt, Need::Optional);
  v.path("test_src", c.data.test_src, Need::Optional);
  v.path("test_tgt", c.data.test_tgt, Need::Optional);
  v.path("train_file", c.data.train_file, Need::Optional);
  v.path("valid_file", c.data.valid_file, Need::Optional);
  v.path("test_file", c.data.test_file, Need::Optional);
  v.text("labels", c.data.labels);
  v.integer("tokenizer_vocab_size", c.data.tokenizer_vocab_size);
  v.choice("tokenizer_type", c.data.tokenizer_type, kTokenizerTypes);
  v.boolean("joint_tokenizer", c.data.joint_tokenizer);
  v.integer("max_tokens", c.data.max_tokens);
  v.integer("batch_tokens", c.data.batch_tokens);
  v.choice("bleu_tokenize", c.data.bleu_tokenize, kBleuTokenizers);
  v.integer("max_valid_sentences", c.data.max_valid_sentences);

  v.section("train");
  v.integer("seed", c.train.seed);
  v.choice("optimizer", c.train.optimizer, kOptimizers);
  v.floating("lr", c.train.lr);
  v.floating("beta1", c.train.beta1);
  v.floating("beta2", c.train.beta2);
  v.floating("eps", c.train.eps);
  v.floating("weight_decay", c.train.weight_decay);
  v.floating("momentum", c.train.momentum);
  v.choice("schedule", c.train.schedule, kSchedules);
  v.integer("warmup_steps", c.train.warmup_steps);
  v.integer("max_steps", c.train.max_steps);
  v.integer("max_epochs", c.train.max_epochs);
  v.floating("max_minutes", c.train.max_minutes);
  v.floating("label_smoothing", c.train.label_smoothing);
  v.floating("clip_norm", c.train.clip_norm);
  v.integer("accum_steps", c.train.accum_steps);
  v.integer("log_every", c.train.log_every);
  v.integer("valid_every", c.train.valid_every);
  v.integer("patience", c.train.patience);
  v.choice("best_metric", c.train.best_metric, kBestMetrics);
  v.integer("valid_beam", c.train.valid_beam);
  v.floating("valid_length_penalty", c.train.valid_length_penalty);
  v.integer("max_nonfinite", c.train.max_nonfinite);
  v.floating("min_lr", c.train.min_lr);
  v.choice("precision", c.train.precision, kPrecisions);

  v.section("run");
  v.path("dir", c.run.dir, Need::Required);
  v.integer("threads", c.run.threads);
  v.integer("keep_checkpoints", c.run.keep_checkpoints);
  v.integer("average_last", c.run.average_last);
  v.boolean("attention_snapshots", c.run.attention_snapshots);
}

// ---- small helpers ----

// Shortest text that reads back as exactly `x` ("0.1", "1e-09"), with a ".0" added to whole numbers
// so TOML reads them as floats.
std::string format_double(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// A TOML basic string: "..." with quotes, backslashes and control characters escaped.
std::string quote_toml(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default:
        if (ch < 0x20 || ch == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", ch);
          out += buf;
        } else {
          out += static_cast<char>(ch);
        }
    }
  }
  return out + "\"";
}

// "an integer", "a string", ...: the found type in "expected X, got Y".
std::string type_name(const toml::value& v) {
  switch (v.type()) {
    case toml::value_t::boolean: return "a boolean";
    case toml::value_t::integer: return "an integer";
    case toml::value_t::floating: return "a float";
    case toml::value_t::string: return "a string";
    case toml::value_t::offset_datetime:
    case toml::value_t::local_datetime: return "a date-time";
    case toml::value_t::local_date: return "a date";
    case toml::value_t::local_time: return "a time";
    case toml::value_t::array: return "an array";
    case toml::value_t::table: return "a table";
    default: return "nothing";
  }
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// ---- the table of known keys ----

enum class Kind { Integer, Float, Bool, Choice, Text, Path };

struct KeyInfo {
  std::string section, key;
  Kind kind;
  std::string only_arch = "";  // the one model.arch that reads the key ("" = every arch)
};

struct KeyLister {
  std::string current;
  std::vector<KeyInfo> keys;
  void section(const char* name) { current = name; }
  void integer(const char* key, const std::int64_t&) { keys.push_back({current, key, Kind::Integer}); }
  void floating(const char* key, const double&) { keys.push_back({current, key, Kind::Float}); }
  void boolean(const char* key, const bool&) { keys.push_back({current, key, Kind::Bool}); }
  void choice(const char* key, const std::string&, const std::vector<std::string>&) {
    keys.push_back({current, key, Kind::Choice});
  }
  void arch_choice(const char* arch, const char* key, const std::string&, const std::vector<std::string>&) {
    keys.push_back({current, key, Kind::Choice, arch});
  }
  void text(const char* key, const std::string&) { keys.push_back({current, key, Kind::Text}); }
  void path(const char* key, const std::string&, Need) { keys.push_back({current, key, Kind::Path}); }
};

const std::vector<KeyInfo>& known_keys() {
  static const std::vector<KeyInfo> keys = [] {
    const Config defaults;
    KeyLister lister;
    visit_fields(defaults, lister);
    return lister.keys;
  }();
  return keys;
}

const KeyInfo* find_key(const std::string& section, const std::string& key) {
  for (const KeyInfo& k : known_keys())
    if (k.section == section && k.key == key) return &k;
  return nullptr;
}

std::vector<std::string> keys_of(const std::string& section) {
  std::vector<std::string> out;
  for (const KeyInfo& k : known_keys())
    if (k.section == section) out.push_back(k.key);
  return out;
}

bool is_section(const std::string& name) {
  return std::find(kSections.begin(), kSections.end(), name) != kSections.end();
}

// " (did you mean model.d_model?)" for a key unknown in `section`: the closest key of that section,
// else the same key in another section (lr under [model] -> train.lr), else "".
std::string key_hint(const std::string& section, const std::string& key) {
  const std::string near = closest(key, keys_of(section));
  if (!near.empty()) return " (did you mean " + section + "." + near + "?)";
  for (const KeyInfo& k : known_keys())
    if (k.key == key) return " (did you mean " + k.section + "." + k.key + "?)";
  return "";
}

std::string section_hint(const std::string& section) {
  const std::string near = closest(section, kSections);
  if (!near.empty()) return " (did you mean [" + near + "]?)";
  return " (the sections are [" + join(kSections, "], [") + "])";
}

// ---- where a value came from, for error messages ----

// Overrides are parsed as tiny TOML documents named "--set section.key=value", so a value's
// source location tells whether it came from the file or the command line.
bool from_override(const toml::value& v) { return v.location().file_name().rfind("--set ", 0) == 0; }

// "quickstart.toml:3: " for a value in the file, "quickstart.toml: --set model.d_model=x: " for an
// override.
std::string location_prefix(const std::string& file, const toml::value& v) {
  if (from_override(v)) return file + ": " + v.location().file_name() + ": ";
  return file + ":" + std::to_string(v.location().line()) + ": ";
}

// ---- step 1: text that is safe to hand to toml11 ----

// toml11 3.7 must only be given UTF-8 that does not nest deeply: it reads out of bounds when it
// reports a byte that is not UTF-8 inside a '...' or '''...''' string, and it parses arrays and
// inline tables recursively, so a few thousand nested [ overflow the stack. TOML requires UTF-8
// anyway, and no setting is an array or a table, so both are refused before parsing.
// Returns what is wrong ("" if nothing) and sets `offset` to where.
std::string unsafe_toml_text(const std::string& text, std::size_t& offset) {
  if (!sf::data::valid_utf8(text, &offset)) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(text[offset]));
    return std::string("not valid UTF-8 (byte ") + byte + "); TOML text must be UTF-8";
  }
  // Depth of [ and { outside comments and strings: a [section] header is 1 deep, [[x]] 2.
  constexpr int kMaxDepth = 32;
  int depth = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '#') {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
    } else if (c == '"' || c == '\'') {  // skip "...", '...', """...""" or '''...'''
      const std::string quote(text.compare(i, 3, std::string(3, c)) == 0 ? 3 : 1, c);
      for (i += quote.size(); i < text.size() && text.compare(i, quote.size(), quote) != 0; ++i)
        if (c == '"' && text[i] == '\\') ++i;  // in "..." a backslash escapes the next character
      i += quote.size() - 1;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) {
        offset = i;
        return "brackets nested more than " + std::to_string(kMaxDepth) +
               " deep (settings are plain values, not arrays or tables)";
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return "";
}

// ---- step 2: unknown sections and keys in the file ----

void check_known_names(const std::string& file, const toml::value& root) {
  struct Problem {
    std::uint32_t line;
    std::string message;
  };
  std::vector<Problem> problems;  // all of them, so the first one in the file is reported
  auto add = [&](const toml::value& where, const std::string& what) {
    problems.push_back({where.location().line(), location_prefix(file, where) + what});
  };
  for (const auto& [name, value] : root.as_table()) {
    if (is_section(name)) {
      if (!value.is_table()) {
        add(value, name + ": expected a section [" + name + "], got " + type_name(value));
        continue;
      }
      for (const auto& [key, v] : value.as_table())
        if (!find_key(name, key)) add(v, "unknown key " + name + "." + key + key_hint(name, key));
    } else if (value.is_table()) {
      add(value, "unknown section [" + name + "]" + section_hint(name));
    } else {
      std::string hint;
      for (const KeyInfo& k : known_keys())
        if (k.key == name) hint = " (did you mean to put it under [" + k.section + "]?)";
      add(value, name + ": keys belong inside a section [" + join(kSections, "], [") + "]" + hint);
    }
  }
  if (problems.empty()) return;
  std::stable_sort(problems.begin(), problems.end(),
                   [](const Problem& a, const Problem& b) { return a.line < b.line; });
  throw ConfigError(problems.front().message);
}

// ---- step 3: --set overrides ----

// "section.key=value" -> root[section][key] = value, the value read as TOML. For a key that holds a
// string, text that is not a quoted TOML string is taken literally (model.norm=rmsnorm).
void apply_override(const std::string& file, const std::string& text, toml::value& root) {
  const std::string prefix = file + ": --set " + text + ": ";
  std::size_t offset = 0;
  if (const std::string problem = unsafe_toml_text(text, offset); !problem.empty())
    throw ConfigError(prefix + problem);
  const auto eq = text.find('=');
  const std::string lhs = trim(text.substr(0, eq));
  const auto dot = lhs.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot == 0 || dot + 1 == lhs.size())
    throw ConfigError(prefix + "expected section.key=value, e.g. --set train.lr=0.5");
  const std::string section = lhs.substr(0, dot), key = lhs.substr(dot + 1);
  if (!is_section(section)) throw ConfigError(prefix + "unknown section [" + section + "]" + section_hint(section));
  const KeyInfo* info = find_key(section, key);
  if (!info) throw ConfigError(prefix + "unknown key " + lhs + key_hint(section, key));

  const std::string rhs = trim(text.substr(eq + 1));
  const std::string origin = "--set " + text;  // becomes the value's source file name
  auto parse_value = [&](const std::string& toml_text) {
    std::istringstream in("v = " + toml_text);
    return toml::find(toml::parse(in, origin), "v");
  };
  toml::value value;
  const bool wants_string = info->kind == Kind::Choice || info->kind == Kind::Text || info->kind == Kind::Path;
  try {
    value = parse_value(rhs);
  } catch (const std::exception&) {
    value = toml::value();  // not a TOML value: maybe an unquoted string
  }
  if (value.is_uninitialized() || (wants_string && !value.is_string())) {
    try {
      value = parse_value(quote_toml(rhs));
    } catch (const std::exception&) {
      throw ConfigError(prefix + "cannot read the value as TOML");
    }
  }

  toml::value& sec = root.as_table()[section];
  if (sec.is_uninitialized()) sec = toml::table{};
  sec.as_table()[key] = value;
}

// ---- step 4: reading typed fields ----

struct FieldReader {
  const std::string& file;      // config path as given, for messages
  const fs::path& config_dir;   // absolute folder of the config file, for relative paths
  const toml::value& root;
  std::string current;          // section being read
  const toml::value* table = nullptr;  // root[current], or null when the section is absent
  const std::optional<DataFolder>& data_folder;  // where a corpus not beside the config may be
  std::vector<std::string>& missing;             // data files found in neither place, one line each

  void section(const char* name) {
    current = name;
    table = root.contains(current) ? &root.at(current) : nullptr;
  }
  const toml::value* find(const char* key) const {
    return table && table->contains(key) ? &table->at(key) : nullptr;
  }
  [[noreturn]] void fail(const toml::value& v, const char* key, const std::string& what) const {
    if (from_override(v)) throw ConfigError(location_prefix(file, v) + what);
    throw ConfigError(location_prefix(file, v) + current + "." + key + ": " + what);
  }
  [[noreturn]] void wrong_type(const toml::value& v, const char* key, const char* expected) const {
    fail(v, key, std::string("expected ") + expected + ", got " + type_name(v));
  }

  void integer(const char* key, std::int64_t& field) {
    const toml::value* v = find(key);
    if (!v) return;
    if (!v->is_integer()) wrong_type(*v, key, "an integer");
    field = v->as_integer();
  }
  void floating(const char* key, double& field) {
    const toml::value* v = find(key);
    if (!v) return;
    if (v->is_integer()) {  // lr = 1 means 1.0
      field = static_cast<double>(v->as_integer());
      return;
    }
    if (!v->is_floating()) wrong_type(*v, key, "a number");
    if (!std::isfinite(v->as_floating())) fail(*v, key, "expected a finite number, got " + format_double(v->as_floating()));
    field = v->as_floating();
  }
  void boolean(const char* key, bool& field) {
    const toml::value* v = find(key);
    if (!v) return;
    if (!v->is_boolean()) wrong_type(*v, key, "a boolean (true or false)");
    field = v->as_boolean();
  }
  void choice(const char* key, std::string& field, const std::vector<std::string>& accepted) {
    const toml::value* v = find(key);
    if (!v) return;
    if (!v->is_string()) wrong_type(*v, key, ("one of the strings " + join(accepted, ", ")).c_str());
    const std::string& s = v->as_string().str;
    if (std::find(accepted.begin(), accepted.end(), s) == accepted.end())
      fail(*v, key, "expected one of " + join(accepted, ", ") + ", got \"" + s + "\"");
    field = s;
  }
  // read as any choice; validate_arch_keys() rejects it under another arch
  void arch_choice(const char*, const char* key, std::string& field, const std::vector<std::string>& accepted) {
    choice(key, field, accepted);
  }
  void text(const char* key, std::string& field) {
    const toml::value* v = find(key);
    if (!v) return;
    if (!v->is_string()) wrong_type(*v, key, "a string");
    field = v->as_string().str;
  }
  void path(const char* key, std::string& field, Need need) {
    const toml::value* v = find(key);
    if (!v) {
      if (need == Need::Required)
        throw ConfigError(file + ": " + current + "." + key + ": required key is missing (add it under [" +
                          current + "])");
      return;
    }
    if (!v->is_string()) wrong_type(*v, key, "a string (a path)");
    const std::string& s = v->as_string().str;
    if (s.empty()) {
      if (need == Need::Required) fail(*v, key, "expected a path, got an empty string");
      field.clear();  // an optional path left empty: not set
      return;
    }
    const fs::path p(s);
    field = (p.is_absolute() ? p : config_dir / p).lexically_normal().string();
    if (current == "data" && !p.is_absolute()) data_file(*v, key, p, field);
  }
  // A corpus not beside the config is looked for as if the config lay in the data folder's configs/
  // (train/data_folder.h): a config copied out of the installed configs keeps its corpora.
  void data_file(const toml::value& v, const char* key, const fs::path& p, std::string& field) {
    std::error_code ec;
    if (fs::exists(field, ec)) return;
    const std::string elsewhere = data_folder ? (data_folder->configs() / p).lexically_normal().string() : "";
    if (!elsewhere.empty() && fs::exists(elsewhere, ec)) {
      field = elsewhere;
      return;
    }
    const std::string where = location_prefix(file, v) + (from_override(v) ? "" : current + "." + key + ": ");
    missing.push_back(where + p.string() + " is neither beside the config (" + field + ") nor in the data folder (" +
                      (elsewhere.empty() ? std::string("none found") : elsewhere) + ")");
  }
};

// ---- step 5: ranges and relations ----

struct Checker {
  const std::string& file;
  const toml::value& root;

  // "quickstart.toml:4: model.n_heads: " (where the key was set; no line if it kept its default)
  std::string at(const std::string& section, const std::string& key) const {
    if (root.contains(section) && root.at(section).contains(key)) {
      const toml::value& v = root.at(section).at(key);
      if (from_override(v)) return location_prefix(file, v);
      return location_prefix(file, v) + section + "." + key + ": ";
    }
    return file + ": " + section + "." + key + ": ";
  }
  void require(bool ok, const std::string& section, const std::string& key, const std::string& what) const {
    if (!ok) throw ConfigError(at(section, key) + what);
  }
  // Whether the key is written in the file or given with --set (whatever its value).
  bool is_set(const std::string& section, const std::string& key) const {
    return root.contains(section) && root.at(section).is_table() && root.at(section).contains(key);
  }
  void positive(std::int64_t x, const char* section, const char* key) const {
    require(x > 0, section, key, "expected a positive integer, got " + std::to_string(x));
  }
  void non_negative(std::int64_t x, const char* section, const char* key, const char* zero_means) const {
    require(x >= 0, section, key,
            std::string("expected 0 (") + zero_means + ") or a positive integer, got " + std::to_string(x));
  }
  // [0, 1): dropout probabilities, smoothing, Adam betas, momentum
  void unit_interval(double x, const char* section, const char* key) const {
    require(x >= 0 && x < 1, section, key, "expected a value in [0, 1), got " + format_double(x));
  }
  void positive(double x, const char* section, const char* key) const {
    require(x > 0, section, key, "expected a positive number, got " + format_double(x));
  }
  void non_negative(double x, const char* section, const char* key) const {
    require(x >= 0, section, key, "expected a number >= 0, got " + format_double(x));
  }
};

// The architecture each task trains ("translation": any generating one, encoder-decoder, rnn or decoder-only).
const char* arch_for_task(const std::string& task) {
  if (task == "lm") return "decoder-only";
  if (task == "mlm" || task == "classify") return "encoder-only";
  return "encoder-decoder";
}

// data.task against model.arch, the files each task reads, its labels and its best metric.
void validate_task(const Config& c, const Checker& check) {
  const DataSection& d = c.data;
  const std::string& task = d.task;
  const bool translation = task == "translation";
  // arch rnn translates only: name both ways out
  check.require(translation || c.model.arch != "rnn", "data", "task",
                "model.arch \"rnn\" (the recurrent encoder-decoder) trains only data.task = \"translation\", got \"" +
                    task + "\" (set data.task = \"translation\", or model.arch = \"" + arch_for_task(task) + "\" for " +
                    task + ")");
  const bool fits = translation ? c.model.arch != "encoder-only" : c.model.arch == arch_for_task(task);
  check.require(fits, "data", "task",
                "task \"" + task + "\" trains " + (translation ? "an encoder-decoder, rnn or decoder-only" : arch_for_task(task)) +
                    " model, but model.arch is \"" + c.model.arch + "\" (set model.arch = \"" + arch_for_task(task) + "\")");
  const std::pair<const char*, const std::string*> paired[] = {{"train_src", &d.train_src}, {"train_tgt", &d.train_tgt},
                                                               {"valid_src", &d.valid_src}, {"valid_tgt", &d.valid_tgt},
                                                               {"test_src", &d.test_src},   {"test_tgt", &d.test_tgt}};
  const std::pair<const char*, const std::string*> single[] = {
      {"train_file", &d.train_file}, {"valid_file", &d.valid_file}, {"test_file", &d.test_file}};
  const std::span<const std::pair<const char*, const std::string*>> required =
      translation ? std::span<const std::pair<const char*, const std::string*>>(paired).first(4)
                  : std::span<const std::pair<const char*, const std::string*>>(single).first(2);
  for (const auto& [key, value] : required)
    check.require(!value->empty(), "data", key,
                  "required key is missing for data.task = \"" + task + "\" (add it under [data])");
  // a file of the other kind is a mistake (it would be ignored): say which keys the task reads
  const std::span<const std::pair<const char*, const std::string*>> unread =
      translation ? std::span<const std::pair<const char*, const std::string*>>(single)
                  : std::span<const std::pair<const char*, const std::string*>>(paired);
  for (const auto& [key, value] : unread)
    check.require(value->empty(), "data", key,
                  "data.task = \"" + task + "\" reads " +
                      (translation ? "train_src, train_tgt, valid_src, valid_tgt (test_src, test_tgt)"
                                   : "train_file, valid_file (test_file)") + ", not " + key);
  const auto labels = class_labels(d);
  check.require(task != "classify" || labels.size() >= 2, "data", "labels",
                "classify needs at least two class names, comma-separated (e.g. \"mismatch,match\"), got \"" + d.labels + "\"");
  for (std::size_t i = 0; i < labels.size(); ++i)
    check.require(!labels[i].empty() && std::count(labels.begin(), labels.end(), labels[i]) == 1, "data", "labels",
                  "class names must be non-empty and different, got \"" + d.labels + "\"");
  check.require(task == "classify" || d.labels.empty(), "data", "labels", "only data.task = \"classify\" has labels");
  check.require(c.model.arch != "decoder-only" || !translation || d.joint_tokenizer, "data", "joint_tokenizer",
                "a decoder-only model reads source and target as one sequence, so it needs one vocabulary: "
                "set data.joint_tokenizer = true");
  const std::string& metric = c.train.best_metric;
  const bool metric_fits = metric == "loss" || (metric == "bleu" && translation) ||
                           (metric == "accuracy" && (task == "mlm" || task == "classify"));
  check.require(metric_fits, "train", "best_metric",
                "\"" + metric + "\" is not measured by data.task = \"" + task + "\": use " +
                    (translation ? "\"bleu\" or \"loss\"" : task == "lm" ? "\"loss\"" : "\"accuracy\" or \"loss\""));
}

// A key only one architecture reads (KeyInfo::only_arch), written in the file or given with --set
// while model.arch is another: an error even at its default value, since it would be ignored.
void validate_arch_keys(const Config& c, const Checker& check) {
  for (const KeyInfo& k : known_keys()) {
    if (k.only_arch.empty() || !check.is_set(k.section, k.key)) continue;
    check.require(c.model.arch == k.only_arch, k.section, k.key,
                  "only model.arch = \"" + k.only_arch + "\" reads this key, but model.arch is \"" + c.model.arch +
                      "\" (remove the key or set model.arch = \"" + k.only_arch + "\")");
  }
}

// [model] of arch rnn (nn/rnn_seq2seq.h): the sizes the recurrent model reads. The Transformer's
// keys (n_heads, d_ff, norm, positional, attention, share_embeddings, ...) are ignored, so their
// relations are not checked.
void validate_rnn_model(const ModelSection& m, const Checker& check) {
  check.positive(m.d_model, "model", "d_model");
  check.require(m.d_model % 2 == 0, "model", "d_model",
                "arch rnn needs an even d_model (d_model / 2 units per encoder direction), got " +
                    std::to_string(m.d_model));
  check.positive(m.encoder_layers, "model", "encoder_layers");
  check.positive(m.decoder_layers, "model", "decoder_layers");
  check.positive(m.max_len, "model", "max_len");
  check.unit_interval(m.dropout, "model", "dropout");
}

// [model] of a Transformer: sizes, then the relations between them.
void validate_transformer_model(const Config& c, const Checker& check) {
  const ModelSection& m = c.model;
  check.positive(m.d_model, "model", "d_model");
  check.positive(m.n_heads, "model", "n_heads");
  check.non_negative(m.n_kv_heads, "model", "n_kv_heads", "= n_heads");
  check.positive(m.d_ff, "model", "d_ff");
  check.positive(m.encoder_layers, "model", "encoder_layers");
  check.positive(m.decoder_layers, "model", "decoder_layers");
  check.positive(m.max_len, "model", "max_len");
  check.unit_interval(m.dropout, "model", "dropout");
  check.unit_interval(m.attention_dropout, "model", "attention_dropout");
  check.require(m.d_model % m.n_heads == 0, "model", "n_heads",
                "d_model " + std::to_string(m.d_model) + " is not divisible by n_heads " + std::to_string(m.n_heads));
  const std::int64_t kv_heads = m.n_kv_heads == 0 ? m.n_heads : m.n_kv_heads;
  check.require(m.n_heads % kv_heads == 0, "model", "n_kv_heads",
                "n_heads " + std::to_string(m.n_heads) + " is not divisible by n_kv_heads " + std::to_string(kv_heads));
  const std::int64_t head_dim = m.d_model / m.n_heads;
  check.require(m.positional != "rope" || head_dim % 2 == 0, "model", "positional",
                "rope rotates pairs of features, so the head width d_model / n_heads must be even, got " +
                    std::to_string(head_dim));
  check.require(m.attention_window >= 0 && m.attention_window <= m.max_len, "model", "attention_window",
                "expected a window of 0 (full attention) to max_len " + std::to_string(m.max_len) + " positions, got " +
                    std::to_string(m.attention_window));
  check.require(m.rope_scaling == "none" || m.positional == "rope", "model", "rope_scaling",
                "scales RoPE's rotation frequencies, so it needs model.positional = \"rope\", got positional \"" +
                    m.positional + "\"");
  check.require(m.rope_factor >= 1, "model", "rope_factor",
                "expected a factor >= 1 (how many times the trained length), got " + format_double(m.rope_factor));
  check.require(m.rope_factor == 1 || m.rope_scaling != "none", "model", "rope_factor",
                "is read only with model.rope_scaling = \"interpolation\" or \"ntk\", but rope_scaling is \"none\" "
                "(got rope_factor " + format_double(m.rope_factor) + ")");
  check.require(m.attention != "tiled" || m.attention_dropout == 0, "model", "attention",
                "tiled attention never forms the attention weights, so it cannot drop them out: set "
                "model.attention_dropout = 0 (got " + format_double(m.attention_dropout) + ") or model.attention = \"plain\"");
  check.require(!m.share_embeddings || c.data.joint_tokenizer, "model", "share_embeddings",
                "sharing source and target embeddings needs one vocabulary: set data.joint_tokenizer = true "
                "or model.share_embeddings = false");
}

void validate(const Config& c, const Checker& check) {
  validate_arch_keys(c, check);
  if (c.model.arch == "rnn")
    validate_rnn_model(c.model, check);
  else
    validate_transformer_model(c, check);

  const DataSection& d = c.data;
  check.positive(d.tokenizer_vocab_size, "data", "tokenizer_vocab_size");
  check.positive(d.max_tokens, "data", "max_tokens");
  check.positive(d.batch_tokens, "data", "batch_tokens");
  check.non_negative(d.max_valid_sentences, "data", "max_valid_sentences", "= all");
  check.require(d.test_src.empty() == d.test_tgt.empty(), "data", d.test_src.empty() ? "test_tgt" : "test_src",
                "test_src and test_tgt go together: set both or neither");
  validate_task(c, check);

  const TrainSection& t = c.train;
  check.require(t.seed >= 0, "train", "seed", "expected an integer >= 0, got " + std::to_string(t.seed));
  check.positive(t.lr, "train", "lr");
  check.unit_interval(t.beta1, "train", "beta1");
  check.unit_interval(t.beta2, "train", "beta2");
  check.positive(t.eps, "train", "eps");
  check.non_negative(t.weight_decay, "train", "weight_decay");
  check.unit_interval(t.momentum, "train", "momentum");
  if (t.schedule == "noam")
    check.positive(t.warmup_steps, "train", "warmup_steps");  // noam divides by warmup^1.5
  else
    check.non_negative(t.warmup_steps, "train", "warmup_steps", "no warm-up");
  check.positive(t.max_steps, "train", "max_steps");
  check.non_negative(t.max_epochs, "train", "max_epochs", "no limit");
  check.non_negative(t.max_minutes, "train", "max_minutes");
  check.unit_interval(t.label_smoothing, "train", "label_smoothing");
  check.non_negative(t.clip_norm, "train", "clip_norm");
  check.positive(t.accum_steps, "train", "accum_steps");
  check.positive(t.log_every, "train", "log_every");
  check.positive(t.valid_every, "train", "valid_every");
  check.non_negative(t.patience, "train", "patience", "off");
  check.positive(t.valid_beam, "train", "valid_beam");
  check.require(t.valid_length_penalty >= 0 && t.valid_length_penalty <= 5, "train", "valid_length_penalty",
                "expected a length penalty alpha in [0, 5], got " + format_double(t.valid_length_penalty));
  check.non_negative(t.max_nonfinite, "train", "max_nonfinite", "stop at the first");
  check.non_negative(t.min_lr, "train", "min_lr");
  check.require(t.schedule != "cosine" || t.min_lr <= t.lr, "train", "min_lr",
                "the cosine schedule decays from lr " + format_double(t.lr) + " down to min_lr, so min_lr " +
                    format_double(t.min_lr) + " must not exceed it");

  const RunSection& r = c.run;
  check.require(!r.attention_snapshots || c.model.arch != "rnn", "run", "attention_snapshots",
                "snapshots record a Transformer's attention heads (arch encoder-decoder, decoder-only or encoder-only), "
                "got model.arch \"rnn\" (set run.attention_snapshots = false)");
  check.non_negative(r.threads, "run", "threads", "= all usable cores");
  check.positive(r.keep_checkpoints, "run", "keep_checkpoints");
  check.non_negative(r.average_last, "run", "average_last", "off");
  check.require(r.average_last <= r.keep_checkpoints, "run", "average_last",
                "averaging the last " + std::to_string(r.average_last) + " checkpoints needs run.keep_checkpoints >= " +
                    std::to_string(r.average_last) + ", got " + std::to_string(r.keep_checkpoints));
}

// ---- writing ----

struct FieldWriter {
  std::string arch;  // the config's model.arch: arch_choice keys of another arch are left out
  std::string out;
  void section(const char* name) { out += std::string(out.empty() ? "" : "\n") + "[" + name + "]\n"; }
  void line(const char* key, const std::string& value) { out += std::string(key) + " = " + value + "\n"; }
  void integer(const char* key, std::int64_t x) { line(key, std::to_string(x)); }
  void floating(const char* key, double x) { line(key, format_double(x)); }
  void boolean(const char* key, bool x) { line(key, x ? "true" : "false"); }
  void choice(const char* key, const std::string& s, const std::vector<std::string>&) { line(key, quote_toml(s)); }
  void arch_choice(const char* only_arch, const char* key, const std::string& s, const std::vector<std::string>&) {
    if (arch == only_arch) line(key, quote_toml(s));
  }
  void text(const char* key, const std::string& s) { line(key, quote_toml(s)); }
  void path(const char* key, const std::string& s, Need) { line(key, quote_toml(s)); }
};

}  // namespace

// Levenshtein distance: insertions, deletions and substitutions needed to turn a into b.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest(const std::string& name, const std::vector<std::string>& candidates) {
  constexpr std::size_t kMaxEdits = 2;  // catches a typo or a swapped pair, not a different word
  std::string best;
  std::size_t best_d = kMaxEdits + 1;
  for (const std::string& c : candidates) {
    const std::size_t d = edit_distance(name, c);
    if (d < best_d) best = c, best_d = d;
  }
  return best;
}

std::vector<std::string> class_labels(const DataSection& data) {
  std::vector<std::string> out;
  if (data.labels.empty()) return out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = data.labels.find(',', start);
    out.push_back(trim(data.labels.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

namespace {

// A config inside an installed data folder is read-only for its user: its run folder, which would
// lie there too, goes to ./runs/ under the current folder, with the same name.
void run_outside_installed_folder(Config& config, const fs::path& config_dir, const std::optional<DataFolder>& data) {
  if (!data || !data->installed) return;
  const fs::path root = fs::weakly_canonical(data->root);
  const auto inside = [&root](const fs::path& p) {
    const fs::path rel = fs::weakly_canonical(p).lexically_relative(root);
    return !rel.empty() && *rel.begin() != "..";
  };
  if (inside(config_dir) && inside(config.run.dir))
    config.run.dir = (fs::current_path() / "runs" / fs::path(config.run.dir).filename()).string();
}

}  // namespace

void require_data_files(const Config& config) {
  if (!config.missing_files.empty()) throw ConfigError(config.missing_files.front());
}

Config load_config(const std::string& given, const std::vector<std::string>& overrides) {
  const std::string path = find_config_file(given);
  std::error_code ec;
  if (!fs::exists(path, ec)) throw ConfigError(path + ": config file not found");
  if (fs::is_directory(path, ec)) throw ConfigError(path + ": is a directory, expected a TOML config file");

  // 1. read, check and parse
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) throw ConfigError(path + ": cannot read the config");
  std::size_t offset = 0;
  if (const std::string problem = unsafe_toml_text(text, offset); !problem.empty()) {
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
    throw ConfigError(path + ":" + std::to_string(line) + ": " + problem);
  }
  toml::value root;
  try {
    std::istringstream text_in(text);
    root = toml::parse(text_in, path);
  } catch (const toml::syntax_error& e) {
    // toml11's what() is a multi-line report; keep its first line ("[error] bad format: ...").
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    if (what.rfind("[error] ", 0) == 0) what = what.substr(8);
    if (what.rfind("toml::", 0) == 0 && what.find(": ") != std::string::npos)
      what = what.substr(what.find(": ") + 2);  // drop toml11's function name ("toml::insert_value: ")
    const std::string text = trim(e.location().line_str());
    throw ConfigError(path + ":" + std::to_string(e.location().line()) + ": TOML syntax error: " + what +
                      (text.empty() ? "" : " in `" + text + "`"));
  } catch (const std::exception& e) {
    std::string what = e.what();
    throw ConfigError(path + ": cannot read the config: " + what.substr(0, what.find('\n')));
  }

  // 2. unknown names in the file, 3. overrides
  check_known_names(path, root);
  for (const std::string& text : overrides) apply_override(path, text, root);

  // 4. typed fields
  Config config;
  config.source_path = path;
  const fs::path config_dir = fs::absolute(path).parent_path();
  const std::optional<DataFolder> data = find_data_folder();
  FieldReader reader{path, config_dir, root, "", nullptr, data, config.missing_files};
  visit_fields(config, reader);
  run_outside_installed_folder(config, config_dir, data);

  // 5. ranges and relations
  validate(config, Checker{path, root});
  return config;
}

std::string to_toml(const Config& config) {
  FieldWriter writer{config.model.arch, ""};
  visit_fields(config, writer);
  return "# Effective Scratchformer configuration: every key, paths absolute.\n"
         "# Load it again with: scratchformer train --config THIS_FILE\n\n" +
         writer.out;
}

}  // namespace sf::train
