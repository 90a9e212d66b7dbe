#include "train/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace sf::train {

ScheduleKind parse_schedule(const std::string& name) {
  if (name == "noam") return ScheduleKind::Noam;
  if (name == "cosine") return ScheduleKind::Cosine;
  if (name == "constant") return ScheduleKind::Constant;
  throw std::invalid_argument("schedule: expected noam, cosine or constant, got '" + name + "'");
}

double Schedule::at(std::int64_t step) const {
  const double s = static_cast<double>(std::max<std::int64_t>(step, 1));
  const double w = static_cast<double>(std::max<std::int64_t>(warmup, 1));
  switch (kind) {
    case ScheduleKind::Noam:
      return lr * std::pow(static_cast<double>(d_model), -0.5) * std::min(std::pow(s, -0.5), s * std::pow(w, -1.5));
    case ScheduleKind::Constant:
      return warmup > 0 && s < w ? lr * s / w : lr;
    case ScheduleKind::Cosine: {
      if (warmup > 0 && s < w) return lr * s / w;
      const double span = static_cast<double>(std::max<std::int64_t>(max_steps - warmup, 1));
      const double progress = std::clamp((s - w) / span, 0.0, 1.0);
      return min_lr + 0.5 * (lr - min_lr) * (1 + std::cos(M_PI * progress));
    }
  }
  return lr;
}

}  // namespace sf::train
