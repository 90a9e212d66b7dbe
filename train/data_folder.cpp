#include "train/data_folder.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <system_error>

#include "train/config.h"

namespace sf::train {

namespace fs = std::filesystem;

fs::path program_folder() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

namespace {

bool is_folder(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// `dir` as a data folder of either layout, or nothing.
std::optional<DataFolder> data_folder_at(const fs::path& dir) {
  const fs::path installed = dir / "share" / "scratchformer";
  if (is_folder(installed / "configs") && is_folder(installed / "data" / "corpora")) return DataFolder{installed, true};
  if (is_folder(dir / "configs") && is_folder(dir / "data" / "corpora")) return DataFolder{dir, false};
  return std::nullopt;
}

// The first sentence of a config's opening comment ("# quickstart: German -> English ... . More"),
// without the "name: " it starts with, at most about one line long.
std::string first_sentence(const fs::path& file, const std::string& name) {
  std::ifstream in(file);
  std::string text;
  for (std::string line; std::getline(in, line) && line.rfind("# ", 0) == 0;) {
    if (!text.empty()) text += ' ';
    text += line.substr(2);
  }
  if (text.rfind(name + ": ", 0) == 0) text = text.substr(name.size() + 2);
  const std::size_t stop = text.find(". ");
  if (stop != std::string::npos) text = text.substr(0, stop + 1);
  constexpr std::size_t kWidth = 90;
  if (text.size() > kWidth) text = text.substr(0, text.rfind(' ', kWidth)) + " ...";
  return text;
}

}  // namespace

std::optional<DataFolder> find_data_folder() {
  if (const char* env = std::getenv("SCRATCHFORMER_DATA"); env && *env) {
    const fs::path root = fs::absolute(env).lexically_normal();
    if (!is_folder(root / "configs")) return std::nullopt;  // set but wrong: data_folder() says so
    return DataFolder{root, !fs::exists(root / "CMakeLists.txt")};  // a checkout has its CMakeLists.txt
  }
  fs::path dir = program_folder();
  for (int up = 0; up < 5 && !dir.empty(); ++up, dir = dir.parent_path()) {
    if (std::optional<DataFolder> found = data_folder_at(dir)) return found;
    if (dir == dir.root_path()) break;
  }
  return std::nullopt;
}

DataFolder data_folder() {
  if (std::optional<DataFolder> found = find_data_folder()) return *found;
  if (const char* env = std::getenv("SCRATCHFORMER_DATA"); env && *env)
    throw std::runtime_error(std::string("SCRATCHFORMER_DATA=") + env + " has no configs/ folder");
  throw std::runtime_error("no data folder (configs/ and data/corpora/) above the program's folder " +
                           program_folder().string() + " (share/scratchformer/ when installed, the checkout when built): "
                           "set SCRATCHFORMER_DATA to it");
}

std::string corpora_dir(const std::string& given) {
  return given.empty() ? data_folder().corpora().string() : given;
}

std::vector<ConfigEntry> list_configs() {
  std::vector<ConfigEntry> entries;
  const fs::path dir = data_folder().configs();
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".toml") continue;
    ConfigEntry e{it->path().stem().string(), it->path().string(), ""};
    e.description = first_sentence(it->path(), e.name);
    entries.push_back(e);
  }
  std::sort(entries.begin(), entries.end(), [](const ConfigEntry& a, const ConfigEntry& b) { return a.name < b.name; });
  return entries;
}

std::string find_config_file(const std::string& arg) {
  if (arg.empty()) throw ConfigError("expected a config file or a config's name (`scratchformer configs` lists them), got an empty string");
  std::error_code ec;
  if (fs::exists(arg, ec) || arg.find('/') != std::string::npos) return arg;  // a path: load_config reports it
  const std::string file = arg.size() > 5 && arg.ends_with(".toml") ? arg : arg + ".toml";
  const std::optional<DataFolder> data = find_data_folder();
  if (data && fs::exists(data->configs() / file, ec)) return (data->configs() / file).string();
  throw ConfigError(arg + ": config file not found, neither in the current folder nor in " +
                    (data ? data->configs().string() : std::string("a data folder (none found)")) +
                    " (`scratchformer configs` lists the configs there)");
}

}  // namespace sf::train
