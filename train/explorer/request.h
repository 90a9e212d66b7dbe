// What a request to the explorer may be, before any file or model is touched: the limits, the
// path segments of a URL (percent-decoded once, each a plain name), the query string, and each
// POST route's JSON body checked field by field into a typed struct. Pure code (std, nlohmann
// json, train/config.h's structs): train/explorer/api.cpp routes with it, and the fuzz target
// tests/fuzz/fuzz_explorer.cpp runs it on arbitrary bytes without a model or a socket.
//
// Every check throws RequestError with the HTTP status (400 beyond a limit or for a malformed
// body, 404 for a path that is not a plain name, 405 for a wrong method) and one line saying
// what was expected and what was found.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/config.h"

namespace sf::explorer {

using Json = nlohmann::json;

// ---- limits (GET /api/info lists them) ------------------------------------------------------

inline constexpr std::size_t kMaxTextBytes = 1000;          // text and target of translate/attention (UTF-8)
inline constexpr std::int64_t kMaxBeam = 16;                // beam 1..16
inline constexpr std::int64_t kMaxNewTokens = 200;          // max_new 1..200
inline constexpr std::size_t kMaxBodyBytes = 64 * 1024;     // a request body (the server's payload limit too)
inline constexpr std::size_t kMaxReportSentences = 50;      // sentences in one `scratchformer report`
inline constexpr std::size_t kMaxOverrides = 16;            // "set" entries of /api/step
inline constexpr std::size_t kMaxDemoTextBytes = 200;       // text of /api/demo (worked-example: <= 12 words)
inline constexpr std::size_t kMaxOverrideBytes = 200;       // one "set" entry: "model.norm_position=post"
inline constexpr std::int64_t kMaxDetailValues = 16;        // detail_values of /api/step
inline constexpr std::size_t kMaxPathBytes = 2048;          // the raw URL path
inline constexpr std::size_t kMaxQueryBytes = 1024;         // the raw query string (after '?')
inline constexpr std::size_t kMaxNameBytes = 255;           // one path segment: a run, a file, a config
inline constexpr std::uintmax_t kMaxFileBytes = 64u << 20;  // a file served from a run directory, or read by an /api route
inline constexpr std::int64_t kMaxSince = 1'000'000'000;    // ?since=N of the tsv routes
inline constexpr std::int64_t kMaxTopK = 1000;              // top_k 0..1000 (0 = off)
inline constexpr double kMaxTemperature = 10;               // temperature in (0, 10]
inline constexpr double kMaxLengthPenalty = 5;              // length_penalty in [0, 5]
inline constexpr std::size_t kMaxJsonDepth = 32;            // nesting of a JSON body
inline constexpr std::int64_t kMaxStepBatch = 1'000'000;    // batch of /api/step (also < batches in epoch 0)
inline constexpr std::size_t kMaxRuns = 500;                // runs listed by /api/runs
inline constexpr std::size_t kMaxCachedModels = 4;          // models kept loaded
// The model of a /api/step or /api/lessons config, after its "set" overrides: one batch through
// a model this size takes seconds on a laptop; a bigger one would let one request take the
// machine (or its memory) for minutes.
inline constexpr std::int64_t kMaxStepDModel = 1024;
inline constexpr std::int64_t kMaxStepFeedForward = 4096;
inline constexpr std::int64_t kMaxStepLayers = 12;          // per stack
inline constexpr std::int64_t kMaxStepHeads = 64;
inline constexpr std::int64_t kMaxStepMaxLen = 1024;
inline constexpr std::int64_t kMaxStepBatchTokens = 16384;

// Every limit above by name: {"text_bytes": 1000, "beam": 16, ...}.
Json limits_json();

// ---- errors ---------------------------------------------------------------------------------

// An answer other than 200: the explorer turns it into {"error": what()} with `status`.
struct RequestError : std::runtime_error {
  RequestError(int status_, const std::string& message) : std::runtime_error(message), status(status_) {}
  int status;
};

RequestError bad_request(const std::string& message);  // 400
RequestError not_found(const std::string& message);    // 404

// At most `n` bytes of a string a client sent, for an error message ("..." when cut).
std::string clip(std::string_view s, std::size_t n = 80);

// `message` on one line (line breaks become spaces), at most 1000 bytes.
std::string one_line(std::string message);

bool ends_with(std::string_view s, std::string_view end);

// ---- paths and queries ----------------------------------------------------------------------

// A name as it may appear in a run, checkpoint or config field, or a decoded path segment: not
// empty, not "." or "..", at most kMaxNameBytes, valid UTF-8, without '/', '\\', '%', NUL or
// another control character.
bool is_plain_name(std::string_view name);

// One segment of a URL path, percent-decoded once; nullopt unless the result is a plain name. A
// double-encoded "%252e" decodes to "%2e", whose '%' makes it not a plain name.
std::optional<std::string> decode_segment(std::string_view raw);

// "/api/runs/a%20b/metrics" -> {"api", "runs", "a b", "metrics"}; "/" -> {}. Over kMaxPathBytes
// is a 400; not starting with '/', or a segment that is not a plain name, a 404.
std::vector<std::string> path_segments(std::string_view raw_path);

// "since=12&x=a%20b" -> {"since": "12", "x": "a b"} ('+' is a space; a key given twice keeps the
// last value). Over kMaxQueryBytes, or a bad '%' escape, is a 400.
std::map<std::string, std::string> parse_query(std::string_view raw_query);

// ?since=N of the tsv routes: a whole number 0..kMaxSince; absent or empty = 0.
std::int64_t since_param(const std::map<std::string, std::string>& query);

// GET (HEAD counts as GET) or POST, else a 405 naming the route.
void require_method(std::string_view method, std::string_view path, bool post);

// ---- JSON bodies ----------------------------------------------------------------------------

// The body of a POST route: at most kMaxBodyBytes, nesting at most kMaxJsonDepth (checked before
// parsing), valid JSON, an object.
Json parse_body(std::string_view body);

// The model a translate or attention body names: {run, checkpoint} ("" = not given).
struct ModelRef {
  std::string run;
  std::string checkpoint;
};

// POST /api/translate, every field checked against its limit (defaults as data.h's
// TranslateRequest).
struct TranslateBody {
  ModelRef model;
  std::string text;             // one line of UTF-8, <= kMaxTextBytes
  std::string mode = "greedy";  // "greedy" | "beam" | "sample"
  std::int64_t beam = 4;        // 1..kMaxBeam
  double length_penalty = 1.0;  // [0, kMaxLengthPenalty]
  double temperature = 1.0;     // (0, kMaxTemperature]
  std::int64_t top_k = 0;       // 0..kMaxTopK
  double top_p = 1.0;           // (0, 1]
  std::uint64_t seed = 0;
  std::int64_t max_new = 50;    // 1..kMaxNewTokens
};
TranslateBody translate_body(const Json& body);

// POST /api/attention.
struct AttentionBody {
  ModelRef model;
  std::string text;
  std::optional<std::string> target;  // teacher forcing with this target; none = the model's translation
};
AttentionBody attention_body(const Json& body);
// POST /api/attribution: the same fields as /api/attention.
AttentionBody attribution_body(const Json& body);

// The config of a step or a lesson: exactly one of `config` (a file name in --configs) and
// `run`, plus the "set" overrides (<= kMaxOverrides; only model.*, train.*, data.batch_tokens,
// data.max_tokens: a data path or run.dir would let a request read files the server does not serve).
struct ConfigRef {
  std::string config;
  std::string run;
  std::vector<std::string> set;
};

// POST /api/step.
struct StepBody {
  ConfigRef source;
  std::int64_t batch = 0;          // 0..kMaxStepBatch
  std::uint64_t seed = 0;
  std::int64_t detail_values = 8;  // 0..kMaxDetailValues
};
StepBody step_body(const Json& body);

// POST /api/demo: one of the lecture's demos (train/lessons/demo.h) by name (at most 40 bytes;
// api.cpp checks it is in the registry); `text` only for worked-example (<= kMaxDemoTextBytes).
struct DemoBody {
  std::string name;
  std::string text;
};
DemoBody demo_body(const Json& body);

// A model one /api/step may build and run a batch through (the kMaxStep* limits), else a 400.
void check_step_model(const train::Config& config);

}  // namespace sf::explorer
