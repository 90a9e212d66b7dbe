// The gradcheck entries of the exercises that gradcheck_suite.cpp does not have already:
// scaled_dot_product, masks, sinusoidal, rope, kv_cache, greedy (autograd/exercise.h lists them
// all; matmul linear relu embedding multi_head layer_norm softmax cross_entropy are entries of
// the suite itself). `scratchformer gradcheck --module masks` runs one.
//
// Where an exercise has a gradient (scaled_dot_product, rope) its entry runs sf::gradcheck in
// float64 as the suite does. Every entry also checks VALUES, since a wrong forward can have a
// perfectly consistent gradient: a value check is a GradcheckCase whose one "input" is the output
// compared, with max abs/rel error against the expected values and, on a failure, a message
// naming the worst element, expected against got. The expected values never repeat the solution:
// they are numbers worked out by hand (written as literals, with how), properties (rows sum to 1,
// sin^2 + cos^2 = 1, a rotation keeps dot products of equal distance), or another path of the
// framework (tiled attention, beam search with beam 1, decoding without the cache).
//
// In a handout whose exercise is not written yet the entry throws the exercise's message
// ("exercise: implement causal_mask (exercise masks) in nn/attention.cpp; ..."), which the
// gradcheck table shows as a FAIL row with that message (run_gradcheck_table catches it).
//
// Letters: B batch, H heads, Hkv key/value heads, Tq query length, Tk key length, Dh head width,
// D model width, L table length, V vocabulary.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "data/tokenizer.h"
#include "nn/attention.h"
#include "nn/positional.h"
#include "nn/relative_positions.h"
#include "nn/seq2seq.h"
#include "train/classroom/gradcheck_suite.h"
#include "train/classroom/peaked_model.h"
#include "train/eval/decode.h"

namespace sf::train {

namespace {

// ---- value checks as GradcheckCases ------------------------------------------------------------

// Exact comparisons: masks, token ids (0/1 and integers are exact in float64).
constexpr double kExact = 0.0;
// Float64 values of the same math through another sum order (tiled against plain attention, a
// rotation against its literal): rounding ~1e-16 relative per operation, a few dozen operations.
constexpr double kFloat64Tol = 1e-12;
// Literals worked out by hand are written with 10 decimals (error <= 5e-11).
constexpr double kLiteralTol = 1e-9;

// "(1, 2)": an element's index for the messages.
std::string index_str(const Shape& index) {
  std::string s = "(";
  for (std::size_t i = 0; i < index.size(); ++i) s += (i ? ", " : "") + std::to_string(index[i]);
  return s + ")";
}

// The multi-index of flat element `flat` of `shape` (row-major).
Shape unflatten(std::int64_t flat, const Shape& shape) {
  Shape index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] == 0 ? 0 : flat % shape[d];
    flat = shape[d] == 0 ? 0 : flat / shape[d];
  }
  return index;
}

// One value check: `got` against `expected` element by element (both read as float64), passing
// where |got - expected| <= atol + rtol * |expected|. `name` is the row's "input" column.
GradcheckCase value_case(const std::string& variant, const std::string& name, const Tensor& got,
                         const Tensor& expected, double atol, double rtol) {
  GradcheckCase c;
  c.variant = variant;
  c.input_names = {name};
  c.input_shapes = {got.shape()};
  GradcheckInputReport r;
  r.name = name;
  if (got.shape() != expected.shape()) {
    r.ok = false;
    r.max_abs_error = r.max_rel_error = std::numeric_limits<double>::infinity();
    c.result.message = name + ": expected shape " + shape_str(expected.shape()) + ", got " + shape_str(got.shape());
  } else {
    const auto g = got.to(Dtype::Float64).contiguous().to_vector<double>();
    const auto e = expected.to(Dtype::Float64).contiguous().to_vector<double>();
    double worst_excess = -1;  // how far beyond its tolerance the worst element is
    for (std::size_t i = 0; i < g.size(); ++i) {
      const double diff = std::abs(g[i] - e[i]);
      const double tol = atol + rtol * std::abs(e[i]);
      const double excess = std::isnan(diff) ? std::numeric_limits<double>::infinity() : diff - tol;
      r.max_abs_error = std::max(r.max_abs_error, std::isnan(diff) ? excess : diff);
      r.max_rel_error = std::max(r.max_rel_error, (std::isnan(diff) ? excess : diff) / std::max(std::abs(e[i]), 1e-300));
      if (excess > worst_excess) {
        worst_excess = excess;
        r.worst_index = unflatten(static_cast<std::int64_t>(i), got.shape());
        r.numeric_at_worst = e[i];
        r.analytic_at_worst = g[i];
      }
      if (!(diff <= tol)) r.ok = false;
    }
    if (!r.ok) {
      std::ostringstream m;
      m.precision(10);
      m << name << ": at " << index_str(r.worst_index) << " expected " << r.numeric_at_worst << ", got "
        << r.analytic_at_worst << " (tolerance " << atol << " + " << rtol << " * |expected|)";
      c.result.message = m.str();
    }
  }
  c.result.ok = r.ok;
  c.result.inputs = {r};
  return c;
}

// A check that is a yes/no fact (a length, a dtype): one row, error 0 or 1, `message` when it fails.
GradcheckCase fact_case(const std::string& variant, const std::string& name, bool holds, const std::string& message) {
  GradcheckCase c = value_case(variant, name, scalar_tensor(holds ? 1.0 : 0.0, Dtype::Float64),
                               scalar_tensor(1.0, Dtype::Float64), kExact, kExact);
  if (!holds) c.result.message = name + ": " + message;
  return c;
}

GradcheckCase gradient_case(const std::string& variant, const GradcheckFn& f, const std::vector<std::string>& names,
                            const std::vector<Tensor>& inputs, const GradcheckOptions& o) {
  GradcheckCase c;
  c.variant = variant;
  c.input_names = names;
  for (const Tensor& t : inputs) c.input_shapes.push_back(t.shape());
  c.result = gradcheck(f, inputs, o);
  return c;
}

Tensor grad_input(const Shape& shape, Generator& gen) {
  Tensor t = randn(shape, gen, Dtype::Float64);
  t.requires_grad_();
  return t;
}

Tensor literal(const std::vector<double>& values, const Shape& shape) {
  return from_vector(values, shape, Dtype::Float64);
}

// A (Tq,Tk) bool mask written out row by row, 1 = blocked.
Tensor bool_literal(const std::vector<int>& blocked, const Shape& shape) {
  std::vector<bool> b(blocked.begin(), blocked.end());
  return from_vector<bool>(b, shape);
}

// ---- scaled_dot_product ---------------------------------------------------------------------------

// q: (2,2,3,4), k, v: (2,2,4,4) float64, a (3,4) mask written out (row 2 blocks every key but one)
// and a (2,3,4) bias per head: the output against tiled_attention (the online-softmax kernel of
// autograd/ops_attention.cpp, another path to the same numbers), the weights' rows summing to 1,
// and the float64 gradient with respect to q, k and v.
std::vector<GradcheckCase> check_scaled_dot_product(const GradcheckOptions& o) {
  Generator gen(71);
  const Tensor q = grad_input({2, 2, 3, 4}, gen), k = grad_input({2, 2, 4, 4}, gen), v = grad_input({2, 2, 4, 4}, gen);
  const Tensor bias = randn({2, 3, 4}, gen, Dtype::Float64);                   // (H,Tq,Tk)
  const Tensor mask = bool_literal({0, 1, 0, 1, 0, 0, 0, 1, 1, 1, 0, 1}, {3, 4});  // (Tq,Tk)
  std::vector<GradcheckCase> cases;
  {
    NoGradGuard no_grad;
    Tensor weights;
    const Tensor got = nn::scaled_dot_product_attention(q, k, v, mask, bias, &weights);  // (B,H,Tq,Dh)
    const Tensor expected = tiled_attention(q, k, v, mask, bias, 1.0 / std::sqrt(4.0));
    cases.push_back(value_case("values against tiled_attention", "output", got, expected, kFloat64Tol, kFloat64Tol));
    cases.push_back(value_case("weights sum to 1 over the keys", "weights", sum(weights, {-1}),
                               ones({2, 2, 3}, Dtype::Float64), kFloat64Tol, 0.0));
  }
  cases.push_back(gradient_case(
      "gradient, mask and bias",
      [&](const std::vector<Tensor>& t) { return nn::scaled_dot_product_attention(t[0], t[1], t[2], mask, bias); },
      {"q", "k", "v"}, {q, k, v}, o));
  return cases;
}

// ---- masks -----------------------------------------------------------------------------------

// Small masks written out by hand (1 = blocked): causal (3,3) is the strict upper triangle; with
// q_start 2 the two queries sit at positions 2 and 3 and block keys 3, 4 and key 4; the padding
// mask of ids [[5,3,0,0],[7,0,1,0]] (pad 0) blocks where the id is 0, shaped (B,1,1,S).
std::vector<GradcheckCase> check_masks(const GradcheckOptions&) {
  NoGradGuard no_grad;
  std::vector<GradcheckCase> cases;
  const Tensor causal = nn::causal_mask(3, 3);
  cases.push_back(value_case("causal_mask(3, 3)", "mask", causal, bool_literal({0, 1, 1, 0, 0, 1, 0, 0, 0}, {3, 3}),
                             kExact, kExact));
  const Tensor cached = nn::causal_mask(2, 5, 2);
  cases.push_back(value_case("causal_mask(2, 5, q_start 2)", "mask", cached,
                             bool_literal({0, 0, 0, 1, 1, 0, 0, 0, 0, 1}, {2, 5}), kExact, kExact));
  const Tensor ids = from_vector<std::int64_t>({5, 3, 0, 0, 7, 0, 1, 0}, {2, 4});
  const Tensor padding = nn::padding_mask(ids, 0);
  cases.push_back(value_case("padding_mask, pad 0", "mask", padding,
                             bool_literal({0, 0, 1, 1, 0, 1, 0, 1}, {2, 1, 1, 4}), kExact, kExact));
  const bool all_bool = causal.dtype() == Dtype::Bool && cached.dtype() == Dtype::Bool && padding.dtype() == Dtype::Bool;
  cases.push_back(fact_case("dtype", "masks are bool", all_bool, "expected bool masks (TRUE = BLOCKED)"));
  return cases;
}

// ---- sinusoidal ------------------------------------------------------------------------------------

// The (3,4) table against values worked out by hand (angles pos / 10000^(2i/4): pos and pos / 100;
// sin and cos from python's math module, 10 decimals), and in a (64,16) table every pair (2i, 2i+1) on the
// unit circle: sin^2 + cos^2 = 1.
std::vector<GradcheckCase> check_sinusoidal(const GradcheckOptions&) {
  NoGradGuard no_grad;
  std::vector<GradcheckCase> cases;
  const nn::SinusoidalPositional small(3, 4, Dtype::Float64);
  const Tensor expected = literal({0, 1, 0, 1,                                             // pos 0
                                   0.8414709848, 0.5403023059, 0.0099998333, 0.9999500004,  // sin 1, cos 1, sin .01, cos .01
                                   0.9092974268, -0.4161468365, 0.0199986667, 0.9998000067},  // pos 2
                                  {3, 4});
  cases.push_back(value_case("table (3, 4) against hand-computed values", "table", small.table(), expected,
                             kLiteralTol, 0.0));
  const nn::SinusoidalPositional big(64, 16, Dtype::Float64);
  const Tensor pairs = reshape(big.table(), {64, 8, 2});
  const Tensor even = narrow(pairs, -1, 0, 1), odd = narrow(pairs, -1, 1, 1);
  cases.push_back(value_case("table (64, 16): sin^2 + cos^2 = 1 per pair", "table", add(mul(even, even), mul(odd, odd)),
                             ones({64, 8, 1}, Dtype::Float64), kFloat64Tol, 0.0));
  return cases;
}

// ---- rope -----------------------------------------------------------------------------------------

// Dot product of the last dims: (..., Dh) x (..., Dh) -> (...).
Tensor dot_last(const Tensor& a, const Tensor& b) { return sum(mul(a, b), {-1}); }

// By hand: x = (1, 2, 3, 4) at position 1 (Dh 4: pair 0 turns by 1 rad, pair 1 by 1/100 rad):
//   (cos 1 - 2 sin 1, sin 1 + 2 cos 1, 3 cos .01 - 4 sin .01, 3 sin .01 + 4 cos .01), evaluated
//   with python's math module to 10 decimals;
// then the property RoPE exists for: q at m and k at n give the same dot product as at m+5, n+5;
// and the float64 gradient.
std::vector<GradcheckCase> check_rope(const GradcheckOptions& o) {
  std::vector<GradcheckCase> cases;
  Generator gen(72);
  {
    NoGradGuard no_grad;
    const Tensor x = literal({1, 2, 3, 4}, {1, 1, 1, 4});
    const Tensor expected = literal({-1.1426396637, 1.9220755965, 2.9598506679, 4.0297995017}, {1, 1, 1, 4});
    cases.push_back(value_case("(1, 2, 3, 4) at position 1, by hand", "x", nn::apply_rope(x, 1), expected,
                               kLiteralTol, 0.0));
    const Tensor q = randn({1, 2, 1, 6}, gen, Dtype::Float64), k = randn({1, 2, 1, 6}, gen, Dtype::Float64);
    const Tensor near = dot_last(nn::apply_rope(q, 3), nn::apply_rope(k, 1));   // distance 2
    const Tensor far = dot_last(nn::apply_rope(q, 8), nn::apply_rope(k, 6));    // distance 2, 5 later
    cases.push_back(value_case("q.k depends only on the distance", "q.k", far, near, kFloat64Tol, kFloat64Tol));
  }
  const Tensor x = grad_input({2, 2, 3, 4}, gen);
  cases.push_back(gradient_case(
      "gradient, start_pos 2", [](const std::vector<Tensor>& t) { return nn::apply_rope(t[0], 2); }, {"x"}, {x}, o));
  return cases;
}

// ---- kv_cache --------------------------------------------------------------------------------------

// append_to_cache on an empty cache, then twice more (2 + 1 + 1 positions): the length and that
// each appended block sits where it belongs along T; then MultiHeadAttention (H 2, Hkv 1) fed a
// prefill of 2 tokens and two single tokens through a cache equals the whole sequence at once
// under a causal mask written out by hand.
std::vector<GradcheckCase> check_kv_cache(const GradcheckOptions&) {
  NoGradGuard no_grad;
  std::vector<GradcheckCase> cases;
  Generator gen(73);
  const std::vector<std::int64_t> lengths = {2, 1, 1};
  std::vector<Tensor> ks, vs;
  nn::KVCache cache;
  for (std::int64_t t : lengths) {
    ks.push_back(randn({2, 1, t, 3}, gen, Dtype::Float64));  // (B,Hkv,Tnew,Dh)
    vs.push_back(randn({2, 1, t, 3}, gen, Dtype::Float64));
    nn::append_to_cache(cache, ks.back(), vs.back());
  }
  const bool length_ok = cache.length() == 4 && cache.v.defined() && cache.v.shape() == cache.k.shape();
  cases.push_back(fact_case("cache length after 2 + 1 + 1", "length", length_ok,
                            "expected k and v of shape (2,1,4,3), got k " +
                                (cache.k.defined() ? shape_str(cache.k.shape()) : std::string("undefined"))));
  if (length_ok) {
    std::int64_t at = 0;
    for (std::size_t i = 0; i < ks.size(); ++i) {
      const std::string which = "block " + std::to_string(i) + " at T " + std::to_string(at);
      cases.push_back(value_case(which, "k", narrow(cache.k, 2, at, lengths[i]), ks[i], kExact, kExact));
      cases.push_back(value_case(which, "v", narrow(cache.v, 2, at, lengths[i]), vs[i], kExact, kExact));
      at += lengths[i];
    }
  }
  Generator init(74), drop(75);
  const nn::MultiHeadAttention mha(8, 2, 1, 0.0, nn::PositionInAttention::None, init, drop, Dtype::Float64);
  const Tensor x = randn({2, 4, 8}, gen, Dtype::Float64);  // (B,T,D)
  const Tensor causal = bool_literal({0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0}, {4, 4});
  const Tensor whole = mha.forward(x, x, causal);
  nn::KVCache self;
  std::vector<Tensor> steps;
  const Tensor prefill = narrow(x, 1, 0, 2);
  steps.push_back(mha.forward(prefill, prefill, bool_literal({0, 1, 0, 0}, {2, 2}), &self, 0));
  for (std::int64_t t = 2; t < 4; ++t) {
    const Tensor token = narrow(x, 1, t, 1);
    steps.push_back(mha.forward(token, token, Tensor(), &self, t));  // one query sees every cached key
  }
  cases.push_back(value_case("MultiHeadAttention: prefill 2, then 1 + 1, against the whole sequence", "output",
                             cat(steps, 1), whole, kFloat64Tol, kFloat64Tol));
  return cases;
}

// ---- greedy ----------------------------------------------------------------------------------------

// PeakedModel: train/classroom/peaked_model.h

// The token ids of `outputs` one after another, each sentence followed by -1 (so that two
// sentence splits of the same tokens differ), as a float64 (N) tensor.
Tensor flat_tokens(const std::vector<std::vector<std::int64_t>>& outputs) {
  std::vector<double> flat;
  for (const auto& s : outputs) {
    flat.insert(flat.end(), s.begin(), s.end());
    flat.push_back(-1);
  }
  return from_vector(flat, {static_cast<std::int64_t>(flat.size())}, Dtype::Float64);
}

// greedy_decode of a padded batch of 5 sources against two other paths: beam search with beam 1
// (train/eval/decode.cpp's other decoder), and greedy_decode without the KV cache (the whole
// prefix decoded again each step). Both must give the same tokens, and at least one sentence must
// stop at </s> before its length limit (else only the limit would be checked).
std::vector<GradcheckCase> check_greedy(const GradcheckOptions&) {
  NoGradGuard no_grad;
  const PeakedModel m(1);  // a seed whose model stops 4 of the 5 sentences at </s>
  const std::vector<std::vector<std::int64_t>> sources = {{4, 5, 6}, {7}, {8, 9, 10, 4}, {6, 6}, {9, 8, 7, 6, 5}};
  const Tensor src = pad_batch(sources, data::kPadId);  // (5,S)
  DecodeOptions opt;
  opt.max_len_a = 1.0;
  opt.max_len_b = 2;
  const auto greedy = greedy_decode(m.model, src, opt);
  DecodeOptions beam1 = opt;
  beam1.beam = 1;
  const auto beam = beam_search(m.model, src, beam1);
  DecodeOptions no_cache = opt;
  no_cache.use_cache = false;
  const auto uncached = greedy_decode(m.model, src, no_cache);
  std::vector<GradcheckCase> cases;
  cases.push_back(value_case("tokens against beam search with beam 1", "tokens", flat_tokens(greedy), flat_tokens(beam),
                             kExact, kExact));
  cases.push_back(value_case("tokens with the KV cache against without", "tokens", flat_tokens(greedy),
                             flat_tokens(uncached), kExact, kExact));
  int stopped = 0;
  for (std::size_t i = 0; i < sources.size() && i < greedy.size(); ++i)
    stopped += static_cast<std::int64_t>(greedy[i].size()) <
               max_target_length(m.model, static_cast<std::int64_t>(sources[i].size()), opt);
  cases.push_back(fact_case("some sentence stops at </s>", "stopped", stopped > 0 && greedy.size() == sources.size(),
                            "expected " + std::to_string(sources.size()) +
                                " outputs, some shorter than their length limit (stopped at </s>), got " +
                                std::to_string(greedy.size()) + " outputs, " + std::to_string(stopped) + " stopped"));
  return cases;
}

}  // namespace

std::vector<GradcheckEntry> exercise_gradcheck_entries() {
  return {
      {"scaled_dot_product", "attention",
       "exercise scaled_dot_product: softmax(q k^T / sqrt(Dh) + bias, masked) v against tiled attention, and its gradient",
       check_scaled_dot_product},
      {"masks", "attention", "exercise masks: causal and padding masks against masks written out by hand (values)",
       check_masks},
      {"sinusoidal", "positions", "exercise sinusoidal: the sinusoidal table against hand-computed values (values)",
       check_sinusoidal},
      {"rope", "positions", "exercise rope: RoPE's rotation by hand, dot products by distance only, and its gradient",
       check_rope},
      {"kv_cache", "attention",
       "exercise kv_cache: append_to_cache, and cached step-by-step attention against the whole sequence (values)",
       check_kv_cache},
      {"greedy", "decoding", "exercise greedy: greedy decoding against beam search with beam 1 and against no cache (values)",
       check_greedy},
  };
}

}  // namespace sf::train
