#include "train/eval/sampling.h"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

namespace sf::train {

// "-1", "1.5", "0.001": a number as the user wrote it (std::to_string gives "-1.000000").
static std::string shortest(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

void check_sampling_options(const SamplingOptions& opt) {
  if (!(opt.temperature >= 0) || !std::isfinite(opt.temperature))
    throw std::invalid_argument("--temperature: expected a number >= 0 (0 = greedy), got " + shortest(opt.temperature));
  if (opt.top_k < 0) throw std::invalid_argument("--top-k: expected a whole number >= 1, got " + std::to_string(opt.top_k));
  if (!(opt.top_p > 0 && opt.top_p <= 1))
    throw std::invalid_argument("--top-p: expected a probability in (0, 1], got " + shortest(opt.top_p));
}

// The most likely allowed token (the first on ties).
static std::int64_t argmax_allowed(const std::vector<float>& logits, const std::vector<bool>& allowed) {
  std::int64_t best = -1;
  for (std::size_t v = 0; v < logits.size(); ++v)
    if (allowed[v] && (best < 0 || logits[v] > logits[static_cast<std::size_t>(best)])) best = static_cast<std::int64_t>(v);
  if (best < 0) throw std::invalid_argument("sample_token: no token is allowed");
  return best;
}

Candidates sampling_candidates(const std::vector<float>& logits, const std::vector<bool>& allowed, const SamplingOptions& opt) {
  check_sampling_options(opt);
  if (allowed.size() != logits.size())
    throw std::invalid_argument("sampling_candidates: " + std::to_string(logits.size()) + " logits but " +
                                std::to_string(allowed.size()) + " allowed flags");
  Candidates c;
  if (opt.temperature == 0 || opt.top_k == 1) {  // greedy: one candidate
    c.ids = {argmax_allowed(logits, allowed)};
    c.probs = {1.0};
    return c;
  }
  // softmax(logits / T) over the allowed tokens, in double, max subtracted
  double top = -std::numeric_limits<double>::infinity();
  for (std::size_t v = 0; v < logits.size(); ++v)
    if (allowed[v]) top = std::max(top, static_cast<double>(logits[v]) / opt.temperature);
  std::vector<std::pair<double, std::int64_t>> p;  // (unnormalised probability, id)
  for (std::size_t v = 0; v < logits.size(); ++v) {
    if (!allowed[v]) continue;
    const double e = std::exp(static_cast<double>(logits[v]) / opt.temperature - top);
    p.emplace_back(e, static_cast<std::int64_t>(v));
  }
  if (p.empty()) throw std::invalid_argument("sample_token: no token is allowed");
  // most likely first; ties by id, so the order (and a seeded draw) is the same everywhere
  std::sort(p.begin(), p.end(), [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  std::size_t keep = p.size();
  if (opt.top_k > 0) keep = std::min<std::size_t>(keep, static_cast<std::size_t>(opt.top_k));
  // top-p on what top-k kept (renormalised, as the usual order temperature, top-k, top-p does):
  // the smallest prefix whose mass reaches p (at least one token)
  double after_k = 0;
  for (std::size_t i = 0; i < keep; ++i) after_k += p[i].first;
  double mass = 0;
  for (std::size_t i = 0; i < keep; ++i) {
    mass += p[i].first / after_k;
    if (mass >= opt.top_p) {
      keep = i + 1;
      break;
    }
  }
  double kept = 0;
  for (std::size_t i = 0; i < keep; ++i) kept += p[i].first;
  for (std::size_t i = 0; i < keep; ++i) {
    c.ids.push_back(p[i].second);
    c.probs.push_back(p[i].first / kept);
  }
  return c;
}

std::int64_t sample_token(const std::vector<float>& logits, const std::vector<bool>& allowed, const SamplingOptions& opt,
                          Generator& gen) {
  const Candidates c = sampling_candidates(logits, allowed, opt);
  if (c.ids.size() == 1) return c.ids[0];
  const double u = gen.uniform();  // [0, 1)
  double cumulative = 0;
  for (std::size_t i = 0; i < c.ids.size(); ++i) {
    cumulative += c.probs[i];
    if (u < cumulative) return c.ids[i];
  }
  return c.ids.back();  // rounding: u just below 1
}

}  // namespace sf::train
