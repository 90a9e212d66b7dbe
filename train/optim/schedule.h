// Learning-rate schedules: the learning rate as a function of the step (1-based).
//
//   noam      the paper's: lr = scale * D^-0.5 * min(step^-0.5, step * warmup^-1.5)
//             (rises linearly for `warmup` steps, then decays as 1/sqrt(step));
//             `scale` is the config's lr (1.0 in the paper, often 2.0)
//   cosine    linear warmup to `lr`, then cosine decay to `min_lr` at `max_steps`
//   constant  linear warmup to `lr`, then `lr`
#pragma once

#include <cstdint>
#include <string>

namespace sf::train {

enum class ScheduleKind { Noam, Cosine, Constant };
ScheduleKind parse_schedule(const std::string& name);  // "noam" | "cosine" | "constant"

struct Schedule {
  ScheduleKind kind = ScheduleKind::Noam;
  double lr = 1.0;             // peak lr (cosine/constant) or scale (noam)
  double min_lr = 0.0;         // cosine floor
  std::int64_t warmup = 4000;  // warmup steps
  std::int64_t max_steps = 100000;
  std::int64_t d_model = 256;  // noam's D^-0.5

  double at(std::int64_t step) const;  // step >= 1
};

}  // namespace sf::train
