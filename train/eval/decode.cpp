#include "train/eval/decode.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "autograd/exercise.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/runtime/packed_linear.h"
#include "autograd/runtime/threads.h"
#include "data/tokenizer.h"

namespace sf::train {

namespace {

constexpr std::int64_t kBos = data::kBosId;
constexpr std::int64_t kEos = data::kEosId;

// Number of non-pad tokens in each row of src (B,S).
std::vector<std::int64_t> source_lengths(const Tensor& src, std::int64_t pad) {
  const auto ids = src.to_vector<std::int64_t>();
  const std::int64_t B = src.size(0), S = src.size(1);
  std::vector<std::int64_t> lens(B, 0);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t s = 0; s < S; ++s) lens[b] += ids[b * S + s] != pad;
  return lens;
}

// Logits (rows, V) for the next token of every row. With the cache only the newest token is fed;
// without it the whole prefix is decoded again and the last position is kept.
Tensor next_logits(const nn::Model& model, nn::DecodeState& state, const std::vector<std::vector<std::int64_t>>& prefixes,
                   bool use_cache) {
  const std::int64_t rows = static_cast<std::int64_t>(prefixes.size());
  if (use_cache) {
    std::vector<std::int64_t> last(rows);
    for (std::int64_t r = 0; r < rows; ++r) last[r] = prefixes[r].back();
    return model.decode_step(from_vector<std::int64_t>(last, {rows, 1}), state);  // (rows, V)
  }
  const std::int64_t T = static_cast<std::int64_t>(prefixes[0].size());
  std::vector<std::int64_t> flat;
  for (const auto& p : prefixes) flat.insert(flat.end(), p.begin(), p.end());
  Tensor logits = model.decode_prefix(from_vector<std::int64_t>(flat, {rows, T}), state);  // (rows, T, V)
  return logits.narrow(1, T - 1, 1).squeeze(1).contiguous();                               // (rows, V)
}

// Tokens a translation may never contain: padding and BOS (the model could in principle give
// them some probability; generating them would be meaningless).
bool forbidden(std::int64_t id, std::int64_t pad) { return id == pad || id == kBos; }

// Most likely allowed token per row of logits (rows, V). (maybe_unused: in a handout whose
// greedy_decode is the exercise nothing calls it yet.)
[[maybe_unused]] std::vector<std::int64_t> argmax_rows(const Tensor& logits, std::int64_t pad) {
  const std::int64_t rows = logits.size(0), V = logits.size(1);
  const auto values = logits.to_vector<float>();
  std::vector<std::int64_t> best(rows, kEos);
  for (std::int64_t r = 0; r < rows; ++r) {
    float top = -std::numeric_limits<float>::infinity();
    for (std::int64_t v = 0; v < V; ++v)
      if (!forbidden(v, pad) && values[r * V + v] > top) top = values[r * V + v], best[r] = v;
  }
  return best;
}

}  // namespace

std::int64_t max_target_length(const nn::Model& model, std::int64_t src_len, const DecodeOptions& opt) {
  const auto n = static_cast<std::int64_t>(std::ceil(opt.max_len_a * static_cast<double>(src_len))) + opt.max_len_b;
  // the decoder input holds BOS plus the generated tokens, and must fit the position table
  return std::clamp<std::int64_t>(n, 1, model.config().max_len - 1);
}

// Each sentence's maximum output length (max_target_length of its source length, and no more
// than the positions left after what the state holds: a decoder-only prompt takes some);
// `longest` receives the largest, the number of decoding steps the batch may need.
static std::vector<std::int64_t> length_limits(const nn::Model& model, const Tensor& src, const nn::DecodeState& state,
                                               const DecodeOptions& opt, std::int64_t& longest) {
  const auto lens = source_lengths(src, model.config().pad_id);
  const std::int64_t room = std::max<std::int64_t>(1, model.config().max_len - 1 - state.length());
  std::vector<std::int64_t> limit(lens.size());
  longest = 0;
  for (std::size_t b = 0; b < lens.size(); ++b)
    longest = std::max(longest, limit[b] = std::min(room, max_target_length(model, lens[b], opt)));
  return limit;
}

// What each row's decoding continues: the encoder-decoder's BOS (first_tokens), or a decoder-only
// model's whole prompt (decode_prefix reads the whole sequence). Generated tokens follow it.
static std::vector<std::vector<std::int64_t>> start_prefixes(const nn::Model& model, const Tensor& src,
                                                             const nn::DecodeState& state) {
  const bool whole_prompt = model.config().arch == nn::Arch::DecoderOnly;
  const Tensor start = whole_prompt ? src : state.first_tokens();  // (B,L)
  const std::int64_t B = start.size(0), L = start.size(1);
  const auto ids = start.contiguous().to_vector<std::int64_t>();
  std::vector<std::vector<std::int64_t>> prefixes(B);
  for (std::int64_t b = 0; b < B; ++b) prefixes[b].assign(ids.begin() + b * L, ids.begin() + (b + 1) * L);
  return prefixes;
}

Tensor pad_batch(const std::vector<std::vector<std::int64_t>>& seqs, std::int64_t pad_id) {
  std::int64_t S = 1;
  for (const auto& s : seqs) S = std::max<std::int64_t>(S, static_cast<std::int64_t>(s.size()));
  const std::int64_t B = static_cast<std::int64_t>(seqs.size());
  std::vector<std::int64_t> flat(static_cast<std::size_t>(B * S), pad_id);
  for (std::int64_t b = 0; b < B; ++b) std::copy(seqs[b].begin(), seqs[b].end(), flat.begin() + b * S);
  return from_vector<std::int64_t>(flat, {B, S});
}

// The prefill: model.start_decoding(src), timed into opt.prefill_seconds when it is set.
static std::unique_ptr<nn::DecodeState> prefill(const nn::Model& model, const Tensor& src, const DecodeOptions& opt) {
  const auto start = std::chrono::steady_clock::now();
  auto state = model.start_decoding(src);
  if (opt.prefill_seconds)
    *opt.prefill_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return state;
}

// Decoding multiplies the same weights by a few rows at every step: Linear then uses copies of
// the weights packed once (autograd/runtime/packed_linear.h), those of the enclosing decoding
// (translate_batches) when there is one, else this decoding's own (DecodingPackedWeights).

// ---- greedy -------------------------------------------------------------------------------
std::vector<std::vector<std::int64_t>> greedy_decode(const nn::Model& model, const Tensor& src,
                                                     const DecodeOptions& opt) {
  NoGradGuard no_grad;
  DecodingPackedWeights packed_weights;
  const auto state = prefill(model, src, opt);  // the encoder reads the source once
  std::int64_t longest = 0;
  const auto limit = length_limits(model, src, *state, opt, longest);
  std::vector<std::vector<std::int64_t>> prefixes = start_prefixes(model, src, *state);
  // EXERCISE(greedy): at most `longest` steps; each step takes the most likely allowed next token of
  // every row (argmax_rows of next_logits: the logits (B,V) after each row's prefix) and appends it
  // to that row's prefix. A row is done at </s> (kEos, not part of its output) or when its output
  // holds limit[b] tokens; a done row keeps decoding with the batch but its output stays frozen.
  // Stop when every row is done. -> the B outputs, without BOS and </s>.
  // BEGIN SOLUTION
  const std::int64_t B = src.size(0), pad = model.config().pad_id;
  std::vector<std::vector<std::int64_t>> out(B);
  std::vector<bool> done(B, false);
  for (std::int64_t t = 0; t < longest; ++t) {
    const auto best = argmax_rows(next_logits(model, *state, prefixes, opt.use_cache), pad);  // (B)
    bool all_done = true;
    for (std::int64_t b = 0; b < B; ++b) {
      if (!done[b]) {  // a finished row keeps decoding with the batch, but its output is frozen
        if (best[b] == kEos) {
          done[b] = true;
        } else {
          out[b].push_back(best[b]);
          done[b] = static_cast<std::int64_t>(out[b].size()) >= limit[b];
        }
      }
      prefixes[b].push_back(best[b]);
      all_done = all_done && done[b];
    }
    if (all_done) break;
  }
  return out;
  // END SOLUTION
}

// ---- beam search ---------------------------------------------------------------------------
// Row b*K + k of every (B*K, ...) tensor is beam k of sentence b. At each step every alive beam
// is extended by every token; per sentence the 2K best extensions by total log-probability are
// considered in order: an EOS among the first K finishes a hypothesis (score normalised by
// length^alpha), other tokens fill the K beams of the next step. A sentence is done when it has K
// finished hypotheses or reaches its maximum length (then its alive beams finish as they are).

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// The search so far: B sentences of K beams each.
struct Beams {
  std::int64_t B, K;
  std::vector<std::vector<std::int64_t>> prefixes;  // B*K: BOS (or the prompt) + the tokens of each beam
  std::int64_t start;                               // the length of BOS or the prompt
  std::vector<double> scores;                       // B*K: total log-probability (-inf: no beam)
  std::vector<std::vector<BeamHypothesis>> finished;  // B: the hypotheses that ended
  std::vector<bool> done;                           // B
  // starts: each sentence's start_prefixes row (all of one length)
  Beams(const std::vector<std::vector<std::int64_t>>& starts, std::int64_t k)
      : B(static_cast<std::int64_t>(starts.size())), K(k), start(static_cast<std::int64_t>(starts[0].size())),
        scores(B * k, kNegInf), finished(B), done(B, false) {
    for (std::int64_t s = 0; s < B; ++s) {
      for (std::int64_t j = 0; j < K; ++j) prefixes.push_back(starts[s]);
      scores[s * K] = 0.0;  // step 0: only beam 0 is real
    }
  }
};

// What the next step's K beams of each sentence continue from: from_row (B*K) the row of the
// beam they extend, token (B*K) the token they add, scores (B*K) their new totals.
struct NextBeams {
  std::vector<std::int64_t> from_row, token;
  std::vector<double> scores;
};

// One extension of a beam: its total score, the row of the beam, the token it adds.
using Extension = std::tuple<double, std::int64_t, std::int64_t>;

// The `count` best extensions of sentence b's alive beams (every allowed token after each), best
// first; of equal scores the lower row, then the lower token, comes first. The candidates are
// read in that order (rows, then tokens, ascending) into a heap of the best so far whose top is
// the worst of them: a candidate enters only if it beats that, so of K x V candidates only a few
// do. (Sorting all K x V, as this did first, was most of beam search's own time.)
std::vector<Extension> best_extensions(const Beams& beams, std::int64_t b, const std::vector<float>& logp,
                                       std::int64_t V, std::int64_t pad, std::size_t count) {
  const auto better = [](const Extension& x, const Extension& y) {  // x before y
    if (std::get<0>(x) != std::get<0>(y)) return std::get<0>(x) > std::get<0>(y);
    return std::make_pair(std::get<1>(x), std::get<2>(x)) < std::make_pair(std::get<1>(y), std::get<2>(y));
  };
  std::vector<Extension> best;  // a heap under `better`: best.front() is the worst kept
  best.reserve(count + 1);
  for (std::int64_t row = b * beams.K; row < (b + 1) * beams.K; ++row) {
    if (beams.scores[row] == kNegInf) continue;
    const float* row_logp = logp.data() + row * V;
    for (std::int64_t v = 0; v < V; ++v) {
      if (forbidden(v, pad)) continue;
      const double total = beams.scores[row] + row_logp[v];
      // later candidates lose ties (higher row or token), so only a higher score gets in
      if (best.size() == count && !(total > std::get<0>(best.front()))) continue;
      best.emplace_back(total, row, v);
      std::push_heap(best.begin(), best.end(), better);
      if (best.size() > count) {
        std::pop_heap(best.begin(), best.end(), better);
        best.pop_back();
      }
    }
  }
  std::sort_heap(best.begin(), best.end(), better);  // best first
  return best;
}

// Step t of sentence b: picks its next K beams among the 2K best extensions (logp: (B*K, V)
// log-probabilities) and finishes hypotheses that end in EOS or run out of length (`length`
// tokens scored so far, EOS included; norm = length^alpha).
void extend_sentence(Beams& beams, NextBeams& next, std::int64_t b, const std::vector<float>& logp, std::int64_t V,
                     std::int64_t pad, std::int64_t length, double norm, bool out_of_length) {
  const std::int64_t K = beams.K;
  const std::vector<Extension> cand = best_extensions(beams, b, logp, V, pad, 2 * K);  // the best 2K, best first
  const std::size_t keep = cand.size();
  std::int64_t alive = 0;
  for (std::size_t i = 0; i < keep && alive < K; ++i) {
    const auto [total, row, v] = cand[i];
    if (v == kEos) {
      if (static_cast<std::int64_t>(i) < K)
        beams.finished[b].push_back(
            {{beams.prefixes[row].begin() + beams.start, beams.prefixes[row].end()}, total, length, total / norm});
      continue;
    }
    next.from_row[b * K + alive] = row, next.token[b * K + alive] = v, next.scores[b * K + alive] = total;
    ++alive;
  }
  if (out_of_length) {  // the alive beams finish as they are
    for (std::int64_t k = 0; k < alive; ++k) {
      const auto& prefix = beams.prefixes[next.from_row[b * K + k]];
      std::vector<std::int64_t> toks(prefix.begin() + beams.start, prefix.end());
      toks.push_back(next.token[b * K + k]);
      const double total = next.scores[b * K + k];
      beams.finished[b].push_back({std::move(toks), total, length, total / norm});
    }
  }
  beams.done[b] = out_of_length || static_cast<std::int64_t>(beams.finished[b].size()) >= K || alive == 0;
  if (beams.done[b])
    for (std::int64_t k = 0; k < K; ++k) next.scores[b * K + k] = kNegInf;
}

// Moves every beam to the row it continues from and appends its new token.
void advance(Beams& beams, NextBeams& next) {
  std::vector<std::vector<std::int64_t>> prefixes(beams.B * beams.K);
  for (std::int64_t r = 0; r < beams.B * beams.K; ++r) {
    prefixes[r] = beams.prefixes[next.from_row[r]];
    prefixes[r].push_back(next.token[r]);
  }
  beams.prefixes = std::move(prefixes);
  beams.scores = std::move(next.scores);
}

// Each sentence's finished hypotheses, best first (a stable sort: the first of equal scores
// stays first).
std::vector<std::vector<BeamHypothesis>> ranked_hypotheses(Beams& beams) {
  for (auto& hyps : beams.finished)
    std::stable_sort(hyps.begin(), hyps.end(), [](const auto& x, const auto& y) { return x.score > y.score; });
  return std::move(beams.finished);
}

}  // namespace

std::vector<std::vector<BeamHypothesis>> beam_search_hypotheses(const nn::Model& model, const Tensor& src,
                                                                const DecodeOptions& opt) {
  NoGradGuard no_grad;
  DecodingPackedWeights packed_weights;
  const std::int64_t B = src.size(0), K = opt.beam, pad = model.config().pad_id;
  if (K < 1) throw std::invalid_argument("beam_search: beam must be >= 1, got " + std::to_string(K));
  const auto state = prefill(model, src, opt);  // the encoder reads the source once
  std::int64_t longest = 0;
  const auto limit = length_limits(model, src, *state, opt, longest);
  Beams beams(start_prefixes(model, src, *state), K);
  state->repeat_rows(K);                          // K beams per sentence: rows (B*K, ...)
  for (std::int64_t t = 0; t < longest; ++t) {
    Tensor logits = next_logits(model, *state, beams.prefixes, opt.use_cache);  // (B*K, V)
    const std::int64_t V = logits.size(1);
    const auto logp = log_softmax(logits, -1).to_vector<float>();
    const double norm = std::pow(static_cast<double>(t + 1), opt.length_penalty);  // tokens incl. EOS
    NextBeams next{std::vector<std::int64_t>(B * K), std::vector<std::int64_t>(B * K, kEos),
                   std::vector<double>(B * K, kNegInf)};
    for (std::int64_t r = 0; r < B * K; ++r) next.from_row[r] = r;  // a finished sentence's rows stay
    for (std::int64_t b = 0; b < B; ++b)
      if (!beams.done[b]) extend_sentence(beams, next, b, logp, V, pad, t + 1, norm, t + 1 >= limit[b]);
    if (std::all_of(beams.done.begin(), beams.done.end(), [](bool d) { return d; })) break;
    const Tensor from_row = from_vector<std::int64_t>(next.from_row, {B * K});
    advance(beams, next);
    if (opt.use_cache) state->reorder(from_row);
  }
  return ranked_hypotheses(beams);
}

std::vector<std::vector<std::int64_t>> beam_search(const nn::Model& model, const Tensor& src,
                                                   const DecodeOptions& opt) {
  std::vector<std::vector<std::int64_t>> best;
  for (auto& hyps : beam_search_hypotheses(model, src, opt))
    best.push_back(hyps.empty() ? std::vector<std::int64_t>{} : std::move(hyps.front().tokens));
  return best;
}

std::vector<std::vector<std::int64_t>> translate_batch(const nn::Model& model, const Tensor& src,
                                                       const DecodeOptions& opt) {
  return opt.beam <= 1 ? greedy_decode(model, src, opt) : beam_search(model, src, opt);
}

std::vector<std::vector<std::vector<std::int64_t>>> translate_batches(const nn::Model& model,
                                                                      const std::vector<Tensor>& batches,
                                                                      const DecodeOptions& opt,
                                                                      std::vector<double>* batch_seconds) {
  const std::size_t n = batches.size();
  std::vector<std::vector<std::vector<std::int64_t>>> out(n);
  std::vector<double> prefill(n, 0.0), seconds(n, 0.0);
  std::vector<std::exception_ptr> errors(n);  // an exception may not leave an OpenMP loop
  const int threads = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(num_threads()), n));
  DecodingPackedWeights decoding_weights;  // packed once for all the batches; each batch's thread uses them
  PackedWeights& packed_weights = decoding_weights.weights();
  auto decode_one = [&](std::size_t i) {
    try {
      PackedWeightsScope use_packed(packed_weights);
      DecodeOptions own = opt;  // each batch adds its prefill time to its own counter
      own.prefill_seconds = &prefill[i];
      const auto start = std::chrono::steady_clock::now();
      out[i] = translate_batch(model, batches[i], own);
      seconds[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  if (threads <= 1) {
    // No parallel region at all, not even an inactive one: the kernels' own parallel loops inside
    // one are nested teams, and libgomp starts a fresh thread for each nested team instead of
    // reusing its pool: every small kernel would pay a thread start, and a batch would decode
    // several times slower.
    for (std::size_t i = 0; i < n; ++i) decode_one(i);
  } else {
    // schedule(dynamic, 1): a thread that finishes a batch takes the next one (batches differ in length)
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (std::size_t i = 0; i < n; ++i) decode_one(i);
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  if (opt.prefill_seconds)
    for (double p : prefill) *opt.prefill_seconds += p;
  if (batch_seconds) *batch_seconds = seconds;
  return out;
}

}  // namespace sf::train
