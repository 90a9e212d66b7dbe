#include "train/run_log.h"

#include <unistd.h>

#include <iomanip>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "train/distributed/distributed.h"

namespace sf::train {

namespace fs = std::filesystem;

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(seconds + 0.5);
  std::ostringstream os;
  if (s >= 3600) os << s / 3600 << "h" << std::setw(2) << std::setfill('0') << (s % 3600) / 60 << "m";
  else if (s >= 60) os << s / 60 << "m" << std::setw(2) << std::setfill('0') << s % 60 << "s";
  else os << s << "s";
  return os.str();
}

std::ofstream open_table_for_append(const fs::path& path, const char* header) {
  const bool fresh = !fs::exists(path) || fs::file_size(path) == 0;
  std::ofstream out(path, std::ios::app);
  if (!out) throw std::runtime_error("cannot open " + path.string() + " for writing");
  if (fresh) out << header << "\n";
  out.flush();
  return out;
}

MetricsFile::MetricsFile(const fs::path& path, bool enabled) {
  if (enabled) out_ = open_table_for_append(path, kHeader);
}

void MetricsFile::row(std::int64_t step, std::int64_t epoch, const char* kind, double loss, double nll, double lr,
                      double tokens_per_s, double grad_norm, double bleu, double elapsed, double allreduce_share,
                      double accuracy) {
  if (!out_.is_open()) return;
  auto num = [](double v) {
    if (std::isnan(v)) return std::string("");
    std::ostringstream os;
    os << std::setprecision(6) << v;
    return os.str();
  };
  out_ << step << "\t" << epoch << "\t" << kind << "\t" << num(loss) << "\t" << num(nll) << "\t"
       << num(std::isnan(nll) ? NAN : std::exp(nll)) << "\t" << num(lr) << "\t" << num(tokens_per_s) << "\t"
       << num(grad_norm) << "\t" << num(bleu) << "\t" << num(elapsed) << "\t" << num(allreduce_share) << "\t"
       << num(accuracy) << "\n";
  out_.flush();
}

Progress::Progress() : tty_(isatty(STDOUT_FILENO)) {}

Progress Progress::silent() {
  Progress p;
  p.tty_ = false;
  p.silent_ = true;
  return p;
}

void Progress::bar(const std::string& line) {
  if (!tty_ || !is_main()) return;  // in data-parallel training only rank 0 prints
  std::cout << "\r\033[K" << line << std::flush;
  open_ = true;
}

void Progress::line(const std::string& text) {
  if (silent_ || !is_main()) return;
  if (open_) std::cout << "\r\033[K";
  std::cout << text << "\n" << std::flush;
  open_ = false;
}

}  // namespace sf::train
