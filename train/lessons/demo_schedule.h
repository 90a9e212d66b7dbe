// Demo `schedule`: the learning-rate schedules the trainer uses (train/optim/schedule.h), drawn
// from the same Schedule::at the training loop calls, on the default config's shape (D 256,
// warm-up 400 steps of 4000):
//   noam      lr = scale D^-0.5 min(s^-0.5, s w^-1.5): rises linearly to its peak at s = w, then
//             falls as 1/sqrt(s): four times as many steps, half the rate;
//   cosine    linear warm-up to lr, then half a cosine down to min_lr at max_steps;
//   constant  linear warm-up to lr, then lr.
// Warm-up exists because Adam's first steps, with its second-moment estimate still near zero,
// are large and noisy: a small rate keeps them from wrecking the fresh weights.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sf::lessons {

struct ScheduleCurve {
  std::string name;                // "noam", "cosine", "constant"
  std::vector<double> steps, lr;   // (step, Schedule::at(step)) for steps 1 .. max_steps
  std::int64_t peak_step = 0;      // where the rate is largest
  double peak = 0, last = 0;       // the largest rate and the rate at max_steps
};

struct ScheduleDemoResult {
  std::int64_t d_model = 256, warmup = 400, max_steps = 4000;
  double lr = 1e-3, min_lr = 1e-5, noam_scale = 2.0;
  std::vector<ScheduleCurve> curves;      // noam, cosine, constant
  double noam_quarter_ratio = 0;          // lr(4w) / lr(w): 0.5 for 1/sqrt(s)
  bool claim_holds = false;               // every peak at s = w, the noam ratio 0.5, cosine ends at min_lr
};

ScheduleDemoResult compute_schedule_demo();

}  // namespace sf::lessons
