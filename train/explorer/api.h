// The explorer's HTTP API without the sockets: a request in, a response out. `scratchformer
// serve` (train/explorer/server.h) turns each HTTP request into a Request and sends back the
// Response; the unit tests, the load test and the fuzz target (tests/fuzz/fuzz_explorer.cpp)
// call Explorer::handle directly. The checks on each input, and the limits, are in
// train/explorer/request.h. The routes and their JSON are in docs/explorer.md (and the
// table below); what each page shows is computed by train/explorer/data.h.
//
//   GET  /                          index.html (embedded, train/explorer/assets.h)
//   GET  /static/NAME               app.js, i18n.js, style.css (embedded)
//   GET  /runs/RUN/PATH             a regular file inside the run directory RUN (svg, tsv, ...)
//   GET  /api/info                  version, runs root, the default model, the limits (request.h)
//   GET  /api/runs                  every run under the runs root, with its config
//   GET  /api/runs/RUN/metrics?since=N, /layer_norms?since=N, /snapshots
//   GET  /api/demos                 the lecture's demos: name, claim, explanation, seconds
//   POST /api/translate, /api/attention, /api/attribution, /api/step, /api/demo   (JSON bodies)
//
// What it never does: serve a file outside its embedded ones and the run directories. A path
// segment that is ".." before or after its one decoding (%2e%2e), that still holds a '%' after it
// (double-encoded %252e), a slash or a backslash (%2f, %5c), a NUL, an empty segment (an absolute
// path "//etc"), or a symlink that resolves outside its run directory is a 404. Every input has a limit (the constants in request.h, reported by /api/info); a request beyond
// one is a 400 with {"error": "one line: what was expected, what was found"}. A missing or
// corrupt checkpoint is a 404 or a 500 with such a line, never a crash: each request catches
// every std::exception.
//
// Thread safety: handle() may be called from many threads at once. Loaded models are cached
// (at most kMaxCachedModels, the least recently used dropped first) and each has ONE mutex,
// held by a request for as long as it decodes or traces with that model: the modules keep
// mutable state while they run (nn/attention.h capture_weights and last_weights, the KV cache),
// so two requests never use one model at the same time. Requests on different models, and the
// file and run routes, run in parallel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/config.h"
#include "train/explorer/request.h"

namespace sf::train {
struct InferenceModel;
}

namespace sf::explorer {

using Json = nlohmann::json;

// ---- requests and responses -----------------------------------------------------------------

struct Request {
  std::string method;                        // "GET", "POST", ... (HEAD is answered as GET)
  std::string path;                          // raw, still percent-encoded, without the query: "/runs/a%20b/x.svg"
  std::map<std::string, std::string> query;  // decoded query parameters: {"since": "12"}
  std::string body;                          // the request body (JSON for the POST routes)
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

// {"error": message} with `status`; the message is made one line (newlines become spaces).
Response error_response(int status, const std::string& message);

// ---- path safety (used by handle; public for the tests) -------------------------------------

// `dir`/segments... as an existing regular file whose real path (symlinks resolved) lies inside
// the real path of `dir`; nullopt otherwise. Each segment must already be a decode_segment name.
std::optional<std::filesystem::path> file_inside(const std::filesystem::path& dir, const std::vector<std::string>& segments);

// ---- the explorer ---------------------------------------------------------------------------

struct ExplorerOptions {
  std::string runs_root = "runs";      // --runs: each directory under it is a run
  std::string configs_dir = "configs"; // --configs: the configs /api/step may name
  std::string default_checkpoint;      // --checkpoint: the model of {"run": ""}; "" = none
};

class Explorer {
 public:
  explicit Explorer(ExplorerOptions options);
  ~Explorer();
  Explorer(const Explorer&) = delete;
  Explorer& operator=(const Explorer&) = delete;

  // Answers one request; never throws. Thread-safe (see the top of the file).
  Response handle(const Request& request);

  // Loads --checkpoint now (so a bad file is reported when the server starts); throws the
  // loader's one-line error. Does nothing without a default checkpoint.
  void preload_default_model();

  const ExplorerOptions& options() const { return options_; }

 private:
  struct CachedModel;   // one loaded checkpoint and its mutex (api.cpp)
  struct LockedModel;   // a model held by one request
  struct ConfigSource {  // the config of a step request
    train::Config config;
    std::string checkpoint;  // the run's checkpoint-last, "" for a file from --configs
  };

  Response route(const Request& request);
  Response route_api(const Request& request, const std::vector<std::string>& segments);
  Response route_run_data(const Request& request, const std::string& run, const std::string& what);
  Response route_post(const Request& request, const std::string& route);
  Response run_file(const std::string& run, const std::vector<std::string>& path);

  Response api_info();
  Response api_runs();
  Response api_translate(const TranslateBody& body);
  Response api_attention(const AttentionBody& body);
  Response api_attribution(const AttentionBody& body);
  Response api_step(const StepBody& body);
  Response api_demo(const DemoBody& body);

  std::filesystem::path run_dir(const std::string& run) const;  // throws a 404 unless a run
  std::vector<std::string> run_names() const;
  std::filesystem::path checkpoint_path(const ModelRef& model) const;
  std::optional<Json> default_model() const;
  ConfigSource config_source(const ConfigRef& ref) const;
  LockedModel lock_model(const ModelRef& model);
  std::shared_ptr<CachedModel> cached_model(const std::filesystem::path& checkpoint);

  ExplorerOptions options_;
  std::mutex cache_mutex_;                          // guards cache_ (not the models)
  std::list<std::shared_ptr<CachedModel>> cache_;   // most recently used first
  std::mutex step_mutex_;                           // one /api/step at a time (each builds a model)
  std::mutex demo_mutex_;                           // one demo runs at a time; guards demo_reports_
  std::map<std::string, std::string> demo_reports_; // name -> its report (JSON text), once run
};

}  // namespace sf::explorer
