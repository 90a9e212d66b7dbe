// SVG pictures (train/classroom/plots.h): every document is well-formed XML, heatmaps have one cell per
// weight, token labels are escaped, colours grow with the value, the training curves plot exactly
// the rows of a hand-written metrics.tsv, and bad metrics files are reported with path and line.
#include "test_util.h"

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "train/classroom/plots.h"
#include "train/config.h"
#include "train/optim/schedule.h"

namespace fs = std::filesystem;
using Catch::Contains;
using namespace sf;
using namespace sf::train;

namespace {

// ---- a small XML well-formedness checker (what a browser insists on before drawing) ----

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':' || c == '.'; }

// Checks "&...;" at s[i] is one of XML's five entities or a character reference.
bool valid_entity(const std::string& s, std::size_t i) {
  const std::size_t semi = s.find(';', i);
  if (semi == std::string::npos) return false;
  const std::string name = s.substr(i + 1, semi - i - 1);
  if (name == "amp" || name == "lt" || name == "gt" || name == "quot" || name == "apos") return true;
  if (name.size() > 1 && name[0] == '#') {
    const bool hex = name[1] == 'x';
    const std::string digits = name.substr(hex ? 2 : 1);
    if (digits.empty()) return false;
    for (char c : digits)
      if (!(hex ? std::isxdigit(static_cast<unsigned char>(c)) : std::isdigit(static_cast<unsigned char>(c)))) return false;
    return true;
  }
  return false;
}

// Every byte sequence is valid UTF-8 (no stray continuation bytes, no truncated sequences).
bool valid_utf8(const std::string& s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int extra = b < 0x80 ? 0 : (b & 0xE0) == 0xC0 ? 1 : (b & 0xF0) == 0xE0 ? 2 : (b & 0xF8) == 0xF0 ? 3 : -1;
    if (extra < 0 || i + extra >= s.size()) return false;
    for (int k = 1; k <= extra; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += extra + 1;
  }
  return true;
}

// "" if `doc` is a well-formed XML document (an optional <?xml ...?> declaration, one root element,
// balanced tags, quoted attributes without '<', every '&' an entity, valid UTF-8); otherwise what
// is wrong and where.
std::string xml_problem(const std::string& doc) {
  if (!valid_utf8(doc)) return "invalid UTF-8";
  std::vector<std::string> open;
  bool root_seen = false;
  std::size_t i = 0;
  if (doc.rfind("<?xml", 0) == 0) {
    i = doc.find("?>");
    if (i == std::string::npos) return "unterminated XML declaration";
    i += 2;
  }
  const auto at = [&](std::size_t k) { return " at byte " + std::to_string(k); };
  while (i < doc.size()) {
    const char c = doc[i];
    if (c != '<') {
      if (open.empty() && !std::isspace(static_cast<unsigned char>(c))) return "text outside the root element" + at(i);
      if (c == '&' && !valid_entity(doc, i)) return "bare '&'" + at(i);
      ++i;
      continue;
    }
    if (doc.compare(i, 4, "<!--") == 0) {
      const std::size_t end = doc.find("-->", i);
      if (end == std::string::npos) return "unterminated comment" + at(i);
      i = end + 3;
      continue;
    }
    if (doc.compare(i, 2, "</") == 0) {
      const std::size_t end = doc.find('>', i);
      if (end == std::string::npos) return "unterminated end tag" + at(i);
      const std::string name = doc.substr(i + 2, end - i - 2);
      if (open.empty() || open.back() != name) return "</" + name + "> does not close <" + (open.empty() ? "" : open.back()) + ">" + at(i);
      open.pop_back();
      i = end + 1;
      continue;
    }
    // a start tag: <name attr="value" ...> or .../>
    std::size_t k = i + 1;
    while (k < doc.size() && is_name_char(doc[k])) ++k;
    const std::string name = doc.substr(i + 1, k - i - 1);
    if (name.empty() || !std::isalpha(static_cast<unsigned char>(name[0]))) return "bad tag name" + at(i);
    if (open.empty() && root_seen) return "a second root element <" + name + ">" + at(i);
    std::vector<std::string> attrs;
    for (;;) {
      while (k < doc.size() && std::isspace(static_cast<unsigned char>(doc[k]))) ++k;
      if (k >= doc.size()) return "unterminated tag <" + name + ">" + at(i);
      if (doc.compare(k, 2, "/>") == 0) {
        k += 2;
        if (open.empty()) root_seen = true;
        break;
      }
      if (doc[k] == '>') {
        ++k;
        open.push_back(name);
        root_seen = true;
        break;
      }
      const std::size_t a = k;
      while (k < doc.size() && is_name_char(doc[k])) ++k;
      const std::string attr = doc.substr(a, k - a);
      if (attr.empty() || k + 1 >= doc.size() || doc[k] != '=' || (doc[k + 1] != '"' && doc[k + 1] != '\''))
        return "bad attribute in <" + name + ">" + at(a);
      if (std::find(attrs.begin(), attrs.end(), attr) != attrs.end()) return "repeated attribute " + attr + at(a);
      attrs.push_back(attr);
      const char quote = doc[k + 1];
      const std::size_t end = doc.find(quote, k + 2);
      if (end == std::string::npos) return "unterminated attribute value" + at(a);
      for (std::size_t v = k + 2; v < end; ++v) {
        if (doc[v] == '<') return "'<' in an attribute value" + at(v);
        if (doc[v] == '&' && !valid_entity(doc, v)) return "bare '&' in an attribute value" + at(v);
      }
      k = end + 1;
      if (k < doc.size() && !std::isspace(static_cast<unsigned char>(doc[k])) && doc[k] != '>' && doc[k] != '/')
        return "no space between attributes" + at(k);
    }
    i = k;
  }
  if (!open.empty()) return "<" + open.back() + "> is never closed";
  if (!root_seen) return "no root element";
  return "";
}

// ---- reading the SVG back ----

using sf::test::count_of;  // tests/test_util.h

// Every start tag "<name ...>" whose text contains `marker` (e.g. class="cell"), in order.
std::vector<std::string> tags_with(const std::string& svg, const std::string& name, const std::string& marker) {
  std::vector<std::string> tags;
  for (std::size_t at = svg.find("<" + name + " "); at != std::string::npos; at = svg.find("<" + name + " ", at + 1)) {
    const std::string tag = svg.substr(at, svg.find('>', at) - at + 1);
    if (tag.find(marker) != std::string::npos) tags.push_back(tag);
  }
  return tags;
}

std::string attribute(const std::string& tag, const std::string& name) {
  const std::size_t at = tag.find(" " + name + "=\"");
  REQUIRE(at != std::string::npos);
  const std::size_t begin = at + name.size() + 3;
  return tag.substr(begin, tag.find('"', begin) - begin);
}

// The text between <g class="css_class"> and its </g> (the writer never nests groups).
std::string group(const std::string& svg, const std::string& css_class) {
  const std::string open = "<g class=\"" + css_class + "\">";
  const std::size_t at = svg.find(open);
  if (at == std::string::npos) return "";
  return svg.substr(at + open.size(), svg.find("</g>", at) - at - open.size());
}

// The points of the one <polyline class="css_class">, as (x, y) pixels.
std::vector<std::pair<double, double>> polyline_points(const std::string& svg, const std::string& css_class) {
  const auto tags = tags_with(svg, "polyline", "class=\"" + css_class + "\"");
  REQUIRE(tags.size() == 1);
  std::vector<std::pair<double, double>> points;
  std::istringstream in(attribute(tags[0], "points"));
  std::string pair;
  while (in >> pair) {
    const std::size_t comma = pair.find(',');
    points.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
  }
  return points;
}

Rgb parse_hex(const std::string& hex) {
  REQUIRE(hex.size() == 7);
  REQUIRE(hex[0] == '#');
  return {std::stoi(hex.substr(1, 2), nullptr, 16), std::stoi(hex.substr(3, 2), nullptr, 16),
          std::stoi(hex.substr(5, 2), nullptr, 16)};
}

#define REQUIRE_WELL_FORMED(svg)       \
  do {                                 \
    const std::string problem_ = xml_problem(svg); \
    INFO(problem_);                    \
    REQUIRE(problem_.empty());         \
  } while (0)

using sf::test::read_file;  // tests/test_util.h
using sf::test::TempDir;
using sf::test::write_file;

const std::string kHeader = "step\tepoch\tkind\tloss\tnll\tppl\tlr\ttokens_per_s\tgrad_norm\tbleu\telapsed_s\n";

// A metrics.tsv row as the trainer writes it; empty strings are missing values.
std::string row(int step, const std::string& kind, const std::string& loss, const std::string& nll, const std::string& lr,
                const std::string& bleu) {
  return std::to_string(step) + "\t1\t" + kind + "\t" + loss + "\t" + nll + "\t\t" + lr + "\t\t\t" + bleu + "\t1.5\n";
}

// A row-stochastic (rows, cols) float32 map with a causal mask when `causal` (zeros above the
// diagonal), every other weight positive.
Tensor attention_map(std::int64_t rows, std::int64_t cols, bool causal) {
  std::vector<float> w(static_cast<std::size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i) {
    const std::int64_t visible = causal ? i + 1 : cols;
    for (std::int64_t j = 0; j < cols; ++j) w[i * cols + j] = j < visible ? 1.0f / static_cast<float>(visible) : 0.0f;
  }
  return from_vector<float>(w, {rows, cols});
}

}  // namespace

TEST_CASE("The test XML checker rejects broken documents", "[plots][xml]") {
  CHECK(xml_problem("<?xml version=\"1.0\"?>\n<svg a=\"1\"><g><rect/></g><text>a &amp; b</text></svg>\n").empty());
  CHECK_FALSE(xml_problem("<a><b></a></b>").empty());        // crossed tags
  CHECK_FALSE(xml_problem("<a>x & y</a>").empty());          // bare ampersand
  CHECK_FALSE(xml_problem("<a t=\"<\"/>").empty());          // '<' in an attribute
  CHECK_FALSE(xml_problem("<a t=1/>").empty());              // unquoted attribute
  CHECK_FALSE(xml_problem("<a>").empty());                   // never closed
  CHECK_FALSE(xml_problem("<a/><b/>").empty());              // two roots
  CHECK_FALSE(xml_problem("<a>\xff</a>").empty());           // invalid UTF-8
  CHECK_FALSE(xml_problem("<a x=\"1\" x=\"2\"/>").empty());  // repeated attribute
}

TEST_CASE("xml_escape escapes markup and replaces invalid bytes", "[plots][escape]") {
  CHECK(xml_escape("a<b & \"c\" 'd'>") == "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
  CHECK(xml_escape("▁Mann 我喜欢猫 é") == "▁Mann 我喜欢猫 é");  // valid UTF-8 passes through
  const std::string fffd = "\xEF\xBF\xBD";
  CHECK(xml_escape("a\xff" "b") == "a" + fffd + "b");          // not a UTF-8 lead byte
  CHECK(xml_escape("\xC3") == fffd);                           // truncated two-byte sequence
  CHECK(xml_escape("\xC0\xAF") == fffd + fffd);                // overlong '/', then a stray continuation
  CHECK(xml_escape("\xED\xA0\x80") == fffd + fffd + fffd);     // a UTF-16 surrogate
  CHECK(xml_escape("a\x01" "b\tc\n") == "a" + fffd + "b\tc\n");  // control characters XML forbids
}

TEST_CASE("viridis brightens monotonically and diverging runs blue white red", "[plots][colour]") {
  CHECK(viridis(0).hex() == "#440154");
  CHECK(viridis(1).hex() == "#fde725");
  CHECK(viridis(-3).hex() == "#440154");  // clamped
  double previous = -1;
  for (int k = 0; k <= 200; ++k) {
    const double lum = viridis(k / 200.0).luminance();
    INFO("t = " << k / 200.0);
    REQUIRE(lum > previous);
    previous = lum;
  }
  const Rgb blue = diverging(-1), red = diverging(1), centre = diverging(0);
  CHECK(blue.b > blue.r);
  CHECK(red.r > red.b);
  CHECK(centre.luminance() > 0.9);  // near white
  // Darker the further from 0, on both sides.
  for (int k = 1; k <= 50; ++k) {
    INFO("|t| = " << k / 50.0);
    REQUIRE(diverging(k / 50.0).luminance() < diverging((k - 1) / 50.0).luminance());
    REQUIRE(diverging(-k / 50.0).luminance() < diverging(-(k - 1) / 50.0).luminance());
  }
}

TEST_CASE("Attention heatmaps have one cell per weight and escape token labels", "[plots][attention]") {
  const std::vector<std::string> src = {"▁Ein", "<&\"", "▁Hut", "</s>"}, tgt = {"<s>", "▁A", "▁hat"};
  const std::vector<Heatmap> maps = {
      {"layer 1, head 1 (cross)", tgt, src, attention_map(3, 4, false)},
      {"layer 1, head 1 (self)", tgt, tgt, attention_map(3, 3, true)},
      {"layer 2, head 1 (cross)", tgt, src, attention_map(3, 4, false).to(Dtype::Float64)},
  };
  const std::string svg = attention_heatmaps_svg(maps, 2, "Attention for <one> sentence & more");
  REQUIRE_WELL_FORMED(svg);
  const std::size_t cells = tags_with(svg, "rect", "class=\"cell\"").size();
  const std::size_t masked = tags_with(svg, "rect", "class=\"masked\"").size();
  CHECK(cells + masked == 3 * 4 + 3 * 3 + 3 * 4);
  CHECK(masked == 3);  // the causal triangle above the diagonal of a 3 x 3 map
  // The awkward token is escaped wherever it appears (label and tooltips), never raw.
  CHECK(svg.find("&lt;&amp;&quot;") != std::string::npos);
  CHECK(svg.find("<&\"") == std::string::npos);
  CHECK(svg.find("Attention for &lt;one&gt; sentence &amp; more") != std::string::npos);
  CHECK(count_of(svg, ">layer 1, head 1 (self)</text>") == 1);
  CHECK(svg.find("colour-bar") != std::string::npos);
}

TEST_CASE("Attention heatmap colours grow with the weight", "[plots][attention][colour]") {
  const std::vector<double> values = {0.02, 0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 1.0};
  const Heatmap map{"ramp", {"q"}, {"a", "b", "c", "d", "e", "f", "g", "h"},
                    from_vector<double>(values, {1, static_cast<std::int64_t>(values.size())})};
  const std::string svg = attention_heatmaps_svg({map}, 1, "ramp");
  REQUIRE_WELL_FORMED(svg);
  const auto cells = tags_with(svg, "rect", "class=\"cell\"");
  REQUIRE(cells.size() == values.size());
  for (std::size_t k = 0; k < cells.size(); ++k) {
    CHECK(attribute(cells[k], "fill") == viridis(values[k]).hex());
    if (k > 0) CHECK(parse_hex(attribute(cells[k], "fill")).luminance() > parse_hex(attribute(cells[k - 1], "fill")).luminance());
  }
  // Cells run left to right along the row.
  CHECK(std::stod(attribute(cells.back(), "x")) > std::stod(attribute(cells.front(), "x")));
}

TEST_CASE("Attention heatmaps reject shapes and weights that cannot be drawn", "[plots][attention][errors]") {
  const Heatmap wrong_labels{"head 3", {"a", "b"}, {"x", "y"}, attention_map(2, 3, false)};
  REQUIRE_THROWS_AS(attention_heatmaps_svg({wrong_labels}, 1, "t"), std::invalid_argument);
  REQUIRE_THROWS_WITH(attention_heatmaps_svg({wrong_labels}, 1, "t"),
                      Contains("head 3") && Contains("(2, 3)") && Contains("2 column labels"));
  const Heatmap too_big{"head 4", {"a"}, {"x", "y"}, from_vector<double>({0.5, 1.5}, {1, 2})};
  REQUIRE_THROWS_WITH(attention_heatmaps_svg({too_big}, 1, "t"), Contains("head 4") && Contains("1.5") && Contains("[0, 1]"));
  const Heatmap not_a_number{"head 5", {"a"}, {"x"}, from_vector<double>({std::nan("")}, {1, 1})};
  REQUIRE_THROWS_WITH(attention_heatmaps_svg({not_a_number}, 1, "t"), Contains("head 5") && Contains("nan"));
  const Heatmap three_d{"head 6", {"a"}, {"x"}, zeros({1, 1, 1})};
  REQUIRE_THROWS_WITH(attention_heatmaps_svg({three_d}, 1, "t"), Contains("head 6") && Contains("(1, 1, 1)"));
  const Heatmap fine{"ok", {"a"}, {"x"}, ones({1, 1})};
  REQUIRE_THROWS_WITH(attention_heatmaps_svg({fine}, 0, "t"), Contains("columns"));
  REQUIRE_THROWS_AS(attention_heatmaps_svg({}, 1, "t"), std::invalid_argument);
}

TEST_CASE("Training curves plot every row of a metrics file", "[plots][curves]") {
  TempDir dir;
  // Four training rows with falling loss, two validation rows, a skipped step, the test score.
  const std::string path = dir.write(
      "metrics.tsv", kHeader + row(100, "train", "9.5", "9.1", "0.0001", "") + row(200, "train", "7.25", "6.9", "0.0002", "") +
                         row(200, "valid", "7.5", "7", "", "3.25") + row(300, "train", "5", "4.6", "0.0003", "") +
                         row(301, "skipped", "inf", "", "", "") + row(400, "train", "4", "3.5", "0.00025", "") +
                         row(400, "valid", "4.5", "4", "", "12.5") + row(400, "test", "", "", "", "11.75"));
  const std::string svg = training_curves_svg(path);
  REQUIRE_WELL_FORMED(svg);
  const auto loss = polyline_points(svg, "train-loss");
  REQUIRE(loss.size() == 4);
  CHECK(polyline_points(svg, "train-nll").size() == 4);
  CHECK(polyline_points(svg, "lr").size() == 4);
  CHECK(polyline_points(svg, "valid-bleu").size() == 2);
  CHECK(count_of(group(svg, "valid-loss"), "<circle") == 2);
  CHECK(count_of(group(svg, "valid-nll"), "<circle") == 2);
  CHECK(count_of(group(svg, "valid-bleu-points"), "<circle") == 2);
  CHECK(count_of(group(svg, "test-bleu"), "<polyline") == 1);
  CHECK(count_of(group(svg, "skipped"), "<line") == 1);
  // Steps go right, falling loss goes down the page (larger y), equal steps share an x.
  for (std::size_t k = 1; k < loss.size(); ++k) {
    CHECK(loss[k].first > loss[k - 1].first);
    CHECK(loss[k].second > loss[k - 1].second);
  }
  CHECK(polyline_points(svg, "train-nll")[3].first == loss[3].first);
  for (const char* label : {">step</text>", ">loss (nats per token)</text>", ">BLEU</text>", ">learning rate</text>",
                            ">valid BLEU</text>", ">test BLEU</text>", ">skipped step</text>"})
    CHECK(svg.find(label) != std::string::npos);
}

TEST_CASE("Training curves replace the steps a resumed run logs again", "[plots][curves]") {
  TempDir dir;
  // The first run logged up to step 300 (with a validation at 300), then crashed; the resumed run
  // restarted from its step-100 checkpoint and logged 200, 300, 400; it validated at 400, was
  // stopped, and validated at 400 again when resumed. Extra columns and CRLF line ends (a file
  // edited on Windows) are fine.
  std::string text = kHeader + row(100, "train", "9", "8.5", "1e-4", "") + row(200, "train", "8", "7.5", "2e-4", "") +
                     row(300, "train", "7", "6.5", "3e-4", "") + row(300, "valid", "7.2", "6.8", "", "5") +
                     row(200, "train", "7.9", "7.4", "2e-4", "") + row(300, "train", "6.9", "6.4", "3e-4", "") +
                     row(400, "train", "6", "5.5", "4e-4", "") + row(400, "valid", "6.5", "6", "", "8") +
                     row(400, "valid", "6.5", "6", "", "8");
  const std::string svg = training_curves_svg(dir.write("metrics.tsv", text));
  CHECK(polyline_points(svg, "train-loss").size() == 4);        // 100, 200, 300, 400
  CHECK(count_of(group(svg, "valid-loss"), "<circle") == 1);    // 300 was lost with its run; 400 once
  CHECK(polyline_points(svg, "valid-bleu").size() == 1);
  std::string crlf;
  for (char c : std::string("step\tkind\tloss\tnll\tlr\tbleu\tnote\n1\ttrain\t2\t2\t0.1\t\thello\n2\ttrain\t1\t1\t0.1\t\t\n"))
    crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  const std::string svg2 = training_curves_svg(dir.write("crlf.tsv", crlf));
  REQUIRE_WELL_FORMED(svg2);
  CHECK(polyline_points(svg2, "train-loss").size() == 2);
  // Only a header: three empty panels that say so.
  const std::string empty = training_curves_svg(dir.write("empty.tsv", kHeader));
  REQUIRE_WELL_FORMED(empty);
  CHECK(empty.find("no loss logged yet") != std::string::npos);
}

TEST_CASE("The learning-rate panel draws the run's schedule at every step, so its peak is the schedule's", "[plots][curves][schedule]") {
  // configs/reverse.toml with the warmup ending at step 75, logged every 50 steps: 50 and 100
  // miss the peak, which the schedule has at the end of the warmup.
  const Config cfg = load_config(std::string(SCRATCHFORMER_SOURCE_DIR) + "/configs/reverse.toml", {"train.warmup_steps=75"});
  const Schedule schedule{parse_schedule(cfg.train.schedule), cfg.train.lr, cfg.train.min_lr, cfg.train.warmup_steps,
                          cfg.train.max_steps, cfg.model.d_model};
  constexpr int kLogEvery = 50, kLastStep = 300;
  double logged_peak = 0, true_peak = 0;
  std::int64_t true_peak_step = 0;
  std::string text = kHeader;
  for (int step = kLogEvery; step <= kLastStep; step += kLogEvery) {
    text += row(step, "train", "3", "2.5", std::to_string(schedule.at(step)), "");
    logged_peak = std::max(logged_peak, schedule.at(step));
  }
  for (std::int64_t step = 1; step <= kLastStep; ++step)
    if (schedule.at(step) > true_peak) true_peak = schedule.at(step), true_peak_step = step;
  REQUIRE(true_peak_step == 75);
  REQUIRE(logged_peak < true_peak);  // the logged rows alone would draw a lower peak

  TempDir run;
  const std::string metrics = (run.path / "metrics.tsv").string();
  write_file(metrics, text);
  // without the run's config: the logged values, and the note says the peak may be missed
  const std::string logged_only = training_curves_svg(metrics);
  REQUIRE_WELL_FORMED(logged_only);
  CHECK(count_of(logged_only, "class=\"lr-schedule\"") == 0);
  CHECK_THAT(logged_only, Contains("peak lr " + short_value(logged_peak) + " at step 100") && Contains("no readable config.toml"));

  // with the config.toml the trainer saves beside metrics.tsv: the schedule at every step
  write_file((run.path / "config.toml").string(), to_toml(cfg));
  const std::string svg = training_curves_svg(metrics);
  REQUIRE_WELL_FORMED(svg);
  const auto curve = polyline_points(svg, "lr-schedule");
  CHECK(curve.size() == static_cast<std::size_t>(kLastStep));  // one point per step (fewer than thin_points keeps)
  CHECK_THAT(svg, Contains("peak lr " + short_value(true_peak) + " at step 75 (the config.toml schedule"));
  // its highest point (smallest y in px) is at step 75: the 75th of the 300 points
  const auto top = std::min_element(curve.begin(), curve.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  CHECK(top - curve.begin() == 74);
}

TEST_CASE("Training curves report bad metrics files with path and line", "[plots][curves][errors]") {
  TempDir dir;
  const std::string missing = (dir.path / "nowhere.tsv").string();
  REQUIRE_THROWS_AS(training_curves_svg(missing), std::runtime_error);
  REQUIRE_THROWS_WITH(training_curves_svg(missing), Contains(missing) && Contains("No such file"));

  REQUIRE_THROWS_WITH(training_curves_svg(dir.path.string()), Contains(dir.path.string()) && Contains("folder"));

  const std::string empty = dir.write("empty.tsv", "");
  REQUIRE_THROWS_WITH(training_curves_svg(empty), Contains(empty) && Contains("empty"));

  const std::string header = dir.write("header.tsv", "step,epoch,kind,loss\n1,1,train,2\n");
  REQUIRE_THROWS_WITH(training_curves_svg(header), Contains(header + ":1:") && Contains("no column 'step'"));

  const std::string number = dir.write("number.tsv", kHeader + row(1, "train", "2", "2", "0.1", "") + row(2, "train", "abc", "2", "0.1", ""));
  REQUIRE_THROWS_WITH(training_curves_svg(number), Contains(number + ":3:") && Contains("'loss'") && Contains("'abc'"));

  const std::string trailing = dir.write("trailing.tsv", kHeader + row(1, "train", "2", "2", "0.1x", ""));
  REQUIRE_THROWS_WITH(training_curves_svg(trailing), Contains(trailing + ":2:") && Contains("'lr'") && Contains("'0.1x'"));

  const std::string step = dir.write("step.tsv", kHeader + row(1, "train", "2", "2", "0.1", "") + "1.5\t1\ttrain\t2\t2\t\t0.1\t\t\t\t1\n");
  REQUIRE_THROWS_WITH(training_curves_svg(step), Contains(step + ":3:") && Contains("'step'"));

  const std::string cells = dir.write("cells.tsv", kHeader + "1\t1\ttrain\t2\n");
  REQUIRE_THROWS_WITH(training_curves_svg(cells), Contains(cells + ":2:") && Contains("expected 11") && Contains("found 4"));

  const std::string kind = dir.write("kind.tsv", kHeader + row(1, "training", "2", "2", "0.1", ""));
  REQUIRE_THROWS_WITH(training_curves_svg(kind), Contains(kind + ":2:") && Contains("'training'"));
}

TEST_CASE("Positional encoding heatmap has one cell per table entry", "[plots][positional]") {
  // The sinusoidal table of the paper, computed here: PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(...).
  constexpr std::int64_t L = 6, D = 8;
  std::vector<double> pe(L * D);
  for (std::int64_t p = 0; p < L; ++p)
    for (std::int64_t i = 0; i < D / 2; ++i) {
      const double angle = static_cast<double>(p) / std::pow(10000.0, 2.0 * static_cast<double>(i) / D);
      pe[p * D + 2 * i] = std::sin(angle), pe[p * D + 2 * i + 1] = std::cos(angle);
    }
  const std::string svg = positional_encoding_svg(from_vector<double>(pe, {L, D}), "Sinusoidal <PE>");
  REQUIRE_WELL_FORMED(svg);
  CHECK(count_of(group(svg, "heatmap"), "<rect") == static_cast<std::size_t>(L * D));
  CHECK(svg.find("Sinusoidal &lt;PE&gt;") != std::string::npos);
  CHECK(svg.find(">embedding dimension</text>") != std::string::npos);
  CHECK(svg.find(">position</text>") != std::string::npos);

  // -1 is the darkest blue, 0 near white, +1 the darkest red, in that order.
  const std::string ends = positional_encoding_svg(from_vector<double>({-1, 0, 1}, {1, 3}), "ends");
  const auto cells = tags_with(group(ends, "heatmap"), "rect", "fill=");
  REQUIRE(cells.size() == 3);
  CHECK(attribute(cells[0], "fill") == diverging(-1).hex());
  CHECK(attribute(cells[1], "fill") == diverging(0).hex());
  CHECK(attribute(cells[2], "fill") == diverging(1).hex());

  // A table too large to draw whole is cut to its first 200 positions, and says so.
  const std::string big = positional_encoding_svg(zeros({300, 4}), "big");
  CHECK(count_of(group(big, "heatmap"), "<rect") == 200u * 4u);
  CHECK(big.find("showing positions 0-199") != std::string::npos);

  REQUIRE_THROWS_AS(positional_encoding_svg(zeros({4}), "t"), std::invalid_argument);
  REQUIRE_THROWS_WITH(positional_encoding_svg(zeros({4}), "t"), Contains("(L, D)") && Contains(shape_str({4})));
}

TEST_CASE("Line chart draws every finite point with escaped labels", "[plots][line]") {
  const std::vector<double> x = {1, 2, 3, 4, 5}, y = {0.1, 0.4, std::nan(""), 0.3, 0.2};
  const std::string svg = line_chart_svg(x, y, "Schedule <noam>", "step", "lr & more");
  REQUIRE_WELL_FORMED(svg);
  const auto points = polyline_points(svg, "series");
  CHECK(points.size() == 4);
  CHECK(points[1].second < points[0].second);  // 0.4 is drawn higher (smaller y) than 0.1
  CHECK(svg.find("Schedule &lt;noam&gt;") != std::string::npos);
  CHECK(svg.find(">lr &amp; more</text>") != std::string::npos);
  REQUIRE_THROWS_AS(line_chart_svg({1, 2}, {1}, "t", "x", "y"), std::invalid_argument);
  REQUIRE_THROWS_WITH(line_chart_svg({}, {}, "t", "x", "y"), Contains("same non-zero length"));
}

TEST_CASE("write_file_atomically replaces the file and leaves no temp file", "[plots][io]") {
  TempDir dir;
  const std::string path = (dir.path / "picture.svg").string();
  write_file_atomically(path, "first");
  write_file_atomically(path, "second, longer");
  CHECK(read_file(path) == "second, longer");
  CHECK_FALSE(fs::exists(path + ".tmp"));
  const std::string unreachable = (dir.path / "no_such_dir" / "picture.svg").string();
  REQUIRE_THROWS_AS(write_file_atomically(unreachable, "x"), std::runtime_error);
  REQUIRE_THROWS_WITH(write_file_atomically(unreachable, "x"), Contains(unreachable));
}

// ---- Chinese text: a font that fontconfig resolves covers it ----

namespace {

// The standard output of a shell command ("" if it cannot run).
std::string output_of(const std::string& command) {
  std::string out;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char buf[512];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

// The wide (CJK) code points of `text`, each once, as fontconfig's hex charset list "6211 7231 ...".
std::string cjk_charset(const std::string& text) {
  std::vector<char32_t> seen;
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    const int extra = b < 0x80 ? 0 : (b & 0xE0) == 0xC0 ? 1 : (b & 0xF0) == 0xE0 ? 2 : 3;
    char32_t cp = extra == 0 ? b : b & (0x3F >> extra);
    for (int k = 1; k <= extra && i + k < text.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    i += extra + 1;
    if (cp >= 0x2E80 && cp <= 0x9FFF && std::find(seen.begin(), seen.end(), cp) == seen.end()) seen.push_back(cp);
  }
  std::string list;
  for (char32_t cp : seen) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "%x", static_cast<unsigned>(cp));
    list += (list.empty() ? "" : " ") + std::string(hex);
  }
  return list;
}

// The families of the <svg> element's font-family attribute, in order, without the generic one.
std::vector<std::string> svg_font_families(const std::string& svg) {
  const std::size_t at = svg.find("font-family=\"");
  if (at == std::string::npos) return {};
  const std::string list = svg.substr(at + 13, svg.find('"', at + 13) - at - 13);
  std::vector<std::string> out;
  std::istringstream in(list);
  for (std::string f; std::getline(in, f, ',');) {
    f.erase(0, f.find_first_not_of(' '));
    if (!f.empty() && f != "sans-serif" && f != "serif" && f != "monospace") out.push_back(f);
  }
  return out;
}

}  // namespace

namespace {

// One font family of the picture's font-family list is installed and covers every Chinese
// character of `svg` (when fontconfig is there to ask; otherwise a warning says it was skipped).
void require_installed_font_covers(const std::string& svg) {
  const std::vector<std::string> families = svg_font_families(svg);
  const std::string charset = cjk_charset(svg);
  if (output_of("command -v fc-list").empty()) {
    WARN("SKIPPED: fontconfig's fc-list is not installed (Debian: apt-get install fontconfig), so which fonts "
         "cover Chinese cannot be checked");
    return;
  }
  // A viewer takes each character from the first listed family that has it: one installed family
  // must cover every Chinese character of the picture (fc-list's charset is "contains all of").
  std::string covering;
  for (const std::string& family : families) {
    const std::string found = output_of("fc-list --format='%{file}\\n' ':family=" + family + ":charset=" + charset + "'");
    if (!found.empty() && covering.empty()) covering = family + " (" + found.substr(0, found.find('\n')) + ")";
  }
  INFO("font-family list: " << svg.substr(svg.find("font-family="), 160) << "\nChinese code points: " << charset
                            << "\nfonts with Chinese here: " << output_of("fc-list ':lang=zh' family"));
  INFO("no listed family is an installed font covering them: install one, e.g. Debian's fonts-wqy-microhei "
       "(tools/install-deps.sh)");
  REQUIRE_FALSE(covering.empty());
  // and fontconfig's own choice for the list, asked for these characters, covers them too
  std::string pattern;
  for (const std::string& f : families) pattern += (pattern.empty() ? "" : ",") + f;
  const std::string chosen = output_of("fc-match --format='%{family}' '" + pattern + ":charset=" + charset + "'");
  const std::string chosen_family = chosen.substr(0, chosen.find(','));
  INFO("fc-match chose " << chosen);
  CHECK_FALSE(output_of("fc-list --format='%{file}\\n' ':family=" + chosen_family + ":charset=" + charset + "'").empty());
}

}  // namespace

TEST_CASE("A Chinese attention figure names a font family that covers its characters", "[plots][attention][fonts]") {
  const std::vector<std::string> zh = {"<s>", "我", "爱", "北京", "</s>"};
  const std::string svg = attention_heatmaps_svg({{"layer 1, head 1", zh, zh, attention_map(5, 5, true)}}, 1,
                                                 "自注意力 self-attention: \"我爱北京\"");
  REQUIRE_WELL_FORMED(svg);
  const std::vector<std::string> families = svg_font_families(svg);
  REQUIRE(count_of(cjk_charset(svg), " ") + 1 == 8);  // 我 爱 北 京 自 注 意 力
  REQUIRE(std::find(families.begin(), families.end(), "Noto Sans CJK SC") != families.end());
  require_installed_font_covers(svg);
}

// ----------------------------------------------------------------- the pictures in Chinese (lang.h)

TEST_CASE("Pictures in Chinese write their captions, axis labels, legends and notes in Chinese", "[plots][lang][curves]") {
  TempDir dir;
  const std::string path = dir.write("metrics.tsv", kHeader + row(100, "train", "9.5", "9.1", "0.0001", "") +
                                                        row(200, "valid", "7.5", "7", "", "3.25") +
                                                        row(300, "skipped", "inf", "", "", ""));
  const std::string en = training_curves_svg(path), zh = training_curves_svg(path, Lang::Zh);
  REQUIRE_WELL_FORMED(zh);
  CHECK(en == training_curves_svg(path, Lang::En));  // English is the default
  for (const char* label : {">训练曲线</text>", ">步</text>", ">损失（每词元 nats）</text>", ">学习率</text>", ">训练损失</text>",
                            ">验证 BLEU</text>", ">跳过的步</text>", ">记录的学习率</text>", "学习率峰值 0.0001，在第 100 步"})
    CHECK(zh.find(label) != std::string::npos);
  for (const char* label : {"Training curves", ">step</text>", ">train loss</text>", "peak lr"}) {
    CHECK(zh.find(label) == std::string::npos);
    CHECK(en.find(label) != std::string::npos);
  }
  // the same picture otherwise: the same curves at the same points
  CHECK(polyline_points(zh, "train-loss") == polyline_points(en, "train-loss"));
  CHECK(count_of(group(zh, "valid-loss"), "<circle") == count_of(group(en, "valid-loss"), "<circle"));
  require_installed_font_covers(zh);

  const std::vector<std::string> tokens = {"<s>", "▁我", "爱", "</s>"};
  const std::string maps = attention_heatmaps_svg({{"第 1 层第 1 个头", tokens, tokens, attention_map(4, 4, true)}}, 1, "自注意力", Lang::Zh);
  REQUIRE_WELL_FORMED(maps);
  CHECK_THAT(maps, Contains("行：查询（谁在看）") && Contains(">权重</text>") && Contains(">遮蔽</text>") &&
                       Contains("&lt;s&gt; → ▁我：遮蔽 (0)"));
  CHECK(maps.find(">masked<") == std::string::npos);  // the English legend
  CHECK(maps.find(": masked") == std::string::npos);  // and tooltip ("masked" stays in class names, which are the code's)
  const std::string pe = positional_encoding_svg(zeros({300, 4}), "PE", Lang::Zh);
  REQUIRE_WELL_FORMED(pe);
  CHECK_THAT(pe, Contains("表 (300, 4)：行 = 位置，列 = 嵌入维度；只画出位置 0-199") && Contains(">嵌入维度</text>"));
  const double nan = std::nan("");
  CHECK_THAT(line_chart_svg({1, 2}, {nan, nan}, "t", "x", "y", Lang::Zh), Contains("没有有限值的点"));
}
