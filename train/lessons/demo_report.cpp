// The builders of a demo's JSON report (demo_report.h).
#include "train/lessons/demo_report.h"

namespace sf::lessons {

Json bilingual(const std::string& en, const std::string& zh) { return {{"en", en}, {"zh", zh}}; }

Json number(Json label, Json value) { return {{"label", std::move(label)}, {"value", std::move(value)}}; }

Json line_series(Json name, const std::vector<double>& x, const std::vector<double>& y, bool dashed) {
  Json points = Json::array();
  for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) points.push_back({x[i], y[i]});
  return {{"name", std::move(name)}, {"points", std::move(points)}, {"dashed", dashed}};
}

Json lines_figure(Json title, const Axes& axes, std::vector<Json> series, std::vector<std::pair<double, Json>> marks) {
  Json m = Json::array();
  for (auto& [x, label] : marks) m.push_back({{"x", x}, {"label", std::move(label)}});
  return {{"kind", "lines"},       {"title", std::move(title)}, {"x_label", axes.x_label}, {"y_label", axes.y_label},
          {"x_log", axes.x_log},   {"y_log", axes.y_log},       {"series", std::move(series)}, {"marks", std::move(m)}};
}

Json heatmap_figure(Json title, std::vector<std::string> rows, std::vector<std::string> cols,
                    const std::vector<std::vector<double>>& values, bool signed_values) {
  return {{"kind", "heatmap"}, {"title", std::move(title)}, {"rows", std::move(rows)}, {"cols", std::move(cols)},
          {"values", values},  {"signed", signed_values}};
}

Json masked_heatmap_figure(Json title, std::vector<std::string> rows, std::vector<std::string> cols,
                           const std::vector<std::vector<double>>& values, const std::vector<std::vector<bool>>& masked) {
  Json f = heatmap_figure(std::move(title), std::move(rows), std::move(cols), values);
  f["masked"] = masked;
  return f;
}

Json bar_series(Json name, const std::vector<double>& values) { return {{"name", std::move(name)}, {"values", values}}; }

Json bars_figure(Json title, std::vector<std::string> labels, std::vector<Json> series, bool log) {
  return {{"kind", "bars"}, {"title", std::move(title)}, {"labels", std::move(labels)}, {"series", std::move(series)}, {"log", log}};
}

Json table_figure(Json title, std::vector<Json> columns, std::vector<std::vector<Json>> rows) {
  return {{"kind", "table"}, {"title", std::move(title)}, {"columns", std::move(columns)}, {"rows", std::move(rows)}};
}

std::vector<std::vector<double>> matrix_rows(const Tensor& t) {
  const std::vector<double> v = t.contiguous().to_vector<double>();
  const auto R = static_cast<std::size_t>(t.size(0)), C = static_cast<std::size_t>(t.size(1));
  std::vector<std::vector<double>> rows(R);
  for (std::size_t r = 0; r < R; ++r) rows[r].assign(v.begin() + static_cast<std::ptrdiff_t>(r * C), v.begin() + static_cast<std::ptrdiff_t>((r + 1) * C));
  return rows;
}

std::vector<double> indices(std::size_t n) {
  std::vector<double> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<double>(i);
  return x;
}

}  // namespace sf::lessons
