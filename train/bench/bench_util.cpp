// The helpers the bench modes share: see bench_util.h.
#include "train/bench/bench_util.h"

#include <stdlib.h>

#include <cmath>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "autograd/runtime/blas_core.h"
#include "autograd/runtime/threads.h"
#include "train/eval/evaluate.h"

namespace sf::train::bench_util {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown";
}

double load_average_1min() {
  double load[1] = {NAN};
  return getloadavg(load, 1) == 1 ? load[0] : NAN;
}

nlohmann::ordered_json rounded(double x, int digits) {
  if (!std::isfinite(x)) return nullptr;
  const double scale = std::pow(10.0, digits);
  return std::round(x * scale) / scale;
}

std::string fixed(double x, int digits) {
  if (!std::isfinite(x)) return "-";
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << x;
  return os.str();
}

void print_machine(std::ostream& os, const std::string& mode, const Config& cfg, double load_start, double load_end) {
  os << "scratchformer bench" << mode << ": " << cfg.source_path << "\n"
     << "machine   " << cpu_model() << ", " << num_threads() << " threads, load average " << fixed(load_start, 2)
     << " at the start, " << fixed(load_end, 2) << " at the end\n"
     << "BLAS      " << blas_core_report() << "\n";
}

void print_row(std::ostream& os, const std::string& label, const std::string& value) {
  os << "  " << std::left << std::setw(44) << label << value << "\n";
}

void check_options_and_set_threads(const Config& cfg, const BenchOptions& opt) {
  if (opt.steps < 1) throw std::invalid_argument("bench: --steps must be >= 1, got " + std::to_string(opt.steps));
  if (opt.warmup < 0) throw std::invalid_argument("bench: --warmup must be >= 0, got " + std::to_string(opt.warmup));
  if (opt.threads < 0) throw std::invalid_argument("bench: --threads must be >= 0, got " + std::to_string(opt.threads));
  if (opt.decode_sentences < 0)
    throw std::invalid_argument("bench: --decode-sentences must be >= 0, got " + std::to_string(opt.decode_sentences));
  if (opt.decode_batch < 0)
    throw std::invalid_argument("bench: --decode-batch must be >= 0 (0 = translate's " +
                                std::to_string(kSentencesPerBatch) + "), got " + std::to_string(opt.decode_batch));
  if (opt.batch < 1 || opt.length < 1)
    throw std::invalid_argument("bench: batch and length must be >= 1, got " + std::to_string(opt.batch) + " and " +
                                std::to_string(opt.length));
  if (opt.threads > 0) set_num_threads(static_cast<int>(opt.threads));
  else if (cfg.run.threads > 0) set_num_threads(static_cast<int>(cfg.run.threads));
}

}  // namespace sf::train::bench_util
