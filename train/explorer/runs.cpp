// The files a training writes, as JSON (data.h, "runs"): one run directory's summary, the rows
// of a tab-separated table (metrics.tsv, layer_norms.tsv) from row N on, and snapshots.jsonl.
//
// A training may be writing these files while they are read: a last line without its '\n' is
// not finished yet and is left for the next poll.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "train/explorer/data.h"
#include "train/setup.h"  // config_from_string

namespace sf::explorer {

namespace fs = std::filesystem;

namespace {

// The complete lines of a file (each ended by '\n', which is dropped, as is a '\r' before it).
std::vector<std::string> complete_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  const std::string text = bytes.str();
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> cells;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = line.find('\t', start);
    cells.push_back(line.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return cells;
    start = end + 1;
  }
}

// A cell as JSON: "" (and nan, inf) -> null, a number -> the number, anything else (the kind
// column: "train", "valid") -> the string.
Json cell_json(const std::string& cell) {
  if (cell.empty()) return nullptr;
  double x = 0;
  const auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), x);
  if (ec == std::errc() && end == cell.data() + cell.size()) return std::isfinite(x) ? Json(x) : Json(nullptr);
  if (ec == std::errc::result_out_of_range) return nullptr;
  return cell;
}

// A file's modification time as Unix seconds.
std::int64_t unix_seconds(fs::file_time_type t) {
  const auto sys = std::chrono::file_clock::to_sys(t);
  return std::chrono::duration_cast<std::chrono::seconds>(sys.time_since_epoch()).count();
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// The *.safetensors files directly in `dir`, sorted by name.
Json checkpoint_names(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    const std::string name = it->path().filename().string();
    if (name.size() > 12 && name.ends_with(".safetensors") && it->is_regular_file(ec2)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

Json run_summary(const std::string& run_dir, const std::string& name) {
  const fs::path dir(run_dir);
  Json j = {{"name", name}, {"arch", nullptr}, {"task", nullptr}, {"config", ""}};
  std::error_code ec;
  std::int64_t modified = unix_seconds(fs::last_write_time(dir, ec));
  if (fs::is_regular_file(dir / "config.toml", ec)) {
    j["config"] = read_text(dir / "config.toml");
    try {
      const train::Config cfg = train::config_from_string(j["config"].get<std::string>(), (dir / "config.toml").string());
      j["arch"] = cfg.model.arch;
      j["task"] = cfg.data.task;
    } catch (const std::exception& e) {
      j["config_error"] = e.what();  // listed anyway: the page shows the text and the error
    }
    modified = std::max(modified, unix_seconds(fs::last_write_time(dir / "config.toml", ec)));
  }
  j["checkpoints"] = checkpoint_names(dir);
  const fs::path metrics = dir / "metrics.tsv";
  const bool has_metrics = fs::is_regular_file(metrics, ec);
  j["has_metrics"] = has_metrics;
  j["metrics_rows"] = 0;
  if (has_metrics) {
    const std::size_t lines = complete_lines(metrics.string()).size();
    j["metrics_rows"] = lines > 0 ? lines - 1 : 0;
    modified = std::max(modified, unix_seconds(fs::last_write_time(metrics, ec)));
  }
  j["modified"] = modified;
  return j;
}

Json tsv_rows(const std::string& path, std::int64_t since) {
  if (since < 0) throw std::invalid_argument("tsv_rows: since must be >= 0, got " + std::to_string(since));
  const std::vector<std::string> lines = complete_lines(path);
  Json columns = Json::array(), rows = Json::array();
  if (!lines.empty())
    for (const std::string& c : split_tabs(lines[0])) columns.push_back(c);
  const std::int64_t total = lines.empty() ? 0 : static_cast<std::int64_t>(lines.size()) - 1;
  for (std::int64_t i = since; i < total; ++i) {
    Json row = Json::array();
    for (const std::string& c : split_tabs(lines[static_cast<std::size_t>(i) + 1])) row.push_back(cell_json(c));
    rows.push_back(std::move(row));
  }
  return {{"columns", columns}, {"rows", rows}, {"total", total}};
}

Json snapshots(const std::string& path) {
  Json list = Json::array();
  const std::vector<std::string> lines = complete_lines(path);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    Json j = Json::parse(lines[i], nullptr, false);
    if (j.is_discarded() || !j.is_object())
      throw std::runtime_error(path + ":" + std::to_string(i + 1) + ": expected one JSON object per line");
    list.push_back(std::move(j));
  }
  return {{"snapshots", list}};
}

}  // namespace sf::explorer
