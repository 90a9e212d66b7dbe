// The gradient-check suite behind `scratchformer gradcheck`: every op and module of the course,
// checked in float64 against finite differences (sf::gradcheck, autograd/gradcheck.h), and every
// float32 fast path against its float64 reference, with a table a student can read.
//
// Each entry of the registry is one topic of the lecture ("embedding", "attention_causal_mask",
// "gqa", "decoder_layer", "model", ...); the entries named like the exercises of exercise mode
// (matmul, linear, softmax, layer_norm, embedding, cross_entropy, relu: the same words as their
// ctest labels) check that op's backward. Its function builds small float64 inputs and modules
// from fixed seeds, runs sf::gradcheck on them (one or more times: a "variant" per run, e.g.
// the four pre/post x LayerNorm/RMSNorm combinations of a layer) and returns what it found.
// Element-wise checking everywhere except the whole model, which uses gradcheck's fast mode
// (random directions) to stay quick.
//
// The suite is the one list of these checks: tests/test_gradcheck_suite.cpp runs each entry as a
// test case with the entry's ctest labels, and the op and layer tests do not repeat them.
//
//   for (const GradcheckEntry& e : gradcheck_suite()) {
//     std::vector<GradcheckCase> cases = e.run(GradcheckOptions{});
//     ...  // cases[i].result.ok, cases[i].result.inputs[j].max_abs_error
//   }
//
// What is covered: every branch of autograd/ops_*.cpp with backward code of its own gets a float64
// run, and every float32 fast path a "float32 vs float64" run (float32_vs_float64 below):
//   matmul        2-D, batched (small_gemm slices), broadcast batch dims, 2-D @ batched, batched @ 2-D
//                 (the folded gemm and the one-gemm grad_b; K == N too, where a transposed grad_b
//                 keeps its shape), batched @ 2-D on a view that does not fold, 4-D @ 2-D,
//                 transposed and copied layouts; float32: 2-D, small_gemm, broadcast, folded,
//                 a BLAS gemm per slice
//   linear        3-D and 2-D x, with and without bias; float32
//   softmax, log_softmax  each dim of a strided view (float64 general kernel); float32: the
//                 vectorised last-dim rows (fast_exp), rows with -inf entries, the general kernel
//   cross_entropy plain, smoothed, strided logits, an ignored row; float32 (fast_exp, a row of
//                 300 classes: a 256-class block and a partial one), plain and smoothed
//   layer_norm, rms_norm  the modules, layer_norm without bias; float32
//   embedding     repeated ids, padding_idx among the ids (its row gets exactly 0), no padding_idx
//   masked_fill   on its own, a finite fill value: broadcast mask, strided x, float mask
//   where, index_select, dropout (p 0.5, 0.1, 0), elementwise (broadcast, scalar forms), unary
//                 (neg exp log sqrt pow tanh gelu sigmoid), reduce (sum mean max), shape (reshape
//                 permute narrow expand squeeze contiguous cat stack), relu
//   attention_tiled  tiled_attention in tiles of 2: no mask, padding, causal, causal + bias
//                 (dbias), a fully masked row; float32 against attention_naive, tiles of 2 and 64
//   scaled_dot_product_attention, multi-head/GQA/MQA, RoPE/ALiBi, positions, feed-forward,
//   layers and the three models as before.
//
// Run the checks from the command line with `scratchformer gradcheck [--module NAME]`.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "train/classroom/lang.h"

namespace sf::train {

// One gradcheck run inside an entry.
struct GradcheckCase {
  std::string variant;                   // e.g. "pre-norm layernorm"; empty when the entry has one run
  std::vector<std::string> input_names;  // one per input that requires grad, in order ("x",
                                         // "self_attn.q_proj.weight", ...)
  std::vector<Shape> input_shapes;       // the same inputs' shapes
  GradcheckResult result;                // gradcheck's report: result.inputs[i] belongs to input_names[i]
};

// One named check of the suite.
struct GradcheckEntry {
  std::string name;         // what --module takes, e.g. "attention_causal_mask"
  std::string topic;        // the lecture topic it belongs to, e.g. "attention"; --module takes it too
  std::string description;  // one line, shown by --list
  // Builds the inputs (fixed seeds) and runs the check(s). `tolerances` supplies eps, atol and
  // rtol (the defaults are torch's); the entry itself decides fast_mode.
  std::function<std::vector<GradcheckCase>(const GradcheckOptions& tolerances)> run;
};

// The float32-vs-float64 check behind the suite's "float32 vs float64" runs: `fast` runs on
// float32 copies of `inputs` (float64 values, rounded to float32 once) and `reference` on exactly
// those values in float64; both run backward from sum(v * y) for the same random v (seed), and
// the output and each input's gradient are compared element by element. The case's rows are
// "output" and "grad <name>"; result.inputs[i].numeric_at_worst is the float64 value,
// analytic_at_worst the float32 one. A run that throws is a failed case with the message.
GradcheckCase float32_vs_float64(const std::string& variant, const GradcheckFn& fast, const GradcheckFn& reference,
                                 const std::vector<std::string>& names, const std::vector<Tensor>& inputs,
                                 std::uint64_t seed = 77);

// The masked_fill entry's runs, for a function with masked_fill's signature (x, mask, value)
// (the entry passes sf::masked_fill; a test passes a deliberately wrong one).
using MaskedFillFn = std::function<Tensor(const Tensor& x, const Tensor& mask, double value)>;
std::vector<GradcheckCase> masked_fill_cases(const MaskedFillFn& masked_fill, const GradcheckOptions& tolerances);

// The entries named after the exercises that gradcheck_suite.cpp does not already have
// (exercise_checks.cpp); make_suite() appends them.
std::vector<GradcheckEntry> exercise_gradcheck_entries();

// Every entry, in the order of the course.
const std::vector<GradcheckEntry>& gradcheck_suite();
// The entry called `name`, or nullptr.
const GradcheckEntry* find_gradcheck(const std::string& name);
// "embedding, attention_no_mask, ...": the valid names, for error messages.
std::string gradcheck_names();

// One row of the table: one input of one run.
struct GradcheckRow {
  std::string module;  // entry name, plus " (variant)" when there is one
  std::string input;   // parameter or input name
  Shape shape;
  double max_abs_error = 0;
  double max_rel_error = 0;
  bool ok = true;
};

// The rows of one entry's cases, in order.
std::vector<GradcheckRow> gradcheck_rows(const GradcheckEntry& entry, const std::vector<GradcheckCase>& cases);

// Runs `entries` in order, then prints the table to `out`: the pass rule, one row per input
// (module, parameter or input, shape, max abs error, max rel error, pass/FAIL), a summary line
// and, for each failed run, gradcheck's message saying at which element numeric and analytic
// differ. Returns true if every check passed. `lang`: the rule, the headings, pass/FAIL and the
// summary line in English or Chinese (the names of modules and inputs are the code's).
bool run_gradcheck_table(const std::vector<const GradcheckEntry*>& entries, std::ostream& out,
                         const GradcheckOptions& tolerances = {}, Lang lang = Lang::En);

// --list: "name  topic  description", one line per entry, aligned.
std::string format_gradcheck_list(const std::vector<GradcheckEntry>& entries);

}  // namespace sf::train
