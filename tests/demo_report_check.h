// What every demo report must be for the explorer's Lessons page to draw it (train/lessons/
// demo_report.h): known figure kinds with consistent sizes, finite numbers, and every title, axis
// label, column header and key number's label in both languages. report_problems lists what is
// wrong, one line each (empty = drawable).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "train/lessons/demo_report.h"

namespace sf::test {

inline bool is_bilingual(const lessons::Json& t) {
  return t.is_object() && t.contains("en") && t.contains("zh") && t.at("en").is_string() && t.at("zh").is_string() &&
         !t.at("en").get<std::string>().empty() && !t.at("zh").get<std::string>().empty();
}

// A label a figure shows: a token or name (a non-empty string) or words in both languages.
inline bool is_label(const lessons::Json& t) { return (t.is_string() && !t.get<std::string>().empty()) || is_bilingual(t); }

inline bool is_finite_number(const lessons::Json& v) { return v.is_number() && std::isfinite(v.get<double>()); }

inline void figure_problems(const lessons::Json& f, const std::string& where, std::vector<std::string>& out) {
  const auto bad = [&](const std::string& what) { out.push_back(where + ": " + what); };
  if (!f.contains("title") || !is_bilingual(f.at("title"))) bad("title is not {en, zh}");
  const std::string kind = f.value("kind", "");
  if (kind == "lines") {
    if (!is_bilingual(f.value("x_label", lessons::Json())) || !is_bilingual(f.value("y_label", lessons::Json()))) bad("axis label not {en, zh}");
    if (!f.contains("series") || f.at("series").empty()) bad("no series");
    for (const auto& s : f.value("series", lessons::Json::array())) {
      if (!is_label(s.value("name", lessons::Json()))) bad("a series without a name");
      if (s.value("points", lessons::Json::array()).empty()) bad("series without points");
      for (const auto& p : s.value("points", lessons::Json::array()))
        if (!p.is_array() || p.size() != 2 || !is_finite_number(p[0]) || !is_finite_number(p[1]) ||
            (f.value("x_log", false) && p[0].get<double>() <= 0) || (f.value("y_log", false) && p[1].get<double>() <= 0))
          bad("a point that is not two finite numbers (positive on a log axis): " + p.dump());
    }
  } else if (kind == "heatmap") {
    const auto& v = f.at("values");
    if (v.empty() || f.at("rows").size() != v.size()) bad("rows do not match the values");
    for (const auto& row : v) {
      if (row.size() != f.at("cols").size()) bad("a row whose length is not the number of columns");
      for (const auto& x : row)
        if (!is_finite_number(x)) bad("a value that is not a finite number");
    }
    if (f.contains("masked") && f.at("masked").size() != v.size()) bad("masked does not match the values");
  } else if (kind == "bars") {
    for (const auto& s : f.at("series")) {
      if (!is_label(s.value("name", lessons::Json()))) bad("a series without a name");
      if (s.at("values").size() != f.at("labels").size()) bad("a series whose length is not the number of labels");
      for (const auto& x : s.at("values"))
        if (!is_finite_number(x) || (f.value("log", false) && x.get<double>() < 0)) bad("a bar that is not finite (or negative on a log scale)");
    }
  } else if (kind == "table") {
    for (const auto& c : f.at("columns"))
      if (!is_bilingual(c)) bad("a column header not {en, zh}");
    for (const auto& row : f.at("rows"))
      if (row.size() != f.at("columns").size()) bad("a row whose length is not the number of columns");
  } else if (kind == "rotation") {
    if (f.value("thetas", lessons::Json::array()).empty() || f.value("positions", 0) < 1) bad("no frequencies or positions");
  } else {
    bad("unknown figure kind '" + kind + "'");
  }
}

inline std::vector<std::string> report_problems(const lessons::Json& r) {
  std::vector<std::string> out;
  if (!r.contains("held") || !r.at("held").is_boolean()) out.push_back("no boolean 'held'");
  if (!r.contains("figures") || r.at("figures").empty()) out.push_back("no figures");
  for (const auto& n : r.value("numbers", lessons::Json::array()))
    if (!is_bilingual(n.value("label", lessons::Json())) || !(is_finite_number(n.value("value", lessons::Json())) || n.at("value").is_string()))
      out.push_back("a number without a {en, zh} label or a finite value: " + n.dump().substr(0, 120));
  std::size_t i = 0;
  for (const auto& f : r.value("figures", lessons::Json::array())) figure_problems(f, "figure " + std::to_string(i++), out);
  return out;
}

}  // namespace sf::test
