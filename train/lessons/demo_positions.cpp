// Demo `positions` (demo_positions.h): the sinusoidal table at full width and PE_p . PE_q.
#include "train/lessons/demo_positions.h"

#include <algorithm>
#include <cmath>
#include <ostream>

#include "nn/positional.h"
#include "train/classroom/plots.h"
#include "train/lessons/demo.h"

namespace sf::lessons {

PositionsDemoResult compute_positions_demo(std::int64_t positions, std::int64_t d_model) {
  PositionsDemoResult r;
  r.positions = positions, r.d_model = d_model;
  const nn::SinusoidalPositional pe(positions, d_model);  // the module the models use
  r.table = matrix_rows(pe.table());                      // (P, D)
  for (std::int64_t m = 0; m < positions; ++m) {
    double s = 0;
    for (std::int64_t k = 0; k < d_model / 2; ++k)
      s += std::cos(static_cast<double>(m) * std::pow(10000.0, -2.0 * static_cast<double>(k) / static_cast<double>(d_model)));
    r.by_offset.push_back(s);
  }
  r.dots.assign(positions, std::vector<double>(positions));
  std::vector<double> lo(positions, 1e300), hi(positions, -1e300);
  r.largest_off_diagonal = -1e300;
  for (std::int64_t p = 0; p < positions; ++p)
    for (std::int64_t q = 0; q < positions; ++q) {
      double dot = 0;
      for (std::int64_t i = 0; i < d_model; ++i) dot += r.table[p][i] * r.table[q][i];
      r.dots[p][q] = dot;
      const std::int64_t m = std::abs(p - q);
      lo[m] = std::min(lo[m], dot), hi[m] = std::max(hi[m], dot);
      r.max_closed_form_error = std::max(r.max_closed_form_error, std::abs(dot - r.by_offset[m]));
      if (p != q) r.largest_off_diagonal = std::max(r.largest_off_diagonal, dot);
    }
  for (std::int64_t m = 0; m < positions; ++m) r.max_spread = std::max(r.max_spread, hi[m] - lo[m]);
  r.claim_holds = r.max_spread < kPositionsTolerance && r.max_closed_form_error < kPositionsTolerance &&
                  r.largest_off_diagonal < static_cast<double>(d_model) / 2 - kPositionsTolerance;
  return r;
}

int run_positions_demo(const DemoOptions& options, std::ostream& out) {
  check_demo_svg_path(demo_svg_path(options, "positions"));
  const PositionsDemoResult r = compute_positions_demo();
  print_heading(out, "sinusoidal positions / 正弦位置编码");
  out << "PE[p, 2k] = sin(p w_k), PE[p, 2k+1] = cos(p w_k), w_k = 10000^(-2k/D); P = " << r.positions
      << ", D = " << r.d_model << " (nn::SinusoidalPositional, float32)\n"
      << "PE_p . PE_q = sum_k cos((p - q) w_k): a function of the distance alone / 只取决于距离\n"
      << "  distance m   PE_p . PE_q (closed form)\n";
  for (std::int64_t m : {0, 1, 2, 4, 8, 16, 32, 63})
    if (m < r.positions) out << "  " << m << std::string(13 - std::to_string(m).size(), ' ') << fixed(r.by_offset[m], 4) << "\n";
  out << "max spread within one distance       = " << sci(r.max_spread) << "\n"
      << "max |dot - closed form|              = " << sci(r.max_closed_form_error) << "\n"
      << "largest dot at p != q                = " << fixed(r.largest_off_diagonal, 4) << "  (at p = q: D/2 = "
      << r.d_model / 2 << ")\n"
      << verdict(r.claim_holds) << "\n";
  const nn::SinusoidalPositional pe(r.positions, r.d_model);
  save_demo_svg(options, "positions",
                train::positional_encoding_svg(pe.table(), "demo positions: the sinusoidal table / 正弦位置编码表"), out);
  return r.claim_holds ? 0 : 1;
}

Json positions_report(const DemoOptions&) {
  const PositionsDemoResult r = compute_positions_demo();
  std::vector<std::string> pos, dims;
  for (std::int64_t p = 0; p < r.positions; ++p) pos.push_back(std::to_string(p));
  for (std::int64_t i = 0; i < r.d_model; ++i) dims.push_back(std::to_string(i));
  return {{"held", r.claim_holds},
          {"numbers", {number(bilingual("positions P", "位置数 P"), r.positions), number(bilingual("d_model", "d_model"), r.d_model),
                       number(bilingual("max spread of PE_p . PE_q within one distance", "同一距离内 PE_p . PE_q 的最大差"), r.max_spread),
                       number(bilingual("largest PE_p . PE_q at p != q (p = q: D/2)", "p != q 时 PE_p . PE_q 的最大值（p = q 时为 D/2）"),
                              r.largest_off_diagonal)}},
          {"figures", {heatmap_figure(bilingual("the table PE (positions down, all D dimensions across)", "位置编码表 PE（纵向为位置，横向为全部 D 个维度）"),
                                      pos, dims, r.table, true),
                       heatmap_figure(bilingual("PE_p . PE_q: constant along every diagonal", "PE_p . PE_q：每条对角线上都相等"), pos, pos, r.dots),
                       lines_figure(bilingual("PE_p . PE_q against the distance p - q (closed form)", "PE_p . PE_q 随距离 p - q 的变化（闭式解）"),
                                    {bilingual("distance m", "距离 m"), bilingual("sum_k cos(m w_k)", "sum_k cos(m w_k)")},
                                    {line_series(bilingual("dot product", "点积"), indices(r.by_offset.size()), r.by_offset)})}}};
}

}  // namespace sf::lessons
