#include "train/classroom/gradcheck_suite.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "autograd/check.h"
#include "autograd/generator.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "nn/attention.h"
#include "nn/decoder_only.h"
#include "nn/embedding.h"
#include "nn/encoder_only.h"
#include "nn/feed_forward.h"
#include "nn/linear.h"
#include "nn/norm.h"
#include "nn/positional.h"
#include "nn/relative_positions.h"
#include "nn/rnn_seq2seq.h"
#include "nn/seq2seq.h"
#include "nn/transformer_layers.h"

// Letters: B batch, S source length, T target length, D d_model, H heads, Hkv key/value heads,
// Dh head width, F d_ff, V vocabulary. Every check is tiny (D <= 8, lengths 3-4) and float64.

namespace sf::train {

namespace {

using nn::Module;

// ---- building one run -------------------------------------------------------------------------

// The inputs of one gradcheck run, each with the name the table shows.
struct NamedInputs {
  std::vector<Tensor> tensors;
  std::vector<std::string> names;

  void add(const std::string& name, const Tensor& t) {
    tensors.push_back(t);
    names.push_back(name);
  }
  // Every parameter of `m`, named by its dotted path ("self_attn.q_proj.weight").
  void add_parameters(const Module& m) {
    for (const auto& [name, p] : m.named_parameters()) add(name, p);
  }
};

// The result of a run that threw (a backward still an exercise stub, a gradient of the wrong
// shape): failed, with the exception's one-line message; each of its `inputs` rows FAIL with no
// error to show (NaN, printed "-").
GradcheckResult thrown_result(std::size_t inputs, const std::string& what) {
  GradcheckResult r;
  r.ok = false;
  r.message = "threw: " + what;
  for (std::size_t i = 0; i < inputs; ++i) {
    GradcheckInputReport report;
    report.input = i;
    report.ok = false;
    report.max_abs_error = report.max_rel_error = std::numeric_limits<double>::quiet_NaN();
    r.inputs.push_back(report);
  }
  return r;
}

// One float64 gradcheck run; a run that throws becomes a failed case (the entry's other runs
// still run).
GradcheckCase run_case(const std::string& variant, const GradcheckFn& f, const NamedInputs& in,
                       const GradcheckOptions& options) {
  GradcheckCase c;
  c.variant = variant;
  c.input_names = in.names;
  for (const Tensor& t : in.tensors) c.input_shapes.push_back(t.shape());
  try {
    c.result = gradcheck(f, in.tensors, options);
  } catch (const std::exception& ex) {
    c.result = thrown_result(in.tensors.size(), ex.what());
  }
  return c;
}

// ---- float32 fast paths against their float64 reference ---------------------------------------
//
// The float32 kernels (softmax's vectorised rows with fast_exp, cross-entropy's fast_exp,
// small_gemm and the folded gemm in float32, the float32 tiled attention, the norms in float32)
// cannot be finite-differenced: float32 carries ~7 digits, and a step of 1e-6 would leave none.
// Instead the same inputs, rounded to float32 once (the float64 reference gets exactly those
// values, upcast), run forward and backward (the same random upstream gradient v, also float32-
// exact) through the float32 path and through a float64 reference that the float64 gradchecks
// cover, and the output and every gradient are compared element by element:
//   pass if |got - expected| <= kFloat32Atol + kFloat32Rtol * |expected| at every element.
// A float32 operation rounds its result by at most 2^-24 ~ 6e-8 relative. These checks chain at
// most a few dozen roundings (sums of <= 70 terms, fast_exp within 1 ulp, the statistics of the
// norms in double), so an honest float32 error stays below ~5e-6 relative; kFloat32Rtol leaves a
// factor ~20 above that. kFloat32Atol covers elements near 0 made by cancellation (softmax's
// y (g - sum g y), a zero-sum gradient), where the error is ~1e-7 of the O(1..10) terms that
// cancelled. A wrong backward (a dropped term, a swapped operand, a leaked mask) errs by O(0.1).
constexpr double kFloat32Rtol = 1e-4;
constexpr double kFloat32Atol = 1e-5;

// The flat (row-major) position i of `shape` as a full index.
Shape unravel(std::int64_t i, const Shape& shape) {
  Shape index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = i % shape[d];
    i /= shape[d];
  }
  return index;
}

// got (float32) against expected (float64), element by element, both of one shape. Equal values
// match (also two -inf log-probabilities); a NaN fails. numeric_at_worst holds the float64
// reference, analytic_at_worst the float32 value.
GradcheckInputReport compare_to_reference(std::size_t input, const Tensor& got, const Tensor& expected) {
  if (got.shape() != expected.shape())
    throw std::logic_error("float32 check: the float32 result has shape " + shape_str(got.shape()) +
                           " but the float64 reference " + shape_str(expected.shape()));
  const Tensor g = contiguous(to_dtype(got.detach(), Dtype::Float64));
  const Tensor e = contiguous(to_dtype(expected.detach(), Dtype::Float64));
  const double* pg = g.data<double>();
  const double* pe = e.data<double>();
  GradcheckInputReport r;
  r.input = input;
  double worst_excess = -std::numeric_limits<double>::infinity();
  std::int64_t worst = 0;
  for (std::int64_t i = 0; i < g.numel(); ++i) {
    double diff = pg[i] == pe[i] ? 0.0 : std::fabs(pg[i] - pe[i]);
    if (std::isnan(diff)) diff = std::numeric_limits<double>::infinity();
    r.max_abs_error = std::max(r.max_abs_error, diff);
    r.max_rel_error = std::max(r.max_rel_error, diff / std::max(std::fabs(pe[i]), 1e-12));
    const double excess = diff - (kFloat32Atol + kFloat32Rtol * std::fabs(pe[i]));
    if (excess > worst_excess) worst_excess = excess, worst = i;
  }
  r.ok = g.numel() == 0 || worst_excess <= 0;
  if (g.numel() > 0) {
    r.worst_index = unravel(worst, g.shape());
    r.numeric_at_worst = pe[worst];
    r.analytic_at_worst = pg[worst];
  }
  return r;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.8g", v);
  return buf;
}

// Float32 copies of `inputs` (float64) and the float64 leaves with exactly their values.
void float32_inputs(const std::vector<Tensor>& inputs, std::vector<Tensor>& in32, std::vector<Tensor>& in64) {
  for (const Tensor& t : inputs) {
    Tensor x32 = to_dtype(t.detach(), Dtype::Float32);
    Tensor x64 = to_dtype(x32, Dtype::Float64);
    in32.push_back(x32.requires_grad_());
    in64.push_back(x64.requires_grad_());
  }
}

// Runs `fast` on float32 copies of `inputs` and `reference` on the same values in float64,
// backward from L = sum(v * y) for a random v (seed), and compares into c: c.result.inputs[0] the
// output, then one gradient per input.
void compare_float32(const GradcheckFn& fast, const GradcheckFn& reference, const std::vector<Tensor>& inputs,
                     std::uint64_t seed, GradcheckCase& c) {
  std::vector<Tensor> in32, in64;
  float32_inputs(inputs, in32, in64);
  const Tensor y32 = fast(in32), y64 = reference(in64);
  if (y32.dtype() != Dtype::Float32 || y64.dtype() != Dtype::Float64)
    throw std::logic_error(std::string("float32 check: expected a float32 and a float64 output, got ") +
                           dtype_name(y32.dtype()) + " and " + dtype_name(y64.dtype()));
  Generator gen(seed);
  const Tensor v32 = to_dtype(randn(y64.shape(), gen, Dtype::Float64), Dtype::Float32);
  sum(mul(y32, v32)).backward();
  sum(mul(y64, to_dtype(v32, Dtype::Float64))).backward();
  c.input_shapes[0] = y64.shape();
  c.result.inputs.push_back(compare_to_reference(0, y32, y64));
  for (std::size_t i = 0; i < in32.size(); ++i) {
    const Tensor g32 = in32[i].grad().defined() ? in32[i].grad() : zeros_like(in32[i]);
    const Tensor g64 = in64[i].grad().defined() ? in64[i].grad() : zeros_like(in64[i]);
    c.result.inputs.push_back(compare_to_reference(i + 1, g32, g64));
  }
  for (const GradcheckInputReport& r : c.result.inputs) {
    if (r.ok) continue;
    c.result.ok = false;
    c.result.message = "float32 path differs from its float64 reference: " + c.input_names[r.input] + " at index " +
                       shape_str(r.worst_index) + ": expected " + number(r.numeric_at_worst) + " (float64), got " +
                       number(r.analytic_at_worst) + " (float32); allowed " + number(kFloat32Atol) + " + " +
                       number(kFloat32Rtol) + " * |expected|";
    break;
  }
}

}  // namespace

GradcheckCase float32_vs_float64(const std::string& variant, const GradcheckFn& fast, const GradcheckFn& reference,
                                 const std::vector<std::string>& names, const std::vector<Tensor>& inputs,
                                 std::uint64_t seed) {
  SF_CHECK(names.size() == inputs.size(), "float32_vs_float64 ", variant, ": ", names.size(), " names for ",
           inputs.size(), " inputs");
  GradcheckCase c;
  c.variant = variant + ", float32 vs float64";
  c.input_names.push_back("output");
  c.input_shapes.push_back(Shape{});
  for (std::size_t i = 0; i < names.size(); ++i) {
    c.input_names.push_back("grad " + names[i]);
    c.input_shapes.push_back(inputs[i].shape());
  }
  try {
    compare_float32(fast, reference, inputs, seed, c);
  } catch (const std::exception& ex) {
    c.result = thrown_result(c.input_names.size(), ex.what());
  }
  return c;
}

namespace {

// float32_vs_float64 on named inputs (float64 values, rounded to float32 there).
GradcheckCase check_float32(const std::string& variant, const GradcheckFn& fast, const GradcheckFn& reference,
                            const NamedInputs& in, std::uint64_t seed = 77) {
  return float32_vs_float64(variant, fast, reference, in.names, in.tensors, seed);
}

// check_float32 when the float32 path and its reference are the same function in two dtypes.
GradcheckCase check_float32(const std::string& variant, const GradcheckFn& f, const NamedInputs& in,
                            std::uint64_t seed = 77) {
  return check_float32(variant, f, f, in, seed);
}

// A float64 leaf with N(0,1) values that requires grad.
Tensor grad_input(const Shape& shape, Generator& gen) {
  Tensor t = randn(shape, gen, Dtype::Float64);
  t.requires_grad_();
  return t;
}

// Overwrites every parameter of `m` with N(0,1) values, so that zero biases and unit norm
// weights (their initial values) cannot hide a wrong gradient term.
void randomise_parameters(const Module& m, Generator& gen) {
  NoGradGuard no_grad;
  for (const Tensor& p : m.parameters()) const_cast<Tensor&>(p).copy_(randn(p.shape(), gen, p.dtype()));
}

Tensor ids(const std::vector<std::int64_t>& values, const Shape& shape) {
  return from_vector<std::int64_t>(values, shape);
}

// The source batch of the attention, layer and model checks: (2,4), the second row ends with two pads (id 0).
Tensor padded_source() { return ids({3, 5, 2, 6, 4, 1, 0, 0}, {2, 4}); }

// The tiny model of the model checks: D 8, H 2 (Dh 4), F 16, one layer each,
// vocabulary 7 (pad 0), no dropout.
nn::ModelConfig tiny_config() {
  nn::ModelConfig c;
  c.src_vocab = 7;
  c.tgt_vocab = 7;
  c.d_model = 8;
  c.n_heads = 2;
  c.d_ff = 16;
  c.encoder_layers = 1;
  c.decoder_layers = 1;
  c.dropout = 0.0;
  c.max_len = 8;
  c.pad_id = 0;
  return c;
}

// The layer checks' config: D 4, H 2 (Dh 2), F 8, about 170 parameters in an encoder layer and
// 260 in a decoder layer, each checked element by element (two forward passes per element).
nn::ModelConfig layer_config() {
  nn::ModelConfig c = tiny_config();
  c.d_model = 4;
  c.d_ff = 8;
  return c;
}

// ---- the entries ------------------------------------------------------------------------------

// a's runs, then b's.
std::vector<GradcheckCase> joined(std::vector<GradcheckCase> a, const std::vector<GradcheckCase>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// One run of a two-operand function a (shape_a), b (shape_b), from a fresh Generator(seed).
GradcheckCase check_pair(const std::string& variant, const Shape& shape_a, const Shape& shape_b, std::uint64_t seed,
                         const GradcheckFn& f, const GradcheckOptions& o) {
  Generator gen(seed);
  NamedInputs in;
  in.add("a", grad_input(shape_a, gen));
  in.add("b", grad_input(shape_b, gen));
  return run_case(variant, f, in, o);
}

// MatMul: c = a @ b for 2-D, batched, broadcast and mixed operands, and on strided views
// (a transposed pair, and a narrowed one whose layout matmul must copy).
std::vector<GradcheckCase> check_matmul(const GradcheckOptions& o) {
  const GradcheckFn product = [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]); };
  const GradcheckFn transposed = [](const std::vector<Tensor>& t) {
    return matmul(transpose(t[0], -2, -1), transpose(t[1], -2, -1));  // (2,3,4) @ (4,5)
  };
  const GradcheckFn first_transposed = [](const std::vector<Tensor>& t) {
    return matmul(transpose(t[0], 1, 2), t[1]);  // (2,3,4) @ (4,4): a's batch does not fold
  };
  const GradcheckFn narrowed = [](const std::vector<Tensor>& t) {
    const Tensor a = narrow(t[0], 1, 1, 4);               // (3,4), strides (6,1)
    const Tensor b = squeeze(narrow(t[1], 2, 1, 1), 2);  // (4,2), strides (4,2)
    return matmul(a, b);
  };
  return {check_pair("2-D", {3, 4}, {4, 5}, 7, product, o),
          check_pair("batched", {2, 3, 4}, {2, 4, 2}, 7, product, o),
          check_pair("broadcast batch dims", {2, 1, 3, 4}, {3, 4, 2}, 7, product, o),
          check_pair("2-D @ batched", {3, 4}, {2, 4, 5}, 7, product, o),
          check_pair("batched @ 2-D", {2, 3, 4}, {4, 5}, 7, product, o),  // the folded gemm; grad_b in one gemm
          // K == N: a grad_b computed transposed has the right shape and only wrong values
          check_pair("batched @ 2-D, K == N", {2, 3, 4}, {4, 4}, 9, product, o),
          check_pair("batched @ 2-D, a a transposed view", {2, 4, 3}, {4, 4}, 10, first_transposed, o),
          check_pair("4-D @ 2-D", {2, 2, 2, 3}, {3, 3}, 11, product, o),
          check_pair("both transposed", {2, 4, 3}, {5, 4}, 8, transposed, o),
          check_pair("narrowed, layout copied", {3, 6}, {4, 2, 2}, 8, narrowed, o)};
}

// MatMul in float32 (small_gemm over the slices, the folded batched @ 2-D gemm, BLAS per slice)
// against float64.
std::vector<GradcheckCase> check_matmul_float32() {
  const GradcheckFn product = [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]); };
  // scale: the inputs' spread; the 70-term sums of the BLAS case get values of 1/4, so that its
  // sums stay O(1) and their float32 rounding (~70 roundings) well inside kFloat32Atol.
  const auto pair = [&](const std::string& variant, const Shape& shape_a, const Shape& shape_b, std::uint64_t seed,
                        double scale = 1.0) {
    Generator gen(seed);
    NamedInputs in;
    in.add("a", mul(randn(shape_a, gen, Dtype::Float64), scale));
    in.add("b", mul(randn(shape_b, gen, Dtype::Float64), scale));
    return check_float32(variant, product, in);
  };
  return {pair("2-D", {3, 4}, {4, 5}, 12), pair("batched, small_gemm slices", {2, 3, 4}, {2, 4, 5}, 13),
          pair("broadcast batch dims", {2, 1, 3, 4}, {3, 4, 2}, 14), pair("batched @ 2-D, K == N", {2, 3, 4}, {4, 4}, 15),
          pair("batched, a BLAS gemm per slice", {2, 70, 70}, {2, 70, 70}, 16, 0.25)};
}

// Softmax or log_softmax in float32 against float64: along the last dim (the vectorised rows with
// fast_exp: 37 values, two full vector lengths and a tail), with some entries -inf (masked_fill
// first, as attention masks), and along a middle dim (the general float32 kernel).
std::vector<GradcheckCase> check_softmax_float32(bool log) {
  Tensor (*op)(const Tensor&, std::int64_t) = log ? log_softmax : softmax;
  Generator gen(log ? 17 : 15);
  NamedInputs rows, middle;
  rows.add("x", randn({3, 37}, gen, Dtype::Float64));
  middle.add("x", randn({3, 5, 4}, gen, Dtype::Float64));
  std::vector<bool> blocked(3 * 37, false);
  for (std::size_t i = 0; i < blocked.size(); i += 5) blocked[i] = true;  // some keys of every row
  const Tensor mask = from_vector<bool>(blocked, {3, 37});
  const double minus_inf = -std::numeric_limits<double>::infinity();
  return {check_float32("last dim, vectorised rows", [op](const std::vector<Tensor>& t) { return op(t[0], -1); }, rows),
          check_float32("last dim, -inf entries",
                        [op, mask, minus_inf](const std::vector<Tensor>& t) {
                          return op(masked_fill(t[0], mask, minus_inf), -1);
                        },
                        rows),
          check_float32("middle dim", [op](const std::vector<Tensor>& t) { return op(t[0], 1); }, middle)};
}

// Softmax along the first, middle and last dim of a (5,3,4) view with reversed strides (no dim
// contiguous).
std::vector<GradcheckCase> check_softmax(const GradcheckOptions& o) {
  Generator gen(13);
  NamedInputs in;
  in.add("x (transposed view)", grad_input({4, 3, 5}, gen));
  std::vector<GradcheckCase> cases;
  for (const std::int64_t d : {0, 1, -1})
    cases.push_back(run_case("dim " + std::to_string(d),
                             [d](const std::vector<Tensor>& t) { return softmax(transpose(t[0], 0, 2), d); }, in, o));
  return joined(cases, check_softmax_float32(/*log=*/false));
}

// LogSoftmax along each dim of a view with no contiguous dim, then its float32 paths.
std::vector<GradcheckCase> check_log_softmax(const GradcheckOptions& o) {
  Generator gen(14);
  NamedInputs in;
  in.add("x (transposed view)", grad_input({4, 3, 5}, gen));
  std::vector<GradcheckCase> cases;
  for (const std::int64_t d : {0, 1, -1})
    cases.push_back(run_case("dim " + std::to_string(d),
                             [d](const std::vector<Tensor>& t) { return log_softmax(transpose(t[0], 0, 2), d); }, in, o));
  return joined(cases, check_softmax_float32(/*log=*/true));
}

// Relu: y = max(0, x) on a transposed view; the gradient is 1 where x > 0 and 0 elsewhere (N(0,1)
// values are never within eps of the kink at 0).
std::vector<GradcheckCase> check_relu(const GradcheckOptions& o) {
  Generator gen(9);
  NamedInputs in;
  in.add("x (transposed view)", grad_input({4, 3}, gen));
  return {run_case("", [](const std::vector<Tensor>& t) { return relu(transpose(t[0], 0, 1)); }, in, o)};
}

// One run of a one-input function of x (shape), from a fresh Generator(seed).
GradcheckCase check_one(const std::string& variant, const Shape& shape, std::uint64_t seed, const GradcheckFn& f,
                        const GradcheckOptions& o, const std::string& name = "x") {
  Generator gen(seed);
  NamedInputs in;
  in.add(name, grad_input(shape, gen));
  return run_case(variant, f, in, o);
}

// MaskedFill on its own, with a finite fill value (inside attention, softmax's zeros would hide a
// gradient leaking through the filled cells): a (T,T) mask broadcast over (B,H,T,T), a mask of
// x's shape on a transposed view, and a float mask (nonzero = true).
std::vector<GradcheckCase> check_masked_fill(const GradcheckOptions& o) { return masked_fill_cases(masked_fill, o); }

}  // namespace

std::vector<GradcheckCase> masked_fill_cases(const MaskedFillFn& masked_fill, const GradcheckOptions& o) {
  const Tensor causal = nn::causal_mask(3, 3);  // (3,3)
  const Tensor pattern = from_vector<bool>({true, false, false, true, false, true, true, false, false, false, true, true},
                                           {3, 4});
  const Tensor float_mask = to_dtype(pattern, Dtype::Float64);
  return {check_one("causal (T,T) mask broadcast over (B,H,T,T)", {2, 2, 3, 3}, 120,
                    [masked_fill, causal](const std::vector<Tensor>& t) { return masked_fill(t[0], causal, 2.5); }, o),
          check_one("mask of x's shape, x a transposed view", {4, 3}, 121,
                    [masked_fill, pattern](const std::vector<Tensor>& t) {
                      return masked_fill(transpose(t[0], 0, 1), pattern, -1.0);
                    },
                    o, "x (transposed view)"),
          check_one("float mask", {3, 4}, 122,
                    [masked_fill, float_mask](const std::vector<Tensor>& t) { return masked_fill(t[0], float_mask, 0.0); }, o)};
}

namespace {

// Where: out = cond ? a : b with a and b of one shape, and with cond, a and b broadcast (each
// gradient summed back to its input's shape).
std::vector<GradcheckCase> check_where(const GradcheckOptions& o) {
  const Tensor cond = from_vector<bool>({true, false, false, true, true, false, true, false, false, true, true, false},
                                        {3, 4});
  const Tensor row_cond = from_vector<bool>({false, true, true, false}, {4});
  return {check_pair("same shapes", {3, 4}, {3, 4}, 123,
                     [cond](const std::vector<Tensor>& t) { return where(cond, t[0], t[1]); }, o),
          check_pair("a (2,3,4), b (4), cond (4) broadcast", {2, 3, 4}, {4}, 124,
                     [row_cond](const std::vector<Tensor>& t) { return where(row_cond, t[0], t[1]); }, o),
          check_pair("a (3,1), b (1,4), cond (3,4)", {3, 1}, {1, 4}, 125,
                     [cond](const std::vector<Tensor>& t) { return where(cond, t[0], t[1]); }, o)};
}

// IndexSelect: rows picked along dim 0 and along a middle dim, with repeated indices (their
// gradients add up), and from a transposed view.
std::vector<GradcheckCase> check_index_select(const GradcheckOptions& o) {
  const Tensor rows = ids({4, 1, 1, 0, 4, 4}, {6});
  const Tensor middle = ids({3, 0, 3}, {3});
  return {check_one("dim 0, repeated indices", {5, 3}, 126,
                    [rows](const std::vector<Tensor>& t) { return index_select(t[0], 0, rows); }, o),
          check_one("middle dim", {2, 5, 3}, 127,
                    [middle](const std::vector<Tensor>& t) { return index_select(t[0], 1, middle); }, o),
          check_one("dim 0 of a transposed view", {3, 5}, 128,
                    [rows](const std::vector<Tensor>& t) { return index_select(transpose(t[0], 0, 1), 0, rows); }, o,
                    "x (transposed view)")};
}

// Dropout with p 0.5 and 0.1 (the generator reseeded before every call: the same mask each
// time) on a transposed view, and p 0 (x itself).
std::vector<GradcheckCase> check_dropout(const GradcheckOptions& o) {
  std::vector<GradcheckCase> cases;
  for (const double p : {0.5, 0.1, 0.0})
    cases.push_back(check_one("p " + number(p), {6, 5}, 129,
                              [p](const std::vector<Tensor>& t) {
                                Generator drop(31);
                                return dropout(transpose(t[0], 0, 1), p, drop);
                              },
                              o, "x (transposed view)"));
  return cases;
}

// add, sub, mul, div, broadcast (2,3) with (3) and (2,1), and their scalar forms.
std::vector<GradcheckCase> check_elementwise(const GradcheckOptions& o) {
  // a denominator kept away from 0: 1 + b^2
  const auto denominator = [](const Tensor& b) { return add(mul(b, b), 1.0); };
  return {check_pair("add, (2,3) + (3)", {2, 3}, {3}, 130, [](const std::vector<Tensor>& t) { return add(t[0], t[1]); }, o),
          check_pair("sub, (2,3) - (2,1)", {2, 3}, {2, 1}, 131,
                     [](const std::vector<Tensor>& t) { return sub(t[0], t[1]); }, o),
          check_pair("mul, (2,1) * (3)", {2, 1}, {3}, 132, [](const std::vector<Tensor>& t) { return mul(t[0], t[1]); }, o),
          check_pair("div, (2,3) / (3)", {2, 3}, {3}, 133,
                     [denominator](const std::vector<Tensor>& t) { return div(t[0], denominator(t[1])); }, o),
          check_one("scalar forms: (x + 2 - 1) * 3 / 4", {2, 3}, 134,
                    [](const std::vector<Tensor>& t) { return div(mul(sub(add(t[0], 2.0), 1.0), 3.0), 4.0); }, o)};
}

// neg, exp, log, sqrt, pow, tanh, gelu, sigmoid, one run each (log, sqrt and pow of 0.5 + x^2 > 0).
std::vector<GradcheckCase> check_unary(const GradcheckOptions& o) {
  const auto positive = [](const Tensor& x) { return add(mul(x, x), 0.5); };
  const std::pair<const char*, GradcheckFn> ops[] = {
      {"neg", [](const std::vector<Tensor>& t) { return neg(t[0]); }},
      {"exp", [](const std::vector<Tensor>& t) { return exp(t[0]); }},
      {"log", [positive](const std::vector<Tensor>& t) { return log(positive(t[0])); }},
      {"sqrt", [positive](const std::vector<Tensor>& t) { return sqrt(positive(t[0])); }},
      {"pow 1.5", [positive](const std::vector<Tensor>& t) { return pow(positive(t[0]), 1.5); }},
      {"tanh", [](const std::vector<Tensor>& t) { return tanh(t[0]); }},
      {"gelu", [](const std::vector<Tensor>& t) { return gelu(t[0]); }},
      {"sigmoid", [](const std::vector<Tensor>& t) { return sigmoid(t[0]); }}};
  std::vector<GradcheckCase> cases;
  for (const auto& [name, f] : ops) cases.push_back(check_one(name, {3, 4}, 135, f, o));
  return cases;
}

// sum, mean and max over all elements and over dims, with and without keepdim.
std::vector<GradcheckCase> check_reduce(const GradcheckOptions& o) {
  const std::pair<const char*, GradcheckFn> ops[] = {
      {"sum", [](const std::vector<Tensor>& t) { return sum(t[0]); }},
      {"sum dims 0 2, keepdim", [](const std::vector<Tensor>& t) { return sum(t[0], {0, 2}, true); }},
      {"mean", [](const std::vector<Tensor>& t) { return mean(t[0]); }},
      {"mean dim 1", [](const std::vector<Tensor>& t) { return mean(t[0], {1}); }},
      {"max", [](const std::vector<Tensor>& t) { return max(t[0]); }},
      {"max dim 1, keepdim", [](const std::vector<Tensor>& t) { return max(t[0], {1}, true); }}};
  std::vector<GradcheckCase> cases;
  for (const auto& [name, f] : ops) cases.push_back(check_one(name, {2, 3, 4}, 136, f, o));
  return cases;
}

// The shape ops: reshape of a transposed view (a copy), permute, narrow, expand (the gradient
// sums over the broadcast dim), unsqueeze/squeeze, contiguous, cat of three pieces, stack.
std::vector<GradcheckCase> check_shape(const GradcheckOptions& o) {
  const std::pair<const char*, GradcheckFn> ops[] = {
      {"reshape of a transposed view", [](const std::vector<Tensor>& t) { return reshape(transpose(t[0], 0, 2), {4, 6}); }},
      {"permute (2,0,1)", [](const std::vector<Tensor>& t) { return permute(t[0], {2, 0, 1}); }},
      {"narrow dim 2", [](const std::vector<Tensor>& t) { return narrow(t[0], 2, 1, 2); }},
      {"expand dim 1 of narrow", [](const std::vector<Tensor>& t) { return expand(narrow(t[0], 1, 0, 1), {2, 5, 4}); }},
      {"unsqueeze, squeeze", [](const std::vector<Tensor>& t) { return squeeze(unsqueeze(t[0], 1), 1); }},
      {"contiguous of a transposed view", [](const std::vector<Tensor>& t) { return contiguous(transpose(t[0], 1, 2)); }},
      {"cat dim 1 of three pieces",
       [](const std::vector<Tensor>& t) {
         return cat({narrow(t[0], 1, 2, 1), t[0], narrow(t[0], 1, 0, 2)}, 1);
       }},
      {"stack dim 1", [](const std::vector<Tensor>& t) { return stack({t[0], mul(t[0], t[0])}, 1); }}};
  std::vector<GradcheckCase> cases;
  for (const auto& [name, f] : ops) cases.push_back(check_one(name, {2, 3, 4}, 137, f, o));
  return cases;
}

// Embedding: y = E[ids]; the gradient scatter-adds into the rows read (repeated ids accumulate).
// Three runs: ids without the padding id; ids with it (padding_idx 0), where row 0's gradient
// must be exactly 0; and the op with no padding_idx (-1), where id 0 is an ordinary row.
std::vector<GradcheckCase> check_embedding(const GradcheckOptions& o) {
  Generator gen(4);
  nn::Embedding emb(5, 3, gen, /*padding_idx=*/0, Dtype::Float64);
  const Tensor x = ids({1, 3, 3, 4, 1, 2, 4, 4}, {2, 4});
  const Tensor padded = ids({1, 3, 0, 4, 0, 2, 0, 0}, {2, 4});  // (B,T), 0 = padding
  // The forward reads the padding row while its gradient is 0 by design, so the check subtracts
  // the padded positions' output again as a constant: y - is_pad * detach(y) is exactly 0 there
  // whatever row 0 holds (numeric gradient of row 0: 0), and the analytic gradient of row 0 is
  // what Embedding's backward sends to it (must be 0 too).
  const Tensor is_pad = to_dtype(unsqueeze(eq(padded, 0), -1), Dtype::Float64);  // (B,T,1)
  const Tensor no_pad = ids({0, 3, 0, 4, 1, 2, 0, 4}, {2, 4});
  NamedInputs in, weight;
  in.add_parameters(emb);
  weight.add("weight", grad_input({5, 3}, gen));
  return {run_case("", [&](const std::vector<Tensor>&) { return emb.forward(x); }, in, o),
          run_case("padding_idx 0 among the ids",
                   [&](const std::vector<Tensor>&) {
                     const Tensor y = emb.forward(padded);  // (B,T,D)
                     return sub(y, mul(y.detach(), is_pad));
                   },
                   in, o),
          run_case("no padding_idx, id 0 read",
                   [&](const std::vector<Tensor>& t) { return embedding(t[0], no_pad, -1); }, weight, o)};
}

// Linear: y = x W^T + b with x (B,T,in) and (R,in), with and without a bias, then in float32.
std::vector<GradcheckCase> check_linear(const GradcheckOptions& o) {
  Generator gen(5);
  nn::Linear lin(4, 3, gen, true, Dtype::Float64);
  nn::Linear no_bias(4, 3, gen, false, Dtype::Float64);
  randomise_parameters(lin, gen);
  NamedInputs in, flat, plain;
  in.add("x", grad_input({2, 3, 4}, gen));  // (B,T,in)
  in.add_parameters(lin);
  flat.add("x", grad_input({5, 4}, gen));  // (R,in)
  flat.add_parameters(lin);
  plain.add("x", grad_input({2, 3, 4}, gen));
  plain.add_parameters(no_bias);
  NamedInputs f32;
  f32.add("x", randn({2, 3, 4}, gen, Dtype::Float64));
  f32.add("weight", randn({3, 4}, gen, Dtype::Float64));
  f32.add("bias", randn({3}, gen, Dtype::Float64));
  return {run_case("", [&](const std::vector<Tensor>& t) { return lin.forward(t[0]); }, in, o),
          run_case("2-D x", [&](const std::vector<Tensor>& t) { return lin.forward(t[0]); }, flat, o),
          run_case("no bias", [&](const std::vector<Tensor>& t) { return no_bias.forward(t[0]); }, plain, o),
          check_float32("with bias", [](const std::vector<Tensor>& t) { return linear(t[0], t[1], t[2]); }, f32)};
}

// scaled_dot_product_attention(q, k, v, mask, bias) on q: (2,2,Tq,3), k, v: (2,2,Tk,3).
GradcheckCase check_sdpa(const std::string& variant, std::int64_t t_q, std::int64_t t_k, const Tensor& mask,
                         const Tensor& bias, std::uint64_t seed, const GradcheckOptions& o) {
  Generator gen(seed);
  NamedInputs in;
  in.add("q", grad_input({2, 2, t_q, 3}, gen));
  in.add("k", grad_input({2, 2, t_k, 3}, gen));
  in.add("v", grad_input({2, 2, t_k, 3}, gen));
  return run_case(
      variant, [&](const std::vector<Tensor>& t) { return nn::scaled_dot_product_attention(t[0], t[1], t[2], mask, bias); },
      in, o);
}

std::vector<GradcheckCase> check_attention_no_mask(const GradcheckOptions& o) {
  // q, k, v made as (B,T,H,Dh) and seen as (B,H,T,Dh) through a transpose: non-contiguous views.
  Generator gen(104);
  NamedInputs in;
  in.add("q (transposed view)", grad_input({2, 3, 2, 3}, gen));
  in.add("k (transposed view)", grad_input({2, 4, 2, 3}, gen));
  in.add("v (transposed view)", grad_input({2, 4, 2, 3}, gen));
  return {run_case(
      "",
      [](const std::vector<Tensor>& t) {
        return nn::scaled_dot_product_attention(transpose(t[0], 1, 2), transpose(t[1], 1, 2), transpose(t[2], 1, 2));
      },
      in, o)};
}

std::vector<GradcheckCase> check_attention_padding_mask(const GradcheckOptions& o) {
  // keys: row 2 of the batch ends with two padding positions
  const Tensor mask = nn::padding_mask(ids({5, 6, 7, 8, 5, 6, 0, 0}, {2, 4}), 0);  // (2,1,1,4)
  return {check_sdpa("", 3, 4, mask, Tensor(), 105, o)};
}

std::vector<GradcheckCase> check_attention_causal_mask(const GradcheckOptions& o) {
  return {check_sdpa("", 4, 4, nn::causal_mask(4, 4), Tensor(), 106, o)};
}

std::vector<GradcheckCase> check_attention_alibi(const GradcheckOptions& o) {
  const Tensor bias = nn::alibi_bias(2, 3, 3, 0, /*causal=*/true, Dtype::Float64);  // (H,Tq,Tk)
  return {check_sdpa("", 3, 3, nn::causal_mask(3, 3), bias, 107, o)};
}

// ---- tiled attention (the FlashAttention op behind model.attention = tiled) -------------------

// Forward declaration: check_attention_tiled_float32 follows check_attention_tiled's helpers.
std::vector<GradcheckCase> check_attention_tiled_float32(const Tensor& padding, const Tensor& causal);

// Tiles of 2 query rows by 2 keys: every run below has several tiles per (b, h) pair and a
// partial last one, so the online softmax rescales and the backward recomputes across tiles.
constexpr std::int64_t kTinyTile = 2;

// tiled_attention(q, k, v, mask, bias) with scale 1/sqrt(Dh) and kTinyTile tiles; the inputs
// are q, k, v (4-D, in that order) and, when `with_bias`, a differentiated bias.
GradcheckFn tiled_fn(const Tensor& mask, bool with_bias, std::int64_t block = kTinyTile) {
  return [mask, with_bias, block](const std::vector<Tensor>& t) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(t[0].size(-1)));
    return tiled_attention(t[0], t[1], t[2], mask, with_bias ? t[3] : Tensor(), scale, block);
  };
}

// q: (B,2,Tq,3), k, v: (B,2,Tk,3) from Generator(seed), plus a bias of `bias_shape` if not empty.
NamedInputs attention_inputs(std::int64_t b, std::int64_t t_q, std::int64_t t_k, const Shape& bias_shape,
                             std::uint64_t seed) {
  Generator gen(seed);
  NamedInputs in;
  in.add("q", grad_input({b, 2, t_q, 3}, gen));
  in.add("k", grad_input({b, 2, t_k, 3}, gen));
  in.add("v", grad_input({b, 2, t_k, 3}, gen));
  if (!bias_shape.empty()) in.add("bias", grad_input(bias_shape, gen));
  return in;
}

// A (Tq,Tk) = (3,4) mask whose query row 1 has every key blocked (its output and gradients are 0).
Tensor mask_with_blocked_row() {
  return from_vector<bool>({false, false, true, false, true, true, true, true, false, true, false, false}, {3, 4});
}

// tiled_attention, float64: no mask on transposed views, a padding mask, a causal mask, a causal
// mask with a differentiated ALiBi-shaped bias (H,Tq,Tk) broadcast over the batch, and a query
// row with every key blocked; then float32 against the plain float64 attention_naive.
std::vector<GradcheckCase> check_attention_tiled(const GradcheckOptions& o) {
  const Tensor padding = nn::padding_mask(ids({5, 6, 7, 8, 5, 6, 0, 0}, {2, 4}), 0);  // (2,1,1,4)
  const Tensor causal = nn::causal_mask(5, 5);
  Generator gen(110);
  NamedInputs views;
  views.add("q (transposed view)", grad_input({1, 5, 2, 3}, gen));  // (B,T,H,Dh), seen as (B,H,T,Dh)
  views.add("k (transposed view)", grad_input({1, 4, 2, 3}, gen));
  views.add("v (transposed view)", grad_input({1, 4, 2, 3}, gen));
  const GradcheckFn plain = tiled_fn(Tensor(), false);
  std::vector<GradcheckCase> cases = {
      run_case("no mask, transposed views",
               [plain](const std::vector<Tensor>& t) {
                 return plain({transpose(t[0], 1, 2), transpose(t[1], 1, 2), transpose(t[2], 1, 2)});
               },
               views, o),
      run_case("padding mask", tiled_fn(padding, false), attention_inputs(2, 3, 4, {}, 111), o),
      run_case("causal mask", tiled_fn(causal, false), attention_inputs(1, 5, 5, {}, 112), o),
      run_case("causal mask + bias", tiled_fn(causal, true), attention_inputs(2, 5, 5, {2, 5, 5}, 113), o),
      run_case("a fully masked query row", tiled_fn(mask_with_blocked_row(), false), attention_inputs(1, 3, 4, {}, 114),
               o)};
  return joined(cases, check_attention_tiled_float32(padding, causal));
}

// tiled_attention in float32 (tiles of 2, and one tile of 64) against attention_naive in
// float64: a padding mask, a causal mask with a differentiated bias, a fully masked row.
std::vector<GradcheckCase> check_attention_tiled_float32(const Tensor& padding, const Tensor& causal) {
  const auto naive = [](const Tensor& mask, bool with_bias) -> GradcheckFn {
    return [mask, with_bias](const std::vector<Tensor>& t) {
      const double scale = 1.0 / std::sqrt(static_cast<double>(t[0].size(-1)));
      return attention_naive(t[0], t[1], t[2], mask, with_bias ? t[3] : Tensor(), scale);
    };
  };
  const Tensor blocked_row = mask_with_blocked_row();
  return {check_float32("padding mask", tiled_fn(padding, false), naive(padding, false),
                        attention_inputs(2, 3, 4, {}, 115)),
          check_float32("causal mask + bias", tiled_fn(causal, true), naive(causal, true),
                        attention_inputs(2, 5, 5, {2, 5, 5}, 116)),
          check_float32("causal mask + bias, one tile of 64", tiled_fn(causal, true, 64), naive(causal, true),
                        attention_inputs(2, 5, 5, {2, 5, 5}, 117)),
          check_float32("a fully masked query row", tiled_fn(blocked_row, false), naive(blocked_row, false),
                        attention_inputs(1, 3, 4, {}, 118))};
}

// MultiHeadAttention (D 8, H 4, n_kv_heads k/v heads): causal self-attention and padded
// cross-attention, w.r.t. the inputs and every projection.
std::vector<GradcheckCase> check_heads(std::int64_t n_kv_heads, std::uint64_t seed, const GradcheckOptions& o) {
  Generator init(seed), drop(1), gen(seed + 1);
  nn::MultiHeadAttention m(8, 4, n_kv_heads, 0.0, nn::PositionInAttention::None, init, drop, Dtype::Float64);
  const Tensor causal = nn::causal_mask(3, 3);
  const Tensor pad = nn::padding_mask(padded_source(), 0);  // (2,1,1,4)
  NamedInputs self_in;
  self_in.add("x", grad_input({2, 3, 8}, gen));
  self_in.add_parameters(m);
  NamedInputs cross_in;
  cross_in.add("x", grad_input({2, 3, 8}, gen));
  cross_in.add("memory", grad_input({2, 4, 8}, gen));
  cross_in.add_parameters(m);
  return {run_case("self, causal", [&](const std::vector<Tensor>& t) { return m.forward(t[0], t[0], causal); }, self_in, o),
          run_case("cross, padding", [&](const std::vector<Tensor>& t) { return m.forward(t[0], t[1], pad); }, cross_in, o)};
}

std::vector<GradcheckCase> check_multi_head(const GradcheckOptions& o) { return check_heads(4, 210, o); }
std::vector<GradcheckCase> check_gqa(const GradcheckOptions& o) { return check_heads(2, 214, o); }
std::vector<GradcheckCase> check_mqa(const GradcheckOptions& o) { return check_heads(1, 216, o); }

// Self-attention with positions inside attention: RoPE (rotated q, k) or ALiBi (a score bias).
std::vector<GradcheckCase> check_relative_attention(const GradcheckOptions& o) {
  std::vector<GradcheckCase> cases;
  for (const auto pos : {nn::PositionInAttention::RoPE, nn::PositionInAttention::ALiBi}) {
    Generator init(220), drop(1), gen(221);
    nn::MultiHeadAttention m(8, 2, 1, 0.0, pos, init, drop, Dtype::Float64);
    const Tensor causal = nn::causal_mask(3, 3);
    NamedInputs in;
    in.add("x", grad_input({1, 3, 8}, gen));
    in.add_parameters(m);
    cases.push_back(run_case(pos == nn::PositionInAttention::RoPE ? "rope, mqa" : "alibi, mqa",
                             [&](const std::vector<Tensor>& t) { return m.forward(t[0], t[0], causal, nullptr, 0, true); },
                             in, o));
  }
  return cases;
}

// FeedForward with each activation, dropout on (the same mask every call: the generator is
// reseeded), random biases.
std::vector<GradcheckCase> check_feed_forward(const GradcheckOptions& o) {
  std::vector<GradcheckCase> cases;
  for (const auto act : {nn::Activation::ReLU, nn::Activation::GELU, nn::Activation::SwiGLU}) {
    Generator init(22), drop(23), gen(24);
    nn::FeedForward ff(3, 5, act, 0.25, init, drop, Dtype::Float64);
    randomise_parameters(ff, gen);
    NamedInputs in;
    in.add("x", grad_input({2, 2, 3}, gen));
    in.add_parameters(ff);
    cases.push_back(run_case(
        nn::activation_name(act),
        [&](const std::vector<Tensor>& t) {
          drop.manual_seed(99);
          return ff.forward(t[0]);
        },
        in, o));
  }
  return cases;
}

// LayerNorm: the module (weight and bias), the op without a bias, and the op in float32 (rows of
// 37) against float64.
std::vector<GradcheckCase> check_layer_norm(const GradcheckOptions& o) {
  Generator gen(6);
  nn::LayerNorm ln(5, 1e-5, Dtype::Float64);
  randomise_parameters(ln, gen);
  NamedInputs in, no_bias, f32;
  in.add("x", grad_input({2, 3, 5}, gen));
  in.add_parameters(ln);
  no_bias.add("x", grad_input({3, 5}, gen));
  no_bias.add("weight", grad_input({5}, gen));
  f32.add("x", randn({4, 37}, gen, Dtype::Float64));
  f32.add("weight", randn({37}, gen, Dtype::Float64));
  f32.add("bias", randn({37}, gen, Dtype::Float64));
  return {run_case("", [&](const std::vector<Tensor>& t) { return ln.forward(t[0]); }, in, o),
          run_case("no bias", [](const std::vector<Tensor>& t) { return layer_norm(t[0], t[1], Tensor()); }, no_bias, o),
          check_float32("weight and bias", [](const std::vector<Tensor>& t) { return layer_norm(t[0], t[1], t[2]); }, f32)};
}

// RMSNorm: the module, then the op in float32 against float64.
std::vector<GradcheckCase> check_rms_norm(const GradcheckOptions& o) {
  Generator gen(7);
  nn::RMSNorm rn(5, 1e-6, Dtype::Float64);
  randomise_parameters(rn, gen);
  NamedInputs in, f32;
  in.add("x", grad_input({2, 3, 5}, gen));
  in.add_parameters(rn);
  f32.add("x", randn({4, 37}, gen, Dtype::Float64));
  f32.add("weight", randn({37}, gen, Dtype::Float64));
  return {run_case("", [&](const std::vector<Tensor>& t) { return rn.forward(t[0]); }, in, o),
          check_float32("weight", [](const std::vector<Tensor>& t) { return rms_norm(t[0], t[1]); }, f32)};
}

// Sinusoidal and learned tables added to x (from position 2), and RoPE's rotation of x.
std::vector<GradcheckCase> check_positions(const GradcheckOptions& o) {
  Generator gen(8);
  nn::SinusoidalPositional sinusoidal(10, 4, Dtype::Float64);
  nn::LearnedPositional learned(7, 4, gen, Dtype::Float64);
  NamedInputs sin_in, learned_in, rope_in;
  sin_in.add("x", grad_input({2, 3, 4}, gen));
  learned_in.add("x", grad_input({2, 3, 4}, gen));
  learned_in.add_parameters(learned);
  rope_in.add("x", grad_input({1, 2, 3, 4}, gen));  // (B,H,T,Dh)
  return {run_case("sinusoidal", [&](const std::vector<Tensor>& t) { return sinusoidal.forward(t[0], 2); }, sin_in, o),
          run_case("learned", [&](const std::vector<Tensor>& t) { return learned.forward(t[0], 2); }, learned_in, o),
          run_case("rope", [](const std::vector<Tensor>& t) { return nn::apply_rope(t[0], 2); }, rope_in, o)};
}

std::string norm_variant(nn::NormPosition position, nn::NormKind kind) {
  return std::string(nn::norm_position_name(position)) + "-norm " + nn::norm_name(kind);
}

const std::pair<nn::NormPosition, nn::NormKind> kNormChoices[] = {
    {nn::NormPosition::Pre, nn::NormKind::LayerNorm},
    {nn::NormPosition::Pre, nn::NormKind::RMSNorm},
    {nn::NormPosition::Post, nn::NormKind::LayerNorm},
    {nn::NormPosition::Post, nn::NormKind::RMSNorm}};

// EncoderLayer with a padded source, for pre/post x LayerNorm/RMSNorm.
std::vector<GradcheckCase> check_encoder_layer(const GradcheckOptions& o) {
  std::vector<GradcheckCase> cases;
  std::uint64_t seed = 21;
  for (const auto& [position, kind] : kNormChoices) {
    nn::ModelConfig cfg = layer_config();
    cfg.norm_position = position;
    cfg.norm = kind;
    Generator init(seed), drop(1), gen(seed + 1);
    seed += 2;
    nn::EncoderLayer layer(cfg, init, drop, Dtype::Float64);
    layer.eval();
    const Tensor mask = nn::padding_mask(ids({3, 5, 2, 4, 1, 0}, {2, 3}), 0);  // row 2: one pad
    NamedInputs in;
    in.add("x", grad_input({2, 3, 4}, gen));  // (B,S,D)
    in.add_parameters(layer);
    cases.push_back(run_case(norm_variant(position, kind),
                             [&](const std::vector<Tensor>& t) { return layer.forward(t[0], mask); }, in, o));
  }
  return cases;
}

// DecoderLayer (causal self-attention, cross-attention over a padded memory, feed-forward),
// for pre/post x LayerNorm/RMSNorm.
std::vector<GradcheckCase> check_decoder_layer(const GradcheckOptions& o) {
  std::vector<GradcheckCase> cases;
  std::uint64_t seed = 31;
  for (const auto& [position, kind] : kNormChoices) {
    nn::ModelConfig cfg = layer_config();
    cfg.norm_position = position;
    cfg.norm = kind;
    Generator init(seed), drop(1), gen(seed + 1);
    seed += 2;
    nn::DecoderLayer layer(cfg, init, drop, Dtype::Float64);
    layer.eval();
    const Tensor self_mask = nn::causal_mask(3, 3), memory_mask = nn::padding_mask(padded_source(), 0);
    NamedInputs in;
    in.add("y", grad_input({2, 3, 4}, gen));       // (B,T,D)
    in.add("memory", grad_input({2, 4, 4}, gen));  // (B,S,D)
    in.add_parameters(layer);
    cases.push_back(run_case(
        norm_variant(position, kind),
        [&](const std::vector<Tensor>& t) { return layer.forward(t[0], t[1], self_mask, memory_mask); }, in, o));
  }
  return cases;
}

// logits (B,T,V) vs targets (B,T) -> mean label-smoothed cross-entropy over non-pad targets.
Tensor smoothed_loss(const Tensor& logits, const Tensor& targets, double smoothing) {
  const std::int64_t n = logits.size(0) * logits.size(1);
  return cross_entropy(reshape(logits, {n, logits.size(2)}), reshape(targets, {n}), 0, smoothing);
}

// The whole Seq2SeqTransformer: the label-smoothed loss w.r.t. every parameter, in fast mode
// (4 random directions per parameter tensor: element-wise would take ~3400 forward passes).
std::vector<GradcheckCase> check_model(const GradcheckOptions& tolerances) {
  GradcheckOptions o = tolerances;
  o.fast_mode = true;
  nn::ModelConfig paper = tiny_config();
  paper.norm_position = nn::NormPosition::Post;
  nn::ModelConfig modern = tiny_config();
  modern.n_heads = 4;
  modern.n_kv_heads = 2;
  modern.norm = nn::NormKind::RMSNorm;
  modern.positional = nn::PositionalKind::RoPE;
  modern.activation = nn::Activation::SwiGLU;
  modern.share_embeddings = true;
  modern.tie_output = true;
  const std::pair<const char*, nn::ModelConfig> configs[] = {
      {"post-norm sinusoidal, fast", paper},
      {"pre rmsnorm rope gqa swiglu, fast", modern}};
  const Tensor src = padded_source();
  const Tensor tgt_in = ids({2, 4, 5, 2, 6, 3}, {2, 3});
  const Tensor tgt_out = ids({4, 5, 6, 6, 3, 0}, {2, 3});  // the last target of row 2 is padding
  std::vector<GradcheckCase> cases;
  std::uint64_t seed = 41;
  for (const auto& [variant, cfg] : configs) {
    Generator init(seed++);
    nn::Seq2SeqTransformer model(cfg, init, Dtype::Float64);
    model.eval();
    NamedInputs in;
    in.add_parameters(model);
    cases.push_back(run_case(
        variant, [&](const std::vector<Tensor>&) { return smoothed_loss(model.forward(src, tgt_in), tgt_out, 0.1); },
        in, o));
  }
  return cases;
}

// The decoder-only model (GPT's shape: causal encoder layers, the LM head tied to the embedding):
// the label-smoothed next-token loss w.r.t. every parameter, in fast mode as check_model. Row 2
// of the sequence ends with a pad, and its targets with two (not scored).
std::vector<GradcheckCase> check_decoder_only(const GradcheckOptions& tolerances) {
  GradcheckOptions o = tolerances;
  o.fast_mode = true;
  nn::ModelConfig gpt = tiny_config();
  gpt.arch = nn::Arch::DecoderOnly;
  gpt.src_vocab = 0;  // one vocabulary, tgt_vocab
  gpt.decoder_layers = 2;
  nn::ModelConfig modern = gpt;
  modern.n_heads = 4;
  modern.n_kv_heads = 2;
  modern.norm_position = nn::NormPosition::Post;
  modern.norm = nn::NormKind::RMSNorm;
  modern.positional = nn::PositionalKind::RoPE;
  modern.activation = nn::Activation::SwiGLU;
  const std::pair<const char*, nn::ModelConfig> configs[] = {
      {"pre layernorm sinusoidal, fast", gpt},
      {"post rmsnorm rope gqa swiglu, fast", modern}};
  const Tensor tokens = ids({2, 4, 5, 6, 3, 5, 1, 0}, {2, 4});   // (B,T)
  const Tensor targets = ids({4, 5, 6, 3, 5, 1, 0, 0}, {2, 4});  // tokens shifted left
  std::vector<GradcheckCase> cases;
  std::uint64_t seed = 45;
  for (const auto& [variant, cfg] : configs) {
    Generator init(seed++);
    nn::DecoderOnlyTransformer model(cfg, init, Dtype::Float64);
    model.eval();
    NamedInputs in;
    in.add_parameters(model);
    cases.push_back(run_case(
        variant, [&](const std::vector<Tensor>&) { return smoothed_loss(model.lm_logits(tokens), targets, 0.1); },
        in, o));
  }
  return cases;
}

// CrossEntropy in float32 (fast_exp, rows of 300 classes: one 256-class block summed in float
// lanes and a partial one) against float64, plain and smoothed, one row ignored.
std::vector<GradcheckCase> check_cross_entropy_float32() {
  Generator gen(22);
  const Tensor targets = ids({7, -100, 299, 0}, {4});
  NamedInputs in;
  in.add("logits", mul(randn({4, 300}, gen, Dtype::Float64), 3.0));  // (N,V), spread like trained logits
  std::vector<GradcheckCase> cases;
  for (const double smoothing : {0.0, 0.2})
    cases.push_back(check_float32(smoothing == 0 ? "V 300" : "V 300, smoothing 0.2",
                                  [&targets, smoothing](const std::vector<Tensor>& t) {
                                    return cross_entropy(t[0], targets, -100, smoothing);
                                  },
                                  in));
  return cases;
}

// CrossEntropy: mean -log softmax(logits)[target] over the rows whose target is not -100, plain
// and with label smoothing 0.2, on contiguous, transposed and narrowed logits (N 4, V 5).
std::vector<GradcheckCase> check_cross_entropy(const GradcheckOptions& o) {
  const Tensor targets = ids({1, -100, 4, 0}, {4});  // row 2 is ignored
  std::vector<GradcheckCase> cases;
  for (const double smoothing : {0.0, 0.2}) {
    const std::string s = smoothing == 0 ? "" : ", smoothing 0.2";
    const struct {
      const char* layout;
      const char* input;
      Shape shape;                   // of the input; the logits are (4,5): view(input)
      Tensor (*view)(const Tensor&);
    } layouts[] = {{"contiguous", "logits", {4, 5}, [](const Tensor& x) { return x; }},
                   {"transposed", "logits (transposed view)", {5, 4}, [](const Tensor& x) { return transpose(x, 0, 1); }},
                   {"narrowed", "logits (narrowed view)", {4, 8}, [](const Tensor& x) { return narrow(x, 1, 2, 5); }}};
    for (const auto& l : layouts) {
      Generator gen(21);
      NamedInputs in;
      in.add(l.input, grad_input(l.shape, gen));
      const auto view = l.view;
      cases.push_back(run_case(
          l.layout + s,
          [&, view, smoothing](const std::vector<Tensor>& t) { return cross_entropy(view(t[0]), targets, -100, smoothing); },
          in, o));
    }
  }
  return joined(cases, check_cross_entropy_float32());
}

// The encoder-only model (BERT's shape): its training loss w.r.t. every parameter, in fast mode
// (element-wise would take ~1400 forward passes per variant). The masked-LM head (cross-entropy
// at three predicted positions, the rest target 0: not scored) and the classifier on the mean-
// and the cls-pooled sentence vector (C 3, one label per row); padded_source() pads row 2.
std::vector<GradcheckCase> check_encoder_only(const GradcheckOptions& tolerances) {
  GradcheckOptions o = tolerances;
  o.fast_mode = true;
  nn::ModelConfig mlm = tiny_config();
  mlm.arch = nn::Arch::EncoderOnly;
  nn::ModelConfig mean = mlm;
  mean.num_classes = 3;
  mean.norm_position = nn::NormPosition::Post;
  mean.norm = nn::NormKind::RMSNorm;
  mean.positional = nn::PositionalKind::RoPE;
  mean.n_heads = 4;
  mean.n_kv_heads = 2;
  nn::ModelConfig cls = mlm;
  cls.num_classes = 3;
  cls.pooling = nn::Pooling::Cls;
  cls.positional = nn::PositionalKind::Learned;
  const std::pair<const char*, nn::ModelConfig> configs[] = {
      {"masked-LM pre-norm layernorm sinusoidal, fast", mlm},
      {"classifier mean pooling post rmsnorm rope gqa, fast", mean},
      {"classifier cls pooling learned positions, fast", cls}};
  const Tensor src = padded_source();                             // (2,4)
  const Tensor mlm_targets = ids({0, 4, 0, 1, 6, 0, 0, 0}, {8});  // (B*S), 0 = not predicted
  const Tensor labels = ids({2, 0}, {2});                         // (B)
  std::vector<GradcheckCase> cases;
  std::uint64_t seed = 61;
  for (const auto& [variant, cfg] : configs) {
    Generator init(seed++);
    nn::EncoderOnlyTransformer model(cfg, init, Dtype::Float64);
    model.eval();
    NamedInputs in;
    in.add_parameters(model);
    cases.push_back(run_case(
        variant,
        [&](const std::vector<Tensor>&) {
          const Tensor logits = model.forward(src, Tensor());  // (B,S,V) or (B,C)
          if (model.classifier) return cross_entropy(logits, labels);
          return cross_entropy(reshape(logits, {8, logits.size(2)}), mlm_targets, 0);
        },
        in, o));
  }
  return cases;
}

// cross_entropy with label smoothing 0.1 and an ignored (padding) target.
std::vector<GradcheckCase> check_label_smoothed_loss(const GradcheckOptions& o) {
  Generator gen(21);
  const Tensor targets = ids({1, 0, 4, 2}, {4});  // row 2 is padding (ignore_index 0)
  NamedInputs in;
  in.add("logits", grad_input({4, 5}, gen));  // (N,V)
  return {run_case("smoothing 0.1",
                   [&](const std::vector<Tensor>& t) { return cross_entropy(t[0], targets, 0, 0.1); }, in, o)};
}

// The LSTM cell's two fused ops on random pre-activations: c = σ(f) c_prev + σ(i) tanh(g) and
// h = σ(o) tanh(c), the gates a time step of a (B,T,4H) tensor (a strided view), then one step of
// both chained as a layer does.
std::vector<GradcheckCase> check_lstm_cell(const GradcheckOptions& o) {
  Generator gen(31);
  NamedInputs state, output, step;
  state.add("gates (one step of (B,T,4H))", grad_input({3, 2, 16}, gen));
  state.add("c_prev", grad_input({3, 4}, gen));
  output.add("gates", grad_input({3, 16}, gen));
  output.add("c", grad_input({3, 4}, gen));
  step.add("gates", grad_input({3, 16}, gen));
  step.add("c_prev", grad_input({3, 4}, gen));
  const auto at_step = [](const Tensor& t) { return squeeze(narrow(t, 1, 1, 1), 1); };
  return {run_case("lstm_cell_state", [&](const std::vector<Tensor>& t) { return lstm_cell_state(at_step(t[0]), t[1]); },
                   state, o),
          run_case("lstm_cell_output", [](const std::vector<Tensor>& t) { return lstm_cell_output(t[0], t[1]); }, output, o),
          run_case("one step: h of c", [](const std::vector<Tensor>& t) {
            return lstm_cell_output(t[0], lstm_cell_state(t[0], t[1]));
          }, step, o)};
}

// Bahdanau's additive attention in a small recurrent encoder-decoder: the loss w.r.t. the score's
// weights (query_proj, key_proj, score_v) and every other parameter, a padded source row included.
std::vector<GradcheckCase> check_additive_attention(const GradcheckOptions& o) {
  Generator gen(32);
  nn::ModelConfig cfg;
  cfg.arch = nn::Arch::Rnn;
  cfg.rnn_attention = nn::RnnAttention::Additive;
  cfg.src_vocab = 9, cfg.tgt_vocab = 7, cfg.d_model = 4, cfg.n_heads = 1, cfg.d_ff = 4;
  cfg.encoder_layers = 1, cfg.decoder_layers = 1, cfg.dropout = 0.0, cfg.pad_id = 0, cfg.bos_id = 2;
  auto model = std::make_shared<nn::RnnSeq2Seq>(cfg, gen, Dtype::Float64);
  const Tensor src = from_vector<std::int64_t>({5, 7, 3, 6, 8, 0}, {2, 3}), tgt_in = from_vector<std::int64_t>({2, 5, 2, 4}, {2, 2});
  const Tensor w = randn({2, 2, 7}, gen, Dtype::Float64);
  NamedInputs in;
  in.add_parameters(*model);
  return {run_case("rnn_attention additive", [model, src, tgt_in, w](const std::vector<Tensor>&) {
    return sum(mul(model->forward(src, tgt_in), w));
  }, in, o)};
}

std::vector<GradcheckEntry> make_suite() {
  return {
      {"matmul", "ops",
       "a @ b: 2-D, batched, broadcast, batched @ 2-D (K == N too), 2-D @ batched, views; float32 vs float64",
       [](const GradcheckOptions& o) { return joined(check_matmul(o), check_matmul_float32()); }},
      {"softmax", "ops", "softmax along each dim of a strided view; the float32 fast path (fast_exp) vs float64",
       check_softmax},
      {"log_softmax", "ops", "log_softmax along each dim of a strided view; the float32 fast path vs float64",
       check_log_softmax},
      {"relu", "ops", "Relu max(0, x) on a transposed view", check_relu},
      {"lstm_cell", "ops", "the LSTM cell's fused ops, new state c and output h, on a strided time step, and chained",
       check_lstm_cell},
      {"masked_fill", "ops", "masked_fill on its own (finite fill): no gradient through a filled cell", check_masked_fill},
      {"where", "ops", "where(cond, a, b): each gradient only where its side was picked, broadcast shapes",
       check_where},
      {"index_select", "ops", "index_select along dim 0 and a middle dim: repeated indices add up", check_index_select},
      {"dropout", "ops", "dropout with p 0.5, 0.1 and 0 (a fixed mask): dropped cells get no gradient", check_dropout},
      {"elementwise", "ops", "add, sub, mul, div with broadcasting, and their scalar forms", check_elementwise},
      {"unary", "ops", "neg, exp, log, sqrt, pow, tanh, gelu, sigmoid", check_unary},
      {"reduce", "ops", "sum, mean, max over all elements and over dims", check_reduce},
      {"shape", "ops", "reshape, permute, narrow, expand, squeeze, contiguous, cat, stack", check_shape},
      {"embedding", "embeddings",
       "Embedding E[ids]: repeated ids accumulate; padding_idx: the padding row gets exactly no gradient",
       check_embedding},
      {"linear", "linear", "Linear y = x W^T + b: 3-D and 2-D x, with and without bias; float32 vs float64",
       check_linear},
      {"attention_no_mask", "attention", "scaled dot-product attention softmax(q k^T / sqrt(Dh)) v, no mask, on transposed views",
       check_attention_no_mask},
      {"attention_padding_mask", "attention", "scaled dot-product attention with a padding mask (padded keys get weight 0)",
       check_attention_padding_mask},
      {"attention_causal_mask", "attention", "scaled dot-product attention with a causal mask (no query sees the future)",
       check_attention_causal_mask},
      {"attention_alibi", "attention", "scaled dot-product attention with an ALiBi distance bias and a causal mask",
       check_attention_alibi},
      {"attention_tiled", "attention",
       "tiled (FlashAttention) attention, tiles of 2: no mask, padding, causal, bias, a fully masked row; float32",
       check_attention_tiled},
      {"multi_head", "attention", "MultiHeadAttention, 4 query and 4 k/v heads: causal self- and padded cross-attention",
       check_multi_head},
      {"gqa", "attention", "grouped-query attention: 4 query heads share 2 k/v heads", check_gqa},
      {"mqa", "attention", "multi-query attention: 4 query heads share 1 k/v head", check_mqa},
      {"relative_attention", "attention", "self-attention with RoPE-rotated q, k and with an ALiBi bias",
       check_relative_attention},
      {"positions", "positions", "sinusoidal and learned position tables added to x, and RoPE's rotation", check_positions},
      {"feed_forward", "feed-forward", "position-wise feed-forward block with ReLU, GELU and SwiGLU (dropout on)",
       check_feed_forward},
      {"layer_norm", "norms", "LayerNorm (x - mean) / sqrt(var + eps) * weight + bias, no bias; float32 vs float64",
       check_layer_norm},
      {"rms_norm", "norms", "RMSNorm x / sqrt(mean(x^2) + eps) * weight; float32 vs float64", check_rms_norm},
      {"encoder_layer", "layers", "encoder layer (self-attention + FFN, residuals), pre/post x LayerNorm/RMSNorm",
       check_encoder_layer},
      {"decoder_layer", "layers",
       "decoder layer (causal self-attention, cross-attention, FFN), pre/post x LayerNorm/RMSNorm", check_decoder_layer},
      {"model", "model", "the whole Seq2SeqTransformer's loss w.r.t. every parameter (fast mode: random directions)",
       check_model},
      {"decoder_only", "model", "the whole DecoderOnlyTransformer's next-token loss w.r.t. every parameter (fast mode)",
       check_decoder_only},
      {"additive_attention", "model",
       "a recurrent encoder-decoder with Bahdanau's additive attention: the loss w.r.t. every parameter, a padded source",
       check_additive_attention},
      {"cross_entropy", "loss",
       "cross-entropy, plain and smoothed, strided logits, one row ignored; float32 (fast_exp) vs float64",
       check_cross_entropy},
      {"encoder_only", "model",
       "the encoder-only model's loss w.r.t. every parameter: masked-LM head, mean and cls pooling (fast mode)",
       check_encoder_only},
      {"label_smoothed_loss", "loss", "cross-entropy with label smoothing 0.1 and an ignored padding target",
       check_label_smoothed_loss},
  };
}

// A number in the table: 1.2e-11, 0 exactly, or "-" for none (a run that threw).
std::string sci(double v) {
  if (std::isnan(v)) return "-";
  if (v == 0) return "0";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1e", v);
  return buf;
}

// `s` padded with spaces to `width` terminal columns, and at least one space after it.
std::string pad_right(const std::string& s, std::size_t width) {
  return display_width(s) >= width ? s + " " : pad_to_width(s, width);
}

// Columns padded to the widest cell (header included, measured in terminal columns: a Chinese
// heading is twice as wide as its characters), two spaces apart.
std::string format_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], display_width(r[c]));
    }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t c = 0; c < r.size(); ++c) line += c + 1 == r.size() ? r[c] : pad_right(r[c], width[c] + 1) + " ";
    out += line + "\n";
  }
  return out;
}

// Above the table: how the numbers are made and when a row passes.
void print_pass_rule(std::ostream& out, const GradcheckOptions& tolerances, Lang lang) {
  if (lang == Lang::Zh) {
    out << "float64 梯度检查：用中心有限差分（eps " << tolerances.eps << "）对照 autograd 的反向传播。\n"
        << "一个输入通过的条件：每个元素都满足 |analytic - numeric| <= " << tolerances.atol << " + " << tolerances.rtol
        << " * |numeric|。\n"
        << "最大相对误差要除以 |numeric|，所以真实梯度为 0 的地方它约为 1：例如 k_proj.bias，它给一行的每个分数都\n"
        << "加上 q.b，而 softmax 不受整行加上同一个常数的影响。\n"
        << "标有 \"float32 vs float64\" 的运行改为在相同输入上比较 float32 快速路径与它的 float64 参考实现（输出和\n"
        << "梯度）：通过的条件是 |float32 - float64| <= " << kFloat32Atol << " + " << kFloat32Rtol << " * |float64|。\n\n";
    return;
  }
  out << "float64 gradient checks: central finite differences (eps " << tolerances.eps
      << ") against autograd's backward.\nAn input passes if |analytic - numeric| <= " << tolerances.atol << " + "
      << tolerances.rtol << " * |numeric| at every element.\n"
      << "max rel error divides by |numeric|, so it is ~1 where the true gradient is 0: e.g. k_proj.bias, which adds\n"
      << "q.b to every score of a row, and softmax ignores a constant added to a whole row.\n"
      << "Rows of a \"float32 vs float64\" run compare a float32 fast path with its float64 reference on the same\n"
      << "inputs instead (output and gradients): pass if |float32 - float64| <= " << kFloat32Atol << " + "
      << kFloat32Rtol << " * |float64|.\n\n";
}

}  // namespace

const std::vector<GradcheckEntry>& gradcheck_suite() {
  static const std::vector<GradcheckEntry> suite = [] {
    std::vector<GradcheckEntry> all = make_suite();
    for (GradcheckEntry& e : exercise_gradcheck_entries()) all.push_back(std::move(e));
    return all;
  }();
  return suite;
}

const GradcheckEntry* find_gradcheck(const std::string& name) {
  for (const GradcheckEntry& e : gradcheck_suite())
    if (e.name == name) return &e;
  return nullptr;
}

std::string gradcheck_names() {
  std::string out;
  for (const GradcheckEntry& e : gradcheck_suite()) out += (out.empty() ? "" : ", ") + e.name;
  return out;
}

std::vector<GradcheckRow> gradcheck_rows(const GradcheckEntry& entry, const std::vector<GradcheckCase>& cases) {
  std::vector<GradcheckRow> rows;
  for (const GradcheckCase& c : cases) {
    SF_CHECK(c.result.inputs.size() == c.input_names.size(), "gradcheck ", entry.name, ": ", c.input_names.size(),
             " input names but ", c.result.inputs.size(), " checked inputs");
    for (std::size_t i = 0; i < c.input_names.size(); ++i) {
      const GradcheckInputReport& r = c.result.inputs[i];
      GradcheckRow row;
      row.module = c.variant.empty() ? entry.name : entry.name + " (" + c.variant + ")";
      row.input = c.input_names[i];
      row.shape = i < c.input_shapes.size() ? c.input_shapes[i] : Shape{};
      row.max_abs_error = r.max_abs_error;
      row.max_rel_error = r.max_rel_error;
      row.ok = r.ok;
      rows.push_back(row);
    }
  }
  return rows;
}

bool run_gradcheck_table(const std::vector<const GradcheckEntry*>& entries, std::ostream& out,
                         const GradcheckOptions& tolerances, Lang lang) {
  std::vector<std::vector<std::string>> table = {
      {text(lang, "module", "模块"), text(lang, "parameter or input", "参数或输入"), text(lang, "shape", "形状"),
       text(lang, "max abs error", "最大绝对误差"), text(lang, "max rel error", "最大相对误差"), text(lang, "result", "结果")}};
  const std::string pass = text(lang, "pass", "通过"), fail = text(lang, "FAIL", "失败");
  std::size_t runs = 0, failed = 0;
  std::vector<std::string> messages;
  for (const GradcheckEntry* e : entries) {
    std::vector<GradcheckCase> cases;
    try {
      cases = e->run(tolerances);
    } catch (const std::exception& ex) {  // e.g. exercise mode: "exercise: implement Softmax::backward ..."
      ++runs, ++failed;
      table.push_back({e->name, "-", "-", "-", "-", fail});
      messages.push_back(e->name + ": " + ex.what());
      continue;
    }
    runs += cases.size();
    for (const GradcheckRow& row : gradcheck_rows(*e, cases)) {
      if (!row.ok) ++failed;
      table.push_back({row.module, row.input, shape_str(row.shape), sci(row.max_abs_error), sci(row.max_rel_error),
                       row.ok ? pass : fail});
    }
    for (const GradcheckCase& c : cases)
      if (!c.result.ok)
        messages.push_back(e->name + (c.variant.empty() ? "" : " (" + c.variant + ")") + ": " + c.result.message);
  }
  print_pass_rule(out, tolerances, lang);
  out << format_table(table) << "\n";
  if (lang == Lang::Zh)
    out << entries.size() << " 项检查，" << runs << " 次运行，" << table.size() - 1 << " 个输入：";
  else
    out << entries.size() << " checks, " << runs << " runs, " << table.size() - 1 << " inputs: ";
  if (failed == 0) {
    out << text(lang, "all passed", "全部通过") << "\n";
    return true;
  }
  out << failed << text(lang, " FAILED", " 个失败") << "\n";
  for (const std::string& m : messages) out << m << (m.empty() || m.back() != '\n' ? "\n" : "");
  return false;
}

std::string format_gradcheck_list(const std::vector<GradcheckEntry>& entries) {
  std::size_t name_w = 0, topic_w = 0;
  for (const GradcheckEntry& e : entries) {
    name_w = std::max(name_w, e.name.size());
    topic_w = std::max(topic_w, e.topic.size());
  }
  std::ostringstream os;
  for (const GradcheckEntry& e : entries)
    os << pad_right(e.name, name_w + 1) << " " << pad_right(e.topic, topic_w + 1) << " " << e.description << "\n";
  return os.str();
}

}  // namespace sf::train
