// What the bench modes share (bench.cpp: the training step and --scaling; generation_bench.cpp:
// --generation): timing by the median, the machine's name and load, numbers for the table and
// the JSON line, and the option check that also sets the thread count.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "train/bench/bench.h"
#include "train/config.h"

namespace sf::train::bench_util {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The middle value (the mean of the two middle ones for an even count); v must not be empty.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median wall time in seconds of `runs` calls of f, after `warmup` untimed calls.
template <class F>
double median_seconds(F&& f, int warmup, int runs) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    const auto start = Clock::now();
    f();
    times.push_back(seconds_since(start));
  }
  return median(times);
}

// The first "model name" of /proc/cpuinfo, or "unknown".
std::string cpu_model();
// The 1-minute load average, or NaN.
double load_average_1min();

// x rounded to `digits` decimals, or null when not finite (JSON has no NaN).
nlohmann::ordered_json rounded(double x, int digits);
// x with `digits` decimals, or "-" when not finite.
std::string fixed(double x, int digits);

// A table's first lines: "scratchformer bench<mode>: <config>", the machine (CPU, threads, the
// load average before and after) and the BLAS kernel (blas_core.h).
void print_machine(std::ostream& os, const std::string& mode, const Config& cfg, double load_start, double load_end);
// "  label                                       value"
void print_row(std::ostream& os, const std::string& label, const std::string& value);

// Throws on an option out of range; then sets the thread count (--threads, else run.threads).
void check_options_and_set_threads(const Config& cfg, const BenchOptions& opt);

}  // namespace sf::train::bench_util
