// `scratchformer report`: one self-contained HTML file of a run's explorer views (report.h).
//
// Three steps, one function each: collect the data (the same JSON builders the server's routes
// use, data.h), inline the embedded page (assets.h) with the data as one more script, write the
// file. Nothing of the page is fetched when the file is opened: every /static/ link of
// index.html is replaced by the file's text, and a page whose index.html links anything else
// is refused here rather than written half-working.
#include "train/explorer/report.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>

#include "autograd/check.h"
#include "train/explorer/api.h"  // kMaxReportSentences, kMaxTextBytes
#include "train/explorer/assets.h"
#include "train/explorer/data.h"
#include "train/setup.h"

namespace sf::explorer {

namespace fs = std::filesystem;

namespace {

// Non-empty lines of `path` (a '\r' before '\n' dropped), at most `max_lines` of them when
// `stop_early`; otherwise every one (the caller checks the count).
std::vector<std::string> text_lines(const std::string& path, std::size_t max_lines, bool stop_early) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("report: cannot open the sentences file " + path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    lines.push_back(line);
    if (stop_early && lines.size() >= max_lines) break;
  }
  return lines;
}

// The checkpoint the report uses: --checkpoint, else the run's best, else its last, else none.
std::optional<std::string> report_checkpoint(const ReportOptions& o) {
  if (!o.checkpoint.empty()) {
    if (!fs::is_regular_file(o.checkpoint)) throw std::invalid_argument("report: --checkpoint " + o.checkpoint + " is not a file");
    return o.checkpoint;
  }
  for (const char* name : {"checkpoint-best.safetensors", "checkpoint-last.safetensors"}) {
    const fs::path p = fs::path(o.run_dir) / name;
    if (fs::is_regular_file(p)) return p.string();
  }
  return std::nullopt;
}

// The first kDefaultReportSentences lines of the model's validation source, or none when that
// file (named relative to where the training ran) cannot be read from here.
std::vector<std::string> default_sentences(const train::InferenceModel& im) {
  const std::string& path = im.config.data.valid_src.empty() ? im.config.data.valid_file : im.config.data.valid_src;
  if (path.empty() || !fs::is_regular_file(path)) return {};
  std::vector<std::string> lines = text_lines(path, kDefaultReportSentences, true);
  for (std::string& s : lines)
    if (s.size() > kMaxTextBytes) s.resize(kMaxTextBytes);  // a long line is cut, not refused: it is not the user's input
  return lines;
}

// One view of one sentence; a sentence the model cannot handle (too long, an encoder-only model
// asked to generate) becomes {error} on the page instead of stopping the report.
template <class Compute>
Json view_or_error(Compute compute) {
  try {
    return compute();
  } catch (const std::invalid_argument& e) {
    return {{"error", e.what()}};
  }
}

// [{text, translate, attention, attribution}] for `given` (the --sentences file's, read and checked before the
// model is loaded) or, without it, the default sentences, with the model at `checkpoint`.
Json sentence_views(const std::string& checkpoint, const std::optional<std::vector<std::string>>& given) {
  const train::InferenceModel im = train::load_inference_model(checkpoint);
  const std::vector<std::string> texts = given ? *given : default_sentences(im);
  Json list = Json::array();
  for (const std::string& text : texts) {
    TranslateRequest req;
    req.text = text;
    req.mode = "greedy";
    list.push_back({{"text", text},
                    {"translate", view_or_error([&] { return translate(im, req); })},
                    {"attention", view_or_error([&] { return attention(im, text, std::nullopt); })},
                    // attention beside attribution: an encoder-decoder Transformer only (else its one-line error)
                    {"attribution", view_or_error([&] { return attribution(im, text, std::nullopt); })}});
  }
  return list;
}

// `file` inside the run directory as rows (tsv) or snapshots, or nullptr when it is not there.
Json run_file_json(const fs::path& file, bool tsv) {
  if (!fs::is_regular_file(file)) return nullptr;
  return tsv ? tsv_rows(file.string(), 0) : snapshots(file.string());
}

// "</script>" inside the data or a file would end the inline <script> early; "<\/" means the
// same in JSON strings and in JavaScript strings and regular expressions.
std::string escape_for_script(std::string text) {
  for (std::size_t at = 0; (at = text.find("</", at)) != std::string::npos; at += 3) text.replace(at, 2, "<\\/");
  return text;
}

void replace_once(std::string& html, const std::string& from, const std::string& to) {
  const std::size_t at = html.find(from);
  SF_CHECK(at != std::string::npos, "report: the embedded index.html has no ", from);
  html.replace(at, from.size(), to);
}

std::string asset_text(std::string_view name) {
  const Asset* a = find_asset(name);
  SF_CHECK(a != nullptr, "report: the embedded page has no ", name);
  return std::string(a->bytes);
}

}  // namespace

std::vector<std::string> read_report_sentences(const std::string& path) {
  const std::vector<std::string> lines = text_lines(path, 0, false);
  if (lines.empty()) throw std::invalid_argument("report: --sentences " + path + " has no sentence (expected one a line)");
  if (lines.size() > kMaxReportSentences)
    throw std::invalid_argument("report: --sentences " + path + " has " + std::to_string(lines.size()) +
                                " sentences; at most " + std::to_string(kMaxReportSentences) + " fit in one report");
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (lines[i].size() > kMaxTextBytes)
      throw std::invalid_argument("report: --sentences " + path + ":" + std::to_string(i + 1) + " is " +
                                  std::to_string(lines[i].size()) + " bytes; at most " + std::to_string(kMaxTextBytes));
  return lines;
}

Json report_data(const ReportOptions& o) {
  const fs::path dir(o.run_dir);
  if (!fs::is_directory(dir)) throw std::invalid_argument("report: --run " + o.run_dir + " is not a directory");
  if (!fs::is_regular_file(dir / "metrics.tsv") && !fs::is_regular_file(dir / "config.toml"))
    throw std::invalid_argument("report: --run " + o.run_dir + " is not a run directory (no config.toml, no metrics.tsv)");
  std::string name = fs::weakly_canonical(dir).filename().string();
  if (name.empty()) name = "run";
  Json data = {{"version", o.version}, {"report", true}, {"run", name}, {"runs", Json::array({run_summary(dir.string(), name)})}};
  data["metrics"] = Json::object();
  data["layer_norms"] = Json::object();
  data["snapshots"] = Json::object();
  if (Json m = run_file_json(dir / "metrics.tsv", true); !m.is_null()) data["metrics"][name] = m;
  if (Json n = run_file_json(dir / "layer_norms.tsv", true); !n.is_null()) data["layer_norms"][name] = n;
  if (Json s = run_file_json(dir / "snapshots.jsonl", false); !s.is_null()) data["snapshots"][name] = s;
  std::optional<std::vector<std::string>> given;
  if (!o.sentences_file.empty()) given = read_report_sentences(o.sentences_file);
  const std::optional<std::string> checkpoint = report_checkpoint(o);
  if (!checkpoint && given)
    throw std::invalid_argument("report: --sentences needs a checkpoint, and " + o.run_dir + " has none (give --checkpoint)");
  data["checkpoint"] = checkpoint ? Json(fs::path(*checkpoint).filename().string()) : Json(nullptr);
  data["sentences"] = checkpoint ? sentence_views(*checkpoint, given) : Json::array();
  return data;
}

std::string report_html(const Json& data) {
  std::string html = asset_text("index.html");
  replace_once(html, R"(<link rel="stylesheet" href="/static/style.css">)", "<style>\n" + escape_for_script(asset_text("style.css")) + "</style>");
  const std::string data_script = "<script>window.SF_REPORT_DATA = " +
                                  escape_for_script(data.dump(-1, ' ', false, Json::error_handler_t::replace)) + ";</script>\n";
  replace_once(html, R"(<script src="/static/i18n.js"></script>)", data_script + "<script>\n" + escape_for_script(asset_text("i18n.js")) + "</script>");
  replace_once(html, R"(<script src="/static/app.js"></script>)", "<script>\n" + escape_for_script(asset_text("app.js")) + "</script>");
  SF_CHECK(html.find("/static/") == std::string::npos,
           "report: the embedded index.html links a /static/ file the report does not inline");
  return html;
}

void write_report(const ReportOptions& o) {
  if (o.out.empty()) throw std::invalid_argument("report: expected --out FILE.html");
  const std::string html = report_html(report_data(o));
  std::ofstream out(o.out, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("report: cannot open " + o.out + " for writing");
  out << html;
  if (!out.flush()) throw std::runtime_error("report: could not write " + o.out);
}

}  // namespace sf::explorer
