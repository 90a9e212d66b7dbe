// The demos as the explorer's Lessons page sees them (train/lessons/demo_report.h): every quick
// demo's report is drawable with every label in both languages, the report's verdict is the run's,
// and the demos that replaced the page-only lessons (positions, masks) assert their claims on the
// numbers they report. The slow demos' reports are checked in their own tests, on the run those
// tests make anyway.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "demo_report_check.h"
#include "run_util.h"
#include "nn/positional.h"
#include "train/lessons/demo.h"
#include "train/lessons/demo_masks.h"
#include "train/lessons/demo_positions.h"
#include "train/lessons/demo_schedule.h"
#include "train/optim/schedule.h"
#include "train/lessons/demo_texts.h"

using namespace sf::lessons;
using sf::Tensor;

TEST_CASE("demo reports: every quick demo's report is drawable, labelled in both languages, with the run's verdict",
          "[demo][explorer]") {
  for (const Demo& d : demos()) {
    if (d.seconds > 1) continue;  // the slow ones: tests/test_demo_*.cpp, on their own runs
    INFO("demo " << d.name);
    const Json r = demo_report(d, {});
    CHECK(r.at("name") == d.name);
    CHECK(sf::test::is_bilingual(r.at("claim")));
    CHECK(sf::test::is_bilingual(r.at("explain")));
    for (const std::string& problem : sf::test::report_problems(r)) FAIL_CHECK(problem);
    std::ostringstream out;
    DemoOptions options;
    options.out = (std::filesystem::temp_directory_path() / ("sf-report-" + d.name + ".svg")).string();
    CHECK(d.run(options, out) == (r.at("held").get<bool>() ? 0 : 1));  // the same verdict as the CLI's
    std::filesystem::remove(options.out);
  }
}

TEST_CASE("demo texts: one entry per demo, in both languages, and none for a demo that does not exist", "[demo]") {
  std::vector<std::string> names;
  for (const Demo& d : demos()) names.push_back(d.name);
  for (const Demo& d : demos()) {
    INFO(d.name);
    const DemoText* t = find_demo_text(d.name);
    REQUIRE(t != nullptr);
    CHECK(!t->claim_zh.empty());
    CHECK(!t->explain_en.empty());
    CHECK(!t->explain_zh.empty());
  }
  for (const DemoText& t : demo_texts()) {
    INFO(t.name);
    CHECK(std::find(names.begin(), names.end(), t.name) != names.end());
  }
}

TEST_CASE("demo positions: the full-width table is the module's and PE_p . PE_q depends only on p - q",
          "[demo][sinusoidal]") {
  const PositionsDemoResult r = compute_positions_demo(64, 256);
  const sf::nn::SinusoidalPositional pe(64, 256);
  REQUIRE(r.table.size() == 64);
  REQUIRE(r.table[0].size() == 256);  // every dimension: the old lesson cut the table to 64 x 64
  for (std::int64_t p : {0, 17, 63})
    for (std::int64_t i : {0, 1, 100, 255}) CHECK(r.table[p][i] == static_cast<double>(pe.table().at({p, i})));
  CHECK(r.max_spread < kPositionsTolerance);
  CHECK(r.max_closed_form_error < kPositionsTolerance);
  CHECK(r.by_offset[0] == Approx(128.0));
  CHECK(r.largest_off_diagonal < 128.0 - kPositionsTolerance);
  CHECK(r.claim_holds);
}

TEST_CASE("demo masks: a real batch with padding, the masks by token, and no weight on a blocked key",
          "[demo][mask][causal]") {
  const MasksDemoResult r = compute_masks_demo(0, "");
  REQUIRE(r.src.size() == 4);
  std::size_t padded_rows = 0;
  for (std::size_t b = 0; b < r.src.size(); ++b) {
    bool any = false;
    for (std::size_t i = 0; i < r.src[b].size(); ++i) {
      CHECK(r.src_pad[b][i] == (r.src[b][i] == "<pad>"));
      any = any || r.src_pad[b][i];
    }
    padded_rows += any ? 1 : 0;
  }
  CHECK(padded_rows == r.src.size() - 1);  // different lengths: every sentence but the longest is padded
  for (std::size_t i = 0; i < r.causal.size(); ++i)
    for (std::size_t j = 0; j < r.causal.size(); ++j) CHECK(r.causal[i][j] == (j > i));
  for (std::size_t i = 0; i < r.cross_weights.size(); ++i)
    for (std::size_t j = 0; j < r.cross_weights[i].size(); ++j)
      if (r.cross_mask[i][j]) CHECK(r.cross_weights[i][j] == 0.0);
  CHECK(r.max_blocked_weight == 0.0);
  CHECK(r.max_row_sum_error < 1e-12);
  CHECK(r.claim_holds);
  // the page labels the masks with the batch's tokens
  const Json report = demo_report(*find_demo("masks"), {});
  CHECK(report.at("figures")[0].at("cells") == Json(r.src));
  CHECK(report.at("figures")[1].at("rows") == Json(r.tgt_in[static_cast<std::size_t>(r.row)]));
}

TEST_CASE("demo schedule: every schedule peaks at the end of warm-up, noam halves in four times the steps",
          "[demo][schedule]") {
  const ScheduleDemoResult r = compute_schedule_demo();
  REQUIRE(r.curves.size() == 3);
  const sf::train::Schedule noam{sf::train::ScheduleKind::Noam, r.noam_scale, r.min_lr, r.warmup, r.max_steps, r.d_model};
  for (std::size_t i = 0; i < r.curves[0].steps.size(); ++i)
    CHECK(r.curves[0].lr[i] == noam.at(static_cast<std::int64_t>(r.curves[0].steps[i])));  // the trainer's own numbers
  for (const ScheduleCurve& c : r.curves) {
    INFO(c.name);
    CHECK(c.peak_step == r.warmup);
  }
  CHECK(r.noam_quarter_ratio == Approx(0.5).margin(1e-12));
  CHECK(r.curves[1].last == Approx(r.min_lr).margin(1e-15));  // cosine ends at min_lr
  CHECK(r.curves[2].last == Approx(r.lr));                      // constant stays
  CHECK(r.claim_holds);
}

TEST_CASE("demo reports: label smoothing shows tokens on a log scale, RoPE its rotating pairs", "[demo][label_smoothing][rope]") {
  const Json ls = demo_report(*find_demo("label-smoothing"), {});
  const Json& bars = ls.at("figures")[0];
  CHECK(bars.at("kind") == "bars");
  CHECK(bars.at("log") == true);  // eps / V = 0.02 next to 0.92, and the plain run's ~1e-3
  CHECK(bars.at("labels")[2] == "▁dog");
  const Json rope = demo_report(*find_demo("rope"), {});
  const Json& rotation = rope.at("figures")[0];
  REQUIRE(rotation.at("kind") == "rotation");
  const auto thetas = rotation.at("thetas").get<std::vector<double>>();
  REQUIRE(thetas.size() == 32);
  CHECK(thetas.front() == 1.0);
  for (std::size_t k = 1; k < thetas.size(); ++k) CHECK(thetas[k] < thetas[k - 1]);
}

TEST_CASE("demo --json prints the report the page draws, its exit code the verdict", "[demo][cli]") {
  const sf::test::CliResult r = sf::test::run_cli(std::vector<std::string>{"demo", "lookup", "--json"});
  REQUIRE(r.status == 0);
  const Json printed = Json::parse(r.out);
  CHECK(printed == demo_report(*find_demo("lookup"), {}));  // lookup draws nothing random
  CHECK(printed.at("held") == true);
  sf::test::check_one_line_error(sf::test::run_cli(std::vector<std::string>{"demo", "lookup", "--json", "--out", "x.svg"}),
                                 {"--json prints the report and writes no SVG"});
  const Json list = demo_list_json();
  REQUIRE(list.at("demos").size() == demos().size());
  CHECK(list.at("demos")[0].at("name") == demos()[0].name);
}
