// libFuzzer target: the explorer's request checks (train/explorer/request.h) on arbitrary bytes:
// path segments, the query string and the JSON bodies of the POST routes, the code
// Explorer::handle (train/explorer/api.cpp) runs before it touches a file or a model.
//
// The input is one HTTP-like request: its first line is "METHOD TARGET" (TARGET = path, then
// optionally '?' and the query), the rest is the body:
//   POST /api/translate
//   {"run": "r1", "text": "a b c", "beam": 4}
// A bad request must throw RequestError with status 400, 404 or 405 and a message, nothing else
// (any other exception would be a 500 from the server, a crash, a sanitizer report, a hang or a
// leak are failures too). An accepted request is checked against request.h's promises: every path
// segment is a plain name (no "..", '/', '\\', '%', NUL), every field within its limit.
//
// Run: tools/run_fuzzers.sh (SF_FUZZ_TARGETS=explorer), or by hand:
//   build/fuzz/fuzz_explorer -dict=tests/fuzz/explorer.dict -max_len=4096 tests/fuzz/corpus/explorer
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "train/explorer/request.h"

namespace {

namespace ex = sf::explorer;

[[noreturn]] void broken(const std::string& what) {
  std::fprintf(stderr, "fuzz_explorer: %s\n", what.c_str());
  std::abort();
}

void check_segments(const std::vector<std::string>& segments) {
  for (const std::string& s : segments) {
    if (s.empty() || s == "." || s == ".." || s.size() > ex::kMaxNameBytes) broken("a path segment that is not a name");
    for (const char c : s)
      if (c == '/' || c == '\\' || c == '%' || c == '\0') broken("a path segment with '/', '\\\\', '%' or NUL");
  }
}

void check_text(const std::string& text) {
  if (text.empty() || text.size() > ex::kMaxTextBytes || text.find_first_of(std::string("\n\r\0", 3)) != std::string::npos)
    broken("a text beyond its limits was accepted");
}

void check_translate(const ex::TranslateBody& b) {
  check_text(b.text);
  if (b.beam < 1 || b.beam > ex::kMaxBeam || b.max_new < 1 || b.max_new > ex::kMaxNewTokens || b.top_k < 0 ||
      b.top_k > ex::kMaxTopK || !(b.temperature > 0 && b.temperature <= ex::kMaxTemperature) ||
      !(b.top_p > 0 && b.top_p <= 1) || !(b.length_penalty >= 0 && b.length_penalty <= ex::kMaxLengthPenalty))
    broken("a translate body beyond its limits was accepted");
  if (b.mode != "greedy" && b.mode != "beam" && b.mode != "sample") broken("an unknown mode was accepted");
}

void check_config_ref(const ex::ConfigRef& r) {
  if (r.config.empty() == r.run.empty()) broken("a step body without exactly one of config and run");
  if (r.set.size() > ex::kMaxOverrides) broken("too many overrides were accepted");
  for (const std::string& s : r.set)
    if (s.size() > ex::kMaxOverrideBytes || s.rfind("data.train", 0) == 0 || s.rfind("run.", 0) == 0)
      broken("an override beyond its limits was accepted: " + s);
}

// The body of a POST route, as api.cpp checks it.
void check_body(const std::string& route, std::string_view body) {
  const ex::Json json = ex::parse_body(body);
  if (route == "translate") check_translate(ex::translate_body(json));
  if (route == "attention" || route == "attribution") {
    const ex::AttentionBody b = route == "attention" ? ex::attention_body(json) : ex::attribution_body(json);
    check_text(b.text);
    if (b.target) check_text(*b.target);
  }
  if (route == "step") {
    const ex::StepBody b = ex::step_body(json);
    check_config_ref(b.source);
    if (b.detail_values < 0 || b.detail_values > ex::kMaxDetailValues) broken("detail_values beyond its limit");
  }
  if (route == "demo") {
    const ex::DemoBody b = ex::demo_body(json);
    if (b.name.size() > 40) broken("a demo name beyond its limit was accepted");
    if (b.text.size() > ex::kMaxDemoTextBytes || (!b.text.empty() && b.name != "worked-example"))
      broken("a demo text beyond its limits was accepted");
  }
}

void run_request(std::string_view input) {
  const std::size_t newline = input.find('\n');
  const std::string_view line = input.substr(0, newline);
  const std::string_view body = newline == std::string_view::npos ? std::string_view() : input.substr(newline + 1);
  const std::size_t space = line.find(' ');
  const std::string_view method = line.substr(0, space);
  const std::string_view target = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
  const std::size_t q = target.find('?');
  const std::string_view path = target.substr(0, q);
  const std::vector<std::string> segments = ex::path_segments(path);
  check_segments(segments);
  if (q != std::string_view::npos) {
    const auto query = ex::parse_query(target.substr(q + 1));
    const std::int64_t since = ex::since_param(query);
    if (since < 0 || since > ex::kMaxSince) broken("a since beyond its limit was accepted");
  }
  const bool post_route = segments.size() == 2 && segments[0] == "api";
  ex::require_method(method, path, post_route && segments[1] != "info" && segments[1] != "runs" && segments[1] != "demos");
  if (post_route) check_body(segments[1], body);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const bool trace = std::getenv("SF_FUZZ_TRACE") != nullptr;
  try {
    run_request(input);
    if (trace) std::fprintf(stderr, "accepted\n");
  } catch (const ex::RequestError& e) {
    if (e.status != 400 && e.status != 404 && e.status != 405) broken("a RequestError with status " + std::to_string(e.status));
    if (std::string(e.what()).empty()) broken("a RequestError without a message");
    if (trace) std::fprintf(stderr, "%d %s\n", e.status, ex::one_line(e.what()).c_str());
  } catch (const std::exception& e) {
    broken(std::string("not a RequestError (the server would answer 500): ") + e.what());
  }
  return 0;
}
