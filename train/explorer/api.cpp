// The explorer's routes (api.h): path safety, the checks on every input, the model cache, and
// the calls into train/explorer/data.h that compute each answer.
#include "train/explorer/api.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "data/corpus.h"
#include "train/config.h"
#include "train/explorer/assets.h"
#include "train/explorer/data.h"
#include "train/lessons/demo.h"
#include "train/explorer/request.h"
#include "train/setup.h"

#ifndef SCRATCHFORMER_VERSION
#define SCRATCHFORMER_VERSION "unknown"
#endif

namespace sf::explorer {

namespace fs = std::filesystem;

namespace {

// JSON text of `j`; bytes that are not UTF-8 (a file name, a tsv cell) become U+FFFD instead
// of an exception.
Response json_response(const Json& j, int status = 200) {
  return {status, "application/json", j.dump(-1, ' ', false, Json::error_handler_t::replace)};
}

// True when `path` lies strictly inside `root` (both absolute and canonical).
bool is_within(const fs::path& path, const fs::path& root) {
  std::string prefix = root.native();
  if (prefix.empty() || prefix.back() != '/') prefix += '/';
  return path.native().size() > prefix.size() && path.native().compare(0, prefix.size(), prefix) == 0;
}

std::string read_whole_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// A file an /api route or /runs/ reads: not over kMaxFileBytes.
void check_file_size(const fs::path& file) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(file, ec);
  if (ec || size > kMaxFileBytes)
    throw not_found(file.filename().string() + " is over the limit of " + std::to_string(kMaxFileBytes >> 20) +
                    " MiB for a file the explorer reads");
}

Response empty_rows() { return json_response({{"columns", Json::array()}, {"rows", Json::array()}, {"total", 0}}); }

Response static_file(const std::string& name) {
  const Asset* asset = find_asset(name);
  if (!asset)
    throw not_found("no embedded file '" + clip(name) + "'" +
                    (embedded_assets().empty() ? " (this binary was built without train/explorer/web)" : ""));
  return {200, content_type_for(name), std::string(asset->bytes)};
}

}  // namespace

// ---- public helpers -------------------------------------------------------------------------

Response error_response(int status, const std::string& message) {
  return json_response({{"error", one_line(message)}}, status);
}

std::optional<fs::path> file_inside(const fs::path& dir, const std::vector<std::string>& segments) {
  std::error_code ec;
  const fs::path root = fs::canonical(dir, ec);
  if (ec || segments.empty()) return std::nullopt;
  fs::path path = root;
  for (const std::string& s : segments) {
    if (!is_plain_name(s)) return std::nullopt;
    path /= s;
  }
  const fs::path real = fs::weakly_canonical(path, ec);  // symlinks resolved
  if (ec || !is_within(real, root) || !fs::is_regular_file(real, ec)) return std::nullopt;
  return real;
}

std::string content_type_for(std::string_view name) {
  static const std::vector<std::pair<std::string_view, std::string_view>> types = {
      {".html", "text/html; charset=utf-8"},  {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},    {".svg", "image/svg+xml"},
      {".png", "image/png"},                  {".json", "application/json"},
      {".jsonl", "text/plain; charset=utf-8"}, {".tsv", "text/tab-separated-values; charset=utf-8"},
      {".toml", "text/plain; charset=utf-8"}, {".txt", "text/plain; charset=utf-8"},
      {".log", "text/plain; charset=utf-8"},  {".md", "text/plain; charset=utf-8"},
      {".ico", "image/x-icon"},               {".woff2", "font/woff2"}};
  for (const auto& [ext, type] : types)
    if (ends_with(name, ext)) return std::string(type);
  return "application/octet-stream";
}

// ---- the model cache ------------------------------------------------------------------------

// One checkpoint file, loaded on first use. `mutex` is the model's one lock: held by the request
// that loads it and by each request that decodes or traces with it (api.h, thread safety).
struct Explorer::CachedModel {
  fs::path path;                       // canonical
  fs::file_time_type modified;         // the file when it was looked up: a newer file is reloaded
  std::uintmax_t size = 0;
  std::mutex mutex;
  std::unique_ptr<train::InferenceModel> model;  // null until loaded
};

struct Explorer::LockedModel {
  std::shared_ptr<CachedModel> entry;
  std::unique_lock<std::mutex> lock;
  const train::InferenceModel& im() const { return *entry->model; }
};

Explorer::Explorer(ExplorerOptions options) : options_(std::move(options)) {}
Explorer::~Explorer() = default;

// The cache entry of `checkpoint` (made if new, or if the file changed since), moved to the
// front; the least recently used entries beyond kMaxCachedModels are dropped (a request still
// using one keeps it alive until it is done).
std::shared_ptr<Explorer::CachedModel> Explorer::cached_model(const fs::path& checkpoint) {
  std::error_code ec;
  const fs::file_time_type modified = fs::last_write_time(checkpoint, ec);
  const std::uintmax_t size = ec ? 0 : fs::file_size(checkpoint, ec);
  if (ec) throw not_found("the checkpoint " + checkpoint.filename().string() + " is gone");
  std::lock_guard<std::mutex> guard(cache_mutex_);
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    if ((*it)->path != checkpoint) continue;
    std::shared_ptr<CachedModel> entry = *it;
    cache_.erase(it);
    if (entry->modified == modified && entry->size == size) {
      cache_.push_front(entry);
      return entry;
    }
    break;  // rewritten by a training still running: load it again
  }
  auto entry = std::make_shared<CachedModel>();
  entry->path = checkpoint;
  entry->modified = modified;
  entry->size = size;
  cache_.push_front(entry);
  while (cache_.size() > kMaxCachedModels) cache_.pop_back();
  return entry;
}

// The model a translate/attention body names, loaded and locked for this request.
Explorer::LockedModel Explorer::lock_model(const ModelRef& model) {
  const fs::path checkpoint = checkpoint_path(model);
  std::shared_ptr<CachedModel> entry = cached_model(checkpoint);
  std::unique_lock<std::mutex> lock(entry->mutex);
  if (!entry->model) {
    try {
      entry->model = std::make_unique<train::InferenceModel>(train::load_inference_model(checkpoint.string()));
    } catch (const std::exception& e) {
      {
        std::lock_guard<std::mutex> guard(cache_mutex_);
        cache_.remove(entry);  // the next request tries again (the file may be rewritten)
      }
      throw RequestError(500, "cannot load the checkpoint " + checkpoint.filename().string() + ": " + e.what());
    }
  }
  return {std::move(entry), std::move(lock)};
}

void Explorer::preload_default_model() {
  if (options_.default_checkpoint.empty()) return;
  LockedModel m = lock_model(ModelRef{});
  (void)m;
}

// ---- runs and checkpoints -------------------------------------------------------------------

fs::path Explorer::run_dir(const std::string& run) const {
  if (!is_plain_name(run)) throw not_found("not found: '" + clip(run) + "' is not a run name (a folder name under the runs root)");
  std::error_code ec;
  const fs::path root = fs::canonical(options_.runs_root, ec);
  if (ec) throw not_found("the runs folder " + options_.runs_root + " does not exist (yet)");
  const fs::path dir = fs::weakly_canonical(root / run, ec);
  if (ec || !is_within(dir, root) || !fs::is_directory(dir, ec))
    throw not_found("no run called '" + clip(run) + "' under " + options_.runs_root);
  return dir;
}

// The directories directly under the runs root that hold a config.toml, sorted (at most kMaxRuns).
std::vector<std::string> Explorer::run_names() const {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(options_.runs_root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code ec2;
    if (is_plain_name(name) && fs::is_regular_file(it->path() / "config.toml", ec2)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  if (names.size() > kMaxRuns) names.resize(kMaxRuns);
  return names;
}

// checkpoint-best.safetensors, else checkpoint-last.safetensors, in a run directory.
static std::optional<fs::path> default_checkpoint_of(const fs::path& dir) {
  for (const char* name : {"checkpoint-best.safetensors", "checkpoint-last.safetensors"})
    if (auto file = file_inside(dir, {name})) return file;
  return std::nullopt;
}

// {run, checkpoint}: the file to load. run "" is --checkpoint (and only it); a checkpoint
// name must be a file directly in the run's directory.
fs::path Explorer::checkpoint_path(const ModelRef& model) const {
  const std::string& run = model.run;
  const std::string& name = model.checkpoint;
  if (run.empty()) {
    const std::string& given = options_.default_checkpoint;
    if (given.empty())
      throw bad_request("no model given: 'run' names a run under " + options_.runs_root +
                        " (the server was started without --checkpoint)");
    if (!name.empty() && name != given && name != fs::path(given).filename().string())
      throw not_found("not found: with \"run\": \"\" the checkpoint is the server's --checkpoint, not '" + clip(name) + "'");
    std::error_code ec;
    if (!fs::is_regular_file(given, ec)) throw not_found("the checkpoint " + given + " does not exist");
    return fs::canonical(given);
  }
  const fs::path dir = run_dir(run);
  if (name.empty()) {
    if (auto file = default_checkpoint_of(dir)) return *file;
    throw not_found("run '" + run + "' has no checkpoint yet (checkpoint-best.safetensors or checkpoint-last.safetensors)");
  }
  std::optional<fs::path> file;
  if (is_plain_name(name) && ends_with(name, ".safetensors")) file = file_inside(dir, {name});
  if (!file) throw not_found("run '" + run + "' has no checkpoint '" + clip(name) + "'");
  return *file;
}

// --checkpoint, else the run whose checkpoint was written last; null when there is none.
std::optional<Json> Explorer::default_model() const {
  if (!options_.default_checkpoint.empty()) return Json{{"run", ""}, {"checkpoint", options_.default_checkpoint}};
  std::optional<Json> best;
  fs::file_time_type newest{};
  for (const std::string& run : run_names()) {
    std::error_code ec;
    const std::optional<fs::path> file = default_checkpoint_of(fs::path(options_.runs_root) / run);
    if (!file) continue;
    const fs::file_time_type t = fs::last_write_time(*file, ec);
    if (ec || (best && t <= newest)) continue;
    newest = t;
    best = Json{{"run", run}, {"checkpoint", file->filename().string()}};
  }
  return best;
}

// ---- the routes -----------------------------------------------------------------------------

Response Explorer::handle(const Request& request) {
  try {
    return route(request);
  } catch (const RequestError& e) {
    return error_response(e.status, e.what());
  } catch (const train::ConfigError& e) {
    return error_response(400, e.what());
  } catch (const std::invalid_argument& e) {
    return error_response(400, e.what());
  } catch (const std::exception& e) {
    return error_response(500, std::string("internal error: ") + e.what());
  } catch (...) {
    return error_response(500, "internal error: an exception that is not a std::exception");
  }
}

Response Explorer::route(const Request& request) {
  const std::vector<std::string> s = path_segments(request.path);
  if (s.empty() || (s.size() == 1 && s[0] == "index.html")) {
    require_method(request.method, request.path, false);
    return static_file("index.html");
  }
  if (s[0] == "static" && s.size() == 2) {
    require_method(request.method, request.path, false);
    return static_file(s[1]);
  }
  if (s[0] == "runs" && s.size() >= 3) {
    require_method(request.method, request.path, false);
    return run_file(s[1], std::vector<std::string>(s.begin() + 2, s.end()));
  }
  if (s[0] == "api") return route_api(request, s);
  throw not_found("not found: " + clip(request.path));
}

// A POST route's body, checked into its typed struct (request.h), then answered.
Response Explorer::route_post(const Request& request, const std::string& route) {
  const Json body = parse_body(request.body);
  if (route == "translate") return api_translate(translate_body(body));
  if (route == "attention") return api_attention(attention_body(body));
  if (route == "attribution") return api_attribution(attribution_body(body));
  if (route == "step") return api_step(step_body(body));
  return api_demo(demo_body(body));
}

Response Explorer::route_api(const Request& request, const std::vector<std::string>& s) {
  if (s.size() == 2 && (s[1] == "info" || s[1] == "runs" || s[1] == "demos")) {
    require_method(request.method, request.path, false);
    if (s[1] == "demos") return json_response(lessons::demo_list_json());
    return s[1] == "info" ? api_info() : api_runs();
  }
  if (s.size() == 4 && s[1] == "runs") {
    require_method(request.method, request.path, false);
    return route_run_data(request, s[2], s[3]);
  }
  if (s.size() == 2 && (s[1] == "translate" || s[1] == "attention" || s[1] == "step" || s[1] == "demo" || s[1] == "attribution")) {
    require_method(request.method, request.path, true);
    return route_post(request, s[1]);
  }
  throw not_found("no API route " + clip(request.path) + " (the routes: docs/explorer.md)");
}

// /api/runs/RUN/metrics|layer_norms|snapshots: a file the training has not written yet is empty.
Response Explorer::route_run_data(const Request& request, const std::string& run, const std::string& what) {
  const fs::path dir = run_dir(run);
  if (what == "metrics" || what == "layer_norms") {
    const std::int64_t since = since_param(request.query);
    const std::optional<fs::path> file = file_inside(dir, {what + ".tsv"});
    if (!file) return empty_rows();
    check_file_size(*file);
    return json_response(tsv_rows(file->string(), since));
  }
  if (what == "snapshots") {
    const std::optional<fs::path> file = file_inside(dir, {"snapshots.jsonl"});
    if (!file) return json_response({{"snapshots", Json::array()}});
    check_file_size(*file);
    return json_response(snapshots(file->string()));
  }
  throw not_found("no API route " + clip(request.path) + " (a run has metrics, layer_norms and snapshots)");
}

// GET /runs/RUN/PATH: the bytes of a regular file inside the run directory. An .html file there
// is sent as text, so no page but the explorer's own runs scripts on its origin.
Response Explorer::run_file(const std::string& run, const std::vector<std::string>& path) {
  const fs::path dir = run_dir(run);
  const std::optional<fs::path> file = file_inside(dir, path);
  std::string shown;
  for (const std::string& p : path) shown += (shown.empty() ? "" : "/") + p;
  if (!file) throw not_found("run '" + clip(run) + "' has no file '" + clip(shown) + "'");
  check_file_size(*file);
  std::string type = content_type_for(file->filename().string());
  if (type.rfind("text/html", 0) == 0) type = "text/plain; charset=utf-8";
  return {200, type, read_whole_file(*file)};
}

Response Explorer::api_info() {
  Json configs = Json::array();
  std::error_code ec;
  for (fs::directory_iterator it(options_.configs_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (is_plain_name(name) && ends_with(name, ".toml") && configs.size() < kMaxRuns) configs.push_back(name);
  }
  std::sort(configs.begin(), configs.end());
  const std::optional<Json> model = default_model();
  return json_response({{"version", SCRATCHFORMER_VERSION},
                        {"runs_root", options_.runs_root},
                        {"configs_dir", options_.configs_dir},
                        {"configs", configs},
                        {"default", model ? *model : Json(nullptr)},
                        {"limits", limits_json()},
                        {"archs", {"encoder-decoder", "decoder-only", "encoder-only", "rnn"}}});
}

// A run whose files cannot be summarised is listed with its error, not dropped.
Response Explorer::api_runs() {
  Json runs = Json::array();
  for (const std::string& name : run_names()) {
    try {
      runs.push_back(run_summary(run_dir(name).string(), name));
    } catch (const std::exception& e) {
      runs.push_back({{"name", name}, {"error", one_line(e.what())}});
    }
  }
  return json_response({{"runs", runs}});
}

Response Explorer::api_translate(const TranslateBody& body) {
  TranslateRequest req;
  req.text = body.text;
  req.mode = body.mode;
  req.beam = body.beam;
  req.length_penalty = body.length_penalty;
  req.temperature = body.temperature;
  req.top_k = body.top_k;
  req.top_p = body.top_p;
  req.seed = body.seed;
  req.max_new = body.max_new;
  const LockedModel model = lock_model(body.model);
  return json_response(explorer::translate(model.im(), req));
}

Response Explorer::api_attention(const AttentionBody& body) {
  const LockedModel model = lock_model(body.model);
  return json_response(explorer::attention(model.im(), body.text, body.target));
}

Response Explorer::api_attribution(const AttentionBody& body) {
  const LockedModel model = lock_model(body.model);  // held: each head's ablation zeroes its weights for a moment
  return json_response(explorer::attribution(model.im(), body.text, body.target));
}

// The config of a step or lesson: {"config": NAME in --configs} or {"run": RUN} (its
// config.toml, and its checkpoint-last when there is one), with the "set" overrides.
Explorer::ConfigSource Explorer::config_source(const ConfigRef& ref) const {
  ConfigSource source;
  std::optional<fs::path> file;
  if (!ref.config.empty()) {
    if (is_plain_name(ref.config) && ends_with(ref.config, ".toml")) file = file_inside(options_.configs_dir, {ref.config});
    if (!file) throw not_found("no config '" + clip(ref.config) + "' in " + options_.configs_dir);
  } else {
    const fs::path dir = run_dir(ref.run);
    file = file_inside(dir, {"config.toml"});
    if (!file) throw not_found("run '" + clip(ref.run) + "' has no config.toml");
    if (auto last = file_inside(dir, {"checkpoint-last.safetensors"})) source.checkpoint = last->string();
  }
  check_file_size(*file);
  source.config = train::load_config(file->string(), ref.set);
  check_step_model(source.config);
  return source;
}

Response Explorer::api_step(const StepBody& body) {
  StepRequest req;
  ConfigSource source = config_source(body.source);
  req.config = std::move(source.config);
  req.checkpoint = source.checkpoint;
  req.batch = body.batch;
  req.seed = body.seed;
  req.detail_values = body.detail_values;
  std::lock_guard<std::mutex> one_at_a_time(step_mutex_);
  return json_response(explorer::step(req));
}

// A demo runs once (some train for a minute) and its report is kept: a class that opens the same
// demo together waits for one run, then everyone gets the same numbers. A worked example of a
// sentence of one's own is quick and not kept.
Response Explorer::api_demo(const DemoBody& body) {
  const lessons::Demo* found = lessons::find_demo(body.name);
  if (!found) {
    std::string names;
    for (const lessons::Demo& d : lessons::demos()) names += (names.empty() ? "" : ", ") + d.name;
    throw bad_request("'name' must be one of the demos (" + names + "), got '" + body.name + "'");
  }
  const lessons::Demo& demo = *found;
  lessons::DemoOptions options;
  options.text = body.text;
  std::lock_guard<std::mutex> one_at_a_time(demo_mutex_);
  if (!body.text.empty()) return json_response(lessons::demo_report(demo, options));
  auto it = demo_reports_.find(body.name);
  if (it == demo_reports_.end()) it = demo_reports_.emplace(body.name, lessons::demo_report(demo, options).dump()).first;
  Response r;
  r.body = it->second;
  return r;
}

}  // namespace sf::explorer
