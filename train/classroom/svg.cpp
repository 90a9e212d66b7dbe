// The SVG toolkit (svg.h): text escaping and measuring, colour maps, the writer, axes and frames.
//
// Text is UTF-8. lang.h's decoder (next_code_point) walks it one code point at a time, so that
// escaping can replace invalid bytes and measuring can tell wide (CJK) characters (is_wide) from
// the rest.
#include "train/classroom/svg.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "autograd/check.h"
#include "train/classroom/lang.h"

namespace sf::train {
namespace {

constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD, the Unicode replacement character

// ---- numbers ----

// A coordinate or size: at most two decimals, no trailing zeros ("12", "3.5", "-0.25").
std::string num(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s == "-0" ? "0" : s;
}

// A tick label for `v` on an axis whose ticks are `step` apart: as many decimals as the step
// needs ("0.25", "1500"), or scientific notation for very small steps or very large values
// ("2e-5", "1.5e7").
std::string tick_label(double v, double step) {
  if (std::abs(v) < step * 1e-6) return "0";
  char buf[48];
  int decimals = 0;  // the fewest that write the step exactly: 0.25 -> 2, 500 -> 0
  while (decimals < 6) {
    const double scaled = step * std::pow(10.0, decimals);
    if (std::abs(scaled - std::round(scaled)) < 1e-6 * scaled) break;
    ++decimals;
  }
  if (decimals > 4 || std::abs(v) >= 1e7) {
    std::snprintf(buf, sizeof buf, "%.3g", v);
    std::string s = buf;  // "2e-05" -> "2e-5", "1.5e+07" -> "1.5e7"
    for (const char* pat : {"e-0", "e+0", "e+"}) {
      const auto at = s.find(pat);
      if (at != std::string::npos) s.replace(at, std::strlen(pat), pat[1] == '-' ? "e-" : "e");
    }
    return s;
  }
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// ---- axes ----

// 1, 2 or 5 times a power of ten, the first such number >= x.
double nice_step(double x) {
  const double p = std::pow(10.0, std::floor(std::log10(x)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= x * (1 - 1e-9)) return m * p;
  return 10 * p;
}

const Paint kGrid{.stroke = "#e4e4e4"};
const Paint kFrameLine{.stroke = "#555555"};

// ---- colours ----

// Linear interpolation between equally spaced colour stops; f in [0, 1].
template <std::size_t N>
Rgb interpolate(const Rgb (&stops)[N], double f) {
  const double pos = std::clamp(f, 0.0, 1.0) * (N - 1);
  const std::size_t k = std::min<std::size_t>(static_cast<std::size_t>(pos), N - 2);
  const double u = pos - static_cast<double>(k);
  const auto mix = [u](int a, int b) { return static_cast<int>(std::lround(a + (b - a) * u)); };
  return {mix(stops[k].r, stops[k + 1].r), mix(stops[k].g, stops[k + 1].g), mix(stops[k].b, stops[k + 1].b)};
}

// ---- the writer ----

// The attributes every shape shares: fill, stroke, dash, class.
std::string paint_attrs(const Paint& p) {
  std::string a = " fill=\"" + xml_escape(p.fill) + "\"";
  if (p.stroke != "none") {
    a += " stroke=\"" + xml_escape(p.stroke) + "\"";
    if (p.stroke_width != 1) a += " stroke-width=\"" + num(p.stroke_width) + "\"";
    if (!p.dash.empty()) a += " stroke-dasharray=\"" + xml_escape(p.dash) + "\"";
  }
  if (!p.css_class.empty()) a += " class=\"" + xml_escape(p.css_class) + "\"";
  return a;
}

}  // namespace

// ---- text ----

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t start = i;
    char32_t cp;
    if (!next_code_point(text, i, cp)) {
      out += kReplacement;
      continue;
    }
    switch (cp) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if ((cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0xFFFE || cp == 0xFFFF) out += kReplacement;
        else out.append(text, start, i - start);
    }
  }
  return out;
}

double text_width(const std::string& label, double size) {
  double em = 0;
  for (std::size_t i = 0; i < label.size();) {
    char32_t cp;
    em += next_code_point(label, i, cp) && is_wide(cp) ? 1.0 : 0.6;
  }
  return em * size;
}

std::string cut_to_width(const std::string& label, double size, double max_width) {
  if (text_width(label, size) <= max_width) return label;
  const double budget = max_width - text_width("…", size);
  std::string out;
  double used = 0;
  for (std::size_t i = 0; i < label.size();) {
    const std::size_t start = i;
    char32_t cp;
    const bool ok = next_code_point(label, i, cp);
    const double w = size * (ok && is_wide(cp) ? 1.0 : 0.6);
    if (used + w > budget) break;
    used += w;
    out.append(label, start, i - start);
  }
  return out + "…";
}

std::string short_value(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// ---- colours ----

std::string Rgb::hex() const {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", r, g, b);
  return buf;
}

double Rgb::luminance() const {
  const auto linear = [](int c) {  // sRGB transfer function, undone
    const double s = c / 255.0;
    return s <= 0.04045 ? s / 12.92 : std::pow((s + 0.055) / 1.055, 2.4);
  };
  return 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b);
}

Rgb viridis(double t) {
  // matplotlib's viridis sampled at 0, 1/8, ..., 1 (R's viridisLite::viridis(9)).
  static const Rgb kStops[] = {{0x44, 0x01, 0x54}, {0x47, 0x2D, 0x7B}, {0x3B, 0x52, 0x8B},
                               {0x2C, 0x72, 0x8E}, {0x21, 0x90, 0x8C}, {0x27, 0xAD, 0x81},
                               {0x5D, 0xC8, 0x63}, {0xAA, 0xDC, 0x32}, {0xFD, 0xE7, 0x25}};
  return interpolate(kStops, std::isnan(t) ? 0 : t);
}

Rgb diverging(double t) {
  // ColorBrewer RdBu (11 classes), reversed: -1 dark blue, 0 near-white, +1 dark red.
  static const Rgb kStops[] = {{0x05, 0x30, 0x61}, {0x21, 0x66, 0xAC}, {0x43, 0x93, 0xC3}, {0x92, 0xC5, 0xDE},
                               {0xD1, 0xE5, 0xF0}, {0xF7, 0xF7, 0xF7}, {0xFD, 0xDB, 0xC7}, {0xF4, 0xA5, 0x82},
                               {0xD6, 0x60, 0x4D}, {0xB2, 0x18, 0x2B}, {0x67, 0x00, 0x1F}};
  return interpolate(kStops, std::isnan(t) ? 0.5 : (std::clamp(t, -1.0, 1.0) + 1) / 2);
}

// ---- SvgWriter ----

SvgWriter::SvgWriter(double width, double height) : width_(width), height_(height) {}

void SvgWriter::defs(const std::string& markup) { defs_ += markup + "\n"; }

void SvgWriter::rect(double x, double y, double w, double h, const Paint& paint, const std::string& tooltip) {
  body_ += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" + num(h) + "\"" +
           paint_attrs(paint);
  body_ += tooltip.empty() ? "/>\n" : "><title>" + xml_escape(tooltip) + "</title></rect>\n";
}

void SvgWriter::line(double x1, double y1, double x2, double y2, const Paint& paint) {
  body_ += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) + "\"" +
           paint_attrs(paint) + "/>\n";
}

void SvgWriter::polyline(const std::vector<std::pair<double, double>>& points, const Paint& paint) {
  body_ += "<polyline points=\"";
  for (std::size_t i = 0; i < points.size(); ++i) body_ += (i ? " " : "") + num(points[i].first) + "," + num(points[i].second);
  body_ += "\"" + paint_attrs(paint) + " stroke-linejoin=\"round\"/>\n";
}

void SvgWriter::circle(double cx, double cy, double r, const Paint& paint) {
  body_ += "<circle cx=\"" + num(cx) + "\" cy=\"" + num(cy) + "\" r=\"" + num(r) + "\"" + paint_attrs(paint) + "/>\n";
}

void SvgWriter::text(double x, double y, const std::string& label, const TextStyle& style) {
  body_ += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" font-size=\"" + num(style.size) + "\"";
  if (style.anchor != "start") body_ += " text-anchor=\"" + xml_escape(style.anchor) + "\"";
  if (style.rotate != 0) body_ += " transform=\"rotate(" + num(style.rotate) + " " + num(x) + " " + num(y) + ")\"";
  if (style.bold) body_ += " font-weight=\"bold\"";
  if (style.fill != "#222222") body_ += " fill=\"" + xml_escape(style.fill) + "\"";
  body_ += ">" + xml_escape(label) + "</text>\n";
}

void SvgWriter::begin_group(const std::string& css_class) {
  body_ += "<g class=\"" + xml_escape(css_class) + "\">\n";
  ++open_groups_;
}

void SvgWriter::end_group() {
  SF_CHECK(open_groups_ > 0, "SvgWriter::end_group: no group is open");
  body_ += "</g>\n";
  --open_groups_;
}

std::string SvgWriter::finish() const {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width_) + "\" height=\"" + num(height_) +
         "\" viewBox=\"0 0 " + num(width_) + " " + num(height_) + "\" font-family=\"" + kSvgFontFamily + "\" fill=\"#222222\">\n";
  if (!defs_.empty()) out += "<defs>\n" + defs_ + "</defs>\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  out += body_;
  for (int k = 0; k < open_groups_; ++k) out += "</g>\n";
  return out + "</svg>\n";
}

// ---- axes and frames ----

Axis make_axis(double lo, double hi, int target) {
  if (!(hi > lo)) {
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= pad, hi += pad;
  }
  Axis a;
  a.step = nice_step((hi - lo) / target);
  a.lo = std::floor(lo / a.step + 1e-9) * a.step;
  a.hi = std::ceil(hi / a.step - 1e-9) * a.step;
  for (double t = a.lo; t <= a.hi + a.step * 1e-6; t += a.step) a.ticks.push_back(std::abs(t) < a.step * 1e-9 ? 0 : t);
  return a;
}

void draw_frame(SvgWriter& svg, const Frame& f, const std::string& x_label, const std::string& y_label,
                const std::string& title, bool grid) {
  for (double t : f.ax.ticks) {
    const double x = f.px(t);
    if (grid) svg.line(x, f.y, x, f.y + f.h, kGrid);
    svg.line(x, f.y + f.h, x, f.y + f.h + 4, kFrameLine);
    svg.text(x, f.y + f.h + 6 + kTickFont, tick_label(t, f.ax.step), {.size = kTickFont, .anchor = "middle"});
  }
  double widest = 0;
  for (double t : f.ay.ticks) {
    const double y = f.py(t);
    const std::string label = tick_label(t, f.ay.step);
    widest = std::max(widest, text_width(label, kTickFont));
    if (grid) svg.line(f.x, y, f.x + f.w, y, kGrid);
    svg.line(f.x - 4, y, f.x, y, kFrameLine);
    svg.text(f.x - 7, y + 0.35 * kTickFont, label, {.size = kTickFont, .anchor = "end"});
  }
  svg.rect(f.x, f.y, f.w, f.h, kFrameLine);
  if (!x_label.empty())
    svg.text(f.x + f.w / 2, f.y + f.h + 10 + kTickFont + kLabelFont, x_label, {.size = kLabelFont, .anchor = "middle"});
  if (!y_label.empty()) {
    const double x = f.x - 12 - widest - 0.3 * kLabelFont;
    svg.text(x, f.y + f.h / 2, y_label, {.size = kLabelFont, .anchor = "middle", .rotate = -90});
  }
  if (!title.empty()) svg.text(f.x, f.y - 10, title, {.size = 13, .bold = true});
}

void colour_bar(SvgWriter& svg, double x, double y, double h, double lo, double hi, const std::vector<double>& ticks,
                const std::string& id, Rgb (*colour)(double)) {
  std::string stops;
  constexpr int kStops = 21;
  for (int k = 0; k < kStops; ++k) {
    const double f = static_cast<double>(k) / (kStops - 1);  // 0 at the top of the bar
    stops += "<stop offset=\"" + num(f) + "\" stop-color=\"" + colour(hi - f * (hi - lo)).hex() + "\"/>";
  }
  svg.defs("<linearGradient id=\"" + id + "\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"1\">" + stops + "</linearGradient>");
  constexpr double kBarWidth = 14;
  svg.rect(x, y, kBarWidth, h, {.fill = "url(#" + id + ")", .stroke = "#555555", .css_class = "colour-bar"});
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
  for (double t : ticks) {
    const double ty = y + (hi - t) / (hi - lo) * h;
    svg.line(x + kBarWidth, ty, x + kBarWidth + 4, ty, kFrameLine);
    svg.text(x + kBarWidth + 7, ty + 0.35 * kTickFont, tick_label(t, step), {.size = kTickFont});
  }
}

std::vector<std::pair<double, double>> thin_points(const std::vector<std::pair<double, double>>& pts) {
  constexpr std::size_t kMaxPoints = 2000;  // below this, every point is kept
  if (pts.size() <= kMaxPoints) return pts;
  std::vector<std::pair<double, double>> out;
  std::size_t begin = 0;
  while (begin < pts.size()) {
    const double column = std::floor(pts[begin].first * 2);
    std::size_t end = begin;
    std::size_t low = begin, high = begin;
    while (end < pts.size() && std::floor(pts[end].first * 2) == column) {
      if (pts[end].second < pts[low].second) low = end;
      if (pts[end].second > pts[high].second) high = end;
      ++end;
    }
    std::vector<std::size_t> keep = {begin, low, high, end - 1};
    std::sort(keep.begin(), keep.end());
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
    for (std::size_t k : keep) out.push_back(pts[k]);
    begin = end;
  }
  return out;
}

// ---- files ----

void write_file_atomically(const std::string& path, const std::string& text) {
  if (std::filesystem::is_directory(path))
    throw std::runtime_error(path + " is a directory; expected the path of the SVG file to write (e.g. " + path +
                             "/figure.svg)");
  const std::string tmp = path + ".tmp";
  const auto fail = [&](const std::string& what) {
    const std::string reason = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw std::runtime_error(path + ": " + what + ": " + reason);
  };
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw std::runtime_error(path + ": cannot create " + tmp + ": " + std::strerror(errno));
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0;
  const int saved_errno = errno;
  if (std::fclose(f) != 0 || !written) {
    if (!written) errno = saved_errno;
    fail("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename " + tmp + " to it");
}

void check_output_file(const std::string& path, const std::string& extension, const std::string& command) {
  if (std::filesystem::is_directory(path))
    throw std::invalid_argument(command + ": --out " + path + " is a directory; --out names one file (e.g. " +
                                (std::filesystem::path(path) / ("figure" + extension)).string() + ")");
  if (std::filesystem::path(path).extension() != extension)
    throw std::invalid_argument(command + ": --out " + path + " should end in " + extension + " (it is written as " +
                                extension.substr(1) + ")");
}

void make_output_dir(const std::string& dir, const std::string& command) {
  if (std::filesystem::exists(dir) && !std::filesystem::is_directory(dir))
    throw std::invalid_argument(command + ": --out-dir " + dir + " is a file; --out-dir names a directory to write into");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error(command + ": cannot create the output directory " + dir + ": " + ec.message());
}

}  // namespace sf::train
