// Demo `schedule` (demo_schedule.h): warm-up, then decay, from the trainer's own Schedule.
#include "train/lessons/demo_schedule.h"

#include <cmath>
#include <ostream>

#include "train/classroom/plots.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"
#include "train/optim/schedule.h"

namespace sf::lessons {

ScheduleDemoResult compute_schedule_demo() {
  ScheduleDemoResult r;
  for (const char* name : {"noam", "cosine", "constant"}) {
    const train::ScheduleKind kind = train::parse_schedule(name);
    const train::Schedule s{kind, kind == train::ScheduleKind::Noam ? r.noam_scale : r.lr, r.min_lr, r.warmup, r.max_steps, r.d_model};
    ScheduleCurve c;
    c.name = name;
    for (std::int64_t step = 1; step <= r.max_steps; step += (step < 2 * r.warmup ? 4 : 20)) {
      c.steps.push_back(static_cast<double>(step));
      c.lr.push_back(s.at(step));
    }
    c.steps.push_back(static_cast<double>(r.max_steps));
    c.lr.push_back(s.at(r.max_steps));
    c.peak_step = 1;
    for (std::int64_t step = 1; step <= r.max_steps; ++step)
      if (s.at(step) > s.at(c.peak_step)) c.peak_step = step;
    c.peak = s.at(c.peak_step), c.last = s.at(r.max_steps);
    if (kind == train::ScheduleKind::Noam) r.noam_quarter_ratio = s.at(4 * r.warmup) / s.at(r.warmup);
    r.curves.push_back(std::move(c));
  }
  r.claim_holds = std::abs(r.noam_quarter_ratio - 0.5) < 1e-12 && std::abs(r.curves[1].last - r.min_lr) < 1e-12;
  for (const ScheduleCurve& c : r.curves) r.claim_holds = r.claim_holds && c.peak_step == r.warmup;
  return r;
}

int run_schedule_demo(const DemoOptions& options, std::ostream& out) {
  check_demo_svg_path(demo_svg_path(options, "schedule"));
  const ScheduleDemoResult r = compute_schedule_demo();
  print_heading(out, "learning-rate schedules / 学习率调度");
  out << "D = " << r.d_model << ", warm-up w = " << r.warmup << ", max_steps = " << r.max_steps << " (train/optim/schedule.h)\n";
  for (const ScheduleCurve& c : r.curves)
    out << "  " << c.name << std::string(10 - c.name.size(), ' ') << "peak " << sci(c.peak) << " at step " << c.peak_step
        << ", at max_steps " << sci(c.last) << "\n";
  out << "noam: lr(4w) / lr(w) = " << fixed(r.noam_quarter_ratio, 6) << " (1/sqrt(s): four times the steps, half the rate)\n"
      << verdict(r.claim_holds) << "\n";
  std::vector<double> x, y;
  for (std::size_t i = 0; i < r.curves[0].steps.size(); ++i) x.push_back(r.curves[0].steps[i]), y.push_back(r.curves[0].lr[i]);
  save_demo_svg(options, "schedule", train::line_chart_svg(x, y, "demo schedule: noam (D 256, warm-up 400) / 学习率调度", "step", "lr"), out);
  return r.claim_holds ? 0 : 1;
}

Json schedule_report(const DemoOptions&) {
  const ScheduleDemoResult r = compute_schedule_demo();
  std::vector<Json> series;
  for (const ScheduleCurve& c : r.curves) series.push_back(line_series(c.name, c.steps, c.lr));
  std::vector<std::vector<Json>> rows;
  for (const ScheduleCurve& c : r.curves) rows.push_back({c.name, c.peak_step, c.peak, c.last});
  return {{"held", r.claim_holds},
          {"numbers", {number(bilingual("warm-up steps w", "预热步数 w"), r.warmup), number(bilingual("max_steps", "max_steps"), r.max_steps),
                       number(bilingual("noam: lr(4w) / lr(w)", "noam：lr(4w) / lr(w)"), r.noam_quarter_ratio)}},
          {"figures", {lines_figure(bilingual("the learning rate at every step", "每一步的学习率"),
                                    {bilingual("step", "步数"), bilingual("learning rate", "学习率")}, std::move(series),
                                    {{static_cast<double>(r.warmup), bilingual("end of warm-up", "预热结束")}}),
                       table_figure(bilingual("peaks and ends", "峰值与终点"),
                                    {bilingual("schedule", "调度"), bilingual("peak at step", "峰值所在步"), bilingual("peak", "峰值"),
                                     bilingual("at max_steps", "max_steps 处")},
                                    rows)}}};
}

}  // namespace sf::lessons
