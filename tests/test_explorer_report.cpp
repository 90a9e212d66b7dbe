// `scratchformer report` (train/explorer/report.h): one self-contained HTML file. It is written;
// it links and fetches nothing (no http(s) src/href, no /static/ file, the page's files inlined);
// its SF_REPORT_DATA holds the run's metrics.tsv and layer_norms.tsv rows as the server's routes
// give them; the sentences' translations are those of `scratchformer translate --beam 1`; text
// that holds "</script>" cannot end the data script early; bad input is one line and status 2.
#include "run_util.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "train/explorer/api.h"
#include "train/explorer/data.h"
#include "train/explorer/report.h"

using sf::explorer::Json;
using sf::test::CliResult;
using sf::test::read_file;
using sf::test::quoted;
using sf::test::run_cli;
using sf::test::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kMetrics =
    "step\tkind\tloss\tnll\tppl\tlr\tbleu\ttokens_per_s\tgrad_norm\n"
    "10\ttrain\t5.5\t5.25\t190.6\t0.0001\t\t1200\t3.5\n"
    "20\ttrain\t4.75\t4.5\t90.02\t0.0002\t\t1250\t2.25\n"
    "20\tvalid\t4.5\t4.25\t70.11\t\t12.5\t\t\n";
const std::string kLayerNorms =
    "step\tlayer\tweight_norm\tgrad_norm\n"
    "10\tencoder.layers.0\t11.5\t0.75\n"
    "20\tencoder.layers.0\t11.75\t0.5\n";

// A run directory by hand: the reverse config, metrics.tsv and layer_norms.tsv, no checkpoint.
void write_hand_run(const TempDir& tmp) {
  tmp.write("run/config.toml", read_file(sf::test::kReverseConfig));
  tmp.write("run/metrics.tsv", kMetrics);
  tmp.write("run/layer_norms.tsv", kLayerNorms);
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

// The JSON of `window.SF_REPORT_DATA = ...;</script>` in a report file.
Json report_json(const std::string& html) {
  const std::string head = "window.SF_REPORT_DATA = ";
  const std::size_t from = html.find(head);
  REQUIRE(from != std::string::npos);
  const std::size_t to = html.find(";</script>", from);
  REQUIRE(to != std::string::npos);
  return Json::parse(html.substr(from + head.size(), to - from - head.size()));
}

// Nothing in the file makes a browser fetch: no src= or href= to http(s), no /static/ link,
// no stylesheet link and no script with a src at all.
void check_self_contained(const std::string& html) {
  for (const char* bad : {"src=\"http", "src='http", "href=\"http", "href='http", "url(http", "@import", "/static/",
                          "<link rel=\"stylesheet\"", "<script src"})
    CHECK(count(html, bad) == 0);
  CHECK(count(html, "function getData") == 1);  // app.js inlined
  CHECK(count(html, "const SF_STRINGS") == 1);  // i18n.js inlined
  // style.css inlined: its first rule is in the file
  const std::string css = read_file(std::string(SCRATCHFORMER_SOURCE_DIR) + "/train/explorer/web/style.css");
  const std::size_t brace = css.find('{');
  REQUIRE(brace != std::string::npos);
  const std::size_t line_start = css.rfind('\n', brace) == std::string::npos ? 0 : css.rfind('\n', brace) + 1;
  CHECK(count(html, css.substr(line_start, css.find('\n', brace) - line_start)) >= 1);
}

}  // namespace

TEST_CASE("explorer report: a self-contained file with the run's metrics and layer-norm rows", "[explorer]") {
  const TempDir tmp("sf_report");
  write_hand_run(tmp);
  const CliResult r = run_cli("report --run " + quoted(tmp / "run") + " --out " + quoted(tmp / "report.html"), tmp);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("report.html"));
  const std::string html = read_file(tmp / "report.html");
  REQUIRE(html.rfind("<!DOCTYPE html>", 0) == 0);
  check_self_contained(html);

  const Json data = report_json(html);
  CHECK(data.at("report") == true);
  CHECK(data.at("run") == "run");
  REQUIRE(data.at("runs").size() == 1);
  CHECK(data.at("runs")[0].at("metrics_rows") == 3);
  // the rows as GET /api/runs/run/metrics?since=0 gives them
  CHECK(data.at("metrics").at("run") == sf::explorer::tsv_rows(tmp / "run/metrics.tsv", 0));
  const Json& rows = data.at("metrics").at("run").at("rows");
  REQUIRE(rows.size() == 3);
  CHECK(rows[1][0] == 20);
  CHECK(rows[1][2] == 4.75);
  CHECK(rows[2][1] == "valid");
  CHECK(rows[2][6] == 12.5);
  CHECK(rows[0][6].is_null());
  CHECK(data.at("layer_norms").at("run").at("rows").size() == 2);
  CHECK(data.at("snapshots").empty());
  CHECK(data.at("sentences").empty());  // no checkpoint: no sentences
  CHECK(data.at("checkpoint").is_null());
}

TEST_CASE("explorer report: text holding </script> stays inside the data script", "[explorer]") {
  const Json plain = {{"report", true}, {"runs", Json::array()}};
  Json tricky = plain;
  tricky["sentences"] = Json::array({{{"text", "</script><script>alert(1)</script>"}}});
  const std::string a = sf::explorer::report_html(plain), b = sf::explorer::report_html(tricky);
  CHECK(count(b, "</script>") == count(a, "</script>"));
  CHECK(report_json(b).at("sentences")[0].at("text") == "</script><script>alert(1)</script>");
}

TEST_CASE("explorer report: the sentences' translations are `scratchformer translate --beam 1`'s", "[explorer][translate]") {
  const TempDir data("sf_report_data"), run("sf_report_run");
  const auto overrides = sf::test::small_reverse_run(data, run.path.string(), {"train.max_steps=30", "train.valid_every=30",
                                                                               "data.max_valid_sentences=2"});
  const CliResult trained = run_cli(sf::test::train_args(overrides), data);
  INFO(trained.out << trained.err);
  REQUIRE(trained.status == 0);
  const std::vector<std::string> sentences = {"be mi co co", "da je ra"};
  data.write("sentences.txt", sentences[0] + "\n\n" + sentences[1] + "\n");  // the empty line is skipped
  data.write("cli.txt", sentences[0] + "\n" + sentences[1] + "\n");
  const CliResult r = run_cli("report --run " + quoted(run.path.string()) + " --out " + quoted(data / "r.html") +
                                  " --sentences " + quoted(data / "sentences.txt"),
                              data);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::string html = read_file(data / "r.html");
  check_self_contained(html);
  const Json report = report_json(html);
  const CliResult cli = run_cli("translate --beam 1 --checkpoint " + quoted((run.path / "checkpoint-last.safetensors").string()) +
                                    " --input " + quoted(data / "cli.txt"),
                                data);
  REQUIRE(cli.status == 0);
  std::istringstream lines(cli.out);
  REQUIRE(report.at("sentences").size() == 2);
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    const Json& s = report.at("sentences")[i];
    std::string expected;
    std::getline(lines, expected);
    CHECK(s.at("text") == sentences[i]);
    CHECK(s.at("translate").at("text") == expected);
    CHECK(!s.at("attention").at("stacks").empty());
    CHECK(s.at("attribution").at("methods").size() == 4);  // attention beside attribution, from the file
  }
}

TEST_CASE("explorer report: bad input is one line and status 2", "[explorer]") {
  const TempDir tmp("sf_report_bad");
  write_hand_run(tmp);
  const std::string out = " --out " + quoted(tmp / "r.html");
  sf::test::check_one_line_error(run_cli("report --run " + quoted(tmp / "no_such_run") + out, tmp), {"no_such_run", "not a directory"});
  std::string many;
  for (std::size_t i = 0; i <= sf::explorer::kMaxReportSentences; ++i) many += "ka zu " + std::to_string(i) + "\n";
  tmp.write("many.txt", many);
  tmp.write("run/checkpoint-last.safetensors", "not a checkpoint");
  sf::test::check_one_line_error(run_cli("report --run " + quoted(tmp / "run") + out + " --sentences " + quoted(tmp / "many.txt"), tmp),
                                 {"51 sentences", "at most 50"});
  fs::remove(tmp / "run/checkpoint-last.safetensors");
  tmp.write("one.txt", "ka zu\n");
  sf::test::check_one_line_error(run_cli("report --run " + quoted(tmp / "run") + out + " --sentences " + quoted(tmp / "one.txt"), tmp),
                                 {"needs a checkpoint"});
  sf::test::check_one_line_error(run_cli("report --run " + quoted(tmp / "run") + out + " --checkpoint " + quoted(tmp / "nope.safetensors"), tmp),
                                 {"nope.safetensors", "not a file"});
  CHECK(!fs::exists(tmp / "r.html"));
}
