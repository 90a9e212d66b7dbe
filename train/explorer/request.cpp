// The checks on every request (request.h): limits, path segments, the query string, and the
// JSON bodies of the POST routes turned into typed structs.
#include "train/explorer/request.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "data/corpus.h"  // valid_utf8

namespace sf::explorer {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes `raw` once ('+' as a space when `plus_is_space`); nullopt for a bad escape.
std::optional<std::string> percent_decode(std::string_view raw, bool plus_is_space) {
  std::string out;
  out.reserve(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '+' && plus_is_space) {
      out += ' ';
    } else if (raw[i] != '%') {
      out += raw[i];
    } else {
      if (i + 2 >= raw.size()) return std::nullopt;
      const int hi = hex_digit(raw[i + 1]), lo = hex_digit(raw[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    }
  }
  return out;
}

// Nesting deeper than kMaxJsonDepth is refused before parsing (deep nesting costs stack).
void check_json_depth(std::string_view body) {
  std::size_t depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : body) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        throw bad_request("the JSON body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

// Every key of `body` is one of `known`: a misspelt option ("topk") is an error, not ignored.
void check_fields(const Json& body, const std::string& route, std::initializer_list<const char*> known) {
  for (const auto& item : body.items()) {
    const std::string& key = item.key();
    if (std::find_if(known.begin(), known.end(), [&](const char* k) { return key == k; }) != known.end()) continue;
    std::string list;
    for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    throw bad_request(route + ": unknown field '" + clip(key, 40) + "'; expected one of: " + list);
  }
}

std::string string_field(const Json& body, const char* key, const std::string& fallback, std::size_t max_bytes) {
  if (!body.contains(key)) return fallback;
  const Json& v = body.at(key);
  if (!v.is_string()) throw bad_request(std::string("'") + key + "' must be a string, got " + v.type_name());
  const std::string s = v.get<std::string>();
  if (s.size() > max_bytes)
    throw bad_request(std::string("'") + key + "' is " + std::to_string(s.size()) + " bytes, over the limit of " +
                      std::to_string(max_bytes));
  std::size_t bad = 0;
  if (!data::valid_utf8(s, &bad))
    throw bad_request(std::string("'") + key + "' is not valid UTF-8 (byte " + std::to_string(bad + 1) + ")");
  return s;
}

std::int64_t int_field(const Json& body, const char* key, std::int64_t fallback, std::int64_t lo, std::int64_t hi) {
  if (!body.contains(key)) return fallback;
  const Json& v = body.at(key);
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  if (!v.is_number_integer())
    throw bad_request(std::string("'") + key + "' must be a whole number in " + range + ", got " + clip(v.dump(), 40));
  // nlohmann stores a JSON number >= 0 as unsigned (up to 2^64 - 1), a negative one as signed.
  const bool in_range = v.is_number_unsigned()
                            ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(hi) && v.get<std::int64_t>() >= lo
                            : v.get<std::int64_t>() >= lo && v.get<std::int64_t>() <= hi;
  if (!in_range)
    throw bad_request(std::string("'") + key + "' must be in " + range + ", got " + v.dump());
  return v.get<std::int64_t>();
}

std::uint64_t seed_field(const Json& body) {
  if (!body.contains("seed")) return 0;
  const Json& v = body.at("seed");
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
    throw bad_request("'seed' must be a whole number >= 0, got " + clip(v.dump(), 40));
  return v.get<std::uint64_t>();
}

// A number in [lo, hi] (open at lo when `open_lo`).
double number_field(const Json& body, const char* key, double fallback, double lo, double hi, bool open_lo = false) {
  if (!body.contains(key)) return fallback;
  const Json& v = body.at(key);
  const std::string range = (open_lo ? "(" : "[") + Json(lo).dump() + ", " + Json(hi).dump() + "]";
  if (!v.is_number()) throw bad_request(std::string("'") + key + "' must be a number in " + range + ", got " + clip(v.dump(), 40));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x > hi || x < lo || (open_lo && x == lo))
    throw bad_request(std::string("'") + key + "' must be in " + range + ", got " + v.dump());
  return x;
}

// The sentence of translate and attention: one line of UTF-8, at most kMaxTextBytes, not empty.
std::string text_field(const Json& body, const char* key) {
  if (!body.contains(key)) throw bad_request(std::string("'") + key + "' is missing: the sentence to use");
  const std::string text = string_field(body, key, "", kMaxTextBytes);
  if (text.find_first_of(std::string("\n\r\0", 3)) != std::string::npos)
    throw bad_request(std::string("'") + key + "' is one sentence: no line breaks or NUL characters");
  if (text.find_first_not_of(" \t") == std::string::npos)
    throw bad_request(std::string("'") + key + "' is empty: type a sentence");
  return text;
}

ModelRef model_ref(const Json& body) {
  return {string_field(body, "run", "", kMaxNameBytes), string_field(body, "checkpoint", "", kMaxNameBytes)};
}

// "set" overrides: at most kMaxOverrides of "section.key=value", each at most kMaxOverrideBytes.
std::vector<std::string> overrides_field(const Json& body) {
  if (!body.contains("set")) return {};
  const Json& v = body.at("set");
  if (!v.is_array()) throw bad_request(std::string("'set' must be a list of \"section.key=value\" strings, got ") + v.type_name());
  if (v.size() > kMaxOverrides)
    throw bad_request("'set' has " + std::to_string(v.size()) + " overrides, over the limit of " + std::to_string(kMaxOverrides));
  std::vector<std::string> out;
  for (const Json& item : v) {
    if (!item.is_string()) throw bad_request(std::string("each 'set' entry must be a string, got ") + item.type_name());
    const std::string s = item.get<std::string>();
    if (s.size() > kMaxOverrideBytes)
      throw bad_request("a 'set' entry is " + std::to_string(s.size()) + " bytes, over the limit of " + std::to_string(kMaxOverrideBytes));
    if (!data::valid_utf8(s)) throw bad_request("a 'set' entry is not valid UTF-8");
    const std::string key = s.substr(0, s.find('='));
    const bool allowed = key.rfind("model.", 0) == 0 || key.rfind("train.", 0) == 0 || key == "data.batch_tokens" ||
                         key == "data.max_tokens";
    if (s.find('=') == std::string::npos || !allowed)
      throw bad_request("'set' entry '" + clip(s, 60) + "': expected model.KEY=VALUE, train.KEY=VALUE, data.batch_tokens=N or data.max_tokens=N");
    out.push_back(s);
  }
  return out;
}

ConfigRef config_ref(const Json& body) {
  ConfigRef ref{string_field(body, "config", "", kMaxNameBytes), string_field(body, "run", "", kMaxNameBytes),
                overrides_field(body)};
  if (ref.config.empty() == ref.run.empty())
    throw bad_request("give one of 'config' (a config file name) and 'run' (a run name)");
  return ref;
}

}  // namespace

// ---- limits and errors ----------------------------------------------------------------------

Json limits_json() {
  return {{"text_bytes", kMaxTextBytes},         {"beam", kMaxBeam},
          {"max_new", kMaxNewTokens},            {"body_bytes", kMaxBodyBytes},
          {"report_sentences", kMaxReportSentences}, {"set_overrides", kMaxOverrides},
          {"set_override_bytes", kMaxOverrideBytes}, {"detail_values", kMaxDetailValues},
          {"path_bytes", kMaxPathBytes},         {"query_bytes", kMaxQueryBytes},
          {"name_bytes", kMaxNameBytes},         {"file_bytes", kMaxFileBytes},
          {"since", kMaxSince},                  {"top_k", kMaxTopK},
          {"temperature", kMaxTemperature},      {"length_penalty", kMaxLengthPenalty},
          {"json_depth", kMaxJsonDepth},         {"runs", kMaxRuns},
          {"cached_models", kMaxCachedModels},
          {"step", {{"d_model", kMaxStepDModel}, {"d_ff", kMaxStepFeedForward}, {"layers", kMaxStepLayers},
                    {"n_heads", kMaxStepHeads}, {"max_len", kMaxStepMaxLen}, {"batch_tokens", kMaxStepBatchTokens},
                    {"batch", kMaxStepBatch}}}};
}

RequestError bad_request(const std::string& message) { return RequestError(400, message); }
RequestError not_found(const std::string& message) { return RequestError(404, message); }

std::string clip(std::string_view s, std::size_t n) {
  return s.size() <= n ? std::string(s) : std::string(s.substr(0, n)) + "...";
}

std::string one_line(std::string message) {
  std::replace(message.begin(), message.end(), '\n', ' ');
  std::replace(message.begin(), message.end(), '\r', ' ');
  return clip(message, 1000);
}

bool ends_with(std::string_view s, std::string_view end) {
  return s.size() >= end.size() && s.substr(s.size() - end.size()) == end;
}

// ---- paths and queries ----------------------------------------------------------------------

bool is_plain_name(std::string_view name) {
  if (name.empty() || name == "." || name == ".." || name.size() > kMaxNameBytes) return false;
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f || c == '/' || c == '\\' || c == '%') return false;
  }
  return data::valid_utf8(name);
}

std::optional<std::string> decode_segment(std::string_view raw) {
  if (raw.size() > 3 * kMaxNameBytes) return std::nullopt;
  std::optional<std::string> out = percent_decode(raw, false);
  if (!out || !is_plain_name(*out)) return std::nullopt;
  return out;
}

std::vector<std::string> path_segments(std::string_view raw) {
  if (raw.size() > kMaxPathBytes)
    throw bad_request("the path is " + std::to_string(raw.size()) + " bytes, over the limit of " + std::to_string(kMaxPathBytes));
  if (raw.empty() || raw[0] != '/') throw not_found("not found: a path starts with '/', got '" + clip(raw) + "'");
  std::vector<std::string> segments;
  if (raw == "/") return segments;
  std::size_t start = 1;
  while (true) {
    const std::size_t end = raw.find('/', start);
    const std::string_view piece = raw.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    std::optional<std::string> name = decode_segment(piece);
    if (!name) throw not_found("not found: '" + clip(raw) + "' (each part of a path is a plain file or folder name)");
    segments.push_back(std::move(*name));
    if (end == std::string_view::npos) return segments;
    start = end + 1;
  }
}

std::map<std::string, std::string> parse_query(std::string_view raw) {
  if (raw.size() > kMaxQueryBytes)
    throw bad_request("the query string is " + std::to_string(raw.size()) + " bytes, over the limit of " +
                      std::to_string(kMaxQueryBytes));
  std::map<std::string, std::string> query;
  std::size_t start = 0;
  while (start <= raw.size()) {
    const std::size_t end = std::min(raw.find('&', start), raw.size());
    const std::string_view pair = raw.substr(start, end - start);
    if (!pair.empty()) {
      const std::size_t eq = pair.find('=');
      std::optional<std::string> key = percent_decode(pair.substr(0, eq), true);
      std::optional<std::string> value =
          eq == std::string_view::npos ? std::string() : percent_decode(pair.substr(eq + 1), true);
      if (!key || !value) throw bad_request("the query string has a bad '%' escape: '" + clip(pair, 40) + "'");
      query[*key] = *value;
    }
    start = end + 1;
  }
  return query;
}

std::int64_t since_param(const std::map<std::string, std::string>& query) {
  const auto it = query.find("since");
  if (it == query.end() || it->second.empty()) return 0;
  const std::string& s = it->second;
  if (s.size() > 10 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stoll(s) > kMaxSince)
    throw bad_request("?since= must be a row number 0.." + std::to_string(kMaxSince) + ", got '" + clip(s, 20) + "'");
  return std::stoll(s);
}

void require_method(std::string_view method, std::string_view path, bool post) {
  const bool get = method == "GET" || method == "HEAD";
  if (post ? method != "POST" : !get)
    throw RequestError(405, clip(path) + " takes " + (post ? "POST" : "GET") + ", got " + clip(method, 20));
}

// ---- JSON bodies ----------------------------------------------------------------------------

Json parse_body(std::string_view text) {
  if (text.size() > kMaxBodyBytes)
    throw bad_request("the request body is " + std::to_string(text.size()) + " bytes, over the limit of " +
                      std::to_string(kMaxBodyBytes));
  check_json_depth(text);
  Json body = Json::parse(text, nullptr, false);
  if (body.is_discarded()) throw bad_request("the request body is not valid JSON");
  if (!body.is_object())
    throw bad_request(std::string("the request body must be a JSON object {...}, got ") + body.type_name());
  return body;
}

TranslateBody translate_body(const Json& body) {
  check_fields(body, "/api/translate", {"run", "checkpoint", "text", "mode", "beam", "length_penalty", "temperature",
                                        "top_k", "top_p", "seed", "max_new"});
  TranslateBody r;
  r.model = model_ref(body);
  r.text = text_field(body, "text");
  r.mode = string_field(body, "mode", r.mode, 16);
  if (r.mode != "greedy" && r.mode != "beam" && r.mode != "sample")
    throw bad_request("'mode' must be \"greedy\", \"beam\" or \"sample\", got \"" + r.mode + "\"");
  r.beam = int_field(body, "beam", r.beam, 1, kMaxBeam);
  r.length_penalty = number_field(body, "length_penalty", r.length_penalty, 0, kMaxLengthPenalty);
  r.temperature = number_field(body, "temperature", r.temperature, 0, kMaxTemperature, true);
  r.top_k = int_field(body, "top_k", r.top_k, 0, kMaxTopK);
  r.top_p = number_field(body, "top_p", r.top_p, 0, 1, true);
  r.seed = seed_field(body);
  r.max_new = int_field(body, "max_new", r.max_new, 1, kMaxNewTokens);
  return r;
}

namespace {

AttentionBody sentence_body(const Json& body, const char* route) {
  check_fields(body, route, {"run", "checkpoint", "text", "target"});
  AttentionBody r;
  r.model = model_ref(body);
  r.text = text_field(body, "text");
  if (body.contains("target") && !body.at("target").is_null()) r.target = text_field(body, "target");
  return r;
}

}  // namespace

AttentionBody attention_body(const Json& body) { return sentence_body(body, "/api/attention"); }
AttentionBody attribution_body(const Json& body) { return sentence_body(body, "/api/attribution"); }

StepBody step_body(const Json& body) {
  check_fields(body, "/api/step", {"config", "run", "set", "batch", "seed", "detail_values"});
  StepBody r;
  r.source = config_ref(body);
  r.batch = int_field(body, "batch", r.batch, 0, kMaxStepBatch);
  r.seed = seed_field(body);
  r.detail_values = int_field(body, "detail_values", r.detail_values, 0, kMaxDetailValues);
  return r;
}

DemoBody demo_body(const Json& body) {
  check_fields(body, "/api/demo", {"name", "text"});
  DemoBody r;
  r.name = string_field(body, "name", "", 40);  // a demo of the registry: checked by api.cpp
  r.text = string_field(body, "text", "", kMaxDemoTextBytes);
  if (!r.text.empty() && r.name != "worked-example")
    throw bad_request("'text' is read by the demo worked-example only, not by '" + r.name + "'");
  return r;
}

void check_step_model(const train::Config& c) {
  const auto check = [](const char* key, std::int64_t value, std::int64_t limit) {
    if (value > limit)
      throw bad_request(std::string(key) + " = " + std::to_string(value) + " is over the explorer's limit of " +
                        std::to_string(limit) + " for one step");
  };
  check("model.d_model", c.model.d_model, kMaxStepDModel);
  check("model.d_ff", c.model.d_ff, kMaxStepFeedForward);
  check("model.encoder_layers", c.model.encoder_layers, kMaxStepLayers);
  check("model.decoder_layers", c.model.decoder_layers, kMaxStepLayers);
  check("model.n_heads", c.model.n_heads, kMaxStepHeads);
  check("model.max_len", c.model.max_len, kMaxStepMaxLen);
  check("data.batch_tokens", c.data.batch_tokens, kMaxStepBatchTokens);
}

}  // namespace sf::explorer
