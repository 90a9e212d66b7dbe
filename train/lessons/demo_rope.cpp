// Demo `rope`: see demo_rope.h for what is computed and how.
//
// Letters: T positions, Dh head width.
#include "train/lessons/demo_rope.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <numbers>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>

#include "autograd/generator.h"
#include "autograd/tensor.h"
#include "nn/relative_positions.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"

namespace sf::lessons {
namespace {

using Rows = std::vector<std::vector<double>>;  // (T, Dh) as rows

// v: (Dh) -> (T, Dh): row t is v rotated by apply_rope to position start + t.
Rows rotated_rows(const std::vector<double>& v, std::int64_t start, std::int64_t count, double base) {
  const std::int64_t dh = static_cast<std::int64_t>(v.size());
  std::vector<double> repeated;
  repeated.reserve(static_cast<std::size_t>(count * dh));
  for (std::int64_t t = 0; t < count; ++t) repeated.insert(repeated.end(), v.begin(), v.end());
  const Tensor x = from_vector(repeated, {1, 1, count, dh}, Dtype::Float64);  // (B=1,H=1,T,Dh)
  const std::vector<double> out = nn::apply_rope(x, start, base).to_vector<double>();
  Rows rows(static_cast<std::size_t>(count));
  for (std::int64_t t = 0; t < count; ++t) rows[t].assign(out.begin() + t * dh, out.begin() + (t + 1) * dh);
  return rows;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

std::vector<double> normal_vector(Generator& gen, std::int64_t n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& e : v) e = gen.normal();
  return v;
}

// The closed form of <R_i x, R_j y> for m = j - i (any sign): every pair contributes
// (x0 y0 + x1 y1) cos(m theta_k) + (x1 y0 - x0 y1) sin(m theta_k).
double closed_form_score(const std::vector<double>& x, const std::vector<double>& y, std::int64_t m, double base) {
  const std::size_t dh = x.size();
  double s = 0;
  for (std::size_t k = 0; k < dh / 2; ++k) {
    const double theta = std::pow(base, -2.0 * static_cast<double>(k) / static_cast<double>(dh));
    const double angle = static_cast<double>(m) * theta;
    const double x0 = x[2 * k], x1 = x[2 * k + 1], y0 = y[2 * k], y1 = y[2 * k + 1];
    s += (x0 * y0 + x1 * y1) * std::cos(angle) + (x1 * y0 - x0 * y1) * std::sin(angle);
  }
  return s;
}

// Part 1: every (i, j) with i, j in {0..63} u {1000..1063}, grouped by j - i.
void compare_offsets(const std::vector<double>& x, const std::vector<double>& y, RopeDemoResult& r) {
  const std::int64_t block = 64, far_start = 1000;
  std::vector<std::int64_t> positions;
  Rows rx = rotated_rows(x, 0, block, r.base), ry = rotated_rows(y, 0, block, r.base);
  const Rows rx_far = rotated_rows(x, far_start, block, r.base), ry_far = rotated_rows(y, far_start, block, r.base);
  rx.insert(rx.end(), rx_far.begin(), rx_far.end());
  ry.insert(ry.end(), ry_far.begin(), ry_far.end());
  for (std::int64_t p = 0; p < block; ++p) positions.push_back(p);
  for (std::int64_t p = 0; p < block; ++p) positions.push_back(far_start + p);

  struct Stats { std::int64_t count = 0; double first = 0, lo = 0, hi = 0; };
  std::map<std::int64_t, Stats> groups;  // j - i -> its scores
  for (std::size_t a = 0; a < positions.size(); ++a)
    for (std::size_t b = 0; b < positions.size(); ++b) {
      const std::int64_t m = positions[b] - positions[a];
      const double s = dot(rx[a], ry[b]);  // <R_i x, R_j y>
      r.max_closed_form_error = std::max(r.max_closed_form_error, std::abs(s - closed_form_score(x, y, m, r.base)));
      Stats& g = groups[m];
      if (g.count++ == 0) g.first = g.lo = g.hi = s;
      g.lo = std::min(g.lo, s);
      g.hi = std::max(g.hi, s);
      ++r.pairs;
    }
  r.offsets = static_cast<std::int64_t>(groups.size());
  r.across_offsets_min = r.across_offsets_max = groups.begin()->second.first;
  for (const auto& [m, g] : groups) {
    if (g.count >= 2) ++r.shared_offsets;
    r.max_spread = std::max(r.max_spread, g.hi - g.lo);
    r.across_offsets_min = std::min(r.across_offsets_min, g.first);
    r.across_offsets_max = std::max(r.across_offsets_max, g.first);
  }
  for (const std::int64_t m : {0, 1, -1, 7, 63, -63, 999, 1000, -1000}) {
    const Stats& g = groups.at(m);
    r.examples.push_back({m, g.count, g.first, g.hi - g.lo});
  }
}

// gap(m) for m = 0..max_distance: |R_m u - u| / |u|, how far the rotation by distance m moves u, read
// from apply_rope's output. u has (1, 0) on the pairs that take part and (0, 0) elsewhere, so
// gap(m)^2 = the mean over those pairs k of |e^(i m theta_k) - 1|^2 = 2 - 2 cos(m theta_k).
std::vector<double> gaps(const std::vector<double>& u, double base, std::int64_t max_distance) {
  const Rows turned = rotated_rows(u, 0, max_distance + 1, base);
  const double norm2 = dot(u, u);
  std::vector<double> g(turned.size());
  for (std::size_t m = 0; m < turned.size(); ++m) {
    double moved2 = 0;
    for (std::size_t i = 0; i < u.size(); ++i) moved2 += (turned[m][i] - u[i]) * (turned[m][i] - u[i]);
    g[m] = std::sqrt(moved2 / norm2);
  }
  return g;
}

// The far distance (kRopeFarFrom..max) whose gap is smallest: the closest return to distance 0.
std::int64_t closest_far_distance(const std::vector<double>& g) {
  std::int64_t best = kRopeFarFrom;
  for (std::int64_t m = kRopeFarFrom; m < static_cast<std::int64_t>(g.size()); ++m)
    if (g[m] < g[best]) best = m;
  return best;
}

// [m] = <x, R_m y> / (|x||y|), m = 0..max_distance (= <R_0 x, R_m y>, the score at distance m).
std::vector<double> scores_by_distance(const std::vector<double>& x, const std::vector<double>& y, double base,
                                       std::int64_t max_distance) {
  const Rows ry = rotated_rows(y, 0, max_distance + 1, base);
  const double norms = std::sqrt(dot(x, x) * dot(y, y));
  std::vector<double> s(ry.size());
  for (std::size_t m = 0; m < ry.size(); ++m) s[m] = dot(x, ry[m]) / norms;
  return s;
}

// max over m of |s(m) - s(m + period)|
double periodicity_difference(const std::vector<double>& s, std::int64_t period) {
  double worst = 0;
  for (std::size_t m = 0; m + period < s.size(); ++m) worst = std::max(worst, std::abs(s[m] - s[m + period]));
  return worst;
}

// Part 2: one frequency with period 2048 against all 32 frequencies of a Dh = 64 head.
void compare_collisions(Generator& gen, RopeDemoResult& r) {
  // One frequency: Dh = 4, base b with b^(-2/4) = 2 pi / period, i.e. b = (period / 2 pi)^2;
  // pair 0 (theta_0 = 1) is zero in x, y and u, so only pair 1 turns.
  const double one_base = std::pow(static_cast<double>(r.period) / (2 * std::numbers::pi), 2.0);
  std::vector<double> x1 = normal_vector(gen, 4), y1 = normal_vector(gen, 4);
  x1[0] = x1[1] = y1[0] = y1[1] = 0;
  r.one_frequency = scores_by_distance(x1, y1, one_base, r.max_distance);
  r.one_periodicity_error = periodicity_difference(r.one_frequency, r.period);
  const std::vector<double> g1 = gaps({0, 0, 1, 0}, one_base, r.max_distance);
  r.one.neighbour_gap = g1[1];
  r.one.closest_far = closest_far_distance(g1);
  r.one.closest_far_gap = g1[r.one.closest_far];
  r.one.gap_at_period = g1[r.period];

  const std::vector<double> x = normal_vector(gen, r.head_dim), y = normal_vector(gen, r.head_dim);
  r.all_frequencies = scores_by_distance(x, y, r.base, r.max_distance);
  r.all_periodicity_diff = periodicity_difference(r.all_frequencies, r.period);
  std::vector<double> u(static_cast<std::size_t>(r.head_dim), 0.0);
  for (std::int64_t k = 0; k < r.head_dim / 2; ++k) u[2 * k] = 1;
  const std::vector<double> g = gaps(u, r.base, r.max_distance);
  r.all.neighbour_gap = g[1];
  r.all.closest_far = closest_far_distance(g);
  r.all.closest_far_gap = g[r.all.closest_far];
  r.all.gap_at_period = g[r.period];
  const double slowest_theta = std::pow(r.base, -2.0 * static_cast<double>(r.head_dim / 2 - 1) / r.head_dim);
  r.slowest_period = 2 * std::numbers::pi / slowest_theta;
  r.fastest_period = 2 * std::numbers::pi;
}

}  // namespace

RopeDemoResult compute_rope_demo(std::uint64_t seed) {
  RopeDemoResult r;
  Generator gen(seed);
  const std::vector<double> x = normal_vector(gen, r.head_dim), y = normal_vector(gen, r.head_dim);
  compare_offsets(x, y, r);
  compare_collisions(gen, r);
  r.claim_holds = r.max_spread < kRopeSameOffsetTolerance && r.max_closed_form_error < kRopeSameOffsetTolerance &&
                  r.across_offsets_max - r.across_offsets_min > 1e6 * kRopeSameOffsetTolerance &&
                  r.one_periodicity_error < kRopeCollisionTolerance && r.one.gap_at_period < kRopeCollisionTolerance &&
                  r.one.closest_far_gap < r.one.neighbour_gap && r.all.closest_far_gap > r.all.neighbour_gap;
  return r;
}

namespace {

void print_rope(const RopeDemoResult& r, std::ostream& out) {
  out << "RoPE: the score depends only on the distance / 注意力分数只取决于相对距离\n"
      << "  x, y ~ N(0,1), float64, Dh " << r.head_dim << ", base " << static_cast<std::int64_t>(r.base)
      << "; apply_rope to positions {0..63} and {1000..1063}; score = <R_i x, R_j y>\n"
      << "  " << r.pairs << " (i, j) pairs, " << r.offsets << " offsets j - i (" << r.shared_offsets
      << " reached by 2+ pairs)\n"
      << "    offset   pairs      score   spread within the offset\n";
  for (const auto& g : r.examples)
    out << "  " << std::setw(8) << g.offset << std::setw(8) << g.count << std::setw(11) << std::fixed
        << std::setprecision(4) << g.value << "   " << sci(g.spread) << "\n";
  out << "  largest spread within an offset: " << sci(r.max_spread) << "  (tolerance " << sci(kRopeSameOffsetTolerance)
      << ")\n  largest difference from the closed form s(j - i): " << sci(r.max_closed_form_error)
      << "\n  scores across offsets range from " << std::fixed << std::setprecision(3) << r.across_offsets_min
      << " to " << r.across_offsets_max << ": the offset matters, the absolute positions do not\n\n";

  out << "Collisions: one frequency vs all frequencies / 单一频率会碰撞，全部频率不会\n"
      << "  score(m) = <x, R_m y> / (|x| |y|) for distances m = 0.." << r.max_distance
      << "; gap(m) = |R_m u - u| / |u|, u = (1,0,1,0,...): 0 means distance m looks exactly like 0\n"
      << "  one frequency, theta = 2 pi / " << r.period << " (apply_rope, Dh 4, base (" << r.period
      << "/2pi)^2, pair 0 zeroed):\n"
      << "    max |score(m) - score(m + " << r.period << ")| = " << sci(r.one_periodicity_error) << "\n"
      << "    gap(1) = " << sci(r.one.neighbour_gap) << "; closest far distance (" << kRopeFarFrom << ".."
      << r.max_distance << "): " << r.one.closest_far << ", gap " << sci(r.one.closest_far_gap) << "  -> a collision\n"
      << "  all " << r.head_dim / 2 << " frequencies of a Dh " << r.head_dim << " head (base "
      << static_cast<std::int64_t>(r.base) << "):\n"
      << "    max |score(m) - score(m + " << r.period << ")| = " << std::fixed << std::setprecision(3)
      << r.all_periodicity_diff << "; gap(" << r.period << ") = " << r.all.gap_at_period << "\n"
      << "    gap(1) = " << r.all.neighbour_gap << "; closest far distance (" << kRopeFarFrom << ".." << r.max_distance
      << "): " << r.all.closest_far << ", gap " << r.all.closest_far_gap
      << (r.all.closest_far_gap > r.all.neighbour_gap ? " > gap(1): no far distance passes for a near one\n"
                                                       : " <= gap(1): a near-collision\n")
      << "    periods of single pairs: fastest " << std::setprecision(3) << r.fastest_period << ", slowest "
      << std::setprecision(0) << r.slowest_period << " positions\n"
      << (r.claim_holds ? "claim holds / 结论成立\n" : "claim does NOT hold / 结论不成立\n");
}

// One panel: score against distance, with dashed lines at the marked distances.
void draw_score_panel(train::SvgWriter& svg, double top, const std::vector<double>& s, const std::string& title,
                      const std::vector<std::int64_t>& marks, const std::string& colour) {
  train::Axis ax{0, static_cast<double>(s.size() - 1), 512, {}};  // ticks every 512 positions
  for (double t = ax.lo; t <= ax.hi; t += ax.step) ax.ticks.push_back(t);
  const auto [lo, hi] = std::minmax_element(s.begin(), s.end());
  const train::Frame f{70, top, 800, 190, ax, train::make_axis(std::min(*lo, -0.1), std::max(*hi, 0.1), 4)};
  train::draw_frame(svg, f, "distance m = j - i", "score / (|x||y|)", title);
  std::vector<std::pair<double, double>> pts;
  for (std::size_t m = 0; m < s.size(); ++m) pts.emplace_back(f.px(static_cast<double>(m)), f.py(s[m]));
  svg.polyline(train::thin_points(pts), {.stroke = colour, .stroke_width = 1.2, .css_class = "score"});
  for (const std::int64_t m : marks) {
    svg.line(f.px(static_cast<double>(m)), f.y, f.px(static_cast<double>(m)), f.y + f.h,
             {.stroke = "#d62728", .stroke_width = 1, .dash = "4 3"});
    svg.circle(f.px(static_cast<double>(m)), f.py(s[m]), 3.5, {.fill = "#d62728"});
  }
}

void write_rope_svg(const RopeDemoResult& r, const std::string& path) {
  train::SvgWriter svg(900, 560);
  svg.text(20, 26, "RoPE score vs distance: one frequency repeats, all frequencies do not / 单频周期重复，多频不重复",
           {.size = train::kTitleFont, .bold = true});
  draw_score_panel(svg, 70, r.one_frequency,
                   "one frequency, theta = 2 pi / " + std::to_string(r.period) + ": score(m) = score(m + " +
                       std::to_string(r.period) + ")",
                   {0, r.period, 2 * r.period}, "#1f77b4");
  draw_score_panel(svg, 330, r.all_frequencies,
                   "all " + std::to_string(r.head_dim / 2) + " frequencies (Dh " + std::to_string(r.head_dim) +
                       ", base 10000); red: the closest far distance to 0, m = " + std::to_string(r.all.closest_far),
                   {0, r.all.closest_far}, "#2ca02c");
  train::write_file_atomically(path, svg.finish());
}

}  // namespace

int run_rope_demo(const DemoOptions& options, std::ostream& out) {
  const RopeDemoResult r = compute_rope_demo(options.seed);
  print_rope(r, out);
  const std::string path = demo_svg_path(options, "rope");
  write_rope_svg(r, path);
  out << "SVG written to / 图已写入: " << path << "\n";
  return r.claim_holds ? 0 : 1;
}

Json rope_report(const DemoOptions& options) {
  const RopeDemoResult r = compute_rope_demo(options.seed);
  std::vector<double> thetas;  // theta_k = base^(-2k / Dh), the angle pair k turns per position
  for (std::int64_t k = 0; k < r.head_dim / 2; ++k)
    thetas.push_back(std::pow(r.base, -2.0 * static_cast<double>(k) / static_cast<double>(r.head_dim)));
  std::vector<double> m, one, all;  // every 8th distance: enough points for the eye
  for (std::size_t i = 0; i < r.one_frequency.size(); i += 8)
    m.push_back(static_cast<double>(i)), one.push_back(r.one_frequency[i]), all.push_back(r.all_frequencies[i]);
  std::vector<std::vector<Json>> groups;
  for (const RopeDemoResult::Group& g : r.examples) groups.push_back({g.offset, g.count, g.value, g.spread});
  Json rotation = {{"kind", "rotation"},
                   {"title", bilingual("RoPE turns pair k of a query or key by p theta_k at position p (Dh 64, base 10000)",
                                       "RoPE 在位置 p 把第 k 对分量旋转 p theta_k（Dh 64，base 10000）")},
                   {"thetas", thetas},
                   {"positions", 128}};
  return {{"held", r.claim_holds},
          {"numbers", {number(bilingual("(i, j) pairs compared", "比较的 (i, j) 对数"), r.pairs),
                       number(bilingual("largest spread of <R_i x, R_j y> within one j - i", "同一 j - i 内 <R_i x, R_j y> 的最大差"), r.max_spread),
                       number(bilingual("largest difference from the closed form", "与闭式解的最大差"), r.max_closed_form_error),
                       number(bilingual("the slowest pair's period (positions)", "最慢一对的周期（位置数）"), r.slowest_period)}},
          {"figures", {std::move(rotation),
                       table_figure(bilingual("<R_i x, R_j y> grouped by j - i: one value per offset", "按 j - i 分组的 <R_i x, R_j y>：每个偏移只有一个值"),
                                    {bilingual("j - i", "j - i"), bilingual("pairs", "对数"), bilingual("score", "分数"),
                                     bilingual("spread in the group", "组内最大差")},
                                    groups),
                       lines_figure(bilingual("score against distance m: one frequency repeats after its period, 32 do not",
                                              "分数随距离 m 的变化：单一频率每个周期重复一次，32 个频率则不会"),
                                    {bilingual("distance m", "距离 m"), bilingual("<x, R_m y> / (|x| |y|)", "<x, R_m y> / (|x| |y|)")},
                                    {line_series(bilingual("one frequency (period 2048)", "单一频率（周期 2048）"), m, one),
                                     line_series(bilingual("all 32 frequencies", "全部 32 个频率"), m, all)},
                                    {{static_cast<double>(r.period), bilingual("period", "周期")}})}}};
}

}  // namespace sf::lessons
