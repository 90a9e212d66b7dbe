// The explorer under a class at once: the real HTTP server (train/explorer/server.h)
// on loopback, port 0, with a tiny model trained for the test, and 30 client threads that each
// send 20 requests of each kind (translate, attention, the page, a static file, the demo list,
// metrics) and one attention-beside-attribution request (backward passes). Every answer
// must equal a reference: the translation is what `scratchformer translate` prints for that
// sentence, the others what one client got before the load began. No failures, and the server
// still answers afterwards. It prints p50/p99 latency per kind with the CPU: a benchmark figure
// for the README, not an assertion (no timed assertions).
#include <catch2/catch.hpp>

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_util.h"
#include "train/explorer/api.h"
#include "train/explorer/assets.h"
#include "train/explorer/server.h"

using namespace sf::test;
using sf::explorer::Json;

namespace {

constexpr int kClients = 30;
constexpr int kRequestsPerKind = 20;
constexpr int kSentences = 8;  // the clients cycle through the first validation sentences

// The "model name" line of /proc/cpuinfo.
std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// One kind of request and the answer it must get.
struct Kind {
  std::string name;
  std::string path;
  std::string body;      // "" = GET
  std::string expected;  // the reference answer, compared as below
};

// An answer as compared: the JSON without its timing field, or the bytes as they are.
std::string comparable(const std::string& body, bool json) {
  if (!json) return body;
  Json j = Json::parse(body, nullptr, false);
  if (j.is_discarded()) return "not JSON: " + body.substr(0, 200);
  if (j.is_object()) j.erase("seconds");
  return j.dump();
}

bool is_json_kind(const Kind& k) { return k.path.rfind("/api/", 0) == 0; }

std::string fetch(httplib::Client& client, const Kind& k, int* status) {
  const httplib::Result r = k.body.empty() ? client.Get(k.path.c_str()) : client.Post(k.path.c_str(), k.body, "application/json");
  *status = r ? r->status : -1;
  return r ? r->body : "no answer: " + httplib::to_string(r.error());
}

// Trains the tiny reverse model into runs/rev (a few dozen steps: the output need not be good,
// only the same in the CLI and the server).
void train_tiny_model(const TempDir& tmp) {
  const std::vector<std::string> overrides =
      small_reverse_run(tmp, tmp / "runs/rev", {"train.max_steps=30", "train.valid_every=30"});
  const CliResult r = run_cli(train_args(overrides), tmp);
  INFO(r.err);
  REQUIRE(r.status == 0);
}

// The request kinds with their reference answers, from one client before the load.
std::vector<Kind> reference_kinds(httplib::Client& client, const std::vector<std::string>& sentences,
                                  const std::vector<std::string>& cli_lines) {
  std::vector<Kind> kinds;
  for (int i = 0; i < kSentences; ++i) {
    const std::string text = Json(sentences[i]).dump();
    kinds.push_back({"translate", "/api/translate", R"({"run": "rev", "mode": "greedy", "text": )" + text + "}", ""});
    kinds.push_back({"attention", "/api/attention", R"({"run": "rev", "text": )" + text + "}", ""});
    kinds.push_back({"attribution", "/api/attribution", R"({"run": "rev", "text": )" + text + "}", ""});
  }
  kinds.push_back({"static", "/static/app.js", "", ""});
  kinds.push_back({"metrics", "/api/runs/rev/metrics?since=0", "", ""});
  kinds.push_back({"page", "/", "", ""});
  kinds.push_back({"demos", "/api/demos", "", ""});
  for (Kind& k : kinds) {
    int status = 0;
    const std::string body = fetch(client, k, &status);
    INFO(k.path << " " << k.body << " -> " << status << " " << body.substr(0, 300));
    REQUIRE(status == 200);
    k.expected = comparable(body, is_json_kind(k));
  }
  for (int i = 0; i < kSentences; ++i) {  // the server's translation is the CLI's
    INFO("sentence " << sentences[i]);
    REQUIRE(Json::parse(kinds[3 * i].expected).at("text").get<std::string>() == cli_lines[i]);
  }
  const sf::explorer::Asset* app_js = sf::explorer::find_asset("app.js");
  REQUIRE(app_js != nullptr);
  REQUIRE(kinds[3 * kSentences].expected == std::string(app_js->bytes));
  return kinds;
}

struct Tally {
  std::mutex mutex;
  std::map<std::string, std::vector<double>> ms;  // latency per kind
  std::vector<std::string> failures;
};

// One client: kRequestsPerKind requests of each kind, interleaved, each checked.
void client_thread(int port, int id, const std::vector<Kind>& kinds, Tally& tally) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120, 0);
  std::map<std::string, std::vector<double>> ms;
  std::vector<std::string> failures;
  for (int r = 0; r < kRequestsPerKind; ++r) {
    const int sentence = (id + r) % kSentences;
    std::vector<int> these = {3 * sentence, 3 * sentence + 1, 3 * kSentences, 3 * kSentences + 1, 3 * kSentences + 2,
                              3 * kSentences + 3};
    if (r == 0) these.push_back(3 * sentence + 2);  // one attribution per client
    for (const int k : these) {
      const Kind& kind = kinds[k];
      const auto start = std::chrono::steady_clock::now();
      int status = 0;
      const std::string body = fetch(client, kind, &status);
      ms[kind.name].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      if (status != 200 || comparable(body, is_json_kind(kind)) != kind.expected)
        failures.push_back(kind.name + " " + kind.body + ": status " + std::to_string(status) + ", " + body.substr(0, 200));
    }
  }
  std::lock_guard<std::mutex> guard(tally.mutex);
  for (auto& [name, v] : ms) tally.ms[name].insert(tally.ms[name].end(), v.begin(), v.end());
  tally.failures.insert(tally.failures.end(), failures.begin(), failures.end());
}

// The server answering in a thread of its own, stopped and joined however the test ends.
struct ServingThread {
  sf::explorer::Server& server;
  std::thread thread;
  explicit ServingThread(sf::explorer::Server& s) : server(s), thread([&s] { s.run(); }) {}
  ~ServingThread() {
    server.stop();
    thread.join();
  }
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

TEST_CASE("explorer: 30 clients x 20 requests of each kind and one attribution each, every answer correct", "[load]") {
  TempDir tmp("sf_explorer_load");
  train_tiny_model(tmp);
  std::vector<std::string> sentences;
  {
    std::ifstream in(tmp / "valid.src");
    for (std::string line; sentences.size() < kSentences && std::getline(in, line);) sentences.push_back(line);
  }
  REQUIRE(sentences.size() == kSentences);
  std::string input;
  for (const std::string& s : sentences) input += s + "\n";
  const std::string input_file = tmp.write("sentences.txt", input);
  std::string checkpoint = tmp / "runs/rev/checkpoint-best.safetensors";
  if (!std::filesystem::exists(checkpoint)) checkpoint = tmp / "runs/rev/checkpoint-last.safetensors";
  const CliResult cli = run_cli("translate --beam 1 --checkpoint " + sf::test::quoted(checkpoint) + " --input " + sf::test::quoted(input_file), tmp);
  INFO(cli.err);
  REQUIRE(cli.status == 0);
  std::vector<std::string> cli_lines;
  for (std::size_t start = 0, end; (end = cli.out.find('\n', start)) != std::string::npos; start = end + 1)
    cli_lines.push_back(cli.out.substr(start, end - start));
  REQUIRE(cli_lines.size() == kSentences);

  sf::explorer::Explorer explorer({tmp / "runs", tmp / "configs", ""});
  sf::explorer::Server server(explorer, {"127.0.0.1", 0});
  const int port = server.bind();
  REQUIRE(port > 0);
  ServingThread serving(server);
  httplib::Client first("127.0.0.1", port);
  first.set_read_timeout(120, 0);  // an attribution under a sanitizer takes longer than the 5 s default
  const std::vector<Kind> kinds = reference_kinds(first, sentences, cli_lines);

  Tally tally;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int id = 0; id < kClients; ++id) clients.emplace_back(client_thread, port, id, std::cref(kinds), std::ref(tally));
  for (std::thread& t : clients) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const httplib::Result after = first.Get("/api/info");  // still answering
  const bool answered_after = after && after->status == 200;
  // Through the real server too: a body over the limit (httplib's 413) is the explorer's 400,
  // and an encoded way out of the run directory a 404, both with a JSON error.
  const httplib::Result big = first.Post("/api/translate", std::string(sf::explorer::kMaxBodyBytes + 10, ' '), "application/json");
  const httplib::Result out = first.Get("/runs/rev/%2e%2e/%2e%2e/valid.src");
  REQUIRE(big);
  REQUIRE(big->status == 400);
  REQUIRE(Json::parse(big->body).at("error").get<std::string>().find("over the limit") != std::string::npos);
  REQUIRE(out);
  REQUIRE(out->status == 404);
  REQUIRE(Json::parse(out->body).contains("error"));

  std::printf("explorer load test: %d clients x %d requests of each kind (attribution: 1) on loopback, %.1f s, %s\n",
              kClients, kRequestsPerKind, seconds, cpu_name().c_str());
  for (const auto& [name, v] : tally.ms)
    std::printf("  %-10s %4zu requests  p50 %8.1f ms  p99 %8.1f ms\n", name.c_str(), v.size(), percentile(v, 0.5),
                percentile(v, 0.99));
  for (std::size_t i = 0; i < std::min<std::size_t>(tally.failures.size(), 5); ++i)
    UNSCOPED_INFO("failure: " << tally.failures[i]);
  REQUIRE(tally.failures.empty());
  for (const auto& [name, v] : tally.ms)
    REQUIRE(v.size() == static_cast<std::size_t>(name == "attribution" ? kClients : kClients * kRequestsPerKind));
  REQUIRE(answered_after);
}
