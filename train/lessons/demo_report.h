// A demo's numbers as JSON: what the explorer's Lessons page draws (and `scratchformer demo NAME
// --json` prints). The same compute function gives the text, the SVG and this report, so the
// page and the terminal show the same numbers.
//
// The report of a demo:
//   {"name": "rope", "claim": {"en", "zh"}, "explain": {"en", "zh"}, "held": true,
//    "numbers": [{"label": {"en", "zh"}, "value": 1.2e-13}, ...],     the key numbers
//    "figures": [FIGURE, ...]}
// A FIGURE is one of (every title and axis label in both languages, {"en", "zh"}):
//   {"kind": "lines",   "title", "x_label", "y_label", "x_log", "y_log",
//                       "series": [{"name", "points": [[x, y], ...], "dashed"}],
//                       "marks": [{"x", "label"}]}                 dashed vertical lines
//   {"kind": "heatmap", "title", "rows": [label], "cols": [label], "values": [[v]],
//                       "signed": bool, "masked": [[bool]] (optional: true = hidden cell)}
//   {"kind": "bars",    "title", "labels": [label], "log": bool,
//                       "series": [{"name", "values": [v]}]}
//   {"kind": "table",   "title", "columns": [{"en", "zh"}], "rows": [[cell]]}
//   {"kind": "rotation","title", "thetas": [theta_k], "positions": P}   RoPE's rotating pairs
// Series names, row and column labels are tokens or names ("RoPE", "▁Mann"): a string, or
// {"en", "zh"} when they are words of a language.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/tensor.h"

namespace sf::lessons {

using Json = nlohmann::json;

// {"en": en, "zh": zh}
Json bilingual(const std::string& en, const std::string& zh);
// {"label": label, "value": value}: one of the report's key numbers.
Json number(Json label, Json value);

// One line of a "lines" figure: (x[i], y[i]) for every i.
Json line_series(Json name, const std::vector<double>& x, const std::vector<double>& y, bool dashed = false);
struct Axes {
  Json x_label, y_label;
  bool x_log = false, y_log = false;
};
Json lines_figure(Json title, const Axes& axes, std::vector<Json> series, std::vector<std::pair<double, Json>> marks = {});

Json heatmap_figure(Json title, std::vector<std::string> rows, std::vector<std::string> cols,
                    const std::vector<std::vector<double>>& values, bool signed_values = false);
// The same with a mask: masked[r][c] = true draws cell (r, c) as hidden.
Json masked_heatmap_figure(Json title, std::vector<std::string> rows, std::vector<std::string> cols,
                           const std::vector<std::vector<double>>& values, const std::vector<std::vector<bool>>& masked);

// One group of a "bars" figure: values[i] belongs to labels[i].
Json bar_series(Json name, const std::vector<double>& values);
Json bars_figure(Json title, std::vector<std::string> labels, std::vector<Json> series, bool log);

Json table_figure(Json title, std::vector<Json> columns, std::vector<std::vector<Json>> rows);

// A (R, C) tensor as R rows of C doubles.
std::vector<std::vector<double>> matrix_rows(const Tensor& t);

// 0, 1, ..., n - 1 as doubles (the x of a line over indices).
std::vector<double> indices(std::size_t n);

}  // namespace sf::lessons
