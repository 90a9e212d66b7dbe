// The lecture's claims as demos: `scratchformer demo NAME` runs one, prints its numbers and
// writes an SVG. Each demo is a function here (one file each, demo_NAME.cpp); the registry
// (demos.cpp) lists them in course order with one line each for `scratchformer demo --help`.
// Every claim a demo shows is also asserted by a test (tests/test_demos*.cpp), on the same
// numbers the demo prints: each demo_NAME.h has a compute function the test calls and the demo
// prints.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "train/lessons/demo_report.h"

namespace sf::train {
class SvgWriter;  // train/classroom/svg.h
}

namespace sf::lessons {

struct DemoOptions {
  std::string out;            // the SVG to write; "" = demo-NAME.svg in the current directory
  std::uint64_t seed = 0;     // every random draw of the demo starts here
  std::string corpora;        // where the shipped corpora are ("" = the data folder's: train/data_folder.h)
  std::string text;           // the sentence a demo reads ("" = its own; worked-example)
  std::string checkpoint;     // a trained model a demo reads ("" = none; attribution's translator)
};

// One demo: its name (what `scratchformer demo NAME` takes), the claim it shows in one line, and
// the two views of its numbers. run prints to `out`, writes the SVG, and returns 0 when the claim
// held on these numbers, 1 when it did not (so a class sees a broken claim, not a silent pass).
// report computes the same numbers and returns them as JSON for the explorer's Lessons page:
// {"held", "numbers", "figures"} (demo_report.h); demo_report() adds the name and the texts.
struct Demo {
  std::string name;
  std::string claim;
  std::function<int(const DemoOptions&, std::ostream& out)> run;
  std::function<Json(const DemoOptions&)> report;
  double seconds = 1;  // about how long it takes on two cores (the page says so before a long one)
};

// Every demo, in the order of the course.
const std::vector<Demo>& demos();
// The demo called `name`, or nullptr.
const Demo* find_demo(const std::string& name);

// The whole report of `demo`: {"name", "claim": {en, zh}, "explain": {en, zh}, "seconds", "held",
// "numbers", "figures"} (demo_report.h), the texts from demo_texts.h.
Json demo_report(const Demo& demo, const DemoOptions& options);
// {"demos": [{"name", "claim": {en, zh}, "explain": {en, zh}, "seconds"}]} in course order.
Json demo_list_json();

// The SVG path a demo writes: options.out, or demo-NAME.svg.
std::string demo_svg_path(const DemoOptions& options, const std::string& name);

// ---- what every demo shares (demos.cpp) ------------------------------------------------------

// --out is always a file: throws std::invalid_argument (one line) when `path` is an existing
// directory or does not end in ".svg".
void check_demo_svg_path(const std::string& path);
// Writes `svg` to demo_svg_path(options, name) (creating its folder), and prints where.
void save_demo_svg(const DemoOptions& options, const std::string& name, const std::string& svg, std::ostream& out);
// The verdict line: "claim holds / 结论成立" or "claim does NOT hold / 结论不成立".
std::string verdict(bool held);
// A heading: "== title ==", underlined for the terminal.
void print_heading(std::ostream& out, const std::string& title);
// `v` in scientific notation with 2 significant digits after the point ("3.14e-16").
std::string sci(double v);
// `v` fixed with `digits` decimals.
std::string fixed(double v, int digits);

// A heatmap of m (rows x cols) with its top-left corner at (x, y), square cells of `cell` px, the
// value printed in each cell, labels left of the rows and above the columns (turned 45 degrees
// when wider than a cell: leave about 0.7 x their width above y), a title above.
// Colours: viridis over [lo, hi], or (signed) the diverging map over [-hi, hi].
struct Heatmap {
  std::vector<std::vector<double>> m;
  std::vector<std::string> row_labels, col_labels;
  std::string title;
  double lo = 0, hi = 1;
  bool signed_values = false;
};
void draw_heatmap(train::SvgWriter& svg, double x, double y, double cell, const Heatmap& map);
// Horizontal bars of log10(values) in a panel at (x, y), w px wide, one 22 px row per bar, with a
// dashed vertical line at `threshold` (what separates "zero up to rounding" from "clearly not").
void draw_log_bars(train::SvgWriter& svg, double x, double y, double w, const std::vector<std::string>& labels,
                   const std::vector<double>& values, double threshold, const std::string& title);

// A log-log panel at (x, y), w x h px: x on a log2 axis (ticks at the powers of two in range,
// labelled as integers), y on a log10 axis (grid at the powers of ten, labelled "1e3 unit").
// One line (with dots) per series; a dashed series is drawn dashed. A legend sits at the
// top-left inside the panel.
struct Series {
  std::string name;
  std::string colour;
  std::vector<std::pair<double, double>> points;  // (x > 0, y > 0)
  bool dashed = false;
};
void draw_log_lines(train::SvgWriter& svg, double x, double y, double w, double h, const std::string& title,
                    const std::string& x_label, const std::string& unit, const std::vector<Series>& series);
// Ten well-separated line colours ("#1f77b4", ...): series i takes colour(i).
const char* colour(std::size_t i);

// The demos, one file each.
int run_autograd_demo(const DemoOptions& options, std::ostream& out);         // demo_autograd.cpp
int run_permutation_demo(const DemoOptions& options, std::ostream& out);      // demo_permutation.cpp
int run_collapse_demo(const DemoOptions& options, std::ostream& out);         // demo_collapse.cpp
int run_scaling_demo(const DemoOptions& options, std::ostream& out);          // demo_scaling.cpp
int run_path_length_demo(const DemoOptions& options, std::ostream& out);      // demo_path_length.cpp
int run_parallel_demo(const DemoOptions& options, std::ostream& out);         // demo_parallel.cpp
int run_bottleneck_demo(const DemoOptions& options, std::ostream& out);       // demo_bottleneck.cpp
int run_alignment_demo(const DemoOptions& options, std::ostream& out);        // demo_alignment.cpp
int run_lookup_demo(const DemoOptions& options, std::ostream& out);           // demo_lookup.cpp
int run_rope_demo(const DemoOptions& options, std::ostream& out);             // demo_rope.cpp
int run_gqa_demo(const DemoOptions& options, std::ostream& out);              // demo_gqa.cpp
int run_pooling_demo(const DemoOptions& options, std::ostream& out);          // demo_pooling.cpp
int run_label_smoothing_demo(const DemoOptions& options, std::ostream& out);  // demo_label_smoothing.cpp
int run_worked_example_demo(const DemoOptions& options, std::ostream& out);  // demo_worked_example.cpp
int run_crossover_demo(const DemoOptions& options, std::ostream& out);        // demo_crossover.cpp
int run_kv_bandwidth_demo(const DemoOptions& options, std::ostream& out);     // demo_kv_bandwidth.cpp
int run_extrapolation_demo(const DemoOptions& options, std::ostream& out);    // demo_extrapolation.cpp
int run_positions_demo(const DemoOptions& options, std::ostream& out);        // demo_positions.cpp
int run_masks_demo(const DemoOptions& options, std::ostream& out);            // demo_masks.cpp
int run_attribution_demo(const DemoOptions& options, std::ostream& out);      // demo_attribution.cpp
int run_schedule_demo(const DemoOptions& options, std::ostream& out);         // demo_schedule.cpp

// The reports, each beside its run function (the same file, the same compute function).
Json path_length_report(const DemoOptions& options);
Json parallel_report(const DemoOptions& options);
Json bottleneck_report(const DemoOptions& options);
Json alignment_report(const DemoOptions& options);
Json autograd_report(const DemoOptions& options);
Json worked_example_report(const DemoOptions& options);
Json permutation_report(const DemoOptions& options);
Json collapse_report(const DemoOptions& options);
Json scaling_report(const DemoOptions& options);
Json lookup_report(const DemoOptions& options);
Json rope_report(const DemoOptions& options);
Json gqa_report(const DemoOptions& options);
Json crossover_report(const DemoOptions& options);
Json extrapolation_report(const DemoOptions& options);
Json positions_report(const DemoOptions& options);
Json masks_report(const DemoOptions& options);
Json attribution_report(const DemoOptions& options);
Json schedule_report(const DemoOptions& options);
Json kv_bandwidth_report(const DemoOptions& options);
Json pooling_report(const DemoOptions& options);
Json label_smoothing_report(const DemoOptions& options);

}  // namespace sf::lessons
