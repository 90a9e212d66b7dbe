// The explorer's JSON API without sockets (train/explorer/api.h, request.h): Explorer::handle
// on a temporary runs folder. Path safety (every way out of a run directory is a 404, a good
// file is its bytes), the limits on every input (a 400 with a one-line JSON error), /api/info,
// /api/runs, incremental metrics (?since=N), and a missing or corrupt checkpoint (an error JSON,
// not a crash). The real server under load: test_explorer_load.cpp.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "run_util.h"
#include "train/explorer/api.h"
#include "train/explorer/request.h"
#include "train/lessons/demo.h"

namespace fs = std::filesystem;
using sf::explorer::Explorer;
using sf::explorer::Json;
using sf::explorer::Request;
using sf::explorer::Response;
using sf::test::TempDir;

namespace {

constexpr const char* kMetricsHeader = "step\tepoch\tkind\tloss\tnll\n";
constexpr const char* kSecret = "SECRET-OUTSIDE-THE-RUNS";

// A runs folder with one run "r1" (config.toml, metrics.tsv with 3 rows, plot.svg, sub/x.txt),
// a secret file beside the runs folder, and symlinks from r1 to it (a file and a folder).
struct RunsFixture {
  TempDir tmp{"sf_explorer_api"};
  std::string runs = tmp / "runs";
  RunsFixture() {
    tmp.write("secret.txt", kSecret);
    tmp.write("runs/r1/config.toml", "[model]\narch = \"encoder-decoder\"\n");
    tmp.write("runs/r1/metrics.tsv", std::string(kMetricsHeader) + "5\t0\ttrain\t4.5\t4.4\n10\t0\ttrain\t3.5\t\n"
                                     "10\t0\tvalid\t3.0\t2.9\n");
    tmp.write("runs/r1/plot.svg", "<svg>plot</svg>");
    tmp.write("runs/r1/sub/x.txt", "inner");
    tmp.write("runs/not-a-run/readme.txt", "no config here");
    fs::create_symlink(tmp / "secret.txt", runs + "/r1/escape.txt");
    fs::create_symlink(tmp.path, runs + "/r1/up");
    fs::create_symlink(runs + "/r1/plot.svg", runs + "/r1/inside-link.svg");
  }
  Explorer explorer() const { return Explorer({runs, tmp / "configs", ""}); }
};

Response get(Explorer& e, const std::string& path, std::map<std::string, std::string> query = {}) {
  return e.handle(Request{"GET", path, std::move(query), ""});
}

Response post(Explorer& e, const std::string& path, const std::string& body) {
  return e.handle(Request{"POST", path, {}, body});
}

// The answer is `status` with {"error": one line}; returns the message.
std::string require_error(const Response& r, int status) {
  INFO("status " << r.status << ", body " << r.body.substr(0, 300));
  REQUIRE(r.status == status);
  REQUIRE(r.content_type == "application/json");
  REQUIRE(r.body.find('\n') == std::string::npos);
  const Json j = Json::parse(r.body);
  REQUIRE(j.is_object());
  REQUIRE(j.size() == 1);
  REQUIRE(j.at("error").is_string());
  const std::string message = j.at("error").get<std::string>();
  REQUIRE(!message.empty());
  REQUIRE(message.find(kSecret) == std::string::npos);
  return message;
}

Json require_json(const Response& r) {
  INFO("status " << r.status << ", body " << r.body.substr(0, 300));
  REQUIRE(r.status == 200);
  REQUIRE(r.content_type == "application/json");
  return Json::parse(r.body);
}

}  // namespace

TEST_CASE("explorer: every path out of a run directory is a 404", "[explorer]") {
  RunsFixture f;
  Explorer e = f.explorer();
  const char* bad[] = {
      "/runs/r1/../secret.txt",               // ..
      "/runs/r1/%2e%2e/secret.txt",           // encoded dots
      "/runs/r1/%2E%2E/secret.txt",           // upper-case escapes
      "/runs/r1/.%2e/secret.txt",             // half encoded
      "/runs/r1/%252e%252e/secret.txt",       // double-encoded dots
      "/runs/%2e%2e/secret.txt",              // as the run name
      "/runs/r1/..%2fsecret.txt",             // an encoded slash
      "/runs/r1/%2e%2e%2fsecret.txt",         // all encoded
      "/runs/r1/..%5csecret.txt",             // an encoded backslash
      "/runs/r1/..\\secret.txt",              // a backslash
      "/runs/r1/x%00.svg",                    // NUL
      "/runs/r1//etc/passwd",                 // an absolute path after the run
      "/runs/r1/%2fetc%2fpasswd",             // an encoded absolute path
      "//etc/passwd",                         // an absolute path
      "etc/passwd",                           // no leading slash
      "/runs/r1/escape.txt",                  // a symlink to a file outside
      "/runs/r1/up/secret.txt",               // a symlink to a folder outside
      "/runs/r1/%",                           // a broken escape
      "/runs/r1/%zz",                         // a broken escape
      "/runs/r1/sub",                         // a folder, not a file
      "/runs/r1/nothing.svg",                 // no such file
      "/static/../api.cpp",                   // out of the embedded files
      "/static/nothing.js",                   // not embedded
  };
  for (const char* path : bad) {
    INFO("path " << path);
    require_error(get(e, path), 404);
  }
}

TEST_CASE("explorer: a file in a run directory is served with its bytes", "[explorer]") {
  RunsFixture f;
  Explorer e = f.explorer();
  const Response svg = get(e, "/runs/r1/plot.svg");
  REQUIRE(svg.status == 200);
  REQUIRE(svg.content_type == "image/svg+xml");
  REQUIRE(svg.body == "<svg>plot</svg>");
  REQUIRE(get(e, "/runs/r1/sub/x.txt").body == "inner");
  REQUIRE(get(e, "/runs/r1/%70lot.svg").body == "<svg>plot</svg>");       // one decoding is fine
  REQUIRE(get(e, "/runs/r1/inside-link.svg").body == "<svg>plot</svg>");  // a symlink that stays inside
  REQUIRE(get(e, "/runs/r1/config.toml").status == 200);
}

TEST_CASE("explorer: limits on every input are a 400 with one line of JSON", "[explorer]") {
  RunsFixture f;
  Explorer e = f.explorer();
  const std::string ok = R"("run": "r1", )";
  const std::string long_text(sf::explorer::kMaxTextBytes + 1, 'a');
  const std::string deep = std::string(40, '[') + std::string(40, ']');
  struct Case {
    std::string route, body, expect;  // `expect`: part of the error message
  };
  const Case cases[] = {
      {"translate", "{" + ok + R"("text": ")" + long_text + R"("})", "over the limit of 1000"},
      {"translate", "{" + ok + R"("text": "a b", "beam": 17})", "'beam' must be in 1..16"},
      {"translate", "{" + ok + R"("text": "a b", "beam": 0})", "'beam' must be in 1..16"},
      {"translate", "{" + ok + R"("text": "a b", "max_new": 201})", "'max_new' must be in 1..200"},
      {"translate", "{" + ok + R"("text": "a b", "temperature": 0})", "'temperature'"},
      {"translate", "{" + ok + R"("text": "a b", "top_p": 1.5})", "'top_p'"},
      {"translate", "{" + ok + R"("text": "a b", "mode": "wild"})", "'mode'"},
      {"translate", "{" + ok + R"("text": "a b", "topk": 5})", "unknown field 'topk'"},
      {"translate", "{" + ok + R"("text": 5})", "'text' must be a string"},
      {"translate", "{" + ok + R"("text": "a\nb"})", "no line breaks"},
      {"translate", "{" + ok + R"("text": "a\u0000b"})", "NUL"},
      {"translate", "{" + ok + R"("text": "a b", "beam": 2.5})", "whole number"},
      {"translate", "{" + ok + R"("text": "a b", "seed": -1})", "'seed'"},
      {"translate", R"({"run": "r1"})", "'text' is missing"},
      {"translate", "{\"text\": \"a\", ", "not valid JSON"},
      {"translate", "[1, 2]", "must be a JSON object"},
      {"translate", "", "not valid JSON"},
      {"translate", deep, "nests deeper than 32"},
      {"translate", std::string(sf::explorer::kMaxBodyBytes + 1, ' '), "over the limit of 65536"},
      {"attention", "{" + ok + R"("text": "a", "beam": 4})", "unknown field 'beam'"},
      {"attribution", "{" + ok + R"("text": "a", "beam": 4})", "/api/attribution: unknown field 'beam'"},
      {"step", R"({"config": "a.toml", "run": "r1"})", "give one of"},
      {"step", R"({"run": "r1", "detail_values": 17})", "'detail_values' must be in 0..16"},
      {"step", R"({"run": "r1", "set": ["run.dir=/etc"]})", "expected model.KEY=VALUE"},
      {"demo", R"({"name": "nope"})", "'name' must be one of the demos (path-length, "},
      {"demo", R"({"name": "rope", "text": "a b"})", "'text' is read by the demo worked-example only"},
      {"demo", R"({"name": "rope", "kind": "x"})", "unknown field 'kind'"},
      {"demo", R"({"name": "worked-example", "text": "one two three four five six seven eight nine ten eleven twelve thirteen"})", "expected a sentence of 1 to 12 words"},
  };
  for (const Case& c : cases) {
    INFO("POST /api/" << c.route << " " << c.body.substr(0, 120));
    const std::string message = require_error(post(e, "/api/" + c.route, c.body), 400);
    INFO("error: " << message);
    REQUIRE(message.find(c.expect) != std::string::npos);
  }
  REQUIRE(require_error(get(e, "/api/translate"), 405).find("takes POST") != std::string::npos);
  require_error(post(e, "/api/info", "{}"), 405);
  require_error(get(e, "/runs/r1/" + std::string(sf::explorer::kMaxPathBytes, 'a')), 400);
  require_error(get(e, "/api/runs/r1/metrics", {{"since", "-1"}}), 400);
  require_error(get(e, "/api/runs/r1/metrics", {{"since", "x"}}), 400);
  require_error(get(e, "/api/runs/r1/metrics", {{"since", "99999999999"}}), 400);
}

TEST_CASE("explorer: the query string is parsed once, with limits", "[explorer]") {
  using sf::explorer::parse_query;
  REQUIRE(parse_query("since=12&x=a%20b+c").at("x") == "a b c");
  REQUIRE(parse_query("since=12&x=a%20b+c").at("since") == "12");
  REQUIRE(parse_query("").empty());
  REQUIRE(parse_query("a&&b=").at("b").empty());
  REQUIRE_THROWS_AS(parse_query("x=%2"), sf::explorer::RequestError);
  REQUIRE_THROWS_AS(parse_query(std::string(sf::explorer::kMaxQueryBytes + 1, 'a')), sf::explorer::RequestError);
}

TEST_CASE("explorer: /api/info lists the limits, /api/runs the runs", "[explorer]") {
  RunsFixture f;
  Explorer e = f.explorer();
  const Json info = require_json(get(e, "/api/info"));
  REQUIRE(info.at("limits").at("beam") == 16);
  REQUIRE(info.at("limits").at("max_new") == 200);
  REQUIRE(info.at("limits").at("text_bytes") == 1000);
  REQUIRE(info.at("limits").at("body_bytes") == 65536);
  REQUIRE(info.at("default").is_null());  // no checkpoint anywhere
  REQUIRE(info.at("runs_root") == f.runs);

  const Json runs = require_json(get(e, "/api/runs")).at("runs");
  REQUIRE(runs.size() == 1);  // not-a-run has no config.toml
  const Json& r1 = runs.at(0);
  REQUIRE(r1.at("name") == "r1");
  REQUIRE(r1.at("has_metrics") == true);
  REQUIRE(r1.at("metrics_rows") == 3);
  REQUIRE(r1.at("config").get<std::string>().find("encoder-decoder") != std::string::npos);
  REQUIRE(r1.at("checkpoints").empty());
  REQUIRE(r1.at("modified").get<std::int64_t>() > 1'600'000'000);
}

TEST_CASE("explorer: metrics rows from ?since=N, as a training appends them", "[explorer]") {
  RunsFixture f;
  Explorer e = f.explorer();
  const Json all = require_json(get(e, "/api/runs/r1/metrics"));
  REQUIRE(all.at("columns") == Json({"step", "epoch", "kind", "loss", "nll"}));
  REQUIRE(all.at("total") == 3);
  REQUIRE(all.at("rows").size() == 3);
  REQUIRE(all.at("rows").at(0) == Json({5, 0, "train", 4.5, 4.4}));
  REQUIRE(all.at("rows").at(1).at(4).is_null());  // an empty cell
  // A new row and half of the next (still being written: left for the next poll).
  std::ofstream(f.runs + "/r1/metrics.tsv", std::ios::app) << "15\t0\ttrain\t3.25\t3.2\n20\t0\ttr";
  const Json since = require_json(get(e, "/api/runs/r1/metrics", {{"since", "3"}}));
  REQUIRE(since.at("total") == 4);
  REQUIRE(since.at("rows") == Json::array({Json({15, 0, "train", 3.25, 3.2})}));
  const Json none = require_json(get(e, "/api/runs/r1/metrics", {{"since", "10"}}));
  REQUIRE(none.at("rows").empty());
  REQUIRE(none.at("total") == 4);
  // A run with no layer_norms.tsv (yet) and no snapshots: empty, not an error.
  REQUIRE(require_json(get(e, "/api/runs/r1/layer_norms")).at("rows").empty());
  REQUIRE(require_json(get(e, "/api/runs/r1/snapshots")).at("snapshots").empty());
  require_error(get(e, "/api/runs/nope/metrics"), 404);
  require_error(get(e, "/api/runs/%2e%2e/metrics"), 404);
}

TEST_CASE("explorer: a missing or corrupt checkpoint is an error JSON", "[explorer]") {
  RunsFixture f;
  Explorer e = f.explorer();
  const std::string body = R"({"run": "r1", "text": "a b c"})";
  REQUIRE(require_error(post(e, "/api/translate", body), 404).find("no checkpoint") != std::string::npos);
  require_error(post(e, "/api/translate", R"({"run": "r1", "checkpoint": "../x.safetensors", "text": "a"})"), 404);
  require_error(post(e, "/api/translate", R"({"text": "a"})"), 400);  // no run, no --checkpoint
  f.tmp.write("runs/r1/checkpoint-best.safetensors", "this is not a safetensors file");
  for (const char* route : {"/api/translate", "/api/attention"}) {
    INFO(route);
    const std::string message = require_error(post(e, route, body), 500);
    REQUIRE(message.find("cannot load the checkpoint checkpoint-best.safetensors") != std::string::npos);
  }
  // A header that promises more bytes than the file has.
  f.tmp.write("runs/r1/checkpoint-best.safetensors", std::string("\x40\0\0\0\0\0\0\0{\"a\":", 13));
  require_error(post(e, "/api/translate", body), 500);
  // The server's own --checkpoint, missing.
  Explorer with_default({f.runs, f.tmp / "configs", f.tmp / "gone.safetensors"});
  require_error(post(with_default, "/api/translate", R"({"text": "a"})"), 404);
  REQUIRE_THROWS(with_default.preload_default_model());
}

TEST_CASE("explorer: a trained model translates as the CLI does, and a rewritten checkpoint is reloaded", "[explorer]") {
  using namespace sf::test;
  TempDir tmp("sf_explorer_model");
  const CliResult trained =
      run_cli(train_args(small_reverse_run(tmp, tmp / "runs/rev", {"train.max_steps=30", "train.valid_every=30"})), tmp);
  INFO(trained.err);
  REQUIRE(trained.status == 0);
  const std::string checkpoint = fs::exists(tmp / "runs/rev/checkpoint-best.safetensors")
                                     ? tmp / "runs/rev/checkpoint-best.safetensors"
                                     : tmp / "runs/rev/checkpoint-last.safetensors";
  const std::string sentence = first_lines(tmp / "valid.src", 1);  // with its '\n'
  const std::string input = tmp.write("one.txt", sentence);
  const std::string text = sentence.substr(0, sentence.size() - 1);
  Explorer e({tmp / "runs", tmp / "configs", ""});
  REQUIRE(require_json(get(e, "/api/info")).at("default").at("run") == "rev");
  for (const int beam : {1, 4}) {
    INFO("beam " << beam);
    const CliResult cli = run_cli("translate --beam " + std::to_string(beam) + " --checkpoint " + quoted(checkpoint) +
                                      " --input " + quoted(input), tmp);
    REQUIRE(cli.status == 0);
    const std::string mode = beam == 1 ? "greedy" : "beam";
    const Json answer = require_json(post(e, "/api/translate", R"({"run": "rev", "mode": ")" + mode +
                                                                    R"(", "beam": )" + std::to_string(beam) +
                                                                    R"(, "text": )" + Json(text).dump() + "}"));
    REQUIRE(answer.at("text").get<std::string>() + "\n" == cli.out);
  }
  const Json attention = require_json(post(e, "/api/attention", R"({"run": "rev", "text": )" + Json(text).dump() + "}"));
  REQUIRE(!attention.at("stacks").empty());
  // The same model as the server's --checkpoint, named by {"run": ""}.
  Explorer with_default({tmp / "runs", tmp / "configs", checkpoint});
  with_default.preload_default_model();
  REQUIRE(require_json(post(with_default, "/api/translate", R"({"text": )" + Json(text).dump() + "}")).at("text") ==
          require_json(post(e, "/api/translate", R"({"run": "rev", "text": )" + Json(text).dump() + "}")).at("text"));
  // A training still running rewrites the checkpoint: the next request loads the new file (here
  // a broken one: an error, then the good one again: answers again).
  const std::string good = read_file(checkpoint);
  write_file(checkpoint, good.substr(0, good.size() / 2));
  require_error(post(e, "/api/translate", R"({"run": "rev", "text": "a b"})"), 500);
  write_file(checkpoint, good);
  REQUIRE(post(e, "/api/translate", R"({"run": "rev", "text": "a b"})").status == 200);
}

TEST_CASE("explorer: /api/demos lists the lecture's demos, /api/demo runs one once and keeps its report",
          "[explorer][demo]") {
  RunsFixture f;
  Explorer e = f.explorer();
  const Json list = require_json(get(e, "/api/demos")).at("demos");
  REQUIRE(list.size() == sf::lessons::demos().size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    CHECK(list[i].at("name") == sf::lessons::demos()[i].name);  // in course order
    CHECK(!list[i].at("claim").at("zh").get<std::string>().empty());
    CHECK(!list[i].at("explain").at("en").get<std::string>().empty());
  }
  const Response first = post(e, "/api/demo", R"({"name": "lookup"})");
  const Json report = require_json(first);
  CHECK(report.at("held") == true);
  CHECK(report.at("figures").size() >= 2);
  CHECK(post(e, "/api/demo", R"({"name": "lookup"})").body == first.body);  // kept, not run again
  // worked-example reads the sentence it is given
  const Json worked = require_json(post(e, "/api/demo", R"({"name": "worked-example", "text": "我 学 注意力"})"));
  CHECK(worked.at("steps") == true);
  CHECK(worked.at("figures")[0].at("rows") == Json({"我", "学", "注意力"}));
  require_error(post(e, "/api/demos", "{}"), 405);
}
